-- Routing of PEER_HANDSHAKE and PEER_HOLEPUNCH (D.7): forward entries
-- (target -> {relay = address of the announcing server, record}), the relay
-- steps every node performs, and the client calls.
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

local Router = {}
Router.__index = Router

function M.new(dht, opts)
  opts = opts or {}
  return setmetatable({
    dht = dht,
    forwards = cache.new({ env = dht.env, max_size = opts.max_size or 65536, max_age = opts.max_age or 20 * 60 * 1000 }),
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
  return a.host == b.host and a.port == b.port
end

function Router:on_peer_handshake(req)
  local hs = decode(hm.handshake, req.value)
  if not hs then return end
  local mode, noise, peer_address, relay_address = hs.mode, hs.noise, hs.peer_address, hs.relay_address
  local state = req.target and self:get(req.target)
  local relay = state and state.relay

  if state and state.onpeerhandshake then
    if #noise == 0 then return end
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
    if not relay and not relay_address then
      -- not ours and no route: help the client route
      return req:reply(nil, { token = false, closer_nodes = true })
    end
    req:relay(compact.encode(hm.handshake, { mode = FROM_RELAY, noise = noise, peer_address = req.from }), relay_address or relay)
  elseif mode == FROM_RELAY then
    if not relay or #noise == 0 then return end
    req:relay(compact.encode(hm.handshake, { mode = FROM_SECOND_RELAY, noise = noise, peer_address = peer_address, relay_address = req.from }), relay)
  elseif mode == FROM_SERVER then
    if not peer_address or #noise == 0 then return end
    req:reply(compact.encode(hm.handshake, { mode = REPLY, noise = noise, peer_address = req.from }),
      { to = peer_address, token = false, closer_nodes = false })
  end
end

function Router:on_peer_holepunch(req)
  local hp = decode(hm.holepunch, req.value)
  if not hp then return end
  local mode, id, payload, peer_address = hp.mode, hp.id, hp.payload, hp.peer_address
  local state = req.target and self:get(req.target)
  local relay = state and state.relay

  if mode == FROM_CLIENT then
    if not peer_address and not relay then return end
    req:relay(compact.encode(hm.holepunch, { mode = FROM_RELAY, id = id, payload = payload, peer_address = req.from }), peer_address or relay)
  elseif mode == FROM_RELAY then
    if not (state and state.onpeerholepunch) or not peer_address then return end
    -- the server may answer later (it samples its NAT first)
    state.onpeerholepunch({ id = id, payload = payload, peer_address = peer_address }, req, function(reply)
      if not reply then return end
      req:relay(compact.encode(hm.holepunch, { mode = FROM_SERVER, id = 0, payload = reply.payload, peer_address = peer_address }), req.from,
        { socket = reply.socket })
    end)
  elseif mode == FROM_SERVER then
    req:reply(compact.encode(hm.holepunch, { mode = REPLY, id = id, payload = payload, peer_address = req.from }),
      { to = peer_address, token = false, closer_nodes = false })
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
