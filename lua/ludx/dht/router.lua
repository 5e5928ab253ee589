-- Routing of PEER_HANDSHAKE and PEER_HOLEPUNCH (D.7): forward entries
-- (target -> {relay = address of the announcing server, record}), the relay
-- steps every node performs, and the client calls.
-- Section marks (C.6, D.8, ...) are those of docs/protocol/hyperswarm.md.
--
-- A server registers {record, onpeerhandshake, onpeerholepunch} for its own
-- target: onpeerhandshake(msg, req) returns {noise =, socket = ?} or nil (no
-- reply); onpeerholepunch(msg, req, respond) calls respond({payload =,
-- socket = ?}) or respond(nil), now or later.
local compact = require "ludx.compact"
local hm = require "ludx.dht.hyperdht_messages"
local cache = require "ludx.dht.cache"
local errors = require "ludx.dht.errors"
local consts = require "ludx.dht.constants"

local C = consts.COMMANDS
local FROM_CLIENT, FROM_SERVER, FROM_RELAY, FROM_SECOND_RELAY, REPLY =
  hm.FROM_CLIENT, hm.FROM_SERVER, hm.FROM_RELAY, hm.FROM_SECOND_RELAY, hm.REPLY

local M = {}

-- Relay state (issue 13): a node forwards a server's answer (FROM_SERVER)
-- only for a request it relayed itself (same target and tid), and only to
-- the client that sent it; a client's holepunch goes only to an address the
-- node knows serves the target (its forward entry, or the source of a
-- FROM_SERVER it relayed). So relay paths cannot aim bytes at a third party.
M.MAX_PENDING = 4096 -- relayed requests awaiting the server's answer
M.PENDING_AGE = 20000 -- ms such a request waits (servers answer within seconds)
M.MAX_SERVER_ADDRESSES = 4 -- server addresses remembered per target

local Router = {}
Router.__index = Router

--- opts: max_size / max_age (forward entries), max_pending (relayed
-- requests remembered, default M.MAX_PENDING), pending_age (ms).
function M.new(dht, opts)
  opts = opts or {}
  local max_pending = opts.max_pending or M.MAX_PENDING
  local pending_age = opts.pending_age or M.PENDING_AGE
  return setmetatable({
    dht = dht,
    forwards = cache.new({ env = dht.env, max_size = opts.max_size or 65536, max_age = opts.max_age or 20 * 60 * 1000 }),
    -- target .. mode .. tid .. client address -> the client address
    pending = cache.new({ env = dht.env, max_size = max_pending, max_age = pending_age }),
    -- target -> { addresses a relayed FROM_SERVER came from }
    servers = cache.new({ env = dht.env, max_size = max_pending, max_age = pending_age }),
    stats = { relayed = 0, refused = 0 },
  }, Router)
end

function Router:set(target, state)
  if state.onpeerhandshake then
    self.forwards:retain(target, state)
  else
    self.forwards:set(target, state)
  end
end

function Router:get(target)
  return self.forwards:get(target)
end

function Router:delete(target)
  self.forwards:delete(target)
end

local function decode(codec, v)
  if not v then return nil end
  return compact.decode(codec, v)
end

local function same_addr(a, b)
  return a ~= nil and b ~= nil and a.host == b.host and a.port == b.port
end

-- Keyed by the client's address too: another sender that reuses a
-- client's target and tid makes an entry of its own, it cannot overwrite
-- the client's (and so fail that client's handshake through us).
local function pending_key(kind, req, addr)
  return req.target .. kind .. string.char(req.tid % 256, math.floor(req.tid / 256) % 256) .. tostring(addr.host) .. ":" ..
    tostring(addr.port)
end

-- We relay a client's request towards a server: remember whom to answer.
function Router:_expect(kind, req)
  self.pending:set(pending_key(kind, req, req.from), { host = req.from.host, port = req.from.port })
  self.stats.relayed = self.stats.relayed + 1
end

-- A server's answer: the client we relayed for (and forget it), or nil.
function Router:_answer(kind, req, peer_address)
  if not peer_address then
    self.stats.refused = self.stats.refused + 1
    return nil
  end
  local k = pending_key(kind, req, peer_address)
  local client = self.pending:get(k)
  if not client or not same_addr(client, peer_address) then
    self.stats.refused = self.stats.refused + 1
    return nil
  end
  self.pending:delete(k)
  local list = self.servers:get(req.target)
  if not list then
    list = {}
    self.servers:set(req.target, list)
  end
  local known = false
  for _, a in ipairs(list) do
    if same_addr(a, req.from) then known = true end
  end
  if not known then
    if #list >= M.MAX_SERVER_ADDRESSES then table.remove(list, 1) end
    list[#list + 1] = { host = req.from.host, port = req.from.port }
  end
  return client
end

-- Is addr where the server of target may be reached through us?
function Router:_server_address(target, state, addr)
  if state and same_addr(state.relay, addr) then return true end
  for _, a in ipairs(self.servers:get(target) or {}) do
    if same_addr(a, addr) then return true end
  end
  return false
end

function Router:on_peer_handshake(req)
  local hs = decode(hm.handshake, req.value)
  if not hs then return end
  local mode, noise, peer_address, relay_address = hs.mode, hs.noise, hs.peer_address, hs.relay_address
  local state = req.target and self:get(req.target)
  local relay = state and state.relay

  if state and state.onpeerhandshake then
    if #noise == 0 then return end
    -- a second relay's hop must come from a node we announced to (it names
    -- the first relay, where our answer goes)
    if mode == FROM_SECOND_RELAY and not (state.is_relay and state.is_relay(req.from)) then return end
    local reply = state.onpeerhandshake({ noise = noise, peer_address = peer_address }, req)
    if not reply or not reply.noise then return end
    local opts = { socket = reply.socket, token = false, closer_nodes = false }
    if mode == FROM_CLIENT then
      req:reply(compact.encode(hm.handshake, { mode = REPLY, noise = reply.noise }), opts)
    elseif mode == FROM_RELAY then
      req:relay(compact.encode(hm.handshake, { mode = FROM_SERVER, noise = reply.noise, peer_address = peer_address }), req.from, opts)
    elseif mode == FROM_SECOND_RELAY then
      if not relay_address then return end
      req:relay(compact.encode(hm.handshake, { mode = FROM_SERVER, noise = reply.noise, peer_address = peer_address }), relay_address, opts)
    end
    return
  end

  if mode == FROM_CLIENT then
    if #noise == 0 then return end
    -- only along our forward entry (hyperdht clients never name a relay)
    if not relay or (relay_address and not same_addr(relay_address, relay)) then
      -- not ours and no route: help the client route
      return req:reply(nil, { token = false, closer_nodes = true })
    end
    self:_expect("h", req)
    req:relay(compact.encode(hm.handshake, { mode = FROM_RELAY, noise = noise, peer_address = req.from }), relay)
  elseif mode == FROM_RELAY then
    if not relay or #noise == 0 then return end
    req:relay(compact.encode(hm.handshake, { mode = FROM_SECOND_RELAY, noise = noise, peer_address = peer_address, relay_address = req.from }), relay)
  elseif mode == FROM_SERVER then
    if not peer_address or #noise == 0 or not req.target then return end
    local client = self:_answer("h", req, peer_address)
    if not client then return end
    req:reply(compact.encode(hm.handshake, { mode = REPLY, noise = noise, peer_address = req.from }),
      { to = client, token = false, closer_nodes = false })
  end
end

function Router:on_peer_holepunch(req)
  local hp = decode(hm.holepunch, req.value)
  if not hp then return end
  local mode, id, payload, peer_address = hp.mode, hp.id, hp.payload, hp.peer_address
  local state = req.target and self:get(req.target)
  local relay = state and state.relay

  if mode == FROM_CLIENT then
    if not req.target then return end
    local to = peer_address or relay
    if not to or not self:_server_address(req.target, state, to) then
      self.stats.refused = self.stats.refused + 1
      return
    end
    self:_expect("p", req)
    req:relay(compact.encode(hm.holepunch, { mode = FROM_RELAY, id = id, payload = payload, peer_address = req.from }), to)
  elseif mode == FROM_RELAY then
    if not (state and state.onpeerholepunch) or not peer_address then return end
    -- the server may answer later (it samples its NAT first)
    state.onpeerholepunch({ id = id, payload = payload, peer_address = peer_address }, req, function(reply)
      if not reply then return end
      req:relay(compact.encode(hm.holepunch, { mode = FROM_SERVER, id = 0, payload = reply.payload, peer_address = peer_address }), req.from,
        { socket = reply.socket })
    end)
  elseif mode == FROM_SERVER then
    if not peer_address or not req.target then return end
    local client = self:_answer("p", req, peer_address)
    if not client then return end
    req:reply(compact.encode(hm.holepunch, { mode = REPLY, id = id, payload = payload, peer_address = req.from }),
      { to = client, token = false, closer_nodes = false })
  end
end

--- Client side: sends a FROM_CLIENT handshake to `to`; cb(nil, err) or
-- cb({noise, relayed, server_address, client_address}).
function Router:peer_handshake(target, o, to, cb)
  local value = compact.encode(hm.handshake, { mode = FROM_CLIENT, noise = o.noise, peer_address = o.peer_address, relay_address = o.relay_address })
  return self.dht:request({ command = C.PEER_HANDSHAKE, target = target, value = value }, to, { socket = o.socket, session = o.session },
    function(res)
      local hs = decode(hm.handshake, res.value)
      if not hs or hs.mode ~= REPLY or not same_addr(to, res.from) or #hs.noise == 0 then
        return cb(nil, errors.BAD_HANDSHAKE_REPLY())
      end
      cb({ noise = hs.noise, relayed = hs.peer_address ~= nil, server_address = hs.peer_address or to, client_address = res.to })
    end, function(err) cb(nil, err) end)
end

--- Client side: a FROM_CLIENT holepunch through relay `to`; cb(nil, err) or
-- cb({from, to, payload, peer_address}).
function Router:peer_holepunch(target, o, to, cb)
  local value = compact.encode(hm.holepunch, { mode = FROM_CLIENT, id = o.id, payload = o.payload, peer_address = o.peer_address })
  return self.dht:request({ command = C.PEER_HOLEPUNCH, target = target, value = value }, to, { socket = o.socket, session = o.session },
    function(res)
      local hp = decode(hm.holepunch, res.value)
      if not hp or hp.mode ~= REPLY or not same_addr(to, res.from) then return cb(nil, errors.BAD_HOLEPUNCH_REPLY()) end
      cb({ from = res.from, to = res.to, payload = hp.payload, peer_address = hp.peer_address or to })
    end, function(err) cb(nil, err) end)
end

return M
