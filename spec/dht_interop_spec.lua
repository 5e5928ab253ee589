-- ludx.dht against the real Node hyperdht 6.34 / dht-rpc 6.27
-- (spec/interop/peers/dht-testnet.js): bootstrap both ways, connections
-- both ways with data checked by hash, announce/lookup both ways, mutable
-- and immutable values written by one side and read by the other.
local ludx = require "ludx"
local dht = require "ludx.dht"
local crypto = require "ludx.crypto"
local json = require "ludx.json"
local node = require "interop.node"
local H = require "helper"
local run = H.run

local hex, unhex = crypto.hex, crypto.unhex
local core = ludx.core

local function seed(n)
  return string.rep(string.char(n), 32)
end

local req_seq = 0

-- Sends a command and waits for its reply (the line with its req).
local function call(peer, cmd, timeout)
  req_seq = req_seq + 1
  cmd.req = req_seq
  assert(peer:send(cmd))
  local deadline = ludx.now() + (timeout or 30000)
  -- replies may come out of order: look at kept lines first
  while true do
    for i, line in ipairs(peer.lines) do
      if line.req == cmd.req and line.event ~= "connection" and line.event ~= "connection-done" then
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

-- The next kept or new line with this event (and req, when given).
local function expect(peer, event, req, timeout)
  local deadline = ludx.now() + (timeout or 30000)
  while true do
    for i, line in ipairs(peer.lines) do
      if line.event == event and (req == nil or line.req == req) then
        table.remove(peer.lines, i)
        return line
      end
    end
    local line, msg = peer.p:read_json(math.max(0, deadline - ludx.now()))
    if not line then return nil, "no " .. event .. ": " .. tostring(msg) .. "\n" .. peer:stderr() end
    peer.lines[#peer.lines + 1] = line
  end
end

local function is_null(v)
  return v == nil or v == json.null
end

local function node_testnet(opts)
  local peer = assert(node.start("dht-testnet.js", opts or {}, 60000))
  local bs = {}
  for _, b in ipairs(peer.ready.bootstrap) do bs[#bs + 1] = b.host .. ":" .. b.port end
  return peer, bs
end

local function echo(conn)
  while true do
    local data = conn:read()
    if not data then break end
    if not conn:write(data) then break end
  end
  conn:finish(10000)
  conn:close()
end

describe("interop with Node hyperdht", function()
  it("a ludx node bootstraps from Node nodes and becomes persistent", run(function()
    local peer, bs = node_testnet({ size = 5 })
    local n = assert(dht.new({ bootstrap = bs, host = "127.0.0.1", port = 0, ephemeral = false, firewalled = false }))
    assert(n:ready(20000))
    assert.is_true(n:is_persistent())
    assert.is_true(#n:nodes() >= 4)
    -- Node nodes put us in their tables: a Node client finds us when walking
    local _, port = n:address()
    local found = false
    for _ = 1, 20 do
      local r = assert(call(peer, { cmd = "nodes" }))
      for _, t in ipairs(r.testnet) do
        if t.persistent then found = true end
      end
      if found then break end
      ludx.sleep(100)
    end
    assert.is_true(found)
    assert.is_number(port)
    n:destroy()
    peer:close()
  end, 90000))

  it("Node nodes bootstrap from a ludx network", run(function()
    local tn = assert(dht.testnet(3, { timeout = 20000 }))
    local peer = node_testnet({ bootstrap = tn.bootstrap[1], size = 3 })
    for _, t in ipairs(peer.ready.nodes) do
      assert.is_true(t.persistent)
      assert.is_string(t.id)
    end
    -- a Node announce is found by a ludx lookup and the reverse
    local topic = dht.hash("interop topic")
    assert(call(peer, { cmd = "announce", topic = hex(topic), keySeed = hex(seed(1)) }))
    local client = assert(tn:create_node())
    local pk1 = dht.keypair(seed(1)).public_key
    local found = 0
    for reply in client:lookup(topic) do
      for _, p in ipairs(reply.peers) do
        if p.public_key == pk1 then found = found + 1 end
      end
    end
    assert.is_true(found >= 1)
    local kp2 = dht.keypair(seed(2))
    assert(client:announce(topic, kp2))
    local r = assert(call(peer, { cmd = "lookup", topic = hex(topic) }))
    local keys = {}
    for _, p in ipairs(r.peers) do keys[p.publicKey] = true end
    assert.is_true(keys[hex(kp2.public_key)])
    assert.is_true(keys[hex(pk1)])
    peer:close()
    tn:destroy()
  end, 90000))

  it("announce, lookup, mutable and immutable across sides on a Node testnet", run(function()
    local peer, bs = node_testnet({ size = 5 })
    local n = assert(dht.new({ bootstrap = bs, host = "127.0.0.1", port = 0, firewalled = false }))
    assert(n:ready(20000))
    local topic = dht.hash("mixed topic")
    local kp = dht.keypair(seed(3))
    assert(n:announce(topic, kp))
    local r = assert(call(peer, { cmd = "lookup", topic = hex(topic) }))
    assert.are.equal(hex(kp.public_key), r.peers[1] and r.peers[1].publicKey)

    assert(call(peer, { cmd = "announce", topic = hex(topic), keySeed = hex(seed(4)) }))
    local want = dht.keypair(seed(4)).public_key
    local hit = false
    for reply in n:lookup(topic) do
      for _, p in ipairs(reply.peers) do hit = hit or p.public_key == want end
    end
    assert.is_true(hit)

    -- immutable: ludx put, Node get; Node put, ludx get
    local put = assert(n:immutable_put("from ludx"))
    r = assert(call(peer, { cmd = "immutable-get", hash = hex(put.hash) }))
    assert.is_true(r.found)
    assert.are.equal(hex("from ludx"), r.value)
    r = assert(call(peer, { cmd = "immutable-put", text = "from node" }))
    assert.are.equal("from node", (n:immutable_get(unhex(r.hash))))

    -- mutable: ludx put, Node get; Node put (higher seq), ludx get
    local mkp = dht.keypair(seed(5))
    assert(n:mutable_put(mkp, "ludx v1", { seq = 1 }))
    r = assert(call(peer, { cmd = "mutable-get", publicKey = hex(mkp.public_key) }))
    assert.is_true(r.found)
    assert.are.equal(1, r.seq)
    assert.are.equal(hex("ludx v1"), r.value)
    assert(call(peer, { cmd = "mutable-put", keySeed = hex(seed(5)), text = "node v2", seq = 2 }))
    local got = assert(n:mutable_get(mkp.public_key))
    assert.are.equal(2, got.seq)
    assert.are.equal("node v2", got.value)
    n:destroy()
    peer:close()
  end, 120000))

  it("a Node client on its own host reads values stored on an all-ludx network", run(function()
    -- the client is on 127.0.0.2, the ludx nodes on 127.0.0.1: the ludx
    -- amplification guard holds back value replies to it until it has
    -- answered a probe (its retries then get them)
    local tn = assert(dht.testnet(4, { timeout = 20000 }))
    local writer = assert(tn:create_node())
    local big = string.rep("v", 1000)
    local put = assert(writer:immutable_put(big))
    local mkp = dht.keypair(seed(6))
    assert(writer:mutable_put(mkp, string.rep("w", 900), { seq = 3 }))
    local peer = assert(node.start("dht-testnet.js", { bootstrap = tn.bootstrap[1], size = 0, host = "127.0.0.2" }, 60000))
    local r = assert(call(peer, { cmd = "immutable-get", hash = hex(put.hash) }))
    assert.is_true(r.found)
    assert.are.equal(hex(big), r.value)
    r = assert(call(peer, { cmd = "mutable-get", publicKey = hex(mkp.public_key) }))
    assert.is_true(r.found)
    assert.are.equal(3, r.seq)
    assert.are.equal(hex(string.rep("w", 900)), r.value)
    -- again with the client forgotten (as if its first request were the
    -- get): value replies are held back, the client's retries get them
    for _, n in ipairs(tn.nodes) do
      local io_ = n.h.io
      io_.verified_cur, io_.verified_prev, io_.amp_cur, io_.amp_prev = {}, {}, {}, {}
    end
    r = assert(call(peer, { cmd = "immutable-get", hash = hex(put.hash) }))
    assert.are.equal(hex(big), r.value)
    for _, n in ipairs(tn.nodes) do
      local io_ = n.h.io
      io_.verified_cur, io_.verified_prev, io_.amp_cur, io_.amp_prev = {}, {}, {}, {}
    end
    r = assert(call(peer, { cmd = "mutable-get", publicKey = hex(mkp.public_key) }))
    assert.are.equal(hex(string.rep("w", 900)), r.value)
    local probes, held = 0, 0
    for _, n in ipairs(tn.nodes) do
      probes = probes + n.h.io.stats.probes
      held = held + n.h.io.stats.amp_dropped
    end
    io.stderr:write(string.format("  [interop] Node client on 127.0.0.2: %d probes, %d value replies held back\n", probes, held))
    assert.is_true(held >= 2)
    peer:close()
    tn:destroy()
  end, 90000))

  it("a Node client connects to a ludx server", run(function()
    local peer, bs = node_testnet({ size = 5 })
    local n = assert(dht.new({ bootstrap = bs, host = "127.0.0.1", port = 0, firewalled = false }))
    assert(n:ready(20000))
    local kp = dht.keypair(seed(6))
    local conns = 0
    local server = n:server(function(conn)
      conns = conns + 1
      echo(conn)
    end)
    assert(server:listen(kp, 20000))
    local r = assert(call(peer, { cmd = "connect", node = "c", publicKey = hex(kp.public_key), mode = "both", bytes = 200000 }, 60000))
    assert.are.equal("connected", r.event)
    assert.are.equal(hex(kp.public_key), r.remotePublicKey)
    local done = assert(expect(peer, "connect-done", r.req, 60000))
    assert.are.equal(200000, done.sent)
    assert.are.equal(done.sentHash, done.receivedHash)
    assert.is_true(is_null(done.error))
    assert.are.equal(1, conns)
    server:close()
    n:destroy()
    peer:close()
  end, 120000))

  it("a ludx client connects to a Node server", run(function()
    local peer, bs = node_testnet({ size = 5 })
    local r = assert(call(peer, { cmd = "listen", node = "s", keySeed = hex(seed(7)), mode = "echo" }, 60000))
    local n = assert(dht.new({ bootstrap = bs, host = "127.0.0.1", port = 0, firewalled = false }))
    assert(n:ready(20000))
    local conn = assert(n:connect(unhex(r.publicKey), { timeout = 30000 }))
    local gen = core.datagen(9)
    local data = gen:next(300000)
    local writer = ludx.spawn("writer", function()
      for i = 1, #data, 65536 do assert(conn:write(data:sub(i, i + 65535), 30000)) end
      assert(conn:finish(30000))
    end)
    local got = {}
    while true do
      local chunk, msg, code = conn:read(nil, 30000)
      if not chunk then
        assert.is_nil(msg, code)
        break
      end
      got[#got + 1] = chunk
    end
    writer:join(30000)
    assert.are.equal(hex(dht.hash(data)), hex(dht.hash(table.concat(got))))
    local c = assert(expect(peer, "connection", r.req, 10000))
    assert.are.equal(hex(n.keypair.public_key), c.remotePublicKey)
    conn:close()
    n:destroy()
    peer:close()
  end, 120000))

  it("a firewalled ludx client holepunches to a firewalled Node server", run(function()
    local peer, bs = node_testnet({ size = 5 })
    local nr = assert(call(peer, { cmd = "node", name = "fs", firewalled = true }))
    assert.is_true(nr.firewalled)
    local r = assert(call(peer, { cmd = "listen", node = "fs", keySeed = hex(seed(8)), mode = "echo" }, 60000))
    local n = assert(dht.new({ bootstrap = bs, host = "127.0.0.1", port = 0, firewalled = true, quick_firewall = false }))
    assert(n:ready(20000))
    assert.is_true(n:is_firewalled())
    local conn = assert(n:connect(unhex(r.publicKey), { timeout = 30000 }))
    local data = core.datagen(3):next(100000)
    local got = {}
    local writer = ludx.spawn("writer", function()
      assert(conn:write(data, 30000))
      assert(conn:finish(30000))
    end)
    while true do
      local chunk = conn:read(nil, 30000)
      if not chunk then break end
      got[#got + 1] = chunk
    end
    writer:join(30000)
    assert.are.equal(#data, #table.concat(got))
    assert.are.equal(dht.hash(data), dht.hash(table.concat(got)))
    -- the path is a puncher socket on both sides, not the DHT sockets
    local _, rport = conn.udx_stream:remote_address()
    assert.are_not.equal(nr.port, rport)
    conn:close()
    n:destroy()
    peer:close()
  end, 120000))

  it("a firewalled Node client holepunches to a firewalled ludx server", run(function()
    local peer, bs = node_testnet({ size = 5 })
    local n = assert(dht.new({ bootstrap = bs, host = "127.0.0.1", port = 0, firewalled = true, quick_firewall = false }))
    assert(n:ready(20000))
    local kp = dht.keypair(seed(9))
    local server = n:server(echo)
    assert(server:listen(kp, 20000))
    local nr = assert(call(peer, { cmd = "node", name = "fc", firewalled = true }))
    assert.is_true(nr.firewalled)
    local r = assert(call(peer, { cmd = "connect", node = "fc", publicKey = hex(kp.public_key), mode = "both", bytes = 100000 }, 60000))
    assert.are.equal("connected", r.event)
    assert.are_not.equal(select(2, n:address()), r.remotePort)
    local done = assert(expect(peer, "connect-done", r.req, 60000))
    assert.are.equal(done.sentHash, done.receivedHash)
    assert.are.equal(100000, done.sent)
    server:close()
    n:destroy()
    peer:close()
  end, 120000))
end)
