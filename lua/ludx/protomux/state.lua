-- ludx.protomux internals: what a mux knows about protocols (infos) and
-- the changes of a channel's state that the reader, the mux and the channel
-- share (open, deliver, close). Not a public module: see ludx.protomux.
local compact = require "ludx.compact"
local writer = require "ludx.protomux.writer"

local tostring, ipairs, pcall = tostring, ipairs, pcall
local format = string.format
local reader = compact.reader
local write0 = writer.write0

local M = {}

local ENTRY_COST = 64 -- what a queued message costs besides its bytes

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

-- The remote's handshake kept for a pair handler counts as buffered
-- (slot.hs_cost) until the channel opens or the slot goes.
local function release_hs(self, slot)
  if slot.hs_cost then
    self.buffered = self.buffered - slot.hs_cost
    slot.hs_cost = nil
    self.reader_waiters:wake_all(true)
  end
end

local function drop_pending(self, slot)
  release_hs(self, slot)
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
-- Lets go of the remote open ch was paired with: its slot and what it held.
local function release_remote(self, ch)
  local slot = self.remote[ch.remote_id]
  if slot then
    drop_pending(self, slot)
    self.remote[ch.remote_id] = nil
    self.remote_count = self.remote_count - 1
  end
  ch.remote_id = 0
end

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
      release_remote(self, ch)
      free_local(self, ch.local_id) -- the remote acked: the id can be reused now
    end
    self.locals[ch.local_id] = nil
    ch.local_id = 0
    gc_info(self, info)
  elseif ch.remote_id > 0 then
    release_remote(self, ch) -- paired with a remote open, never opened here
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
-- deliver what waited, wake opened(). Until the end, what arrives for the
-- channel still queues on slot.pending, so it stays in order even when
-- on_open waits.
local function full_open(ch, slot)
  if ch.is_open or ch.closed or slot.session then return end
  local hs_bytes = slot.hs
  slot.hs = nil
  release_hs(ch.mux, slot)
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
  if ch.closed then return end
  local pending = slot.pending
  slot.pending = nil
  slot.session = ch
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

M.ENTRY_COST = ENTRY_COST
M.hex, M.key_of, M.call = hex, key_of, call
M.get_info, M.gc_info, M.drop_pending, M.reject = get_info, gc_info, drop_pending, reject
M.free_local, M.close_channel, M.close_frame, M.fail_channel = free_local, close_channel, close_frame, fail_channel
M.deliver, M.full_open = deliver, full_open
return M
