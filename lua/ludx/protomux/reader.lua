-- ludx.protomux internals: the reader task, which decodes the remote's
-- frames. Not a public module: see ludx.protomux.
local ludx = require "ludx"
local compact = require "ludx.compact"
local state = require "ludx.protomux.state"
local writer = require "ludx.protomux.writer"

local type, tostring, pairs, ipairs, pcall, error = type, tostring, pairs, ipairs, pcall, error
local remove, min = table.remove, math.min
local reader = compact.reader
local ENTRY_COST, key_of, call = state.ENTRY_COST, state.key_of, state.call
local get_info, gc_info, reject, free_local = state.get_info, state.gc_info, state.reject, state.free_local
local close_channel, deliver, full_open = state.close_channel, state.deliver, state.full_open
local writer_task = writer.writer_task

local M = {}

---------------------------------------------------------------------------
-- The reader: decoding frames from the remote.

local decode

local function proto_error(msg)
  return error({ protomux = true, msg = msg, code = "EPROTO" }, 0)
end

-- Waits while queues are over their caps (backpressure reaches the stream).
local function wait_below(self, ch)
  local opts = self.opts
  while not self.destroyed and (self.buffered >= opts.max_buffered or (ch and not ch.closed and ch.qtail - ch.qhead + 1 >= opts.max_queued)) do
    self.reader_waiters:wait("protomux reader backpressure")
  end
end

local function on_open(self, r)
  local rid = r:uint()
  local protocol = r:string()
  local id = compact.optional_buffer.decode(r)
  if r.err then proto_error("bad open message: " .. r.err) end
  local hs = r.s:sub(r.i, r.e)
  if rid == 0 then return end -- the control channel cannot be opened; protomux ignores it too
  if rid > self.remote_len + 1 or self.remote[rid] then proto_error("invalid open message (channel " .. rid .. ")") end
  if rid == self.remote_len + 1 then self.remote_len = rid end -- the remote's ids grow one at a time
  local opts = self.opts
  if #protocol > opts.max_name_size or (id and #id > opts.max_name_size) then return reject(self, rid) end
  local info = self.infos[key_of(protocol, id)]
  if info and #info.outgoing > 0 then
    local local_id = remove(info.outgoing, 1)
    local ch = self.locals[local_id]
    if not ch then
      free_local(self, local_id) -- closed before the remote answered
      gc_info(self, info)
      return
    end
    local slot = { hs = hs, pending = {} }
    self.remote[rid] = slot
    self.remote_count = self.remote_count + 1
    ch.remote_id = rid
    return full_open(ch, slot)
  end
  local notify = self.notify[key_of(protocol, id)] or self.notify[key_of(protocol, nil)]
  if not notify or self.remote_count >= opts.max_channels then return reject(self, rid) end
  info = get_info(self, protocol, id)
  local slot = { hs = hs, pending = {}, hs_cost = #hs + ENTRY_COST }
  self.remote[rid] = slot
  self.buffered = self.buffered + slot.hs_cost
  self.remote_count = self.remote_count + 1
  info.pairing = info.pairing + 1
  info.incoming[#info.incoming + 1] = rid
  ludx.spawn("protomux pair " .. protocol, function()
    call("pair handler", notify, id)
    info.pairing = info.pairing - 1
    if info.pairing > 0 then return end
    -- what the handler did not take is rejected
    while #info.incoming > 0 do
      local r_id = remove(info.incoming, 1)
      if not self.destroyed then reject(self, r_id) end
    end
    gc_info(self, info)
  end)
  -- handshakes waiting for pair handlers are bounded by max_buffered too
  wait_below(self)
end

local function on_reject(self, r)
  local local_id = r:uint()
  if r.err then proto_error("bad reject message") end
  for _, info in pairs(self.infos) do
    for k, lid in ipairs(info.outgoing) do
      if lid == local_id then
        remove(info.outgoing, k)
        free_local(self, local_id)
        local ch = self.locals[local_id]
        if ch then close_channel(ch, true, "the remote rejected the channel", "EREJECTED") end
        gc_info(self, info)
        return
      end
    end
  end
  proto_error("invalid reject message (channel " .. local_id .. ")")
end

local function on_close(self, r)
  local rid = r:uint()
  if r.err then proto_error("bad close message") end
  local slot = rid > 0 and self.remote[rid]
  local ch = slot and (slot.session or slot.paired)
  if ch then close_channel(ch, true) end
end

local function on_batch(self, r)
  local rid = r:uint()
  if r.err then proto_error("bad batch") end
  local e = r.e
  while r.i <= e and not self.destroyed do
    -- a batch may hold many opens to reject: the replies stay bounded
    -- inside one frame too, not only between frames
    while self.ctl_bytes > self.opts.max_control_buffer and not self.destroyed do
      self.send_waiters:wait("protomux reader (replies not sent)")
    end
    if self.destroyed then return end
    local len = r:uint()
    if r.err then proto_error("bad batch") end
    if len == 0 then
      rid = r:uint()
      if r.err then proto_error("bad batch") end
    else
      local stop = min(r.i + len - 1, e)
      local sub = reader(r.s, r.i, stop)
      r.i = stop + 1
      decode(self, rid, sub, true)
    end
  end
end

function decode(self, rid, r, in_batch)
  local t = r:uint()
  if r.err then proto_error("truncated message") end
  if rid == 0 then
    if t == 0 then
      if in_batch then proto_error("a batch inside a batch") end
      return on_batch(self, r)
    elseif t == 1 then
      return on_open(self, r)
    elseif t == 2 then
      return on_reject(self, r)
    elseif t == 3 then
      return on_close(self, r)
    end
    return -- an unknown control message: ignored as protomux does
  end
  if rid > self.remote_len then proto_error("a message on channel " .. rid .. " that the remote never opened") end
  local slot = self.remote[rid]
  if not slot then
    self.stats_.ignored = self.stats_.ignored + 1 -- closed meanwhile: messages in flight
    return
  end
  if slot.session then
    local ch = slot.session
    deliver(ch, t, r)
    return wait_below(self, ch)
  end
  -- not paired yet: kept until the pair handler takes it (counted)
  local cost = r.e - r.i + 1 + ENTRY_COST
  slot.pending[#slot.pending + 1] = { t = t, bytes = r.s:sub(r.i, r.e), cost = cost }
  self.buffered = self.buffered + cost
  while not self.destroyed and slot.pending and (self.buffered >= self.opts.max_buffered or #slot.pending >= self.opts.max_queued) do
    self.reader_waiters:wait("protomux reader backpressure")
  end
end

local function reader_task(self)
  local conn = self.conn
  while not self.destroyed do
    while self.ctl_bytes > self.opts.max_control_buffer and not self.destroyed do
      self.send_waiters:wait("protomux reader (replies not sent)")
    end
    if self.destroyed then return end
    local frame, msg, code = conn:recv_message()
    if self.destroyed then return end
    if frame == nil then
      if msg then return self:destroy(msg, code or "EIO") end
      -- the remote ended: end ours after what is queued (protomux's end()),
      -- the channels see it as a remote close
      self.remote_ended = true
      for _, ch in pairs(self:channel_list()) do close_channel(ch, true, "the stream ended", "EOF") end
      self.ending = true
      if not self.writing then
        self.writing = true
        ludx.spawn("protomux writer", writer_task, self)
      end
      return
    end
    self.stats_.frames_in = self.stats_.frames_in + 1
    if #frame > self.opts.max_message_size then
      return self:destroy("a message of " .. #frame .. " bytes is over max_message_size", "EMSGSIZE")
    end
    if #frame > 0 then
      local r = reader(frame)
      local ok, err = pcall(function()
        local rid = r:uint()
        if r.err then proto_error("truncated message") end
        decode(self, rid, r, false)
      end)
      if not ok then
        if type(err) == "table" and err.protomux then return self:destroy(err.msg, err.code) end
        if ludx.is_cancelled(err) then error(err, 0) end
        return self:destroy("protomux: " .. tostring(err), "EPROTO")
      end
    end
  end
end

M.reader_task = reader_task
return M
