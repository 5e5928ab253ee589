-- ludx.swarm on a ludx testnet: topics, one connection per key when both
-- dial, reconnect, leave/close/destroy, bans, firewall, and the caps that
-- bound what a hostile DHT can make a swarm remember.
local ludx = require "ludx"
local dht = require "ludx.dht"
local swarm = require "ludx.swarm"
local compact = require "ludx.compact"
local hm = require "ludx.dht.hyperdht_messages"
local H = require "helper"
local run = H.run

local function seed(n)
  return string.rep(string.char(n), 32)
end

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

local function new_swarm(tn, o)
  o = o or {}
  o.dht = o.dht or assert(tn:create_node())
  return assert(swarm.new(o))
end

-- Waits until cond() holds (checked whenever a task runs, at most every 20 ms).
local function eventually(cond, what, timeout)
  local deadline = ludx.now() + (timeout or 20000)
  while not cond() do
    if ludx.now() > deadline then error("never: " .. what, 2) end
    ludx.sleep(20)
  end
end

describe("ludx.swarm", function()
  it("two swarms meet on a topic and talk; one connection each", run(function()
    local tn = assert(dht.testnet(4))
    local a = new_swarm(tn, { keypair = dht.keypair(seed(1)) })
    local b = new_swarm(tn, { keypair = dht.keypair(seed(2)) })
    local got = ludx.queue()
    a:on_connection(function(conn, info)
      assert.equals(b.keypair.public_key, info.public_key)
      assert.equals(b.keypair.public_key, conn.remote_public_key)
      conn:write("hello from a")
      got:put("a:" .. tostring(conn:read()))
      conn:read()
    end)
    b:on_connection(function(conn, info)
      assert.equals(a.keypair.public_key, info.public_key)
      conn:write("hello from b")
      got:put("b:" .. tostring(conn:read()))
      conn:read()
    end)
    local topic = dht.hash("swarm spec topic")
    local da = assert(a:join(topic, { server = true, client = false }))
    assert.is_true(da:flushed(20000))
    local db = assert(b:join(topic, { server = false, client = true }))
    assert.is_true(db:flushed(20000))
    local x, y = got:get(20000), got:get(20000)
    local seen = { [x] = true, [y] = true }
    assert.is_true(seen["a:hello from b"])
    assert.is_true(seen["b:hello from a"])
    assert.equals(1, count(a.connections))
    assert.equals(1, count(b.connections))
    assert.truthy(a.peers[b.keypair.public_key])
    assert.is_false(a.peers[b.keypair.public_key].client)
    assert.is_true(b.peers[a.keypair.public_key].client)
    a:destroy()
    b:destroy()
    tn:destroy()
  end, 60000))

  it("both as client and server at once: exactly one connection", run(function()
    local tn = assert(dht.testnet(4))
    for round = 1, 2 do
      local a = new_swarm(tn, { keypair = dht.keypair(seed(10 + round)) })
      local b = new_swarm(tn, { keypair = dht.keypair(seed(20 + round)) })
      local opened = { a = 0, b = 0 }
      a:on_connection(function(conn) opened.a = opened.a + 1 conn:read() end)
      b:on_connection(function(conn) opened.b = opened.b + 1 conn:read() end)
      local topic = dht.hash("both ways " .. round)
      -- both announced first, then both look up at once: both dial
      local da = a:join(topic, { server = true, client = false })
      local db = b:join(topic, { server = true, client = false })
      assert(da:flushed(20000))
      assert(db:flushed(20000))
      da:refresh({ client = true })
      db:refresh({ client = true })
      assert(da:flushed(20000))
      assert(db:flushed(20000))
      assert(a:flush(20000))
      assert(b:flush(20000))
      eventually(function() return count(a.connections) == 1 and count(b.connections) == 1 end, "one connection each")
      -- both keep the same one (what one wrote, the other reads)
      local ca, cb = a.connections[b.keypair.public_key], b.connections[a.keypair.public_key]
      assert.equals(ca.handshake_hash, cb.handshake_hash)
      assert.are_not.equal(ca.initiator, cb.initiator)
      -- when the dials met, the larger key's dial is the one kept
      local big = swarm._key_greater(a.keypair.public_key, b.keypair.public_key) and ca or cb
      if a:stats().duplicates + b:stats().duplicates > 0 then assert.is_true(big.initiator) end
      a:destroy()
      b:destroy()
    end
    tn:destroy()
  end, 90000))

  it("the duplicate rule: the larger key's dial wins on both sides", function()
    local big, small = string.rep("\255", 32), string.rep("\1", 32)
    assert.is_true(swarm._key_greater(big, small))
    assert.is_false(swarm._key_greater(small, big))
    assert.is_true(swarm._key_greater("\128" .. string.rep("\0", 31), "\127" .. string.rep("\255", 31)))
  end)

  it("a peer that comes back while its old connection carried data both ways replaces it", run(function()
    local tn = assert(dht.testnet(4))
    local a = new_swarm(tn)
    local b = new_swarm(tn)
    b:on_connection(function(conn) while conn:read() do end end)
    assert(b:listen(20000))
    a:on_connection(function(conn) while conn:read() do end end)
    assert(a:join_peer(b.keypair.public_key))
    eventually(function() return b.connections[a.keypair.public_key] ~= nil end, "a connection")
    local old = b.connections[a.keypair.public_key]
    local mine = a.connections[b.keypair.public_key]
    assert(mine:write("x"))
    assert(old:write("y"))
    eventually(function() local s = old:stats() return s.frames_in > 0 and s.frames_out > 0 end, "data both ways")
    -- a comes back on a new connection (as after losing the old one)
    local again = assert(a.dht:connect(b.keypair.public_key, { keypair = a.keypair }))
    eventually(function() return b.connections[a.keypair.public_key] ~= old end, "the new connection kept")
    assert.is_true(old.closed or old.err ~= nil)
    assert.equals(1, count(b.connections))
    assert.equals(1, b:stats().duplicates)
    again:close()
    a:destroy()
    b:destroy()
    tn:destroy()
  end, 60000))

  it("a peer still on the topic is dialed again after its connection ends", run(function()
    local tn = assert(dht.testnet(4))
    local a = new_swarm(tn)
    local b = new_swarm(tn, { backoffs = { 50, 100, 150, 1000 }, jitter = 10 })
    local n = 0
    a:on_connection(function(conn)
      n = n + 1
      if n == 1 then return end -- the handler returns: the first connection closes
      while conn:read() do end
    end)
    b:on_connection(function(conn) while conn:read() do end end)
    local topic = dht.hash("come back")
    assert(a:join(topic, { server = true, client = false }):flushed(20000))
    assert(b:join(topic, { server = false, client = true }):flushed(20000))
    eventually(function() return n >= 2 and count(b.connections) == 1 end, "a second connection")
    local st = b:stats()
    assert.equals(2, st.client_opened)
    assert.equals(1, st.client_closed)
    a:destroy()
    b:destroy()
    tn:destroy()
  end, 60000))

  it("destroy ends every task and timer the swarm started", run(function()
    local tn = assert(dht.testnet(4))
    local a = new_swarm(tn)
    local b = new_swarm(tn)
    a:on_connection(function(conn) while conn:read() do end end)
    b:on_connection(function(conn) while conn:read() do end end)
    local topic = dht.hash("all gone")
    assert(a:join(topic):flushed(20000))
    assert(b:join(topic):flushed(20000))
    eventually(function() return count(a.connections) == 1 end, "a connection")
    local readers = {}
    for _, c in pairs(b.connections) do
      readers[#readers + 1] = ludx.spawn("reader", function() return c:read() end)
    end
    a:destroy()
    b:destroy()
    for _, r in ipairs(readers) do
      local v, _, code = r:join(5000)
      assert.is_nil(v)
      assert.is_string(code)
    end
    local function swarm_tasks()
      local n = 0
      for _, t in ipairs(ludx.tasks()) do
        if t.name:match("^swarm") then n = n + 1 end
      end
      return n
    end
    eventually(function() return swarm_tasks() == 0 end, "no swarm task left")
    for _, p in pairs(a.peers) do assert.is_nil(p.retry) end
    for _, p in pairs(b.peers) do assert.is_nil(p.retry) end
    assert.is_nil(next(a.connections))
    assert.is_nil(next(b.all))
    tn:destroy()
  end, 60000))

  it("the periodic refresh finds a server that joined after the first lookup", run(function()
    local tn = assert(dht.testnet(4))
    local b = new_swarm(tn, { refresh_interval = 300, refresh_jitter = 0 })
    b:on_connection(function(conn) while conn:read() do end end)
    local topic = dht.hash("later")
    local d = b:join(topic, { server = false, client = true })
    assert(d:flushed(20000))
    assert.equals(0, count(b.connections))
    local a = new_swarm(tn)
    a:on_connection(function(conn) while conn:read() do end end)
    assert(a:join(topic, { server = true, client = false }):flushed(20000))
    eventually(function() return count(b.connections) == 1 end, "found by a refresh")
    assert.is_true(d.discovery.refreshes >= 2)
    a:destroy()
    b:destroy()
    tn:destroy()
  end, 60000))

  it("join_peer connects by key and reconnects after the peer drops it", run(function()
    local tn = assert(dht.testnet(4))
    local a = new_swarm(tn, { backoffs = { 50, 100, 150, 1000 }, jitter = 10 })
    local b = new_swarm(tn)
    assert(b:listen(20000))
    local n = 0
    b:on_connection(function(conn)
      n = n + 1
      if n == 1 then return end -- the first one ends at once
      conn:read()
    end)
    assert(a:join_peer(b.keypair.public_key))
    eventually(function() return n >= 2 and count(a.connections) == 1 end, "a reconnect")
    assert(a:leave_peer(b.keypair.public_key))
    a:destroy()
    b:destroy()
    tn:destroy()
  end, 60000))

  it("leave unannounces; close and destroy end everything and are idempotent", run(function()
    local tn = assert(dht.testnet(4))
    local a = new_swarm(tn)
    local topic = dht.hash("leave me")
    local d = a:join(topic, { server = true, client = false })
    assert(d:flushed(20000))
    local node = assert(tn:create_node())
    local function announced()
      for r in node:lookup(topic) do
        for _, p in ipairs(r.peers) do
          if p.public_key == a.keypair.public_key then return true end
        end
      end
      return false
    end
    assert.is_true(announced())
    assert(a:leave(topic))
    assert.is_false(announced())
    assert.is_nil((d:flushed(100)))
    -- leave and join again at once: the rejoin's announce comes after the
    -- old unannounce, so the record stays
    d = a:join(topic, { server = true, client = false })
    assert(d:flushed(20000))
    local leaver = ludx.spawn("leaver", function() return a:leave(topic) end)
    ludx.yield()
    d = a:join(topic, { server = true, client = false })
    assert(leaver:join(20000))
    assert(d:flushed(20000))
    assert.is_true(announced())
    assert(a:leave(topic))
    -- close wakes waiters with a code, and twice is fine
    local b = new_swarm(tn)
    local d2 = b:join(dht.hash("never flushed"), { client = true, server = false })
    local waiter = ludx.spawn("waiter", function() return b:flush() end)
    b:close(5000)
    local r = { waiter:join() }
    assert.are.same({ nil, "swarm closed", "SWARM_CLOSED" }, r)
    assert.is_true(b:close())
    assert.is_true(b:destroy())
    assert.is_nil((d2:flushed()))
    local ok, _, code = b:join(topic)
    assert.is_nil(ok)
    assert.equals("SWARM_CLOSED", code) -- the end it had
    a:destroy()
    a:destroy()
    tn:destroy()
  end, 60000))

  it("firewall and ban refuse a peer", run(function()
    local tn = assert(dht.testnet(4))
    local bad = dht.keypair(seed(40))
    local a = new_swarm(tn, { firewall = function(pk) return pk == bad.public_key end })
    assert(a:listen(20000))
    local c = new_swarm(tn, { keypair = bad })
    local ok = c:join_peer(a.keypair.public_key)
    assert.is_true(ok)
    eventually(function() return a.peers[bad.public_key] and a.peers[bad.public_key].banned end, "a ban")
    assert.equals(0, count(a.connections))
    -- a handler may ban too: the peer stays refused
    local good = new_swarm(tn)
    a:on_connection(function(conn, info) info:ban() conn:close() end)
    good:join_peer(a.keypair.public_key)
    eventually(function() return a.peers[good.keypair.public_key] and a.peers[good.keypair.public_key].banned end, "ban")
    assert.is_true(a._firewalled(a, good.keypair.public_key, nil, true))
    a:destroy()
    c:destroy()
    good:destroy()
    tn:destroy()
  end, 60000))

  -- A hostile DHT: every node answers each LOOKUP of the topic with 20 new
  -- peers (valid keys nobody serves). Without a cap the swarm remembers
  -- every one (~100 per refresh here); with it, at most max_peer_table,
  -- and the dials in flight stay at max_parallel.
  it("a DHT that returns endless fake peers: the peer table and queue stay bounded", run(function()
    local tn = assert(dht.testnet(5))
    local served = 0
    for _, n in ipairs(tn.nodes) do
      local p = n:raw().persistent
      p.on_lookup = function(_, req)
        local records = {}
        for i = 1, 20 do
          local relays = {}
          for j = 1, 40 do relays[j] = { host = "127.0.0.1", port = 1000 + j } end
          records[i] = compact.encode(hm.peer, { public_key = dht.keypair().public_key, relay_addresses = relays })
        end
        served = served + 20
        req:reply(compact.encode(hm.lookup_raw_reply, { peers = records, bump = 0 }))
      end
    end
    local cap = 100
    local a = new_swarm(tn, { max_peer_table = cap, connect_timeout = 5000 })
    local d = a:join(dht.hash("hostile topic"), { server = false, client = true })
    local peak, peak_connecting = 0, 0
    for _ = 1, 10 do
      d:refresh()
      assert(d.discovery:flushed(20000))
      local st = a:stats()
      peak = math.max(peak, st.peers)
      peak_connecting = math.max(peak_connecting, st.connecting)
      assert.is_true(st.queued <= cap)
    end
    print(string.format("swarm hostile DHT: %d fake peers served, peer table peak %d (cap %d), dropped %d, dials in flight peak %d",
      served, peak, cap, a:stats().peers_dropped, peak_connecting))
    assert.is_true(served > 3 * cap)
    assert.is_true(peak <= cap)
    assert.is_true(a:stats().peers_dropped > 0)
    assert.is_true(peak_connecting <= swarm.MAX_PARALLEL)
    for _, p in pairs(a.peers) do assert.is_true(#(p.relay_addresses or {}) <= 3) end
    a:destroy()
    -- nothing per peer outlives the swarm: its reconnect timers are gone
    for _, p in pairs(a.peers) do assert.is_nil(p.retry) end
    tn:destroy()
  end, 90000))

  it("max_peers and max_client_connections cap the dials a client makes", run(function()
    local tn = assert(dht.testnet(4))
    local topic = dht.hash("swarm spec caps")
    local servers = {}
    for i = 1, 4 do
      local s = new_swarm(tn, { keypair = dht.keypair(seed(40 + i)) })
      s:on_connection(function(conn) while conn:read() do end end)
      assert(s:join(topic, { server = true, client = false }):flushed(20000))
      servers[i] = s
    end
    local by_peers = new_swarm(tn, { keypair = dht.keypair(seed(50)), max_peers = 2 })
    local by_client = new_swarm(tn, { keypair = dht.keypair(seed(51)), max_client_connections = 1 })
    for _, c in ipairs({ by_peers, by_client }) do
      c:on_connection(function(conn) while conn:read() do end end)
      assert(c:join(topic, { server = false, client = true }):flushed(20000))
      assert(c:flush(20000))
    end
    eventually(function() return count(by_peers.connections) == 2 and count(by_client.connections) == 1 end,
      "the caps' connections")
    -- four servers were found, the rest stay queued: no more dials start
    assert.equals(4, count(by_peers.peers))
    assert.equals(0, by_peers:stats().connecting)
    assert.equals(0, by_client:stats().connecting)
    assert.equals(2, count(by_peers.connections))
    assert.equals(1, count(by_client.connections))
    by_peers:destroy()
    by_client:destroy()
    for _, s in ipairs(servers) do s:destroy() end
    tn:destroy()
  end, 90000))

  it("max_server_connections refuses clients past the cap at the handshake", run(function()
    local tn = assert(dht.testnet(4))
    local a = new_swarm(tn, { max_server_connections = 2 })
    a:on_connection(function(conn) while conn:read() do end end)
    assert(a:listen(20000))
    local others = {}
    for i = 1, 4 do
      others[i] = new_swarm(tn, { backoffs = { 100000, 100000, 100000, 100000 } })
      assert(others[i]:join_peer(a.keypair.public_key))
    end
    eventually(function()
      local done = 0
      for _, o in ipairs(others) do
        local st = o:stats()
        if st.connecting == 0 and st.attempted > 0 then done = done + 1 end
      end
      return done == 4
    end, "every dial ended")
    local st = a:stats()
    print(string.format("swarm server cap: %d opened, %d refused (cap 2)", st.server_opened, st.server_refused))
    assert.is_true(st.server_opened <= 2)
    assert.is_true(count(a.connections) <= 2)
    assert.is_true(st.server_refused >= 2)
    for _, o in ipairs(others) do o:destroy() end
    a:destroy()
    tn:destroy()
  end, 90000))

  it("a closed connection keeps its slot until the peer's END: a peer that never ends gets no more", run(function()
    local tn = assert(dht.testnet(4))
    local a = new_swarm(tn, { max_server_connections = 1, finish_timeout = 60000 })
    a:on_connection(function(conn) conn:write("bye") end) -- then the swarm closes it
    assert(a:listen(20000))
    local node = assert(tn:create_node())
    local k1, k2 = dht.keypair(seed(90)), dht.keypair(seed(91))
    local c1 = assert(node:connect(a.keypair.public_key, { keypair = k1 }))
    assert.equals("bye", c1:read(nil, 20000))
    assert.is_nil((c1:read(nil, 20000))) -- the swarm's END; c1 does not end
    eventually(function() return a:stats().connections == 0 end, "a's SecretStream closed")
    local st = a:stats()
    assert.equals(1, st.lingering)
    assert.equals(1, a.server_connections)
    -- the slot is still taken: a second key is refused
    local refused = st.server_refused
    local c2 = node:connect(a.keypair.public_key, { keypair = k2, timeout = 3000 })
    assert.is_nil(c2)
    assert.is_true(a:stats().server_refused > refused)
    -- c1's END lets the stream go, and with it the slot
    c1:close()
    eventually(function() return a.server_connections == 0 end, "the slot freed")
    assert.equals(0, a:stats().lingering)
    c2 = assert(node:connect(a.keypair.public_key, { keypair = k2 }))
    assert.equals("bye", c2:read(nil, 20000))
    c2:close()
    -- destroy resets a stream still lingering
    local c3 = assert(node:connect(a.keypair.public_key, { keypair = k1 }))
    assert.equals("bye", c3:read(nil, 20000))
    eventually(function() return a:stats().lingering == 1 end, "c3's stream lingers")
    a:destroy()
    assert(c3.udx_stream:wait_closed(20000))
    assert.equals("ECONNRESET", select(2, c3.udx_stream:error()))
    node:destroy()
    tn:destroy()
  end, 90000))

  it("flush waits for a queued peer whose client slot is held by a lingering stream", run(function()
    local tn = assert(dht.testnet(4))
    local t1, t2 = dht.hash("swarm spec flush linger 1"), dht.hash("swarm spec flush linger 2")
    -- s1 holds its end (no END) until told: a's closed stream lingers
    local release = ludx.waiters()
    local s1 = new_swarm(tn, { keypair = dht.keypair(seed(60)) })
    s1:on_connection(function() release:wait("released", 60000) end)
    assert(s1:join(t1, { server = true, client = false }):flushed(20000))
    local s2 = new_swarm(tn, { keypair = dht.keypair(seed(61)) })
    s2:on_connection(function(conn) while conn:read() do end end)
    assert(s2:join(t2, { server = true, client = false }):flushed(20000))
    local a = new_swarm(tn, { keypair = dht.keypair(seed(62)), max_client_connections = 1, finish_timeout = 60000,
      backoffs = { 100000, 100000, 100000, 100000 } })
    a:on_connection(function() end) -- then the swarm closes it
    assert(a:join(t1, { server = false, client = true }):flushed(20000))
    assert(a:flush(20000))
    eventually(function() return a:stats().lingering == 1 end, "a's stream to s1 lingers")
    assert.equals(1, a.client_connections)
    -- s2 is found and queued: the one slot is s1's lingering stream's
    local session = a:join(t2, { server = false, client = true })
    assert(a.discoveries[t2]:flushed(20000)) -- the lookup only
    assert.equals(1, a:stats().queued)
    local flusher = ludx.spawn("flush", function()
      local ok, msg, code = a:flush(60000)
      return ok, msg, code, a:stats().queued
    end)
    local flushed = ludx.spawn("flushed", function() return session:flushed(60000), a:stats().queued end)
    for _ = 1, 5 do ludx.yield() end
    -- s2 still waits for the slot
    assert.equals("waiting", flusher.state)
    assert.equals("waiting", flushed.state)
    -- s1 ends its half: a's stream closes, the slot frees, s2 is dialed
    release:wake_all(true)
    assert.are.same({ true, nil, nil, 0 }, { flusher:join(60000) })
    assert.are.same({ true, 0 }, { flushed:join(60000) })
    eventually(function() return a:stats().client_opened == 2 end, "a's connection to s2")
    for _, s in ipairs({ a, s1, s2 }) do s:destroy() end
    tn:destroy()
  end, 90000))

  it("a close that waits for a writer still ends gracefully: the peer gets every byte, then EOF", run(function()
    local tn = assert(dht.testnet(4))
    -- the handler's own close has a longer timeout than the swarm's
    local a = new_swarm(tn, { finish_timeout = 200 })
    local big = string.rep("0123456789abcdef", 512 * 1024) -- 8 MB, one frame
    local wrote = ludx.queue()
    a:on_connection(function(conn)
      -- the writer holds the write lock until the reader takes its bytes;
      -- the close waits for it (the SecretStream is closed meanwhile)
      ludx.spawn("writer", function() wrote:put(conn:write(big)) end)
      ludx.sleep(0)
      conn:close(30000)
    end)
    assert(a:listen(20000))
    local node = assert(tn:create_node())
    local c = assert(node:connect(a.keypair.public_key, { keypair = dht.keypair(seed(92)) }))
    eventually(function() return a:stats().connections == 0 end, "a's SecretStream closed")
    -- the reader comes late, past finish_timeout + 1 s: the udx stream
    -- must still be there
    ludx.sleep(1500)
    local got = {}
    while true do
      local d, msg, code = c:read(nil, 20000)
      if not d then
        assert.is_nil(code, msg)
        break
      end
      got[#got + 1] = d
    end
    assert.equals(#big, #table.concat(got))
    assert.is_true(wrote:get(20000))
    c:close()
    eventually(function() return a.server_connections == 0 end, "the slot freed")
    a:destroy()
    node:destroy()
    tn:destroy()
  end, 90000))

  it("bans a handler makes against ever new keys stay within max_peer_table", run(function()
    local tn = assert(dht.testnet(4))
    local cap = 3
    local a = new_swarm(tn, { max_peer_table = cap })
    a:on_connection(function(conn, info) info:ban() conn:close() end)
    assert(a:listen(20000))
    local node = assert(tn:create_node())
    for i = 1, 2 * cap + 1 do
      -- a new key each time (a raw connection, so nothing dials again)
      local conn = node:connect(a.keypair.public_key, { keypair = dht.keypair(seed(100 + i)) })
      if conn then
        -- the handler's close ends the stream gracefully: read to its EOF
        while conn:read(nil, 20000) do end
        conn:close()
      end
    end
    eventually(function() return a:stats().banned == 2 * cap + 1 end, "every key banned")
    local st = a:stats()
    print(string.format("swarm bans: %d keys banned, %d remembered (cap %d), %d forgotten", st.banned, st.peers, cap,
      st.bans_forgotten))
    assert.is_true(st.peers <= cap)
    assert.equals(cap + 1, st.bans_forgotten)
    -- the latest bans hold
    assert.is_true(a.peers[dht.keypair(seed(100 + 2 * cap + 1)).public_key].banned)
    a:destroy()
    tn:destroy()
  end, 60000))

  it("a wrong cap raises at the caller's line, naming swarm.new and opts.x, before a DHT node is made", run(function()
    local tn = assert(dht.testnet(2))
    local function fds()
      local p = assert(io.popen("ls /proc/" .. ludx.core.getpid() .. "/fd"))
      local n = 0
      for _ in p:lines() do n = n + 1 end
      p:close()
      return n
    end
    -- what earlier tests left for the collector is closed first: a
    -- finalizer in between can only lower the count
    collectgarbage()
    collectgarbage()
    local before = fds()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, err = pcall(swarm.new, { bootstrap = tn.bootstrap, host = "127.0.0.1", port = 0, max_peers = 1.5 })
    assert.is_false(ok)
    assert.is_truthy(err:find("swarm_spec.lua:" .. line .. ": bad argument 'opts.max_peers' to 'swarm.new' " ..
      "(integer >= 0 expected, got number 1.5)", 1, true), err)
    ok, err = pcall(swarm.new, { bootstrap = tn.bootstrap, connect_timeout = "10" })
    assert.is_false(ok)
    assert.matches("bad argument 'opts.connect_timeout' to 'swarm.new' %(integer >= 0 expected, got string%)", err)
    -- the testnet's own nodes may hold a short-lived socket meanwhile (a
    -- firewall probe): a node made by the failed swarm.new would keep its
    -- sockets, so the count must come back within a few seconds
    local after, deadline = fds(), ludx.now() + 5000
    while after > before and ludx.now() < deadline do
      ludx.sleep(50)
      after = fds()
    end
    assert.is_true(after <= before, "a DHT node (its sockets) outlived the failed swarm.new: " .. before .. " -> " .. after)
    -- math.huge is "no cap"
    local a = new_swarm(tn, { max_client_connections = math.huge })
    assert.are.equal(math.huge, a.max_client_connections)
    a:destroy()
    tn:destroy()
  end))

  it("argument errors raise; a bad topic is EINVAL", run(function()
    local tn = assert(dht.testnet(2))
    local a = new_swarm(tn)
    assert.has_error(function() a:join(5) end)
    assert.has_error(function() a:on_connection("x") end)
    assert.has_error(function() swarm.new({ max_peers = -1, dht = a.dht }) end)
    local ok, _, code = a:join("short")
    assert.is_nil(ok)
    assert.equals("EINVAL", code)
    a:destroy()
    tn:destroy()
  end))
end)
