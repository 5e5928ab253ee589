-- ludx.secretstream internals: the fused data path over a udx stream. Not a
-- public module: see ludx.secretstream, which binds it to its framing.
--
-- Once the keys are known and nothing is held in the framer from feed(),
-- frames are decrypted in C straight from the udx stream's read buffer
-- (framer:feed_udx) and sealed into its send queue (framer:encrypt_udx),
-- with no Lua string for the raw bytes. In bytes mode plaintext comes in
-- strings of at most READ_BATCH: a larger frame is handed over in parts,
-- none before the whole frame authenticated. The reader task hands batches
-- to the read buffer up to read_highwater; a read with nothing buffered
-- decrypts for itself (direct read) instead of waiting for it. Parts of a
-- large frame go to the read buffer too while all of it fits under
-- read_highwater, so the task gets back to wait_readable, where a peer's
-- reset or END reaches it without a read. A frame past that (16 MiB) stays
-- in the framer after its first part: reads take it part by part and the
-- task waits until they did, as it would at read_highwater, without a
-- second copy of read_highwater bytes in Lua strings. Meanwhile the framer
-- gathers the next frame where the parts were, and the stream's window
-- counts the rest as unread.
local ludx = require "ludx"
local core = require "ludx.core"
local dispatch = require "ludx.dispatch"
local queue = require "ludx.queue"
local left = require("ludx.check").left

local M = {}

-- Over a udx stream, the reader decrypts up to this much plaintext into one
-- string (or one larger frame), then lets the loop turn, so a waiting read()
-- takes each string whole, never joined. Strings stay below LuaJIT's direct
-- mmap size (128 KiB), where making and dropping them costs ~0.04 s/GB
-- against ~0.7 s/GB for 1 MiB ones (fresh pages each time): the size a
-- plain udx read hands over (udx.READ_MAX).
local READ_BATCH = 65536

-- Frames of this much plaintext and more, which encrypt_udx would seal in
-- the send queue's own memory, are sealed there on the thread pool
-- (framer:seal_udx) while the loop goes on sending what came before them
-- and reading acks: sealing 16 MiB takes the loop ~12 ms otherwise, in
-- which the link idles. Below it a loop turn costs more than it saves.
local SEAL_AWAY = core.crypto.FILL_MIN

--- The fused path over the framing's helpers (S): push_plain, fail,
-- on_eof, check_header, wait_room (the read high-water wait: false once
-- the stream is dead), sealed (a frame of n bytes went out), and
-- watch_size (the framer's buffers are large: trim them later). Returns
-- pump, read, write and rest, each taking the stream first.
function M.bind(S)
  local push_plain, fail, on_eof, check_header = S.push_plain, S.fail, S.on_eof, S.check_header
  local wait_room, sealed, watch_size, unlock = S.wait_room, S.sealed, S.watch_size, S.unlock
  local F = {}
  local seal_away

  -- A seal's end: its writer wakes; a writer cancelled meanwhile left the
  -- write lock to the seal, which lets go of it now.
  dispatch.on_event(core.EV.SEALED, function(op, r)
    dispatch.unref(op.ref)
    op.result, op.data = r, nil
    local self = op.stream
    if self.sealing == op then self.sealing = nil end
    if op.orphan then
      if r < 0 then
        local msg, code = core.strerror(r)
        fail(self, msg, code)
      end
      unlock(self)
    end
    op.waiters:wake_all(true)
  end)

  -- After framer:feed_udx: a large frame handed over in parts (more), one
  -- being gathered (nothing yet) that grew, or the end of a frame the trim
  -- found under way (trim_stuck) holds large buffers.
  local function watch_buffers(self, data, more)
    if data == nil then return end -- an end: release() frees them
    if data == false then
      local held = self.framer:pending()
      if held == self.held then return end -- nothing arrived
      self.held = held
    elseif not (more or self.trim_stuck) then
      return
    end
    self.trim_stuck = false
    watch_size(self)
  end

  -- feed_udx returned nil: a frame failed (msg, code), or the raw stream
  -- ended (its error, or EOF).
  local function ended(self, msg, code)
    if msg then return fail(self, msg, code) end
    local rmsg, rcode = self.raw:error()
    if rcode and rcode ~= "ECANCELED" then return fail(self, rmsg, rcode) end
    return on_eof(self)
  end

  -- A read in bytes mode with nothing decrypted waiting: the reader decrypts
  -- the next batch (at most max bytes) itself, straight from the udx
  -- stream's buffer, or takes the next part of a large frame, with no
  -- hand-off through the reader task. false when nothing came yet, or at an
  -- end (the read loop then reports it). After a batch with more behind it,
  -- the next call turns the loop once first (the socket is read and acked
  -- meanwhile): before it takes anything, so a cancel there loses nothing.
  local function direct_read(self, max)
    if self.turn_due and ludx.in_task() then
      self.turn_due = false
      self.reading = true -- a second reader meanwhile gets EBUSY
      local ok, err = pcall(ludx.yield)
      self.reading = false
      if not ok then error(err, 0) end
      -- the reader task may have buffered bytes meanwhile (they come first),
      -- or the stream ended
      if self.rbytes > 0 or self.err or self.closed or self.eof then return false end
    end
    local h = self.raw:handle()
    local data, used, more = self.framer:feed_udx(h, max, false)
    watch_buffers(self, data, more)
    if data then
      self.raw_bytes_in = self.raw_bytes_in + used
      self.turn_due = more or h:readable() > 0
      if not more then self.pump_waiters:wake_all(true) end -- a large frame's rest went (wait_rest)
      return data
    end
    if data == nil then ended(self, used, more) end
    return false
  end

  -- The reader task after the first part of a frame too large for the read
  -- buffer: reads take the rest (direct_read) and wake it at its end. False
  -- once the stream is dead.
  local function wait_rest(self)
    -- a dead stream's framer is gone: that is looked at first
    while not (self.err or self.closed) and self.framer:rest_bytes() > 0 do
      self.pump_waiters:wait("secretstream reader takes a large frame")
    end
    return not (self.err or self.closed)
  end

  --- The reader task's data phase: frames are decrypted in C straight from
  -- the stream's read buffer, with no Lua string for the raw bytes.
  function F.pump(self)
    local raw, framer, h = self.raw, self.framer, self.raw:handle()
    self.udx_phase = true -- nothing held in the framer from feed(): reads may decrypt (direct_read)
    while wait_room(self) do
      local data, used, more = framer:feed_udx(h, READ_BATCH, self.mode ~= "bytes")
      if not self.header_in and data ~= nil then check_header(self) end
      watch_buffers(self, data, more)
      if data == false then
        local ok, wmsg, wcode = raw:wait_readable()
        -- the raw stream was closed under us (by its own close or destroy)
        if ok == nil and wcode ~= "ETIMEDOUT" then
          if self.err or self.closed then return end
          return fail(self, wmsg or "stream is closed", wcode or "ECANCELED")
        end
      elseif data == nil then
        return ended(self, used, more) -- msg, code
      else
        self.raw_bytes_in = self.raw_bytes_in + used
        push_plain(self, data)
        if more and self.rbytes + framer:rest_bytes() > self.read_highwater then
          -- the rest of a frame too large for the read buffer: the
          -- reader's to take (see the top)
          if not wait_rest(self) then return end
        elseif more or h:readable() > 0 then
          -- more is ready (the next part of a large frame, or raw bytes):
          -- one loop turn before the next batch, so the reader takes this
          -- one whole (no join of batches; it may take the next part itself,
          -- direct_read) and the socket is read and acked meanwhile, not
          -- after all of it is decrypted
          ludx.yield()
        end
      end
    end
  end

  --- A bytes-mode read (at most max bytes, READ_BATCH unless less) when the
  -- reader task buffered nothing: decrypted here, or false.
  function F.read(self, max)
    if self.rbytes > 0 or not self.header_in or self.err or self.closed or self.eof then return false end
    return direct_read(self, max and math.min(max, READ_BATCH) or READ_BATCH)
  end

  -- A large frame sealed on the thread pool: 1 or 0 as encrypt_udx, or
  -- nil, msg, code. A cancel while it is sealed leaves it the write lock:
  -- the frame is still queued whole, and the lock goes at its end.
  function seal_away(self, data)
    local op = { waiters = queue.waiters(), data = data, stream = self }
    op.ref = dispatch.ref(op)
    local ok, m, c = self.framer:seal_udx(self.raw:handle(), data, op.ref)
    if not ok then
      dispatch.unref(op.ref)
      return nil, m, c
    end
    self.sealing = op
    while op.result == nil do
      local done, err = pcall(op.waiters.wait, op.waiters, "secretstream seal", nil, "write")
      if not done then
        if op.result == nil then op.orphan = true end
        error(err, 0)
      end
    end
    local r = op.result
    if r < 0 then
      local msg, code = core.strerror(r)
      return nil, msg, code
    end
    return r
  end

  --- One frame sealed in C and queued on the udx stream, under the write
  -- lock; waits only above the stream's high-water mark. true, or nil,
  -- msg, code (a failure to seal fails the stream).
  function F.write(self, data, deadline)
    local r, m, c
    if #data >= SEAL_AWAY then
      r, m, c = seal_away(self, data)
    else
      r, m, c = self.framer:encrypt_udx(self.raw:handle(), data)
    end
    if r == nil then
      fail(self, m, c)
      return nil, m, c
    end
    sealed(self, #data)
    if r == 0 then return self.raw:wait_drain(left(deadline)) end
    return true
  end

  --- A seal under way (its writer was cancelled and left it the lock).
  function F.sealing(self)
    return self.sealing ~= nil
  end

  --- A failed stream: the rest of a large frame in the framer was
  -- authenticated; the reader gets it before the error, as what was
  -- buffered.
  function F.rest(self)
    local part = self.framer:rest(READ_BATCH)
    while part do
      push_plain(self, part)
      part = self.framer:rest(READ_BATCH)
    end
  end

  return F
end

return M
