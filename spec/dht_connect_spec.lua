-- hyperdht connections between ludx nodes over loopback: servers announced
-- through the DHT, Noise IK handshakes relayed or direct, UDX streams on
-- the DHT sockets, SecretStream data both ways.
local ludx = require "ludx"
local dht = require "ludx.dht"
local H = require "helper"
local run = H.run

local function seed(n)
  return string.rep(string.char(n), 32)
end

local function echo(conn)
  while true do
    local data = conn:read()
    if not data then break end
    conn:write(data)
  end
  conn:finish(5000)
  conn:close()
end

local function roundtrip(conn, payload)
  assert(conn:write(payload))
  local got = {}
  local n = 0
  while n < #payload do
    local chunk = assert(conn:read(nil, 10000))
    got[#got + 1] = chunk
    n = n + #chunk
  end
  return table.concat(got)
end

describe("dht connect", function()
  it("connects to a server by public key through the relays", run(function()
    local tn = assert(dht.testnet(4, { timeout = 20000 }))
    local snode = assert(tn:create_node())
    local cnode = assert(tn:create_node())
    local kp = dht.keypair(seed(1))
    local seen = {}
    local server = snode:server(function(conn)
      seen[#seen + 1] = conn.remote_public_key
      echo(conn)
    end)
    assert(server:listen(kp, 20000))
    assert.is_true(#server.announcer.relays >= 1)
    local ckp = dht.keypair(seed(2))
    local conn = assert(cnode:connect(kp.public_key, { keypair = ckp, timeout = 20000 }))
    assert.are.equal(kp.public_key, conn.remote_public_key)
    assert.are.equal("hello ludx", roundtrip(conn, "hello ludx"))
    local big = string.rep("0123456789abcdef", 20000)
    assert.are.equal(big, roundtrip(conn, big))
    conn:close()
    assert.are.equal(ckp.public_key, seen[1])
    server:close()
    tn:destroy()
  end, 60000))

  it("connects directly to the server's own node", run(function()
    local tn = assert(dht.testnet(3, { timeout = 20000 }))
    local snode = assert(tn:create_node())
    local cnode = assert(tn:create_node())
    local kp = dht.keypair(seed(3))
    local server = snode:server(echo)
    assert(server:listen(kp, 20000))
    local host, port = snode:address()
    local conn = assert(cnode:connect(kp.public_key, { relay_addresses = { { host = host, port = port } }, timeout = 20000 }))
    assert.are.equal("direct", roundtrip(conn, "direct"))
    conn:close()
    server:close()
    tn:destroy()
  end, 60000))

  it("connect returns once the server holds the connection (relayed and direct)", run(function()
    -- the server's stream connects on the client's first packet; connect
    -- must not return before that (ludx.swarm's duplicate rule needs the
    -- accepting side to have the connection when the dialer's opens)
    local tn = assert(dht.testnet(4, { timeout = 20000 }))
    local snode = assert(tn:create_node())
    local cnode = assert(tn:create_node())
    local kp = dht.keypair(seed(7))
    local seen = {}
    local server = snode:server(function(conn)
      seen[conn.remote_public_key] = (seen[conn.remote_public_key] or 0) + 1
      echo(conn)
    end)
    assert(server:listen(kp, 20000))
    local host, port = snode:address()
    local ways = {
      relayed = {},
      direct = { relay_addresses = { { host = host, port = port } } },
    }
    for i, way in ipairs({ "relayed", "direct" }) do
      local ckp = dht.keypair(seed(70 + i))
      local o = ways[way]
      o.keypair, o.timeout = ckp, 20000
      local conn = assert(cnode:connect(kp.public_key, o))
      assert.are.equal(1, seen[ckp.public_key], way)
      assert.are.equal(way, roundtrip(conn, way))
      conn:close()
    end
    server:close()
    tn:destroy()
  end, 60000))

  it("holepunches when both sides are firewalled", run(function()
    local tn = assert(dht.testnet(4, { timeout = 20000 }))
    local snode = assert(tn:create_node({ firewalled = true, quick_firewall = false }))
    local cnode = assert(tn:create_node({ firewalled = true, quick_firewall = false }))
    assert.is_true(snode:is_firewalled())
    assert.is_true(cnode:is_firewalled())
    local kp = dht.keypair(seed(6))
    local server = snode:server(echo)
    assert(server:listen(kp, 20000))
    local conn = assert(cnode:connect(kp.public_key, { timeout = 30000 }))
    assert.are.equal("punched", roundtrip(conn, "punched"))
    -- the stream runs on a puncher socket, not on the DHT sockets
    local _, cport = cnode:address()
    local rhost, rport = conn.udx_stream:remote_address()
    assert.are.equal("127.0.0.1", rhost)
    local _, sport = snode:address()
    assert.are_not.equal(sport, rport)
    assert.is_number(cport)
    conn:close()
    server:close()
    tn:destroy()
  end, 60000))

  it("fails with PEER_NOT_FOUND for a key nobody announced", run(function()
    local tn = assert(dht.testnet(3, { timeout = 20000 }))
    local cnode = assert(tn:create_node())
    local ok, msg, code = cnode:connect(dht.keypair().public_key, { timeout = 30000 })
    assert.is_nil(ok)
    assert.are.equal("PEER_NOT_FOUND", code)
    assert.is_string(msg)
    tn:destroy()
  end, 60000))

  it("a server firewall refuses a client", run(function()
    local tn = assert(dht.testnet(3, { timeout = 20000 }))
    local snode = assert(tn:create_node())
    local cnode = assert(tn:create_node())
    local kp = dht.keypair(seed(4))
    local server = snode:server(echo, { firewall = function() return true end })
    assert(server:listen(kp, 20000))
    local ok, _, code = cnode:connect(kp.public_key, { timeout = 30000 })
    assert.is_nil(ok)
    assert.are.equal("PEER_CONNECTION_FAILED", code)
    server:close()
    tn:destroy()
  end, 60000))

  it("serves several clients at once", run(function()
    local tn = assert(dht.testnet(4, { timeout = 20000 }))
    local snode = assert(tn:create_node())
    local kp = dht.keypair(seed(5))
    local server = snode:server(echo)
    assert(server:listen(kp, 20000))
    local tasks = {}
    for i = 1, 3 do
      tasks[i] = ludx.spawn("client " .. i, function()
        local cnode = assert(tn:create_node())
        local conn = assert(cnode:connect(kp.public_key, { timeout = 20000 }))
        local msg = "client " .. i
        assert.are.equal(msg, roundtrip(conn, msg))
        conn:close()
        return true
      end)
    end
    for i = 1, 3 do assert.is_true(tasks[i]:join(30000)) end
    assert.are.equal(3, server.connections)
    server:close()
    tn:destroy()
  end, 60000))
end)
