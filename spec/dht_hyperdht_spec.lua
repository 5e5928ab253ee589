-- hyperdht commands over the simulated network: announce/lookup,
-- unannounce, mutable and immutable storage, the announcer, relayed
-- handshakes and holepunch messages, storage expiry.
local sim = require "ludx.dht.sim"
local hyperdht = require "ludx.dht.hyperdht"
local announcer = require "ludx.dht.announcer"
local crypto = require "ludx.dht.crypto"
local compact = require "ludx.compact"
local hm = require "ludx.dht.hyperdht_messages"
local consts = require "ludx.dht.constants"

local C = consts.COMMANDS

local function ip(i)
  return "10.0." .. math.floor(i / 250) .. "." .. (i % 250 + 1)
end

local function seed(n)
  return string.rep(string.char(n), 32)
end

local function network(n, opts)
  opts = opts or {}
  local world = sim.world({ seed = opts.seed or 1, loss = opts.loss })
  local boot = hyperdht.bootstrapper({ env = world.env, transport = world:transport(ip(0)), host = ip(0), port = 49737, max_age = opts.max_age })
  assert(boot:start())
  local bs = { ip(0) .. ":49737" }
  local nodes = { boot }
  local ready = 0
  boot:on("ready", function() ready = ready + 1 end)
  for i = 1, n do
    local node = hyperdht.new({
      env = world.env, transport = world:transport(ip(i)), host = ip(i), port = 49737,
      bootstrap = bs, ephemeral = false, firewalled = false, max_age = opts.max_age,
    })
    node:on("ready", function() ready = ready + 1 end)
    assert(node:start())
    nodes[#nodes + 1] = node
  end
  assert(world:run({ until_fn = function() return ready == n + 1 end, max_ms = 120000 }))
  local k = 0
  local function client(o)
    k = k + 1
    local c = hyperdht.new({ env = world.env, transport = world:transport("10.9.0." .. k), host = "10.9.0." .. k, bootstrap = bs, ephemeral = true, firewalled = (o and o.firewalled) })
    local r = false
    c:on("ready", function() r = true end)
    assert(c:start())
    assert(world:run({ until_fn = function() return r end, max_ms = 60000 }))
    return c
  end
  return world, nodes, client
end

local function finish(world, q)
  local out, done, err = {}, false, nil
  q.on_data = function(d) out[#out + 1] = d end
  q.on_end = function(e) done, err = true, e end
  q:start()
  assert(world:run({ until_fn = function() return done end, max_ms = 120000 }), "query did not end")
  return out, err
end

local function wait_cb(world, start)
  local res, done = nil, false
  start(function(...)
    res = { ... }
    done = true
  end)
  assert(world:run({ until_fn = function() return done end, max_ms = 120000 }), "callback never came")
  return unpack(res)
end

describe("hyperdht over the simulated network", function()
  it("only persistent nodes store; they start storing on 'persistent'", function()
    local world, nodes, client = network(6)
    for _, n in ipairs(nodes) do assert.is_table(n.persistent) end
    local c = client()
    assert.is_nil(c.persistent)
    -- an ephemeral node refuses storage commands
    local res
    nodes[2]:request({ command = C.LOOKUP, target = crypto.hash("t") }, { host = c.io.server_socket.host, port = c.io.server_socket.port }, nil, function(r) res = r end)
    world:run({ until_fn = function() return res end, max_ms = 5000 })
    assert.are.equal(1, res.error)
  end)

  it("an announce is found by a lookup from another node", function()
    local world, _, client = network(12)
    local a, b = client(), client()
    local kp = crypto.keypair(seed(1))
    local topic = crypto.hash("topic")
    local relays = { { host = "1.2.3.4", port = 5 } }
    local _, err = finish(world, a:announce(topic, kp, relays))
    assert.is_nil(err)
    local replies = finish(world, b:lookup(topic))
    local found = 0
    for _, r in ipairs(replies) do
      for _, p in ipairs(r.peers) do
        if p.public_key == kp.public_key then
          found = found + 1
          assert.are.equal("1.2.3.4", p.relay_addresses[1].host)
        end
      end
    end
    assert.is_true(found >= 3, "found on " .. found .. " nodes")
  end)

  it("unannounce removes the record", function()
    local world, _, client = network(12)
    local a, b = client(), client()
    local kp = crypto.keypair(seed(2))
    local topic = crypto.hash("gone")
    finish(world, a:announce(topic, kp, {}))
    local _, err = finish(world, a:lookup_and_unannounce(topic, kp))
    assert.is_nil(err)
    local replies = finish(world, b:lookup(topic))
    for _, r in ipairs(replies) do
      for _, p in ipairs(r.peers) do assert.are_not.equal(kp.public_key, p.public_key) end
    end
  end)

  it("a forged announce is ignored", function()
    local world, _, client = network(8)
    local a, b = client(), client()
    local kp, other = crypto.keypair(seed(3)), crypto.keypair(seed(4))
    local topic = crypto.hash("forged")
    -- sign with another key: storing nodes drop it without a reply
    local q = a:lookup(topic, {
      commit = function(reply, dht, _, done)
        local ann = { peer = { public_key = kp.public_key, relay_addresses = {} } }
        ann.signature = require("ludx.dht.signing").sign_announce(topic, reply.token, reply.from.id, ann, other)
        dht:request({ token = reply.token, target = topic, command = C.ANNOUNCE, value = compact.encode(hm.announce, ann) }, reply.from,
          { retries = 0 }, function() done(nil) end, function(e) done(e) end)
      end,
    })
    local _, err = finish(world, q)
    assert.are.equal("REQUEST_TIMEOUT", err.code)
    local replies = finish(world, b:lookup(topic))
    assert.are.equal(0, #replies)
  end)

  it("stores and reads immutable values", function()
    local world, _, client = network(10)
    local a, b = client(), client()
    local put, err = wait_cb(world, function(cb) a:immutable_put("hello immutable", nil, cb) end)
    assert.is_nil(err)
    assert.are.equal(crypto.hash("hello immutable"), put.hash)
    assert.is_true(#put.closest_nodes > 0)
    local got = wait_cb(world, function(cb) b:immutable_get(put.hash, nil, cb) end)
    assert.are.equal("hello immutable", got.value)
    local missing, err2 = wait_cb(world, function(cb) b:immutable_get(crypto.hash("nope"), nil, cb) end)
    assert.is_nil(missing)
    assert.is_nil(err2)
  end)

  it("stores mutable values with seq rules", function()
    local world, _, client = network(10)
    local a, b = client(), client()
    local kp = crypto.keypair(seed(5))
    local put, err = wait_cb(world, function(cb) a:mutable_put(kp, "v1", { seq = 1 }, cb) end)
    assert.is_nil(err)
    assert.are.equal(1, put.seq)
    local got = wait_cb(world, function(cb) b:mutable_get(kp.public_key, nil, cb) end)
    assert.are.equal("v1", got.value)
    assert.are.equal(1, got.seq)
    -- same seq, other value: SEQ_REUSED; lower seq: SEQ_TOO_LOW
    local _, e1 = wait_cb(world, function(cb) a:mutable_put(kp, "other", { seq = 1 }, cb) end)
    assert.are.equal("SEQ_REUSED", e1.code)
    wait_cb(world, function(cb) a:mutable_put(kp, "v3", { seq = 3 }, cb) end)
    local _, e2 = wait_cb(world, function(cb) a:mutable_put(kp, "v2", { seq = 2 }, cb) end)
    assert.are.equal("SEQ_TOO_LOW", e2.code)
    got = wait_cb(world, function(cb) b:mutable_get(kp.public_key, nil, cb) end)
    assert.are.equal("v3", got.value)
    -- asking for a higher seq than stored finds nothing
    local none = wait_cb(world, function(cb) b:mutable_get(kp.public_key, { seq = 4 }, cb) end)
    assert.is_nil(none)
  end)

  it("stored records expire after max_age", function()
    local world, _, client = network(8, { max_age = 60000 })
    local a, b = client(), client()
    local kp = crypto.keypair(seed(6))
    local topic = crypto.hash("short lived")
    finish(world, a:announce(topic, kp, {}))
    assert.is_true(#finish(world, b:lookup(topic)) > 0)
    world:run({ max_ms = 90000 })
    assert.are.equal(0, #finish(world, b:lookup(topic)))
  end)

  it("the announcer makes a server findable and relays handshakes to it", function()
    local world, _, client = network(12)
    local server, c = client(), client()
    local kp = crypto.keypair(seed(7))
    local target = crypto.hash(kp.public_key)
    local seen = {}
    local ann = announcer.new(server, kp, target)
    server.router:set(target, {
      record = ann.record,
      onpeerhandshake = function(hs, req)
        seen[#seen + 1] = { noise = hs.noise, peer_address = hs.peer_address, from = req.from }
        return { noise = "reply:" .. hs.noise }
      end,
      onpeerholepunch = function(hp, _, respond)
        respond({ payload = "punch:" .. hp.payload })
      end,
    })
    local started = false
    ann:start(function() started = true end)
    assert(world:run({ until_fn = function() return started end, max_ms = 60000 }))
    assert.are.equal(3, #ann.relays)
    -- FIND_PEER finds the 3 relays
    local found = finish(world, c:find_peer(kp.public_key))
    assert.are.equal(3, #found)
    assert.are.equal(kp.public_key, found[1].peer.public_key)
    -- a handshake through a relay reaches the server and comes back
    local res, err = wait_cb(world, function(cb) c.router:peer_handshake(target, { noise = "msg1" }, found[1].from, cb) end)
    assert.is_nil(err)
    assert.are.equal("reply:msg1", res.noise)
    assert.is_true(res.relayed)
    assert.is_false(server.firewalled) -- the quick PING_NAT test opened it
    assert.are.equal(select(2, server:address()), res.server_address.port)
    assert.are.equal("10.9.0.2", seen[1].peer_address.host)
    -- directly to the server's own node: no peer address
    local _, sport = server:address()
    res = wait_cb(world, function(cb) c.router:peer_handshake(target, { noise = "direct" }, { host = "10.9.0.1", port = sport }, cb) end)
    assert.are.equal("reply:direct", res.noise)
    assert.is_false(res.relayed)
    -- holepunch messages take the same path
    local hp = wait_cb(world, function(cb)
      c.router:peer_holepunch(target, { id = 0, payload = "p1", peer_address = ann.relays[1].peer_address }, ann.relays[1].relay_address, cb)
    end)
    assert.are.equal("punch:p1", hp.payload)
    -- a node without a route answers with closer nodes, which the client refuses
    local _, e = wait_cb(world, function(cb) c.router:peer_handshake(crypto.hash("nobody"), { noise = "x" }, found[1].from, cb) end)
    assert.are.equal("BAD_HANDSHAKE_REPLY", e.code)
    -- stop unannounces: the relays forget the server
    local stopped = false
    ann:stop(function() stopped = true end)
    assert(world:run({ until_fn = function() return stopped end, max_ms = 60000 }))
    assert.are.equal(0, #finish(world, c:find_peer(kp.public_key)))
  end)

  it("the announcer re-announces when relays disappear", function()
    local world, nodes, client = network(12)
    local server = client()
    local kp = crypto.keypair(seed(8))
    local target = crypto.hash(kp.public_key)
    local ann = announcer.new(server, kp, target)
    server.router:set(target, { record = ann.record, onpeerhandshake = function() end })
    local started = false
    ann:start(function() started = true end)
    assert(world:run({ until_fn = function() return started end, max_ms = 60000 }))
    local first = ann.relays[1].relay_address
    for _, n in ipairs(nodes) do
      local _, port = n:address()
      if n.io.server_socket.host == first.host and port == first.port then n:destroy() end
    end
    local updates = ann.updates
    assert(world:run({ until_fn = function() return ann.updates > updates end, max_ms = 60000 }))
    for _, r in ipairs(ann.relays) do assert.are_not.same(first, { host = r.relay_address.host, port = r.relay_address.port }) end
    ann:stop()
  end)
end)
