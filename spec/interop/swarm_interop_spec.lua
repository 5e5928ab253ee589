-- ludx.swarm against the real Node hyperswarm 4.17.2 (over hyperdht 6.34.0,
-- spec/interop/peers/swarm-peer.js): on a Node testnet, a ludx swarm and a
-- Node swarm meet on a topic both ways (ludx server / Node client and the
-- reverse) and both as client+server at once, with exactly one connection
-- on each side; bytes flow both ways, hash-checked. A DHT of ludx nodes
-- only serves two Node swarms that find each other through it. Over a
-- swarm connection a ludx protomux channel and a Node protomux channel
-- carry several hundred messages of two types each way, in order, and a
-- close from either side is seen by the other.
local ludx = require "ludx"
local dht = require "ludx.dht"
local swarm = require "ludx.swarm"
local crypto = require "ludx.crypto"
local protomux = require "ludx.protomux"
local compact = require "ludx.compact"
local node = require "interop.node"
local H = require "helper"
local run = H.run

local hex, unhex = crypto.hex, crypto.unhex
local core = ludx.core
local KB = 1024

local req_seq = 0

-- Sends a command and waits for its reply (the line with its req).
local function call(peer, cmd, timeout)
  req_seq = req_seq + 1
  cmd.req = req_seq
  assert(peer:send(cmd))
  local deadline = ludx.now() + (timeout or 30000)
  while true do
    for i, line in ipairs(peer.lines) do
      if line.req == cmd.req then
        table.remove(peer.lines, i)
        if line.event == "error" then return nil, tostring(line.message), line.code end
        return line
      end
    end
    local line, msg = peer.p:read_json(math.max(0, deadline - ludx.now()))
    if not line then return nil, "no reply to " .. cmd.cmd .. ": " .. tostring(msg) .. "\n" .. peer:stderr() end
    peer.lines[#peer.lines + 1] = line
  end
end

-- The next kept or new line with this event.
local function expect(peer, event, timeout)
  local deadline = ludx.now() + (timeout or 30000)
  while true do
    for i, line in ipairs(peer.lines) do
      if line.event == event then
        table.remove(peer.lines, i)
        return line
      end
    end
    local line, msg = peer.p:read_json(math.max(0, deadline - ludx.now()))
    if not line then return nil, "no " .. event .. ": " .. tostring(msg) .. "\n" .. peer:stderr() end
    peer.lines[#peer.lines + 1] = line
  end
end

local function count(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

local function seed(n)
  return string.rep(string.char(n), 32)
end

local function bootstrap_of(peer)
  local bs = {}
  for _, b in ipairs(peer.ready.bootstrap) do bs[#bs + 1] = b.host .. ":" .. b.port end
  return bs
end

-- A connection handler that sends n bytes of the test data (seed), ends,
-- reads to the end and puts {sent_hash, received, received_hash} in q.
local function transfer(n, data_seed, q)
  return function(conn)
    local gen, sent = core.datagen(data_seed), core.hasher()
    local writer = ludx.spawn("writer", function()
      local left = n
      while left > 0 do
        local chunk = gen:next(math.min(16 * KB, left))
        sent:update(chunk)
        assert(conn:write(chunk, 30000))
        left = left - #chunk
      end
      conn:finish(30000)
    end)
    local got, received = core.hasher(), 0
    while true do
      local chunk = conn:read(nil, 60000)
      if not chunk then break end
      received = received + #chunk
      got:update(chunk)
    end
    writer:join(60000)
    q:put({ sent_hash = sent:hex(), received = received, received_hash = got:hex(), key = conn.remote_public_key })
  end
end

-- Waits until cond() holds, checking every 50 ms.
local function eventually(cond, what, timeout)
  local deadline = ludx.now() + (timeout or 30000)
  while not cond() do
    if ludx.now() > deadline then error("never: " .. what, 2) end
    ludx.sleep(50)
  end
end

describe("interop with Node hyperswarm", function()
  for _, dir in ipairs({ "ludx server, Node client", "Node server, ludx client" }) do
    it(dir .. ": one connection, 256 KB each way, hashes checked", run(function()
      local ludx_serves = dir:match("^ludx server") ~= nil
      local peer = assert(node.start("swarm-peer.js", { size = 4, seed = hex(seed(2)), bytes = 256 * KB, dataSeed = 7 }, 60000))
      local sw = assert(swarm.new({ bootstrap = bootstrap_of(peer), host = "127.0.0.1", port = 0, firewalled = false,
        keypair = dht.keypair(seed(1)) }))
      local q = ludx.queue()
      sw:on_connection(transfer(256 * KB, 8, q))
      local topic = dht.hash("swarm interop " .. dir)
      if ludx_serves then
        assert(sw:join(topic, { server = true, client = false }):flushed(30000))
        assert(call(peer, { cmd = "join", topic = hex(topic), server = false, client = true }, 30000))
        assert(call(peer, { cmd = "flush" }, 30000))
      else
        assert(call(peer, { cmd = "join", topic = hex(topic), server = true, client = false }, 30000))
        assert(sw:join(topic, { server = false, client = true }):flushed(30000))
        assert(sw:flush(30000))
      end
      local conn = assert(expect(peer, "connection", 30000))
      assert.equals(hex(sw.keypair.public_key), conn.remotePublicKey)
      assert.equals(not ludx_serves, conn.isInitiator == false)
      local done = assert(expect(peer, "done", 60000))
      local mine = assert(q:get(60000))
      assert.equals(256 * KB, done.received)
      assert.equals(256 * KB, mine.received)
      assert.equals(done.sentHash, mine.received_hash)
      assert.equals(mine.sent_hash, done.receivedHash)
      assert.equals(unhex(peer.ready.publicKey), mine.key)
      -- exactly one connection was made on each side
      local st = sw:stats()
      assert.equals(1, st.client_opened + st.server_opened)
      assert.equals(0, st.duplicates)
      assert.is_nil(peer.lines[1] and peer.lines[1].event == "connection" and peer.lines[1] or nil)
      sw:close(5000)
      peer:close()
    end, 120000))
  end

  it("both client and server at once: exactly one connection, the same on both sides", run(function()
    local peer = assert(node.start("swarm-peer.js", { size = 4, seed = hex(seed(4)), bytes = -1 }, 60000))
    -- both orders of the keys: the larger one's dial is the one kept
    local dials_met = 0
    for round, s in ipairs({ 3, 5, 8, 9 }) do
      local sw = assert(swarm.new({ bootstrap = bootstrap_of(peer), host = "127.0.0.1", port = 0, firewalled = false,
        keypair = dht.keypair(seed(s)) }))
      sw:on_connection(function(conn) while conn:read() do end end)
      local topic = dht.hash("swarm interop both " .. round)
      local d = sw:join(topic, { server = true, client = false })
      assert(d:flushed(30000))
      assert(call(peer, { cmd = "join", topic = hex(topic), server = true, client = false }, 30000))
      -- both look up at once: both find the other and dial
      assert(peer:send({ cmd = "refresh", topic = hex(topic), server = true, client = true }))
      d:refresh({ server = true, client = true })
      assert(d:flushed(30000))
      assert(sw:flush(30000))
      assert(call(peer, { cmd = "flush" }, 30000))
      local node_key = unhex(peer.ready.publicKey)
      local st
      eventually(function()
        st = assert(call(peer, { cmd = "status" }))
        return #st.connections == 1 and count(sw.connections) == 1 and sw:stats().connecting == 0
      end, "one connection on each side")
      local conn = sw.connections[node_key]
      assert.truthy(conn)
      local theirs = st.connections[1]
      assert.equals(hex(sw.keypair.public_key), theirs.remotePublicKey)
      -- the same connection on both sides: one handshake, opposite roles
      assert.equals(hex(conn.handshake_hash), theirs.handshakeHash)
      assert.equals(not conn.initiator, theirs.isInitiator)
      -- when both dials met, the larger key's dial is the one kept
      local stats = sw:stats()
      if stats.duplicates > 0 then
        assert.equals(swarm._key_greater(sw.keypair.public_key, node_key), conn.initiator)
      end
      dials_met = dials_met + stats.duplicates
      -- the one both kept is one connection: bytes written on one side arrive on the other
      local ok = conn:write("ping")
      assert.is_true(ok)
      assert(sw:leave(topic))
      assert(call(peer, { cmd = "leave", topic = hex(topic) }, 30000))
      sw:close(5000)
      -- the Node side sees that one close
      assert(expect(peer, "close", 30000))
      peer.lines = {}
    end
    print(string.format("swarm interop: dials that met (duplicates resolved) over 4 rounds: %d", dials_met))
    peer:close()
  end, 180000))

  it("a DHT of ludx nodes only serves two Node swarms that find each other", run(function()
    local tn = assert(dht.testnet(5, { timeout = 20000 }))
    local bs = table.concat(tn.bootstrap, ",")
    local a = assert(node.start("swarm-peer.js", { bootstrap = bs, seed = hex(seed(6)), bytes = 128 * KB, dataSeed = 11 }, 60000))
    local b = assert(node.start("swarm-peer.js", { bootstrap = bs, seed = hex(seed(7)), bytes = 128 * KB, dataSeed = 12 }, 60000))
    local topic = dht.hash("only ludx nodes here")
    assert(call(a, { cmd = "join", topic = hex(topic), server = true, client = false }, 30000))
    assert(call(b, { cmd = "join", topic = hex(topic), server = false, client = true }, 30000))
    local da = assert(expect(a, "done", 60000))
    local db = assert(expect(b, "done", 60000))
    assert.equals(b.ready.publicKey, da.remotePublicKey)
    assert.equals(a.ready.publicKey, db.remotePublicKey)
    assert.equals(128 * KB, da.received)
    assert.equals(da.sentHash, db.receivedHash)
    assert.equals(db.sentHash, da.receivedHash)
    -- the ludx nodes stored the Node announcement
    local found = false
    local probe = assert(tn:create_node())
    for r in probe:lookup(topic) do
      for _, p in ipairs(r.peers) do
        if hex(p.public_key) == a.ready.publicKey then found = true end
      end
    end
    assert.is_true(found)
    a:close()
    b:close()
    tn:destroy()
  end, 120000))

  for _, closer in ipairs({ "ludx", "Node" }) do
    it("a protomux channel over the swarm connection: 300 messages of two types each way in order, "
      .. closer .. " closes", run(function()
      local N = 300
      local peer = assert(node.start("swarm-peer.js", { size = 4, seed = hex(seed(10)), mux = N,
        muxClose = closer == "Node" }, 60000))
      local sw = assert(swarm.new({ bootstrap = bootstrap_of(peer), host = "127.0.0.1", port = 0, firewalled = false,
        keypair = dht.keypair(seed(11)) }))
      local q = ludx.queue()
      sw:on_connection(function(conn)
        local mux = protomux.from(conn)
        local ch = assert(mux:channel({ protocol = "swarm-interop/1", handshake = compact.string,
          messages = { compact.string, compact.uint } }))
        assert(ch:open("ludx hello"))
        local hs = assert(ch:opened(30000))
        local sender = ludx.spawn("mux sender", function()
          for i = 1, N do
            assert(ch:send(1, "ludx line " .. i))
            assert(ch:send(2, i))
          end
        end)
        local got = {}
        for _ = 1, 2 * N do
          local i, v = ch:recv(30000)
          if not i then break end
          got[#got + 1] = { i, v }
        end
        sender:join(30000)
        if closer == "ludx" then ch:close() end
        local after, _, code = ch:recv(30000) -- nil once closed (by either side)
        q:put({ handshake = hs, got = got, after = after, code = code, closed = ch.closed })
      end)
      local topic = dht.hash("swarm interop protomux " .. closer)
      assert(call(peer, { cmd = "join", topic = hex(topic), server = true, client = false }, 30000))
      assert(sw:join(topic, { server = false, client = true }):flushed(30000))
      local open = assert(expect(peer, "mux-open", 30000))
      assert.equals("ludx hello", open.handshake)
      assert.equals(hex(sw.keypair.public_key), open.remotePublicKey)
      -- ludx received Node's messages in order, then saw the close
      local mine = assert(q:get(60000))
      assert.equals("node hello", mine.handshake)
      assert.equals(2 * N, #mine.got)
      for k = 1, N do
        assert.same({ 1, "node line " .. k }, mine.got[2 * k - 1])
        assert.same({ 2, k }, mine.got[2 * k])
      end
      assert.is_nil(mine.after)
      assert.is_nil(mine.code)
      assert.is_true(mine.closed)
      -- Node received ours in order, then saw the close
      for k = 1, N do
        local a = assert(expect(peer, "mux-message", 30000))
        assert.same({ 0, "ludx line " .. k }, { a.type, a.value })
        local b = assert(expect(peer, "mux-message", 30000))
        assert.same({ 1, k }, { b.type, b.value })
      end
      local closed = assert(expect(peer, "mux-close", 30000))
      assert.equals(closer == "ludx", closed.isRemote)
      assert.equals(2 * N, closed.received)
      sw:close(5000)
      peer:close()
    end, 120000))
  end

  it("examples/chat.lua and examples/node/chat.js talk in one room", run(function()
    local process = require "ludx.process"
    local tn = assert(dht.testnet(4, { timeout = 20000 }))
    local bs = tn.bootstrap[1]
    local lchat = assert(process.spawn(H.ludx_bin, { H.root .. "/examples/chat.lua", "--bootstrap", bs, "interop room" }))
    local l_key = assert(assert(lchat:read_line(20000)):match("^joined interop room as (%x+)$"))
    local nchat = assert(process.spawn("node", { H.root .. "/examples/node/chat.js", "--bootstrap", bs, "--port", "0", "interop room" },
      { env = { NODE_PATH = node.dir .. "/node_modules", PATH = os.getenv("PATH") } }))
    local n_key = assert(assert(nchat:read_line(20000)):match("^joined interop room as (%x+)$"))
    assert(lchat:expect(n_key .. " joined", 30000, true))
    assert(nchat:expect(l_key .. " joined", 30000, true))
    lchat:write("hello from ludx\n")
    assert(nchat:expect(l_key .. ": hello from ludx", 20000, true))
    nchat:write("hello from node\n")
    assert(lchat:expect(n_key .. ": hello from node", 20000, true))
    nchat:close_stdin()
    assert(lchat:expect(n_key .. " left", 20000, true))
    assert.equals(0, nchat:wait(20000))
    lchat:close_stdin()
    assert.equals(0, lchat:wait(20000))
    nchat:close()
    lchat:close()
    tn:destroy()
  end, 120000))
end)
