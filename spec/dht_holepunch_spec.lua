-- Holepunching between two nodes behind stateful firewalls, over the
-- simulated network: probe round, punch round with echoed tokens,
-- simultaneous probes, the client's first echo fixes the path.
local P = require "sim_punch_util"
local announcer = require "ludx.dht.announcer"
local holepunch = require "ludx.dht.holepunch"
local punch = require "ludx.dht.punch"
local crypto = require "ludx.dht.crypto"
local consts = require "ludx.dht.constants"

local FIREWALL = consts.FIREWALL

local SEED = 3 -- this file's seeded world
local function network(n)
  return P.network(n, SEED)
end
local firewalled_node = P.firewalled_node

describe("holepunching (simulated firewalls)", function()
  it("classifies a puncher socket behind a consistent firewall", function()
    local world, _, bs = network(10)
    local node = firewalled_node(world, "192.168.1.2", bs)
    assert.is_true(node.firewalled)
    local p = assert(punch.puncher(node, node:session(), true))
    local done = false
    p:analyze(function(stable) done = stable end)
    assert(world:run({ until_fn = function() return done end, max_ms = 10000 }))
    assert.are.equal(FIREWALL.CONSISTENT, p.nat.firewall)
    assert.are.equal("192.168.1.2", p.nat.addresses[1].host)
    assert.are.equal(p.socket.port, p.nat.addresses[1].port)
    p:destroy()
  end)

  it("punches through two firewalls via the server's relay", function()
    local world, _, bs = network(12)
    local server = firewalled_node(world, "192.168.1.2", bs)
    local client = firewalled_node(world, "172.16.5.9", bs)
    assert.is_true(server.firewalled and client.firewalled)

    local kp = crypto.keypair(crypto.hash("holepunch server")) -- seeded: the target picks the path in the seeded world
    local target = crypto.hash(kp.public_key)
    local secret = crypto.hash("shared holepunch secret")
    local ann = announcer.new(server, kp, target)
    local hs = nil
    server.router:set(target, {
      record = ann.record,
      onpeerhandshake = function()
        hs = hs or holepunch.prepare(server, secret, FIREWALL.UNKNOWN, function(fw) return punch.puncher(server, server:session(), false, fw) end)
        return { noise = "reply" }
      end,
      onpeerholepunch = function(msg, req, respond)
        if msg.id ~= 0 or not hs then return respond(nil) end
        holepunch.on_holepunch(server, ann, hs, msg, req, respond)
      end,
    })
    local started = false
    ann:start(function() started = true end)
    assert(world:run({ until_fn = function() return started end, max_ms = 60000 }))
    assert.is_true(#ann.relays >= 1)

    -- the handshake goes through a relay; no puncher socket yet (it opens
    -- with the first holepunch round)
    local relay = ann.relays[1].relay_address
    local reply
    client.router:peer_handshake(target, { noise = "msg1" }, relay, function(r) reply = r end)
    assert(world:run({ until_fn = function() return reply end, max_ms = 10000 }))
    assert.is_true(reply.relayed)
    assert.is_nil(hs.puncher)

    local path, err
    local puncher = holepunch.client(client, {
      target = target,
      payload = { firewall = FIREWALL.UNKNOWN, holepunch = { id = 0, relays = ann.relays } },
      secret = secret,
      relay_address = relay,
      server_address = reply.server_address,
      session = client:session(),
      fast_open = false,
    }, function(sock, port, host)
      if sock then path = { sock = sock, port = port, host = host } else err = port end
    end)
    assert(world:run({ until_fn = function() return path or err end, max_ms = 30000 }))
    assert.is_nil(err)
    assert.are.equal("192.168.1.2", path.host)
    assert.are.equal(hs.puncher.socket.port, path.port)
    assert.are.equal(puncher.socket, path.sock)
    -- both firewalls now pass the pair of sockets
    assert.is_true(path.sock.seen["192.168.1.2:" .. path.port])
    assert.is_true(hs.puncher.socket.seen["172.16.5.9:" .. path.sock.port])
    assert.is_true(world.net.stats.blocked > 0) -- earlier probes were refused
    puncher:release()
    ann:stop()
  end)

  it("a wrong secret makes the server drop the rounds", function()
    local world, _, bs = network(8)
    local server = firewalled_node(world, "192.168.1.2", bs)
    local client = firewalled_node(world, "172.16.5.9", bs)
    local kp = crypto.keypair(crypto.hash("holepunch server 2"))
    local target = crypto.hash(kp.public_key)
    local ann = announcer.new(server, kp, target)
    local hs = holepunch.prepare(server, crypto.hash("right"), FIREWALL.UNKNOWN, function(fw) return punch.puncher(server, server:session(), false, fw) end)
    server.router:set(target, {
      record = ann.record,
      onpeerhandshake = function() return { noise = "x" } end,
      onpeerholepunch = function(msg, req, respond) holepunch.on_holepunch(server, ann, hs, msg, req, respond) end,
    })
    local started = false
    ann:start(function() started = true end)
    assert(world:run({ until_fn = function() return started end, max_ms = 60000 }))
    local err
    holepunch.client(client, {
      target = target,
      payload = { firewall = FIREWALL.UNKNOWN, holepunch = { id = 0, relays = ann.relays } },
      secret = crypto.hash("wrong"),
      relay_address = ann.relays[1].relay_address,
      server_address = ann.relays[1].peer_address,
      session = client:session(),
      fast_open = false,
    }, function(sock, e) if not sock then err = e end end)
    assert(world:run({ until_fn = function() return err end, max_ms = 60000 }))
    assert.are.equal("REQUEST_TIMEOUT", err.code)
    ann:stop()
  end)
end)
