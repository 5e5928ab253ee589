-- Hostile input: truncated, oversized, garbage and forged messages sent to
-- DHT nodes. A node answers or drops each one and keeps serving.
local sim = require "ludx.dht.sim"
local hyperdht = require "ludx.dht.hyperdht"
local msgs = require "ludx.dht.messages"
local compact = require "ludx.compact"
local crypto = require "ludx.dht.crypto"
local hm = require "ludx.dht.hyperdht_messages"
local consts = require "ludx.dht.constants"
local ludx = require "ludx"
local dht = require "ludx.dht"
local H = require "helper"

local C = consts.COMMANDS

local function ip(i)
  return "10.0.0." .. (i + 1)
end

-- a small persistent network and a raw attacker socket
local function setup()
  local world = sim.world({ seed = 9 })
  local boot = hyperdht.bootstrapper({ env = world.env, transport = world:transport(ip(0)), host = ip(0), port = 49737 })
  assert(boot:start())
  local nodes = { boot }
  for i = 1, 4 do
    local n = hyperdht.new({ env = world.env, transport = world:transport(ip(i)), host = ip(i), port = 49737,
      bootstrap = { ip(0) .. ":49737" }, ephemeral = false, firewalled = false })
    assert(n:start())
    nodes[#nodes + 1] = n
  end
  assert(world:run({ until_fn = function()
    for _, n in ipairs(nodes) do
      if not n.bootstrapped then return false end
    end
    return true
  end, max_ms = 60000 }))
  local evil = assert(world.net:bind("10.6.6.6", 666))
  local inbox = {}
  evil.onmessage = function(data) inbox[#inbox + 1] = data end
  return world, nodes, evil, inbox
end

local function still_serves(world, nodes)
  local client = hyperdht.new({ env = world.env, transport = world:transport("10.9.9.9"), host = "10.9.9.9" })
  assert(client:start())
  local ok = 0
  for i = 2, #nodes do
    client:ping({ host = ip(i - 1), port = 49737 }, nil, function(res)
      if res.error == 0 then ok = ok + 1 end
    end)
  end
  assert(world:run({ until_fn = function() return ok == #nodes - 1 end, max_ms = 10000 }), "a node stopped answering")
  client:destroy()
end

local function request(fields)
  local m = { tid = fields.tid or 7, to = { host = ip(1), port = 49737 } }
  for k, v in pairs(fields) do m[k] = v end
  return msgs.encode_request(m)
end

describe("dht bad input", function()
  it("drops random garbage and keeps serving", function()
    local world, nodes, evil = setup()
    local rand = sim.rng(1234)
    local firsts = { 0x03, 0x13, 0xff, 0x00 }
    for i = 1, 3000 do
      local len = math.floor(rand() * 120)
      local t = {}
      for j = 1, len do t[j] = string.char(math.floor(rand() * 256)) end
      if len > 0 then t[1] = string.char(firsts[i % 4 + 1]) end
      evil:send(table.concat(t), 49737, ip(1 + i % 4))
    end
    world:run({ max_ms = 100 })
    local bad = 0
    for _, n in ipairs(nodes) do bad = bad + n.io.stats.bad end
    assert.is_true(bad > 500)
    still_serves(world, nodes)
  end)

  it("drops every truncation of valid requests", function()
    local world, nodes, evil, inbox = setup()
    local samples = {
      request({ internal = true, command = msgs.PING }),
      request({ internal = true, command = msgs.FIND_NODE, target = crypto.hash("t") }),
      request({ command = C.LOOKUP, target = crypto.hash("t"), value = "x" }),
    }
    for _, s in ipairs(samples) do
      for i = 1, #s - 1 do evil:send(s:sub(1, i), 49737, ip(1)) end
    end
    world:run({ max_ms = 100 })
    assert.are.equal(0, #inbox)
    -- the whole messages are answered
    for _, s in ipairs(samples) do evil:send(s, 49737, ip(1)) end
    world:run({ max_ms = 100 })
    assert.are.equal(3, #inbox)
    still_serves(world, nodes)
  end)

  it("copes with bad values for every command", function()
    local world, nodes, evil, inbox = setup()
    local target = crypto.hash("t")
    -- a valid token for the attacker's host, so token-gated handlers run
    local token = nodes[2].io:token("10.6.6.6", 1)
    local junk = string.rep("\255", 40)
    local cases = {
      { internal = true, command = msgs.PING_NAT, value = "\1" },
      { internal = true, command = msgs.PING_NAT, value = "\0\0" },
      { internal = true, command = msgs.DOWN_HINT, value = "abc" },
      { internal = true, command = msgs.DELAYED_PING, value = "\255\255\255\255" },
      { internal = true, command = msgs.FIND_NODE },
      { internal = true, command = 200 },
      { command = C.LOOKUP },
      { command = C.FIND_PEER },
      { command = C.ANNOUNCE, target = target, token = token, value = junk },
      { command = C.ANNOUNCE, target = target, token = token },
      { command = C.UNANNOUNCE, target = target, token = token, value = junk },
      { command = C.MUTABLE_PUT, target = target, token = token, value = junk },
      { command = C.MUTABLE_GET, target = target, value = junk },
      { command = C.IMMUTABLE_PUT, target = target, token = token, value = "not the preimage" },
      { command = C.PEER_HANDSHAKE, target = target, value = junk },
      { command = C.PEER_HANDSHAKE, target = target, value = compact.encode(hm.handshake, { mode = 0, noise = "" }) },
      { command = C.PEER_HANDSHAKE, target = target, value = compact.encode(hm.handshake, { mode = 1, noise = "x" }) },
      { command = C.PEER_HOLEPUNCH, target = target, value = junk },
      { command = C.PEER_HOLEPUNCH, target = target, value = compact.encode(hm.holepunch, { mode = 2, id = 99, payload = "p" }) },
      { command = C.PLUGIN, target = target, value = junk },
      { command = 999, target = target },
    }
    for i, c in ipairs(cases) do
      c.tid = i
      evil:send(request(c), 49737, ip(1))
    end
    world:run({ max_ms = 15000 })
    -- nothing was stored
    local n = nodes[2]
    assert.are.equal(0, n.persistent.records:size())
    assert.are.equal(0, n.persistent.mutables:size())
    assert.are.equal(0, n.persistent.immutables:size())
    -- every reply that came is a well-formed response
    for _, d in ipairs(inbox) do
      local kind = msgs.decode(d)
      assert.are.equal("response", kind)
    end
    still_serves(world, nodes)
  end)

  it("refuses forged ids and forged responses", function()
    local world, nodes, evil = setup()
    -- a request carrying someone else's id is treated as id-less
    local forged = nodes[3]:id()
    evil:send(request({ internal = true, command = msgs.PING, id = forged }), 49737, ip(1))
    world:run({ max_ms = 100 })
    for _, t in ipairs(nodes[2].table:to_array()) do assert.are_not.equal("10.6.6.6", t.host) end
    -- a garbage response with a live tid does not complete the request
    local client = hyperdht.new({ env = world.env, transport = world:transport("10.9.9.8"), host = "10.9.9.8" })
    assert(client:start())
    local res
    local req = client:ping({ host = ip(1), port = 49737 }, nil, function(r) res = r end)
    local bogus = msgs.encode_response({ tid = req.tid, to = { host = "1.1.1.1", port = 1 } })
    evil:send(bogus:sub(1, #bogus - 2), client.io.client_socket.port, "10.9.9.8")
    world:run({ until_fn = function() return res end, max_ms = 5000 })
    -- the real reply (its id may be cut: the client is not verified yet)
    assert.are.equal(ip(1), res.from.host)
    assert.are.equal(req.tid, res.tid)
  end)

  it("answers a closer-nodes count over the limit by dropping it", function()
    local world, nodes, evil = setup()
    local client = hyperdht.new({ env = world.env, transport = world:transport("10.9.9.7"), host = "10.9.9.7" })
    assert(client:start())
    local got, err
    local req = client:ping({ host = "10.6.6.6", port = 666 }, nil, function(r) got = r end, function(e) err = e end)
    local w = compact.writer()
    w:uint8(0x13):uint8(4):uint16(req.tid):ipv4("10.9.9.7", 1):uint(0x100001)
    evil:send(w:finish(), client.io.client_socket.port, "10.9.9.7")
    world:run({ until_fn = function() return got or err end, max_ms = 10000 })
    assert.is_nil(got)
    assert.are.equal("REQUEST_TIMEOUT", err.code)
    still_serves(world, nodes)
  end)

  it("a real node survives oversized and garbage datagrams and bad handshakes", H.run(function()
    local tn = assert(dht.testnet(3, { timeout = 20000 }))
    local snode = assert(tn:create_node())
    local kp = dht.keypair()
    local server = snode:server(function(conn)
      local d = conn:read()
      if d then conn:write(d) end
      conn:finish(5000)
      conn:close()
    end)
    assert(server:listen(kp, 20000))
    local udx = require "ludx.udx"
    local sock = assert(udx.bind("127.0.0.1", 0))
    local host, port = snode:address()
    sock:send(string.rep("\3", 60000), port, host)
    sock:send("\19\1", port, host)
    sock:send("\255" .. string.rep("\0", 30), port, host)
    -- a PEER_HANDSHAKE with garbage noise straight to the server's node
    local value = compact.encode(hm.handshake, { mode = 0, noise = string.rep("\7", 116) })
    sock:send(msgs.encode_request({ tid = 1, to = { host = host, port = port }, command = C.PEER_HANDSHAKE,
      target = crypto.hash(kp.public_key), value = value }), port, host)
    ludx.sleep(50)
    local cnode = assert(tn:create_node())
    local conn = assert(cnode:connect(kp.public_key, { timeout = 20000 }))
    assert(conn:write("still here"))
    assert.are.equal("still here", conn:read(nil, 10000))
    conn:close()
    sock:close()
    server:close()
    tn:destroy()
  end, 60000))
end)
