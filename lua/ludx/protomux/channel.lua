-- ludx.protomux internals: the channel object (ch:open, send, recv,
-- close). Not a public module: see ludx.protomux.
local ludx = require "ludx"
local compact = require "ludx.compact"
local check = require "ludx.check"
local st = require "ludx.protomux.state"
local writer = require "ludx.protomux.writer"

local type, tostring, pcall, error = type, tostring, pcall, error
local remove, format = table.remove, string.format
local hex, free_local, close_channel, close_frame = st.hex, st.free_local, st.close_channel, st.close_frame
local enqueue, push_batch, write0, wait_room = writer.enqueue, writer.push_batch, writer.write0, writer.wait_room

local Channel = {}
Channel.__index = Channel

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

return { Channel = Channel, check_codec = check_codec, message_type = message_type }
