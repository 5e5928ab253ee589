-- Holepunching through real NATs: two hosts, each behind its own Linux
-- router that masquerades and drops unsolicited packets, meet through a DHT
-- on the public segment (spec/nat/lab.sh). The connection is direct: the
-- client's stream ends at the server's NAT address. Needs root, iproute2 and
-- nftables; without them the cases are pending.
local ludx = require "ludx"
local process = require "ludx.process"
local json = require "ludx.json"
local H = require "helper"
local run = H.run

local LAB = "spec/nat/lab.sh"
local PEER = "spec/nat/peer.lua"
-- namespaces of this run only: concurrent runs must not share them
local NS = "lx" .. (ludx.core.getpid and ludx.core.getpid() or math.random(1e6)) .. "-"

local function sh(cmd, args)
  local p = process.spawn(cmd, args)
  if not p then return nil end
  local status = p:wait(30000)
  local err = p:stderr()
  p:close()
  return status == 0, err
end

local lab_ok = false
local lab_error

local function in_ns(ns, file, args)
  local all = { "netns", "exec", ns, file }
  for _, a in ipairs(args) do all[#all + 1] = a end
  return assert(process.spawn("ip", all))
end

local function ludx_in(ns, ...)
  return in_ns(ns, H.ludx_bin, { PEER, ... })
end

local function node_in(ns, bootstrap)
  return in_ns(ns, "node", { "spec/interop/peers/dht-testnet.js", "--bootstrap", bootstrap, "--host", "0.0.0.0" })
end

local function expect(p, event, timeout)
  while true do
    local line, msg = p:read_json(timeout or 60000)
    assert(line, (msg or "exited") .. " waiting for " .. event .. "; stderr: " .. p:stderr())
    if line.event == event then return line end
    assert(line.event ~= "error", json.encode(line))
  end
end

local function testnet()
  local t = ludx_in(NS .. "pub", "testnet", "10.50.0.1")
  return t, expect(t, "ready", 30000).bootstrap[1]
end

describe("holepunching through NATs", function()
  setup(function()
    ludx.run(function()
      local ok, err = sh(LAB, { "up", NS })
      lab_ok, lab_error = ok, err
    end)
  end)

  teardown(function()
    ludx.run(function() sh(LAB, { "down", NS }) end)
  end)

  local function need_lab()
    if not lab_ok then pending("the NAT lab needs root, iproute2 and nftables: " .. tostring(lab_error)) end
    return lab_ok
  end

  it("ludx to ludx: a direct connection between two NATed hosts", run(function()
    if not need_lab() then return end
    local t, bs = testnet()
    local s = ludx_in(NS .. "h1", "server", bs)
    local l = expect(s, "listening")
    assert.is_true(l.firewalled)
    local c = ludx_in(NS .. "h2", "client", bs, l.public_key)
    local d = expect(c, "done")
    assert.is_true(d.ok, json.encode(d))
    assert.is_true(d.firewalled)
    -- the stream goes to the server's router, not through a relay
    assert.are.equal("10.50.0.11", d.remote_host)
    assert.are.equal("10.50.0.12", expect(s, "connection").remote[1])
    c:close()
    s:close()
    t:close()
  end, 120000))

  it("a ludx client to a Node hyperdht server behind a NAT", run(function()
    if not need_lab() then return end
    local t, bs = testnet()
    local n = node_in(NS .. "h1", bs)
    expect(n, "ready", 30000)
    n:write(json.encode({ cmd = "node", name = "s", firewalled = true }) .. "\n")
    expect(n, "node")
    n:write(json.encode({ cmd = "listen", node = "s", keySeed = string.rep("02", 32) }) .. "\n")
    local l = expect(n, "listening")
    local c = ludx_in(NS .. "h2", "client", bs, l.publicKey)
    local d = expect(c, "done")
    assert.is_true(d.ok, json.encode(d))
    assert.are.equal("10.50.0.11", d.remote_host)
    expect(n, "connection-done")
    c:close()
    n:close()
    t:close()
  end, 120000))

  it("a Node hyperdht client to a ludx server behind a NAT", run(function()
    if not need_lab() then return end
    local t, bs = testnet()
    local s = ludx_in(NS .. "h1", "server", bs)
    local l = expect(s, "listening")
    local n = node_in(NS .. "h2", bs)
    expect(n, "ready", 30000)
    n:write(json.encode({ cmd = "node", name = "c", firewalled = true }) .. "\n")
    expect(n, "node")
    n:write(json.encode({ cmd = "connect", node = "c", publicKey = l.public_key, bytes = 300000, mode = "both" }) .. "\n")
    local conn = expect(n, "connected")
    assert.are.equal("10.50.0.11", conn.remoteHost)
    local d = expect(n, "connect-done")
    assert.are.equal(300000, d.sent)
    assert.are.equal(d.sentHash, d.receivedHash)
    assert.are.equal("10.50.0.12", expect(s, "connection").remote[1])
    n:close()
    s:close()
    t:close()
  end, 120000))
end)
