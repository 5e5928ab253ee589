-- What a swarm knows about one remote key (hyperswarm's peer info), and the
-- queue of peers waiting for a client connection attempt.
--
-- Priorities follow hyperswarm 4.x: a fresh peer is NORMAL; after one
-- failed or ended attempt it goes first (VERY_HIGH), then HIGH, then LOW;
-- past 3 attempts, or tried and never connected, it is not queued again
-- until a lookup finds it again (which resets it). A connection that lived
-- at least 15 s resets the count (a fast retry).
local ludx = require "ludx"

local M = {}

local VERY_LOW, LOW, NORMAL, HIGH, VERY_HIGH = 0, 1, 2, 3, 4
M.VERY_LOW, M.LOW, M.NORMAL, M.HIGH, M.VERY_HIGH = VERY_LOW, LOW, NORMAL, HIGH, VERY_HIGH
local MIN_CONNECTION_TIME = 15000

local Peer = {}
Peer.__index = Peer
Peer.__tostring = function(p)
  local k = p.public_key:sub(1, 4):gsub(".", function(c) return string.format("%02x", c:byte()) end)
  return string.format("<swarm peer %s..., %s, %d attempts%s>", k, p.client and "client" or "server", p.attempts,
    p.banned and ", banned" or "")
end

function M.new(swarm, public_key, relay_addresses)
  return setmetatable({
    swarm = swarm,
    public_key = public_key,
    relay_addresses = relay_addresses,
    topics = {},          -- the joined topics it was found under, in order
    seen_topics = {},
    client = false,       -- our last connection to it was one we dialed
    server = true,
    explicit = false,     -- join_peer
    banned = false,
    reconnecting = true,
    proven = false,       -- a connection to it opened once
    tried = false,
    queued = false,
    waiting = false,      -- a reconnect timer holds it
    connected_at = -1,
    disconnected_at = 0,
    attempts = 0,
    priority = NORMAL,
  }, Peer)
end

function Peer:_get_priority()
  if (self.tried and not self.proven) or self.attempts > 3 then return VERY_LOW end
  if self.attempts == 3 then return LOW end
  if self.attempts == 2 then return HIGH end
  if self.attempts == 1 then return VERY_HIGH end
  return NORMAL
end

function Peer:_prioritized()
  return self.priority >= NORMAL
end

--- False when the peer should not be queued now.
function Peer:_update_priority()
  if self.explicit and self.attempts > 3 then self.attempts = 3 end
  if self.banned or self.queued or self.attempts > 3 then return false end
  self.priority = self:_get_priority()
  return true
end

function Peer:_connected()
  self.proven = true
  self.connected_at = ludx.now()
end

function Peer:_disconnected()
  self.disconnected_at = ludx.now()
  if self.connected_at > -1 then
    if self.disconnected_at - self.connected_at >= MIN_CONNECTION_TIME then self.attempts = 0 end
    self.connected_at = -1
  end
  self.attempts = self.attempts + 1
end

function Peer:_reset()
  self.client, self.server = false, true
  self.proven, self.tried, self.attempts = false, false, 0
end

function Peer:_topic(topic)
  if self.seen_topics[topic] then return end
  self.seen_topics[topic] = true
  self.topics[#self.topics + 1] = topic
end

--- Bans (or unbans) the peer: its connections are refused and it is never
-- dialed; the record is kept while banned (up to the swarm's peer cap).
function Peer:ban(yes)
  self.banned = yes ~= false
  if self.banned then self.swarm:_banned(self) end
  return true
end

--- Whether the swarm reconnects to it after a connection ends (default true).
function Peer:reconnect(yes)
  self.reconnecting = yes ~= false
  return true
end

function Peer:_collectable()
  return not (self.banned or self.queued or self.explicit or self.waiting)
end

M.Peer = Peer

---------------------------------------------------------------------------
-- The client queue: highest priority first, random order within one
-- priority (so a lookup's order is not a hot spot). Every entry is a peer
-- of the swarm's bounded table, so the queue is bounded by it.

local Queue = {}
Queue.__index = Queue

function M.queue(random)
  local q = setmetatable({ levels = {}, n = 0, random = random or math.random }, Queue)
  for p = VERY_LOW, VERY_HIGH do q.levels[p] = {} end
  return q
end

function Queue:add(peer)
  local l = self.levels[peer.priority]
  l[#l + 1] = peer
  peer.queue_level = peer.priority
  self.n = self.n + 1
end

function Queue:shift()
  for p = VERY_HIGH, VERY_LOW, -1 do
    local l = self.levels[p]
    if #l > 0 then
      local i = self.random(#l)
      local peer = l[i]
      l[i] = l[#l]
      l[#l] = nil
      self.n = self.n - 1
      peer.queue_level = nil
      return peer
    end
  end
  return nil
end

--- Takes a peer out of the queue (O(n) in its level; rare).
function Queue:remove(peer)
  local l = peer.queue_level and self.levels[peer.queue_level]
  if not l then return false end
  for i = 1, #l do
    if l[i] == peer then
      l[i] = l[#l]
      l[#l] = nil
      self.n = self.n - 1
      peer.queue_level = nil
      return true
    end
  end
  return false
end

function Queue:clear()
  for p = VERY_LOW, VERY_HIGH do
    for _, peer in ipairs(self.levels[p]) do
      peer.queue_level = nil
      peer.queued = false
    end
    self.levels[p] = {}
  end
  self.n = 0
end

---------------------------------------------------------------------------
-- Reconnect backoff (hyperswarm's retry timer): after an attempt ends, the
-- peer waits backoffs[1] (short), [2] (medium) or [3] (long) ms plus up to
-- `jitter` ms, by its attempts and whether it ever connected; an explicit
-- peer past 3 attempts waits backoffs[4]. One timer per waiting peer.

M.BACKOFFS = { 1000, 5000, 15000, 600000 }
M.JITTER = 500

function M.backoff(peer, backoffs)
  if peer.banned or not peer.reconnecting then return nil end
  local a = peer.attempts
  if a > 3 then return peer.explicit and backoffs[4] or nil end
  if a == 0 then return backoffs[1] end
  if peer.proven then
    return backoffs[a]
  end
  return backoffs[a == 1 and 2 or 3]
end

return M
