-- The task API of ludx.dht over real UDP sockets on loopback.
local ludx = require "ludx"
local dht = require "ludx.dht"
local H = require "helper"
local run = H.run

local function seed(n)
  return string.rep(string.char(n), 32)
end

describe("ludx.dht", function()
  it("starts a testnet whose nodes are persistent", run(function()
    local tn = assert(dht.testnet(4, { timeout = 20000 }))
    assert.are.equal(4, #tn.nodes)
    for _, n in ipairs(tn.nodes) do
      assert.is_true(n:is_persistent())
      local host, port = n:address()
      assert.are.equal("127.0.0.1", host)
      assert.are.equal(dht.hash(string.char(127, 0, 0, 1, port % 256, math.floor(port / 256))), n:id())
    end
    tn:destroy()
  end, 30000))

  it("announces and looks up, stores mutable and immutable values", run(function()
    local tn = assert(dht.testnet(5, { timeout = 20000 }))
    local a = assert(tn:create_node())
    local b = assert(tn:create_node())
    assert.is_false(a:is_persistent())
    local kp = dht.keypair(seed(1))
    local topic = dht.hash("ludx topic")
    local closest = assert(a:announce(topic, kp, { relay_addresses = { { host = "127.0.0.1", port = 1234 } } }))
    assert.is_true(#closest >= 3)
    local found = 0
    for reply in b:lookup(topic) do
      for _, p in ipairs(reply.peers) do
        if p.public_key == kp.public_key then
          found = found + 1
          assert.are.equal(1234, p.relay_addresses[1].port)
        end
      end
    end
    assert.is_true(found >= 3)

    assert(a:unannounce(topic, kp))
    local replies = assert(b:lookup(topic):collect())
    for _, r in ipairs(replies) do
      for _, p in ipairs(r.peers) do assert.are_not.equal(kp.public_key, p.public_key) end
    end

    local put = assert(a:immutable_put("some bytes"))
    assert.are.equal(dht.hash("some bytes"), put.hash)
    assert.are.equal("some bytes", (b:immutable_get(put.hash)))
    assert.is_nil(b:immutable_get(dht.hash("absent")))

    local m = assert(a:mutable_put(kp, "first", { seq = 1 }))
    assert.are.equal(1, m.seq)
    local got = assert(b:mutable_get(kp.public_key))
    assert.are.equal("first", got.value)
    local ok, msg, code = a:mutable_put(kp, "older", { seq = 0 })
    assert.is_nil(ok)
    assert.are.equal("SEQ_TOO_LOW", code)
    assert.is_string(msg)
    tn:destroy()
  end, 60000))

  it("the lookup iterator lets its body wait", run(function()
    local tn = assert(dht.testnet(4, { timeout = 20000 }))
    local a = assert(tn:create_node())
    local kp = dht.keypair(seed(2))
    local topic = dht.hash("slow reader")
    assert(a:announce(topic, kp))
    local n = 0
    for reply in a:lookup(topic) do
      ludx.sleep(10)
      n = n + #reply.peers
    end
    assert.is_true(n >= 1)
    tn:destroy()
  end, 60000))

  it("runs over the in-memory network on the real loop, with loss", run(function()
    local sim = require "ludx.dht.sim"
    local env = require("ludx.dht.env").env
    local net = sim.network(env, { loss = 0.05, seed = 3, latency = 1 })
    local transport = net:transport("127.0.0.1")
    local tn = assert(dht.testnet(6, { timeout = 30000, transport = transport }))
    local a = assert(tn:create_node({ transport = transport }))
    local b = assert(tn:create_node({ transport = transport }))
    local kp = dht.keypair(seed(3))
    local topic = dht.hash("in memory")
    assert(a:announce(topic, kp))
    local hit = false
    for reply in b:lookup(topic) do
      for _, p in ipairs(reply.peers) do hit = hit or p.public_key == kp.public_key end
    end
    assert.is_true(hit)
    assert.is_true(net.stats.lost > 0)
    tn:destroy()
  end, 60000))

  it("pings, and times out on a silent address", run(function()
    local tn = assert(dht.testnet(2, { timeout = 20000 }))
    local host, port = tn.nodes[1]:address()
    local res = assert(tn.nodes[2]:ping(host, port))
    assert.are.equal(0, res.error)
    local sock = require("ludx.udx").bind("127.0.0.1", 0)
    local _, silent = sock:address()
    local ok, msg, code = tn.nodes[2]:ping("127.0.0.1", silent)
    assert.is_nil(ok)
    assert.are.equal("REQUEST_TIMEOUT", code)
    assert.is_string(msg)
    sock:close()
    tn:destroy()
  end, 30000))

  it("a lookup with nobody to ask ends with no replies", run(function()
    local node = assert(dht.new({ bootstrap = {}, host = "127.0.0.1", port = 0 }))
    assert(node:ready(5000))
    local q = node:lookup(dht.hash("x"))
    assert.are.same({}, q:collect())
    local ok, _, code = node:announce(dht.hash("x"), dht.keypair())
    assert.is_nil(ok)
    assert.are.equal("TOO_FEW_NODES", code)
    node:destroy()
  end, 10000))

  it("names bad arguments", run(function()
    local node = assert(dht.new({ bootstrap = {}, host = "127.0.0.1", port = 0 }))
    assert.has_error(function() node:lookup(5) end, "bad argument 'topic' to 'lookup' (string expected, got number)")
    assert.has_error(function() node:announce(dht.hash("t"), {}) end)
    assert.has_error(function() node:immutable_put(42) end)
    assert.has_error(function() dht.new({ bootstrap = { "nohostport" } }) end)
    node:destroy()
  end))
end)
