-- ludx.pipe: an in-memory duplex byte stream with the stream API of a udx
-- stream, for layering protocols (secretstream, ...) without a network and
-- for testing them.
--
--   local a, b = pipe.pair{highwater = 1 MiB, chunk = n | fn() -> n}
--   a:write(data[, timeout])  data is always accepted; waits while the peer
--                             holds more than highwater unread bytes
--                             (ETIMEDOUT then means "accepted, not drained")
--   b:read([max][, timeout])  all buffered bytes up to max (and up to `chunk`,
--                             to exercise readers with small pieces); nil at
--                             EOF; nil, msg, code on error
--   a:finish()                the peer reads EOF after the buffered bytes
--   a:close()                 graceful: the peer reads what is buffered,
--                             then EOF; what it writes later is dropped
--   a:destroy()               the peer gets ECONNRESET (buffered bytes are
--                             dropped), as after a udx DESTROY
-- After our own close or destroy every call of this end (and a read
-- waiting) gets nil, "stream is closed", "ECANCELED", as a udx stream's do;
-- EOF and ECONNRESET are what the peer's end gives.
--   a:stats()                 {bytes_written, bytes_read, writes, reads}
local ludx = require "ludx"

local M = {}

local End = {}
End.__index = End

local concat, type, tostring, min = table.concat, type, tostring, math.min

local function new_end(opts)
  return {
    chunks = {}, head = 1, tail = 0, bytes = 0, offset = 0, -- bytes waiting here for this end's reader
    highwater = opts.highwater or 1024 * 1024,
    chunk = opts.chunk,
    readers = ludx.waiters(), writers = ludx.waiters(),
    stats_ = { bytes_written = 0, bytes_read = 0, writes = 0, reads = 0 },
  }
end

--- Two connected ends.
function M.pair(opts)
  if opts ~= nil and type(opts) ~= "table" then
    error("bad argument 'opts' to 'pair' (table expected, got " .. type(opts) .. ")", 2)
  end
  opts = opts or {}
  local a, b = setmetatable(new_end(opts), End), setmetatable(new_end(opts), End)
  a.peer, b.peer = b, a
  return a, b
end

local check = require "ludx.check"
local deadline_of, left = check.deadline, check.left

-- what every call of an end we closed (or destroyed) returns
local function closed()
  return nil, "stream is closed", "ECANCELED"
end

local function take(self, max)
  local chunk = self.chunk
  if type(chunk) == "function" then chunk = chunk() end
  if chunk and (not max or chunk < max) then max = chunk end
  local n = max and min(max, self.bytes) or self.bytes
  local out, got = {}, 0
  while got < n do
    local c = self.chunks[self.head]
    local avail = #c - self.offset
    local want = n - got
    if avail <= want then
      out[#out + 1] = self.offset == 0 and c or c:sub(self.offset + 1)
      got = got + avail
      self.chunks[self.head] = nil
      self.head = self.head + 1
      self.offset = 0
    else
      out[#out + 1] = c:sub(self.offset + 1, self.offset + want)
      self.offset = self.offset + want
      got = n
    end
  end
  self.bytes = self.bytes - n
  local s = #out == 1 and out[1] or concat(out)
  self.stats_.bytes_read = self.stats_.bytes_read + n
  self.stats_.reads = self.stats_.reads + 1
  self.peer.writers:wake_all(true)
  return s
end

function End:read(max, timeout)
  if max ~= nil and (type(max) ~= "number" or max < 1 or max % 1 ~= 0) then
    error("bad argument 'max' to 'read' (positive integer expected, got " .. tostring(max) .. ")", 2)
  end
  ludx.check_timeout(timeout, "read")
  if self.reading then return nil, "busy reading", "EBUSY" end
  local deadline = deadline_of(timeout)
  self.reading = true
  while true do
    if self.closed then self.reading = false return closed() end
    if self.reset then self.reading = false return nil, "connection reset by peer", "ECONNRESET" end
    if self.bytes > 0 then
      self.reading = false
      return take(self, max)
    end
    if self.eof then self.reading = false return nil end
    local ok, msg, code = self.readers:wait("pipe read", left(deadline), "read")
    if ok == nil and code then self.reading = false return nil, msg, code end
  end
end

function End:write(data, timeout)
  if type(data) ~= "string" then error("bad argument 'data' to 'write' (string expected, got " .. type(data) .. ")", 2) end
  ludx.check_timeout(timeout, "write")
  if self.closed then return closed() end
  if self.finished then return nil, "write after finish", "EPIPE" end
  if self.reset then return nil, "connection reset by peer", "ECONNRESET" end
  local peer = self.peer
  if #data > 0 and not peer.closed then -- a closed peer drops it
    peer.tail = peer.tail + 1
    peer.chunks[peer.tail] = data
    peer.bytes = peer.bytes + #data
    peer.readers:wake_all(true)
  end
  self.stats_.bytes_written = self.stats_.bytes_written + #data
  self.stats_.writes = self.stats_.writes + 1
  local deadline = deadline_of(timeout)
  while peer.bytes > peer.highwater and not (self.closed or self.reset) do
    local ok, msg, code = self.writers:wait("pipe drain", left(deadline), "write")
    if ok == nil and code then return nil, msg, code end
  end
  -- our graceful close leaves the bytes with the peer, who reads them
  if self.closed and not self.destroyed then return true end
  if self.closed then return closed() end
  if self.reset then return nil, "connection reset by peer", "ECONNRESET" end
  return true
end

function End:finish(timeout)
  ludx.check_timeout(timeout, "finish")
  if self.closed then return closed() end
  if self.reset then return nil, "connection reset by peer", "ECONNRESET" end
  self.finished = true
  self.peer.eof = true
  self.peer.readers:wake_all(true)
  return true
end

-- Every waiter of both ends looks again (after a close or destroy).
local function wake_both(self)
  for _, e in ipairs({ self, self.peer }) do
    e.readers:wake_all(true)
    e.writers:wake_all(true)
  end
end

--- Graceful close: the peer reads what is buffered for it, then EOF;
-- what it writes from now on is dropped (as a lingering udx close acks and
-- drops). Our own waiting readers, and every later call, get "stream is
-- closed", ECANCELED; a writer waiting for room returns true (its bytes
-- are the peer's to read). Idempotent.
function End:close()
  if self.closed then return true end
  self.closed = true
  local peer = self.peer
  if not self.reset then peer.eof = true end
  self.chunks, self.head, self.tail, self.bytes, self.offset = {}, 1, 0, 0, 0
  wake_both(self)
  return true
end

--- Abortive close: the peer gets ECONNRESET and loses what was buffered
-- for it (as after a udx DESTROY); our waiting calls and every later one
-- get "stream is closed", ECANCELED. Idempotent.
function End:destroy()
  if self.closed and self.destroyed then return true end
  self.closed, self.destroyed = true, true
  local peer = self.peer
  if not peer.closed then
    peer.reset = true
    peer.chunks, peer.head, peer.tail, peer.bytes, peer.offset = {}, 1, 0, 0, 0
  end
  wake_both(self)
  return true
end

function End:stats()
  local s = {}
  for k, v in pairs(self.stats_) do s[k] = v end
  return s
end

return M
