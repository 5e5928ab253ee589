-- ludx.secretstream: @hyperswarm/secret-stream over any byte stream.
--
-- The raw stream needs only read([max][, timeout]), write(data[, timeout]),
-- finish([timeout]) and close() (a udx stream, or ludx.pipe in tests); over
-- a udx stream it also uses the stream's handle(), wait_readable(),
-- wait_drain() and error() (documented in ludx.udx). Its
-- write must take the whole buffer even when it returns ETIMEDOUT (the udx
-- contract: the wait is for the drain, not for room). Encryption and framing
-- happen in C (core.crypto.framer), one frame per write, never per packet
-- in Lua.
--
--   local ss = secretstream.wrap(raw, {
--     initiator = true,              -- required
--     keypair = kp,                  -- default: a random one
--     remote_public_key = pk,        -- expected peer key (XX), or the responder's key (IK initiator)
--     pattern = "XX",                -- or "IK"
--     keepalive = ms,                -- send an empty message after ms without writes
--     handshake_timeout = 10000,     -- ms; ETIMEDOUT when the Noise handshake takes longer
--     handshake = {tx=, rx=, hash=, public_key=, remote_public_key=},  -- external (hyperdht)
--     messages = true,               -- keep frame boundaries from the start (see recv_message)
--     read_highwater = 4194304,      -- bytes of unread plaintext (64 more per buffered frame)
--                                    -- before the reader stops pulling raw bytes
--   })
--   ss:ready([timeout]) ss:read([max][, timeout]) ss:write(data[, timeout])
--   ss:recv_message([timeout]) ss:send_message(data[, timeout])
--   ss:wait_header([timeout]) ss:finish([timeout]) ss:close() ss:stats()
--   ss.public_key, ss.remote_public_key, ss.handshake_hash (once ready)
--
-- Errors are nil, msg, code. A stream that fails (bad input, handshake
-- failure, raw stream error) closes its raw stream and then returns the
-- same error from every call, except that read() and recv_message() first
-- hand over the plaintext already decrypted (authenticated) before the
-- failure; close() drops it. Codes: EHANDSHAKE (Noise failed, incl. an
-- invalid point, or the raw stream ended during it), EREMOTEKEY (the peer's
-- static key is not remote_public_key), EDECRYPT (a frame did not
-- authenticate: bit flip, replay, reorder), EFRAME (bad length, truncated at
-- EOF), EHEADER / ESTREAMID (bad id/header frame), ETIMEDOUT (handshake
-- timeout), or the raw stream's own code (ECONNRESET, ...).
--
-- Message boundaries: until the first read() or recv_message(), the reader
-- task keeps one decrypted frame per buffered entry; the first read() turns
-- the stream to bytes (frames are joined, the fast path), the first
-- recv_message() (or opts.messages) to messages (one frame per call; empty
-- frames are keep-alives and never delivered). read() still works on a
-- message stream; recv_message() on a byte stream is an EINVAL error.
--
-- A reader task pumps raw bytes into the framer while the stream is open,
-- and a keep-alive task runs when keepalive is set: close() (or a failure)
-- ends both, finish() ends the keep-alive task, EOF ends the reader.
--
-- This file is the framing over any raw stream; over a udx stream the data
-- phase takes the fused path of ludx.secretstream.udx (frames decrypted
-- from and sealed into the udx stream's own buffers, in C), bound below to
-- this file's helpers. How a stream ends (finish, close, destroy) is in
-- ludx.secretstream.close, bound the same way.
local ludx = require "ludx"
local C = require("ludx.core").crypto

local M = {}
M.MAX_WRITE = C.MAX_WRITE

local type, tostring, concat = type, tostring, table.concat
local now = ludx.now

-- The reader task stops pulling raw bytes while this much plaintext waits
-- for the user's read (backpressure reaches the raw stream).
local READ_HIGHWATER = 4 * 1024 * 1024

-- The most raw bytes the reader takes in one read (pipe, TCP, and udx
-- before the keys are known).
local RAW_READ = 65536

-- The framer's buffers grow to the largest frame that went through (up to
-- 16 MiB each way) and are kept for the next one; TRIM_IDLE ms after the
-- last frame larger than BUFFER_KEEP, what they hold above it is freed.
local BUFFER_KEEP = 256 * 1024
local TRIM_IDLE = 1000

-- Writes made before the handshake completes are queued up to this many
-- bytes; past it, write waits for the handshake.
local PENDING_LIMIT = 1024 * 1024

-- What one buffered entry costs besides its bytes, in the read high-water
-- count (a flood of tiny frames in message mode is bounded like bytes).
local ENTRY_COST = 64

-- The fused udx data path (ludx.secretstream.udx), bound to the helpers
-- below once they exist.
local fused

local Stream = {}
Stream.__index = Stream
-- One line for the REPL and logs: role, short keys, state, what it runs on.
Stream.__tostring = function(s)
  local function short(k)
    if type(k) ~= "string" then return "?" end
    return (k:sub(1, 4):gsub(".", function(c) return string.format("%02x", c:byte()) end)) .. "..."
  end
  local state = s.closed and "closed" or (s.err and "failed" or (s.is_ready and "ready" or "handshaking"))
  local over = (type(s.raw) == "table" and getmetatable(s.raw) and getmetatable(s.raw).__tostring) and tostring(s.raw)
    or type(s.raw)
  return string.format("<secretstream %s %s, key %s, remote %s, over %s>", s.initiator and "initiator" or "responder",
    state, short(s.public_key), short(s.remote_public_key), over)
end

-- argument errors point at the caller's line (ludx.check)
local check = require "ludx.check"
local argerr, check_bytes = check.fail, check.bytes
local function check_ms(v, name, fname)
  return check.timeout(v, fname, name)
end

function M.keypair(seed)
  check_bytes(seed, 32, "seed", "keypair", true)
  local pk, sk = C.keypair(seed)
  return { public_key = pk, secret_key = sk }
end

local deadline_of, left = check.deadline, check.left

---------------------------------------------------------------------------
-- Failure and shutdown.

local function wake_everyone(self)
  self.readers:wake_all(false)
  self.ready_waiters:wake_all(false)
  self.header_waiters:wake_all(false)
  self.lock_waiters:wake_all(false)
  self.pump_waiters:wake_all(false)
  self.keepalive_waiters:wake_all(false)
  self.close_waiters:wake_all(true)
end

-- Decrypted plaintext for the reader.
local function push_plain(self, data)
  self.rtail = self.rtail + 1
  self.rbuf[self.rtail] = data
  self.rbytes = self.rbytes + #data
  self.readers:wake_one(true)
end

-- keep: a failure keeps the plaintext already decrypted (authenticated) for
-- the reader, which takes it before the error (a peer's reset after its
-- last frames loses nothing); close() drops it.
-- Resets the raw stream (the peer sees ECONNRESET); a raw without destroy
-- (a pipe, tcp) is closed. Safe to repeat.
local function reset_raw(self)
  pcall(self.raw.destroy or self.raw.close, self.raw)
end

-- The handshake is over (done or failed): its timer and state go.
local function end_handshake(self)
  if self.hs_timer then
    self.hs_timer:cancel()
    self.hs_timer = nil
  end
  if self.noise then
    self.noise:destroy()
    self.noise = nil
  end
end

local function release(self, keep, graceful)
  end_handshake(self)
  if self.trim_timer then
    self.trim_timer:cancel()
    self.trim_timer = nil
  end
  if keep and self.fused then fused.rest(self) end
  self.framer_stats = self.framer:stats()
  self.framer:destroy()
  if not keep then self.rbuf, self.rhead, self.rtail, self.rbytes = {}, 1, 0, 0 end
  self.pending, self.pending_bytes = {}, 0
  wake_everyone(self)
  ludx.untrack(self)
  if not graceful then reset_raw(self) end
end

-- Ends the stream with an error; safe outside a task (timers).
local function fail(self, msg, code)
  if self.err or self.closed then return end
  self.err = { msg = msg, code = code }
  release(self, true)
end

local function dead(self)
  if self.err then return nil, self.err.msg, self.err.code end
  if self.closed then return nil, "stream is closed", "ECANCELED" end
  return false
end

-- A frame larger than BUFFER_KEEP went through (or is being gathered, or
-- handed over in parts): the framer's buffers are trimmed once TRIM_IDLE ms
-- pass without another. What a frame that is still under way holds cannot
-- be trimmed: the timer then stops (trim_stuck) until the frame moves
-- (watch_buffers in ludx.secretstream.udx), rather than firing every
-- TRIM_IDLE while a peer stalls.
local function trim_later(self)
  self.large_at = now()
  self.trim_stuck = false
  if self.trim_timer then return end
  local function look()
    self.trim_timer = nil
    if self.err or self.closed then return end
    local wait = self.large_at + TRIM_IDLE - now()
    if wait > 0 then
      self.trim_timer = ludx.after(math.ceil(wait), look)
      return
    end
    self.framer:trim()
    self.trim_stuck = self.framer:buffer_bytes() > BUFFER_KEEP
  end
  self.trim_timer = ludx.after(TRIM_IDLE, look)
end

-- The framer holds large buffers: trim them later.
local function watch_size(self)
  if self.framer:buffer_bytes() > BUFFER_KEEP then trim_later(self) end
end

-- A frame of n plaintext bytes was sealed.
local function sealed(self, n)
  self.last_write = now()
  if n > BUFFER_KEEP then trim_later(self) end
end

---------------------------------------------------------------------------
-- Raw writes: one lock orders every frame, so the order of encryption is
-- the order on the wire (the secretstream nonce is implicit).

local function lock(self, deadline, fname)
  while self.locked do
    local ok, msg, code = self.lock_waiters:wait("secretstream write", left(deadline), fname)
    if ok == nil and code then return nil, msg, code end
    local r, m, c = dead(self)
    if r == nil then return nil, m, c end
  end
  local r, m, c = dead(self)
  if r == nil then return nil, m, c end
  self.locked = true
  return true
end

local function unlock(self)
  self.locked = false
  self.lock_waiters:wake_one(true)
end

-- Writes bytes while holding the lock. A raw error other than a drain
-- timeout fails the stream: part of a frame may be on the wire.
local function raw_write(self, bytes, deadline)
  local ok, msg, code = self.raw:write(bytes, left(deadline))
  if ok then return true end
  if code ~= "ETIMEDOUT" then fail(self, msg or "raw write failed", code or "EIO") end
  return nil, msg, code
end

local function encrypt(self, data)
  local frame, msg, code = self.framer:encrypt(data)
  if not frame then
    fail(self, msg, code)
    return nil, msg, code
  end
  sealed(self, #data)
  return frame
end

---------------------------------------------------------------------------
-- Handshake.

-- Keys are known: send our id/header frame and every queued write, in the
-- same raw write as the last handshake message (out). Runs with the lock.
local function complete(self, r, out)
  self.public_key = r.public_key
  self.remote_public_key = r.remote_public_key
  self.handshake_hash = r.hash
  local header, msg, code = self.framer:start(self.initiator, r.tx, r.rx, r.hash)
  if not header then return nil, msg, code end
  self.keyed = true
  out[#out + 1] = header
  for i = 1, #self.pending do
    local frame, m, c = encrypt(self, self.pending[i])
    if not frame then return nil, m, c end
    out[#out + 1] = frame
  end
  self.pending, self.pending_bytes = {}, 0
  self.is_ready = true
  self.last_write = now()
  end_handshake(self)
  self.ready_waiters:wake_all(true)
  return true
end

local function handshake_error(msg, code)
  -- an invalid point or a message at the wrong time is a failed handshake
  if code == "EBADKEY" or code == "ESTATE" or code == "EINVAL" then
    return "Noise handshake failed: " .. msg, "EHANDSHAKE"
  end
  return msg, code
end

-- Our next Noise messages (framed) after a step; then keys if complete.
local function advance(self)
  local out = {}
  while self.noise:status() == "send" do
    local m, msg, code = self.noise:send("")
    if not m then return nil, handshake_error(msg, code) end
    out[#out + 1] = C.frame(m)
  end
  local ok, msg, code = lock(self, nil, "handshake")
  if not ok then return nil, msg, code end
  if self.noise:complete() then
    ok, msg, code = complete(self, self.noise:result(), out)
    if not ok then
      unlock(self)
      return nil, msg, code
    end
  end
  if #out > 0 then ok, msg, code = raw_write(self, concat(out)) end
  unlock(self)
  if not ok and code ~= "ETIMEDOUT" then return nil, msg, code end
  return true
end

local function on_handshake_message(self, message)
  if not self.noise then return nil, "Noise handshake failed: unexpected message", "EHANDSHAKE" end
  local payload, msg, code = self.noise:recv(message)
  if not payload then return nil, handshake_error(msg, code) end
  return advance(self) -- secret-stream payloads are empty; any payload is dropped
end

---------------------------------------------------------------------------
-- The reader task.

-- The peer's id/header frame was accepted: wake wait_header().
local function check_header(self)
  if self.framer:ready() then
    self.header_in = true
    self.header_waiters:wake_all(true)
  end
end

local function over_highwater(self)
  return self.rbytes + (self.rtail - self.rhead + 1) * ENTRY_COST >= self.read_highwater
end

local function on_eof(self)
  if not self.is_ready then
    return fail(self, "Noise handshake failed: the stream ended during the handshake", "EHANDSHAKE")
  end
  if self.framer:pending() > 0 then
    return fail(self, "Invalid message received: truncated frame at the end of the stream", "EFRAME")
  end
  if not self.framer:ready() then
    return fail(self, "Invalid header message received: the stream ended before it", "EHEADER")
  end
  self.eof = true
  self.readers:wake_all(true)
end

-- Waits while the read high-water is reached (backpressure reaches the
-- raw stream); false once the stream is dead.
local function wait_room(self)
  while over_highwater(self) and not (self.err or self.closed) do
    self.pump_waiters:wait("secretstream reader backpressure")
  end
  return not (self.err or self.closed)
end

fused = require("ludx.secretstream.udx").bind({
  push_plain = push_plain, fail = fail, on_eof = on_eof, check_header = check_header,
  wait_room = wait_room, sealed = sealed, watch_size = watch_size, unlock = unlock,
})

local function pump(self)
  local raw, framer = self.raw, self.framer
  while true do
    -- keys in place and nothing held back: the rest goes the C way
    if self.fused and self.keyed then return fused.pump(self) end
    if not wait_room(self) then return end
    -- at most RAW_READ at a time: a raw stream that holds megabytes (a
    -- pipe or a TCP connection read late) is not taken whole
    local chunk, msg, code = raw:read(RAW_READ)
    if self.err or self.closed then return end
    if chunk == nil then
      if msg then return fail(self, msg, code or "EIO") end
      return on_eof(self)
    end
    self.raw_bytes_in = self.raw_bytes_in + #chunk
    -- one frame per call while boundaries are kept (held bytes are
    -- drained with feed("") before the next raw read)
    local one = self.mode ~= "bytes"
    local data, hmsg, hcode = framer:feed(chunk, one)
    if data then watch_size(self) end
    while true do
      if data == nil then return fail(self, hmsg, hcode) end
      if not self.header_in and self.keyed then check_header(self) end
      if #data > 0 then push_plain(self, data) end
      if hmsg ~= nil then
        local ok, m, c = on_handshake_message(self, hmsg)
        if not ok then return fail(self, m, c) end
        if self.err or self.closed then return end
      elseif not (one and #data > 0) then
        break
      end
      -- frame by frame, the read high-water applies within a chunk too
      if not wait_room(self) then return end
      data, hmsg, hcode = framer:feed("", one)
    end
  end
end

local function keepalive(self)
  local period = self.keepalive
  while not (self.err or self.closed or self.finishing) do
    local idle = now() - self.last_write
    if self.is_ready and idle >= period then
      local ok = lock(self, nil, "keepalive")
      if not ok then return end
      if not self.finishing and now() - self.last_write >= period then
        local frame = encrypt(self, "")
        if frame then
          self.keepalives_out = self.keepalives_out + 1
          raw_write(self, frame)
        end
      end
      unlock(self)
    else
      self.keepalive_waiters:wait("secretstream keepalive", self.is_ready and period - idle or period)
    end
  end
end

---------------------------------------------------------------------------
-- Construction.

local function check_options(raw, opts)
  local fname = "wrap"
  if type(raw) ~= "table" and type(raw) ~= "userdata" then argerr("raw", fname, "stream", type(raw)) end
  for _, m in ipairs({ "read", "write", "finish", "close" }) do
    local ok, f = pcall(function() return raw[m] end)
    if not ok or type(f) ~= "function" then argerr("raw", fname, "stream with read/write/finish/close", "no " .. m) end
  end
  if type(opts) ~= "table" then argerr("opts", fname, "table", type(opts)) end
  if type(opts.initiator) ~= "boolean" then argerr("opts.initiator", fname, "boolean", type(opts.initiator)) end
  local kp = opts.keypair
  if kp ~= nil then
    if type(kp) ~= "table" then argerr("opts.keypair", fname, "{public_key=, secret_key=}", type(kp)) end
    check_bytes(kp.public_key, 32, "opts.keypair.public_key", fname)
    check_bytes(kp.secret_key, 64, "opts.keypair.secret_key", fname)
  end
  check_bytes(opts.remote_public_key, 32, "opts.remote_public_key", fname, true)
  check_ms(opts.keepalive, "opts.keepalive", fname)
  check_ms(opts.handshake_timeout, "opts.handshake_timeout", fname)
  if opts.read_highwater ~= nil then check.integer(opts.read_highwater, 1, 1024 * 1024 * 1024, "opts.read_highwater", fname) end
  local pattern = opts.pattern or "XX"
  if pattern ~= "XX" and pattern ~= "IK" then argerr("opts.pattern", fname, "'XX' or 'IK'", tostring(pattern)) end
  if pattern == "IK" and opts.initiator and not opts.remote_public_key then
    argerr("opts.remote_public_key", fname, "the responder's key for an IK initiator", "nil")
  end
  local hs = opts.handshake
  if hs ~= nil then
    if type(hs) ~= "table" then argerr("opts.handshake", fname, "table", type(hs)) end
    check_bytes(hs.tx, 32, "opts.handshake.tx", fname)
    check_bytes(hs.rx, 32, "opts.handshake.rx", fname)
    check_bytes(hs.hash, 64, "opts.handshake.hash", fname)
    check_bytes(hs.public_key, 32, "opts.handshake.public_key", fname, true)
    check_bytes(hs.remote_public_key, 32, "opts.handshake.remote_public_key", fname, true)
  end
  return pattern
end

--- Wraps a raw byte stream; must be called in a task. Returns the stream at
-- once: the handshake runs in its reader task (see ready()).
function M.wrap(raw, opts)
  local pattern = check_options(raw, opts)
  if not ludx.running() then error("secretstream.wrap must be called inside ludx.run (it starts tasks)", 2) end
  local self = setmetatable({
    raw = raw,
    initiator = opts.initiator,
    keepalive = opts.keepalive and opts.keepalive > 0 and opts.keepalive or nil,
    read_highwater = opts.read_highwater or READ_HIGHWATER,
    framer = C.framer(),
    rbuf = {}, rhead = 1, rtail = 0, rbytes = 0,
    pending = {}, pending_bytes = 0,
    readers = ludx.waiters(), ready_waiters = ludx.waiters(), lock_waiters = ludx.waiters(),
    header_waiters = ludx.waiters(), header_in = false,
    pump_waiters = ludx.waiters(), keepalive_waiters = ludx.waiters(), close_waiters = ludx.waiters(),
    last_write = now(),
    raw_bytes_in = 0, keepalives_out = 0,
    -- over a udx stream, data frames are encrypted and decrypted on the C
    -- side of the stream (framer:encrypt_udx / feed_udx)
    fused = raw.udx_stream == true,
    mode = opts.messages and "messages" or nil, -- nil: not decided yet
  }, Stream)

  local first -- what goes on the wire before anything else
  local hs = opts.handshake
  if hs then
    -- external handshake (hyperdht): no Noise frames, both sides send
    -- their id/header frame at once (docs/protocol/hyperswarm.md A.3 step 7)
    self.public_key = hs.public_key
    self.remote_public_key = hs.remote_public_key
    self.handshake_hash = hs.hash
    first = assert(self.framer:start(self.initiator, hs.tx, hs.rx, hs.hash))
    self.keyed = true
    self.is_ready = true
  else
    local kp = opts.keypair or M.keypair()
    self.public_key = kp.public_key
    self.noise = C.noise(pattern, self.initiator, kp, "", opts.remote_public_key)
    if self.initiator then first = C.frame(assert(self.noise:send(""))) end
    local ms = opts.handshake_timeout or 10000
    self.hs_timer = ludx.after(ms, function()
      self.hs_timer = nil
      if not self.is_ready then fail(self, "Noise handshake timed out after " .. ms .. " ms", "ETIMEDOUT") end
    end)
  end

  -- The first frame goes out before any write can take the lock.
  if first then self.locked = true end
  ludx.spawn("secretstream reader", function()
    if first then
      raw_write(self, first)
      unlock(self)
    end
    pump(self)
  end)
  if self.keepalive then ludx.spawn("secretstream keepalive", keepalive, self) end
  ludx.track(self)
  return self
end

---------------------------------------------------------------------------
-- The stream API.

--- Waits for the handshake; true, or nil, msg, code.
function Stream:ready(timeout)
  ludx.check_timeout(timeout, "ready")
  local deadline = deadline_of(timeout)
  while true do
    local r, msg, code = dead(self)
    if r == nil then return nil, msg, code end
    if self.is_ready then return true end
    local ok, m, c = self.ready_waiters:wait("secretstream handshake", left(deadline), "ready")
    if ok == nil and c then return nil, m, c end
  end
end

--- Waits until both id/header frames are through: the peer's has arrived
-- and ours is written (over a udx stream: and acknowledged), so both ends
-- hold the stream and each has had a packet from the other (a hyperdht
-- server that accepts on the client's first packet has accepted it).
-- true, or nil, msg, code.
function Stream:wait_header(timeout)
  ludx.check_timeout(timeout, "wait_header")
  local deadline = deadline_of(timeout)
  while not self.header_in do
    local r, msg, code = dead(self)
    if r == nil then return nil, msg, code end
    if self.eof then return nil, "Invalid header message received: the stream ended before it", "EHEADER" end
    local ok, m, c = self.header_waiters:wait("secretstream header", left(deadline), "wait_header")
    if ok == nil and c then return nil, m, c end
  end
  -- our header went out under the lock, before any other frame
  local ok, m, c = lock(self, deadline, "wait_header")
  if not ok then return nil, m, c end
  unlock(self)
  if self.fused then
    ok, m, c = self.raw:flush(left(deadline))
    if not ok then
      local r, msg, code = dead(self)
      if r == nil then return nil, msg, code end
      return nil, m, c
    end
  end
  local r, msg, code = dead(self)
  if r == nil then return nil, msg, code end
  return true
end

local function take(self, max)
  local n = max and math.min(max, self.rbytes) or self.rbytes
  local out, got = {}, 0
  while got < n do
    local c = self.rbuf[self.rhead]
    if #c <= n - got then
      out[#out + 1] = c
      got = got + #c
      self.rbuf[self.rhead] = nil
      self.rhead = self.rhead + 1
    else
      local want = n - got
      out[#out + 1] = c:sub(1, want)
      self.rbuf[self.rhead] = c:sub(want + 1)
      got = n
    end
  end
  self.rbytes = self.rbytes - n
  if not over_highwater(self) then self.pump_waiters:wake_all(true) end
  return #out == 1 and out[1] or concat(out)
end

-- One buffered entry (one frame in message mode).
local function take_one(self)
  local c = self.rbuf[self.rhead]
  self.rbuf[self.rhead] = nil
  self.rhead = self.rhead + 1
  self.rbytes = self.rbytes - #c
  if self.rhead > self.rtail then self.rhead, self.rtail = 1, 0 end
  if not over_highwater(self) then self.pump_waiters:wake_all(true) end
  return c
end

local function has_bytes(s) return s.rbytes > 0 end
local function has_message(s) return s.rtail >= s.rhead end

-- The one reader's wait: until has(self), then take(self, arg); nil at EOF;
-- nil, msg, code once dead or past the deadline. what names the wait and
-- fname the caller.
local function read_loop(self, what, fname, deadline, has, take_fn, arg)
  self.reading = true
  while true do
    local d, msg, code = dead(self)
    if has(self) and not self.closed then
      -- what was decrypted before a failure comes first, then the error
      -- (one value: no table per read on the hot path)
      local data = take_fn(self, arg)
      self.reading = false
      return data
    elseif d == nil then
      self.reading = false
      return nil, msg, code
    elseif self.eof then
      self.reading = false
      return nil
    end
    -- a cancel raises out of the wait: the stream must not stay busy
    local done, ok, m, c = pcall(self.readers.wait, self.readers, what, left(deadline), fname)
    if not done then
      self.reading = false
      error(ok, 0)
    end
    if ok == nil and c then
      self.reading = false
      return nil, m, c
    end
  end
end

--- Decrypted bytes, up to max: what the reader task buffered, or else at
-- most 64 KiB decrypted in this call (over udx: fused.read); nil at EOF;
-- nil, msg, code.
function Stream:read(max, timeout)
  if max ~= nil and (type(max) ~= "number" or max < 1 or max % 1 ~= 0) then
    error("bad argument 'max' to 'read' (positive integer expected, got " .. tostring(max) .. ")", 2)
  end
  ludx.check_timeout(timeout, "read")
  if self.reading then return nil, "busy reading", "EBUSY" end
  if not self.mode then self.mode = "bytes" end
  if self.udx_phase then
    local data = fused.read(self, max)
    if data then return data end
  end
  return read_loop(self, "secretstream read", "read", deadline_of(timeout), has_bytes, take, max)
end

--- The next message: the plaintext of one frame as the peer wrote it (one
-- write or send_message there); nil at EOF; nil, msg, code. The stream
-- keeps frame boundaries from now on (see the top of this file).
function Stream:recv_message(timeout)
  ludx.check_timeout(timeout, "recv_message")
  if self.mode == "bytes" then
    return nil, "the stream is read as bytes (read was called): message boundaries are gone", "EINVAL"
  end
  if self.reading then return nil, "busy reading", "EBUSY" end
  self.mode = "messages"
  return read_loop(self, "secretstream recv_message", "recv_message", deadline_of(timeout), has_message, take_one)
end

--- One write is one frame (at most MAX_WRITE bytes). Before the handshake
-- completes, writes are queued and return true at once (up to 1 MiB; past
-- that, write waits for the handshake). ETIMEDOUT: the raw stream did not
-- drain in time (the frame is queued there and goes out), or another frame
-- (keep-alive, handshake, finish) held the raw stream (nothing was sent).
function Stream:write(data, timeout)
  if type(data) ~= "string" then error("bad argument 'data' to 'write' (string expected, got " .. type(data) .. ")", 2) end
  ludx.check_timeout(timeout, "write")
  local d, msg, code = dead(self)
  if d == nil then return nil, msg, code end
  if self.finishing then return nil, "write after finish", "EPIPE" end
  if #data > M.MAX_WRITE then return nil, "Message is too large for an atomic write", "ETOOLARGE" end
  if self.writing then return nil, "busy writing", "EBUSY" end
  if not self.is_ready and self.pending_bytes + #data <= PENDING_LIMIT then
    self.pending[#self.pending + 1] = data
    self.pending_bytes = self.pending_bytes + #data
    return true
  end
  self.writing = true
  local deadline = deadline_of(timeout)
  local ok, m, c = true, nil, nil
  if not self.is_ready then ok, m, c = self:ready(left(deadline)) end
  if ok then ok, m, c = lock(self, deadline, "write") end
  if ok then
    local done, err = pcall(function()
      if self.fused then
        ok, m, c = fused.write(self, data, deadline)
      else
        local frame
        frame, m, c = encrypt(self, data)
        if frame then ok, m, c = raw_write(self, frame, deadline) else ok = nil end
      end
    end)
    -- a cancel (or error) while locked: the lock goes, unless a seal under
    -- way holds it (it lets go at its end)
    if not (self.fused and fused.sealing(self)) then unlock(self) end
    if not done then
      self.writing = false
      error(err, 0)
    end
  end
  self.writing = false
  if not ok then
    -- the stream failed meanwhile (a frame did not decrypt...): its own
    -- error, not the raw stream's ECANCELED from our close
    if self.err then return nil, self.err.msg, self.err.code end
    return nil, m, c
  end
  return true
end

-- finish, close, destroy, is_closed, wait_closed: how a stream ends
require("ludx.secretstream.close").install(Stream, {
  dead = dead, lock = lock, unlock = unlock, release = release,
  reset_raw = reset_raw, wake_everyone = wake_everyone, check_ms = check_ms,
})

--- The raw stream's stats (fields copied when it returns a table, and
-- as .raw), plus the frame counters of this layer.
function Stream:stats()
  local s = {}
  if type(self.raw.stats) == "function" then
    local ok, r = pcall(self.raw.stats, self.raw)
    if ok and r ~= nil then
      if type(r) == "table" then
        for k, v in pairs(r) do s[k] = v end
      end
      s.raw = r
    end
  end
  local f = self.framer_stats or self.framer:stats()
  s.frames_in = f.frames_in or 0
  s.frames_out = f.frames_out or 0
  s.keepalives_in = f.keepalives_in or 0
  s.keepalives_out = self.keepalives_out
  s.plaintext_in = f.bytes_in or 0
  s.plaintext_out = f.bytes_out or 0
  s.raw_bytes_in = self.raw_bytes_in
  s.buffer_bytes = f.buffer_bytes or 0
  return s
end

-- A message is one frame: send_message is write (an empty message is a
-- keep-alive and is not delivered).
Stream.send_message = Stream.write


M.Stream = Stream
return M
