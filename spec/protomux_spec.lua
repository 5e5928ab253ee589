-- ludx.protomux over SecretStreams on ludx.pipe (and udx for the message
-- boundaries): the wire bytes of npm protomux 3.12.1, the channel API,
-- pairing, cork batches, and a hostile peer against every cap.
local ludx = require "ludx"
local pipe = require "ludx.pipe"
local udx = require "ludx.udx"
local secretstream = require "ludx.secretstream"
local protomux = require "ludx.protomux"
local compact = require "ludx.compact"
local H = require "helper"
local run = H.run

local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function unhex(h)
  return (h:gsub("%s", ""):gsub("..", function(x) return string.char(tonumber(x, 16)) end))
end

local function ss_pair(pipe_opts)
  local a, b = pipe.pair(pipe_opts)
  local x = secretstream.wrap(a, { initiator = true })
  local y = secretstream.wrap(b, { initiator = false })
  assert(x:ready(5000))
  assert(y:ready(5000))
  return x, y
end

local CHAT = { protocol = "chat/1", handshake = compact.string, messages = { compact.string, compact.uint } }

local function chat(extra)
  local o = {}
  for k, v in pairs(CHAT) do o[k] = v end
  for k, v in pairs(extra or {}) do o[k] = v end
  return o
end

describe("secretstream message boundaries", function()
  it("recv_message returns each frame as written, over a pipe that splits and joins bytes", run(function()
    local x, y = ss_pair({ chunk = 7 })
    local sizes = { 1, 2, 100, 5000, 3, 70000, 1 }
    for i, n in ipairs(sizes) do assert(x:send_message(string.rep(string.char(i), n))) end
    assert(x:write("")) -- a keep-alive: never a message
    assert(x:finish())
    for i, n in ipairs(sizes) do
      local m = assert(y:recv_message(5000))
      assert.are.equal(string.rep(string.char(i), n), m)
    end
    assert.is_nil(y:recv_message(5000)) -- EOF
    x:close()
    y:close()
  end))

  it("keeps frames apart over udx (the C fast path) and turns to bytes on the first read", run(function()
    local sa = assert(udx.bind("127.0.0.1", 0))
    local sb = assert(udx.bind("127.0.0.1", 0))
    local _, pa = sa:address()
    local _, pb = sb:address()
    local ra, rb = assert(udx.stream(1)), assert(udx.stream(2))
    assert(ra:connect(sa, 2, pb, "127.0.0.1"))
    assert(rb:connect(sb, 1, pa, "127.0.0.1"))
    local x = secretstream.wrap(ra, { initiator = true })
    local y = secretstream.wrap(rb, { initiator = false, messages = true })
    for i = 1, 300 do assert(x:send_message(string.rep("m", i))) end
    for i = 1, 300 do assert.are.equal(string.rep("m", i), y:recv_message(10000)) end
    -- a byte reader on the other side: recv_message after read is EINVAL
    assert(y:write("abc"))
    assert.are.equal("abc", x:read(nil, 10000))
    local m, _, code = x:recv_message(10)
    assert.is_nil(m)
    assert.are.equal("EINVAL", code)
    x:close()
    y:close()
    sa:close()
    sb:close()
  end))

  it("a flood of tiny frames nobody reads is bounded by entries, not only bytes", run(function()
    local x, y = ss_pair({ highwater = 4096 })
    local sent = 0
    local flood = ludx.spawn("flood", function()
      for i = 1, 150000 do
        if not x:send_message("a", 200) then break end
        sent = i
      end
      return true
    end)
    assert(flood:join(30000))
    assert.is_true(sent < 150000, sent)
    -- 4 MiB of read buffer at 64 bytes per entry (plus what the pipe holds)
    assert.is_true(y.rtail - y.rhead + 1 <= 4 * 1024 * 1024 / 64, tostring(y.rtail - y.rhead + 1))
    x:close()
    y:close()
  end, 60000))
end)

describe("protomux", function()
  it("writes the bytes npm protomux writes (open, messages, cork batch with a close)", run(function()
    local x, y = ss_pair()
    local mux = protomux.from(x)
    assert.are.equal(mux, protomux.from(x)) -- one muxer per stream
    local ch = assert(mux:channel(chat()))
    assert(ch:open("hi"))
    assert(ch:send(1, "yo"))
    assert(ch:send(2, 300))
    mux:cork()
    assert(ch:send(1, "a"))
    assert(ch:send(2, 1))
    ch:close()
    mux:uncork()
    local ch2 = assert(mux:channel({ protocol = "x", id = "ab", handshake = compact.uint }))
    assert(ch2:open(7))
    -- printed by protomux 3.12.1 for the same calls
    local want = { "00010106636861742f3100026869", "010002796f", "0101fd2c01", "000001030001610201010000020301",
      "000102017802616207" }
    for _, w in ipairs(want) do assert.are.equal(w, hex(assert(y:recv_message(5000)))) end
    mux:destroy()
    y:close()
  end))

  it("carries a handshake and 500 messages each way in order; a close is seen by the other side", run(function()
    local x, y = ss_pair({ chunk = 1000 })
    local ma, mb = protomux.from(x), protomux.from(y)
    local a = assert(ma:channel(chat()))
    local b = assert(mb:channel(chat()))
    assert(a:open("from a"))
    assert(b:open("from b"))
    assert.are.equal("from b", a:opened(5000))
    assert.are.equal("from a", b:opened(5000))
    assert.is_true(ma:opened({ protocol = "chat/1" }))
    local N = 500
    local function sender(ch, tag)
      return ludx.spawn("send " .. tag, function()
        for i = 1, N do
          if i % 2 == 1 then assert(ch:send(1, tag .. i)) else assert(ch:send(2, i)) end
        end
        return true
      end)
    end
    local ta, tb = sender(a, "a"), sender(b, "b")
    local function expect(ch, tag)
      for i = 1, N do
        local t, v = ch:recv(5000)
        if i % 2 == 1 then
          assert.are.same({ 1, tag .. i }, { t, v })
        else
          assert.are.same({ 2, i }, { t, v })
        end
      end
    end
    expect(b, "a")
    expect(a, "b")
    assert(ta:join(5000))
    assert(tb:join(5000))
    local closes = {}
    b.on_close = function(is_remote) closes[#closes + 1] = is_remote end
    assert(a:close())
    assert.is_nil(b:recv(5000)) -- a plain close: nil and no error
    assert.are.same({ true }, closes)
    assert.is_false(mb:opened({ protocol = "chat/1" }))
    local ok, _, code = a:send(1, "late")
    assert.is_nil(ok)
    assert.are.equal("EPIPE", code)
    -- the ids are free again: the same protocol opens anew
    local a2 = assert(ma:channel(chat()))
    local b2 = assert(mb:channel(chat()))
    assert(a2:open("again"))
    assert(b2:open("again b"))
    assert.are.equal("again", b2:opened(5000))
    assert(b2:send(1, "x"))
    assert.are.same({ 1, "x" }, { a2:recv(5000) })
    ma:destroy()
    local _, _, c2 = b2:recv(5000)
    assert.is_not_nil(c2) -- the stream went away under it
  end))

  it("pairs a channel the remote opened first; rejects it without a pair handler", run(function()
    local x, y = ss_pair()
    local ma, mb = protomux.from(x), protomux.from(y)
    local got = ludx.queue()
    mb:pair({ protocol = "chat/1" }, function(id)
      assert.is_nil(id)
      local ch = assert(mb:channel(chat()))
      assert(ch:open("server"))
      got:put(ch)
    end)
    local a = assert(ma:channel(chat()))
    assert(a:open("client"))
    assert(a:send(1, "early")) -- before the remote paired: kept for it
    assert.are.equal("server", a:opened(5000))
    local b = got:get(5000)
    assert.are.equal("client", b:opened(0))
    assert.are.same({ 1, "early" }, { b:recv(5000) })
    -- unpaired: the next open is rejected
    mb:unpair({ protocol = "chat/1" })
    local other = assert(ma:channel(chat({ id = "room" })))
    assert(other:open("x"))
    local ok, _, code = other:opened(5000)
    assert.is_nil(ok)
    assert.are.equal("EREJECTED", code)
    -- unique: a second open channel of one protocol and id is refused
    local dup, _, c2 = ma:channel(chat())
    assert.is_nil(dup)
    assert.are.equal("EEXIST", c2)
    -- aliases: a remote open of "old/1" finds our "new/1" channel through
    -- pairing (as protomux 3.12.1 does; there, as here, the old side then
    -- rejects our "new/1" open, so aliases serve one direction)
    assert(mb:channel({ protocol = "new/1", aliases = { "old/1" } })) -- registers the alias
    mb:pair({ protocol = "old/1" }, function()
      local al = assert(mb:channel({ protocol = "new/1", aliases = { "old/1" } }))
      got:put(al:opened(5000))
    end)
    local old = assert(ma:channel({ protocol = "old/1" }))
    assert(old:open())
    assert.is_true(got:get(5000))
    ma:destroy()
    mb:destroy()
  end))

  it("a channel paired in the handler may add message types before it opens; early messages reach them", run(function()
    local x, y = ss_pair()
    local ma, mb = protomux.from(x), protomux.from(y)
    local got = ludx.queue()
    mb:pair({ protocol = "late/1" }, function()
      -- as a protomux user writes it: createChannel, then addMessage, then open
      local ch = assert(mb:channel({ protocol = "late/1", handshake = compact.string }))
      assert.are.equal(1, ch:add_message(compact.string))
      assert.are.equal(2, ch:add_message(compact.uint))
      assert(ch:open("late"))
      got:put(ch)
    end)
    local a = assert(ma:channel({ protocol = "late/1", handshake = compact.string, messages = { compact.string, compact.uint } }))
    assert(a:open("early"))
    for i = 1, 20 do
      assert(a:send(1, "early " .. i))
      assert(a:send(2, i))
    end
    local b = got:get(5000)
    assert.are.equal("early", b:opened(5000))
    for i = 1, 20 do
      assert.are.same({ 1, "early " .. i }, { b:recv(5000) })
      assert.are.same({ 2, i }, { b:recv(5000) })
    end
    assert.are.equal("late", a:opened(5000))
    -- the remote closes a paired channel before it fully opened: it closes here too
    local shut = ludx.queue()
    mb:pair({ protocol = "shut/1" }, function()
      local ch = assert(mb:channel({ protocol = "shut/1" }))
      shut:put(ch)
    end)
    local s = assert(ma:channel({ protocol = "shut/1", messages = { compact.uint } }))
    assert(s:open())
    assert(s:send(1, 1))
    local sb = shut:get(5000)
    assert(s:close())
    assert(sb:closed_wait(5000))
    assert.are.equal(0, mb:stats().buffered) -- what waited for it was let go
    ma:destroy()
    mb:destroy()
  end))

  it("is_idle: an id closed before the remote answered stays in use until the answer", run(function()
    local x, y = ss_pair()
    local ma, mb = protomux.from(x), protomux.from(y)
    assert.is_true(ma:is_idle())
    local a = assert(ma:channel({ protocol = "nobody/1" })) -- mb has no pair handler: it rejects
    assert(a:open())
    assert(a:close())
    assert.is_false(ma:is_idle()) -- protomux: _local.length ~= _free.length until the reject
    local deadline = ludx.now() + 5000
    while not ma:is_idle() and ludx.now() < deadline do ludx.sleep(5) end
    assert.is_true(ma:is_idle())
    -- the freed id is reused
    local b = assert(ma:channel({ protocol = "nobody/1" }))
    assert(b:open())
    assert.are.equal(1, b.local_id)
    ma:destroy()
    mb:destroy()
  end))

  it("a remote that reads nothing stops ch:send at max_write_buffer (backpressure through the stream)", run(function()
    local a, b = pipe.pair({ highwater = 4096 })
    local x = secretstream.wrap(a, { initiator = true })
    local y = secretstream.wrap(b, { initiator = false })
    assert(x:ready(5000))
    assert(y:ready(5000))
    local mux = protomux.from(x, { max_write_buffer = 64 * 1024 })
    local ch = assert(mux:channel({ protocol = "p", messages = { compact.buffer } }))
    assert(ch:open())
    local chunk, sent, total = string.rep("s", 4096), 0, 2000 -- 8 MB if nothing stopped it
    local sender = ludx.spawn("sender", function()
      for _ = 1, total do
        assert(ch:send(1, chunk))
        sent = sent + 1
      end
      return true
    end)
    while sender.waiting ~= "protomux send" and sent < total do ludx.sleep(5) end
    assert.is_true(sent < total, tostring(sent))
    assert.is_true(mux:stats().write_buffered <= 64 * 1024 + 4200, tostring(mux:stats().write_buffered))
    print(string.format("protomux send backpressure: %d of %d messages of 4 KiB sent before the stall, %d B queued",
      sent, total, mux:stats().write_buffered))
    -- reading lets it finish, every message in order
    assert(y:recv_message(5000)) -- our open
    for _ = 1, total do
      local m = assert(y:recv_message(20000))
      assert.are.equal(4096 + 5, #m) -- channel id, type, length (3 bytes), bytes
    end
    assert(sender:join(20000))
    mux:destroy()
    y:close()
  end, 60000))

  it("on_open, on_close, on_destroy in protomux's order; opened, get_last_channel, channels, user_data", run(function()
    local x, y = ss_pair()
    local ma, mb = protomux.from(x), protomux.from(y)
    local log = {}
    local function cbs(name)
      return {
        protocol = "cb/1", handshake = compact.string, user_data = name,
        on_open = function(hs, ch) log[#log + 1] = name .. " open " .. hs .. " " .. ch.user_data end,
        on_close = function(is_remote, ch) log[#log + 1] = name .. " close " .. tostring(is_remote) .. " " .. ch.user_data end,
        on_destroy = function(ch) log[#log + 1] = name .. " destroy " .. ch.user_data end,
      }
    end
    local key = { protocol = "cb/1" }
    assert.is_false(ma:opened(key))
    assert.is_nil(ma:get_last_channel(key))
    local a = assert(ma:channel(cbs("a")))
    local b = assert(mb:channel(cbs("b")))
    assert(a:open("from a"))
    assert(b:open("from b"))
    assert.are.equal("from b", a:opened(5000))
    assert.are.equal("from a", b:opened(5000))
    assert.is_true(ma:opened(key))
    assert.are.equal(a, ma:get_last_channel(key))
    local list = {}
    for ch in ma:channels() do list[#list + 1] = ch end
    assert.are.same({ a }, list)
    assert(a:close())
    assert(b:closed_wait(5000))
    assert.is_false(ma:opened(key))
    assert.is_nil(ma:get_last_channel(key))
    local opens = { log[1], log[2] } -- either side may open first
    table.sort(opens)
    assert.are.same({ "a open from b a", "b open from a b" }, opens)
    assert.are.same({ "a close false a", "a destroy a", "b close true b", "b destroy b" }, { unpack(log, 3) })
    -- destroying the mux closes its channels as a remote close, and the stream
    local c = assert(ma:channel(cbs("c")))
    assert(c:open("again"))
    log = {}
    ma:destroy()
    assert.are.same({ "c close true c", "c destroy c" }, log)
    local ok, _, code = c:recv(0)
    assert.is_nil(ok)
    assert.are.equal("ECANCELED", code)
    assert.is_true(x.closed)
    mb:destroy()
  end))

  it("delivers to on_message callbacks and reports a stream that ended", run(function()
    local x, y = ss_pair()
    local ma, mb = protomux.from(x), protomux.from(y)
    local seen = {}
    local b = assert(mb:channel({ protocol = "p", messages = { { encoding = compact.uint, on_message = function(v)
      seen[#seen + 1] = v
    end } } }))
    local a = assert(ma:channel({ protocol = "p", messages = { compact.uint } }))
    assert(a:open())
    assert(b:open())
    assert(a:opened(5000))
    for i = 1, 10 do assert(a:send(1, i)) end
    assert.are.equal(2, a:add_message(compact.string))
    assert.are.equal(2, b:add_message(compact.string))
    assert(a:send(2, "added"))
    assert.are.same({ 2, "added" }, { b:recv(5000) }) -- type 1 went to on_message
    assert(a:close())
    assert(b:closed_wait(5000))
    assert.are.same({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, seen)
    -- the remote ends the stream: every channel closes
    local c1 = assert(mb:channel({ protocol = "q" }))
    local c2 = assert(ma:channel({ protocol = "q" }))
    assert(c1:open())
    assert(c2:open())
    assert(c1:opened(5000))
    assert(x:finish(5000))
    assert.is_nil(c1:recv(5000))
    assert(c2:closed_wait(5000))
    ma:destroy()
    mb:destroy()
  end))
end)

-- A peer that writes protomux frames by hand (the raw SecretStream y)
-- against a ludx mux on x.
local function hostile(opts)
  local x, y = ss_pair()
  local mux = protomux.from(x, opts)
  return mux, y, x
end

local function open_frame(id, protocol, chan_id)
  local w = compact.writer():uint(0):uint(1):uint(id):string(protocol)
  compact.optional_buffer.encode(w, chan_id)
  return w:finish()
end

-- Waits until the mux ended the stream (the peer y sees it go); the mux's
-- error code.
local function ended(mux, y)
  while y:recv_message(20000) do end
  return mux.destroyed and mux.err.code
end

-- Waits until the mux's reader stopped on a full queue.
local function reader_stopped(mux)
  while mux.reader_task.waiting ~= "protomux reader backpressure" do ludx.yield() end
end

describe("protomux against a hostile peer", function()
  it("a message on a channel that was never opened ends the mux (EPROTO)", run(function()
    local mux, y, x = hostile()
    assert(y:send_message(unhex("05 00 01")))
    assert.are.equal("EPROTO", ended(mux, y))
    assert.is_true(x.closed)
    y:close()
  end))

  it("an open that skips ids, a reject of nothing, a batch in a batch, truncated control: EPROTO", run(function()
    for _, frame in ipairs({ open_frame(2, "p"), unhex("00 02 09"), unhex("00 00 01 03 00 00 00"), unhex("00 01 fd 01"),
      unhex("00 01 01 10 61"), unhex("00 00") }) do
      local mux, y = hostile()
      assert(y:send_message(frame))
      assert.are.equal("EPROTO", ended(mux, y))
      y:close()
    end
  end))

  it("a frame over max_message_size ends the mux (EMSGSIZE)", run(function()
    local mux, y = hostile({ max_message_size = 1000 })
    assert(y:send_message("\1\0" .. string.rep("x", 1000)))
    assert.are.equal("EMSGSIZE", ended(mux, y))
    y:close()
  end))

  it("a message that does not decode closes only its channel (EDECODE); unknown types are skipped", run(function()
    local mux, y = hostile()
    mux:pair({ protocol = "chat/1" }, function()
      local ch = assert(mux:channel(chat()))
      ch:open("ok")
    end)
    local ch2 = assert(mux:channel({ protocol = "other", messages = { compact.uint } }))
    assert(ch2:open())
    assert(y:send_message(open_frame(1, "other")))
    assert(ch2:opened(5000))
    -- type 7 (unknown): skipped; then a truncated uint (fd + 1 byte)
    assert(y:send_message(unhex("01 07 01")))
    assert(y:send_message(unhex("01 00 fd 01")))
    local i, msg, code = ch2:recv(5000)
    assert.is_nil(i)
    assert.are.equal("EDECODE", code, msg)
    -- it told the peer: our open (local id 1) then a close of channel 1
    assert.are.equal("000101056f7468657200", hex(assert(y:recv_message(5000))))
    assert.are.equal("000301", hex(assert(y:recv_message(5000))))
    assert.is_nil(mux.destroyed)
    assert.are.equal(1, mux:stats().ignored)
    mux:destroy()
    y:close()
  end))

  it("opens past max_channels and over-long names are rejected; the ids a peer holds stay bounded", run(function()
    local mux, y = hostile({ max_channels = 8, max_name_size = 64 })
    local paired = {}
    mux:pair({ protocol = "p" }, function()
      paired[#paired + 1] = assert(mux:channel({ protocol = "p", unique = false }))
    end)
    mux:pair({ protocol = string.rep("n", 100) }, function() error("never called") end)
    assert(y:send_message(open_frame(1, string.rep("n", 100))))
    assert.are.equal("000201", hex(assert(y:recv_message(5000))))
    local N = 100
    for id = 2, N + 1 do assert(y:send_message(open_frame(id, "p"))) end
    local rejected = 0
    while rejected < N - 8 do
      local m = assert(y:recv_message(5000))
      assert.are.equal("0002", hex(m:sub(1, 2)))
      rejected = rejected + 1
    end
    assert.are.equal(8, #paired)
    assert.are.equal(8, mux:stats().remote_channels)
    mux:destroy()
    y:close()
  end))

  it("a flood the user does not read stops the reader at max_queued / max_buffered (backpressure)", run(function()
    local mux, y = hostile({ max_queued = 16, max_buffered = 64 * 1024 })
    local ch = assert(mux:channel({ protocol = "p", messages = { compact.buffer } }))
    assert(ch:open())
    assert(y:send_message(open_frame(1, "p")))
    assert(ch:opened(5000))
    -- one batch frame of 5000 tiny messages, then 200 big ones
    local w = compact.writer():uint(0):uint(0):uint(1)
    for _ = 1, 5000 do w:buffer("\0\1z") end
    assert(y:send_message(w:finish()))
    local sender = ludx.spawn("flood", function()
      for _ = 1, 200 do
        if not y:send_message("\1\0" .. compact.encode(compact.buffer, string.rep("b", 4000))) then return end
      end
      return true
    end)
    reader_stopped(mux)
    local s = mux:stats()
    assert.is_true(ch.qtail - ch.qhead + 1 <= 16)
    assert.is_true(s.buffered <= 64 * 1024 + 4100)
    -- reading drains it all, in order
    for _ = 1, 5000 do assert.are.same({ 1, "z" }, { ch:recv(5000) }) end
    for _ = 1, 200 do
      local i, v = ch:recv(5000)
      assert.are.equal(1, i)
      assert.are.equal(4000, #v)
    end
    assert(sender:join(5000))
    mux:destroy()
    y:close()
  end))

  it("messages for an unpaired channel are bounded the same way, and dropped on reject", run(function()
    local mux, y = hostile({ max_queued = 4 })
    local release = ludx.queue()
    mux:pair({ protocol = "p" }, function() release:get() end)
    assert(y:send_message(open_frame(1, "p")))
    local sender = ludx.spawn("flood", function()
      for _ = 1, 50 do if not y:send_message("\1\0zz") then return end end
      return true
    end)
    reader_stopped(mux)
    assert.is_true(mux.buffered <= 4 * 66 + 64) -- 4 messages and the kept (empty) handshake
    release:put(true) -- the handler ends without a channel: rejected
    assert.are.equal("000201", hex(assert(y:recv_message(5000))))
    assert(sender:join(5000))
    assert.are.equal(0, mux.buffered)
    assert.are.equal(0, mux:stats().remote_channels)
    mux:destroy()
    y:close()
  end))

  it("handshakes of opens waiting for a slow pair handler count against max_buffered", run(function()
    local mux, y = hostile({ max_buffered = 64 * 1024 })
    local release = ludx.queue()
    mux:pair({ protocol = "p" }, function() release:get() end) -- a handler that waits
    local big = compact.encode(compact.buffer, string.rep("h", 30000))
    local sender = ludx.spawn("opens", function()
      for id = 1, 20 do
        if not y:send_message(open_frame(id, "p") .. big) then return end
      end
      return true
    end)
    -- the reader stops once the kept handshakes pass max_buffered, not after all 20 opens
    local deadline = ludx.now() + 20000
    while mux.reader_task.waiting ~= "protomux reader backpressure" and mux:stats().remote_channels < 20
      and ludx.now() < deadline do
      ludx.sleep(5)
    end
    local s = mux:stats()
    assert.is_true(s.remote_channels <= 3, tostring(s.remote_channels))
    assert.is_true(s.buffered <= 64 * 1024 + 30100, tostring(s.buffered))
    -- the handlers end without a channel: every open is rejected, nothing stays counted
    for _ = 1, 20 do release:put(true) end
    for id = 1, 20 do
      assert.are.equal("0002" .. string.format("%02x", id), hex(assert(y:recv_message(5000))))
    end
    assert(sender:join(5000))
    assert.are.equal(0, mux:stats().buffered)
    assert.are.equal(0, mux:stats().remote_channels)
    mux:destroy()
    y:close()
  end))

  it("a batch of many opens that reads no rejects: the replies stay bounded inside one frame too", run(function()
    local a, b = pipe.pair({ highwater = 4096 })
    local x = secretstream.wrap(a, { initiator = true })
    local y = secretstream.wrap(b, { initiator = false })
    local mux = protomux.from(x, { max_control_buffer = 16 * 1024 })
    -- one batch frame of 100000 opens (each rejected: no pair handler)
    local w = compact.writer():uint(0):uint(0):uint(0)
    for id = 1, 100000 do
      local m = open_frame(id, "p"):sub(2) -- type 1 and the open, without channel 0
      w:buffer(m)
    end
    local frame = w:finish()
    assert.is_true(#frame < protomux.DEFAULTS.max_message_size)
    assert(y:send_message(frame, 20000))
    local peak = 0
    local deadline = ludx.now() + 60000
    while mux.reader_task.waiting ~= "protomux reader (replies not sent)" and mux:stats().rejected < 100000
      and ludx.now() < deadline do
      peak = math.max(peak, mux.ctl_bytes)
      ludx.sleep(5)
    end
    peak = math.max(peak, mux.ctl_bytes)
    -- 100000 rejects are about 400 KB: the reader waits at max_control_buffer instead
    assert.is_true(peak <= 16 * 1024 + 16, tostring(peak))
    assert.is_true(mux:stats().rejected < 100000)
    mux:destroy()
    y:close()
  end, 120000))

  it("a peer that floods opens and reads no rejects stops our reader (the replies stay bounded)", run(function()
    local a, b = pipe.pair({ highwater = 4096 })
    -- 64 KiB read buffers, not 4 MiB: with those both ends hold 60,000
    -- frames before the flood stops (over 180 s under ASan at load 10)
    local x = secretstream.wrap(a, { initiator = true, read_highwater = 65536 })
    local y = secretstream.wrap(b, { initiator = false, read_highwater = 65536 })
    -- the flood goes through the pipe, not y's pre-handshake queue (1 MiB of
    -- plaintext: 3.3 MB of open frames at once)
    assert(x:ready(5000))
    assert(y:ready(5000))
    local mux = protomux.from(x)
    local sent = 0
    local flood = ludx.spawn("flood", function()
      for id = 1, 150000 do
        local ok = y:send_message(open_frame(id, "p"), 200)
        if not ok then break end
        sent = id
      end
      return true
    end)
    assert(flood:join(150000))
    assert.is_true(sent < 150000, sent) -- the flood was stopped by backpressure
    local s = mux:stats()
    assert.is_true(mux.ctl_bytes <= 64 * 1024 + 16, tostring(mux.ctl_bytes))
    assert.is_true(s.write_buffered <= 64 * 1024 + 16)
    assert.are.equal(0, s.remote_channels)
    mux:destroy()
    y:close()
  end, 180000))
end)
