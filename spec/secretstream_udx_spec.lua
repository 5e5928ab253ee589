-- ludx.secretstream over real udx streams: bytes injected into the raw
-- stream (an on-path attacker who can send from the peer's address; from
-- any other address the udx layer drops them) end the SecretStream with
-- EDECRYPT as soon as a frame fails, for its reader and its writer (a
-- writer waiting for the raw stream to drain got ECANCELED before).
-- A forged length prefix cannot be told from a long frame until its bytes
-- are in: the stream then fails at once, not at a timeout.
local ludx = require "ludx"
local udx = require "ludx.udx"
local secretstream = require "ludx.secretstream"
local H = require "helper"
local run = H.run

local function u32le(n)
  return string.char(n % 256, math.floor(n / 256) % 256, math.floor(n / 65536) % 256, math.floor(n / 16777216) % 256)
end

-- Two connected udx streams (ids 1 and 2) and their SecretStreams, just
-- wrapped (y with opts_y): the handshake runs from here.
local function wrapped(opts_y)
  local sa = assert(udx.bind("127.0.0.1", 0))
  local sb = assert(udx.bind("127.0.0.1", 0))
  local _, pa = sa:address()
  local _, pb = sb:address()
  local ra = assert(udx.stream(1))
  local rb = assert(udx.stream(2))
  assert(ra:connect(sa, 2, pb, "127.0.0.1"))
  assert(rb:connect(sb, 1, pa, "127.0.0.1"))
  local y_opts = { initiator = false }
  for k, v in pairs(opts_y or {}) do y_opts[k] = v end
  local x = secretstream.wrap(ra, { initiator = true })
  local y = secretstream.wrap(rb, y_opts)
  return { sa = sa, sb = sb, pb = pb, ra = ra, rb = rb, x = x, y = y }
end

-- The same, ready, with one message each way already through.
local function pair()
  local p = wrapped()
  local ra, x, y = p.ra, p.x, p.y
  assert(x:ready(10000))
  assert(y:ready(10000))
  assert(x:write("hello"))
  assert.are.equal("hello", y:read(nil, 10000))
  assert(y:write("hi"))
  assert.are.equal("hi", x:read(nil, 10000))
  -- every packet so far is acknowledged: the next seq of ra is settled
  assert(ra:flush(10000))
  return p
end

-- Waits (polling, no fixed sleep) until cond() holds or ms pass; its last value.
local function poll(cond, ms)
  local deadline = ludx.now() + ms
  while not cond() and ludx.now() < deadline do ludx.sleep(20) end
  return cond()
end

-- Reads s until n bytes came: the bytes, or nil, msg, code.
local function read_n(s, n, ms)
  local parts, got = {}, 0
  while got < n do
    local d, msg, code = s:read(nil, ms or 20000)
    if not d then return nil, msg, code end
    parts[#parts + 1] = d
    got = got + #d
  end
  return table.concat(parts)
end

local function close(p)
  p.x:close()
  p.y:close()
  p.sa:close()
  p.sb:close()
end

-- A DATA packet for rb (id 2) at ra's next seq, sent from ra's own socket:
-- the receiver takes it as the next bytes of the stream.
local function inject(p, payload)
  local seq, ack = p.ra:handle():seq_ack()
  local pkt = string.char(0xff, 1, 0x01, 0) .. u32le(2) .. u32le(4 * 1024 * 1024) .. u32le(seq) .. u32le(ack) .. payload
  assert(p.sa:send(pkt, p.pb, "127.0.0.1"))
end

describe("secretstream over udx: injected bytes", function()
  -- {name, payload, bytes the real peer writes afterwards}
  local cases = {
    -- a whole frame of the right shape whose tag does not authenticate
    { "a forged frame", string.char(40, 0, 0) .. string.rep("\0", 40), 0 },
    -- a length prefix promising more than was sent: the length is not
    -- authenticated before the frame's tag, so the stream fails the moment
    -- the claimed bytes are in (here the real peer's next writes)
    { "a forged length prefix (64 KiB)", string.char(0, 0, 1) .. string.rep("x", 100), 128 * 1024 },
    { "a forged length prefix (1 MiB)", string.char(0, 0, 16) .. string.rep("x", 100), 1536 * 1024 },
  }
  for _, c in ipairs(cases) do
    it(c[1] .. " ends the stream with EDECRYPT for its reader and writer", run(function()
      local p = pair()
      local reader = ludx.spawn("reader", function() return p.y:read(nil, 8000) end)
      inject(p, c[2])
      if c[3] > 0 then
        -- the real peer goes on; its writes end once its stream is reset
        ludx.spawn("peer", function()
          for _ = 1, c[3] / 16384 do
            if not p.x:write(string.rep("p", 16384), 8000) then return end
          end
        end)
      end
      local data, msg, code = reader:join()
      assert.is_nil(data)
      assert.are.equal("EDECRYPT", code, tostring(msg))
      local ok, wmsg, wcode = p.y:write("after", 8000)
      assert.is_nil(ok)
      assert.are.equal("EDECRYPT", wcode, tostring(wmsg))
      close(p)
    end, 30000))
  end

  it("a writer waiting for the raw stream to drain gets EDECRYPT too", run(function()
    local p = pair()
    local big = string.rep("w", 8 * 1024 * 1024)
    local writer = ludx.spawn("writer", function() return p.y:write(big, 8000) end)
    local reader = ludx.spawn("reader", function() return p.y:read(nil, 8000) end)
    ludx.sleep(0)
    inject(p, string.char(40, 0, 0) .. string.rep("\0", 40))
    local _, _, rcode = reader:join()
    assert.are.equal("EDECRYPT", rcode)
    local ok, wmsg, wcode = writer:join()
    assert.is_nil(ok)
    assert.are.equal("EDECRYPT", wcode, tostring(wmsg))
    close(p)
  end, 30000))
end)

describe("secretstream over udx: close and destroy", function()
  it("a raw stream closed under a live SecretStream ends its reader at once (no busy loop)", run(function()
    local p = pair()
    local reader = ludx.spawn("reader", function() return p.y:read(nil, 10000) end)
    ludx.yield()
    -- the SecretStream fails on it, and destroys what it stood on
    p.rb:close(10000)
    local ok, _, code = reader:join(10000)
    assert.is_nil(ok)
    assert.are.equal("ECANCELED", code)
    assert.is_true(p.y:is_closed())
    close(p)
  end))

  it("a close after the peer reset says so (ECONNRESET), every time", run(function()
    local p = pair()
    assert(p.x:write("hello"))
    assert.are.equal("hello", p.y:read(nil, 10000))
    p.y:destroy() -- the peer resets
    assert.is_true(p.ra:wait_closed(10000))
    for _ = 1, 2 do
      local ok, msg, code = p.x:close(10000)
      assert.is_nil(ok)
      assert.are.equal("ECONNRESET", code)
      assert.is_string(msg)
    end
    -- the side that destroyed has no failure to report
    assert.is_true(p.y:close())
    close(p)
  end))

  it("a peer that resets after it acked our END: close is true (nothing was lost)", run(function()
    local p = pair()
    assert(p.x:write("hello"))
    assert(p.x:finish(10000))
    assert.is_true(p.ra.finished)
    assert.are.equal("hello", p.y:read(nil, 10000))
    p.y:destroy()
    assert.is_true(p.ra:wait_closed(10000))
    assert.is_true(p.x:close(10000))
    assert.is_true(p.x:close())
    close(p)
  end))

  it("a second close after one started outside a task returns how it ended", run(function()
    local p = pair()
    assert(p.x:write("hello"))
    local co = coroutine.wrap(function() return p.x:close(10000) end)
    assert.is_true(co()) -- outside a task: started
    p.rb:destroy() -- the peer resets before it acks our END
    local ok, _, code = p.x:close(10000)
    assert.is_nil(ok)
    assert.are.equal("ECONNRESET", code)
    assert.is_false(p.ra.finished == true)
    close(p)
  end))

  it("destroy after a close ends the raw stream's linger at once", run(function()
    local p = pair()
    assert.is_true(p.x:close(10000)) -- acked; y never ends: ra lingers
    assert.is_false(p.ra:is_closed())
    assert.is_true(p.x:destroy())
    assert.is_true(p.ra:wait_closed(2000))
    assert.is_true(p.rb:wait_closed(5000))
    assert.are.equal("ECONNRESET", select(2, p.rb:error()))
    close(p)
  end))

  it("a cancelled close leaves nothing waiting: a second close returns, destroy ends it", run(function()
    local p = pair()
    p.sb:close() -- nobody acks: the close waits
    local closer = ludx.spawn("closer", function() return p.x:close(60000) end)
    ludx.yield()
    assert.are.equal("waiting", closer.state)
    closer:cancel("enough")
    closer:join(5000)
    local second = ludx.spawn("second", function() return p.x:close(60000) end)
    local ok = second:join(5000)
    assert.is_true(ok)
    assert.is_true(p.x:destroy())
    assert.is_true(p.ra:wait_closed(2000))
    close(p)
  end))
end)

describe("secretstream over udx: frame buffers", function()
  -- A 16 MiB frame needs 16 MiB at each end while it is sealed and while
  -- it is gathered; once through, neither end keeps it (a service whose
  -- peers each sent one large message would otherwise hold 16 MiB per
  -- stream, per direction, for the life of the stream).
  it("a stream that carried the largest frame each way frees its large buffers a second after", run(function()
    local p = pair()
    local big = string.rep("z", secretstream.MAX_WRITE)
    local function through(from, to)
      local reader = ludx.spawn("reader", function() return read_n(to, #big) end)
      assert(from:write(big, 20000))
      assert.are.equal(#big, #assert(reader:join(30000)))
    end
    through(p.x, p.y)
    through(p.y, p.x)
    assert(p.x:write("after"))
    assert.are.equal("after", p.y:read(nil, 10000))
    -- right after, both ends still hold them (ready for another large one)
    assert.is_true(p.x:stats().buffer_bytes > 16 * 1024 * 1024)
    assert.is_true(p.y:stats().buffer_bytes > 16 * 1024 * 1024)
    -- a second after the last large frame they are gone (polled: no fixed sleep)
    poll(function() return p.x:stats().buffer_bytes <= 256 * 1024 and p.y:stats().buffer_bytes <= 256 * 1024 end, 15000)
    assert.is_true(p.x:stats().buffer_bytes <= 256 * 1024, "buffer_bytes " .. p.x:stats().buffer_bytes)
    assert.is_true(p.y:stats().buffer_bytes <= 256 * 1024, "buffer_bytes " .. p.y:stats().buffer_bytes)
    -- and the stream goes on: another large frame, then small ones
    through(p.x, p.y)
    assert(p.y:write("still"))
    assert.are.equal("still", p.x:read(nil, 10000))
    close(p)
  end))
end)

describe("secretstream over udx: a large frame is sealed in the send queue", function()
  -- frames from 4 MiB on are sealed straight into the udx send queue: the
  -- sender keeps no frame-sized buffer and makes no copy of the frame
  it("arrives whole, at every size around the line, with no sender buffer of its size", run(function()
    local p = pair()
    local M = 4 * 1024 * 1024
    local sizes = { M - 21, M - 20, M, 5000001, 2 * M, 16777198, 16777198 } -- frame: size + 20
    for i, n in ipairs(sizes) do
      local data = string.rep(string.char(64 + i), n - 1) .. "!"
      local reader = ludx.spawn("reader", function() return read_n(p.y, n) end)
      assert(p.x:write(data, 20000))
      -- right after the write, before any trim: what frames below the line
      -- use (up to 4 MiB), never the frame's size
      assert.is_true(p.x:stats().buffer_bytes < M + 65536, "frame of " .. n .. ": sender buffer_bytes " .. p.x:stats().buffer_bytes)
      assert.is_true(reader:join(30000) == data, "frame of " .. n .. " bytes")
    end
    assert(p.y:write("back"))
    assert.are.equal("back", p.x:read(nil, 10000))
    close(p)
  end))
end)

-- Turns the loop until cond() holds (a seal lasts a few ms: a sleep of
-- 20 ms could miss it) or ms pass.
local function poll_turns(cond, ms)
  local deadline = ludx.now() + ms
  while not cond() and ludx.now() < deadline do ludx.yield() end
  return cond()
end

describe("secretstream over udx: a large frame is sealed off the loop", function()
  -- from 4 MiB on, the frame is sealed on the thread pool while the loop
  -- sends and acks; the stream keeps its order and its lock meanwhile
  local M = 4 * 1024 * 1024

  it("arrives whole as the first frames, while the frame before it is acked", run(function()
    -- no traffic before: the queue empties (its last bytes acked) while
    -- the next frame is sealed, and must keep its layout under the run
    local p = wrapped()
    assert(p.x:ready(10000))
    local n = 5 * 1000 * 1000
    local frames = { string.rep("1", n), string.rep("2", n), string.rep("3", n) }
    local reader = ludx.spawn("reader", function() return read_n(p.y, 3 * n, 30000) end)
    for i = 1, 3 do assert(p.x:write(frames[i], 20000)) end
    assert.is_true(reader:join(30000) == table.concat(frames))
    close(p)
  end))

  it("is followed by a finish called while it is sealed", run(function()
    local p = pair()
    local big = string.rep("b", 5 * 1024 * 1024 - 1) .. "!"
    local w = ludx.spawn("big writer", function() return p.x:write(big, 20000) end)
    -- finish waits for the write lock, which the seal holds: its END goes
    -- after the frame
    assert.is_true(poll_turns(function() return p.x.sealing ~= nil end, 10000), "no seal under way")
    local f = ludx.spawn("finisher", function() return p.x:finish(20000) end)
    assert.is_true(w:join(30000))
    assert.is_true(read_n(p.y, #big, 30000) == big)
    assert.is_nil(p.y:read(nil, 10000)) -- EOF
    assert.is_true(f:join(30000))
    assert.are.equal(2, p.x:stats().frames_out) -- hello, big
    close(p)
  end))

  it("goes out whole when its writer is cancelled meanwhile, and the stream writes on", run(function()
    local p = pair()
    local big = string.rep("c", M + 12345)
    local w = ludx.spawn("cancelled writer", function() return p.x:write(big, 20000) end)
    assert.is_true(poll_turns(function() return p.x.sealing ~= nil end, 10000), "no seal under way")
    w:cancel()
    w:join(10000)
    -- the lock stays with the seal, then goes: the next write is not wedged
    assert(p.x:write("next", 20000))
    assert.are.equal(#big + 4, #assert(read_n(p.y, #big + 4, 30000)))
    assert(p.y:write("back"))
    assert.are.equal("back", p.x:read(nil, 10000))
    close(p)
  end))

  it("closes gracefully after a frame under seal, which the peer reads whole", run(function()
    local p = pair()
    local big = string.rep("d", M)
    local w = ludx.spawn("writer", function() return p.x:write(big, 20000) end)
    assert.is_true(poll_turns(function() return p.x.sealing ~= nil end, 10000), "no seal under way")
    local reader = ludx.spawn("reader", function() return read_n(p.y, #big, 30000) end)
    local closer = ludx.spawn("closer", function() return p.x:close(20000) end)
    assert.is_true(w:join(30000))
    assert.are.equal(#big, #reader:join(30000))
    assert.are.equal(nil, p.y:read(nil, 10000)) -- EOF after it
    assert.is_true(closer:join(30000))
    p.y:close()
    p.sa:close()
    p.sb:close()
  end))

  it("lets go of its memory when the stream is destroyed meanwhile", run(function()
    local p = pair()
    -- the send queue's own count of its mappings: the process's map count
    -- (/proc/self/maps) moves with the allocators (ASan's most of all)
    local before = udx.mapped_blocks()
    local big = string.rep("e", 8 * 1024 * 1024)
    for _ = 1, 3 do
      local w = ludx.spawn("writer", function() return p.x:write(big, 20000) end)
      assert.is_true(poll_turns(function() return p.x.sealing ~= nil end, 10000), "no seal under way")
      assert.is_true(udx.mapped_blocks() > before, "the seal's block is not counted")
      p.ra:destroy()
      local ok, _, code = w:join(30000)
      assert.is_nil(ok)
      assert.is_string(code)
      assert.is_true(poll(function() return p.x.sealing == nil end, 10000))
      p.x:destroy()
      p.y:destroy()
      p.sa:close()
      p.sb:close()
      p = pair()
    end
    -- the runs' blocks (8 MiB each) were unmapped at their commits
    assert.is_true(poll(function() return udx.mapped_blocks() <= before end, 10000),
      "mapped blocks " .. before .. " -> " .. udx.mapped_blocks())
    close(p)
  end))
end)

describe("secretstream over udx: a peer that stalls inside a large frame", function()
  -- the gathered part of a frame cannot be freed: once the trim found that,
  -- its timer waits for the frame to move instead of firing every second
  -- (it re-armed until the frame completed, for as long as the peer stalled)
  it("leaves no trim timer running while nothing arrives, and frees the buffers after the frame", run(function()
    local p = pair()
    local big = string.rep("s", 1024 * 1024)
    -- sealed by x's own framer, written on its raw stream in two halves
    local frame = assert(p.x.framer:encrypt(big))
    local cut = 400 * 1024
    assert(p.ra:write(frame:sub(1, cut)))
    assert(p.ra:flush(10000))
    -- y gathers 400 KiB, the trim finds them held, and no timer is left
    assert.is_true(poll(function() return p.y:stats().buffer_bytes > 256 * 1024 end, 10000))
    assert.is_true(poll(function() return p.y.trim_timer == nil end, 10000), "the trim timer keeps firing")
    -- the rest arrives: the frame reads whole, and its buffers go a second later
    assert(p.ra:write(frame:sub(cut + 1)))
    assert.are.equal(#big, #assert(read_n(p.y, #big, 10000)))
    assert.is_true(poll(function() return p.y:stats().buffer_bytes <= 256 * 1024 end, 15000),
      "buffer_bytes " .. p.y:stats().buffer_bytes)
    close(p)
  end))
end)

describe("secretstream over udx: a large frame that came with the handshake", function()
  -- writes queued before the handshake go out with its last message: the
  -- receiver's first raw read holds the start of a large frame, which the
  -- decoder then finishes in its own buffers. Those go once it is done, not
  -- a second after the last large frame (under steady traffic: never)
  it("leaves no decoder buffer of its size behind", run(function()
    local p = wrapped()
    local x, y = p.x, p.y
    local big = string.rep("q", 1024 * 1024)
    assert(x:write(big)) -- queued: sent with the handshake's last message
    assert(y:ready(10000))
    assert(read_n(y, #big, 10000))
    -- the gathered frame's own buffer (about 1 MiB) may stay until the
    -- trim; the decoder's two copies of it must not
    assert.is_true(y:stats().buffer_bytes < 1.5 * 1024 * 1024, "buffer_bytes " .. y:stats().buffer_bytes)
    close(p)
  end))
end)

describe("secretstream over udx: large frames in parts", function()
  local function pattern(n, seed)
    local t = {}
    for i = 1, n / 4 do t[i] = string.char((i + seed) % 256, (i * 7) % 256, seed % 256, (i * 13 + seed) % 256) end
    return table.concat(t)
  end

  -- a frame larger than a read batch reaches the reader in parts of at
  -- most 64 KiB (no string of the frame's size per frame), in order
  it("a 1 MiB frame reads in parts of at most 64 KiB, or of max, in order", run(function()
    local p = pair()
    local a, b = pattern(1024 * 1024, 1), pattern(200 * 1024, 2)
    assert(p.x:write(a))
    assert(p.x:write(b))
    local got, n = {}, 0
    while n < #a do
      local s = assert(p.y:read(nil, 10000))
      assert.is_true(#s <= 65536, #s)
      got[#got + 1] = s
      n = n + #s
    end
    assert.is_true(table.concat(got) == a)
    got, n = {}, 0
    while n < #b do
      local s = assert(p.y:read(1000, 10000))
      assert.is_true(#s <= 1000, #s)
      got[#got + 1] = s
      n = n + #s
    end
    assert.is_true(table.concat(got) == b)
    close(p)
  end))

  -- a reader cancelled between two reads of a large frame (in the loop
  -- turn a read owes after a batch) takes nothing with it
  it("a reader cancelled between parts loses nothing: the next reader goes on where it stopped", run(function()
    local p = pair()
    local a = pattern(1024 * 1024, 5)
    assert(p.x:write(a))
    assert(p.ra:flush(10000))
    local got = {}
    local r1 = ludx.spawn("r1", function()
      while true do got[#got + 1] = assert(p.y:read(nil, 5000)) end
    end)
    for _ = 1, 10000 do
      ludx.yield()
      if r1.waiting == "yield" and #got >= 2 then break end
    end
    assert.are.equal("yield", r1.waiting)
    r1:cancel("enough")
    r1:join(5000)
    local n = 0
    for _, s in ipairs(got) do n = n + #s end
    while n < #a do
      local s = assert(p.y:read(nil, 5000))
      got[#got + 1] = s
      n = n + #s
    end
    assert.is_true(table.concat(got) == a)
    close(p)
  end))

  -- frames that came with the handshake and wait in the framer's feed()
  -- buffer (a small read_highwater stopped the reader task) come before
  -- anything read from the udx stream directly
  it("frames held back by read_highwater before the data phase come first, in order", run(function()
    local p = wrapped({ read_highwater = 100 })
    for i = 1, 5 do assert(p.x:write(string.rep(tostring(i), 200))) end
    assert(p.y:ready(10000))
    for i = 1, 5 do assert.are.equal(string.rep(tostring(i), 200), p.y:read(nil, 5000)) end
    close(p)
  end))

  -- the reader task goes on watching the raw stream while a large frame's
  -- parts wait for the app: a peer's reset is reported at once (before,
  -- it stopped after the first part and the reset waited for a read), and
  -- the frame, authenticated before it, is still read whole before the error
  it("a peer's reset while a large frame waits unread is reported without a read, after the frame", run(function()
    local p = pair()
    local a = pattern(1024 * 1024, 4)
    local base = p.y:stats().plaintext_in
    assert(p.x:write(a))
    assert(p.ra:flush(10000)) -- all of it is in y's raw stream
    -- y's reader task authenticated the whole frame (polled: no fixed sleep)
    local deadline = ludx.now() + 10000
    while p.y:stats().plaintext_in < base + #a and ludx.now() < deadline do ludx.sleep(10) end
    assert.are.equal(base + #a, p.y:stats().plaintext_in)
    p.x:destroy() -- the peer resets
    assert.is_true(p.rb:wait_closed(10000))
    -- nobody reads y: its failure is seen all the same
    assert.is_true(p.y:wait_closed(10000))
    assert.is_true(p.y:is_closed())
    assert.are.equal("ECONNRESET", p.y.err and p.y.err.code)
    local got, code = {}
    while true do
      local s, _, c = p.y:read(nil, 5000)
      if not s then
        code = c
        break
      end
      got[#got + 1] = s
    end
    assert.is_true(table.concat(got) == a)
    assert.are.equal("ECONNRESET", code)
    close(p)
  end))

  -- a frame past read_highwater: the reader task hands on its first part
  -- and leaves the rest in the framer for reads to take (no second copy in
  -- Lua strings); a frame under it goes to the read buffer whole, as before
  it("a frame past read_highwater stays in the framer after its first part; reads take it whole", run(function()
    local p = wrapped({ read_highwater = 512 * 1024 })
    assert(p.x:write("hello"))
    assert.are.equal("hello", p.y:read(nil, 10000)) -- bytes mode
    local small, big = pattern(100 * 1024, 6), pattern(1024 * 1024, 7)
    local base = p.y:stats().plaintext_in
    assert(p.x:write(small))
    assert(p.x:write(big))
    assert(p.ra:flush(10000))
    assert.is_true(poll(function() return p.y:stats().plaintext_in == base + #small + #big end, 10000))
    -- both authenticated: the small one buffered whole, of the big one its
    -- first part, the rest in the framer
    assert.is_true(poll(function() return p.y.rbytes == #small + 65536 end, 10000))
    assert.are.equal(#big - 65536, p.y.framer:rest_bytes())
    local got = assert(read_n(p.y, #small + #big))
    assert.is_true(got == small .. big)
    assert.are.equal(0, p.y.framer:rest_bytes())
    -- the reader task goes on after the frame
    assert(p.x:write("after"))
    assert.are.equal("after", p.y:read(nil, 10000))
    close(p)
  end))

  -- the rest of a frame past the window (5 MiB against 4 MiB) closes the
  -- window while it waits: a close there must open it again, or the peer's
  -- last bytes and END wait for a window that never comes (ECONNRESET at
  -- the linger's end)
  it("a close while a frame past the window is half read: the peer ends cleanly", run(function()
    local p = pair()
    assert(p.x:write(pattern(5 * 1024 * 1024, 9)))
    assert.is_true(poll(function() return p.y.framer:rest_bytes() > 4 * 1024 * 1024 end, 10000))
    assert.are.equal(0, p.rb:stats().recv_rwnd)
    assert.is_true(p.y:close(5000))
    assert(p.x:write(pattern(100 * 1024, 10)))
    assert.is_true(p.x:close(5000))
    p.sa:close()
    p.sb:close()
  end))

  -- the parts not read yet were authenticated with the frame: a failure
  -- between them hands them over before the error, as buffered plaintext
  it("a failure between the parts of a frame: the reader gets every byte, then the error", run(function()
    local p = pair()
    local a = pattern(1024 * 1024, 3)
    assert(p.x:write(a))
    assert(p.ra:flush(10000)) -- all of it is in y's raw stream
    local first = assert(p.y:read(nil, 10000))
    assert.is_true(#first < #a)
    p.x:destroy()
    p.rb:wait_closed(5000)
    local ok = p.y:write("after the reset") -- fails the SecretStream
    assert.is_nil(ok)
    local got, code = { first }
    while true do
      local s, _, c = p.y:read(nil, 5000)
      if not s then
        code = c
        break
      end
      got[#got + 1] = s
    end
    assert.is_true(table.concat(got) == a)
    assert.is_string(code)
    close(p)
  end))
end)
