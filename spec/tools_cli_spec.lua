-- The peer commands as a user runs them: separate processes over a local
-- DHT (`ludx dht testnet`), exit statuses, output, an interrupted fetch.
local process = require "ludx.process"
local fs = require "ludx.fs"
local H = require "helper"
local run = H.run

local tmpdir = H.tmpdir

local write, read = H.write_file, H.read_file

local function spawn(args)
  return assert(process.spawn(H.ludx_bin, args))
end

-- Starts `ludx dht testnet`; returns the process and its address.
local function testnet()
  local p = spawn({ "dht", "testnet" })
  local addr = assert(p:read_line(20000))
  assert.matches("^127%.0%.0%.1:%d+$", addr)
  return p, addr
end

-- Starts `ludx share`; returns the process and the key line.
local function start_share(bs, args)
  local a = { "share", "--bootstrap", bs }
  for _, x in ipairs(args) do a[#a + 1] = x end
  local p = spawn(a)
  local key, msg = p:read_line(30000)
  assert(key, "no key from ludx share: " .. tostring(msg) .. " " .. p:stderr())
  assert.matches("^" .. string.rep("%x", 64) .. "$", key)
  return p, key
end

local function stop(p)
  p:kill("SIGINT")
  local status = p:wait(10000)
  p:close()
  return status
end

local dirs = {}

describe("ludx peer commands", function()
  teardown(function()
    for _, d in ipairs(dirs) do os.execute("rm -rf '" .. d .. "'") end
  end)

  it("print --help and refuse bad arguments", run(function()
    for _, cmd in ipairs({ { "share" }, { "fetch" }, { "keygen" }, { "dht" } }) do
      local out, _, status = H.ludx({ cmd[1], "--help" })
      assert.are.equal(0, status)
      assert.matches("^usage: ludx " .. cmd[1], out)
    end
    local _, err, status = H.ludx({ "fetch", "not-a-key" })
    assert.are.equal(1, status)
    assert.matches("bad KEY", err)
    _, err, status = H.ludx({ "share", "--frobnicate", "x" })
    assert.are.equal(1, status)
    assert.matches("unknown option", err)
    _, _, status = H.ludx({ "share", "/nonexistent/path" })
    assert.are.equal(1, status)
    _, _, status = H.ludx({ "fetch", "--order", "random", string.rep("a", 64) })
    assert.are.equal(1, status)
    _, _, status = H.ludx({ "dht", "testnet", "1" })
    assert.are.equal(1, status)
    local out = H.ludx({ "--help" })
    assert.matches("share", out)
  end, 60000))

  it("keygen makes key pairs and key files", run(function()
    local out, _, status = H.ludx({ "keygen" })
    assert.are.equal(0, status)
    local pub, sec = out:match("^public (%x+)\nsecret (%x+)\n$")
    assert.are.equal(64, #pub)
    assert.are.equal(64, #sec)
    local crypto = require "ludx.crypto"
    assert.are.equal(pub, crypto.hex(crypto.keypair(crypto.unhex(sec)).public_key))
    local d = tmpdir()
    dirs[#dirs + 1] = d
    out, _, status = H.ludx({ "keygen", "-o", d .. "/key" })
    assert.are.equal(0, status)
    local seed = read(d .. "/key"):match("^(%x+)\n$")
    assert.are.equal(out:match("^(%x+)\n$"), crypto.hex(crypto.keypair(crypto.unhex(seed)).public_key))
    assert.are.equal(tonumber("600", 8), fs.stat(d .. "/key").mode % 512)
    local _, err
    _, err, status = H.ludx({ "keygen", "-o", d .. "/key" })
    assert.are.equal(1, status)
    assert.matches("exists", err)
  end, 30000))

  it("announces and looks up a topic through a testnet process", run(function()
    local tn, bs = testnet()
    local out, err, status = H.ludx({ "dht", "announce", "--bootstrap", bs, "ludx spec topic" })
    assert.are.equal(0, status, err)
    local pub = out:match("^(%x+)\n$")
    assert.are.equal(64, #pub)
    out, err, status = H.ludx({ "dht", "lookup", "--bootstrap", bs, "ludx spec topic" })
    assert.are.equal(0, status, err)
    assert.matches(pub, out, 1, true)
    assert.are.equal(0, stop(tn))
  end, 60000))

  it("shares a directory under a key file, and fetches it with plain progress lines", run(function()
    local tn, bs = testnet()
    local d = tmpdir()
    dirs[#dirs + 1] = d
    fs.mkdirp(d .. "/src/sub")
    local data = require("ludx.core").crypto.randombytes(3000000)
    write(d .. "/src/data.bin", data)
    write(d .. "/src/sub/note.txt", "hello")
    local pub = H.ludx({ "keygen", "-o", d .. "/key" }):match("^(%x+)")
    local sp, key = start_share(bs, { "--key", d .. "/key", d .. "/src" })
    assert.are.equal(pub, key)
    -- the fetch connects as its key file's key: the server logs that peer
    local client = H.ludx({ "keygen", "-o", d .. "/client-key" }):match("^(%x+)")
    local out, err, status = H.ludx({ "fetch", "--bootstrap", bs, "--key", d .. "/client-key", key, d .. "/dst" }, { timeout = 60000 })
    assert.are.equal(0, status, err)
    assert.matches("fetch +%d+%% ", out)
    assert.matches("verified 2 files", out)
    assert.matches("peer " .. client:sub(1, 12) .. " connected", sp:stderr(), 1, true)
    local _
    _, err, status = H.ludx({ "fetch", "--bootstrap", bs, "--key", d .. "/no-such-key", key, d .. "/dst2" }, { timeout = 60000 })
    assert.are.equal(1, status)
    assert.matches("no%-such%-key", err)
    assert.is_nil(out:find("\r", 1, true))
    assert.are.equal(data, read(d .. "/dst/data.bin"))
    assert.are.equal("hello", read(d .. "/dst/sub/note.txt"))
    assert.are.equal(0, stop(sp))
    assert.are.equal(0, stop(tn))
  end, 90000))

  it("resumes a fetch that was killed mid-way", run(function()
    local tn, bs = testnet()
    local d = tmpdir()
    dirs[#dirs + 1] = d
    local data = require("ludx.core").crypto.randombytes(4000000)
    write(d .. "/big.bin", data)
    local sp, key = start_share(bs, { "--rate", "1M", "--chunk-size", "64k", d .. "/big.bin" })
    local f = spawn({ "fetch", "--bootstrap", bs, key, d .. "/out.bin" })
    -- wait for a progress line past 20 %, then kill -9
    while true do
      local line = assert(f:read_line(30000))
      local pct = tonumber(line:match("^fetch +(%d+)%%"))
      if pct and pct >= 20 then
        assert(pct < 90, "the fetch went too fast to interrupt: " .. line)
        break
      end
    end
    f:kill("SIGKILL")
    f:wait(10000)
    f:close()
    assert.is_nil(fs.stat(d .. "/out.bin"))
    local parts = fs.walk(d .. "/.ludx-partial")
    assert.are.equal(1, #parts)
    assert.is_true(parts[1].size > 0)
    local out, err, status = H.ludx({ "fetch", "--bootstrap", bs, key, d .. "/out.bin" }, { timeout = 60000 })
    assert.are.equal(0, status, err)
    local received = out:match("verified 1 file %(BLAKE2b%), ([%d.]+) MB received")
    assert(tonumber(received) < 3.5, "the second run fetched " .. tostring(received) .. " MB: " .. out)
    assert.are.equal(data, read(d .. "/out.bin"))
    assert.is_nil(fs.stat(d .. "/.ludx-partial"))
    assert.are.equal(0, stop(sp))
    assert.are.equal(0, stop(tn))
  end, 90000))
end)
