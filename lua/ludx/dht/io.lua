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
M.MAX_REQUESTS = 10000
M.MAX_REQUESTS_PER_SOURCE = 200
-- ... and from one address prefix (IPv4 /24, IPv6 /48): spreading a flood
-- over many ports or hosts of one network does not multiply the cap.
M.MAX_REQUESTS_PER_PREFIX = 2000
-- A prefix that sent at most this many requests this second is served even
-- when max_requests is reached (see IO:_flooded).
M.QUIET_PREFIX = 50
-- Requests that cost more than a lookup (stores, announces: a signature
-- check or a write) get at most this share of max_requests, so pings and
-- lookups are answered first under a flood.
M.HEAVY_SHARE = 0.5
-- Amplification guard: to a host that has not proven it receives (it
-- answered one of our requests, or sent a valid token) a node sends at
-- most AMPLIFICATION x the bytes it got from that host in the last ~2 s.
M.AMPLIFICATION = 3
M.MAX_TRACKED_HOSTS = 4096 -- per 1 s slot of byte accounting
M.MAX_VERIFIED_HOSTS = 8192 -- per generation (2 generations, 5 min each)
M.VERIFIED_AGE = 5 * 60 * 1000
M.MAX_PROBES = 64 -- verification pings in flight
-- Responses with a wrong tid from a host while it is probed: past this many
-- the probe proves nothing (an off-path spoofer can try all 65,536 tids in
-- the victim's name; a real host sends at most a few late answers).
M.PROBE_MAX_MISSES = 16
local EMPTY = {}
local floor = math.floor

--- nodeId = H32(ipv4Address(host, port)).
function M.node_id(host, port)
  local b = compact.ip4_bytes(host)
  if not b then return nil end
  return crypto.hash(b .. string.char(port % 256, math.floor(port / 256)))
end
local node_id = M.node_id

--- The network prefix of a host: IPv4 /24, IPv6 /48 (as a string key);
-- n_groups: IPv6 16-bit groups kept (default 3; 4 for a /64).
function M.prefix(host, n_groups)
  local v4 = host:match("^(%d+%.%d+%.%d+)%.%d+$") or host:match("^::[fF][fF][fF][fF]:(%d+%.%d+%.%d+)%.%d+$")
  if v4 then return v4 end
  if not host:find(":", 1, true) then return host end
  local head, tail = host:match("^(.-)::(.*)$")
  local groups = {}
  for g in ((head or host) .. ":"):gmatch("([^:]*):") do groups[#groups + 1] = g end
  if head then
    local n = 0
    for _ in (tail .. ":"):gmatch("([^:]*):") do n = n + 1 end
    if tail == "" then n = 0 end
    if head == "" then groups = {} end
    for _ = #groups + 1, 8 - n do groups[#groups + 1] = "0" end
  end
  local out = {}
  for i = 1, n_groups or 3 do out[i] = (groups[i] or "0"):lower() end
  return table.concat(out, ":")
end
local prefix_of = M.prefix

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
    stats = { sent = 0, received = 0, bad = 0, timeouts = 0, retries = 0, requests = 0, responses = 0, flood_dropped = 0,
      amp_trimmed = 0, amp_dropped = 0, probes = 0, probe_spoofed = 0 },
    max_requests = opts.max_requests or M.MAX_REQUESTS,
    max_requests_per_source = opts.max_requests_per_source or M.MAX_REQUESTS_PER_SOURCE,
    flood_window = -1, -- the second the counters below belong to
    flood_total = 0,
    flood_sources = {},
    flood_prefixes = {},
    flood_heavy = 0,
    max_requests_per_prefix = opts.max_requests_per_prefix or M.MAX_REQUESTS_PER_PREFIX,
    amplification = opts.amplification or M.AMPLIFICATION,
    max_tracked_hosts = opts.max_tracked_hosts or M.MAX_TRACKED_HOSTS,
    max_verified_hosts = opts.max_verified_hosts or M.MAX_VERIFIED_HOSTS,
    amp_slot = -1, -- the second amp_cur belongs to
    amp_cur = {}, -- host -> {rx =, tx =} bytes this second
    amp_prev = {}, -- ... and the second before
    amp_n = 0,
    verified_cur = {}, -- host -> true: proven to receive
    verified_prev = {},
    verified_n = 0,
    verified_since = env.now(),
    probes = {}, -- host -> true: a verification ping in flight
    nprobes = 0,
    probe_queue = { head = 1, tail = 0 }, -- the probes, oldest first
    max_probes = opts.max_probes or M.MAX_PROBES,
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

-- Request-flood cap: incoming requests are counted per second, in all,
-- per address prefix and per source (host:port), before they are decoded;
-- beyond any cap they are dropped (and counted), so a flood costs a table
-- lookup each and can neither monopolise the loop nor grow memory (the
-- tables hold at most max_requests entries each and are dropped every
-- second).
function IO:_flooded(host, port)
  local window = floor(self.env.now() / 1000)
  if window ~= self.flood_window then
    self.flood_window = window
    self.flood_total = 0
    self.flood_heavy = 0
    self.flood_sources = {}
    self.flood_prefixes = {}
  end
  -- past max_requests, a prefix that sent under QUIET_PREFIX this second
  -- is still served (up to 2 x max_requests): a flood from other networks
  -- cannot starve a client that sends a few requests
  if self.flood_total >= 2 * self.max_requests then return true end
  local prefix = prefix_of(host)
  local np = (self.flood_prefixes[prefix] or 0) + 1
  if self.flood_total >= self.max_requests and np > M.QUIET_PREFIX then return true end
  if np > self.max_requests_per_prefix then return true end
  local key = host .. ":" .. port
  local n = (self.flood_sources[key] or 0) + 1
  if n > self.max_requests_per_source then return true end
  self.flood_sources[key] = n
  self.flood_prefixes[prefix] = np
  self.flood_total = self.flood_total + 1
  return false
end

-- Internal commands and the read-only hyperdht queries (FIND_PEER 2,
-- LOOKUP 3, MUTABLE_GET 7, IMMUTABLE_GET 9) are light; the rest (stores,
-- announces, handshakes) share M.HEAVY_SHARE of the cap.
local LIGHT = { [2] = true, [3] = true, [7] = true, [9] = true }
function IO:_heavy_flooded(m)
  if m.internal or LIGHT[m.command] then return false end
  if self.flood_heavy >= self.max_requests * M.HEAVY_SHARE then return true end
  self.flood_heavy = self.flood_heavy + 1
  return false
end

---------------------------------------------------------------------------
-- Amplification guard (see M.AMPLIFICATION).

function IO:_amp_slot()
  local slot = floor(self.env.now() / 1000)
  if slot ~= self.amp_slot then
    self.amp_prev = slot == self.amp_slot + 1 and self.amp_cur or {}
    self.amp_cur = {}
    self.amp_n = 0
    self.amp_slot = slot
  end
end

-- Counts bytes from host (bounded: past max_tracked_hosts hosts a second,
-- a host is judged on the request alone).
function IO:_amp_rx(host, n)
  self:_amp_slot()
  local e = self.amp_cur[host]
  if not e then
    if self.amp_n >= self.max_tracked_hosts then return end
    e = { rx = 0, tx = 0 }
    self.amp_cur[host] = e
    self.amp_n = self.amp_n + 1
  end
  e.rx = e.rx + n
end

function IO:_amp_budget(host, req_size)
  self:_amp_slot()
  local c, p = self.amp_cur[host], self.amp_prev[host]
  if not c and not p then return self.amplification * req_size end
  local rx = (c and c.rx or 0) + (p and p.rx or 0)
  local tx = (c and c.tx or 0) + (p and p.tx or 0)
  return self.amplification * rx - tx
end

function IO:_amp_tx(host, n)
  local e = self.amp_cur[host]
  if e then e.tx = e.tx + n end
end

function IO:is_verified(host)
  return self.verified_cur[host] ~= nil or self.verified_prev[host] ~= nil
end

--- Notes that host proved it receives what we send (bounded, expiring).
function IO:verify(host)
  local now = self.env.now()
  if now - self.verified_since >= M.VERIFIED_AGE or self.verified_n >= self.max_verified_hosts then
    self.verified_prev = self.verified_cur
    self.verified_cur = {}
    self.verified_n = 0
    self.verified_since = now
  end
  if self.verified_cur[host] then return end
  self.verified_cur[host] = true
  self.verified_n = self.verified_n + 1
end

-- A PING to host:port: an answer verifies the host, so that its next try
-- (requests are retried) gets the full reply. One per host, at most
-- max_probes at once, the oldest giving way to a new one (hosts that never
-- answer cannot hold every slot); a PING is no larger than any request.
-- Returns the bytes sent (counted against the host's budget), or nil.
function IO:_probe(host, port, socket)
  if self.probes[host] then return nil end
  local q = self.probe_queue
  while q.head <= q.tail and (q[q.head].destroyed or self.nprobes >= self.max_probes) do
    local old = q[q.head]
    q[q.head] = nil
    q.head = q.head + 1
    if not old.destroyed then old:destroy() end
  end
  if self.nprobes >= self.max_probes then return nil end
  local req = self:create_request({ host = host, port = port }, nil, true, msgs.PING)
  if not req then return end
  -- from the socket the request came to (NATs let that through), no id
  req.socket = socket
  req.anonymous = true
  -- a random tid: a spoofer who knows our tid sequence must not be able
  -- to answer in the victim's name
  for _ = 1, 8 do
    local tid = floor(self.env.random() * 65536)
    if not self.inflight[tid] then
      self.inflight[req.tid] = nil
      req.tid = tid
      self.inflight[tid] = req
      break
    end
  end
  self.probes[host] = req
  req.misses = 0
  self.nprobes = self.nprobes + 1
  self.stats.probes = self.stats.probes + 1
  req.retries = 0
  req.probe = true
  local function done()
    if self.probes[host] then
      self.probes[host] = nil
      self.nprobes = self.nprobes - 1
    end
  end
  req.onresponse = done
  req.onerror = done
  q.tail = q.tail + 1
  q[q.tail] = req
  req:send(true)
  local n = req.buffer and #req.buffer or 0
  self:_amp_tx(host, n)
  return n
end

-- A response from host that answers none of our requests to it: while host
-- is probed, count it against the probe.
function IO:_probe_miss(host)
  local probe = self.probes[host]
  if probe then
    probe.misses = probe.misses + 1
    if probe.misses == M.PROBE_MAX_MISSES + 1 then self.stats.probe_spoofed = self.stats.probe_spoofed + 1 end
  end
end

function IO:onmessage(socket, data, host, port)
  if self.destroyed or #data < 2 or not (port > 0 and port < 65536) then return end
  local first = data:byte(1)
  if first ~= msgs.REQUEST_ID and first ~= msgs.RESPONSE_ID then return end
  if first == msgs.REQUEST_ID and self:_flooded(host, port) then
    self.stats.flood_dropped = self.stats.flood_dropped + 1
    return
  end
  -- a response to no request of ours is dropped before it is decoded
  -- (flags in one byte, as every encoder writes them, then the tid)
  if first == msgs.RESPONSE_ID and #data >= 4 and data:byte(2) < 0x80 and not self.inflight[data:byte(3) + data:byte(4) * 256] then
    self.stats.bad = self.stats.bad + 1
    self:_probe_miss(host)
    return
  end
  local kind, m = msgs.decode(data)
  if not kind then
    self.stats.bad = self.stats.bad + 1
    return
  end
  if kind == "request" then
    if self:_heavy_flooded(m) then
      self.stats.flood_dropped = self.stats.flood_dropped + 1
      return
    end
    self:_amp_rx(host, #data)
    m.size = #data
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
    if m.token then self:verify(host) end
    self.onrequest(m, external)
    return
  end

  local req = self.inflight[m.tid]
  if not req then
    self:_probe_miss(host)
    return
  end
  if req.to.host ~= host then
    self:_probe_miss(host)
  elseif not (req.probe and req.misses > M.PROBE_MAX_MISSES) then
    self:verify(host)
  end
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
  -- a probe's answer only verifies its host (no NAT sample, no table add)
  if not req.probe then self.onresponse(m, external) end
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
  local id = self.ephemeral == false and socket == self.server_socket and not req.anonymous
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
  local m = {
    tid = req.tid,
    to = to,
    id = id and self.table.id or nil,
    token = token and self:token(to.host, 1) or nil,
    closer_nodes = closer_nodes,
    error = err,
    value = value,
  }
  local buf = msgs.encode_response(m)
  -- replies to the requester's host are guarded (relays name other
  -- addresses: the router checks those)
  if req.size and to.host == req.from.host and not self:is_verified(to.host) then
    local budget = self:_amp_budget(to.host, req.size)
    if #buf > budget then
      -- the probe counts against the same budget
      local probe = self:_probe(to.host, to.port, socket)
      if probe then budget = budget - probe end
      buf = self:_fit(m, buf, budget)
      if not buf then return end
    end
    self:_amp_tx(to.host, #buf)
  end
  socket:send(buf, to.port, to.host, req.ttl)
end

-- The reply cut to budget bytes: fewer closer nodes, then no id; one
-- with a value (or nothing left to cut) is not sent at all (nil): the
-- requester retries and by then has answered our probe. Nor is a query
-- reply cut down to no closer nodes (issue 13): a requester takes it as
-- the final answer, and a bootstrap through it learns no node at all.
function IO:_fit(m, buf, budget)
  if #buf <= budget then return buf end
  local closer = m.closer_nodes
  if closer and #closer > 0 then
    local keep = #closer - math.ceil((#buf - budget) / 6)
    if keep < 1 and m.id and m.value == nil then
      -- the id goes first when that leaves room for closer nodes
      m.id = nil
      buf = msgs.encode_response(m)
      keep = math.min(#closer, #closer - math.ceil((#buf - budget) / 6))
    end
    if keep < 1 then
      self.stats.amp_dropped = self.stats.amp_dropped + 1
      return nil
    end
    local cut = {}
    for i = 1, keep do cut[i] = closer[i] end
    m.closer_nodes = cut
    buf = msgs.encode_response(m)
  end
  if #buf > budget and m.value == nil and m.id then
    m.id = nil
    buf = msgs.encode_response(m)
  end
  if #buf > budget then
    self.stats.amp_dropped = self.stats.amp_dropped + 1
    return nil
  end
  self.stats.amp_trimmed = self.stats.amp_trimmed + 1
  return buf
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
