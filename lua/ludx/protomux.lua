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
--
-- The files: protomux/writer.lua (frames to the stream), protomux/reader.lua
-- (frames from it), protomux/state.lua (infos, channel state changes),
-- protomux/channel.lua (the channel object); this one is the mux.
local ludx = require "ludx"
local check = require "ludx.check"
local state = require "ludx.protomux.state"
local writer = require "ludx.protomux.writer"
local channel = require "ludx.protomux.channel"

local type, tostring, pairs, ipairs, pcall, setmetatable, rawget, rawset, error =
  type, tostring, pairs, ipairs, pcall, setmetatable, rawget, rawset, error
local remove, format = table.remove, string.format
local key_of, get_info, gc_info, drop_pending = state.key_of, state.get_info, state.gc_info, state.drop_pending
local close_channel, full_open = state.close_channel, state.full_open
local send_batch, wait_room = writer.send_batch, writer.wait_room
local reader_task = require("ludx.protomux.reader").reader_task
local Channel, check_codec, message_type = channel.Channel, channel.check_codec, channel.message_type

local M = {}

M.DEFAULTS = {
  max_channels = 256, -- channels the remote may have open or pending here; more opens are rejected
  max_message_size = 4 * 1024 * 1024, -- a larger frame ends the mux (EMSGSIZE)
  max_queued = 256, -- messages queued on one channel before the reader waits (backpressure)
  max_buffered = 4 * 1024 * 1024, -- bytes queued over all channels (+64 per message) before the reader waits
  max_name_size = 1024, -- bytes of a remote protocol name or id; larger opens are rejected
  max_write_buffer = 1024 * 1024, -- bytes queued for the stream before send waits
  max_control_buffer = 64 * 1024, -- bytes of replies (rejects) queued before the reader waits
}

local Mux = {}
Mux.__index = Mux

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
    local ch = slot.session or slot.paired
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

--- true when no channel id is in use here (an id closed before the remote
-- answered our open stays in use until it does, as in protomux).
function Mux:is_idle()
  return self.local_n == #self.free
end

function Mux:stats()
  local s = {}
  for k, v in pairs(self.stats_) do s[k] = v end
  s.remote_channels = self.remote_count
  s.buffered = self.buffered
  s.write_buffered = self.out_bytes
  return s
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
      -- opened on the next turn of the loop, as protomux does on the next
      -- tick: the caller may add message types first, and what the remote
      -- sent meanwhile waits on slot.pending for them
      ch.remote_id = rid
      slot.paired = ch
      ludx.spawn("protomux open " .. o.protocol, full_open, ch, slot)
      break
    end
  end
  return ch
end

M.Mux = Mux
M.Channel = Channel
return M
