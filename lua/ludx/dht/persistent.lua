-- What a persistent hyperdht node stores and serves (D.5): announce
-- records, forward entries for announced servers (in the router), mutable
-- and immutable values. Requests that fail a check get no reply at all,
-- as hyperdht does; only SEQ_REUSED / SEQ_TOO_LOW are answered as errors.
local compact = require "ludx.compact"
local crypto = require "ludx.dht.crypto"
local hm = require "ludx.dht.hyperdht_messages"
local cache = require "ludx.dht.cache"
local signing = require "ludx.dht.signing"
local consts = require "ludx.dht.constants"

local NS, ERROR = consts.NS, consts.ERROR
local MAX_BUMP_DRIFT = 60000

local M = {}

local P = {}
P.__index = P

--- dht: the hyperdht node (for id, router, env, plugins). opts as
-- hyperdht's defaults: max_size (65536), max_age (20 min), and
-- mutable/immutable max ages (48 h).
function M.new(dht, opts)
  opts = opts or {}
  local env = dht.env
  local max_size = opts.max_size or 65536
  local max_age = opts.max_age or 20 * 60 * 1000
  local long_age = opts.max_age or 48 * 60 * 60 * 1000
  return setmetatable({
    dht = dht,
    records = cache.records({ env = env, max_size = max_size, max_age = max_age }),
    bumps = cache.new({ env = env, max_size = max_size, max_age = max_age }),
    refreshes = cache.new({ env = env, max_size = max_size, max_age = max_age }),
    mutables = cache.new({ env = env, max_size = math.floor(max_size / 2), max_age = long_age }),
    immutables = cache.new({ env = env, max_size = math.floor(max_size / 2), max_age = long_age }),
  }, P)
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
  if not ann.signature or not signing.verify_announce(ann.signature, req.target, req.token, id, ann, NS.ANNOUNCE) then return end
  -- the signature covers all relays; only 3 are kept
  while #peer.relay_addresses > 3 do table.remove(peer.relay_addresses) end
  local k = req.target
  local announce_self = crypto.hash(peer.public_key) == k
  local record = compact.encode(hm.peer, peer)
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
  if not signing.verify_mutable(p.signature, p.seq, p.value, p.public_key) then return end
  local stored = self.mutables:get(req.target)
  if stored then
    local existing = decode(hm.mutable_get_response, stored)
    if existing then
      if existing.seq == p.seq and existing.value ~= p.value then return req:error(ERROR.SEQ_REUSED) end
      if p.seq < existing.seq then return req:error(ERROR.SEQ_TOO_LOW) end
    end
  end
  self.mutables:set(req.target, compact.encode(hm.mutable_get_response, { seq = p.seq, value = p.value, signature = p.signature }))
  req:reply(nil)
end

function P:on_immutable_get(req)
  if not req.target then return end
  req:reply(self.immutables:get(req.target))
end

function P:on_immutable_put(req)
  if not req.target or not req.token or not req.value then return end
  if crypto.hash(req.value) ~= req.target then return end
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
