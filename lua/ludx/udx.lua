-- UDX sockets and streams as task-friendly objects.
--
--   local sock = assert(udx.bind("127.0.0.1", 0))
--   local s = assert(udx.stream(1))
--   assert(s:connect(sock, 2, port, "127.0.0.1"))
--   assert(s:write(data))          -- waits only above the high-water mark
--   assert(s:finish())             -- END; returns once the remote acked it
--   local chunk = s:read()         -- all in-order bytes available; nil at EOF
--
-- Errors are nil, message, code (ETIMEDOUT, ECONNRESET, EBUSY, ...). Every
-- call that waits takes a timeout in ms. One reader and one writer per stream
-- at a time.
local ludx = require "ludx"
local ffi = require "ffi"

local core = ludx.core
local EV = core.EV

local M = {}

-- The stats struct is read through the FFI without a call; its layout is
-- checked against the C one field by field.
do
  local ok = pcall(ffi.typeof, "udx_stream_stats_t")
  if not ok then ffi.cdef(core.UDX_STATS_CDEF) end
  for name, off in pairs(core.UDX_STATS_OFFSETS) do
    if name == "__size" then
      assert(ffi.sizeof("udx_stream_stats_t") == off, "udx stats struct size differs between C and Lua")
    else
      assert(ffi.offsetof("udx_stream_stats_t", name) == off, "udx stats field " .. name .. " differs between C and Lua")
    end
  end
end
local stats_pp = ffi.typeof("const udx_stream_stats_t **")

local BBR_STATES = { [0] = "startup", "drain", "probe_bw", "probe_rtt" }

local check = require "ludx.check"
local bad_arg = check.fail

local function check_id(v, name, fname)
  if type(v) ~= "number" or v < 0 or v > 0xFFFFFFFF or v % 1 ~= 0 then
    bad_arg(name, fname, "integer 0..2^32-1", type(v) == "number" and tostring(v) or type(v))
  end
end

-- A read hands over at most this much unless told otherwise: LuaJIT serves
-- strings up to 128 KiB from its heap, larger ones from fresh mmaps, whose
-- page faults cost more than the extra reads.
M.READ_MAX = 65536

-- Reads (timeout) or (max, timeout) or ({max=, timeout=}).
local function read_args(a, b, fname)
  local max, timeout
  if type(a) == "table" then
    max, timeout = a.max, a.timeout
  else
    max, timeout = a, b
  end
  if max ~= nil and (type(max) ~= "number" or max < 1 or max % 1 ~= 0) then
    bad_arg("max", fname, "positive integer", tostring(max))
  end
  return max or M.READ_MAX, ludx.check_timeout(timeout, fname)
end

local function timeout_arg(t, fname)
  if type(t) == "table" then t = t.timeout end
  return ludx.check_timeout(t, fname)
end

---------------------------------------------------------------------------
-- Lingering streams, and sockets

-- Streams that closed gracefully and wait for the peer's END, oldest
-- first, linked through the streams (one that ends leaves at once), in two
-- lists: still sending (our END not acked yet) and done sending. One pair
-- for the process: a stream connected by the firewall rule has no socket
-- object here. Past the cap the oldest done one goes first, so peers that
-- never end cannot push out streams still delivering their last bytes.
local sending = { n = 0 }
local done_sending = { n = 0 }
local abort -- a reset (Stream:destroy without the user's mark), below

local function unlink(s)
  local l = s.linger_list
  local prev, nxt = s.lprev, s.lnext
  if prev then prev.lnext = nxt else l.head = nxt end
  if nxt then nxt.lprev = prev else l.tail = prev end
  s.lprev, s.lnext, s.linger_list = nil, nil, nil
  l.n = l.n - 1
end

local function link(s, l)
  s.linger_list = l
  s.lprev = l.tail
  if l.tail then l.tail.lnext = s else l.head = s end
  l.tail = s
  l.n = l.n + 1
end

-- a stream lingers while it is in one of the two lists
local function linger_untrack(s)
  if s.linger_list then unlink(s) end
end

local function linger_track(self)
  if self.linger_list then return end
  link(self, self.finished and done_sending or sending)
  while sending.n + done_sending.n > M.MAX_LINGERING do
    local old = done_sending.head or sending.head
    unlink(old)
    abort(old)
  end
end

-- our END was acked: the stream is done sending
local function linger_finished(s)
  if s.linger_list == sending then
    unlink(s)
    link(s, done_sending)
  end
end

-- the socket objects (ludx.udx.socket): udx.bind, udx.Socket
local socket = require "ludx.udx.socket"
local Socket = socket.Socket
M.bind = socket.bind

--- Fault injection for every datagram (nil clears): {seed=, loss=,
-- duplicate=, reorder=, reorder_us=, corrupt=, send_error=, send_errno=,
-- blackout_start_ms=, blackout_ms=, direction="tx"|"rx"|"both"}.
function M.set_fault(f)
  return core.udx_set_fault(f)
end

--- Mappings of send-queue memory alive in this process: the blocks that
-- large writes (sealed SecretStream frames) are made in, and pages kept for
-- a queue's next one. A gauge for leak checks.
function M.mapped_blocks()
  return core.udx_mapped_blocks()
end

---------------------------------------------------------------------------
-- Streams

local Stream = {}
Stream.__index = Stream

-- A stream's wait queue of that name, made on first use.
local function queue(self, name)
  local w = rawget(self, name)
  if w == nil then
    w = ludx.waiters()
    self[name] = w
  end
  return w
end

-- Wakes the tasks waiting in a stream's queue, if it has one.
local function wake(s, name, ...)
  local w = rawget(s, name)
  if w ~= nil then w:wake_all(...) end
end
-- One line for the REPL and logs: ids, remote address, state, bytes.
Stream.__tostring = function(s)
  local state = (s.closed or s.shut) and ("closed" .. (s.err_code and " (" .. tostring(s.err_code) .. ")" or ""))
    or (s.socket and "connected" or "not connected")
  local remote = ""
  if s.socket and not s.closed then
    local ok, host, port = pcall(s.h.remote_address, s.h)
    if ok and host then remote = string.format(" at %s:%s", tostring(host), tostring(port)) end
  end
  local bytes = ""
  if s.statsp and not s.closed then
    local st = s.statsp[0]
    bytes = string.format(", %d B sent, %d B received, rtt %.1f ms", tonumber(st.bytes_sent),
      tonumber(st.bytes_received), st.rtt_us / 1000)
  end
  return string.format("<udx stream %d -> %s%s %s%s>", s.id, s.remote_id and tostring(s.remote_id) or "?", remote,
    state, bytes)
end
-- lets layers above (SecretStream) use the C-side paths for udx streams
Stream.udx_stream = true

--- A stream with a local id. opts: seq, read_buffer_limit (bytes),
-- rwnd_max, keepalive (ms), timeout (give-up ms), firewall ("accept",
-- "drop"), ack_policy ("each" or "batch"), migration (true: accept packets
-- from addresses other than the remote, for peers that move; by default a
-- connected stream drops them).
function M.stream(id, opts)
  check_id(id, "id", "stream")
  if opts ~= nil and type(opts) ~= "table" then bad_arg("opts", "stream", "table", type(opts)) end
  opts = opts or {}
  -- the wait queues (readers, writers, finishers, flushers, messages,
  -- events) are made on first wait: an idle stream holds none (issue 18:
  -- <= 4 KiB per idle stream; six empty queues were ~1.3 KiB of Lua heap)
  local self = setmetatable({ id = id, closed = false }, Stream)
  self.ref = ludx.ref(self)
  local h, msg, code = core.udx_stream(id, self.ref)
  if not h then
    ludx.unref(self.ref)
    return nil, msg, code
  end
  self.h = h
  self.statsp = ffi.cast(stats_pp, h:stats_ref())
  ludx.track(self)
  if opts.seq then h:set_seq(opts.seq) end
  if opts.read_buffer_limit then h:set_read_buffer_limit(opts.read_buffer_limit) end
  if opts.rwnd_max then h:set_rwnd_max(opts.rwnd_max) end
  if opts.keepalive then h:set_keepalive(opts.keepalive) end
  if opts.timeout then h:set_timeout(opts.timeout) end
  if opts.firewall then h:firewall(opts.firewall) end
  if opts.migration then h:set_migration(1) end
  if opts.ack_policy then
    if opts.ack_policy ~= "each" and opts.ack_policy ~= "batch" then bad_arg("ack_policy", "stream", "'each' or 'batch'", tostring(opts.ack_policy)) end
    h:set_ack_policy(opts.ack_policy == "batch" and 1 or 0)
  end
  return self
end

-- nil, msg, code for a stream that closed with an error, that we closed
-- (ECANCELED) or that ended (EPIPE).
local function close_error(self)
  if self.err_code then return nil, self.err_msg, self.err_code end
  if self.shut then return nil, "stream is closed", "ECANCELED" end
  return nil, "stream is closed", "EPIPE"
end

-- A write is over.
local function write_done(self)
  self.writing = false
  self.wrest = nil
end

-- finish and close: the rest of a write in pieces under way is queued
-- now, whole, so that the END comes after all of it (its writer then
-- returns true).
local function take_rest(self)
  if self.wrest then
    local r, msg, code = self.h:write(self.wrest, self.wrest_off)
    -- its writer hears of a failure (no memory, a dead stream), not true
    if r == nil then self.wrest_fail = { msg, code } end
    self.wrest = nil
  end
end

--- Connects to the remote stream remote_id at host:port over sock.
-- opts.ack sets the first expected sequence number.
function Stream:connect(sock, remote_id, port, host, opts)
  if getmetatable(sock) ~= Socket then bad_arg("sock", "connect", "udx socket", type(sock)) end
  check_id(remote_id, "remote_id", "connect")
  check.port(port, "port", "connect", 1)
  if host == nil then host = "127.0.0.1" end
  if type(host) ~= "string" then bad_arg("host", "connect", "string", type(host)) end
  if self.closed or self.shut then return close_error(self) end
  if opts and opts.ack then self.h:set_ack(opts.ack) end
  local ok, msg, code = self.h:connect(sock.h, remote_id, port, host)
  if not ok then return nil, msg, code end
  self.socket = sock
  self.remote_id = remote_id
  return true
end

-- A write longer than this is queued in pieces of this size, each once the
-- queue drained below its high-water mark: the send queue then holds what
-- the window needs, not a copy of the whole write (a 200 MB write copied at
-- once cost 0.5 s of page faults before the first packet, and 200 MB RSS).
local WRITE_PIECE = 262144

--- Queues data; waits only while the queue is above the high-water mark.
-- On timeout the data stays queued and nil, "timed out", "ETIMEDOUT" returns.
function Stream:write(data, timeout)
  if type(data) ~= "string" then bad_arg("data", "write", "string", type(data)) end
  timeout = timeout_arg(timeout, "write")
  if self.writing then return nil, "busy writing", "EBUSY" end
  if self.closed or self.shut then return close_error(self) end
  local len, piece = #data, WRITE_PIECE
  if len <= piece then
    local r, msg, code = self.h:write(data)
    if r == nil then return nil, msg, code end
    if r == 0 then
      self.writing = true
      local ok, m, c = queue(self, "writers"):wait("write drain", timeout, "write")
      write_done(self)
      if ok == nil then return nil, m, c end
    end
    return true
  end
  local deadline = timeout and ludx.now() + timeout or nil
  local off = 0
  self.writing = true
  self.wrest, self.wrest_off = data, 0
  while true do
    local n = math.min(piece, len - off)
    local r, msg, code = self.h:write(data, off, n)
    if r == nil then
      write_done(self)
      return nil, msg, code
    end
    off = off + n
    self.wrest_off = off
    if r == 0 then
      local left = deadline and math.max(0, deadline - ludx.now()) or nil
      local ok, m, c = queue(self, "writers"):wait("write drain", left, "write")
      if self.wrest == nil then
        -- finish or close queued the rest (or failed to)
        write_done(self)
        local fail = self.wrest_fail
        self.wrest_fail = nil
        if fail then return nil, fail[1], fail[2] end
        if ok == nil then return nil, m, c end
        return true
      end
      if ok == nil then
        -- the whole buffer is taken even on a timeout (the udx contract)
        if c == "ETIMEDOUT" and off < len and not self.closed then self.h:write(data, off) end
        write_done(self)
        return nil, m, c
      end
    end
    if off >= len then break end
  end
  write_done(self)
  return true
end

--- Ends our half (UDX END) after the bytes written so far, and returns once
-- the remote acknowledged it.
function Stream:finish(timeout)
  timeout = timeout_arg(timeout, "finish")
  if self.finished then return true end
  if self.closed or self.shut then return close_error(self) end
  if not self.ending then
    take_rest(self) -- a write in pieces goes out whole before the END
    local r, msg, code = self.h:write_end()
    if r == nil then return nil, msg, code end
    self.ending = true
  end
  while not self.finished do
    if self.closed or self.shut then return close_error(self) end
    local ok, m, c = queue(self, "finishers"):wait("finish", timeout, "finish")
    if ok == nil then return nil, m, c end
  end
  return true
end

--- Waits until every byte written so far is acknowledged.
function Stream:flush(timeout)
  timeout = timeout_arg(timeout, "flush")
  if self.closed or self.shut then return close_error(self) end
  local r, msg, code = self.h:flush()
  if r == nil then return nil, msg, code end
  if r == 1 then return true end
  local ok, m, c = queue(self, "flushers"):wait("flush", timeout, "flush")
  if ok == nil then return nil, m, c end
  return true
end

--- All in-order bytes available now, up to max (default udx.READ_MAX, 64
-- KiB), waiting for some if none; nil at EOF; nil, msg, code on error.
function Stream:read(a, b)
  local max, timeout = read_args(a, b, "read")
  if self.reading then return nil, "busy reading", "EBUSY" end
  if self.shut then return close_error(self) end
  while true do
    local data = self.h:take(max)
    if data then return data end
    if data == nil then
      -- EOF, or a stream closed with an error before its end
      if self.err_code then return nil, self.err_msg, self.err_code end
      return nil
    end
    if self.closed then
      if self.err_code then return nil, self.err_msg, self.err_code end
      return nil
    end
    self.reading = true
    local ok, m, c = queue(self, "readers"):wait("read", timeout, "read")
    self.reading = false
    if ok == nil and c then return nil, m, c end
    if self.shut then return close_error(self) end
  end
end

--- Waits until bytes (or the end) may be there to read: true at once when
-- bytes are buffered, the end is next or the stream is closed, else after
-- the next readable event; nil, "timed out", "ETIMEDOUT" after timeout ms.
-- Take the bytes with read() (or, for the C framer, through handle()).
function Stream:wait_readable(timeout)
  timeout = timeout_arg(timeout, "wait_readable")
  if self.shut then return close_error(self) end
  local n, eof = self.h:readable()
  if self.closed or n > 0 or eof then return true end
  local ok, m, c = queue(self, "readers"):wait("read", timeout, "wait_readable")
  if ok == nil and c then return nil, m, c end
  return true
end

--- After a write above the high-water mark (a C-side write that returned
-- 0): waits until the queue is below it again. true; nil, msg, code when
-- the stream closes first or after timeout ms (ETIMEDOUT).
function Stream:wait_drain(timeout)
  timeout = timeout_arg(timeout, "wait_drain")
  if self.closed or self.shut then return close_error(self) end
  local ok, m, c = queue(self, "writers"):wait("write drain", timeout, "wait_drain")
  if ok == nil then return nil, m, c end
  return true
end

--- msg, code of the error that ended the stream (ECANCELED after our own
-- close), or nil while it is open or after a clean end.
function Stream:error()
  if self.err_code then return self.err_msg, self.err_code end
  return nil
end

--- The C stream (a userdata) for C-side consumers such as
-- core.crypto.framer's feed_udx / encrypt_udx. Valid while the object lives.
function Stream:handle()
  return self.h
end

--- Sends one MESSAGE datagram (unreliable, unordered).
function Stream:send(msg)
  if type(msg) ~= "string" then bad_arg("msg", "send", "string", type(msg)) end
  if self.closed or self.shut then return close_error(self) end
  return self.h:send(msg)
end

--- The next MESSAGE datagram.
function Stream:recv(timeout)
  timeout = timeout_arg(timeout, "recv")
  if self.shut then return close_error(self) end
  while true do
    local m = self.h:take_message()
    if m then return m end
    if self.closed or self.shut then return close_error(self) end
    local ok, msg, code = queue(self, "messages"):wait("message", timeout, "recv")
    if ok == nil and code then return nil, msg, code end
  end
end

--- How long close() waits for the graceful end by default (ms).
M.CLOSE_TIMEOUT = 10000

--- How many streams the process keeps lingering after a graceful close:
-- past it the oldest is reset, so peers that never end cannot pile up
-- closed streams (each holds its id and state until its timeout).
M.MAX_LINGERING = 4096

--- How many streams linger now (closed gracefully, waiting for the peer's
-- END).
function M.lingering()
  return sending.n + done_sending.n
end

--- Graceful close: the END goes after every byte written (a write under
-- way is queued whole first); the peer sees EOF, not a reset. Tasks
-- waiting to read (read, recv) wake with nil, "stream is closed",
-- "ECANCELED" at once, and every later call fails the same way; a writer
-- waiting for room returns true at once (its bytes are queued), while
-- flush and finish complete when the peer acknowledges, as close does.
-- In a task close waits until the peer has
-- acknowledged every byte and the END: true; nil, msg, code when the
-- stream failed first (ECONNRESET), or ETIMEDOUT when that took over
-- timeout ms (default udx.CLOSE_TIMEOUT): then the stream is reset.
-- Outside a task it starts the close and returns true. Either way the
-- engine then lingers as TCP does after close: bytes the peer still sends
-- are acked and dropped, the stream closes (is_closed, wait_closed) when
-- the peer's END arrives, and is reset if that is not within timeout ms
-- of the call. destroy() cuts it short. Idempotent: a stream that failed
-- before the peer acked our END returns that error to every close. A
-- stream that never connected (no connect(), or a failed one) closes at
-- once: true when nothing was written, else (its bytes are dropped)
-- nil, msg, "ENOTCONN", in a task or not, as for waiting writers and
-- finish.
function Stream:close(timeout)
  timeout = timeout_arg(timeout, "close")
  if self.closed or self.destroyed then
    -- a stream that failed (a reset, a timeout) before the peer acked our
    -- END may have lost bytes: say so, as the close in progress did
    if self.err_code and not (self.finished or self.by_user) then return nil, self.err_msg, self.err_code end
    return true
  end
  local in_task = ludx.in_task()
  local ms = math.min(math.max(0, math.ceil(timeout or M.CLOSE_TIMEOUT)), 4294967295)
  local first, connected = not self.shut, self.h:remote_address() ~= nil
  if first then
    self.shut = true
    -- a write in pieces under way is queued whole now: its bytes go out
    -- before the END
    take_rest(self)
    wake(self, "readers", nil, "stream is closed", "ECANCELED")
    wake(self, "messages", nil, "stream is closed", "ECANCELED")
  end
  -- every call: a shorter timeout than the first close's wins (in C)
  local r, msg, code = self.h:close(ms)
  if r == nil then
    self.h:destroy()
    return nil, msg, code
  end
  if first then
    -- a stream that never connected closes at once (in C), dropping what
    -- was written: that is a failure, as a reset is (the engine's close
    -- brought its count of unacked bytes up to date)
    if not connected and self.statsp[0].write_queued > 0 then
      self.err_msg, self.err_code = "stream never connected: written bytes not delivered", "ENOTCONN"
      wake(self, "writers", nil, self.err_msg, self.err_code)
    else
      wake(self, "writers", true) -- every byte they wrote is queued
    end
  end
  -- (one that never connected is closed already: it never lingers)
  if not self.closed and connected then linger_track(self) end
  -- bytes lost that way are known at once, in a task or not
  if not connected and self.err_code then return nil, self.err_msg, self.err_code end
  if not in_task then return true end
  -- woken as finish is (END acked, or closed); the engine's deadline
  -- bounds the wait: it resets the stream then
  while not (self.finished or self.closed) do
    queue(self, "finishers"):wait("close", nil, "close")
  end
  if self.finished then return true end
  if self.err_code then return nil, self.err_msg, self.err_code end
  return true
end

--- Abortive close: the remote sees ECONNRESET, bytes not yet sent or
-- acknowledged are dropped. Waiting readers and writers (and a close in
-- progress) get nil, "stream is closed", "ECANCELED". Idempotent.
function Stream:destroy()
  if self.closed or self.destroyed then return true end
  self.by_user = true -- no failure to report to a later close
  return abort(self)
end

-- destroy; also the lingering cap's eviction, which a later close reports
abort = function(self)
  self.shut, self.destroyed = true, true
  if not self.err_code then
    self.err_msg, self.err_code = "stream is closed", "ECANCELED"
  end
  self.h:destroy()
  return true
end

function Stream:set_read_buffer_limit(bytes)
  if type(bytes) ~= "number" or bytes < 0 then bad_arg("bytes", "set_read_buffer_limit", "non-negative number", tostring(bytes)) end
  return self.h:set_read_buffer_limit(bytes)
end

function Stream:set_keepalive(ms)
  return self.h:set_keepalive(ms)
end

function Stream:set_timeout(ms)
  return self.h:set_timeout(ms)
end

--- Careful resume: before the first write, start from what an earlier
-- stream to the same peer over the same path measured ({rate = payload
-- bytes/s, rtt_ms = min RTT}, as remembered by a ludx.resume store).
-- The stream jumps to half that rate once its first RTT sample is within
-- [rtt/2, 2 rtt], and retreats at the first loss before the jump is acked.
function Stream:set_resume(rate, rtt_ms)
  if type(rate) ~= "number" or rate < 0 or rate ~= rate then bad_arg("rate", "set_resume", "non-negative number", tostring(rate)) end
  if type(rtt_ms) ~= "number" or rtt_ms < 0 or rtt_ms ~= rtt_ms then bad_arg("rtt_ms", "set_resume", "non-negative number", tostring(rtt_ms)) end
  local ok, msg, code = self.h:set_resume(math.floor(math.min(rate, 2 ^ 50)), math.floor(math.min(rtt_ms * 1000, 4294967295)))
  if not ok then return nil, msg, code end
  self.resumed_from = { rate = rate, rtt_ms = rtt_ms } -- what it was seeded with (for tests, stats)
  return true
end

function Stream:set_fault(f)
  return self.h:set_fault(f)
end

--- Forwards every datagram for this stream to dst's remote (relay).
function Stream:relay_to(dst)
  if getmetatable(dst) ~= Stream then bad_arg("dst", "relay_to", "udx stream", type(dst)) end
  return self.h:relay_to(dst.h)
end

--- Moves the stream to another socket/remote; waits until the change is
-- complete (everything sent before it is acknowledged).
function Stream:change_remote(sock, remote_id, port, host, timeout)
  if getmetatable(sock) ~= Socket then bad_arg("sock", "change_remote", "udx socket", type(sock)) end
  check_id(remote_id, "remote_id", "change_remote")
  check.port(port, "port", "change_remote", 1)
  timeout = ludx.check_timeout(timeout, "change_remote")
  self.remote_changed = false
  local ok, msg, code = self.h:change_remote(sock.h, remote_id, port, host or "127.0.0.1")
  if not ok then return nil, msg, code end
  self.socket = sock
  self.remote_id = remote_id
  while not self.remote_changed do
    if self.closed or self.shut then return close_error(self) end
    local r, m, c = queue(self, "events"):wait("change_remote", timeout, "change_remote")
    if r == nil and c then return nil, m, c end
  end
  return true
end

--- Firewall for packets from unknown sources: "accept", "drop", or
-- "connect" (connect to remote_id at the first source, as hyperdht does).
function Stream:firewall(mode, remote_id)
  if mode == "connect" then check_id(remote_id, "remote_id", "firewall") end
  return self.h:firewall(mode, remote_id)
end

--- Waits until the stream is connected (by connect or by the firewall).
function Stream:wait_connected(timeout)
  timeout = ludx.check_timeout(timeout, "wait_connected")
  while not self.h:remote_address() do
    if self.closed or self.shut then return close_error(self) end
    local r, m, c = queue(self, "events"):wait("connect", timeout, "wait_connected")
    if r == nil and c then return nil, m, c end
  end
  return true
end

--- True once the stream has closed (ended both ways, destroyed, or failed):
-- what wait_closed waits for, without waiting.
function Stream:is_closed()
  return self.closed == true
end

--- Waits until the stream has closed (ended both ways, destroyed, or failed).
function Stream:wait_closed(timeout)
  timeout = ludx.check_timeout(timeout, "wait_closed")
  while not self.closed do
    local r, m, c = queue(self, "events"):wait("close", timeout, "wait_closed")
    if r == nil and c then return nil, m, c end
  end
  return true
end

function Stream:remote_address()
  return self.h:remote_address()
end

--- Live counters: a table read from the C stats without copying.
function Stream:stats()
  local st = self.statsp[0]
  return {
    rtt_ms = st.rtt_us / 1000,
    rttvar_ms = st.rttvar_us / 1000,
    rto_ms = st.rto_us / 1000,
    min_rtt_ms = st.min_rtt_us / 1000,
    cwnd = st.cwnd,
    inflight = st.inflight,
    mtu = st.mtu,
    max_payload = st.max_payload,
    send_rwnd = st.send_rwnd,
    recv_rwnd = st.recv_rwnd,
    pacing_rate = tonumber(st.pacing_rate),
    bbr_bw = tonumber(st.bbr_bw),
    bbr_state = BBR_STATES[st.bbr_state] or st.bbr_state,
    bytes_sent = tonumber(st.bytes_sent),
    bytes_received = tonumber(st.bytes_received),
    packets_sent = tonumber(st.packets_sent),
    packets_received = tonumber(st.packets_received),
    retransmits = tonumber(st.retransmits),
    rto_count = tonumber(st.rto_count),
    fast_recoveries = tonumber(st.fast_recoveries),
    tlp_count = tonumber(st.tlp_count),
    dropped_sacks = tonumber(st.dropped_sacks),
    malformed = tonumber(st.malformed),
    dropped_rwnd = tonumber(st.dropped_rwnd),
    write_queued = tonumber(st.write_queued),
    read_buffered = tonumber(st.read_buffered),
    delivered = tonumber(st.delivered),
    lost = tonumber(st.lost),
    zwp_count = tonumber(st.zwp_count),
  }
end

--- The raw stats struct (cdata), valid as long as the stream object.
function Stream:stats_struct()
  return self.statsp[0]
end

--- Samples stats every interval_ms for plots; take them with trace_take().
function Stream:trace(interval_ms)
  return self.h:trace(interval_ms)
end

function Stream:trace_take()
  return self.h:trace_take()
end

ludx.on_event(EV.UDX_READABLE, function(s)
  wake(s, "readers", true)
end)

ludx.on_event(EV.UDX_DRAIN, function(s)
  wake(s, "writers", true)
end)

ludx.on_event(EV.UDX_FLUSH, function(s)
  wake(s, "flushers", true)
end)

ludx.on_event(EV.UDX_FINISH, function(s)
  s.finished = true
  linger_finished(s)
  wake(s, "finishers", true)
end)

ludx.on_event(EV.UDX_MESSAGE, function(s)
  wake(s, "messages", true)
end)

ludx.on_event(EV.UDX_CLOSE, function(s, status)
  s.closed = true
  linger_untrack(s)
  if status < 0 and not s.err_code then
    s.err_msg, s.err_code = core.strerror(status)
  end
  local msg, code = s.err_msg or "stream is closed", s.err_code or "EPIPE"
  -- readers first take what is buffered, then see the end or the error
  wake(s, "readers", true)
  wake(s, "messages", true)
  wake(s, "writers", nil, msg, code)
  wake(s, "flushers", nil, msg, code)
  wake(s, "events", true)
  if not s.finished then wake(s, "finishers", nil, msg, code) end
  -- once, with the final stats (ludx.resume remembers the path here)
  local on_close = s.on_close
  if on_close then
    s.on_close = nil
    pcall(on_close, s)
  end
end)

ludx.on_event(EV.UDX_FINALIZE, function(s)
  s.finalized = true
  s.closed = true
  ludx.untrack(s)
  ludx.unref(s.ref)
end)

ludx.on_event(EV.UDX_FIREWALL, function(s)
  wake(s, "events", true)
end)

ludx.on_event(EV.UDX_REMOTE_CHANGED, function(s)
  s.remote_changed = true
  wake(s, "events", true)
end)

ludx.on_event(EV.UDX_TRACE, function(s)
  if s.on_trace then s.on_trace(s) end
end)

-- destroy() is the immediate end of every object; a socket has no
-- graceful end, so for it the two are the same.
Socket.destroy = Socket.close

M.Stream = Stream
M.Socket = Socket

return M
