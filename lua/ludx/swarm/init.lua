-- ludx.swarm: meet peers on topics, as npm hyperswarm 4.x does, over
-- ludx.dht. One connection per remote key (the duplicate rule, in
-- ludx.swarm.connections, agrees with hyperswarm's: a ludx and a Node peer
-- that dial each other at once keep the same one), reconnects with backoff
-- to peers still on a joined topic, caps on connections and on what a DHT
-- can make us remember.
--
--   local swarm = require "ludx.swarm"
--   local sw = assert(swarm.new({ bootstrap = { "127.0.0.1:49737" } }))
--   sw:on_connection(function(conn, info) ... end)   -- a task per connection
--   local d = sw:join(topic, { server = true, client = true })
--   d:flushed()  sw:flush()  sw:leave(topic)  sw:close()
local ludx = require "ludx"
local dht = require "ludx.dht"
local check = require "ludx.check"
local peer_mod = require "ludx.swarm.peer"
local discovery = require "ludx.swarm.discovery"
local conns = require "ludx.swarm.connections"

local M = {}

M.MAX_PEERS = 64                -- hyperswarm's maxPeers: bounds connections
M.MAX_PARALLEL = 3              -- client connection attempts at once
M.MAX_CLIENT_CONNECTIONS = math.huge
M.MAX_SERVER_CONNECTIONS = 256  -- accepted connections (hyperswarm: unbounded)
M.MAX_PEER_TABLE = 1024         -- discovered peers remembered (hyperswarm: unbounded)
M.CONNECT_TIMEOUT = 30000
M.FINISH_TIMEOUT = 10000
M.REFRESH_INTERVAL = 10 * 60 * 1000
M.REFRESH_JITTER = 2 * 60 * 1000

local SWARM_KEYS = {
  dht = true, keypair = true, seed = true, firewall = true, max_peers = true, max_parallel = true,
  max_client_connections = true, max_server_connections = true, max_peer_table = true, backoffs = true,
  jitter = true, connect_timeout = true, finish_timeout = true, refresh_interval = true, refresh_jitter = true,
  random = true,
}

local DESTROYED = { "swarm destroyed", "SWARM_DESTROYED" }
local CLOSED = { "swarm closed", "SWARM_CLOSED" }

-- The swarm's own end, for every call and waiter once close or destroy
-- began (issue 14: waiters get the swarm's code, not a layer's below).
local function ended(self)
  local e = self.end_err or DESTROYED
  return nil, e[1], e[2]
end

M._key_greater = conns.key_greater

local Swarm = {}
Swarm.__index = Swarm
-- the peer table and the connections (ludx.swarm.connections)
for k, v in pairs(conns.methods) do Swarm[k] = v end
Swarm.__tostring = function(s)
  local n = 0
  for _ in pairs(s.connections) do n = n + 1 end
  local k = s.keypair.public_key:sub(1, 4):gsub(".", function(c) return string.format("%02x", c:byte()) end)
  return string.format("<swarm key %s..., %s, %d connections, %d peers>", k,
    s.destroyed and "destroyed" or "open", n, s.n_peers)
end

--- A swarm. opts: dht (a ludx.dht node to use; else one is made from the
-- other options, which pass through to dht.new), keypair (or seed), firewall(
-- remote_public_key, payload) -> true refuses, and the caps (see M.*).
function M.new(opts)
  opts = check.table(opts, "opts", "swarm.new", true)
  if opts.keypair ~= nil then dht._check_keypair(opts.keypair, "opts.keypair", "swarm.new") end
  check.bytes(opts.seed, 32, "opts.seed", "swarm.new", true)
  check.func(opts.firewall, "opts.firewall", "swarm.new", true)
  local backoffs = opts.backoffs or peer_mod.BACKOFFS
  if type(backoffs) ~= "table" or #backoffs ~= 4 then check.fail("opts.backoffs", "swarm.new", "list of 4 ms", check.what(backoffs)) end
  -- the caps, checked before a DHT node is made (a wrong one leaks nothing)
  local function count(name, default) return check.opt_number(opts, name, "swarm.new", default, 0, true) end
  local caps = {
    max_peers = count("max_peers", M.MAX_PEERS),
    max_parallel = count("max_parallel", M.MAX_PARALLEL),
    max_client_connections = count("max_client_connections", M.MAX_CLIENT_CONNECTIONS),
    max_server_connections = count("max_server_connections", M.MAX_SERVER_CONNECTIONS),
    max_peer_table = count("max_peer_table", M.MAX_PEER_TABLE),
    connect_timeout = count("connect_timeout", M.CONNECT_TIMEOUT),
    finish_timeout = count("finish_timeout", M.FINISH_TIMEOUT),
    refresh_interval = count("refresh_interval", M.REFRESH_INTERVAL),
    refresh_jitter = count("refresh_jitter", M.REFRESH_JITTER),
    jitter = count("jitter", peer_mod.JITTER),
  }
  if not ludx.running() then error("swarm.new must be called inside ludx.run", 2) end
  local node, owns = opts.dht, false
  if node == nil then
    local o = {}
    for k, v in pairs(opts) do
      if not SWARM_KEYS[k] then o[k] = v end
    end
    local msg, code
    node, msg, code = dht._new(o, "swarm.new")
    if not node then return nil, msg, code end
    owns = true
  elseif type(node) ~= "table" or getmetatable(node) ~= dht.Node then
    check.fail("opts.dht", "swarm.new", "ludx.dht node", type(node))
  end
  local self = setmetatable({
    dht = node,
    owns_dht = owns,
    keypair = opts.keypair or dht.keypair(opts.seed),
    connections = {},   -- remote public key -> open connection (the live view)
    peers = {},         -- public key -> peer info
    n_peers = 0,
    all = {},           -- remote public key -> entry (open or dialing)
    lingering = {},     -- entry -> its udx stream, closed, waiting for the peer's END
    explicit = {},      -- public key -> peer (join_peer)
    n_explicit = 0,
    discoveries = {},   -- topic -> discovery
    leaving = {},       -- topic -> discovery unannouncing (a rejoin waits for it)
    queue = peer_mod.queue(opts.random),
    connecting = 0,
    client_connections = 0,
    server_connections = 0,
    firewall = opts.firewall,
    backoffs = backoffs,
    random = function(n)
      if n then return math.random(n) end
      return math.random()
    end,
    progress = ludx.waiters(),      -- woken whenever an attempt ends or a queued peer leaves the queue
    listen_waiters = ludx.waiters(),
    listen_state = nil,             -- nil, "running", "done"
    counters = { attempted = 0, client_opened = 0, client_closed = 0, server_opened = 0, server_closed = 0,
      duplicates = 0, banned = 0, peers_dropped = 0, server_refused = 0, bans_forgotten = 0 },
    bans = { head = 1, tail = 0 },  -- banned peers, oldest first
    destroyed = false,
  }, Swarm)
  for k, v in pairs(caps) do self[k] = v end
  if opts.random then self.random = opts.random end
  self.server = node:server(function(conn) return self:_on_server_connection(conn) end, {
    firewall = function(remote_public_key, payload) return self:_firewalled(remote_public_key, payload, true) end,
  })
  ludx.track(self)
  return self
end

---------------------------------------------------------------------------
-- The API.

--- Sets the function that runs, in a task of its own, for each new
-- connection: fn(conn, info). The connection closes when fn returns.
function Swarm:on_connection(fn)
  check.func(fn, "fn", "on_connection")
  self.handler = fn
  return self
end

--- Announces the swarm key (so joined peers can connect to us); true once
-- the first announce round is done.
function Swarm:listen(timeout)
  timeout = check.timeout(timeout, "listen")
  local deadline = check.deadline(timeout)
  while true do
    if self.destroyed or self.closing then return ended(self) end
    if self.listen_state == "done" then return true end
    if self.listen_state == nil then break end
    local ok, msg, code = self.listen_waiters:wait("swarm listen", check.left(deadline), "listen")
    if ok == nil and code then return nil, msg, code end
  end
  self.listen_state = "running"
  local ok, msg, code = self.server:listen(self.keypair, timeout)
  if ok or code == "ALREADY_LISTENING" then
    self.listen_state = "done"
    ok = true
  else
    self.listen_state = nil
  end
  self.listen_waiters:wake_all(true)
  -- a close or destroy during the announce (the server answers SERVER_CLOSED)
  if self.destroyed or self.closing then return ended(self) end
  if not ok then return nil, msg, code end
  return true
end

--- Joins a topic (32 bytes): opts.server (announce, default true),
-- opts.client (look up and connect, default true), opts.limit. Returns a
-- session at once: session:flushed() waits for the first round.
function Swarm:join(topic, opts)
  check.string(topic, "topic", "join")
  opts = check.table(opts, "opts", "join", true)
  if #topic ~= 32 then return nil, "invalid topic", "EINVAL" end
  if self.destroyed or self.closing then return ended(self) end
  local server, client = opts.server, opts.client
  if server == nil then server = true end
  if client == nil then client = true end
  if not server and not client then error("bad argument 'opts' to 'join' (client or server must be true)", 2) end
  local d = self.discoveries[topic]
  if not d or d.destroyed then
    d = discovery.new(self, topic)
    d.wait_for = self.leaving[topic]
    self.discoveries[topic] = d
  end
  return discovery.session(d, { server = server, client = client, limit = opts.limit })
end

--- Leaves a topic: no more lookups, and our announcement is removed from
-- the closest nodes (waits up to timeout ms, default 10 s). Connections stay.
function Swarm:leave(topic, timeout)
  check.string(topic, "topic", "leave")
  timeout = check.timeout(timeout, "leave")
  local d = self.discoveries[topic]
  if not d then return true end
  self.discoveries[topic] = nil
  self.leaving[topic] = d
  local ok, msg, code = d:destroy(true, timeout)
  if self.leaving[topic] == d then self.leaving[topic] = nil end
  return ok, msg, code
end

--- Keeps a connection to public_key (reconnecting with backoff) until
-- leave_peer.
function Swarm:join_peer(public_key)
  check.bytes(public_key, 32, "public_key", "join_peer")
  if self.destroyed or self.closing then return ended(self) end
  local p = self:_upsert(public_key, nil, true)
  if not p then return nil, "that is our own key", "EINVAL" end
  if not p.explicit then
    p.explicit = true
    self.explicit[public_key] = p
    self.n_explicit = self.n_explicit + 1
  end
  if self.all[public_key] then return true end
  if p:_update_priority() then self:_enqueue(p) end
  return true
end

--- Stops keeping a connection to public_key (an open one stays).
function Swarm:leave_peer(public_key)
  check.bytes(public_key, 32, "public_key", "leave_peer")
  local p = self.peers[public_key]
  if not p then return true end
  if p.explicit then
    p.explicit = false
    self.explicit[public_key] = nil
    self.n_explicit = self.n_explicit - 1
  end
  self:_maybe_delete(p)
  return true
end

-- Waits until every peer queued or dialing now was attempted (or no more
-- attempts can start).
function Swarm:_attempted(timeout)
  local deadline = check.deadline(timeout)
  local snap = {}
  for _, level in pairs(self.queue.levels) do
    for _, p in ipairs(level) do snap[#snap + 1] = p end
  end
  for _, e in pairs(self.all) do
    if e.connecting then snap[#snap + 1] = e end
  end
  while true do
    if self.destroyed or self.closing then return ended(self) end
    local pending = false
    if not self:_saturated() then
      for _, x in ipairs(snap) do
        if (x.queued and x.queue_level) or (x.connecting and not x.gone) then
          pending = true
          break
        end
      end
    end
    if not pending then return true end
    local ok, msg, code = self.progress:wait("swarm flush", check.left(deadline), "flush")
    if ok == nil and code then return nil, msg, code end
  end
end

--- Waits until every topic is flushed and every peer discovered so far was
-- attempted (one waiting for a client slot that a lingering stream holds
-- is waited for: that slot frees by itself); true, or nil, msg, code.
function Swarm:flush(timeout)
  timeout = check.timeout(timeout, "flush")
  local deadline = check.deadline(timeout)
  if self.destroyed or self.closing then return ended(self) end
  local list = {}
  for _, d in pairs(self.discoveries) do list[#list + 1] = d end
  for _, d in ipairs(list) do
    local ok, msg, code = d:flushed(check.left(deadline))
    -- the swarm's close leaves every topic: that is the swarm's end, not one topic's
    if self.destroyed or self.closing then return ended(self) end
    if ok == nil and code ~= "SWARM_TOPIC_LEFT" then return nil, msg, code end
  end
  return self:_attempted(check.left(deadline))
end

--- Counters: attempted, client_opened/closed, server_opened/closed,
-- duplicates, banned, peers_dropped, server_refused, bans_forgotten; and the current
-- connecting, connections, peers, lingering (closed connections whose
-- streams wait for the peer's END; they keep their slot until then).
function Swarm:stats()
  local s = {}
  for k, v in pairs(self.counters) do s[k] = v end
  s.connecting = self.connecting
  s.peers = self.n_peers
  s.queued = self.queue.n
  local n = 0
  for _ in pairs(self.connections) do n = n + 1 end
  s.connections = n
  n = 0
  for _ in pairs(self.lingering) do n = n + 1 end
  s.lingering = n
  return s
end

--- The joined topics' sessions' discoveries, as a list of topics.
function Swarm:topics()
  local out = {}
  for t in pairs(self.discoveries) do out[#out + 1] = t end
  return out
end

--- Ends now: no unannounce; every connection and dial is closed (their
-- tasks see their reads and writes fail), timers stop, waiters get
-- nil, "swarm destroyed", "SWARM_DESTROYED"; a DHT node the swarm made is
-- destroyed. Idempotent.
function Swarm:destroy()
  if self.destroyed then return true end
  self.destroyed = true
  self.end_err = self.end_err or DESTROYED
  ludx.untrack(self)
  for _, d in pairs(self.discoveries) do d:destroy(false) end
  self.discoveries = {}
  self.queue:clear()
  for _, p in pairs(self.peers) do
    if p.retry then
      p.retry:cancel()
      p.retry = nil
    end
  end
  pcall(self.server.destroy, self.server)
  local entries = {}
  for _, e in pairs(self.all) do entries[#entries + 1] = e end
  for _, e in ipairs(entries) do
    if e.connecting then
      self:_drop_dial(e)
    else
      pcall(e.conn.destroy, e.conn)
      self:_gone(e)
    end
  end
  -- closed connections whose streams still wait for the peer's END
  for _, raw in pairs(self.lingering) do raw:destroy() end
  local e = self.end_err
  self.progress:wake_all(nil, e[1], e[2])
  self.listen_waiters:wake_all(nil, e[1], e[2])
  if self.owns_dht then self.dht:destroy() end
  -- a second close() waiting for this end
  if self.close_waiters then self.close_waiters:wake_all(true) end
  return true
end

--- The graceful end: leaves every topic and stops the server, unannouncing
-- all at once (each up to timeout ms, default 10 s), then destroy().
-- Waiters and later calls get nil, "swarm closed", "SWARM_CLOSED".
-- Outside a task it is destroy(). Idempotent: a second close waits for the
-- first one's end; destroy() ends it at once.
function Swarm:close(timeout)
  timeout = check.timeout(type(timeout) == "table" and timeout.timeout or timeout, "close")
  if self.destroyed then return true end
  if self.closing then
    if ludx.in_task() then self.close_waiters:wait("swarm close", nil, "close") end
    return true
  end
  self.closing = true
  self.end_err = CLOSED
  self.close_waiters = ludx.waiters()
  self.progress:wake_all(nil, CLOSED[1], CLOSED[2])
  self.listen_waiters:wake_all(nil, CLOSED[1], CLOSED[2])
  if ludx.in_task() then
    local ok, err = pcall(function()
      local left, done = 0, ludx.waiters()
      local function job(fn)
        left = left + 1
        ludx.spawn("swarm close", function()
          pcall(fn)
          left = left - 1
          if left == 0 then done:wake_all(true) end
        end)
      end
      for topic, d in pairs(self.discoveries) do
        self.discoveries[topic] = nil
        job(function() d:destroy(true, timeout) end)
      end
      job(function() self.server:close({ timeout = timeout or 10000 }) end)
      if left > 0 then done:wait("swarm close", (timeout or 10000) + 1000, "close") end
    end)
    if not ok then
      self:destroy()
      error(err, 0)
    end
  end
  return self:destroy()
end

M.Swarm = Swarm
M.Peer = peer_mod.Peer
return M
