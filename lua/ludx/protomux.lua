-- ludx.protomux: channels over one message stream, wire-compatible with npm
-- protomux 3.x (every Holepunch protocol is such a channel).
--
--   local mux = protomux.from(conn[, opts])  -- conn: a SecretStream (or any
--                                            -- object with recv_message/send_message)
--   local ch = mux:channel{ protocol = "chat/1", id = nil, handshake = compact.string,
--                           messages = { compact.string, compact.uint } }
--   ch:open("hello")              -- our open, with our handshake value
--   local hs = ch:opened(5000)    -- the remote's handshake value
--   ch:send(1, "text")            -- message type 1 (1-based), a value of its codec
--   local i, v = ch:recv()        -- next message; nil when the channel closed
--   ch:close()
--   mux:pair({ protocol = "chat/1" }, function(id) ... end)  -- the remote opened first
--
-- The wire (protomux 3.x): every message is one frame of the stream,
-- uint(channel) uint(type) payload. Channel 0 is the control channel:
-- type 0 a batch, 1 open (uint id, string protocol, optional_buffer id,
-- handshake), 2 reject (uint id), 3 close (uint id).
--
-- Tasks, not events: one reader task per mux decodes frames and queues each
-- message on its channel (or calls the message type's on_message); a writer
-- task moves queued frames to the stream. Remote input never raises: a
-- message that does not decode closes its channel (EDECODE), a frame that
-- breaks the protocol or a cap ends the mux and its stream (EPROTO,
-- EMSGSIZE). Every cap has a default and an option (M.DEFAULTS).
local ludx = require "ludx"
local compact = require "ludx.compact"
local check = require "ludx.check"

local type, tostring, pairs, ipairs, pcall, setmetatable, rawget, rawset, error =
  type, tostring, pairs, ipairs, pcall, setmetatable, rawget, rawset, error
local remove, min, format = table.remove, math.min, string.format
local reader = compact.reader

local M = {}

M.DEFAULTS = {
  max_channels = 256, -- channels the remote may have open or pending here; more opens are rejected
  max_message_size = 4 * 1024 * 1024, -- a larger frame ends the mux (EMSGSIZE)
  max_queued = 256, -- messages queued on one channel before the reader waits (backpressure)
  max_buffered = 4 * 1024 * 1024, -- bytes queued over all channels (+64 per message) before the reader waits
  max_name_size = 1024, -- bytes of a remote protocol name or id; larger opens are rejected
  max_write_buffer = 1024 * 1024, -- bytes queued for the stream before send waits
}

local ENTRY_COST = 64 -- what a queued message costs besides its bytes
local MAX_BATCH = 8 * 1024 * 1024 -- a cork batch is sent when it grows past this (as protomux)
local CTL_LIMIT = 64 * 1024 -- replies of the reader (rejects) queued before it stops reading

local Mux = {}
Mux.__index = Mux
local Channel = {}
Channel.__index = Channel

local function hex(s)
  return (s:gsub(".", function(c) return format("%02x", c:byte()) end))
end

local function key_of(protocol, id)
  return protocol .. "##" .. (id and hex(id) or "")
end

-- A user callback: an error in it is reported and returned, never raised
-- in a library task.
local function call(what, fn, ...)
  local ok, err = pcall(fn, ...)
  if not ok then
    io.stderr:write("ludx.protomux: ", what, " failed: ", tostring(err), "\n")
    return nil, tostring(err)
  end
  return true
end

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

---------------------------------------------------------------------------
-- Infos: what is known about one protocol + id (as protomux's _infos).

local function get_info(self, protocol, id, aliases)
  local key = key_of(protocol, id)
  local info = self.infos[key]
  if info then return info end
  info = { key = key, protocol = protocol, id = id, aliases = {}, opened = 0, pairing = 0, incoming = {}, outgoing = {} }
  self.infos[key] = info
  for _, a in ipairs(aliases or {}) do
    local k = key_of(a, id)
    info.aliases[#info.aliases + 1] = k
    self.infos[k] = info
  end
  return info
end

local function gc_info(self, info)
  if info.opened == 0 and #info.outgoing == 0 and #info.incoming == 0 then
    if self.infos[info.key] == info then self.infos[info.key] = nil end
    for _, k in ipairs(info.aliases) do
      if self.infos[k] == info then self.infos[k] = nil end
    end
  end
end

local function drop_pending(self, slot)
  if slot.pending then
    for _, p in ipairs(slot.pending) do self.buffered = self.buffered - p.cost end
    slot.pending = nil
    self.reader_waiters:wake_all(true)
  end
end

local function reject(self, remote_id)
  local slot = self.remote[remote_id]
  if slot then
    drop_pending(self, slot)
    self.remote[remote_id] = nil
    self.remote_count = self.remote_count - 1
  end
  self.stats_.rejected = self.stats_.rejected + 1
  write0(self, compact.writer():uint(0):uint(2):uint(remote_id), true)
end

---------------------------------------------------------------------------
-- Channels: closing and opening.

local function free_local(self, id)
  self.free[#self.free + 1] = id
end

-- Ends a channel here. is_remote: the remote closed it (or the stream
-- ended); msg/code: why, when it was not a plain close.
local function close_channel(ch, is_remote, msg, code)
  if ch.closed then return end
  local self = ch.mux
  ch.closed = true
  if msg then ch.close_reason = { msg = msg, code = code } end
  if ch.local_id > 0 then
    local info = ch.info
    info.opened = info.opened - 1
    if info.last_channel == ch then info.last_channel = nil end
    if ch.remote_id > 0 then
      if self.remote[ch.remote_id] then
        self.remote[ch.remote_id] = nil
        self.remote_count = self.remote_count - 1
      end
      ch.remote_id = 0
      free_local(self, ch.local_id) -- the remote acked: the id can be reused now
    end
    self.locals[ch.local_id] = nil
    ch.local_id = 0
    gc_info(self, info)
  elseif ch.remote_id > 0 then
    -- paired with a remote open, never opened here
    if self.remote[ch.remote_id] then
      self.remote[ch.remote_id] = nil
      self.remote_count = self.remote_count - 1
    end
    ch.remote_id = 0
  end
  -- queued messages stay readable, but no longer hold the mux's reader
  self.buffered = self.buffered - ch.qbytes
  ch.qbytes = 0
  self.reader_waiters:wake_all(true)
  if ch.on_close then call("on_close", ch.on_close, is_remote, ch) end
  ch.recv_waiters:wake_all(false)
  ch.open_waiters:wake_all(false)
  ch.close_waiters:wake_all(true)
  if ch.on_destroy then call("on_destroy", ch.on_destroy, ch) end
end

local function close_frame(ch)
  return compact.writer():uint(0):uint(3):uint(ch.local_id)
end

-- Closes a channel because of what the remote sent, and tells it.
local function fail_channel(ch, msg, code)
  if ch.closed then return end
  if ch.local_id > 0 then write0(ch.mux, close_frame(ch), true) end
  close_channel(ch, false, msg, code)
end

local function enqueue_message(ch, i, v, cost)
  local self = ch.mux
  ch.qtail = ch.qtail + 1
  ch.q[ch.qtail] = { i, v, cost }
  ch.qbytes = ch.qbytes + cost
  self.buffered = self.buffered + cost
  ch.recv_waiters:wake_one(true)
end

-- One message for an open channel (r: over its type's payload).
local function deliver(ch, t, r)
  local self = ch.mux
  local m = ch.messages[t + 1]
  if not m then
    self.stats_.ignored = self.stats_.ignored + 1 -- a type we do not know: protomux skips it too
    return
  end
  local cost = r.e - r.i + 1 + ENTRY_COST
  local ok, v = pcall(m.decode, r)
  if not ok or r.err then
    return fail_channel(ch, "message " .. (t + 1) .. " did not decode: " .. tostring(ok and r.err or v), "EDECODE")
  end
  self.stats_.messages_in = self.stats_.messages_in + 1
  if m.on_message then
    local good, err = call("on_message", m.on_message, v, ch)
    if not good then fail_channel(ch, "on_message failed: " .. err, "ECALLBACK") end
    return
  end
  enqueue_message(ch, t + 1, v, cost)
end

-- The remote's open is matched with our channel: decode its handshake,
-- deliver what waited, wake opened().
local function full_open(ch, slot)
  if ch.is_open or ch.closed then return end
  local hs_bytes = slot.hs
  slot.hs = nil
  slot.session = ch
  if ch.handshake_codec then
    local r = reader(hs_bytes)
    local ok, v = pcall(ch.handshake_codec.decode, r)
    if not ok or r.err then
      return fail_channel(ch, "the remote handshake did not decode: " .. tostring(ok and r.err or v), "EDECODE")
    end
    ch.handshake = v
  end
  if ch.on_open then
    local ok, err = call("on_open", ch.on_open, ch.handshake, ch)
    if not ok then return fail_channel(ch, "on_open failed: " .. err, "ECALLBACK") end
  end
  local pending = slot.pending
  slot.pending = nil
  if pending then
    for _, p in ipairs(pending) do
      ch.mux.buffered = ch.mux.buffered - p.cost
      if ch.closed then break end
      deliver(ch, p.t, reader(p.bytes))
    end
    ch.mux.reader_waiters:wake_all(true)
  end
  if ch.closed then return end
  ch.is_open = true
  ch.open_waiters:wake_all(true)
end

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
    local slot = { hs = hs }
    self.remote[rid] = slot
    self.remote_count = self.remote_count + 1
    ch.remote_id = rid
    return full_open(ch, slot)
  end
  local notify = self.notify[key_of(protocol, id)] or self.notify[key_of(protocol, nil)]
  if not notify or self.remote_count >= opts.max_channels then return reject(self, rid) end
  info = get_info(self, protocol, id)
  self.remote[rid] = { hs = hs, pending = {} }
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
  if slot and slot.session then close_channel(slot.session, true) end
end

local function on_batch(self, r)
  local rid = r:uint()
  if r.err then proto_error("bad batch") end
  local e = r.e
  while r.i <= e and not self.destroyed do
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
    while self.ctl_bytes > CTL_LIMIT and not self.destroyed do
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

---------------------------------------------------------------------------
-- The mux.

local function check_opts(opts, fname)
  if opts ~= nil and type(opts) ~= "table" then check.fail("opts", fname, "table", type(opts)) end
  local o = {}
  for k, v in pairs(M.DEFAULTS) do o[k] = v end
  for k, v in pairs(opts or {}) do
    if M.DEFAULTS[k] == nil then check.fail("opts." .. tostring(k), fname, "a known option", "unknown option") end
    if type(v) ~= "number" or v < 1 or v % 1 ~= 0 then check.fail("opts." .. k, fname, "positive integer", v) end
    o[k] = v
  end
  return o
end

--- The muxer of a stream: the same one on every call (opts count on the
-- first). conn needs recv_message([timeout]) and send_message(data)
-- (ludx.secretstream), and finish/close or destroy.
function M.from(conn, opts)
  if type(conn) ~= "table" then check.fail("conn", "from", "stream with recv_message/send_message", type(conn)) end
  local existing = rawget(conn, "protomux")
  if existing then return existing end
  if type(conn.recv_message) ~= "function" or type(conn.send_message) ~= "function" then
    check.fail("conn", "from", "stream with recv_message/send_message", "a table without them")
  end
  local o = check_opts(opts, "from")
  if not ludx.running() then error("protomux.from must be called inside ludx.run (it starts tasks)", 2) end
  local self = setmetatable({
    conn = conn, opts = o,
    infos = {}, notify = {},
    locals = {}, local_n = 0, free = {},
    remote = {}, remote_len = 0, remote_count = 0,
    outq = {}, outctl = {}, outhead = 1, outtail = 0, out_bytes = 0, ctl_bytes = 0,
    corked = 0, batch = nil, batch_size = 0,
    buffered = 0,
    reader_waiters = ludx.waiters(), send_waiters = ludx.waiters(),
    stats_ = { frames_in = 0, frames_out = 0, messages_in = 0, messages_out = 0, ignored = 0, rejected = 0 },
  }, Mux)
  rawset(conn, "protomux", self)
  self.reader_task = ludx.spawn("protomux reader", reader_task, self)
  return self
end

function M.is_mux(v)
  return getmetatable(v) == Mux
end

Mux.__tostring = function(self)
  local n = 0
  for _ in pairs(self.locals) do n = n + 1 end
  return format("<protomux %s, %d channels, %d remote>", self.destroyed and "destroyed" or "open", n, self.remote_count)
end

--- The channels opened here, as a list.
function Mux:channel_list()
  local list = {}
  for _, ch in pairs(self.locals) do list[#list + 1] = ch end
  for _, slot in pairs(self.remote) do
    local ch = slot.session
    if ch and ch.local_id == 0 then list[#list + 1] = ch end
  end
  return list
end

--- Iterates the open channels.
function Mux:channels()
  local list, i = self:channel_list(), 0
  return function()
    i = i + 1
    return list[i]
  end
end

--- Closes every channel and destroys the stream (idempotent).
function Mux:destroy(msg, code)
  if self.destroyed then return true end
  self.destroyed = true
  self.err = { msg = msg or "the mux was destroyed", code = code or "ECANCELED" }
  for _, ch in ipairs(self:channel_list()) do close_channel(ch, true, self.err.msg, self.err.code) end
  for _, info in pairs(self.infos) do info.incoming = {} end
  for rid, slot in pairs(self.remote) do
    drop_pending(self, slot)
    self.remote[rid] = nil
  end
  self.remote_count = 0
  self.outq, self.outctl, self.outhead, self.outtail, self.out_bytes, self.ctl_bytes = {}, {}, 1, 0, 0, 0
  self.reader_waiters:wake_all(false)
  self.send_waiters:wake_all(false)
  local conn = self.conn
  if rawget(conn, "protomux") == self then rawset(conn, "protomux", nil) end
  local d = conn.destroy or conn.close
  if d then pcall(d, conn) end
  return true
end

--- Sends every message from now until uncork() as one batch frame.
function Mux:cork()
  self.corked = self.corked + 1
  if self.corked == 1 then self.batch, self.batch_size = {}, 2 end
end

function Mux:uncork()
  if self.corked == 0 then return end
  self.corked = self.corked - 1
  if self.corked == 0 then
    if not self.destroyed then send_batch(self) end
    self.batch = nil
    wait_room(self)
  end
end

local function check_key(t, fname)
  if type(t) ~= "table" then check.fail("key", fname, "{protocol=, id=}", type(t)) end
  check.string(t.protocol, "protocol", fname)
  check.string(t.id, "id", fname, true)
  return t.protocol, t.id
end

--- fn(id) runs in a task of its own when the remote opens a channel of
-- this protocol (and id; id nil matches every id) that we did not open:
-- mux:channel{} for it while fn runs pairs it, else it is rejected.
function Mux:pair(key, fn)
  local protocol, id = check_key(key, "pair")
  if type(fn) ~= "function" then check.fail("fn", "pair", "function", type(fn)) end
  self.notify[key_of(protocol, id)] = fn
end

function Mux:unpair(key)
  local protocol, id = check_key(key, "unpair")
  self.notify[key_of(protocol, id)] = nil
end

--- true when a channel of this protocol and id is open here.
function Mux:opened(key)
  local protocol, id = check_key(key, "opened")
  local info = self.infos[key_of(protocol, id)]
  return info ~= nil and info.opened > 0
end

function Mux:get_last_channel(key)
  local protocol, id = check_key(key, "get_last_channel")
  local info = self.infos[key_of(protocol, id)]
  return info and info.last_channel or nil
end

--- true when no channel id is in use here.
function Mux:is_idle()
  return next(self.locals) == nil
end

function Mux:stats()
  local s = {}
  for k, v in pairs(self.stats_) do s[k] = v end
  s.remote_channels = self.remote_count
  s.buffered = self.buffered
  s.write_buffered = self.out_bytes
  return s
end

local function check_codec(c, name, fname)
  if type(c) ~= "table" or type(c.encode) ~= "function" or type(c.decode) ~= "function" then
    check.fail(name, fname or "channel", "codec {encode=, decode=}", type(c))
  end
end

-- A message type: a codec, {encoding = codec, on_message = fn}, or false
-- (a type we skip, protomux's addMessage(null)).
local function message_type(m, name, fname)
  if m == nil or m == false then return false end
  if type(m) == "table" and m.encoding then
    check_codec(m.encoding, name .. ".encoding", fname)
    if m.on_message ~= nil and type(m.on_message) ~= "function" then
      check.fail(name .. ".on_message", fname, "function", type(m.on_message))
    end
    return { encode = m.encoding.encode, decode = m.encoding.decode, on_message = m.on_message }
  end
  check_codec(m, name, fname)
  return { encode = m.encode, decode = m.decode }
end

--- A new channel (nil, msg, code when the mux is gone, or when unique
-- and a channel of this protocol and id is open already). When the
-- remote's open waits for it (pairing), it is opened at once.
function Mux:channel(o)
  if type(o) ~= "table" then check.fail("opts", "channel", "table", type(o)) end
  check.string(o.protocol, "protocol", "channel")
  check.string(o.id, "id", "channel", true)
  if o.handshake ~= nil then check_codec(o.handshake, "handshake", "channel") end
  local messages = {}
  local list = o.messages or {}
  if type(list) ~= "table" then check.fail("messages", "channel", "list of codecs", type(list)) end
  for i = 1, table.maxn(list) do messages[i] = message_type(list[i], "messages[" .. i .. "]", "channel") end
  for _, f in ipairs({ "on_open", "on_close", "on_destroy" }) do
    if o[f] ~= nil and type(o[f]) ~= "function" then check.fail(f, "channel", "function", type(o[f])) end
  end
  if self.destroyed then return nil, self.err.msg, self.err.code end
  local info = get_info(self, o.protocol, o.id, o.aliases)
  if o.unique ~= false and info.opened > 0 then
    gc_info(self, info)
    return nil, "a channel of this protocol and id is open already", "EEXIST"
  end
  local ch = setmetatable({
    mux = self, info = info, protocol = o.protocol, id = o.id, aliases = o.aliases,
    handshake_codec = o.handshake, messages = messages,
    on_open = o.on_open, on_close = o.on_close, on_destroy = o.on_destroy, user_data = o.user_data,
    local_id = 0, remote_id = 0, is_open = false, closed = false,
    q = {}, qhead = 1, qtail = 0, qbytes = 0,
    recv_waiters = ludx.waiters(), open_waiters = ludx.waiters(), close_waiters = ludx.waiters(),
  }, Channel)
  while #info.incoming > 0 do
    local rid = remove(info.incoming, 1)
    local slot = self.remote[rid]
    if slot then
      ch.remote_id = rid
      full_open(ch, slot)
      break
    end
  end
  return ch
end

---------------------------------------------------------------------------
-- A channel.

Channel.__tostring = function(ch)
  local state = ch.closed and "closed" or (ch.is_open and "open" or "opening")
  return format("<protomux channel %s%s %s>", ch.protocol, ch.id and (" " .. hex(ch.id):sub(1, 8)) or "", state)
end

--- Sends our open with the handshake value (the handshake codec's).
function Channel:open(handshake)
  local mux = self.mux
  if self.closed then return nil, "channel is closed", "EPIPE" end
  if mux.destroyed then return nil, mux.err.msg, mux.err.code end
  if self.local_id > 0 then return nil, "channel is open already", "EBUSY" end
  local w = compact.writer():uint(0):uint(1)
  local id
  if #mux.free > 0 then
    id = remove(mux.free)
  else
    mux.local_n = mux.local_n + 1
    id = mux.local_n
  end
  w:uint(id):string(self.protocol)
  compact.optional_buffer.encode(w, self.id)
  if self.handshake_codec then
    local ok, err = pcall(self.handshake_codec.encode, w, handshake)
    if not ok then
      w:finish()
      free_local(mux, id)
      error("bad argument 'handshake' to 'open' (" .. tostring(err) .. ")", check.user_level())
    end
  end
  local info = self.info
  info.opened = info.opened + 1
  info.last_channel = self
  self.local_id = id
  mux.locals[id] = self
  if self.remote_id == 0 then info.outgoing[#info.outgoing + 1] = id end
  write0(mux, w)
  wait_room(mux)
  return true
end

--- Waits until the remote opened the channel too: its handshake value
-- (true when the channel has no handshake codec), or nil, msg, code
-- (EREJECTED, closed, ETIMEDOUT).
function Channel:opened(timeout)
  ludx.check_timeout(timeout, "opened")
  local deadline = check.deadline(timeout)
  while true do
    if self.is_open and not self.closed then
      if self.handshake == nil then return true end
      return self.handshake
    end
    if self.closed then
      local r = self.close_reason
      if r then return nil, r.msg, r.code end
      return nil, "the channel closed before it opened", "ECLOSED"
    end
    local ok, m, c = self.open_waiters:wait("protomux channel open", check.left(deadline), "opened")
    if ok == nil and c then return nil, m, c end
  end
end

--- Sends message type i (1-based) with a value of its codec. Waits while
-- the mux holds more than max_write_buffer bytes for the stream.
function Channel:send(i, value)
  local m = type(i) == "number" and self.messages[i]
  if not m then check.fail("i", "send", "message index 1.." .. #self.messages, i) end
  local mux = self.mux
  if self.closed then
    local r = self.close_reason
    if r and r.code ~= "EOF" then return nil, r.msg, r.code end
    return nil, "channel is closed", "EPIPE"
  end
  if self.local_id == 0 then return nil, "channel is not open (call open first)", "ENOTOPEN" end
  local w = compact.writer()
  if not mux.batch then w:uint(self.local_id) end
  w:uint(i - 1)
  local ok, err = pcall(m.encode, w, value)
  if not ok then
    w:finish()
    error("bad argument 'value' to 'send' (" .. tostring(err) .. ")", check.user_level())
  end
  local bytes = w:finish()
  if #bytes > mux.opts.max_message_size then
    return nil, "a message of " .. #bytes .. " bytes is over max_message_size", "EMSGSIZE"
  end
  mux.stats_.messages_out = mux.stats_.messages_out + 1
  if mux.batch then
    push_batch(mux, self.local_id, bytes)
  else
    enqueue(mux, bytes)
    wait_room(mux)
  end
  if mux.destroyed then return nil, mux.err.msg, mux.err.code end
  return true
end

--- The next message: i, value; nil when the channel closed (nil, msg,
-- code when an error closed it, or ETIMEDOUT). Queued messages come first.
function Channel:recv(timeout)
  ludx.check_timeout(timeout, "recv")
  local deadline = check.deadline(timeout)
  while true do
    if self.qhead <= self.qtail then
      local e = self.q[self.qhead]
      self.q[self.qhead] = nil
      self.qhead = self.qhead + 1
      if self.qhead > self.qtail then self.qhead, self.qtail = 1, 0 end
      if not self.closed then
        self.qbytes = self.qbytes - e[3]
        self.mux.buffered = self.mux.buffered - e[3]
        self.mux.reader_waiters:wake_all(true)
      end
      return e[1], e[2]
    end
    if self.closed then
      local r = self.close_reason
      if r and r.code ~= "EOF" then return nil, r.msg, r.code end
      return nil
    end
    local ok, m, c = self.recv_waiters:wait("protomux channel recv", check.left(deadline), "recv")
    if ok == nil and c then return nil, m, c end
  end
end

--- Closes the channel (the remote sees it closed). Idempotent.
function Channel:close()
  if self.closed then return true end
  local mux = self.mux
  if self.local_id > 0 and not mux.destroyed then write0(mux, close_frame(self)) end
  close_channel(self, false)
  return true
end
Channel.destroy = Channel.close

--- Waits until the channel is closed (either side); true, or ETIMEDOUT.
function Channel:closed_wait(timeout)
  ludx.check_timeout(timeout, "closed_wait")
  local deadline = check.deadline(timeout)
  while not self.closed do
    local ok, m, c = self.close_waiters:wait("protomux channel close", check.left(deadline), "closed_wait")
    if ok == nil and c then return nil, m, c end
  end
  return true
end

--- Adds a message type after the ones given to channel (a codec,
-- {encoding, on_message} or false); returns its index.
function Channel:add_message(m)
  local i = #self.messages + 1
  self.messages[i] = message_type(m, "m", "add_message")
  return i
end

function Channel:cork()
  self.mux:cork()
end

function Channel:uncork()
  self.mux:uncork()
end

M.Mux = Mux
M.Channel = Channel
return M
