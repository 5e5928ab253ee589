-- ludx.secretstream internals: how a SecretStream ends - finish (our END
-- after every frame), close (graceful), destroy (abortive) and the waits
-- on them. Not a public module: ludx.secretstream installs these methods
-- on its Stream, bound to its helpers.
local ludx = require "ludx"
local check = require "ludx.check"

local M = {}

local type, unpack = type, unpack
local pack, deadline_of, left = check.pack, check.deadline, check.left
local now = ludx.now

--- Installs finish, close, destroy, is_closed and wait_closed on Stream,
-- over the framing's helpers (S): dead, lock, unlock, release, reset_raw,
-- wake_everyone and check_ms.
function M.install(Stream, S)
  local dead, lock, unlock, release = S.dead, S.lock, S.unlock, S.release
  local reset_raw, wake_everyone, check_ms = S.reset_raw, S.wake_everyone, S.check_ms

  --- Flushes (queued writes go out once the handshake completes), then ends
  -- the raw stream (udx END). Returns what raw:finish returns. No write is
  -- taken once finish was called; when finish times out before the END was
  -- issued, calling it again goes on.
  function Stream:finish(timeout)
    ludx.check_timeout(timeout, "finish")
    local d, msg, code = dead(self)
    if d == nil then return nil, msg, code end
    if self.finished then return nil, "stream is finished", "EPIPE" end
    if self.finish_busy then return nil, "busy finishing", "EBUSY" end
    self.finishing = true
    self.keepalive_waiters:wake_all(false)
    self.finish_busy = true
    local deadline = deadline_of(timeout)
    local ok, m, c = self:ready(left(deadline))
    if ok then ok, m, c = lock(self, deadline, "finish") end
    if not ok then
      self.finish_busy = false
      return nil, m, c
    end
    self.finished = true -- the END is issued now, whatever raw:finish returns
    local r = pack(self.raw:finish(left(deadline)))
    unlock(self)
    self.finish_busy = false
    if r[1] == nil and self.err then return nil, self.err.msg, self.err.code end
    return unpack(r, 1, r.n)
  end

  -- The peer acked our END over udx: every byte we wrote arrived.
  local function our_end_acked(self)
    return self.fused and self.raw.finished == true
  end

  --- Graceful close: frames written so far (and a write under way) go out,
  -- then the raw stream closes gracefully (over udx: END after the last
  -- frame, the peer reads to its EOF, then ends too). Reads and writes fail
  -- from now on; what was decrypted and not read is dropped. In a task it
  -- waits for the end: true, or nil, msg, code (ETIMEDOUT after timeout ms,
  -- default udx.CLOSE_TIMEOUT: then the raw stream is reset). Outside a
  -- task it starts the close. A failed stream, or one whose handshake is not
  -- done, is destroyed; the failure is returned unless the peer had acked
  -- our END. Idempotent: a second close waits for the first and returns what
  -- it returned.
  function Stream:close(timeout)
    timeout = check_ms(type(timeout) == "table" and timeout.timeout or timeout, "timeout", "close")
    local in_task = ludx.in_task()
    if self.closed then
      -- a second close waits for the first (up to its own timeout)
      local deadline = deadline_of(timeout)
      while self.closing and in_task do
        local ok, _, c = self.close_waiters:wait("secretstream close", left(deadline), "close")
        if ok == nil and c then break end
      end
      local r = self.close_result
      if r and not self.closing then return unpack(r, 1, r.n) end
      if self.err and not our_end_acked(self) then return nil, self.err.msg, self.err.code end
      -- a close that started outside a task: the udx stream's close knows
      -- how it ended (idempotent)
      if self.fused and not self.closing and not self.err then return self.raw:close(timeout) end
      return true
    end
    if self.err then
      -- failed first (a reset, a bad frame): what was written may be lost,
      -- unless the peer had acked our END (a peer may reset after that)
      local e = self.err
      self:destroy()
      if our_end_acked(self) then return true end
      return nil, e.msg, e.code
    end
    if not self.is_ready then return self:destroy() end
    self.closed, self.closing = true, true
    local deadline = deadline_of(timeout or require("ludx.udx").CLOSE_TIMEOUT)
    self.close_deadline = deadline -- when the raw stream's linger ends at the latest
    local raw = self.raw
    -- readers and lock waiters see the close now; the frame under way (its
    -- writer holds the lock) is already queued on the raw stream whole
    release(self, false, true)
    local function done()
      self.closing = false
      self.close_waiters:wake_all(true)
    end
    if not in_task then
      pcall(raw.close, raw, left(deadline))
      done()
      return true
    end
    -- whatever ends the wait (a cancel included), closing ends with it
    local r = pack(pcall(function()
      -- the writer holding the lock finishes first (its frame is on the raw
      -- stream; a raw udx close also queues the rest of a write in pieces)
      while self.locked and now() < deadline do
        self.lock_waiters:wait("secretstream close", left(deadline), "close")
      end
      return raw:close(left(deadline))
    end))
    if r[1] then self.close_result = pack(unpack(r, 2, r.n)) end
    done()
    if not r[1] then
      reset_raw(self)
      error(r[2], 0)
    end
    return unpack(r, 2, r.n)
  end

  --- Abortive close: the raw stream is destroyed (the peer sees a reset),
  -- also after a close (its linger ends). Idempotent; waiting readers and
  -- writers get an error now.
  function Stream:destroy()
    if self.closed then
      reset_raw(self)
      if self.closing then
        self.closing = false
        self.close_waiters:wake_all(true)
      end
      return true
    end
    local failed = self.err ~= nil
    self.closed = true
    if failed then
      self.rbuf, self.rhead, self.rtail, self.rbytes = {}, 1, 0, 0 -- what a failure kept
      wake_everyone(self)
    else
      release(self)
    end
    return true
  end

  --- True once the stream is closed or has failed (by either side): what
  -- wait_closed waits for, without waiting.
  function Stream:is_closed()
    return self.closed == true or self.err ~= nil
  end

  --- Waits until the stream is closed or has failed (by either side);
  -- true, or nil, "timed out", "ETIMEDOUT". Then stream.err says a failure.
  function Stream:wait_closed(timeout)
    ludx.check_timeout(timeout, "wait_closed")
    while not (self.closed or self.err) do
      local ok, msg, code = self.close_waiters:wait("secretstream close", timeout, "wait_closed")
      if ok == nil and code then return nil, msg, code end
    end
    return true
  end
end

return M
