-- A dht-rpc node (C.1-C.8): routing table upkeep, the core commands (PING,
-- PING_NAT, FIND_NODE, DOWN_HINT, DELAYED_PING), bootstrap, NAT sampling,
-- firewall detection and the ephemeral -> persistent switch.
-- Section marks (C.6, D.8, ...) are those of docs/protocol/hyperswarm.md.
--
-- Callback style over `env` and `transport` (see ludx.dht.io). Application
-- commands go to node.handler(req) -> true when handled (hyperdht sets it).
--
--   local node = rpc.new({ env =, transport =, bootstrap = {"host:port"}, ... })
--   node:on("ready", fn); assert(node:start())
local io_mod = require "ludx.dht.io"
local ktable = require "ludx.dht.table"
local nat_mod = require "ludx.dht.nat"
local query_mod = require "ludx.dht.query"
local msgs = require "ludx.dht.messages"
local compact = require "ludx.compact"
local crypto = require "ludx.dht.crypto"
local errors = require "ludx.dht.errors"

local M = {}

local TICK_INTERVAL = 5000
local SLEEPING_INTERVAL = 3 * TICK_INTERVAL
local STABLE_TICKS = 240
local MORE_STABLE_TICKS = 3 * STABLE_TICKS
local REFRESH_TICKS = 60
local RECENT_NODE = 12
local OLD_NODE = 360
M.DEFAULT_CONCURRENCY = 10
M.MAX_PING_DELAY = 10000
-- DELAYED_PING replies waiting for their timer: in all and per host. Past
-- either, the request is dropped (each one holds a timer and the request).
M.MAX_DELAYED_PINGS = 1024
M.MAX_DELAYED_PINGS_PER_HOST = 8

local node_id = io_mod.node_id
M.node_id = node_id
local function noop() end

--- "host:port", "ip@host:port", a port number or {host=, port=}.
function M.parse_node(s)
  if type(s) == "table" then return { host = s.host, port = s.port } end
  if type(s) == "number" then return { host = "127.0.0.1", port = s } end
  if type(s) ~= "string" then return nil end
  local host, port = s:match("^(.+):(%d+)$")
  port = tonumber(port)
  if not host or not port or port < 1 or port > 65535 then return nil end
  local suggested, name = host:match("^([^@]+)@(.+)$")
  if suggested then return { host = name, suggested = suggested, port = port } end
  return { host = host, port = port }
end

---------------------------------------------------------------------------
-- A time-ordered list of table nodes: latest at the tail.

local List = {}
List.__index = List

local function list()
  return setmetatable({ oldest = nil, latest = nil, length = 0 }, List)
end

function List:has(n)
  return n._list == self
end

function List:remove(n)
  if n._list ~= self then return end
  if n.prev then n.prev.next = n.next else self.oldest = n.next end
  if n.next then n.next.prev = n.prev else self.latest = n.prev end
  n.prev, n.next, n._list = nil, nil, nil
  self.length = self.length - 1
end

function List:add(n)
  if n._list == self then self:remove(n) end
  n._list = self
  n.prev = self.latest
  n.next = nil
  if self.latest then self.latest.next = n else self.oldest = n end
  self.latest = n
  self.length = self.length + 1
end

---------------------------------------------------------------------------

local Node = {}
Node.__index = Node
M.Node = Node

--- opts: env, transport, bootstrap (list; default none), host, port,
-- any_port, ephemeral (nil = adaptive), firewalled, concurrency,
-- max_window, filter_node(node) -> bool, nodes (seed table nodes),
-- quick_firewall, down_hints_limit, max_ping_delay, max_delayed_pings
-- (total) and max_delayed_pings_per_host, max_requests,
-- max_requests_per_source, max_requests_per_prefix and amplification (the
-- flood and reflection caps, see ludx.dht.io).
function M.new(opts)
  local env = assert(opts.env, "opts.env")
  local self = setmetatable({
    env = env,
    bootstrap_nodes = {},
    concurrency = opts.concurrency or M.DEFAULT_CONCURRENCY,
    max_ping_delay = opts.max_ping_delay or M.MAX_PING_DELAY,
    max_delayed_pings = opts.max_delayed_pings or M.MAX_DELAYED_PINGS,
    max_delayed_pings_per_host = opts.max_delayed_pings_per_host or M.MAX_DELAYED_PINGS_PER_HOST,
    _delayed = 0,
    _delayed_hosts = {},
    bootstrapped = false,
    ephemeral = true,
    destroyed = false,
    adaptive = type(opts.ephemeral) ~= "boolean" and opts.adaptive ~= false,
    filter_node = opts.filter_node,
    handler = nil,
    stats = { queries = 0, queries_active = 0 },
    nodes = list(),
    nat = nat_mod.new(),
    events = {},
    down_hints_limit = opts.down_hints_limit or 50,
    down_hints_sent = 0,
    send_down_hints = opts.send_down_hints ~= false,
    _quick_firewall = opts.quick_firewall ~= false,
    _force_persistent = opts.ephemeral == false,
    _repinging = 0,
    _checks = 0,
    _nonpersistent_samples = {},
    _last_host = nil,
  }, Node)
  local function random_offset(n) return n - math.floor(env.random() * 0.5 * n) end
  self.tick = random_offset(100)
  self._refresh_ticks = random_offset(REFRESH_TICKS)
  self._stable_ticks = self.adaptive and STABLE_TICKS or 0

  for _, b in ipairs(opts.bootstrap or {}) do
    local n = M.parse_node(b)
    if not n then error("bad bootstrap node " .. tostring(b) .. " (host:port expected)", 2) end
    self.bootstrap_nodes[#self.bootstrap_nodes + 1] = n
  end
  self.table = ktable.new(env.random_bytes(32))
  self.table.on_full = function(n, row) self:_on_full_row(n, row) end
  self.io = io_mod.new(self.table, {
    env = env,
    transport = opts.transport,
    host = opts.host,
    port = opts.port,
    any_port = opts.any_port,
    firewalled = opts.firewalled,
    max_requests = opts.max_requests,
    max_requests_per_source = opts.max_requests_per_source,
    max_requests_per_prefix = opts.max_requests_per_prefix,
    amplification = opts.amplification,
    max_window = opts.max_window,
    onrequest = function(req, external) self:_on_request(req, external) end,
    onresponse = function(res, external) self:_on_response(res, external) end,
    ontimeout = function(req) self:_on_timeout(req) end,
  })
  self.firewalled = self.io.firewalled
  for i = #(opts.nodes or {}), 1, -1 do self:add_node(opts.nodes[i]) end
  return self
end

-- events ------------------------------------------------------------------

function Node:on(name, fn)
  local l = self.events[name]
  if not l then
    l = {}
    self.events[name] = l
  end
  l[#l + 1] = fn
  return fn
end

function Node:off(name, fn)
  local l = self.events[name]
  if not l then return end
  for i = #l, 1, -1 do
    if l[i] == fn then table.remove(l, i) end
  end
end

function Node:emit(name, ...)
  local l = self.events[name]
  if not l then return false end
  local copy = { unpack(l) }
  for _, fn in ipairs(copy) do fn(...) end
  return #copy > 0
end

-- accessors -----------------------------------------------------------------

function Node:id()
  return (not self.ephemeral) and self.table.id or nil
end

function Node:socket()
  return self.io:socket()
end

function Node:address()
  local s = self:socket()
  if not s then return nil end
  return s:address()
end

--- Our public address when it is known, stable and reachable.
function Node:remote_address()
  local host, port = self.nat.host, self.nat.port
  if not host or port == 0 or self.firewalled or not self.io.server_socket then return nil end
  local _, p = self.io.server_socket:address()
  if p ~= port then return nil end
  return { host = host, port = p }
end

function Node:session()
  return io_mod.session()
end

--- The bootstrap nodes whose address is known (names resolved).
function Node:bootstrap_list()
  local out = {}
  for _, b in ipairs(self.bootstrap_nodes) do
    local host = b.resolved or b.suggested or b.host
    if compact.ip4_bytes(host) then out[#out + 1] = { id = node_id(host, b.port), host = host, port = b.port } end
  end
  return out
end

function Node:add_node(n)
  self:_add_node({ id = node_id(n.host, n.port), host = n.host, port = n.port, sampled = 0, down_hints = 0 })
end

function Node:to_array(limit)
  local out = {}
  local n = self.nodes.latest
  while n and (not limit or #out < limit) do
    out[#out + 1] = { host = n.host, port = n.port }
    n = n.prev
  end
  return out
end

-- lifecycle -----------------------------------------------------------------

--- Binds the sockets and starts the bootstrap; 'ready' fires when done.
function Node:start()
  local ok, err, code = self.io:bind()
  if not ok then return nil, err, code end
  if self._seed_nat then
    local _, port = self.io.server_socket:address()
    self.nat:add(self._seed_nat, port)
  end
  self._last_tick = self.env.now()
  self:_schedule_tick()
  self:emit("listening")
  -- on the next turn, so that callers can subscribe to 'ready' first
  self.env.after(0, function()
    if self.destroyed then return end
    self:_resolve_bootstrap(function() self:_bootstrap() end)
  end)
  return true
end

function Node:_resolve_bootstrap(cb)
  local pending = 1
  local function done()
    pending = pending - 1
    if pending == 0 then cb() end
  end
  for _, b in ipairs(self.bootstrap_nodes) do
    if not compact.ip4_bytes(b.host) and not b.resolved and self.env.resolve then
      pending = pending + 1
      self.env.resolve(b.host, function(ip)
        if ip then b.resolved = ip end
        done()
      end)
    end
  end
  done()
end

function Node:_schedule_tick()
  self._tick_timer = self.env.after(TICK_INTERVAL, function()
    if self.destroyed then return end
    self:_on_tick()
    self:_schedule_tick()
  end)
end

function Node:destroy()
  if self.destroyed then return end
  self.destroyed = true
  if self._tick_timer then self._tick_timer:cancel() end
  for t in pairs(self._pending_timers or {}) do t:cancel() end
  self.io:destroy()
  self:emit("close")
end

-- requests --------------------------------------------------------------------

function Node:_request(to, force, internal, command, target, value, session, onresponse, onerror)
  if internal and not self.send_down_hints and command == msgs.DOWN_HINT then return nil end
  local req = self.io:create_request(to, nil, internal, command, target, value, session)
  if not req then return nil end
  req.onresponse = onresponse or noop
  req.onerror = onerror or noop
  req:send(force)
  return req
end

--- An application request {token, command, target, value} to {host, port}.
-- opts: session, socket, retry=false, retries, ttl, timeout.
function Node:request(m, to, opts, onresponse, onerror)
  opts = opts or {}
  local req = self.io:create_request({ id = nil, host = to.host, port = to.port }, m.token, m.internal == true,
    m.command, m.target, m.value, opts.session, opts.ttl)
  if not req then
    if onerror then onerror(errors.NODE_DESTROYED()) end
    return nil
  end
  if opts.socket then req.socket = opts.socket end
  if opts.retry == false then req.retries = 0 end
  if opts.retries then req.retries = opts.retries end
  if opts.timeout then req.timeout = opts.timeout end
  req.onresponse = onresponse or noop
  req.onerror = onerror or noop
  req:send(false)
  return req
end

function Node:ping(to, opts, onresponse, onerror)
  opts = opts or {}
  local value = nil
  if opts.size and opts.size > 0 then value = string.rep("\0", opts.size) end
  return self:request({ internal = true, command = msgs.PING, value = value }, to, opts, onresponse, onerror)
end

function Node:query(m, opts)
  self._refresh_ticks = REFRESH_TICKS
  return query_mod.new(self, m.target, false, m.command, m.value, opts)
end

function Node:find_node(target, opts)
  self._refresh_ticks = REFRESH_TICKS
  return query_mod.new(self, target, true, msgs.FIND_NODE, nil, opts)
end

function Node:_background_query(target)
  self._refresh_ticks = REFRESH_TICKS
  local bg = math.min(self.concurrency, math.max(2, math.floor(self.concurrency / 8)))
  local q = query_mod.new(self, target, true, msgs.FIND_NODE, nil, { concurrency = bg })
  q.on_data = function()
    q.concurrency = self.io.ninflight < 3 and self.concurrency or bg
  end
  return q
end

function Node:refresh()
  local n = self.table:random(self.env.random)
  local q = self:_background_query(n and n.id or self.table.id)
  q:start()
end

-- bootstrap ---------------------------------------------------------------

function Node:_bootstrap()
  local first = self.firewalled and self._quick_firewall and not self._force_persistent
  local test_nat = false
  local only_firewall = not self._force_persistent
  local i = 0

  local function finish()
    if self.bootstrapped or self.destroyed then return end
    self.bootstrapped = true
    self:emit("ready")
  end

  local function ondata(data)
    if not first then return end
    first = false
    local w = compact.writer()
    local _, port = self.io.server_socket:address()
    w:uint16(port)
    self:_request(data.from, false, true, msgs.PING_NAT, nil, w:finish(), nil, function() test_nat = true end, noop)
  end

  local step
  step = function()
    i = i + 1
    local q = self:_background_query(self.table.id)
    local prev = q.on_data
    q.on_data = function(data)
      prev(data)
      ondata(data)
    end
    q.on_end = function()
      if self.destroyed then return end
      if self.bootstrapped or (not test_nat and not self._force_persistent) then return finish() end
      self:_update_network_state(only_firewall, function(ok)
        if ok and i < 2 and not self.bootstrapped then step() else finish() end
      end)
    end
    q:start()
  end
  step()
end

-- NAT and persistence ---------------------------------------------------------

function Node:_nat_add(host, port)
  local ph, pp = self.nat.host, self.nat.port
  self.nat:add(host, port)
  if ph == self.nat.host and pp == self.nat.port then return end
  self:emit("nat-update", self.nat.host, self.nat.port)
end

function Node:_sample_bootstrap_maybe(from, to)
  local s = self._nonpersistent_samples
  if #s >= math.max(1, #self.bootstrap_nodes) then return end
  local key = from.host .. ":" .. from.port
  for _, v in ipairs(s) do
    if v == key then return end
  end
  s[#s + 1] = key
  self:_nat_add(to.host, to.port)
end

function Node:_add_node_from_network(sample, from, to)
  if self.filter_node and not self.filter_node(from) then return end
  if not from.id then
    self:_sample_bootstrap_maybe(from, to)
    return
  end
  local old = self.table:get(from.id)
  if old then
    if sample and (old.sampled == 0 or self.tick - old.sampled >= OLD_NODE) then
      old.sampled = self.tick
      self:_nat_add(to.host, to.port)
    end
    old.pinged, old.seen = self.tick, self.tick
    self.nodes:add(old)
    return
  end
  self:_add_node({ id = from.id, host = from.host, port = from.port, to = to, sampled = 0, down_hints = 0 })
end

function Node:_add_node(n)
  if self.nodes:has(n) or n.id == self.table.id then return end
  n.added, n.pinged, n.seen = self.tick, self.tick, self.tick
  if not self.table:add(n) then return end
  self.nodes:add(n)
  if n.to and n.sampled == 0 then
    n.sampled = self.tick
    self:_nat_add(n.to.host, n.to.port)
  end
  n.to = nil -- only needed for that first sample
  self:emit("add-node", n)
end

function Node:_remove_node(n)
  if not self.nodes:has(n) then return end
  self.table:remove(n.id)
  self.nodes:remove(n)
  self:emit("remove-node", n)
end

function Node:_on_full_row(new, row)
  if not self.bootstrapped or self._repinging >= 3 then return end
  local oldest = nil
  for _, n in ipairs(row.nodes) do
    if n.pinged ~= self.tick then
      if not oldest or oldest.pinged > n.pinged or (oldest.pinged == n.pinged and oldest.added > n.added) then oldest = n end
    end
  end
  if not oldest then return end
  if self.tick - oldest.pinged < RECENT_NODE and self.tick - oldest.added > OLD_NODE then return end
  -- re-ping the oldest and swap it out if it fails
  local last_seen = oldest.seen
  oldest.pinged = self.tick
  self._repinging = self._repinging + 1
  local function swap()
    self._repinging = self._repinging - 1
    self:_remove_node(oldest)
    self:_add_node(new)
  end
  self:_request({ host = oldest.host, port = oldest.port }, false, true, msgs.PING, nil, nil, nil, function()
    if oldest.seen <= last_seen then return swap() end
    self._repinging = self._repinging - 1
  end, swap)
end

--- Checks the NAT and the firewall; cb(true) when the node changed state
-- (no longer firewalled, or now persistent).
function Node:_update_network_state(only_firewall, cb)
  if not self.ephemeral then return cb(false) end
  if only_firewall and not self.firewalled then return cb(false) end
  local host, port = self.nat.host, self.nat.port
  if not only_firewall then
    self._stable_ticks = MORE_STABLE_TICKS
    self._last_host = host
  end
  if not host or port == 0 then return cb(false) end
  local sampler = self.firewalled and nat_mod.new() or self.nat

  local function continue()
    self.firewalled = false
    self.io.firewalled = false
    if not self.ephemeral or host ~= self.nat.host or port ~= self.nat.port then return cb(false) end
    if sampler.host ~= host or sampler.port == 0 then return cb(false) end
    local id = node_id(sampler.host, sampler.port)
    if not only_firewall then
      self.ephemeral = false
      self.io.ephemeral = false
    end
    if sampler ~= self.nat then
      local ph, pp = self.nat.host, self.nat.port
      self._nonpersistent_samples = {}
      self.nat = sampler
      if ph ~= sampler.host or pp ~= sampler.port then self:emit("nat-update", sampler.host, sampler.port) end
    end
    if self.table.id ~= id then self:_reid(id) end
    if not self.ephemeral then self:emit("persistent") end
    cb(true)
  end

  if self.firewalled then
    self:_check_if_firewalled(sampler, function(fw)
      if self.destroyed or fw then return cb(false) end
      continue()
    end)
  else
    continue()
  end
end

function Node:_reid(id)
  local nodes = self.table:to_array()
  local t = ktable.new(id, { k = self.table.k })
  t.on_full = self.table.on_full
  self.table = t
  self.io.table = t
  for _, n in ipairs(nodes) do
    if n.id ~= id and not t:add(n) then self.nodes:remove(n) end
  end
  if self.bootstrapped then self:refresh() end
end

--- Asks up to 5 nodes to PING_NAT our server socket; cb(true) when we
-- look firewalled.
function Node:_check_if_firewalled(sampler, cb)
  local nodes = {}
  local n = self.nodes.latest
  while n and #nodes < 5 do
    nodes[#nodes + 1] = n
    n = n.prev
  end
  if #nodes < 5 then
    for _, b in ipairs(self:bootstrap_list()) do nodes[#nodes + 1] = b end
  end
  if #nodes == 0 then return cb(true) end
  local hosts = {}
  local server = self.io.server_socket
  local _, server_port = server:address()
  -- note the hosts whose datagrams really arrive on the server socket
  local prev = server.onmessage
  server.onmessage = function(data, host, port)
    hosts[host] = true
    prev(data, host, port)
  end
  local w = compact.writer()
  w:uint16(server_port)
  local value = w:finish()
  local missing = #nodes
  local replies = {}
  local function settle()
    missing = missing - 1
    if missing > 0 then return end
    server.onmessage = prev
    local count = 0
    for _, res in ipairs(replies) do
      if hosts[res.from.host] then
        count = count + 1
        sampler:add(res.to.host, res.to.port)
      end
    end
    if count < (#nodes >= 5 and 3 or 1) then return cb(true) end
    if not sampler.host or self.nat.host ~= sampler.host then return cb(true) end
    if sampler.port == 0 or sampler.port ~= server_port then return cb(true) end
    cb(false)
  end
  for _, node in ipairs(nodes) do
    local req = self:_request({ host = node.host, port = node.port }, false, true, msgs.PING_NAT, nil, value, nil,
      function(res)
        replies[#replies + 1] = res
        settle()
      end, settle)
    if not req then
      server.onmessage = prev
      return cb(true)
    end
  end
end

-- serving -------------------------------------------------------------------------

function Node:_on_request(req, external)
  if req.from.id then self:_add_node_from_network(not external, req.from, req.to) end
  if req.internal then
    local c = req.command
    if c == msgs.PING then
      return req:send_reply(0, nil, false, false)
    elseif c == msgs.DELAYED_PING then
      return self:_on_delayed_ping(req)
    elseif c == msgs.PING_NAT then
      if not req.value or #req.value < 2 then return end
      local port = req.value:byte(1) + req.value:byte(2) * 256
      if port == 0 then return end
      req.from = { id = req.from.id, host = req.from.host, port = port }
      return req:send_reply(0, nil, false, false)
    elseif c == msgs.FIND_NODE then
      if not req.target then return end
      return req:send_reply(0, nil, false, true)
    elseif c == msgs.DOWN_HINT then
      if not req.value or #req.value < 6 then return end
      if self._checks < 10 then
        local n = self.table:get(crypto.hash(req.value:sub(1, 6)))
        if n and (n.pinged < self.tick or n.down_hints == 0) then
          n.down_hints = n.down_hints + 1
          self:_check(n)
        end
      end
      return req:send_reply(0, nil, false, false)
    end
    return req:send_reply(msgs.UNKNOWN_COMMAND, nil, false, req.target ~= nil)
  end
  if not (self.handler and self.handler(req)) then
    req:send_reply(msgs.UNKNOWN_COMMAND, nil, false, req.target ~= nil)
  end
end

function Node:_on_delayed_ping(req)
  if not req.value or #req.value < 4 then return end
  local r = compact.reader(req.value)
  local delay = r:uint32()
  if delay > self.max_ping_delay then return end
  local host = req.from.host
  local per_host = self._delayed_hosts[host] or 0
  if self._delayed >= self.max_delayed_pings or per_host >= self.max_delayed_pings_per_host then return end
  self._delayed = self._delayed + 1
  self._delayed_hosts[host] = per_host + 1
  self._pending_timers = self._pending_timers or {}
  local t
  t = self.env.after(delay, function()
    self._pending_timers[t] = nil
    self._delayed = self._delayed - 1
    local n = self._delayed_hosts[host] - 1
    self._delayed_hosts[host] = n > 0 and n or nil
    if self.destroyed then return end
    req:send_reply(0, nil, false, false)
  end)
  self._pending_timers[t] = true
end

function Node:_on_response(res, external)
  self:_add_node_from_network(not external, res.from, res.to)
end

function Node:_on_timeout(req)
  if not req.to.id then return end
  local n = self.table:get(req.to.id)
  if n then self:_remove_node(n) end
end

-- maintenance -----------------------------------------------------------------

function Node:_check(n)
  n.pinged = self.tick
  local last_seen = n.seen
  self._checks = self._checks + 1
  self:_request({ host = n.host, port = n.port }, false, true, msgs.PING, nil, nil, nil, function()
    self._checks = self._checks - 1
    if n.seen <= last_seen then self:_remove_node(n) end
  end, function()
    self._checks = self._checks - 1
    self:_remove_node(n)
  end)
end

function Node:_ping_some()
  local cnt = self.io.ninflight > 2 and 3 or 5
  local oldest = self.nodes.oldest
  if not oldest then
    self:refresh()
    return
  end
  if self.tick - oldest.pinged < RECENT_NODE then cnt = 2 end
  while cnt > 0 do
    cnt = cnt - 1
    if oldest and self.tick ~= oldest.pinged then
      local nxt = oldest.next
      self:_check(oldest)
      oldest = nxt
    end
  end
end

function Node:_on_wakeup()
  self.tick = self.tick + 2 * OLD_NODE
  self.tick = self.tick + 8 - (self.tick % 8) - 2
  self._stable_ticks = MORE_STABLE_TICKS
  self._refresh_ticks = 1
  self._last_host = nil
  if self.adaptive and not self.ephemeral then
    self.ephemeral = true
    self.io.ephemeral = true
    self:emit("ephemeral")
  end
  self:emit("wakeup")
end

function Node:_on_tick()
  local now = self.env.now()
  if now - self._last_tick > SLEEPING_INTERVAL then
    self:_on_wakeup()
  else
    self.tick = self.tick + 1
  end
  self._last_tick = now
  if not self.bootstrapped then return end
  if self.adaptive and self.ephemeral then
    self._stable_ticks = self._stable_ticks - 1
    if self._stable_ticks <= 0 then
      if self._last_host == self.nat.host then
        self._stable_ticks = MORE_STABLE_TICKS
      else
        self:_update_network_state(false, noop)
      end
    end
  end
  if self.tick % 8 == 0 then self:_ping_some() end
  self._refresh_ticks = self._refresh_ticks - 1
  if (self.tick % 64 == 0 and self.nodes.length < self.table.k) or self._refresh_ticks <= 0 then self:refresh() end
  self.down_hints_sent = 0
end

--- A node that is persistent at once on host:port (DHT.bootstrapper).
function M.bootstrapper(opts)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.ephemeral = false
  o.firewalled = false
  o.any_port = false
  o.bootstrap = o.bootstrap or {}
  local node = M.new(o)
  node._seed_nat = opts.host -- sampled with the bound port in start()
  return node
end

return M
