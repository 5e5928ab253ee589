-- What a persistent hyperdht node stores and serves (D.5): announce
-- records, forward entries for announced servers (in the router), mutable
-- and immutable values. Requests that fail a check get no reply at all,
-- as hyperdht does; only SEQ_REUSED / SEQ_TOO_LOW are answered as errors.
-- Section marks (C.6, D.8, ...) are those of docs/protocol/hyperswarm.md.
local compact = require "ludx.compact"
local crypto = require "ludx.dht.crypto"
local hm = require "ludx.dht.hyperdht_messages"
local cache = require "ludx.dht.cache"
local signing = require "ludx.dht.signing"
local consts = require "ludx.dht.constants"
local io_mod = require "ludx.dht.io"

local NS, ERROR = consts.NS, consts.ERROR
local MAX_BUMP_DRIFT = 60000

local M = {}

-- Storage budget: bytes held by all stores together (values, keys and an
-- estimate of the tables around them); past it the oldest entries go.
M.MAX_STORE_BYTES = 32 * 1024 * 1024
-- Bytes one host (IPv4 address, IPv6 /64) may store per QUOTA_PERIOD; past it its writes are
-- dropped until the period ends, so one host cannot evict everyone else.
M.MAX_STORE_BYTES_PER_HOST = 1024 * 1024
M.QUOTA_PERIOD = 10 * 60 * 1000
M.MAX_QUOTA_HOSTS = 65536 -- hosts tracked per period (past it a new period starts)
-- Signature checks (announce, unannounce, mutable put) per second: in all
-- and per address prefix (IPv4 /24, IPv6 /48). Past them the request is
-- dropped unchecked, so forged signatures cannot eat the CPU.
M.MAX_VERIFICATIONS = 1000
M.MAX_VERIFICATIONS_PER_PREFIX = 200
local ENTRY_OVERHEAD = 64

-- The quota's key: an IPv4 address, or an IPv6 /64 (one host owns a whole
-- /64 and may send from any address in it).
local function quota_key(host)
  if host:find(":", 1, true) and not host:find(".", 1, true) then return io_mod.prefix(host, 4) end
  return host
end

local P = {}
P.__index = P

local function kv_bytes(k, v)
  return #k + #v + ENTRY_OVERHEAD
end

local function refresh_bytes(k, r)
  return #k + #r.record + 2 * ENTRY_OVERHEAD
end

local function bump_bytes(k)
  return #k + ENTRY_OVERHEAD
end

--- dht: the hyperdht node (for id, router, env, plugins). opts as
-- hyperdht's defaults: max_size (65536), max_age (20 min), and
-- mutable/immutable max ages (48 h); plus max_store_bytes (the byte budget
-- of all stores: 3/8 immutable, 3/8 mutable, 1/8 announces, 1/16 each
-- refreshes and bumps), max_store_bytes_per_host (quota per
-- QUOTA_PERIOD), max_verifications and max_verifications_per_prefix.
function M.new(dht, opts)
  opts = opts or {}
  local env = dht.env
  local max_size = opts.max_size or 65536
  local max_age = opts.max_age or 20 * 60 * 1000
  local long_age = opts.max_age or 48 * 60 * 60 * 1000
  local budget = opts.max_store_bytes or M.MAX_STORE_BYTES
  return setmetatable({
    dht = dht,
    records = cache.records({ env = env, max_size = max_size, max_age = max_age, max_bytes = budget / 8 }),
    bumps = cache.new({ env = env, max_size = max_size, max_age = max_age, max_bytes = budget / 16, bytes = bump_bytes }),
    refreshes = cache.new({ env = env, max_size = max_size, max_age = max_age, max_bytes = budget / 16, bytes = refresh_bytes }),
    mutables = cache.new({ env = env, max_size = math.floor(max_size / 2), max_age = long_age, max_bytes = budget * 3 / 8,
      bytes = kv_bytes }),
    immutables = cache.new({ env = env, max_size = math.floor(max_size / 2), max_age = long_age, max_bytes = budget * 3 / 8,
      bytes = kv_bytes }),
    quota = opts.max_store_bytes_per_host or M.MAX_STORE_BYTES_PER_HOST,
    quota_since = env.now(),
    quota_used = {}, -- host -> bytes stored this period
    quota_hosts = 0,
    max_verifications = opts.max_verifications or M.MAX_VERIFICATIONS,
    max_verifications_per_prefix = opts.max_verifications_per_prefix or M.MAX_VERIFICATIONS_PER_PREFIX,
    verify_second = -1,
    verify_total = 0,
    verify_prefixes = {},
    stats = { quota_dropped = 0, verify_dropped = 0 },
  }, P)
end

--- Bytes held by all stores.
function P:bytes_used()
  return self.records:bytes_used() + self.bumps:bytes_used() + self.refreshes:bytes_used() + self.mutables:bytes_used()
    + self.immutables:bytes_used()
end

-- Charges n bytes to req's host; false when over its quota (check_only:
-- no charge, so a write over quota is refused before its hash or
-- signature is checked).
function P:_charge(req, n, check_only)
  local now = self.dht.env.now()
  if now - self.quota_since >= M.QUOTA_PERIOD or self.quota_hosts >= M.MAX_QUOTA_HOSTS then
    self.quota_since = now
    self.quota_used = {}
    self.quota_hosts = 0
  end
  local host = quota_key(req.from.host)
  local prev = self.quota_used[host]
  local used = (prev or 0) + n
  if used > self.quota then
    self.stats.quota_dropped = self.stats.quota_dropped + 1
    return false
  end
  if check_only then return true end
  if not prev then self.quota_hosts = self.quota_hosts + 1 end
  self.quota_used[host] = used
  return true
end

-- One signature check for req's host; false when over the budget.
function P:_may_verify(req)
  local second = math.floor(self.dht.env.now() / 1000)
  if second ~= self.verify_second then
    self.verify_second = second
    self.verify_total = 0
    self.verify_prefixes = {}
  end
  local prefix = io_mod.prefix(req.from.host)
  local n = (self.verify_prefixes[prefix] or 0) + 1
  if self.verify_total >= self.max_verifications or n > self.max_verifications_per_prefix then
    self.stats.verify_dropped = self.stats.verify_dropped + 1
    return false
  end
  self.verify_prefixes[prefix] = n
  self.verify_total = self.verify_total + 1
  return true
end

local function decode(codec, v)
  if not v then return nil end
  return compact.decode(codec, v)
end

local ACK = { token = false, closer_nodes = false }

function P:on_lookup(req)
  if not req.target then return end
  local k = req.target
  local records = self.records:get(k, 20, self.dht.env.random)
  local bump = self.bumps:get(k) or 0
  local fwd = self.dht.router:get(k)
  if fwd and #records < 20 then records[#records + 1] = fwd.record end
  req:reply(#records > 0 and compact.encode(hm.lookup_raw_reply, { peers = records, bump = bump }) or nil)
end

function P:on_find_peer(req)
  if not req.target then return end
  local fwd = self.dht.router:get(req.target)
  req:reply(fwd and fwd.record or nil)
end

--- Forgets what public_key announced under target (also our own view).
function P:unannounce(target, public_key)
  if crypto.hash(public_key) == target then self.dht.router:delete(target) end
  self.records:remove(target, public_key)
end

function P:on_unannounce(req)
  if not req.target or not req.token then return end
  local unann = decode(hm.announce, req.value)
  if not unann or not unann.peer or not unann.signature then return end
  if not self:_may_verify(req) then return end
  if not signing.verify_announce(unann.signature, req.target, req.token, self.dht:id(), unann, NS.UNANNOUNCE) then return end
  self:unannounce(req.target, unann.peer.public_key)
  req:reply(nil, ACK)
end

function P:_on_refresh(token, req)
  local active = crypto.hash(token)
  local r = self.refreshes:get(active)
  if not r then return end
  local public_key = r.record:sub(1, 32)
  if r.announce_self then
    self.dht.router:set(r.k, { relay = req.from, record = r.record })
    self.records:remove(r.k, public_key)
  else
    self.records:add(r.k, public_key, r.record)
  end
  self.refreshes:delete(active)
  self.refreshes:set(token, r)
  req:reply(nil, ACK)
end

function P:on_announce(req)
  local id = self.dht:id()
  if not req.target or not req.token or not id then return end
  local ann = decode(hm.announce, req.value)
  if not ann then return end
  local peer = ann.peer
  if not peer then
    if not ann.refresh then return end
    return self:_on_refresh(ann.refresh, req)
  end
  if not ann.signature or not self:_may_verify(req) then return end
  if not signing.verify_announce(ann.signature, req.target, req.token, id, ann, NS.ANNOUNCE) then return end
  -- the signature covers all relays; only 3 are kept
  while #peer.relay_addresses > 3 do table.remove(peer.relay_addresses) end
  local k = req.target
  local announce_self = crypto.hash(peer.public_key) == k
  local record = compact.encode(hm.peer, peer)
  if not self:_charge(req, #k + #record + 2 * ENTRY_OVERHEAD) then return end
  if announce_self then
    self.dht.router:set(k, { relay = req.from, record = record })
    self.records:remove(k, peer.public_key)
  else
    local current = self.bumps:get(k) or 0
    local bump = ann.bump or 0
    if bump > current and bump <= self.dht.env.wall_time() + MAX_BUMP_DRIFT then self.bumps:set(k, bump) end
    self.records:add(k, peer.public_key, record)
  end
  if ann.refresh then self.refreshes:set(ann.refresh, { k = k, record = record, announce_self = announce_self }) end
  req:reply(nil, ACK)
end

function P:on_mutable_get(req)
  if not req.target or not req.value then return end
  local seq = compact.decode(compact.uint, req.value)
  if not seq then return end
  local value = self.mutables:get(req.target)
  if not value then return req:reply(nil) end
  local local_seq = compact.decode(compact.uint, value) or 0
  req:reply(local_seq < seq and nil or value)
end

function P:on_mutable_put(req)
  if not req.target or not req.token or not req.value then return end
  local p = decode(hm.mutable_put_request, req.value)
  if not p then return end
  if crypto.hash(p.public_key) ~= req.target then return end
  if not self:_charge(req, kv_bytes(req.target, req.value), true) then return end
  if not self:_may_verify(req) then return end
  if not signing.verify_mutable(p.signature, p.seq, p.value, p.public_key) then return end
  local stored = self.mutables:get(req.target)
  if stored then
    local existing = decode(hm.mutable_get_response, stored)
    if existing then
      if existing.seq == p.seq and existing.value ~= p.value then return req:error(ERROR.SEQ_REUSED) end
      if p.seq < existing.seq then return req:error(ERROR.SEQ_TOO_LOW) end
    end
  end
  local value = compact.encode(hm.mutable_get_response, { seq = p.seq, value = p.value, signature = p.signature })
  if not self:_charge(req, kv_bytes(req.target, value)) then return end
  self.mutables:set(req.target, value)
  req:reply(nil)
end

function P:on_immutable_get(req)
  if not req.target then return end
  req:reply(self.immutables:get(req.target))
end

function P:on_immutable_put(req)
  if not req.target or not req.token or not req.value then return end
  local stored = self.immutables:get(req.target) ~= nil
  local cost = kv_bytes(req.target, req.value)
  if not stored and not self:_charge(req, cost, true) then return end
  if crypto.hash(req.value) ~= req.target then return end
  if not stored and not self:_charge(req, cost) then return end
  self.immutables:set(req.target, req.value)
  req:reply(nil)
end

function P:on_plugin(req)
  if not req.value then return end
  local preq = decode(hm.plugin_request, req.value)
  if not preq then return end
  local p = self.dht.plugins and self.dht.plugins[preq.plugin]
  if not p or p.version ~= preq.version then return end
  p.onrequest(preq, req)
end

return M
