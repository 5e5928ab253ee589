-- Holepunching (D.9), callback style: the encrypted holepunch payloads,
-- NAT classification of a puncher socket, and the puncher that sends the
-- 1-byte probes. Both sides hold a puncher; the initiator (the client)
-- takes the first probe it receives as the path, the responder echoes.
-- Section marks (C.6, D.8, ...) are those of docs/protocol/hyperswarm.md.
--
-- Supported: CONSISTENT (or OPEN) NATs on both sides, and one side RANDOM
-- against a CONSISTENT one with random-port probes from the consistent
-- side. The 256 "birthday" sockets of a RANDOM initiator are not opened.
local compact = require "ludx.compact"
local crypto = require "ludx.dht.crypto"
local hm = require "ludx.dht.hyperdht_messages"
local consts = require "ludx.dht.constants"

local FIREWALL = consts.FIREWALL
local HOLEPUNCH = "\0"
local HOLEPUNCH_TTL = 5
local DEFAULT_TTL = 64

local M = {}

---------------------------------------------------------------------------
-- Payloads: nonce(24) || secretbox(holepunchPayload) with the handshake's
-- holepunch secret; tokens are H32(host; local random secret).

local Payload = {}
Payload.__index = Payload

function M.payload(secret, env)
  return setmetatable({ secret = secret, env = env, local_secret = crypto.random(32) }, Payload)
end

function Payload:encrypt(p)
  local nonce = crypto.random(24)
  return nonce .. crypto.secretbox(compact.encode(hm.holepunch_payload, p), nonce, self.secret)
end

function Payload:decrypt(buf)
  if type(buf) ~= "string" or #buf <= 24 + 16 then return nil end
  local plain = crypto.secretbox_open(buf:sub(25), buf:sub(1, 24), self.secret)
  if not plain then return nil end
  return compact.decode(hm.holepunch_payload, plain)
end

function Payload:token(addr)
  return crypto.hash(addr.host, self.local_secret)
end

---------------------------------------------------------------------------
-- NAT analysis of one socket: ping a few DHT nodes from it and look at the
-- addresses they saw.

local Nat = {}
Nat.__index = Nat

local function add_sample(samples, host, port)
  for i, s in ipairs(samples) do
    if s.host == host and s.port == port then
      s.hits = s.hits + 1
      while i > 1 and samples[i - 1].hits < s.hits do
        samples[i - 1], samples[i] = samples[i], samples[i - 1]
        i = i - 1
      end
      return
    end
  end
  samples[#samples + 1] = { host = host, port = port, hits = 1 }
end

-- firewalled: whether this socket's owner counts itself firewalled, fixed
-- for the NAT's life (default: the node's state now). A node's quick
-- firewall check may end mid-holepunch; following it would turn a round's
-- view into OPEN with no addresses, which the peer cannot punch.
function M.nat(dht, session, socket, firewalled)
  if firewalled == nil then firewalled = dht.firewalled and true or false end
  return setmetatable({
    dht = dht,
    session = session,
    socket = socket,
    samples_host = {},
    samples_full = {},
    visited = {},
    min_samples = 4,
    sampled = 0,
    firewalled = firewalled,
    firewall = firewalled and FIREWALL.UNKNOWN or FIREWALL.OPEN,
    addresses = nil,
    frozen = false,
    done = false,
    waiters = {},
    auto = false,
  }, Nat)
end

function Nat:_resolve()
  if self.done then return end
  self.done = true
  local w = self.waiters
  self.waiters = {}
  for _, fn in ipairs(w) do fn() end
end

--- cb() once the analysis has settled.
function Nat:analyzing(cb)
  if self.done then return cb() end
  self.waiters[#self.waiters + 1] = cb
end

function Nat:auto_sample(retry)
  if self.auto then return end
  self.auto = true
  local dht = self.dht
  local skip = dht.nodes.length >= 8 and 5 or 0
  local pending = 0
  local function onskip()
    pending = pending - 1
    if pending == 0 and self.sampled < self.min_samples then
      if retry ~= false then
        self.auto = false
        return self:auto_sample(false)
      end
      self:_resolve()
    end
  end
  local node = dht.nodes.latest
  while node and self.sampled + pending < self.min_samples do
    if skip > 0 then
      skip = skip - 1
    else
      local ref = node.host .. ":" .. node.port
      if not self.visited[ref] then
        self.visited[ref] = 1
        pending = pending + 1
        dht:ping(node, { socket = self.socket, session = self.session, retry = false }, function(res)
          self:add(res.to, res.from)
          onskip()
        end, onskip)
      end
    end
    node = node.prev
  end
  pending = pending + 1
  onskip()
end

function Nat:destroy()
  self.auto = true
  self.min_samples = 0
  self:_resolve()
end

function Nat:freeze()
  self.frozen = true
end

function Nat:_update_firewall()
  if not self.firewalled then
    self.firewall = FIREWALL.OPEN
    return
  end
  if self.sampled < 3 then return end
  local max = self.samples_full[1].hits
  if max >= 3 then
    self.firewall = FIREWALL.CONSISTENT
  elseif max == 1 then
    self.firewall = FIREWALL.RANDOM
  elseif #self.samples_host == 1 and self.sampled > 3 then
    self.firewall = FIREWALL.RANDOM
  elseif #self.samples_host > 1 and self.samples_full[2] and self.samples_full[2].hits > 1 then
    self.firewall = FIREWALL.CONSISTENT
  elseif self.sampled > 4 then
    self.firewall = FIREWALL.RANDOM
  end
end

function Nat:_update_addresses()
  if self.firewall == FIREWALL.UNKNOWN then
    self.addresses = nil
  elseif self.firewall == FIREWALL.RANDOM then
    self.addresses = { self.samples_host[1] }
  elseif self.firewall == FIREWALL.CONSISTENT then
    local out = {}
    for _, a in ipairs(self.samples_full) do
      if a.hits >= 2 or #out < 2 then out[#out + 1] = a end
    end
    self.addresses = out
  end
end

function Nat:update()
  if self.firewalled and self.firewall == FIREWALL.OPEN then self.firewall = FIREWALL.UNKNOWN end
  self:_update_firewall()
  self:_update_addresses()
end

--- A sample: addr = our address as seen by `from`.
function Nat:add(addr, from)
  local ref = from.host .. ":" .. from.port
  if self.visited[ref] == 2 then return end
  self.visited[ref] = 2
  add_sample(self.samples_host, addr.host, 0)
  add_sample(self.samples_full, addr.host, addr.port)
  self.sampled = self.sampled + 1
  if (self.sampled >= 3 or not self.firewalled) and not self.frozen then self:update() end
  if self.firewall == FIREWALL.CONSISTENT or self.firewall == FIREWALL.OPEN or self.sampled >= self.min_samples then
    self:_resolve()
  end
end

---------------------------------------------------------------------------
-- The puncher

local Puncher = {}
Puncher.__index = Puncher

local function coerce(fw)
  return fw == FIREWALL.OPEN and FIREWALL.CONSISTENT or fw
end

--- dht: the hyperdht node (its acquire_socket gives puncher sockets);
-- firewalled: see M.nat (the view is fixed for the puncher's life).
function M.puncher(dht, session, initiator, remote_firewall, firewalled)
  local self = setmetatable({
    dht = dht,
    env = dht.env,
    session = session,
    initiator = initiator,
    onconnect = function() end,
    onabort = function() end,
    onclose = nil, -- called once when the puncher lets its socket go
    punching = false,
    connected = false,
    destroyed = false,
    remote_firewall = remote_firewall or FIREWALL.UNKNOWN,
    remote_addresses = {},
    remote_holepunching = false,
    timers = {},
  }, Puncher)
  local sock, err = dht:acquire_socket(function(_, host, port) self:_on_probe(host, port) end)
  if not sock then return nil, err end
  self.socket = sock
  self.nat = M.nat(dht, session, sock, firewalled)
  self.nat:auto_sample()
  return self
end

-- A remote names the addresses we probe: at most this many (probes are
-- 1-byte datagrams, but a peer must not aim them at a list of strangers).
M.MAX_REMOTE_ADDRESSES = 8

function Puncher:update_remote(o)
  local list = {}
  for i, a in ipairs(o.addresses or {}) do
    if i > M.MAX_REMOTE_ADDRESSES then break end
    local verified = o.verified == a.host
    for _, old in ipairs(self.remote_addresses) do
      if old.verified and old.host == a.host then verified = true end
    end
    list[#list + 1] = { host = a.host, port = a.port, verified = verified }
  end
  self.remote_firewall = o.firewall
  self.remote_addresses = list
  self.remote_holepunching = o.punching
end

function Puncher:ping(addr)
  if self.destroyed then return end
  self.socket:send(HOLEPUNCH, addr.port, addr.host, DEFAULT_TTL)
end

--- A low-TTL probe: opens our NAT towards addr without reaching it.
function Puncher:open_session(addr)
  if self.destroyed then return end
  self.socket:send(HOLEPUNCH, addr.port, addr.host, HOLEPUNCH_TTL)
end

--- cb(stable): true when our NAT is classified and punching can work.
function Puncher:analyze(cb)
  self.nat:analyzing(function()
    local fw = self.nat.firewall
    local unstable = (self.remote_firewall >= FIREWALL.RANDOM and fw >= FIREWALL.RANDOM) or fw == FIREWALL.UNKNOWN
    cb(not unstable)
  end)
end

function Puncher:_on_probe(host, port)
  if self.destroyed then return end
  if not self.initiator then
    -- the responder echoes every probe so the initiator learns the path
    self.socket:send(HOLEPUNCH, port, host, DEFAULT_TTL)
    return
  end
  if self.connected then return end
  self.connected = true
  self.punching = false
  self:_cancel_timers()
  self.onconnect(self.socket, port, host)
end

function Puncher:_after(ms, fn)
  local t
  t = self.env.after(ms, function()
    self.timers[t] = nil
    if not self.destroyed then fn() end
  end)
  self.timers[t] = true
end

function Puncher:_cancel_timers()
  for t in pairs(self.timers) do t:cancel() end
  self.timers = {}
end

--- Starts punching in the background; false when there is no way.
function Puncher:punch()
  if self.destroyed or self.connected or #self.remote_addresses == 0 then return false end
  if self.punching then return true end
  self.punching = true
  local local_fw, remote_fw = coerce(self.nat.firewall), coerce(self.remote_firewall)
  local verified = nil
  for _, a in ipairs(self.remote_addresses) do
    if a.verified then
      verified = a
      break
    end
  end
  if local_fw == FIREWALL.CONSISTENT and remote_fw == FIREWALL.CONSISTENT then
    self:_consistent_probe()
    return true
  end
  if not verified then return false end
  if local_fw == FIREWALL.CONSISTENT and remote_fw >= FIREWALL.RANDOM then
    self:_random_probes(verified)
    return true
  end
  -- a RANDOM local NAT would need many sockets (birthday punching)
  self.punching = false
  return false
end

function Puncher:_consistent_probe()
  local tries = 0
  local function round()
    if not self.punching then return end
    tries = tries + 1
    if tries > 10 then return self:_auto_destroy() end
    for _, a in ipairs(self.remote_addresses) do
      -- unverified addresses only every 4th round
      if a.verified or tries % 4 == 0 then self:ping(a) end
    end
    self:_after(1000, round)
  end
  -- the responder's fast path already fired one probe: start a bit later
  if self.initiator then round() else self:_after(1000, round) end
end

function Puncher:_random_probes(addr)
  local tries = 1750
  local function round()
    if not self.punching then return end
    tries = tries - 1
    if tries < 0 then return self:_auto_destroy() end
    self:ping({ host = addr.host, port = 1000 + math.floor(self.env.random() * 64536) })
    self:_after(20, round)
  end
  round()
end

function Puncher:_auto_destroy()
  if not self.connected then self:destroy() end
end

--- Stops; onabort() fires unless we connected. The socket is closed
-- unless a connected stream still uses it (closing then waits for it).
function Puncher:_closed()
  local fn = self.onclose
  self.onclose = nil
  if fn then fn() end
end

function Puncher:destroy()
  if self.destroyed then return end
  self.destroyed = true
  self.punching = false
  self:_cancel_timers()
  self.nat:destroy()
  self:_closed()
  if not self.connected then
    self.socket:close()
    self.onabort()
  end
end

--- Releases the socket once a stream is connected on it.
function Puncher:release()
  self:_closed()
  self.destroyed = true
  self.punching = false
  self:_cancel_timers()
  self.nat:destroy()
  self.socket:close()
end

M.FIREWALL = FIREWALL

return M
