-- dht-rpc over the simulated network and clock: routing table, NAT
-- sampler, bootstrap, queries, persistence, firewall detection, loss.
local sim = require "ludx.dht.sim"
local rpc = require "ludx.dht.rpc"
local ktable = require "ludx.dht.table"
local nat = require "ludx.dht.nat"
local msgs = require "ludx.dht.messages"
local crypto = require "ludx.dht.crypto"

local function ip(i)
  return "10.0." .. math.floor(i / 250) .. "." .. (i % 250 + 1)
end

-- a bootstrapper plus n persistent nodes (as @hyperswarm/testnet does)
local function network(n, opts)
  opts = opts or {}
  local world = sim.world({ seed = opts.seed or 1, loss = opts.loss })
  local boot = rpc.bootstrapper({ env = world.env, transport = world:transport(ip(0)), host = ip(0), port = 49737 })
  assert(boot:start())
  local bs = { ip(0) .. ":49737" }
  local nodes = { boot }
  local ready = 0
  boot:on("ready", function() ready = ready + 1 end)
  for i = 1, n do
    local node = rpc.new({
      env = world.env,
      transport = world:transport(ip(i)),
      host = ip(i),
      port = 49737,
      bootstrap = bs,
      ephemeral = false,
      firewalled = false,
    })
    node:on("ready", function() ready = ready + 1 end)
    assert(node:start())
    nodes[#nodes + 1] = node
  end
  assert(world:run({ until_fn = function() return ready == n + 1 end, max_ms = opts.max_ms or 120000 }), "network did not bootstrap")
  return world, nodes, bs
end

local function run_query(world, q)
  local out, done, err = {}, false, nil
  q.on_data = function(d) out[#out + 1] = d end
  q.on_end = function(e)
    done, err = true, e
  end
  q:start()
  assert(world:run({ until_fn = function() return done end, max_ms = 120000 }), "query did not end")
  return out, err
end

describe("routing table", function()
  local own = string.rep("\0", 32)

  local function id_with_first_byte(b, rest)
    return string.char(b) .. string.rep(string.char(rest or 0), 31)
  end

  it("puts nodes in the row of their first differing bit", function()
    local t = ktable.new(own)
    assert.are.equal(0, t:diff(id_with_first_byte(0x80)))
    assert.are.equal(7, t:diff(id_with_first_byte(0x01)))
    assert.are.equal(8, t:diff("\0\128" .. string.rep("\0", 30)))
    assert.are.equal(255, t:diff(own))
  end)

  it("keeps k nodes per row, sorted, and reports full rows", function()
    local t = ktable.new(own, { k = 3 })
    local full = nil
    t.on_full = function(n) full = n end
    for _, b in ipairs({ 0x83, 0x81, 0x82 }) do assert.is_true(t:add({ id = id_with_first_byte(b) })) end
    assert.are.equal(3, t.size)
    local row = t.rows[0].nodes
    assert.are.equal(0x81, row[1].id:byte(1))
    assert.are.equal(0x83, row[3].id:byte(1))
    local extra = { id = id_with_first_byte(0x84) }
    assert.is_false(t:add(extra))
    assert.are.equal(extra, full)
    -- the same id replaces, a removal frees the slot
    assert.is_true(t:add({ id = id_with_first_byte(0x82), tag = "new" }))
    assert.are.equal("new", t:get(id_with_first_byte(0x82)).tag)
    assert.is_true(t:remove(id_with_first_byte(0x82)))
    assert.is_false(t:remove(id_with_first_byte(0x82)))
    assert.is_true(t:add(extra))
    assert.are.equal(3, t.size)
  end)

  it("closest() walks the target row, then lower rows, then higher rows", function()
    local t = ktable.new(own)
    for _, b in ipairs({ 0x80, 0x40, 0x20, 0x10, 0x01 }) do t:add({ id = id_with_first_byte(b) }) end
    local target = id_with_first_byte(0x21)
    local c = t:closest(target, 3)
    assert.are.equal(0x20, c[1].id:byte(1)) -- row 2
    assert.are.equal(0x40, c[2].id:byte(1)) -- row 1
    assert.are.equal(0x80, c[3].id:byte(1)) -- row 0
    c = t:closest(target)
    assert.are.equal(5, #c)
    assert.are.equal(0x10, c[4].id:byte(1)) -- then row 3
    assert.are.equal(5, #t:to_array())
  end)

  it("compares XOR distances", function()
    local target = id_with_first_byte(0x0f)
    assert.is_true(ktable.compare(target, id_with_first_byte(0x0e), id_with_first_byte(0x1f)) < 0)
    assert.are.equal(0, ktable.compare(target, own, own))
  end)
end)

describe("nat sampler", function()
  it("needs all samples below 4", function()
    local s = nat.new()
    s:add("1.2.3.4", 10)
    assert.are.equal("1.2.3.4", s.host)
    assert.are.equal(10, s.port)
    s:add("1.2.3.4", 11)
    assert.are.equal("1.2.3.4", s.host)
    assert.are.equal(0, s.port) -- randomized port
    s:add("5.6.7.8", 11)
    assert.is_nil(s.host)
  end)

  it("tolerates one odd sample from 4 on", function()
    local s = nat.new()
    for _ = 1, 3 do s:add("1.2.3.4", 10) end
    s:add("9.9.9.9", 1)
    assert.are.equal("1.2.3.4", s.host)
    assert.are.equal(10, s.port)
  end)

  it("keeps a ring of 32 slots", function()
    local s = nat.new()
    for _ = 1, 40 do s:add("1.2.3.4", 10) end
    assert.are.equal(16, s.size)
    assert.are.equal("1.2.3.4", s.host)
    for _ = 1, 16 do s:add("4.3.2.1", 99) end
    assert.are.equal("4.3.2.1", s.host)
    assert.are.equal(99, s.port)
  end)
end)

describe("dht-rpc node", function()
  it("bootstraps a network whose nodes become persistent with H32(ip:port) ids", function()
    local world, nodes = network(20)
    for i, n in ipairs(nodes) do
      assert.is_false(n.ephemeral)
      local host, port = n:address()
      assert.are.equal(ip(i - 1), host)
      assert.are.equal(rpc.node_id(host, port), n:id())
      if i > 1 then assert.is_true(n.table.size > 0) end
    end
    assert.is_true(world:now() < 60000)
  end)

  it("answers PING and FIND_NODE and refuses unknown commands", function()
    local world, nodes = network(8)
    local client = rpc.new({ env = world.env, transport = world:transport("10.9.0.1"), host = "10.9.0.1" })
    assert(client:start())
    local target = crypto.hash("x")
    local got = {}
    client:ping({ host = ip(1), port = 49737 }, nil, function(res) got.ping = res end)
    client:request({ internal = true, command = msgs.FIND_NODE, target = target }, { host = ip(1), port = 49737 }, nil, function(res) got.find = res end)
    client:request({ command = 99, target = target }, { host = ip(1), port = 49737 }, nil, function(res) got.unknown = res end)
    client:request({ internal = true, command = 77 }, { host = ip(1), port = 49737 }, nil, function(res) got.unknown_internal = res end)
    world:run({ until_fn = function() return got.ping and got.find and got.unknown and got.unknown_internal end, max_ms = 5000 })
    assert.are.equal(0, got.ping.error)
    assert.are.equal(nodes[2]:id(), got.ping.id)
    assert.is_nil(got.ping.token)
    assert.is_true(#got.find.closer_nodes > 0)
    assert.is_nil(got.find.token)
    assert.are.equal(msgs.UNKNOWN_COMMAND, got.unknown.error)
    assert.is_true(#got.unknown.closer_nodes > 0)
    assert.are.equal(msgs.UNKNOWN_COMMAND, got.unknown_internal.error)
  end)

  it("finds the k closest nodes to a target", function()
    local world, nodes, bs = network(60, { seed = 3 })
    local client = rpc.new({ env = world.env, transport = world:transport("10.9.0.1"), host = "10.9.0.1", bootstrap = bs })
    assert(client:start())
    local target = crypto.hash("target")
    local q = client:find_node(target)
    local _, err = run_query(world, q)
    assert.is_nil(err)
    -- the true 20 closest by XOR among all persistent nodes
    local ids = {}
    for _, n in ipairs(nodes) do ids[#ids + 1] = n:id() end
    table.sort(ids, function(a, b) return ktable.compare(target, a, b) < 0 end)
    assert.are.equal(20, #q.closest_replies)
    local found = {}
    for _, r in ipairs(q.closest_replies) do found[r.from.id] = true end
    local hits = 0
    for i = 1, 20 do
      if found[ids[i]] then hits = hits + 1 end
    end
    assert.is_true(hits >= 18, "found " .. hits .. " of the 20 closest")
    assert.are.equal(ids[1], q.closest_replies[1].from.id)
  end)

  it("an ephemeral client never enters tables and never sends an id", function()
    local world, nodes, bs = network(10)
    local client = rpc.new({ env = world.env, transport = world:transport("10.9.0.1"), host = "10.9.0.1", bootstrap = bs, ephemeral = true })
    local ready = false
    client:on("ready", function() ready = true end)
    assert(client:start())
    assert(world:run({ until_fn = function() return ready end, max_ms = 30000 }))
    assert.is_true(client.ephemeral)
    assert.is_nil(client:id())
    for _, n in ipairs(nodes) do
      for _, t in ipairs(n.table:to_array()) do assert.are_not.equal("10.9.0.1", t.host) end
    end
    -- it learned its address from the replies
    assert.are.equal("10.9.0.1", client.nat.host)
  end)

  it("a firewalled node stays ephemeral; a reachable one opens up", function()
    local world, _, bs = network(10)
    world.net:firewall("10.9.0.1")
    local fw = rpc.new({ env = world.env, transport = world:transport("10.9.0.1"), host = "10.9.0.1", bootstrap = bs, ephemeral = false })
    local open = rpc.new({ env = world.env, transport = world:transport("10.9.0.2"), host = "10.9.0.2", bootstrap = bs, ephemeral = false })
    local ready = 0
    fw:on("ready", function() ready = ready + 1 end)
    open:on("ready", function() ready = ready + 1 end)
    assert(fw:start())
    assert(open:start())
    assert(world:run({ until_fn = function() return ready == 2 end, max_ms = 60000 }))
    assert.is_true(fw.firewalled)
    assert.is_true(fw.ephemeral)
    assert.is_false(open.firewalled)
    assert.is_false(open.ephemeral)
    local _, port = open.io.server_socket:address()
    assert.are.equal(rpc.node_id("10.9.0.2", port), open:id())
    assert.are.same({ host = "10.9.0.2", port = port }, open:remote_address())
    assert.is_nil(fw:remote_address())
  end)

  it("works through 20% loss", function()
    local world, nodes, bs = network(30, { seed = 5, loss = 0.2, max_ms = 300000 })
    local client = rpc.new({ env = world.env, transport = world:transport("10.9.0.1"), host = "10.9.0.1", bootstrap = bs })
    assert(client:start())
    local target = crypto.hash("lossy")
    local q = client:find_node(target)
    local _, err = run_query(world, q)
    assert.is_nil(err)
    assert.is_true(#q.closest_replies >= 15)
    assert.is_true(world.net.stats.lost > 0)
    assert.is_true(#nodes == 31)
  end)

  it("times out requests after the retries with REQUEST_TIMEOUT", function()
    local world = sim.world({ seed = 2 })
    local a = rpc.new({ env = world.env, transport = world:transport("10.0.0.1"), host = "10.0.0.1" })
    assert(a:start())
    local err, at
    local t0 = world:now()
    a:ping({ host = "10.0.0.99", port = 1 }, nil, nil, function(e)
      err = e
      at = world:now()
    end)
    world:run({ until_fn = function() return err end, max_ms = 10000 })
    assert.are.equal("REQUEST_TIMEOUT", err.code)
    assert.are.equal(4000, at - t0) -- sent at 0, 1, 2, 3 s
    assert.are.equal(4, world.net.stats.sent)
  end)

  it("tokens are valid for the requesting host and rotate", function()
    local world, nodes = network(4)
    local server = nodes[2]
    local tok = server.io:token("10.9.0.1", 1)
    assert.are.equal(tok, server.io:token("10.9.0.1", 1))
    assert.are_not.equal(tok, server.io:token("10.9.0.2", 1))
    world:run({ max_ms = 7600 })
    assert.are.equal(tok, server.io:token("10.9.0.1", 0)) -- moved to the old slot
    world:run({ max_ms = 7600 })
    assert.are_not.equal(tok, server.io:token("10.9.0.1", 0))
    assert.are_not.equal(tok, server.io:token("10.9.0.1", 1))
  end)

  it("answers a bad token with INVALID_TOKEN and a fresh token", function()
    local world = network(4)
    local client = rpc.new({ env = world.env, transport = world:transport("10.9.0.1"), host = "10.9.0.1" })
    assert(client:start())
    local res
    client:request({ command = 4, target = crypto.hash("t"), token = string.rep("\1", 32), value = "x" }, { host = ip(1), port = 49737 }, nil, function(r) res = r end)
    world:run({ until_fn = function() return res end, max_ms = 5000 })
    assert.are.equal(msgs.INVALID_TOKEN, res.error)
    assert.are.equal(32, #res.token)
  end)

  it("PING_NAT replies to the port in its value", function()
    local world = network(3)
    local a = rpc.new({ env = world.env, transport = world:transport("10.9.0.1"), host = "10.9.0.1" })
    assert(a:start())
    local _, sport = a.io.server_socket:address()
    local got_on_server = false
    local prev = a.io.server_socket.onmessage
    a.io.server_socket.onmessage = function(d, h, p)
      got_on_server = true
      prev(d, h, p)
    end
    local w = require("ludx.compact").writer()
    w:uint16(sport)
    local ok
    a:request({ internal = true, command = msgs.PING_NAT, value = w:finish() }, { host = ip(1), port = 49737 }, nil, function(r) ok = r end)
    world:run({ until_fn = function() return ok end, max_ms = 5000 })
    assert.is_true(got_on_server)
    assert.are.equal(sport, ok.to.port)
  end)
end)
