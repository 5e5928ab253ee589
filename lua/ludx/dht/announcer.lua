-- The announcer loop of a listening server (D.6): FIND_PEER our target,
-- ANNOUNCE to the 3 closest persistent nodes (they become our relays), ping
-- them every 3 s, re-announce after ~100 rounds (or at once when too many
-- relays stop answering) and UNANNOUNCE relays we dropped.
-- Section marks (C.6, D.8, ...) are those of docs/protocol/hyperswarm.md.
local compact = require "ludx.compact"
local hm = require "ludx.dht.hyperdht_messages"
local signing = require "ludx.dht.signing"
local consts = require "ludx.dht.constants"

local C = consts.COMMANDS
local MIN_ACTIVE = 3
local PING_INTERVAL = 3000
local ROUNDS = 100

local M = {}

local A = {}
A.__index = A

function M.new(dht, keypair, target)
  return setmetatable({
    dht = dht,
    keypair = keypair,
    target = target,
    relays = {},
    relay_addresses = {},
    stopped = false,
    record = compact.encode(hm.peer, { public_key = keypair.public_key, relay_addresses = {} }),
    _closest_nodes = nil,
    _server_relays = { {}, {}, {} },
    _refreshing = false,
    _timer = nil,
    _query = nil,
    updates = 0,
  }, A)
end

local function key(addr)
  return addr.host .. ":" .. addr.port
end

function A:is_relay(addr)
  local k = key(addr)
  for _, m in ipairs(self._server_relays) do
    if m[k] then return true end
  end
  return false
end

--- Announces once, then keeps the loop running; cb() after the first round.
function A:start(cb)
  if self.stopped then return cb() end
  self:_update(function()
    if not self.stopped then self:_background() end
    cb()
  end)
end

function A:refresh()
  if not self.stopped then self._refreshing = true end
end

--- Stops the loop and unannounces from the current relays; cb() when done.
function A:stop(cb)
  self.stopped = true
  if self._timer then
    self._timer:cancel()
    self._timer = nil
  end
  if self._query then self._query:destroy() end
  local current = {}
  for _, v in pairs(self._server_relays[3]) do current[#current + 1] = v end
  self:_unannounce_all(current, cb or function() end)
end

function A:_background()
  if self.stopped or self.dht.destroyed then return end
  self._refreshing = false
  self._rounds = 0
  self:_ping_round()
end

function A:_ping_round()
  if self.stopped or self.dht.destroyed then return end
  if self._rounds >= ROUNDS or self._refreshing then
    return self:_update(function() self:_background() end)
  end
  self._rounds = self._rounds + 1
  local nodes = {}
  for _, v in pairs(self._server_relays[3]) do nodes[#nodes + 1] = v end
  local pending, active = #nodes, 0
  local function after()
    if self.stopped then return end
    if active < math.min(#nodes, MIN_ACTIVE) then self:refresh() end
    if self._refreshing then return self:_ping_round() end
    self._timer = self.dht.env.after(PING_INTERVAL, function()
      self._timer = nil
      self:_ping_round()
    end)
  end
  if pending == 0 then return after() end
  for _, n in ipairs(nodes) do
    self.dht:ping(n, nil, function()
      active = active + 1
      pending = pending - 1
      if pending == 0 then after() end
    end, function()
      pending = pending - 1
      if pending == 0 then after() end
    end)
  end
end

function A:_cycle()
  local sr = self._server_relays
  sr[1], sr[2], sr[3] = sr[2], sr[3], {}
end

function A:_update(cb)
  self:_cycle()
  local q = self.dht:find_peer(self.target, { hash = false, nodes = self._closest_nodes })
  self._query = q
  q.on_end = function()
    self._query = nil
    if self.stopped then return cb() end
    local replies = {}
    for i = 1, math.min(3, #q.closest_replies) do replies[i] = q.closest_replies[i] end
    local relays, relay_addresses = {}, {}
    if not self.dht.firewalled then
      local addr = self.dht:remote_address()
      if addr then relay_addresses[#relay_addresses + 1] = addr end
    end
    local pending = #replies
    local function settled()
      if self.stopped then return cb() end
      self._closest_nodes = q:closest_nodes()
      self.relays = relays
      self.relay_addresses = relay_addresses
      self.updates = self.updates + 1
      local removed = {}
      for k, v in pairs(self._server_relays[2]) do
        if not self._server_relays[3][k] then removed[#removed + 1] = v end
      end
      self:_unannounce_all(removed, cb)
    end
    if pending == 0 then return settled() end
    for _, msg in ipairs(replies) do
      self:_commit(msg, relays, relay_addresses, function()
        pending = pending - 1
        if pending == 0 then settled() end
      end)
    end
  end
  q:start()
end

function A:_commit(msg, relays, relay_addresses, done)
  if not msg.token then return done() end
  local ann = { peer = { public_key = self.keypair.public_key, relay_addresses = {} } }
  ann.signature = signing.sign_announce(self.target, msg.token, msg.from.id, ann, self.keypair)
  self.dht:request({ token = msg.token, command = C.ANNOUNCE, target = self.target, value = compact.encode(hm.announce, ann) }, msg.from, nil,
    function(res)
      if res.error ~= 0 then return done() end
      if #relay_addresses < 3 then relay_addresses[#relay_addresses + 1] = { host = msg.from.host, port = msg.from.port } end
      relays[#relays + 1] = { relay_address = msg.from, peer_address = msg.to }
      self._server_relays[3][key(msg.from)] = msg.from
      done()
    end, function() done() end)
end

function A:_unannounce_all(list, cb)
  local pending = #list
  if pending == 0 then return cb() end
  for _, to in ipairs(list) do
    self:_unannounce(to, function()
      pending = pending - 1
      if pending == 0 then cb() end
    end)
  end
end

function A:_unannounce(to, done)
  local dht = self.dht
  dht:request({ command = C.FIND_PEER, target = self.target }, to, nil, function(res)
    if not res.token or not res.from.id or not res.value then return done() end
    local unann = { peer = { public_key = self.keypair.public_key, relay_addresses = {} } }
    unann.signature = signing.sign_unannounce(self.target, res.token, res.from.id, unann, self.keypair)
    dht:request({ token = res.token, command = C.UNANNOUNCE, target = self.target, value = compact.encode(hm.announce, unann) }, to, nil,
      function() done() end, function() done() end)
  end, function() done() end)
end

return M
