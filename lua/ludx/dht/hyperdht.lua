-- A hyperdht node: a dht-rpc node plus the hyperdht commands (D.2) —
-- routing of handshakes, storage once persistent, and the client-side
-- queries (find_peer, lookup, announce, unannounce, mutable and immutable
-- put/get). Callback style like ludx.dht.rpc; ludx.dht (init.lua) wraps it
-- in task-friendly calls.
-- Section marks (C.6, D.8, ...) are those of docs/protocol/hyperswarm.md.
local rpc = require "ludx.dht.rpc"
local compact = require "ludx.compact"
local crypto = require "ludx.dht.crypto"
local hm = require "ludx.dht.hyperdht_messages"
local consts = require "ludx.dht.constants"
local router_mod = require "ludx.dht.router"
local persistent_mod = require "ludx.dht.persistent"
local signing = require "ludx.dht.signing"
local errors = require "ludx.dht.errors"

local C = consts.COMMANDS

local M = {}

local HyperDHT = setmetatable({}, { __index = rpc.Node })
HyperDHT.__index = HyperDHT
M.HyperDHT = HyperDHT

-- testnet nodes that leaked into the public network, skipped as hyperdht does
local function filter_node(node)
  if node.port == 49738 and (node.host == "134.209.28.98" or node.host == "167.99.142.185") then return false end
  if node.port == 9400 and node.host == "35.233.47.252" then return false end
  return node.host ~= "150.136.142.116"
end

--- opts as ludx.dht.rpc.new, plus max_size / max_age (storage limits),
-- max_relay_pending (relayed handshakes awaiting the server's answer, see
-- ludx.dht.router), max_store_bytes, max_store_bytes_per_host,
-- max_verifications, max_verifications_per_prefix (see
-- ludx.dht.persistent), keypair (default key pair).
function M.new(opts)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  if o.filter_node == nil then o.filter_node = filter_node end
  local self = rpc.new(o)
  setmetatable(self, HyperDHT)
  self.default_keypair = opts.keypair
  self.router = router_mod.new(self, { max_size = opts.max_size, max_age = opts.max_age, max_pending = opts.max_relay_pending })
  self.persistent = nil
  self.plugins = {}
  self.listening = {}
  self.extra_sockets = {}
  self.handler = function(req) return self:_on_app_request(req) end
  self:on("persistent", function()
    if not self.persistent then
      self.persistent = persistent_mod.new(self, { max_size = opts.max_size, max_age = opts.max_age,
        max_store_bytes = opts.max_store_bytes, max_store_bytes_per_host = opts.max_store_bytes_per_host,
        max_verifications = opts.max_verifications, max_verifications_per_prefix = opts.max_verifications_per_prefix })
    end
  end)
  return self
end

--- A hyperdht node that is persistent at once (a bootstrap node).
function M.bootstrapper(opts)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.ephemeral, o.firewalled, o.any_port = false, false, false
  o.bootstrap = o.bootstrap or {}
  local node = M.new(o)
  node._seed_nat = opts.host
  return node
end

function HyperDHT:_on_app_request(req)
  local c = req.command
  if c == C.PEER_HANDSHAKE then
    self.router:on_peer_handshake(req)
    return true
  elseif c == C.PEER_HOLEPUNCH then
    self.router:on_peer_holepunch(req)
    return true
  end
  local p = self.persistent
  if not p or not self:id() then return false end
  if c == C.FIND_PEER then
    p:on_find_peer(req)
  elseif c == C.LOOKUP then
    p:on_lookup(req)
  elseif c == C.ANNOUNCE then
    p:on_announce(req)
  elseif c == C.UNANNOUNCE then
    p:on_unannounce(req)
  elseif c == C.MUTABLE_PUT then
    p:on_mutable_put(req)
  elseif c == C.MUTABLE_GET then
    p:on_mutable_get(req)
  elseif c == C.IMMUTABLE_PUT then
    p:on_immutable_put(req)
  elseif c == C.IMMUTABLE_GET then
    p:on_immutable_get(req)
  elseif c == C.PLUGIN then
    p:on_plugin(req)
  else
    return false
  end
  return true
end

-- reply maps -------------------------------------------------------------------

local function map_lookup(node)
  if not node.value then return nil end
  local l = compact.decode(hm.lookup_raw_reply, node.value)
  if not l then return nil end
  return { token = node.token, from = node.from, to = node.to, peers = l.peers, bump = l.bump }
end

local function map_find_peer(node)
  if not node.value then return nil end
  local p = compact.decode(hm.peer, node.value)
  if not p then return nil end
  return { token = node.token, from = node.from, to = node.to, peer = p }
end

local function map_immutable(node)
  if not node.value then return nil end
  return { token = node.token, from = node.from, to = node.to, value = node.value }
end

local function map_mutable(node)
  if not node.value then return nil end
  local m = compact.decode(hm.mutable_get_response, node.value)
  if not m then return nil end
  return { token = node.token, from = node.from, to = node.to, seq = m.seq, value = m.value, signature = m.signature }
end

M.map_lookup, M.map_find_peer, M.map_immutable, M.map_mutable = map_lookup, map_find_peer, map_immutable, map_mutable

local function with(opts, extra)
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  for k, v in pairs(extra) do o[k] = v end
  return o
end

-- queries (not started: set on_data/on_end, then :start()) ------------------------

--- FIND_PEER for a public key (opts.hash == false: it is already a target).
function HyperDHT:find_peer(public_key, opts)
  local target = (opts and opts.hash == false) and public_key or crypto.hash(public_key)
  return self:query({ target = target, command = C.FIND_PEER }, with(opts, { map = map_find_peer }))
end

function HyperDHT:lookup(target, opts)
  return self:query({ target = target, command = C.LOOKUP }, with(opts, { map = map_lookup }))
end

function HyperDHT:_request_announce(keypair, target, token, from, relay_addresses, bump, done)
  local ann = { peer = { public_key = keypair.public_key, relay_addresses = relay_addresses or {} }, bump = bump or 0 }
  ann.signature = signing.sign_announce(target, token, from.id, ann, keypair)
  self:request({ token = token, target = target, command = C.ANNOUNCE, value = compact.encode(hm.announce, ann) }, from, nil,
    function(res) done(nil, res) end, function(err) done(err) end)
end

function HyperDHT:_request_unannounce(keypair, target, token, from, done)
  local unann = { peer = { public_key = keypair.public_key, relay_addresses = {} } }
  unann.signature = signing.sign_unannounce(target, token, from.id, unann, keypair)
  self:request({ token = token, target = target, command = C.UNANNOUNCE, value = compact.encode(hm.announce, unann) }, from, nil,
    function(res) done(nil, res) end, function(err) done(err) end)
end

--- LOOKUP, then ANNOUNCE {keypair.public_key, relay_addresses} to the
-- closest nodes with their tokens.
function HyperDHT:announce(target, keypair, relay_addresses, opts)
  local bump = opts and opts.bump or 0
  local commit = function(reply, dht, _, done)
    if not reply.token or not reply.from.id then return done(errors.new("NO_TOKEN", "No token received for closest node")) end
    dht:_request_announce(keypair, target, reply.token, reply.from, relay_addresses, bump, function(err) done(err) end)
  end
  return self:lookup(target, with(opts, { commit = commit }))
end

--- LOOKUP and UNANNOUNCE wherever our key is stored.
function HyperDHT:lookup_and_unannounce(target, keypair, opts)
  if self.persistent then self.persistent:unannounce(target, keypair.public_key) end
  local waiting, waiters = 0, {}
  local function settle()
    waiting = waiting - 1
    if waiting == 0 then
      local w = waiters
      waiters = {}
      for _, fn in ipairs(w) do fn() end
    end
  end
  local map = function(reply)
    local data = map_lookup(reply)
    if not data or not data.token then return data end
    local found = #data.peers >= 20
    for _, p in ipairs(data.peers) do
      if p.public_key == keypair.public_key then found = true end
    end
    if not found or not data.from.id then return data end
    waiting = waiting + 1
    self:_request_unannounce(keypair, target, data.token, data.from, settle)
    return data
  end
  local commit = function(_, _, _, done)
    if waiting == 0 then return done(nil) end
    waiters[#waiters + 1] = function() done(nil) end
  end
  return self:query({ target = target, command = C.LOOKUP }, with(opts, { map = map, commit = commit }))
end

--- IMMUTABLE_GET walk; cb(result or nil, err): the first value whose hash
-- is the target.
function HyperDHT:immutable_get(target, opts, cb)
  local q = self:query({ target = target, command = C.IMMUTABLE_GET }, with(opts, { map = map_immutable }))
  local found = nil
  q.on_data = function(node)
    if found or crypto.hash(node.value) ~= target then return end
    found = node
    q:destroy()
    cb(node)
  end
  q.on_end = function(err)
    if found then return end
    if err and err.code ~= "REQUEST_DESTROYED" then return cb(nil, err) end
    cb(nil)
  end
  return q:start()
end

--- Stores value under H32(value) on the closest nodes; cb({hash,
-- closest_nodes}) or cb(nil, err).
function HyperDHT:immutable_put(value, opts, cb)
  local target = crypto.hash(value)
  local commit = function(reply, dht, _, done)
    dht:request({ token = reply.token, target = target, command = C.IMMUTABLE_PUT, value = value }, reply.from, nil,
      function() done(nil) end, function(err) done(err) end)
  end
  local q = self:query({ target = target, command = C.IMMUTABLE_GET }, with(opts, { map = map_immutable, commit = commit }))
  q.on_end = function(err)
    if err then return cb(nil, err) end
    cb({ hash = target, closest_nodes = q:closest_nodes() })
  end
  return q:start()
end

--- MUTABLE_GET walk for public_key; cb(result or nil, err) with the
-- highest valid seq >= opts.seq (opts.latest == false: the first valid).
function HyperDHT:mutable_get(public_key, opts, cb)
  opts = opts or {}
  local target = crypto.hash(public_key)
  local user_seq = opts.seq or 0
  local latest = opts.latest ~= false
  local q = self:query({ target = target, command = C.MUTABLE_GET, value = compact.encode(compact.uint, user_seq) },
    with(opts, { map = map_mutable }))
  local result, returned = nil, false
  q.on_data = function(node)
    if returned or (result and node.seq <= result.seq) then return end
    if node.seq < user_seq or not signing.verify_mutable(node.signature, node.seq, node.value, public_key) then return end
    result = node
    if not latest then
      returned = true
      q:destroy()
      cb(node)
    end
  end
  q.on_end = function(err)
    if returned then return end
    returned = true
    if err and not result and err.code ~= "REQUEST_DESTROYED" then return cb(nil, err) end
    cb(result)
  end
  return q:start()
end

--- Signs and stores value for keypair at opts.seq (default 0); cb({
-- public_key, closest_nodes, seq, signature}) or cb(nil, err).
function HyperDHT:mutable_put(keypair, value, opts, cb)
  opts = opts or {}
  local target = crypto.hash(keypair.public_key)
  local seq = opts.seq or 0
  local signature = signing.sign_mutable(seq, value, keypair)
  local signed = compact.encode(hm.mutable_put_request, { public_key = keypair.public_key, seq = seq, value = value, signature = signature })
  local commit = function(reply, dht, _, done)
    dht:request({ token = reply.token, target = target, command = C.MUTABLE_PUT, value = signed }, reply.from, nil,
      function(res)
        if res.error ~= 0 then
          local code = res.error == consts.ERROR.SEQ_REUSED and "SEQ_REUSED" or res.error == consts.ERROR.SEQ_TOO_LOW and "SEQ_TOO_LOW" or "REMOTE_ERROR"
          return done(errors.new(code, errors[code] and errors[code]().msg or ("remote error " .. res.error)))
        end
        done(nil)
      end, function(err) done(err) end)
  end
  local q = self:query({ target = target, command = C.MUTABLE_GET, value = compact.encode(compact.uint, 0) },
    with(opts, { map = map_mutable, commit = commit }))
  q.on_end = function(err)
    if err then return cb(nil, err) end
    cb({ public_key = keypair.public_key, closest_nodes = q:closest_nodes(), seq = seq, signature = signature })
  end
  return q:start()
end

--- A puncher socket: DHT messages on it go to the node's I/O, 1-byte
-- datagrams to onprobe(data, host, port). Closed with the node.
function HyperDHT:acquire_socket(onprobe)
  if self.destroyed then return nil, errors.NODE_DESTROYED() end
  local sock, msg, code = self.io.transport.bind(self.io.host, 0)
  if not sock then return nil, errors.new(code or "EBIND", msg or "bind failed") end
  self.extra_sockets[sock] = true
  sock.onmessage = function(data, host, port)
    if #data > 1 then
      self.io:onmessage(sock, data, host, port)
    elseif onprobe then
      onprobe(data, host, port)
    end
  end
  local close = sock.close
  sock.close = function(s)
    self.extra_sockets[s] = nil
    return close(s)
  end
  return sock
end

function HyperDHT:destroy()
  if self.destroyed then return end
  rpc.Node.destroy(self)
  local list = {}
  for s in pairs(self.extra_sockets) do list[#list + 1] = s end
  for _, s in ipairs(list) do s:close() end
end

M.filter_node = filter_node

return M
