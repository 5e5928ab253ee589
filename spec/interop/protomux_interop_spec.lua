-- ludx.protomux against npm protomux 3.12.1 over @hyperswarm/secret-stream
-- 6.9.2 on udx-native (spec/interop/peers/protomux-peer.js): a "chat/1"
-- channel with a string handshake and two message types (string, uint);
-- and channels of one protocol told apart by id (pairing by id, a reject).
local ludx = require "ludx"
local udx = require "ludx.udx"
local secretstream = require "ludx.secretstream"
local protomux = require "ludx.protomux"
local compact = require "ludx.compact"
local node = require "interop.node"
local json = require "ludx.json"
local H = require "helper"
local run = H.run

local N = 400

-- JSON null (or absent)
local function none(v)
  return v == nil or v == json.null
end

local function connect(peer_opts, initiator)
  local sock = assert(udx.bind("127.0.0.1", 0))
  local _, port = sock:address()
  peer_opts.id, peer_opts.remoteId = 2, 1
  peer_opts.initiator = not initiator
  peer_opts.count = N
  local peer = assert(node.start("protomux-peer.js", peer_opts))
  local raw = assert(udx.stream(1))
  assert(raw:connect(sock, 2, peer.ready.port, "127.0.0.1"))
  assert(peer:send({ port = port }))
  local ss = secretstream.wrap(raw, { initiator = initiator, keypair = secretstream.keypair(string.rep("\1", 32)) })
  assert(ss:ready(10000))
  assert(peer:expect("handshake", 10000))
  return ss, peer, sock
end

local CHAT = { protocol = "chat/1", handshake = compact.string, messages = { compact.string, compact.uint } }

-- Sends N messages ("ludx i" / i) while it receives N ("node i" / i) in
-- order; cork: in batch frames of 50 messages.
local function exchange(ch, cork)
  local sender = ludx.spawn("send", function()
    for i = 1, N do
      if cork and i % 50 == 1 then ch:cork() end
      if i % 2 == 1 then assert(ch:send(1, "ludx " .. i)) else assert(ch:send(2, i)) end
      if cork and (i % 50 == 0 or i == N) then ch:uncork() end
    end
    return true
  end)
  for i = 1, N do
    local t, v = ch:recv(30000)
    if i % 2 == 1 then
      assert.are.same({ 1, "node " .. i }, { t, v })
    else
      assert.are.same({ 2, i }, { t, v })
    end
  end
  assert(sender:join(30000))
end

-- The first kept or new line of the peer with this event and channel.
local function expect_on(peer, event, channel, timeout)
  local deadline = ludx.now() + (timeout or 30000)
  while true do
    for i, line in ipairs(peer.lines) do
      if line.event == event and line.channel == channel then
        table.remove(peer.lines, i)
        return line
      end
    end
    local line, msg = peer.p:read_json(math.max(0, deadline - ludx.now()))
    if not line then return nil, "no " .. event .. " on " .. channel .. ": " .. tostring(msg) .. "\n" .. peer:stderr() end
    peer.lines[#peer.lines + 1] = line
  end
end

describe("interop with npm protomux", function()
  it("Node opens first, ludx pairs; both directions in order; Node's close is seen here", run(function()
    local ss, peer, sock = connect({ role = "open", closer = "node" }, true)
    local mux = protomux.from(ss)
    local q = ludx.queue()
    mux:pair({ protocol = "chat/1" }, function()
      local ch = assert(mux:channel(CHAT))
      assert(ch:open("ludx-hs"))
      q:put(ch)
    end)
    local ch = assert(q:get(20000))
    assert.are.equal("node-hs", ch:opened(20000))
    local opened = assert(peer:expect("opened", 20000))
    assert.are.equal("ludx-hs", opened.handshake)
    exchange(ch)
    local got = assert(peer:expect("received", 30000))
    assert.are.equal(N, got.count)
    assert.is_true(none(got.bad), json.encode(got.bad))
    assert.is_nil(ch:recv(30000)) -- Node closed the channel
    local closed = assert(peer:expect("closed", 30000))
    assert.is_false(closed.remote)
    local done = assert(peer:expect("done", 30000))
    assert.is_true(none(done.bad))
    mux:destroy()
    peer:close()
    sock:close()
  end, 90000))

  it("ludx opens first, Node pairs; ludx sends cork batches; ludx's close is seen by Node", run(function()
    local ss, peer, sock = connect({ role = "pair", closer = "ludx" }, false)
    local mux = protomux.from(ss)
    local ch = assert(mux:channel(CHAT))
    assert(ch:open("ludx-hs"))
    assert.are.equal("node-hs", ch:opened(20000))
    assert.are.equal("ludx-hs", assert(peer:expect("opened", 20000)).handshake)
    exchange(ch, true)
    local got = assert(peer:expect("received", 30000))
    assert.are.equal(N, got.count)
    assert.is_true(none(got.bad), json.encode(got.bad))
    assert(ch:close())
    local closed = assert(peer:expect("closed", 30000))
    assert.is_true(closed.remote)
    assert.are.equal(N, closed.received)
    assert(peer:expect("done", 30000))
    mux:destroy()
    peer:close()
    sock:close()
  end, 90000))

  it("channel ids: Node pairs one id and rejects another; ludx pairs Node's id; closes seen both ways", run(function()
    local ss, peer, sock = connect({ role = "ids" }, true)
    local mux = protomux.from(ss)
    local ROOM = { protocol = "chat/1", handshake = compact.string, messages = { compact.string } }
    local function room(id)
      local o = { id = id }
      for k, v in pairs(ROOM) do o[k] = v end
      return o
    end
    local paired = ludx.queue()
    mux:pair({ protocol = "chat/1", id = "room-c" }, function(id)
      assert.are.equal("room-c", id)
      local ch = assert(mux:channel(room(id)))
      assert(ch:open("ludx room-c"))
      paired:put(ch)
    end)
    local a = assert(mux:channel(room("room-a")))
    local b = assert(mux:channel(room("room-b")))
    assert(a:open("ludx room-a"))
    assert(b:open("ludx room-b"))
    assert.are.equal("node room-a", a:opened(30000))
    local ok, _, code = b:opened(30000) -- Node has no pair handler for room-b
    assert.is_nil(ok)
    assert.are.equal("EREJECTED", code)
    local c = assert(paired:get(30000))
    assert.are.equal("node room-c", c:opened(30000))
    assert.are.equal("ludx room-a", assert(expect_on(peer, "opened", "room-a")).handshake)
    assert.are.equal("ludx room-c", assert(expect_on(peer, "opened", "room-c")).handshake)
    -- each channel carries its own messages
    assert.are.same({ 1, "node to room-a" }, { a:recv(30000) })
    assert.are.same({ 1, "node to room-c" }, { c:recv(30000) })
    assert(a:send(1, "ludx to room-a"))
    assert(c:send(1, "ludx to room-c"))
    assert.are.equal("ludx to room-a", assert(expect_on(peer, "message", "room-a")).value)
    assert.are.equal("ludx to room-c", assert(expect_on(peer, "message", "room-c")).value)
    -- Node closes room-c on "bye": seen here; ludx closes room-a: seen there
    assert(c:send(1, "bye"))
    assert.is_nil(c:recv(30000))
    assert.is_false(assert(expect_on(peer, "closed", "room-c")).remote)
    assert.is_false(a.closed)
    assert(a:close())
    assert.is_true(assert(expect_on(peer, "closed", "room-a")).remote)
    assert.is_true(mux:is_idle()) -- every id came back: acked closes and the reject
    assert(ss:finish(10000))
    assert(peer:expect("done", 30000))
    mux:destroy()
    peer:close()
    sock:close()
  end, 90000))

  it("both open at once (the opens cross); Node sends one batch frame; Node's close is seen", run(function()
    local ss, peer, sock = connect({ role = "open", closer = "node", cork = true }, true)
    -- our open is registered before the reader task sees Node's
    local mux = protomux.from(ss)
    local ch = assert(mux:channel(CHAT))
    assert(ch:open("ludx-hs"))
    assert.are.equal("node-hs", ch:opened(20000))
    assert.are.equal("ludx-hs", assert(peer:expect("opened", 20000)).handshake)
    exchange(ch)
    local got = assert(peer:expect("received", 30000))
    assert.are.equal(N, got.count)
    assert.is_true(none(got.bad), json.encode(got.bad))
    assert.is_nil(ch:recv(30000))
    assert.is_false(assert(peer:expect("closed", 30000)).remote)
    assert(peer:expect("done", 30000))
    mux:destroy()
    peer:close()
    sock:close()
  end, 90000))
end)
