-- One joined topic of a swarm (hyperswarm's peer discovery) and the
-- sessions (join handles) on it.
--
-- A refresh, as hyperswarm 4.x does it: a server first listens (announces
-- the swarm key's hash, so clients can connect by key), then ANNOUNCEs the
-- swarm key under the topic with the server's relay addresses (the walk's
-- LOOKUP replies are peers too); a client-only discovery LOOKUPs the
-- topic, or LOOKUPs and UNANNOUNCEs when it was a server before. Every peer
-- of a reply goes to the swarm while the discovery is a client. The next
-- refresh runs refresh_interval (10 min) plus up to refresh_jitter (2 min)
-- after one ends. Leaving unannounces from the closest nodes if it announced.
local ludx = require "ludx"

local M = {}

local D = {}
D.__index = D

function M.new(swarm, topic)
  return setmetatable({
    swarm = swarm,
    topic = topic,
    sessions = {},
    client_sessions = 0,
    server_sessions = 0,
    is_client = false,
    is_server = false,
    destroyed = false,
    clock = 0,            -- refreshes started; a newer one supersedes an older
    running = nil,        -- the refresh task's clock while one runs
    query = nil,
    timer = nil,
    closest_nodes = nil,
    needs_unannounce = false,
    refreshes = 0,        -- refreshes ended
    done_waiters = ludx.waiters(),
    wait_for = nil,       -- a discovery of the same topic still unannouncing
    ended = false,        -- destroy (and its unannounce) finished
    end_waiters = ludx.waiters(),
  }, D)
end

local function run_query(self, q, clock)
  local swarm = self.swarm
  local limit = self.limit
  q.on_data = function(data)
    if not self.is_client or self.destroyed or clock ~= self.clock then return end
    for _, p in ipairs(data.peers or {}) do
      if limit then
        if limit <= 0 then return end
        if not swarm.connections[p.public_key] then limit = limit - 1 end
      end
      swarm:_handle_peer(p, self.topic)
    end
  end
  return ludx.await("swarm topic query", nil, function(cb)
    q.on_end = function(err) cb(err == nil) end
    self.query = q
    q:start()
  end)
end

-- The refresh task body.
local function refresh(self, clock)
  local swarm = self.swarm
  local node = swarm.dht
  -- a rejoin waits for the old unannounce, which would remove the new record
  local prev = self.wait_for
  while prev and not prev.ended and not self.destroyed do prev.end_waiters:wait("swarm topic rejoin") end
  self.wait_for = nil
  local ok = node:ready()
  if ok and self.is_server and clock == self.clock and not self.destroyed then
    ok = swarm:listen()
    if ok then self.needs_unannounce = true end
  end
  if not ok or clock ~= self.clock or self.destroyed or swarm.destroyed then return false end
  local h = node:raw()
  local opts = { closest_nodes = self.closest_nodes }
  local announcing = self.is_server
  local q
  if announcing then
    local relays = swarm.server.announcer and swarm.server.announcer.relay_addresses or {}
    q = h:announce(self.topic, swarm.keypair, relays, opts)
  elseif self.needs_unannounce then
    q = h:lookup_and_unannounce(self.topic, swarm.keypair, opts)
  else
    q = h:lookup(self.topic, opts)
  end
  local good = run_query(self, q, clock)
  if self.query == q then self.query = nil end
  if good then
    local nodes = q:closest_nodes()
    if #nodes > 0 then self.closest_nodes = nodes end
    if not announcing and clock == self.clock then self.needs_unannounce = false end
  end
  return good
end

local function schedule(self)
  if self.timer then self.timer:cancel() end
  local sw = self.swarm
  local delay = sw.refresh_interval + math.floor(sw.random() * sw.refresh_jitter)
  self.timer = ludx.after(delay, function()
    self.timer = nil
    if not self.destroyed and not sw.destroyed then self:refresh() end
  end)
end

--- Starts a refresh (a new one when the server/client flags changed, else
-- the one running). Returns at once; flushed() waits for it.
function D:refresh()
  if self.destroyed then return nil, "topic left", "SWARM_TOPIC_LEFT" end
  local server, client = self.server_sessions > 0, self.client_sessions > 0
  local changed = server ~= self.is_server or client ~= self.is_client
  if self.running and not changed then return true end
  if self.query then self.query:destroy() end
  self.is_server, self.is_client = server, client
  self.clock = self.clock + 1
  local clock = self.clock
  self.running = clock
  ludx.spawn("swarm topic refresh", function()
    local ok, good = pcall(refresh, self, clock)
    if self.running == clock then self.running = nil end
    self.refreshes = self.refreshes + 1
    if clock == self.clock then self.last_ok = ok and good or false end
    if not self.destroyed and not self.swarm.destroyed and clock == self.clock then schedule(self) end
    self.done_waiters:wake_all(true)
    if not ok and not ludx.is_cancelled(good) then error(good, 0) end
  end)
  return true
end

--- Waits until no refresh runs (announced and the lookup walked); true,
-- false (the last refresh failed), or nil, msg, code.
function D:flushed(timeout)
  local deadline = timeout and ludx.now() + timeout
  while self.running and not self.destroyed do
    local left = deadline and math.max(0, deadline - ludx.now())
    local ok, msg, code = self.done_waiters:wait("swarm topic flushed", left, "flushed")
    if ok == nil and code then return nil, msg, code end
  end
  if self.destroyed then return nil, "topic left", "SWARM_TOPIC_LEFT" end
  return self.last_ok ~= false
end

--- Stops every refresh; with `unannounce` (in a task) removes our record
-- from the closest nodes, bounded by timeout ms.
function D:destroy(unannounce, timeout)
  if self.destroyed then return true end
  self.destroyed = true
  if self.timer then
    self.timer:cancel()
    self.timer = nil
  end
  if self.query then self.query:destroy() end
  self.running = nil
  self.done_waiters:wake_all(nil, "topic left", "SWARM_TOPIC_LEFT")
  for _, s in ipairs(self.sessions) do s.destroyed = true end
  local node = self.swarm.dht
  if unannounce and self.needs_unannounce and not node.destroyed and ludx.current() then
    self.needs_unannounce = false
    local nodes = self.closest_nodes
    if nodes and #nodes > 0 then
      local h = node:raw()
      local q = h:lookup_and_unannounce(self.topic, self.swarm.keypair,
        { closest_nodes = nodes, only_closest_nodes = true, force = true })
      local ok, err = pcall(ludx.await, "swarm unannounce", timeout or 10000, function(cb)
        q.on_end = function() cb(true) end
        q:start()
      end)
      q:destroy()
      if not ok then
        self.ended = true
        self.end_waiters:wake_all(true)
        error(err, 0)
      end
    end
  end
  self.ended = true
  self.end_waiters:wake_all(true)
  return true
end

---------------------------------------------------------------------------
-- Sessions: what join returns. The discovery is a server while one of its
-- sessions is, a client while one is.

local Session = {}
Session.__index = Session
Session.__tostring = function(s)
  local t = s.discovery.topic:sub(1, 4):gsub(".", function(c) return string.format("%02x", c:byte()) end)
  return string.format("<swarm topic %s...%s%s%s>", t, s.is_server and " server" or "", s.is_client and " client" or "",
    s.destroyed and " left" or "")
end

function M.session(discovery, opts)
  local s = setmetatable({ discovery = discovery, topic = discovery.topic, is_client = false, is_server = false,
    destroyed = false }, Session)
  discovery.sessions[#discovery.sessions + 1] = s
  s:_set(opts)
  return s
end

function Session:_set(opts)
  local d = self.discovery
  local client, server = opts.client, opts.server
  if client == nil then client = self.is_client end
  if server == nil then server = self.is_server end
  if client ~= self.is_client then
    self.is_client = client
    d.client_sessions = d.client_sessions + (client and 1 or -1)
  end
  if server ~= self.is_server then
    self.is_server = server
    d.server_sessions = d.server_sessions + (server and 1 or -1)
  end
  if opts.limit ~= nil then d.limit = opts.limit end
  return d:refresh()
end

--- Runs the topic's lookup/announce again (joins the refresh running when
-- the role did not change); opts.server / opts.client change this
-- session's role (one must stay true), opts.limit. Returns at once.
function Session:refresh(opts)
  require("ludx.check").table(opts, "opts", "refresh", true)
  opts = opts or {}
  if self.destroyed then return nil, "topic left", "SWARM_TOPIC_LEFT" end
  local c = opts.client == nil and self.is_client or opts.client
  local s = opts.server == nil and self.is_server or opts.server
  if not c and not s then error("bad argument 'opts' to 'refresh' (client or server must be true)", 2) end
  return self:_set(opts)
end

--- Waits until the topic is announced (server) and its lookup walked, and
-- the peers found so far were attempted (client).
function Session:flushed(timeout)
  local deadline = timeout and ludx.now() + timeout
  local ok, msg, code = self.discovery:flushed(timeout)
  if ok == nil then return nil, msg, code end
  if self.is_client then
    local left = deadline and math.max(0, deadline - ludx.now())
    local r, m, c = self.discovery.swarm:_attempted(left)
    if r == nil then return nil, m, c end
  end
  return ok
end

--- Leaves this session; the topic is left (and unannounced) when it was
-- the last one, else the topic stops announcing when no session serves.
function Session:destroy(timeout)
  if self.destroyed then return true end
  self.destroyed = true
  local d = self.discovery
  for i, s in ipairs(d.sessions) do
    if s == self then
      table.remove(d.sessions, i)
      break
    end
  end
  if self.is_client then d.client_sessions = d.client_sessions - 1 end
  if self.is_server then d.server_sessions = d.server_sessions - 1 end
  if #d.sessions == 0 then return d.swarm:leave(d.topic, timeout) end
  if not d.destroyed then d:refresh() end
  return true
end
Session.close = Session.destroy

M.Session = Session
return M
