-- The framer's udx read path (framer:feed_udx): frames are gathered from
-- the udx stream's read buffer into one output buffer and opened there in
-- place. Whatever way the bytes are cut (the id/header frame, keep-alives,
-- a frame split at the end of what has arrived), every call returns the
-- plaintext of whole frames, in order and byte-exact, at most `max` bytes
-- (or one larger frame); a split frame is kept for the next call and counted by
-- pending(); a frame that does not authenticate fails the framer.
local ludx = require "ludx"
local udx = require "ludx.udx"
local H = require "helper"
local run = H.run

local C = ludx.core.crypto

-- A raw udx stream pair (ra -> rb) and two framers keyed for each other:
-- a seals, b opens. Returns the pair and a's id/header frame.
local function setup()
  local sa = assert(udx.bind("127.0.0.1", 0))
  local sb = assert(udx.bind("127.0.0.1", 0))
  local _, pa = sa:address()
  local _, pb = sb:address()
  local ra = assert(udx.stream(1))
  local rb = assert(udx.stream(2))
  assert(ra:connect(sa, 2, pb, "127.0.0.1"))
  assert(rb:connect(sb, 1, pa, "127.0.0.1"))
  local k1, k2, hash = string.rep("\1", 32), string.rep("\2", 32), string.rep("\3", 64)
  local a, b = C.framer(), C.framer()
  local header = assert(a:start(true, k1, k2, hash))
  assert(b:start(false, k2, k1, hash))
  local p = { sa = sa, sb = sb, ra = ra, rb = rb, a = a, b = b }
  function p.close()
    a:destroy()
    b:destroy()
    ra:close()
    rb:close()
    sa:close()
    sb:close()
  end
  return p, header
end

-- Writes raw bytes and waits until the receiver holds them all (acked
-- bytes are in its read buffer).
local function deliver(p, bytes)
  assert(p.ra:write(bytes, 10000))
  assert(p.ra:flush(10000))
end

-- n distinct bytes
local function data(n, seed)
  return ludx.core.datagen(seed):next(n)
end

describe("secretstream framer over a udx read buffer", function()
  it("returns whole frames in order when the input ends inside a frame", run(function()
    local p, header = setup()
    local x1, x3, x4 = data(100, 1), data(70000, 2), data(5000, 3)
    local f1, f2 = p.a:encrypt(x1), p.a:encrypt("") -- f2: a keep-alive
    local f3, f4 = p.a:encrypt(x3), p.a:encrypt(x4)
    -- header, x1, a keep-alive, then half of f3: the call ends with
    -- plaintext and a split frame whose first byte sits on x1's last byte
    local cut = math.floor(#f3 / 2)
    deliver(p, header .. f1 .. f2 .. f3:sub(1, cut))
    local got, used = p.b:feed_udx(p.rb:handle(), 1024 * 1024)
    assert.is_true(got == x1)
    assert.are.equal(#header + #f1 + #f2 + cut, used)
    assert.is_true(p.b:ready())
    assert.is_true(p.b:pending() > 0)
    assert.are.equal(false, (p.b:feed_udx(p.rb:handle())))
    -- the rest of f3, and f4 split in its length prefix
    deliver(p, f3:sub(cut + 1) .. f4:sub(1, 2))
    assert.is_true(p.b:feed_udx(p.rb:handle(), 1024 * 1024) == x3)
    assert.is_true(p.b:pending() > 0)
    deliver(p, f4:sub(3))
    assert.is_true(p.b:feed_udx(p.rb:handle(), 1024 * 1024) == x4)
    assert.are.equal(0, p.b:pending())
    local st = p.b:stats()
    assert.are.equal(4, st.frames_in)
    assert.are.equal(1, st.keepalives_in)
    assert.are.equal(#x1 + #x3 + #x4, st.bytes_in)
    p.close()
  end))

  it("stops before a frame that would pass max, and one = true gives one message per call", run(function()
    local p, header = setup()
    local xs, wire = {}, { header }
    for i = 1, 6 do
      xs[i] = data(1000 * i, 10 + i)
      wire[#wire + 1] = p.a:encrypt(xs[i])
      if i == 3 then wire[#wire + 1] = p.a:encrypt("") end
    end
    deliver(p, table.concat(wire))
    local h = p.rb:handle()
    -- max 3000: frames of 1000 and 2000 bytes; the next (3000) would pass it
    assert.is_true(p.b:feed_udx(h, 3000) == xs[1] .. xs[2])
    -- one message at a time; the keep-alive is skipped
    assert.is_true(p.b:feed_udx(h, nil, true) == xs[3])
    assert.is_true(p.b:feed_udx(h, nil, true) == xs[4])
    -- one = true with max 1: a frame larger than max comes alone, whole
    assert.is_true(p.b:feed_udx(h, 1, true) == xs[5])
    -- bytes mode, max 1000: a larger frame comes in max-sized parts, the
    -- third result saying more of it is ready (and no raw byte is taken)
    local parts = {}
    repeat
      local part, used, more = p.b:feed_udx(h, 1000)
      assert.is_true(#part <= 1000)
      if #parts > 0 then assert.are.equal(0, used) end
      parts[#parts + 1] = part
    until not more
    assert.are.equal(6, #parts)
    assert.is_true(table.concat(parts) == xs[6])
    assert.are.equal(false, (p.b:feed_udx(h)))
    p.close()
  end))

  it("a large frame split over many reads arrives once whole, in parts of max, bounded by one frame", run(function()
    local p, header = setup()
    local big = data(3 * 1024 * 1024, 7)
    local f = p.a:encrypt(big)
    deliver(p, header)
    assert.are.equal(false, (p.b:feed_udx(p.rb:handle())))
    local got, off, step = nil, 1, 200 * 1024 + 17
    while off <= #f do
      deliver(p, f:sub(off, off + step - 1))
      off = off + step
      local r, _, more = p.b:feed_udx(p.rb:handle(), 65536)
      if off <= #f then
        assert.are.equal(false, r) -- nothing before the whole frame is in
      else
        local parts = { r }
        while more do
          p.b:trim() -- keeps what is still to hand over
          r, _, more = p.b:feed_udx(p.rb:handle(), 65536)
          assert.are.equal(65536, #r)
          parts[#parts + 1] = r
        end
        got = table.concat(parts)
        assert.are.equal(#big / 65536, #parts)
      end
    end
    assert.are.equal(#big, #got)
    assert.is_true(got == big)
    -- once handed over, the frame's buffer goes at the next trim
    assert.is_true(p.b:buffer_bytes() >= #big)
    p.b:trim()
    assert.is_true(p.b:buffer_bytes() <= 256 * 1024)
    p.close()
  end))

  -- the rest of a large frame sits in the framer's buffer; as the reader
  -- takes it, the next frame moves from the stream into the room the parts
  -- left, all but its last byte (the call after the rest opens it), and
  -- the window counts the rest as unread
  it("while a large frame goes out in parts, the next one is gathered where they were", run(function()
    local p, header = setup()
    local h = p.rb:handle()
    local big, nxt = data(1024 * 1024, 41), data(300 * 1024, 42)
    local f1, f2 = p.a:encrypt(big), p.a:encrypt(nxt)
    deliver(p, header .. f1 .. f2)
    local rwnd_max = p.rb:stats().recv_rwnd + h:readable()
    local r, used, more = p.b:feed_udx(h, 65536)
    assert.are.equal(#header + #f1, used)
    assert.is_true(more)
    assert.are.equal(#f2, h:readable()) -- nothing of f2 taken yet
    -- what is still to hand over counts against the window
    assert.are.equal(rwnd_max - #f2 - (#big - 65536), p.rb:stats().recv_rwnd)
    local parts, taken, least = { r }, 0, h:readable()
    while more do
      r, used, more = p.b:feed_udx(h, 65536)
      parts[#parts + 1] = r
      taken = taken + used
      assert.is_true(h:readable() < least or h:readable() == 1)
      least = h:readable()
      assert.are.equal(rwnd_max - h:readable() - p.b:rest_bytes(), p.rb:stats().recv_rwnd)
    end
    assert.is_true(table.concat(parts) == big)
    assert.are.equal(#f2 - 1, taken)
    assert.are.equal(1, h:readable())
    assert.are.equal(#f2 - 1, p.b:pending())
    assert.are.equal(rwnd_max - 1, p.rb:stats().recv_rwnd) -- the backlog is gone
    -- the next call opens it
    assert.is_true(p.b:feed_udx(h, 1024 * 1024) == nxt)
    assert.are.equal(0, h:readable())
    assert.are.equal(0, p.b:pending())
    p.close()
  end))

  -- a bad length prefix met while gathering behind the parts: every part
  -- comes first (they were authenticated), then the error, every call
  it("a bad frame after a large one: the large one whole, then EFRAME", run(function()
    local p, header = setup()
    local h = p.rb:handle()
    local big = data(512 * 1024, 43)
    deliver(p, header .. p.a:encrypt(big) .. string.char(5, 0, 0) .. string.rep("z", 5))
    local parts, more = {}, true
    while more do
      local r, _, m = p.b:feed_udx(h, 65536)
      assert.is_string(r)
      parts[#parts + 1] = r
      more = m
    end
    assert.is_true(table.concat(parts) == big)
    for _ = 1, 2 do
      local r2, msg, code = p.b:feed_udx(h, 65536)
      assert.is_nil(r2)
      assert.are.equal("EFRAME", code, msg)
    end
    p.close()
  end))

  it("a length prefix shorter than a tag fails the framer with EFRAME before any body is gathered", run(function()
    local p, header = setup()
    local x1 = data(500, 31)
    -- a good frame, then L = 5 (a data frame is at least 17 bytes)
    deliver(p, header .. p.a:encrypt(x1) .. string.char(5, 0, 0) .. string.rep("z", 5))
    local r, msg, code = p.b:feed_udx(p.rb:handle(), 1024 * 1024)
    assert.is_nil(r)
    assert.are.equal("EFRAME", code, msg)
    -- the framer stays failed
    local r2, _, code2 = p.b:feed_udx(p.rb:handle())
    assert.is_nil(r2)
    assert.is_not_nil(code2)
    p.close()
  end))

  it("a flipped bit in a gathered frame fails the framer with EDECRYPT", run(function()
    local p, header = setup()
    local x1, x2 = data(3000, 21), data(3000, 22)
    local f1, f2 = p.a:encrypt(x1), p.a:encrypt(x2)
    local i = #f1 + 100
    local wire = f1 .. f2
    wire = wire:sub(1, i - 1) .. string.char(bit.bxor(wire:byte(i), 1)) .. wire:sub(i + 1)
    deliver(p, header .. wire)
    -- x1 authenticated, but nothing of a call that met a bad frame is handed out
    local r, msg, code = p.b:feed_udx(p.rb:handle(), 1024 * 1024)
    assert.is_nil(r)
    assert.are.equal("EDECRYPT", code, msg)
    p.close()
  end))
end)

describe("secretstream framer: a frame begun by feed() is taken over by feed_udx", function()
  -- the framer alone, over a udx pair: the handshake's frames and the start
  -- of a data frame go through feed() (as they come with the handshake), the
  -- rest through feed_udx, which gathers the frame from where feed() left
  -- it (not in the decoder's buffers, then copied), at every cut
  for _, cut in ipairs({ 3, 5, 17 }) do
    it("a keep-alive cut at " .. cut .. " bytes, then a message", run(function()
      local p, header = setup()
      local ka, x = p.a:encrypt(""), data(3000, 1)
      local fx = p.a:encrypt(x)
      assert.are.equal("", p.b:feed(header .. ka:sub(1, cut)))
      deliver(p, ka:sub(cut + 1) .. fx)
      assert.is_true(p.b:feed_udx(p.rb:handle(), nil, true) == x)
      p.close()
    end))
  end
  for _, cut in ipairs({ 3, 4, 1000 }) do
    for _, one in ipairs({ false, true }) do
      it("a 1 MiB frame cut at " .. cut .. " bytes, " .. (one and "as a message" or "as bytes"), run(function()
        local p, header = setup()
        local x, y = data(1024 * 1024, 2), data(10, 3)
        local fx, fy = p.a:encrypt(x), p.a:encrypt(y)
        assert.are.equal("", p.b:feed(header .. fx:sub(1, cut)))
        deliver(p, fx:sub(cut + 1, 500000))
        assert.are.equal(false, p.b:feed_udx(p.rb:handle(), 65536, one))
        deliver(p, fx:sub(500001) .. fy)
        local parts = {}
        while true do
          local s = p.b:feed_udx(p.rb:handle(), 65536, one)
          if not s then break end
          parts[#parts + 1] = s
        end
        assert.is_true(table.concat(parts) == x .. y)
        p.close()
      end))
    end
  end
end)
