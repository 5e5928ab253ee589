-- ludx.protomux internals: writing frames to the stream. Not a public
-- module: see ludx.protomux.
local ludx = require "ludx"
local compact = require "ludx.compact"

local pcall = pcall

local M = {}

local MAX_BATCH = 8 * 1024 * 1024 -- a cork batch is sent when it grows past this (as protomux)

---------------------------------------------------------------------------
-- Writing: frames go through one queue to one writer task, in order.

local function writer_task(self)
  local conn = self.conn
  while self.outhead <= self.outtail and not self.destroyed do
    local i = self.outhead
    local frame, ctl = self.outq[i], self.outctl[i]
    self.outq[i], self.outctl[i] = nil, nil
    self.outhead = i + 1
    self.out_bytes = self.out_bytes - #frame
    if ctl then self.ctl_bytes = self.ctl_bytes - #frame end
    local ok, msg, code = conn:send_message(frame)
    self.send_waiters:wake_all(true)
    if not ok then return self:destroy(msg or "write failed", code or "EIO") end
    self.stats_.frames_out = self.stats_.frames_out + 1
  end
  self.outhead, self.outtail = 1, 0
  self.writing = false
  self.send_waiters:wake_all(true)
  if self.ending and not self.destroyed then
    self.ending = false
    pcall(conn.finish, conn)
    self:destroy("the stream ended", "EOF")
  end
end

local function enqueue(self, frame, ctl)
  if self.destroyed then return end
  self.outtail = self.outtail + 1
  self.outq[self.outtail] = frame
  self.outctl[self.outtail] = ctl or nil
  self.out_bytes = self.out_bytes + #frame
  if ctl then self.ctl_bytes = self.ctl_bytes + #frame end
  if not self.writing then
    self.writing = true
    ludx.spawn("protomux writer", writer_task, self)
  end
end

local function send_batch(self)
  local batch = self.batch
  if #batch == 0 then return end
  local w = compact.writer()
  w:uint(0):uint(0)
  local prev = batch[1].id
  w:uint(prev)
  for k = 1, #batch do
    local b = batch[k]
    if b.id ~= prev then
      prev = b.id
      w:uint(0):uint(prev)
    end
    w:buffer(b.bytes)
  end
  enqueue(self, w:finish())
end

-- bytes: the message without its channel id (type + payload).
local function push_batch(self, id, bytes)
  if self.batch_size >= MAX_BATCH then
    send_batch(self)
    self.batch, self.batch_size = {}, 2
  end
  self.batch[#self.batch + 1] = { id = id, bytes = bytes }
  self.batch_size = self.batch_size + #bytes + 10
end

-- A control frame (channel 0); ctl: sent by the reader as a reply.
local function write0(self, w, ctl)
  local frame = w:finish()
  if self.batch then return push_batch(self, 0, frame:sub(2)) end
  enqueue(self, frame, ctl)
end

-- Backpressure for senders: waits while too much is queued for the stream
-- (not in the reader task, which must keep reading).
local function wait_room(self)
  local cur = ludx.current()
  if not cur or cur == self.reader_task then return end
  while self.out_bytes > self.opts.max_write_buffer and not self.destroyed do
    self.send_waiters:wait("protomux send", nil, "send")
  end
end

M.writer_task, M.enqueue, M.send_batch, M.push_batch = writer_task, enqueue, send_batch, push_batch
M.write0, M.wait_room = write0, wait_room
return M
