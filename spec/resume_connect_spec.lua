-- Careful resume wired into dht connects: a node remembers what a
-- connection to an authenticated peer measured (per remote key and host)
-- when it closes, and the next connection to that key over that host
-- starts from it (Stream:set_resume before the first write), on both the
-- connecting and the accepting side. Another key, a short exchange or
-- opts.resume = false leave things as with a stranger.
local dht = require "ludx.dht"
local H = require "helper"
local run = H.run

local MiB = 1024 * 1024

local function seed(n)
  return string.rep(string.char(n), 32)
end

local function read_n(conn, n)
  local got = 0
  while got < n do
    local chunk = assert(conn:read(nil, 30000))
    got = got + #chunk
  end
  return got
end

local function wait_closed(stream)
  assert(stream:wait_closed(30000))
end

-- The server reads `bytes`, sends as many back, ends, closes.
local function server_for(node, kp, seen)
  local server = node:server(function(conn)
    seen[#seen + 1] = conn
    local bytes = tonumber(assert(conn:read(nil, 30000))) -- the first message: the size
    if bytes > 0 then
      read_n(conn, bytes)
      assert(conn:write(string.rep("s", bytes)))
    end
    conn:finish(30000)
    while conn:read(nil, 30000) do end
    conn:close()
  end)
  assert(server:listen(kp, 20000))
  return server
end

-- One connection that moves `bytes` each way; returns its udx stream (closed).
local function exchange(node, public_key, bytes, opts)
  local o = { timeout = 20000 }
  for k, v in pairs(opts or {}) do o[k] = v end
  local conn = assert(node:connect(public_key, o))
  local stream = conn.udx_stream
  assert(conn:write(string.format("%d", bytes)))
  if bytes > 0 then
    assert(conn:write(string.rep("c", bytes)))
    read_n(conn, bytes)
  end
  conn:finish(30000)
  while conn:read(nil, 30000) do end
  conn:close()
  wait_closed(stream)
  return stream
end

describe("careful resume over dht connect", function()
  it("a second connection to the same key starts from what the first measured; another key does not", run(function()
    local tn = assert(dht.testnet(3, { timeout = 20000 }))
    local snode = assert(tn:create_node())
    local s2node = assert(tn:create_node())
    local cnode = assert(tn:create_node())
    local skp, s2kp, ckp, c2kp = dht.keypair(seed(1)), dht.keypair(seed(3)), dht.keypair(seed(2)), dht.keypair(seed(4))
    local seen, seen2 = {}, {}
    local server = server_for(snode, skp, seen)
    local server2 = server_for(s2node, s2kp, seen2)
    assert.is_not_nil(cnode.resume)

    -- first contact: a stranger; a completed transfer of 1 MiB each way
    local s1 = exchange(cnode, skp.public_key, MiB, { keypair = ckp })
    assert.is_nil(s1.resumed_from)
    assert.is_nil(seen[1].udx_stream.resumed_from)
    wait_closed(seen[1].udx_stream)
    local host = "127.0.0.1"
    local ce = cnode.resume:get(skp.public_key, host)
    local se = snode.resume:get(ckp.public_key, host)
    assert.is_truthy(ce and ce.rate > 0 and ce.rtt_ms > 0)
    assert.is_truthy(se and se.rate > 0 and se.rtt_ms > 0)

    -- the same key again over the same host: both ends start from it
    local s2 = exchange(cnode, skp.public_key, 0, { keypair = ckp })
    assert.are.same({ rate = ce.rate, rtt_ms = ce.rtt_ms }, s2.resumed_from)
    assert.are.same({ rate = se.rate, rtt_ms = se.rtt_ms }, seen[2].udx_stream.resumed_from)

    -- another server key (same host): a stranger; another client key to the
    -- first server: a stranger to it
    local s3 = exchange(cnode, s2kp.public_key, 0, { keypair = ckp })
    assert.is_nil(s3.resumed_from)
    assert.is_nil(seen2[1].udx_stream.resumed_from)
    local s4 = exchange(cnode, skp.public_key, 0, { keypair = c2kp })
    assert.is_truthy(s4.resumed_from) -- the client still knows the server's key
    assert.is_nil(seen[3].udx_stream.resumed_from)
    -- the same key over another host is another path
    assert.is_nil(cnode.resume:get(skp.public_key, "::1"))
    assert.is_nil(cnode.resume:get(skp.public_key, "127.0.0.2"))

    -- opt-out per connect
    local s5 = exchange(cnode, skp.public_key, 0, { keypair = ckp, resume = false })
    assert.is_nil(s5.resumed_from)
    for _, c in ipairs(seen) do wait_closed(c.udx_stream) end
    for _, c in ipairs(seen2) do wait_closed(c.udx_stream) end
    server:close()
    server2:close()
    tn:destroy()
  end, 120000))

  it("remembers only connections that delivered min_bytes: short exchanges do not grow the store", run(function()
    local tn = assert(dht.testnet(3, { timeout = 20000 }))
    local snode = assert(tn:create_node({ resume = { max = 4 } }))
    local cnode = assert(tn:create_node())
    local skp = dht.keypair(seed(5))
    local seen = {}
    local server = server_for(snode, skp, seen)
    -- many authenticated clients (fresh keys, as anyone can make), each a
    -- handshake and a few bytes: nothing is remembered on either side
    for i = 1, 6 do
      exchange(cnode, skp.public_key, 0, { keypair = dht.keypair(seed(100 + i)) })
    end
    for _, c in ipairs(seen) do wait_closed(c.udx_stream) end
    assert.are.equal(0, snode.resume:count())
    assert.are.equal(0, cnode.resume:count())
    assert.are.equal(4, snode.resume.max)
    server:close()
    tn:destroy()
  end, 120000))

  it("opts.resume = false on the node: no store, nothing seeded", run(function()
    local tn = assert(dht.testnet(3, { timeout = 20000 }))
    local node = assert(tn:create_node({ resume = false }))
    assert.is_nil(node.resume)
    assert.has_error(function() dht.new({ resume = 5, bootstrap = tn.bootstrap, port = 0 }) end)
    tn:destroy()
  end, 60000))
end)
