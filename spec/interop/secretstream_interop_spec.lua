-- ludx.secretstream over ludx UDX against the real @hyperswarm/secret-stream
-- 6.9.2 over udx-native 1.21.3 (spec/interop/peers/secretstream-peer.js).
local ludx = require "ludx"
local udx = require "ludx.udx"
local secretstream = require "ludx.secretstream"
local crypto = require "ludx.crypto"
local node = require "interop.node"
local H = require "helper"
local run = H.run

local core = ludx.core
local MB = 1024 * 1024

local function seed_of(n)
  return string.rep(string.char(n), 32)
end

-- A ludx secret stream (stream id 1, key seed 1) connected to a Node peer
-- (stream id 2, key seed 2).
local function connect(peer_opts, ss_opts)
  local sock = assert(udx.bind("127.0.0.1", 0))
  local _, port = sock:address()
  peer_opts.id, peer_opts.remoteId = 2, 1
  local peer = assert(node.start("secretstream-peer.js", peer_opts))
  local raw = assert(udx.stream(1))
  assert(raw:connect(sock, 2, peer.ready.port, "127.0.0.1"))
  assert(peer:send({ port = port }))
  ss_opts.keypair = secretstream.keypair(seed_of(1))
  local ss = secretstream.wrap(raw, ss_opts)
  assert(ss:ready(10000))
  return ss, peer, sock
end

local function send_generated(ss, n, seed)
  local gen = core.datagen(seed)
  local h = core.hasher()
  local left = n
  while left > 0 do
    local chunk = gen:next(math.min(65536, left))
    h:update(chunk)
    assert(ss:write(chunk, 30000))
    left = left - #chunk
  end
  return h:hex()
end

local function recv_all(ss)
  local h = core.hasher()
  local n = 0
  while true do
    local chunk, msg, code = ss:read(nil, 30000)
    if not chunk then return n, h:hex(), msg, code end
    n = n + #chunk
    h:update(chunk)
  end
end

local node_pk = crypto.hex(secretstream.keypair(seed_of(2)).public_key)
local ludx_pk = crypto.hex(secretstream.keypair(seed_of(1)).public_key)

describe("interop with @hyperswarm/secret-stream", function()
  it("a ludx initiator and a Node responder: keys match, 50 MB each way at once", run(function()
    local ss, peer = connect({ mode = "both", initiator = false, bytes = 50 * MB, seed = 21 }, { initiator = true })
    local hs = assert(peer:expect("handshake", 10000))
    assert.are.equal(node_pk, crypto.hex(ss.remote_public_key))
    assert.are.equal(ludx_pk, hs.remotePublicKey)
    assert.are.equal(hs.handshakeHash, crypto.hex(ss.handshake_hash))
    local sender = ludx.spawn("sender", function()
      local hash = send_generated(ss, 50 * MB, 22)
      assert(ss:finish(60000))
      return hash
    end)
    local n, got_hash, err, code = recv_all(ss)
    assert.is_nil(err, code)
    local sent_hash = assert(sender:join(60000))
    local done = assert(peer:expect("done", 60000))
    assert.are.equal(50 * MB, n)
    assert.are.equal(done.sentHash, got_hash)
    assert.are.equal(50 * MB, done.received)
    assert.are.equal(sent_hash, done.receivedHash)
    peer:close()
    ss:close()
  end, 180000))

  it("frames of 4 MiB and more, sealed on the thread pool, reach Node whole and in order", run(function()
    local ss, peer = connect({ mode = "recv", initiator = false }, { initiator = true })
    assert(peer:expect("handshake", 10000))
    -- around the line where sealing leaves the loop, and the largest frame
    local sizes = { 4 * MB - 21, 4 * MB - 20, 16777198, 5000001, 100, 16777198 }
    local gen, h, total = core.datagen(31), core.hasher(), 0
    for _, n in ipairs(sizes) do
      local chunk = gen:next(n)
      h:update(chunk)
      assert(ss:write(chunk, 30000))
      total = total + n
    end
    assert(ss:finish(60000))
    local done = assert(peer:expect("done", 60000))
    assert.are.equal(total, done.received)
    assert.are.equal(h:hex(), done.receivedHash)
    assert.are.equal(#sizes, ss:stats().frames_out)
    peer:close()
    ss:close()
  end, 180000))

  -- Node's 16 MiB frames: ludx hands each on in 64 KiB parts from the
  -- frame's buffer, gathers the next behind them, and counts the rest as
  -- unread in its window
  it("16 MiB frames from Node arrive whole, read as bytes", run(function()
    local bytes = 3 * 16777198 + 5000
    local ss, peer = connect({ mode = "send", initiator = false, bytes = bytes, seed = 41, writeSize = 16777198 },
      { initiator = true })
    assert(peer:expect("handshake", 10000))
    local n, got_hash, err, code = recv_all(ss)
    assert.is_nil(err, code)
    assert(ss:finish(30000))
    local done = assert(peer:expect("done", 60000))
    assert.are.equal(bytes, n)
    assert.are.equal(done.sentHash, got_hash)
    assert.are.equal(4, ss:stats().frames_in)
    peer:close()
    ss:close()
  end, 180000))

  it("a Node initiator and a ludx responder, with keep-alives both ways", run(function()
    local ss, peer = connect(
      { mode = "recv", initiator = true, ssKeepalive = 50 },
      { initiator = false, keepalive = 50 }
    )
    assert(peer:expect("handshake", 10000))
    assert.are.equal(node_pk, crypto.hex(ss.remote_public_key))
    -- both sides idle for a while: keep-alives flow and are dropped, not
    -- read as data
    local r = { ss:read(nil, 400) }
    assert.are.same({ nil, "timed out", "ETIMEDOUT" }, r)
    local hash = send_generated(ss, 2 * MB, 24)
    assert(ss:finish(30000))
    local done = assert(peer:expect("done", 30000))
    assert.are.equal(2 * MB, done.bytes)
    assert.are.equal(hash, done.hash)
    local st = ss:stats()
    assert.is_true(st.keepalives_in > 0, "no keep-alive came from Node")
    assert.is_true(st.keepalives_out > 0, "no keep-alive went to Node")
    peer:close()
    ss:close()
  end, 60000))

  it("a ludx close reaches Node as a clean end after every byte; both sides close without an error", run(function()
    local ss, peer = connect({ mode = "recv", initiator = false }, { initiator = true })
    local hash = send_generated(ss, 2 * MB, 26)
    -- no finish: close sends the last frames, then the END
    assert.is_true(ss:close(30000))
    local done = assert(peer:expect("done", 30000))
    assert.are.equal(2 * MB, done.bytes)
    assert.are.equal(hash, done.hash)
    assert.is_nil(done.error ~= require("ludx.json").null and done.error or nil)
    -- Node ends its half after its reader's end: the raw stream closes cleanly
    assert.is_true(ss.raw:wait_closed(30000))
    assert.is_nil(ss.raw:error())
    assert.are.equal(0, peer:wait())
    peer:close()
  end, 60000))

  it("IK: a ludx initiator that knows the Node responder's key", run(function()
    local ss, peer = connect(
      { mode = "recv", initiator = false, pattern = "IK" },
      { initiator = true, pattern = "IK", remote_public_key = crypto.unhex(node_pk) }
    )
    local hash = send_generated(ss, 1 * MB, 25)
    assert(ss:finish(30000))
    local done = assert(peer:expect("done", 30000))
    assert.are.equal(hash, done.hash)
    peer:close()
    ss:close()
  end, 60000))

  it("a wrong expected remote key fails the handshake with EREMOTEKEY", run(function()
    local sock = assert(udx.bind("127.0.0.1", 0))
    local _, port = sock:address()
    local peer = assert(node.start("secretstream-peer.js", { mode = "recv", initiator = false, id = 2, remoteId = 1 }))
    local raw = assert(udx.stream(1))
    assert(raw:connect(sock, 2, peer.ready.port, "127.0.0.1"))
    assert(peer:send({ port = port }))
    local ss = secretstream.wrap(raw, { initiator = true, keypair = secretstream.keypair(seed_of(1)),
      remote_public_key = secretstream.keypair(seed_of(9)).public_key })
    local ok, msg, code = ss:ready(10000)
    assert.is_nil(ok)
    assert.are.equal("EREMOTEKEY", code, msg)
    peer:close()
    ss:close()
  end))
end)
