-- ludx.udx internals: udx sockets (one UDP port each, many streams on
-- it by id, raw datagrams for the rest). Not a public module: ludx.udx
-- gives udx.bind and udx.Socket from here.
local ludx = require "ludx"
local check = require "ludx.check"

local core = ludx.core
local EV = core.EV
local bad_arg = check.fail
local type, tostring, setmetatable, pcall = type, tostring, setmetatable, pcall

local M = {}

local Socket = {}
Socket.__index = Socket
-- One line for the REPL and logs: kind, address, state.
Socket.__tostring = function(s)
  if s.closed or not s.h then return "<udx socket closed>" end
  local ok, host, port = pcall(s.h.address, s.h)
  return string.format("<udx socket %s:%s open>", ok and tostring(host) or "?", ok and tostring(port) or "?")
end

--- Binds a UDP socket. host "0.0.0.0", "::" (dual stack), "127.0.0.1"...;
-- port 0 picks one. opts.ipv6only.
function M.bind(host, port, opts)
  if host == nil then host = "0.0.0.0" end
  if port == nil then port = 0 end
  if type(host) ~= "string" then bad_arg("host", "bind", "string", type(host)) end
  check.port(port, "port", "bind")
  if opts and opts.ack_pause_us ~= nil then check.integer(opts.ack_pause_us, 0, 1000, "ack_pause_us", "bind") end
  local self = setmetatable({ waiters = ludx.waiters(), closed = false }, Socket)
  self.ref = ludx.ref(self)
  local h, msg, code = core.udx_bind(host, port, self.ref, opts and opts.ipv6only)
  if not h then
    ludx.unref(self.ref)
    return nil, msg, code
  end
  self.h = h
  ludx.track(self)
  if opts and (opts.linger_max or opts.linger_ms) then
    self:set_linger(opts.linger_max or 64, opts.linger_ms or 2000)
  end
  if opts and opts.ack_pause_us then self:set_ack_pause(opts.ack_pause_us) end
  return self
end

--- ACK pause: a peer that acks every packet (udx-native, libudx) sends an
-- ACK per datagram we send. After a read that brought only such ACKs, for
-- streams still waiting on data in flight, the socket stops reading for us
-- microseconds and then takes what came in one batch, instead of waking for
-- each (like a network card's interrupt moderation). A read with anything
-- else in it (data, messages, raw datagrams) is never followed by a pause;
-- a pause that caught fewer than two datagrams skips the next 1, 2, 4 ... 64
-- chances. 0..1000; 0 turns it off. Default 100 (udx.bind opts
-- ack_pause_us). Linux only.
-- stats().ack_pauses counts them.
function Socket:set_ack_pause(us)
  check.integer(us, 0, 1000, "us", "set_ack_pause")
  if self.closed then return nil, "socket is closed", "EBADF" end
  return self.h:set_ack_pause(us)
end

--- Linger: a stream on this socket that closes gracefully (both ENDs acked
-- and read) leaves a small record for 4 RTO or min_ms, whichever is
-- longer, that ACKs the peer's retransmitted END (at most 8 times), in case
-- our last ACK was lost. At most max records (the oldest goes first; max
-- is at most 4096: a datagram for no live stream is checked against each); max
-- 0 turns it off. Defaults: 64 records, 2000 ms (udx.bind opts linger_max,
-- linger_ms). Changing it forgets the records.
function Socket:set_linger(max, min_ms)
  check.integer(max, 0, 4096, "max", "set_linger")
  check.integer(min_ms, 0, 600000, "min_ms", "set_linger")
  if self.closed then return nil, "socket is closed", "EBADF" end
  return self.h:set_linger(max, min_ms)
end

function Socket:address()
  if self.closed then return nil, "socket is closed", "EBADF" end
  return self.h:address()
end

--- Sends one raw datagram. ttl is optional (1..255). A datagram larger
-- than UDP or the path allows gives nil, msg, "EMSGSIZE" (nothing is sent);
-- other send errors (unreachable...) are transient: counted in stats(),
-- the datagram is dropped and send returns true.
function Socket:send(data, port, host, ttl)
  if type(data) ~= "string" then bad_arg("data", "send", "string", type(data)) end
  check.port(port, "port", "send", 1)
  if self.closed then return nil, "socket is closed", "EBADF" end
  return self.h:send(data, port, host or "127.0.0.1", ttl)
end

--- The next raw (non-UDX) datagram: data, host, port, family.
function Socket:recv(timeout)
  ludx.check_timeout(timeout, "recv")
  while true do
    if self.closed then return nil, "socket is closed", "EBADF" end
    local data, host, port, family = self.h:take()
    if data then return data, host, port, family end
    local ok, msg, code = self.waiters:wait("socket recv", timeout, "recv")
    if ok == nil and code then return nil, msg, code end
  end
end

--- Closes the socket now, or as soon as the streams using it are gone.
function Socket:close()
  if self.closed then return true end
  self.closed = true
  ludx.untrack(self)
  -- streams only lingering on it after a graceful close end now (reset,
  -- in C): they do not hold its port
  local ok = self.h:close()
  self.waiters:wake_all(nil, "socket is closed", "EBADF")
  return ok
end

function Socket:stats()
  if self.closed then return nil, "socket is closed", "EBADF" end
  return self.h:stats()
end

function Socket:set_fault(f)
  return self.h:set_fault(f)
end

function Socket:buffer_sizes()
  return self.h:buffer_sizes()
end

ludx.on_event(EV.UDX_SOCKET_RECV, function(sock)
  sock.waiters:wake_all(true)
end)

ludx.on_event(EV.UDX_SOCKET_CLOSE, function(sock)
  sock.closed = true
  sock.waiters:wake_all(nil, "socket is closed", "EBADF")
  ludx.unref(sock.ref)
end)

M.Socket = Socket
return M
