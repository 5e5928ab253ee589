-- TCP as task-friendly objects, with the same read/write/finish/close API
-- as a udx stream (so a SecretStream or a tunnel works over either).
--
--   local server = assert(tcp.listen("127.0.0.1", 0))
--   local conn = server:accept()           -- waits for a client
--   local c = assert(tcp.connect("127.0.0.1", port))
local ludx = require "ludx"

local core = ludx.core
local EV = core.EV

local M = {}

local check = require "ludx.check"
local bad_arg = check.fail

local Conn = {}
Conn.__index = Conn

-- Every call after our own close, and a call waiting at it, as a udx
-- stream's: ECANCELED (what the peer's end gives is EOF, or EPIPE from a
-- write).
local function closed()
  return nil, "connection is closed", "ECANCELED"
end

local function new_conn(h, ref_obj)
  local c = ref_obj or setmetatable({}, Conn)
  c.readers, c.writers, c.events = ludx.waiters(), ludx.waiters(), ludx.waiters()
  c.h = h
  ludx.track(c)
  return c
end

-- The connection once its connect completes: c, or nil, msg, code (closed).
local function connected(c, h, what, fname, timeout)
  new_conn(h, c)
  while c.connect_status == nil do
    local ok, m, cd = c.events:wait(what, timeout, fname)
    if ok == nil and cd then
      c:close()
      return nil, m, cd
    end
  end
  if c.connect_status < 0 then
    local m, cd = core.strerror(c.connect_status)
    c:close()
    return nil, m, cd
  end
  return c
end

--- Connects to host:port; waits for the connection (timeout in ms).
function M.connect(host, port, timeout)
  if type(host) ~= "string" then bad_arg("host", "connect", "string", type(host)) end
  check.port(port, "port", "connect", 1)
  timeout = ludx.check_timeout(timeout, "connect")
  local addrs, msg, code = ludx.lookup(host, nil, timeout)
  if not addrs then return nil, msg, code end
  local c = setmetatable({}, Conn)
  c.ref = ludx.ref(c)
  local h
  h, msg, code = core.tcp_connect(addrs[1], port, c.ref)
  if not h then
    ludx.unref(c.ref)
    return nil, msg, code
  end
  return connected(c, h, "tcp connect", "connect", timeout)
end

--- All bytes available (up to max, default 64 KiB), waiting for some; nil
-- at EOF; nil, msg, code on error.
function Conn:read(max, timeout)
  if type(max) == "table" then max, timeout = max.max, max.timeout end
  timeout = ludx.check_timeout(timeout, "read")
  if self.reading then return nil, "busy reading", "EBUSY" end
  while true do
    if self.closed then return closed() end
    local data, msg, code = self.h:take(max)
    if data then return data end
    if data == nil then return nil, msg, code end
    self.reading = true
    local ok, m, c = self.readers:wait("tcp read", timeout, "read")
    self.reading = false
    if ok == nil and c then return nil, m, c end
  end
end

--- Queues data; waits only above the high-water mark.
function Conn:write(data, timeout)
  if type(data) ~= "string" then bad_arg("data", "write", "string", type(data)) end
  timeout = ludx.check_timeout(type(timeout) == "table" and timeout.timeout or timeout, "write")
  if self.writing then return nil, "busy writing", "EBUSY" end
  if self.closed then return closed() end
  local r, msg, code = self.h:write(data)
  if r == nil then return nil, msg, code end
  if r == 0 then
    self.writing = true
    local ok, m, c = self.writers:wait("tcp drain", timeout, "write")
    self.writing = false
    if ok == nil then return nil, m, c end
  end
  return true
end

--- Ends our half (FIN) after the queued bytes; waits until it is sent.
function Conn:finish(timeout)
  timeout = ludx.check_timeout(timeout, "finish")
  if self.closed then return closed() end
  if self.shutdown_status == nil then
    local ok, msg, code = self.h:shutdown()
    if not ok then return nil, msg, code end
  end
  while self.shutdown_status == nil do
    local ok, m, c = self.events:wait("tcp shutdown", timeout, "finish")
    if ok == nil and c then return nil, m, c end
  end
  if self.shutdown_status < 0 then return nil, core.strerror(self.shutdown_status) end
  return true
end

function Conn:close()
  if self.closed then return true end
  self.closed = true
  ludx.untrack(self)
  self.h:close()
  self.readers:wake_all(true)
  self.writers:wake_all(closed())
  self.events:wake_all(true)
  return true
end

function Conn:address()
  return self.h:address()
end

function Conn:remote_address()
  return self.h:peer()
end

function Conn:stats()
  return {}
end

ludx.on_event(EV.TCP_CONNECT, function(c, status)
  c.connect_status = status
  c.events:wake_all(true)
end)
ludx.on_event(EV.TCP_READABLE, function(c) c.readers:wake_all(true) end)
ludx.on_event(EV.TCP_DRAIN, function(c) c.writers:wake_all(true) end)
ludx.on_event(EV.TCP_SHUTDOWN, function(c, status)
  c.shutdown_status = status
  c.events:wake_all(true)
end)
ludx.on_event(EV.TCP_CLOSE, function(c)
  c.closed = true
  ludx.untrack(c)
  ludx.unref(c.ref)
end)

local Server = {}
Server.__index = Server

--- Listens on host:port (port 0 picks one).
function M.listen(host, port, opts)
  if type(host) ~= "string" then bad_arg("host", "listen", "string", type(host)) end
  check.port(port, "port", "listen")
  local s = setmetatable({ waiters = ludx.waiters(), pending = 0 }, Server)
  s.ref = ludx.ref(s)
  local h, msg, code = core.tcp_listen(host, port, s.ref, opts and opts.backlog)
  if not h then
    ludx.unref(s.ref)
    return nil, msg, code
  end
  s.h = h
  ludx.track(s)
  return s
end

--- The next client connection.
function Server:accept(timeout)
  timeout = ludx.check_timeout(timeout, "accept")
  while true do
    if self.closed then return nil, "server is closed", "EBADF" end
    local c = setmetatable({}, Conn)
    c.ref = ludx.ref(c)
    local h, msg, code = self.h:accept(c.ref)
    if h then return new_conn(h, c) end
    ludx.unref(c.ref)
    if h == nil then return nil, msg, code end
    local ok, m, cd = self.waiters:wait("tcp accept", timeout, "accept")
    if ok == nil and cd then return nil, m, cd end
  end
end

-- A connection's close is already immediate (libuv closes the socket).
Conn.destroy = Conn.close

function Server:address()
  return self.h:address()
end

function Server:close()
  if self.closed then return true end
  self.closed = true
  ludx.untrack(self)
  self.h:close()
  self.waiters:wake_all(true)
  ludx.unref(self.ref)
  return true
end

ludx.on_event(EV.TCP_CONNECTION, function(s) s.waiters:wake_all(true) end)

-- Unix-domain sockets: the same servers and connections over a file path.
-- The socket file is made mode 0600 and removed when the server closes.
function M.listen_unix(path, opts)
  if type(path) ~= "string" then bad_arg("path", "listen_unix", "string", type(path)) end
  local s = setmetatable({ waiters = ludx.waiters(), pending = 0, unix = true }, Server)
  s.ref = ludx.ref(s)
  local h, msg, code = core.unix_listen(path, s.ref, opts and opts.backlog)
  if not h then
    ludx.unref(s.ref)
    return nil, msg, code
  end
  s.h = h
  ludx.track(s)
  return s
end

function M.connect_unix(path, timeout)
  if type(path) ~= "string" then bad_arg("path", "connect_unix", "string", type(path)) end
  timeout = ludx.check_timeout(timeout, "connect_unix")
  local c = setmetatable({ unix = true }, Conn)
  c.ref = ludx.ref(c)
  local h, msg, code = core.unix_connect(path, c.ref)
  if not h then
    ludx.unref(c.ref)
    return nil, msg, code
  end
  return connected(c, h, "unix connect", "connect_unix", timeout)
end

--- Standard input (fd 0) or output (fd 1) as a connection with the same
-- read/write/close API, when it is a pipe, a socket or a terminal; false
-- when it is a regular file (which io.stdin/io.stdout read and write
-- without waiting on the network). Reads stop while 1 MiB waits unread;
-- writes wait above 1 MiB queued.
function M.stdio(fd)
  if fd ~= 0 and fd ~= 1 then bad_arg("fd", "stdio", "0 or 1", tostring(fd)) end
  local c = setmetatable({ stdio = fd }, Conn)
  c.ref = ludx.ref(c)
  local h, msg, code = core.stdio_open(fd, c.ref)
  if not h then
    ludx.unref(c.ref)
    if h == false then return false end
    return nil, msg, code
  end
  return new_conn(h, c)
end

-- One-line summaries for the REPL and logs.
Conn.__tostring = function(c)
  local state = c.closed and "closed" or (c.shutdown_status and "finished" or "open")
  if c.unix then return string.format("<unix connection %s>", state) end
  if c.stdio then return string.format("<%s %s>", c.stdio == 0 and "stdin" or "stdout", state) end
  local ok, lh, lp = pcall(c.address, c)
  local ok2, rh, rp = pcall(c.remote_address, c)
  return string.format("<tcp connection %s:%s -> %s:%s %s>", ok and tostring(lh) or "?", ok and tostring(lp) or "?",
    ok2 and tostring(rh) or "?", ok2 and tostring(rp) or "?", state)
end
Server.__tostring = function(s)
  if s.closed then return "<tcp server closed>" end
  local ok, h, p = pcall(s.address, s)
  if s.unix then return string.format("<unix server %s listening>", ok and tostring(h) or "?") end
  return string.format("<tcp server %s:%s listening>", ok and tostring(h) or "?", ok and tostring(p) or "?")
end

return M
