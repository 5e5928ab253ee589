-- dht-rpc I/O: two sockets, request ids (tids), retransmission, the
-- congestion window and write tokens.
--
-- Callback style, no waits: everything here runs from socket and timer
-- callbacks. Time, timers and randomness come from `env` ({now, after,
-- random, random_bytes}); sockets from `transport.bind(host, port)`
-- (objects with :address(), :send(data, port, host, ttl), :close() and an
-- .onmessage(data, host, port) field this layer sets). So a whole network
-- of nodes can run in one process over a simulated network and clock.
local msgs = require "ludx.dht.messages"
local crypto = require "ludx.dht.crypto"
local compact = require "ludx.compact"
local errors = require "ludx.dht.errors"

local M = {}

local MAX_WINDOW = 80
M.DEFAULT_MAX_WINDOW = MAX_WINDOW
-- Incoming requests served per second: in all, and from one host:port.
-- Far above what a node sees in normal use (a bootstrap node of a busy
-- network, or a thousand local nodes bootstrapping at once).
M.MAX_REQUESTS = 20000
M.MAX_REQUESTS_PER_SOURCE = 200
local EMPTY = {}

--- nodeId = H32(ipv4Address(host, port)).
function M.node_id(host, port)
  local b = compact.ip4_bytes(host)
  if not b then return nil end
  return crypto.hash(b .. string.char(port % 256, math.floor(port / 256)))
end
local node_id = M.node_id

---------------------------------------------------------------------------
-- Congestion window: about max sends per 750 ms slot, 2 x max in total.

local Congestion = {}
Congestion.__index = Congestion

local function congestion(max)
  return setmetatable({ i = 1, total = 0, window = { 0, 0, 0, 0 }, max = max }, Congestion)
end

function Congestion:is_full()
  return self.total >= 2 * self.max or self.window[self.i] >= self.max
end

function Congestion:recv()
  if self.window[self.i] > 0 then
    self.window[self.i] = self.window[self.i] - 1
    self.total = self.total - 1
  end
end

function Congestion:send()
  self.total = self.total + 1
  self.window[self.i] = self.window[self.i] + 1
end

function Congestion:drain()
  self.i = self.i % 4 + 1
  self.total = self.total - self.window[self.i]
  self.window[self.i] = 0
end

---------------------------------------------------------------------------
-- Outgoing requests

local Request = {}
Request.__index = Request

local function noop() end

function Request:send(force)
  if self.destroyed or not self.socket then return end
  if not self.buffer then
    self.buffer = self.io:_encode_request(self, self.token, self.value, self.to, self.socket)
  end
  if not force and self.io.congestion:is_full() then
    local p = self.io.pending
    p[#p + 1] = self
    return
  end
  self:_send_now()
end

function Request:_send_now()
  if self.destroyed then return end
  local io = self.io
  self.sent = self.sent + 1
  io.congestion:send()
  io.stats.sent = io.stats.sent + 1
  self.socket:send(self.buffer, self.to.port, self.to.host, self.ttl)
  if self.timer then self.timer:cancel() end
  self.timer = io.env.after(self.timeout or 1000, function()
    self.timer = nil
    self.oncycle(self)
    if self.destroyed then return end
    if self.sent > self.retries then
      io.stats.timeouts = io.stats.timeouts + 1
      self:destroy(errors.REQUEST_TIMEOUT())
      io.ontimeout(self)
    else
      io.stats.retries = io.stats.retries + 1
      self:send(false)
    end
  end)
end

function Request:destroy(err)
  if self.destroyed then return end
  self.destroyed = true
  if self.timer then
    self.timer:cancel()
    self.timer = nil
  end
  local io = self.io
  if io.inflight[self.tid] ~= self then return end
  io.inflight[self.tid] = nil
  io.ninflight = io.ninflight - 1
  if self.session then self.session:_detach(self) end
  io.congestion:recv()
  self.onerror(err or errors.REQUEST_DESTROYED(), self)
end

---------------------------------------------------------------------------
-- Incoming requests: reply, error or relay them.

local Incoming = {}
Incoming.__index = Incoming

--- Replies with value; opts.token / opts.closer_nodes (default true),
-- opts.to, opts.socket.
function Incoming:reply(value, opts)
  opts = opts or EMPTY
  self.io:_send_reply(self, 0, value, opts.token ~= false, opts.closer_nodes ~= false, opts.to or self.from, opts.socket or self.socket)
end

--- Replies with an error code; a token only when opts.token is true.
function Incoming:error(code, opts)
  opts = opts or EMPTY
  self.io:_send_reply(self, code, nil, opts.token == true, opts.closer_nodes ~= false, opts.to or self.from, opts.socket or self.socket)
end

--- Forwards this request (same tid, command, target; no token) to `to`
-- with a new value.
function Incoming:relay(value, to, opts)
  local socket = (opts and opts.socket) or self.socket
  local buf = self.io:_encode_request(self, nil, value, to, socket)
  socket:send(buf, to.port, to.host, self.ttl)
end

function Incoming:send_reply(err, value, token, closer)
  self.io:_send_reply(self, err, value, token, closer, self.from, self.socket)
end

---------------------------------------------------------------------------
-- The I/O object

local IO = {}
IO.__index = IO

--- opts: env, transport, host, port (number; 0 = any), any_port,
-- firewalled, max_window, max_requests (incoming requests served per
-- second in all; default M.MAX_REQUESTS), max_requests_per_source (per
-- host:port and second; default M.MAX_REQUESTS_PER_SOURCE), and the
-- callbacks onrequest(req, external), onresponse(res, external),
-- ontimeout(req).
function M.new(table_, opts)
  local env = opts.env
  local self = setmetatable({
    table = table_,
    env = env,
    transport = opts.transport,
    inflight = {},
    ninflight = 0,
    pending = {},
    client_socket = nil,
    server_socket = nil,
    firewalled = opts.firewalled ~= false,
    ephemeral = true,
    congestion = congestion(opts.max_window or MAX_WINDOW),
    onrequest = opts.onrequest or noop,
    onresponse = opts.onresponse or noop,
    ontimeout = opts.ontimeout or noop,
    stats = { sent = 0, received = 0, bad = 0, timeouts = 0, retries = 0, requests = 0, responses = 0, flood_dropped = 0 },
    max_requests = opts.max_requests or M.MAX_REQUESTS,
    max_requests_per_source = opts.max_requests_per_source or M.MAX_REQUESTS_PER_SOURCE,
    flood_window = -1, -- the second the counters below belong to
    flood_total = 0,
    flood_sources = {},
    host = opts.host or "0.0.0.0",
    port = opts.port or 0,
    any_port = opts.any_port ~= false,
    tid = math.floor(env.random() * 65536),
    secrets = nil,
    rotate = 10,
    destroyed = false,
  }, IO)
  return self
end

--- Binds both sockets. The server socket takes `port`, else one of the
-- next 4, else (any_port) any port; the client socket any port.
function IO:bind()
  if self.server_socket then return true end
  local t = self.transport
  local server, err
  local ports = {}
  if self.port ~= 0 then
    for p = self.port, math.min(self.port + 4, 65535) do ports[#ports + 1] = p end
  end
  for _, p in ipairs(ports) do
    server, err = t.bind(self.host, p)
    if server then break end
    if not self.any_port then return nil, err end
  end
  if not server then server, err = t.bind(self.host, 0) end
  if not server then return nil, err end
  local client
  client, err = t.bind(self.host, 0)
  if not client then
    server:close()
    return nil, err
  end
  self.server_socket, self.client_socket = server, client
  server.onmessage = function(data, host, port) self:onmessage(server, data, host, port) end
  client.onmessage = function(data, host, port) self:onmessage(client, data, host, port) end
  self:_schedule_drain()
  return true
end

function IO:_schedule_drain()
  self.drain_timer = self.env.after(750, function()
    if self.destroyed then return end
    self:_drain()
    self:_schedule_drain()
  end)
end

function IO:socket()
  return self.firewalled and self.client_socket or self.server_socket
end

function IO:token(host, i)
  if not self.secrets then self.secrets = { self.env.random_bytes(32), self.env.random_bytes(32) } end
  return crypto.hash(host, self.secrets[i + 1])
end

function IO:_drain()
  if self.secrets then
    self.rotate = self.rotate - 1
    if self.rotate == 0 then
      self.rotate = 10
      local old = self.secrets[1]
      self.secrets[1] = self.secrets[2]
      self.secrets[2] = crypto.hash(old)
    end
  end
  self.congestion:drain()
  local p = self.pending
  local i = 1
  while not self.congestion:is_full() and i <= #p do
    local req = p[i]
    i = i + 1
    req:_send_now()
  end
  if i > 1 then
    local rest = {}
    for j = i, #p do rest[#rest + 1] = p[j] end
    self.pending = rest
  end
end

-- Request-flood cap: incoming requests are counted per second, in all and
-- per source (host:port), before they are decoded; beyond either cap they
-- are dropped (and counted), so a flood costs a table lookup each and can
-- neither monopolise the loop nor grow memory (the per-source table holds
-- at most max_requests entries and is dropped every second).
function IO:_flooded(host, port)
  local window = math.floor(self.env.now() / 1000)
  if window ~= self.flood_window then
    self.flood_window = window
    self.flood_total = 0
    self.flood_sources = {}
  end
  if self.flood_total >= self.max_requests then return true end
  local key = host .. ":" .. port
  local n = (self.flood_sources[key] or 0) + 1
  if n > self.max_requests_per_source then return true end
  self.flood_sources[key] = n
  self.flood_total = self.flood_total + 1
  return false
end

function IO:onmessage(socket, data, host, port)
  if self.destroyed or #data < 2 or not (port > 0 and port < 65536) then return end
  local first = data:byte(1)
  if first ~= msgs.REQUEST_ID and first ~= msgs.RESPONSE_ID then return end
  if first == msgs.REQUEST_ID and self:_flooded(host, port) then
    self.stats.flood_dropped = self.stats.flood_dropped + 1
    return
  end
  local kind, m = msgs.decode(data)
  if not kind then
    self.stats.bad = self.stats.bad + 1
    return
  end
  self.stats.received = self.stats.received + 1
  local from = { id = nil, host = host, port = port }
  if m.id and m.id == node_id(host, port) then from.id = m.id end
  local external = socket ~= self:socket()

  if kind == "request" then
    m.from = from
    m.socket = socket
    m.io = self
    m.ttl = 0
    setmetatable(m, Incoming)
    if m.token and m.token ~= self:token(host, 1) and m.token ~= self:token(host, 0) then
      m:error(msgs.INVALID_TOKEN, { token = true })
      return
    end
    self.onrequest(m, external)
    return
  end

  local req = self.inflight[m.tid]
  if not req then return end
  m.from = from
  m.rtt = self.env.now() - req.created
  self.inflight[m.tid] = nil
  self.ninflight = self.ninflight - 1
  if req.session then req.session:_detach(req) end
  if req.timer then
    req.timer:cancel()
    req.timer = nil
  end
  req.destroyed = true
  self.congestion:recv()
  self.stats.responses = self.stats.responses + 1
  self.onresponse(m, external)
  req.onresponse(m, req)
end

--- A new request (not sent yet: call req:send()). to = {host, port, id?}.
function IO:create_request(to, token, internal, command, target, value, session, ttl)
  if self.destroyed then return nil end
  -- skip tids still in flight (only possible with 65536 outstanding)
  local tid
  for _ = 1, 65536 do
    if self.tid >= 65536 then self.tid = 0 end
    tid = self.tid
    self.tid = self.tid + 1
    if not self.inflight[tid] then break end
  end
  local req = setmetatable({
    io = self,
    socket = self:socket(),
    tid = tid,
    to = to,
    token = token,
    internal = internal,
    command = command,
    target = target,
    value = value,
    session = session,
    ttl = ttl or 0,
    sent = 0,
    retries = 3,
    timeout = nil,
    destroyed = false,
    created = self.env.now(),
    oncycle = noop,
    onerror = noop,
    onresponse = noop,
  }, Request)
  self.inflight[tid] = req
  self.ninflight = self.ninflight + 1
  if session then session:_attach(req) end
  self.stats.requests = self.stats.requests + 1
  return req
end

function IO:_encode_request(req, token, value, to, socket)
  local id = self.ephemeral == false and socket == self.server_socket
  return msgs.encode_request({
    tid = req.tid,
    to = to,
    id = id and self.table.id or nil,
    token = token,
    internal = req.internal,
    command = req.command,
    target = req.target,
    value = value,
  })
end

function IO:_send_reply(req, err, value, token, closer, to, socket)
  if not socket or self.destroyed then return end
  local id = self.ephemeral == false and socket == self.server_socket
  local closer_nodes = nil
  if req.target and closer then closer_nodes = self.table:closest(req.target) end
  local buf = msgs.encode_response({
    tid = req.tid,
    to = to,
    id = id and self.table.id or nil,
    token = token and self:token(to.host, 1) or nil,
    closer_nodes = closer_nodes,
    error = err,
    value = value,
  })
  socket:send(buf, to.port, to.host, req.ttl)
end

--- Fails every request in flight and closes both sockets.
function IO:destroy()
  if self.destroyed then return end
  self.destroyed = true
  if self.drain_timer then self.drain_timer:cancel() end
  local list = {}
  for _, req in pairs(self.inflight) do list[#list + 1] = req end
  for _, req in ipairs(list) do req:destroy(errors.REQUEST_DESTROYED()) end
  self.pending = {}
  if self.server_socket then self.server_socket:close() end
  if self.client_socket then self.client_socket:close() end
end

---------------------------------------------------------------------------
-- Sessions: a group of requests destroyed together.

local Session = {}
Session.__index = Session

function M.session()
  return setmetatable({ reqs = {}, destroyed = false }, Session)
end

function Session:_attach(req)
  self.reqs[req] = true
end

function Session:_detach(req)
  self.reqs[req] = nil
end

function Session:destroy(err)
  self.destroyed = true
  local list = {}
  for req in pairs(self.reqs) do list[#list + 1] = req end
  for _, req in ipairs(list) do req:destroy(err) end
end

return M
