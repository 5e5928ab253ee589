-- The peer table and the connections of a swarm (methods of
-- ludx.swarm's Swarm): peers found by lookups, the client dials, the
-- connections the DHT server accepts, and what happens when one ends.
--
-- Duplicates (hyperswarm's rule, decided by the side that accepts): when a
-- connection arrives from a key we already have a connection (or a dial in
-- flight) to, the new one wins when the old one already carried data both
-- ways (the peer lost it and came back), or when the remote key is the one
-- expected to dial: the larger key of the two dials, the smaller accepts.
-- Otherwise the new one is closed and the old one gets a keep-alive.
local ludx = require "ludx"
local peer_mod = require "ludx.swarm.peer"

local M = {}

-- a server announces at most 3 relays
local MAX_RELAY_ADDRESSES = 3

-- Unsigned byte order of two keys: true when a > b.
local function key_greater(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x > y end
  end
  return #a > #b
end
M.key_greater = key_greater

local Swarm = {}
M.methods = Swarm

---------------------------------------------------------------------------
-- The peer table.

-- The peer of public_key, made if needed; nil for our own key, and for a
-- new key past max_peer_table unless force (a connection always has one).
function Swarm:_upsert(public_key, relay_addresses, force)
  if public_key == self.keypair.public_key then return nil end
  local p = self.peers[public_key]
  if p then
    p.relay_addresses = relay_addresses -- the latest is the better
    return p
  end
  if not force and self.n_peers >= self.max_peer_table then
    self.counters.peers_dropped = self.counters.peers_dropped + 1
    return nil
  end
  p = peer_mod.new(self, public_key, relay_addresses)
  self.peers[public_key] = p
  self.n_peers = self.n_peers + 1
  return p
end

function Swarm:_maybe_delete(p)
  if not p:_collectable() or self.all[p.public_key] then return end
  if self.peers[p.public_key] ~= p then return end
  if p.retry then
    p.retry:cancel()
    p.retry = nil
  end
  self.peers[p.public_key] = nil
  self.n_peers = self.n_peers - 1
end

-- Bans are remembered oldest first; past max_peer_table of them the
-- oldest is forgotten (a handler that bans every key it sees, against keys
-- that keep changing, must not grow the table without bound).
function Swarm:_banned(p)
  self.counters.banned = self.counters.banned + 1
  if p.queued then
    self.queue:remove(p)
    p.queued = false
    self.progress:wake_all(true)
  end
  local b = self.bans
  b.tail = b.tail + 1
  b[b.tail] = p
  p.ban_seq = b.tail
  while b.tail - b.head + 1 > self.max_peer_table do
    local old = b[b.head]
    b[b.head] = nil
    b.head = b.head + 1
    if old.banned and old.ban_seq == b.head - 1 then
      old.banned = false
      self.counters.bans_forgotten = self.counters.bans_forgotten + 1
      self:_maybe_delete(old)
    end
  end
end

function Swarm:_should_requeue(p)
  if self.destroyed then return false end
  if p.explicit then return true end
  for _, t in ipairs(p.topics) do
    if self.discoveries[t] then return true end
  end
  return false
end

-- Starts p's reconnect timer; false when it gets none.
function Swarm:_retry_later(p)
  local delay = peer_mod.backoff(p, self.backoffs)
  if not delay then return false end
  if p.retry then p.retry:cancel() end
  delay = delay + math.floor(self.random() * self.jitter)
  p.retry = ludx.after(delay, function()
    p.retry = nil
    p.waiting = false
    if self.destroyed then return end
    if p:_update_priority() and not self.all[p.public_key] and self.peers[p.public_key] == p then
      self:_enqueue(p)
    else
      self:_maybe_delete(p)
    end
  end)
  return true
end

function Swarm:_enqueue(p)
  if p.queued then return end
  p.queued = true
  self.queue:add(p)
  self:_attempt()
end

--- A peer found under topic by a lookup (a {public_key, relay_addresses}).
function Swarm:_handle_peer(found, topic)
  if self.destroyed or type(found.public_key) ~= "string" or #found.public_key ~= 32 then return end
  -- a server announces at most 3 relays; a record with more is cut (each
  -- one is a handshake we would send, and memory per peer)
  local relays = found.relay_addresses
  if type(relays) == "table" and #relays > MAX_RELAY_ADDRESSES then
    relays = { unpack(relays, 1, MAX_RELAY_ADDRESSES) }
  end
  local p = self:_upsert(found.public_key, relays)
  if not p then return end
  p:_topic(topic)
  if self.all[p.public_key] then return end
  if not p:_prioritized() or p.server then p:_reset() end
  if p:_update_priority() then self:_enqueue(p) end
end

---------------------------------------------------------------------------
-- Client connections.

function Swarm:_within_max_peers()
  local e = self.n_explicit
  local factor = e == 0 and 1 or e < 2 and 2 or e < 4 and 3 or 4
  local n = 0
  for _ in pairs(self.all) do n = n + 1 end
  return factor * n < self.max_peers
end

function Swarm:_should_connect()
  return not self.destroyed and self.connecting < self.max_parallel and self:_within_max_peers()
    and self.client_connections < self.max_client_connections
end

-- Client slots held only by a closed connection's lingering udx stream:
-- each frees by itself, at the peer's END or at most its close's timeout
-- + 1 s after the close.
function Swarm:_lingering_clients()
  local n = 0
  for entry in pairs(self.lingering) do
    if entry.client then n = n + 1 end
  end
  return n
end

-- No more attempts can start: nothing runs and the caps are reached (a
-- slot a lingering stream holds counts as free: an attempt starts when it
-- goes).
function Swarm:_saturated()
  if self.connecting > 0 or not self:_within_max_peers() then return self.connecting == 0 end
  return self.client_connections - self:_lingering_clients() >= self.max_client_connections
end

function Swarm:_attempt()
  if self.attempting or self.destroyed then return end
  self.attempting = true
  for _, p in pairs(self.explicit) do
    if self.destroyed or self.connecting >= self.max_parallel then break end
    if p.attempts < 5 and ludx.now() - p.disconnected_at >= p.attempts * 1000 then self:_connect(p) end
  end
  while self.queue.n > 0 and self:_should_connect() do
    local p = self.queue:shift()
    p.queued = false
    self:_connect(p)
    self:_maybe_delete(p)
    self.progress:wake_all(true)
  end
  self.attempting = false
end

-- Refusal of a remote key (server side: before the handshake completes).
function Swarm:_firewalled(public_key, payload, incoming)
  if self.destroyed or public_key == self.keypair.public_key then return true end
  local p = self.peers[public_key]
  if p and p.banned then return true end
  if incoming and self.server_connections >= self.max_server_connections then
    self.counters.server_refused = self.counters.server_refused + 1
    return true
  end
  if self.firewall then
    local ok, refuse = pcall(self.firewall, public_key, payload)
    if not ok or refuse then
      p = p or self:_upsert(public_key, nil)
      if p then p:ban(true) end
      return true
    end
  end
  return false
end

function Swarm:_connect(p)
  local pk = p.public_key
  if p.banned or self.all[pk] or self:_firewalled(pk, nil, false) then return end
  local entry = { peer = p, client = true, connecting = true }
  self.all[pk] = entry
  self.connecting = self.connecting + 1
  self.client_connections = self.client_connections + 1
  self.counters.attempted = self.counters.attempted + 1
  ludx.spawn("swarm connect", function()
    local conn, msg, code = self.dht:connect(pk, { keypair = self.keypair, relay_addresses = p.relay_addresses,
      timeout = self.connect_timeout })
    if entry.dropped then
      if conn then conn:destroy() end
      return
    end
    entry.connecting = false
    self.connecting = self.connecting - 1
    if not conn then
      entry.error = { msg, code }
      return self:_gone(entry)
    end
    entry.conn = conn
    self.counters.client_opened = self.counters.client_opened + 1
    self.connections[pk] = conn
    p:_connected()
    p.client, p.server = true, false
    self:_opened(entry)
    self:_attempt()
  end)
end

-- Drops a dial in flight (a duplicate won, or destroy): its connection,
-- if it comes, is closed; the attempt counts as ended now.
function Swarm:_drop_dial(entry)
  entry.dropped = true
  entry.connecting = false
  self.connecting = self.connecting - 1
  self:_gone(entry)
end

---------------------------------------------------------------------------
-- Both kinds.

-- An entry's connection is open: run the handler and watch for its end.
function Swarm:_opened(entry)
  local conn, p = entry.conn, entry.peer
  ludx.spawn("swarm connection watch", function()
    conn:wait_closed()
    self:_gone(entry)
    if entry.freed then return end
    -- the slot stays taken until the udx stream is gone too: a closed one
    -- lingers until the peer's END, and a peer that never ends must not
    -- get more streams than the caps by it. The SecretStream's close may
    -- still be finishing a write before it closes the udx stream, so wait
    -- as long as that close may take (its timeout; finish_timeout for the
    -- swarm's own), +1 s, then reset it
    local raw = conn.udx_stream
    self.lingering[entry] = raw
    local t = math.max(self.finish_timeout, conn.close_deadline and conn.close_deadline - ludx.now() or 0)
    raw:wait_closed(t < math.huge and t + 1000 or nil)
    if not raw:is_closed() then raw:destroy() end
    self.lingering[entry] = nil
    self:_free(entry)
  end)
  self.progress:wake_all(true)
  local handler = self.handler
  if not handler then return end
  local t = ludx.spawn("swarm connection", function()
    local ok, err = xpcall(handler, debug.traceback, conn, p)
    if not conn:is_closed() then
      if ok then
        pcall(conn.finish, conn, self.finish_timeout)
        conn:close(self.finish_timeout) -- the peer's END, or a reset after it
      else
        conn:destroy() -- a handler that failed: no clean end for the peer
      end
    end
    if not ok then error(err, 0) end
  end)
  t.quiet = false
end

-- An entry's connection (or dial) ended: bookkeeping, reconnect, more dials.
function Swarm:_gone(entry)
  if entry.gone then return end
  entry.gone = true
  local p = entry.peer
  local pk = p.public_key
  if self.all[pk] == entry then self.all[pk] = nil end
  if entry.conn and self.connections[pk] == entry.conn then self.connections[pk] = nil end
  if entry.client then
    if entry.conn then self.counters.client_closed = self.counters.client_closed + 1 end
    p:_disconnected()
    p.waiting = self:_should_requeue(p) and self:_retry_later(p)
  else
    self.counters.server_closed = self.counters.server_closed + 1
  end
  -- a connection's slot is freed by its watch task once its udx stream is
  -- gone; at once when nothing lingers (a dial, a reset, not over udx)
  local raw = entry.conn and entry.conn.udx_stream
  if not raw or raw.destroyed or raw:is_closed() then return self:_free(entry) end
  self:_moved(p)
end

-- An entry's slot is free: its dial failed, or its stream is gone.
function Swarm:_free(entry)
  if entry.freed then return end
  entry.freed = true
  if entry.client then
    self.client_connections = self.client_connections - 1
  else
    self.server_connections = self.server_connections - 1
  end
  self:_moved(entry.peer)
end

-- After a connection ended or freed its slot: forget the peer if nothing
-- keeps it, wake flush(), dial more.
function Swarm:_moved(p)
  self:_maybe_delete(p)
  self.progress:wake_all(true)
  if not self.destroyed then self:_attempt() end
end

-- A connection the DHT server accepted (runs in the server's task).
function Swarm:_on_server_connection(conn)
  if self.destroyed then return conn:destroy() end
  local pk = conn.remote_public_key
  local existing = self.all[pk]
  -- the firewall checked the cap at the handshake; handshakes in flight
  -- at once all passed it, so it holds here too (a replaced server
  -- connection is reset: it frees its own slot at once)
  if self.server_connections >= self.max_server_connections and not (existing and not existing.client) then
    self.counters.server_refused = self.counters.server_refused + 1
    return conn:destroy()
  end
  if existing then
    self.counters.duplicates = self.counters.duplicates + 1
    local old = existing.conn
    local outdated = false
    if old then
      local s = old:stats()
      outdated = s.frames_in > 0 and s.frames_out > 0
    end
    -- the connection the larger key dialed is the one both sides keep
    local keep_new = outdated or not key_greater(self.keypair.public_key, pk)
    if not keep_new then
      if old then ludx.spawn("swarm keepalive", function() pcall(old.write, old, "") end) end
      return conn:destroy()
    end
  end
  local p = self:_upsert(pk, nil, true)
  local entry = { peer = p, client = false, conn = conn }
  -- the new entry is in place before the old one goes, so that the old
  -- one's end does not start a dial to this key
  self.all[pk] = entry
  self.connections[pk] = conn
  self.server_connections = self.server_connections + 1
  self.counters.server_opened = self.counters.server_opened + 1
  if existing then
    if existing.connecting then
      self:_drop_dial(existing)
    else
      existing.conn:destroy()
      self:_gone(existing)
    end
  end
  p.client, p.server = false, true
  self:_opened(entry)
end

return M
