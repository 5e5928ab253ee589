-- Every example runs, on its own (a local DHT in its process) and, for the
-- peer-to-peer ones, as separate processes over `ludx dht testnet`.
local process = require "ludx.process"
local H = require "helper"
local run = H.run

local function example(name, args, timeout)
  local a = { H.root .. "/examples/" .. name }
  for _, x in ipairs(args or {}) do a[#a + 1] = x end
  local out, err, status = H.ludx(a, { timeout = timeout or 60000 })
  assert(status == 0, name .. " exited with " .. tostring(status) .. ":\n" .. out .. err)
  return out, err
end

local function spawn(args)
  return assert(process.spawn(H.ludx_bin, args))
end

local function testnet()
  local p = spawn({ "dht", "testnet" })
  return p, assert(p:read_line(20000))
end

local function stop(p)
  p:kill("SIGINT")
  p:wait(10000)
  p:close()
end

describe("examples", function()
  it("echo: a server and a client", run(function()
    local out = example("echo.lua")
    assert.matches("echo: hello\necho: ludx\n", out, 1, true)
  end, 60000))

  it("echo: as two processes", run(function()
    local tn, bs = testnet()
    local server = spawn({ H.root .. "/examples/echo.lua", "--bootstrap", bs, "server" })
    local key = assert(server:read_line(20000))
    local out = example("echo.lua", { "--bootstrap", bs, "client", key, "one", "two" })
    assert.are.equal("echo: one\necho: two\n", out)
    stop(server)
    stop(tn)
  end, 60000))

  it("chat: two peers", run(function()
    local out = example("chat.lua")
    assert.matches("alice hears: hello alice", out, 1, true)
    assert.matches("bob hears: hello bob", out, 1, true)
  end, 60000))

  it("chat: two processes in one room, through stdin and stdout", run(function()
    local tn, bs = testnet()
    local alice = spawn({ H.root .. "/examples/chat.lua", "--bootstrap", bs, "spec room" })
    local a_line = assert(alice:read_line(20000))
    local a_key = assert(a_line:match("^joined spec room as (%x+)$"), a_line)
    local bob = spawn({ H.root .. "/examples/chat.lua", "--bootstrap", bs, "spec room" })
    local b_line = assert(bob:read_line(20000))
    local b_key = assert(b_line:match("^joined spec room as (%x+)$"), b_line)
    assert(alice:expect(b_key .. " joined", 30000, true))
    assert(bob:expect(a_key .. " joined", 30000, true))
    bob:write("hi alice\n")
    assert(alice:expect(b_key .. ": hi alice", 20000, true))
    alice:write("hi bob\n")
    assert(bob:expect(a_key .. ": hi bob", 20000, true))
    bob:close_stdin() -- bob leaves at the end of his input
    assert(alice:expect(b_key .. " left", 20000, true))
    assert.are.equal(0, bob:wait(20000))
    alice:kill("SIGTERM") -- alice leaves on a signal: closes, exits 0
    local status, sig = alice:wait(20000)
    assert.are.same({ 0, 0 }, { status, sig or 0 })
    assert(alice:stderr():find("chat: SIGTERM, leaving", 1, true), alice:stderr())
    bob:close()
    alice:close()
    stop(tn)
  end, 90000))
  it("tunnel: a TCP service through a DHT connection", run(function()
    local out = example("tunnel.lua")
    assert.matches("reply: ping through the tunnel", out, 1, true)
  end, 60000))

  it("tunnel: server and client processes in front of a TCP service here", run(function()
    local ludx = require "ludx"
    local tcp = require "ludx.tcp"
    local service = assert(tcp.listen("127.0.0.1", 0))
    local _, service_port = service:address()
    ludx.spawn("upper-case service", function()
      while true do
        local c = service:accept()
        if not c then break end
        ludx.spawn("service conn", function()
          while true do
            local d = c:read()
            if not d then break end
            c:write(d:upper())
          end
          c:finish()
          c:close()
        end)
      end
    end)
    local tn, bs = testnet()
    local server = spawn({ H.root .. "/examples/tunnel.lua", "--bootstrap", bs, "server", "127.0.0.1:" .. service_port })
    local key = assert(server:read_line(20000))
    local client = spawn({ H.root .. "/examples/tunnel.lua", "--bootstrap", bs, "client", key })
    local addr = assert(client:read_line(20000))
    local port = tonumber(addr:match(":(%d+)$"))
    for i = 1, 2 do -- two TCP connections, each its own DHT connection
      local c = assert(tcp.connect("127.0.0.1", port, 10000))
      c:write("through the tunnel " .. i)
      local got = ""
      while #got < 20 do got = got .. assert(c:read(nil, 10000)) end
      assert.are.equal("THROUGH THE TUNNEL " .. i, got)
      c:close()
    end
    stop(client)
    stop(server)
    stop(tn)
    service:close()
  end, 60000))

  it("share: serve a folder and fetch it back, checked", run(function()
    local out = example("share.lua")
    assert.matches("verified echo.lua", out, 1, true)
    assert.matches("fetched %d+ files", out)
  end, 60000))

  it("demo: 64 MB by public key with a progress bar, rate and stats", run(function()
    local out = example("demo.lua", {}, 120000)
    assert.matches("receiving done: 64.0 MB", out, 1, true)
    assert.matches("64.0 MB in [%d.]+ s: [%d.]+ MB/s", out)
    assert.matches("stream stats:", out, 1, true)
    -- both ends' figures, the sender's taken after its END was acked
    local sent = tonumber(out:match("sender:%s+(%d+) packets"))
    local received = tonumber(out:match("receiver:%s+(%d+) packets"))
    assert.is_true(sent >= 44000 and received >= 44000, out)
    assert.is_true(tonumber(out:match("mtu (%d+)")) >= 1280, out)
  end, 120000))
end)
