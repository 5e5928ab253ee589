-- A hyperdht server (D.6, D.8 step 7): registers its target in the router,
-- runs the announcer, answers PEER_HANDSHAKE with Noise IK (prologue
-- NS.PEER_HANDSHAKE), creates a UDX stream on the DHT socket that connects
-- to the client (at once when the client is OPEN or asked us directly, else
-- on the first UDX packet carrying our id), wraps it as a SecretStream and
-- runs handler(conn) in a task.
local ludx = require "ludx"
local compact = require "ludx.compact"
local crypto = require "ludx.dht.crypto"
local hm = require "ludx.dht.hyperdht_messages"
local consts = require "ludx.dht.constants"
local announcer_mod = require "ludx.dht.announcer"
local errors = require "ludx.dht.errors"
local holepunch = require "ludx.dht.holepunch"

local FIREWALL, ERROR = consts.FIREWALL, consts.ERROR
local HANDSHAKE_CLEAR_WAIT = 10000
local HANDSHAKE_INITIAL_TIMEOUT = 10000

local M = {}

local Server = {}
Server.__index = Server

--- node: the ludx.dht node; handler(conn) per connection. opts.firewall(
-- remote_public_key, payload, client_address) -> true refuses a client.
function M.new(node, handler, opts)
  opts = opts or {}
  return setmetatable({
    node = node,
    h = node.h,
    handler = handler,
    firewall = opts.firewall,
    keepalive = opts.keepalive or 5000,
    keypair = nil,
    target = nil,
    announcer = nil,
    connects = {},
    holepunches = {},
    listening = false,
    closed = false,
    connections = 0,
  }, Server)
end

function Server:address()
  if not self.keypair then return nil end
  return { public_key = self.keypair.public_key, host = self.h.nat.host, port = self.h.nat.port }
end

--- Announces the server under H32(keypair.public_key); returns once the
-- first announce round is done.
function Server:listen(keypair, timeout)
  keypair = keypair or self.node.keypair
  if self.listening then return nil, "Already listening", "ALREADY_LISTENING" end
  if self.h.destroyed then return nil, "Node destroyed", "NODE_DESTROYED" end
  for s in pairs(self.node.servers) do
    if s ~= self and s.keypair and s.keypair.public_key == keypair.public_key then
      return nil, "Keypair already used", "KEYPAIR_ALREADY_USED"
    end
  end
  self.listening = true
  self.keypair = keypair
  self.target = crypto.hash(keypair.public_key)
  self.announcer = announcer_mod.new(self.h, keypair, self.target)
  self.node.servers[self] = true
  self.h.router:set(self.target, {
    relay = nil,
    record = self.announcer.record,
    onpeerhandshake = function(hs, req) return self:_on_peer_handshake(hs, req) end,
    is_relay = function(addr) return self.announcer:is_relay(addr) end,
    onpeerholepunch = function(msg, req, respond)
      local hs = self.holepunches[msg.id]
      if not hs or not hs.punch or self.closed then return respond(nil) end
      holepunch.on_holepunch(self.h, self.announcer, hs.punch, msg, req, respond)
    end,
  })
  local ann = self.announcer
  local r = { require("ludx.dht")._await("dht listen", timeout, function(cb) ann:start(function() cb(true) end) end) }
  if r[1] == nil then return unpack(r) end
  return true
end

--- Stops announcing (unannounces from the relays) and refuses new clients.
-- Established connections stay open.
function Server:close(opts)
  if self.closed then return true end
  self.closed = true
  self.node.servers[self] = nil
  if self.target then self.h.router:delete(self.target) end
  for _, hs in pairs(self.connects) do
    if hs and hs.stream and not hs.done then pcall(hs.stream.close, hs.stream) end
  end
  self.connects = {}
  if self.announcer then
    local ann = self.announcer
    if opts and opts.fast then
      ann.stopped = true
    elseif ludx.running() then
      require("ludx.dht")._await("dht unlisten", 10000, function(cb) ann:stop(function() cb(true) end) end)
    end
  end
  self.listening = false
  return true
end

local function new_stream()
  local udx = require "ludx.udx"
  for _ = 1, 8 do
    local b = crypto.random(4)
    local id = b:byte(1) + b:byte(2) * 256 + b:byte(3) * 65536 + b:byte(4) * 16777216
    local s = udx.stream(id)
    if s then return s, id end
  end
  return nil
end
M.new_stream = new_stream

-- Synchronous (runs from the router): the Noise reply, or nil.
function Server:_on_peer_handshake(msg, req)
  if self.closed then return nil end
  local k = msg.noise
  local hs = self.connects[k]
  if not hs then
    hs = self:_add_handshake(msg.noise, msg.peer_address or req.from, req, msg.peer_address == nil) or false
    self.connects[k] = hs
    -- the same msg1 (through another relay) gets the same reply for a while
    self.h.env.after(HANDSHAKE_CLEAR_WAIT, function()
      if self.connects[k] == hs then self.connects[k] = nil end
    end)
  end
  if not hs then return nil end
  -- a server that will holepunch answers from its puncher socket, so the
  -- relay tells the client that address
  return { noise = hs.reply, socket = hs.punch and hs.punch.puncher.socket or nil }
end

function Server:_holepunch_id(hs)
  local id = 0
  while self.holepunches[id] do id = id + 1 end
  self.holepunches[id] = hs
  self.h.env.after(HANDSHAKE_CLEAR_WAIT + HANDSHAKE_INITIAL_TIMEOUT, function()
    if self.holepunches[id] == hs then self.holepunches[id] = nil end
  end)
  return id
end

function Server:_add_handshake(noise, client_address, req, direct)
  local h = self.h
  local hs_noise = crypto.noise_ik(false, self.keypair)
  local plain = hs_noise:recv(noise)
  if not plain then return nil end
  local remote = compact.decode(hm.noise_payload, plain)
  if not remote then return nil end
  local err = remote.version == 1 and (remote.udx and ERROR.NONE or ERROR.ABORTED) or ERROR.VERSION_MISMATCH
  local our_remote = h:remote_address()
  local addresses = {}
  if our_remote then addresses[1] = our_remote end

  local stream, sid = nil, 0
  if err == ERROR.NONE then
    stream, sid = new_stream()
    if not stream then err = ERROR.ABORTED end
  end
  if stream then stream:firewall("connect", remote.udx.id) end

  local hs = { stream = stream, done = false }
  local hp_id = (not our_remote) and self:_holepunch_id(hs) or 0
  local relay_addresses = self.announcer.relay_addresses
  local reply = hs_noise:send(compact.encode(hm.noise_payload, {
    error = err,
    firewall = our_remote and FIREWALL.OPEN or FIREWALL.UNKNOWN,
    holepunch = (not our_remote) and { id = hp_id, relays = self.announcer.relays } or nil,
    addresses4 = addresses,
    udx = { reusable_socket = false, id = sid, seq = 0 },
    secret_stream = {},
    relay_addresses = #relay_addresses > 0 and relay_addresses or nil,
  }))
  if not reply or not hs_noise:complete() then
    if stream then stream:close() end
    return nil
  end
  local r = hs_noise:result()
  if self.firewall then
    local ok, refuse = pcall(self.firewall, r.remote_public_key, remote, client_address)
    if not ok or refuse then
      if stream then stream:close() end
      return nil
    end
  end
  hs.reply = reply
  if err ~= ERROR.NONE then
    if stream then stream:close() end
    return hs
  end
  local handshake = { tx = r.tx, rx = r.rx, hash = r.hash, public_key = self.keypair.public_key, remote_public_key = r.remote_public_key }

  if remote.firewall == FIREWALL.OPEN or direct then
    local sock = direct and req.socket or h:socket()
    stream:connect(sock.udx, remote.udx.id, client_address.port, client_address.host)
  elseif not our_remote then
    -- we are not reachable: the client holepunches to our puncher socket
    hs.punch = holepunch.prepare(h, crypto.holepunch_secret(r.hash), remote.firewall)
  end

  ludx.spawn("dht server handshake", function()
    -- punching takes a probe round and up to 10 probe rounds of 1 s
    local ok = stream:wait_connected(hs.punch and 2 * HANDSHAKE_INITIAL_TIMEOUT or HANDSHAKE_INITIAL_TIMEOUT)
    if hs.punch then
      -- the stream (if any) now holds the puncher socket; closing waits for it
      hs.punch.puncher:release()
    end
    if not ok or self.closed then
      stream:close()
      return
    end
    hs.done = true
    local secretstream = require "ludx.secretstream"
    local conn = secretstream.wrap(stream, { initiator = false, handshake = handshake, keepalive = self.keepalive })
    conn.udx_stream = stream
    self.connections = self.connections + 1
    local t = ludx.spawn("dht connection", self.handler, conn)
    t.quiet = false
  end)
  return hs
end

M.errors = errors

return M
