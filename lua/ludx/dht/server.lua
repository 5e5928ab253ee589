-- A hyperdht server (D.6, D.8 step 7): registers its target in the router,
-- runs the announcer, answers PEER_HANDSHAKE with Noise IK (prologue
-- NS.PEER_HANDSHAKE), creates a UDX stream on the DHT socket that connects
-- to the client (at once when the client is OPEN or asked us directly, else
-- on the first UDX packet carrying our id), wraps it as a SecretStream and
-- runs handler(conn) in a task.
-- Section marks (C.6, D.8, ...) are those of docs/protocol/hyperswarm.md.
local ludx = require "ludx"
local compact = require "ludx.compact"
local crypto = require "ludx.dht.crypto"
local hm = require "ludx.dht.hyperdht_messages"
local consts = require "ludx.dht.constants"
local announcer_mod = require "ludx.dht.announcer"
local errors = require "ludx.dht.errors"
local holepunch = require "ludx.dht.holepunch"
local punch = require "ludx.dht.punch"
local cache = require "ludx.dht.cache"
local io_mod = require "ludx.dht.io"

local FIREWALL, ERROR = consts.FIREWALL, consts.ERROR
local HANDSHAKE_CLEAR_WAIT = 10000
local HANDSHAKE_INITIAL_TIMEOUT = 10000

local M = {}

-- Caps on what clients (and floods of valid Noise first messages) can cost
-- a server (issue 13). A handshake costs four Ed25519 scalar
-- multiplications, a stream and a task until the client connects, so they
-- are admitted before any crypto: per source (the client's address, or the
-- relay's when the relay is not one of ours) and in all, per second; the
-- first two from a source are preferred once half the budget is used, and
-- hosts whose handshake connected before skip the overall budget (for
-- max_handshakes_per_source a second per host, whatever its ports).
-- Handshakes waiting for their client are capped per source (more are
-- refused) and in all (the oldest is dropped). Failed handshakes leave no
-- state; puncher sockets open only when a holepunch round arrives.
M.MAX_HANDSHAKES = 250 -- admitted per second, in all
M.MAX_HANDSHAKES_PER_SOURCE = 16 -- admitted per second from one source
M.MAX_PENDING = 256 -- handshakes waiting for their client
M.MAX_PENDING_PER_SOURCE = 8
M.MAX_PUNCHERS = 32 -- puncher sockets open at once
M.MAX_PUNCHERS_PER_SOURCE = 4 -- ... for the handshakes of one host (IPv6 /64)
M.MAX_REMEMBERED = 8192 -- answered first messages kept 10 s for duplicates
M.MAX_KNOWN_SOURCES = 1024 -- hosts (IPv6: /64s) whose last handshake connected (10 min)

-- The key a host is known by: its address, or its /64 for IPv6 (one host
-- may send from any address of its /64).
local function host_key(host)
  if host:find(":", 1, true) and not host:find(".", 1, true) then return io_mod.prefix(host, 4) end
  return host
end

local Server = {}
Server.__index = Server

--- node: the ludx.dht node; handler(conn) per connection. opts.firewall(
-- remote_public_key, payload, client_address) -> true refuses a client;
-- opts.max_handshakes, max_handshakes_per_source (per second),
-- max_pending, max_pending_per_source, max_punchers,
-- max_punchers_per_source: the caps above; opts.resume = false: no
-- careful resume from the node's store.
-- server.onrefuse(source, reason, admitted, from, peer_address), when set,
-- sees each refused first message ("pending", "rate" or "budget").
function M.new(node, handler, opts)
  opts = opts or {}
  return setmetatable({
    node = node,
    h = node.h,
    handler = handler,
    firewall = opts.firewall,
    keepalive = opts.keepalive or 5000,
    resume = opts.resume ~= false and node.resume or nil, -- careful resume (ludx.resume)
    max_handshakes = opts.max_handshakes or M.MAX_HANDSHAKES,
    max_handshakes_per_source = opts.max_handshakes_per_source or M.MAX_HANDSHAKES_PER_SOURCE,
    max_pending = opts.max_pending or M.MAX_PENDING,
    max_pending_per_source = opts.max_pending_per_source or M.MAX_PENDING_PER_SOURCE,
    max_punchers = opts.max_punchers or M.MAX_PUNCHERS,
    max_punchers_per_source = opts.max_punchers_per_source or M.MAX_PUNCHERS_PER_SOURCE,
    max_remembered = opts.max_remembered or M.MAX_REMEMBERED,
    keypair = nil,
    target = nil,
    announcer = nil,
    connects = {}, -- first message -> handshake (answered, kept 10 s)
    remembered = { head = 1, tail = 0 }, -- handshakes in answer order
    nremembered = 0,
    waiting = { head = 1, tail = 0 }, -- handshakes waiting for their client, oldest first
    pending = 0,
    pending_by_source = {},
    punchers = 0,
    punchers_by_host = {},
    window = -1, -- the second the admission counts belong to
    admitted = 0,
    admitted_by_source = {},
    known_admitted = {}, -- host -> admissions past the budget this second
    -- hosts that completed a handshake are not held back by a flood
    -- from others (only by their own per-source caps)
    known = cache.new({ env = node.h.env, max_size = opts.max_known_sources or M.MAX_KNOWN_SOURCES, max_age = 10 * 60 * 1000 }),
    holepunches = {},
    next_hp_id = 0,
    stats = { handshakes = 0, refused = 0, refused_pending = 0, refused_rate = 0, refused_budget = 0, failed = 0, evicted = 0, duplicates = 0 },
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
  if keypair ~= nil then require("ludx.dht")._check_keypair(keypair, "keypair", "listen") end
  timeout = ludx.check_timeout(timeout, "listen")
  keypair = keypair or self.node.keypair
  if self.listening then return nil, "Already listening", "ALREADY_LISTENING" end
  if self.h.destroyed then return nil, "Node destroyed", "NODE_DESTROYED" end
  -- a closed server stays closed (it would announce again otherwise)
  if self.closed then return nil, "server closed", "SERVER_CLOSED" end
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
      if not hs or not hs.punch or hs.settled or self.closed then return respond(nil) end
      holepunch.on_holepunch(self.h, self.announcer, hs.punch, msg, req, respond)
    end,
  })
  local ann = self.announcer
  -- close/destroy wake this wait at once (the announce round may take long)
  local r = { require("ludx.dht")._await("dht listen", timeout, function(cb)
    self.wake_listen = cb
    ann:start(function() cb(true) end)
  end) }
  self.wake_listen = nil
  if self.h.destroyed then return nil, "node destroyed", "NODE_DESTROYED" end
  if self.closed then return nil, "server closed", "SERVER_CLOSED" end
  if r[1] == nil then return unpack(r) end
  return true
end

--- Stops announcing (unannounces from the relays) and refuses new clients.
-- Established connections stay open.
-- Idempotent: a second close waits for the first one's end; destroy (or
-- opts.fast) ends a close that waits for its unannounce at once.
function Server:close(opts)
  local fast = opts and opts.fast
  if self.closed then
    if fast then
      if self.wake_unlisten then self.wake_unlisten(true) end
    elseif self.close_waiters then
      self.close_waiters:wait("dht server close", nil, "close")
    end
    return true
  end
  self.closed = true
  if self.wake_listen then self.wake_listen(nil, errors.new("SERVER_CLOSED", "server closed")) end
  self.node.servers[self] = nil
  if self.target then self.h.router:delete(self.target) end
  local q = self.waiting
  for i = q.head, q.tail do
    local hs = q[i]
    if hs and not hs.settled and hs.stream then pcall(hs.stream.destroy, hs.stream) end
  end
  self.connects = {}
  self.remembered = { head = 1, tail = 0 }
  self.nremembered = 0
  if self.announcer then
    local ann = self.announcer
    if fast or not ludx.in_task() then
      ann.stopped = true
    else
      self.close_waiters = ludx.waiters()
      local ok, err = pcall(require("ludx.dht")._await, "dht unlisten", opts and opts.timeout or 10000, function(cb)
        self.wake_unlisten = cb
        ann:stop(function() cb(true) end)
      end)
      self.wake_unlisten = nil
      self.close_waiters:wake_all(true)
      self.close_waiters = nil
      if not ok then error(err, 0) end
    end
  end
  self.listening = false
  return true
end

--- close() without the unannounce round trip. Idempotent.
function Server:destroy()
  return self:close({ fast = true })
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

-- Forgets answered first messages older than 10 s (or past the cap).
function Server:_sweep(now)
  local q = self.remembered
  while q.head <= q.tail do
    local hs = q[q.head]
    if hs.at + HANDSHAKE_CLEAR_WAIT > now and self.nremembered <= self.max_remembered then break end
    q[q.head] = nil
    q.head = q.head + 1
    self.nremembered = self.nremembered - 1
    if self.connects[hs.k] == hs then self.connects[hs.k] = nil end
  end
end

-- May a new first message from `source` (host:port) cost a handshake now?
function Server:_admit(source, host)
  local window = math.floor(self.h.env.now() / 1000)
  if window ~= self.window then
    self.window = window
    self.admitted = 0
    self.admitted_by_source = {}
    self.known_admitted = {}
  end
  local n = self.admitted_by_source[source] or 0
  local st = self.stats
  if (self.pending_by_source[source] or 0) >= self.max_pending_per_source then
    st.refused_pending = st.refused_pending + 1
    return false, "pending"
  end
  if n >= self.max_handshakes_per_source then
    st.refused_rate = st.refused_rate + 1
    return false, "rate"
  end
  -- a known host skips the budget, but not once per port it sends from
  local k = self.known:get(host) and (self.known_admitted[host] or 0)
  if k and k < self.max_handshakes_per_source then
    self.known_admitted[host] = k + 1
  else
    -- past half the budget only a source's first two go through
    if self.admitted >= self.max_handshakes or (n >= 2 and self.admitted * 2 >= self.max_handshakes) then
      st.refused_budget = st.refused_budget + 1
      return false, "budget"
    end
  end
  self.admitted_by_source[source] = n + 1
  self.admitted = self.admitted + 1
  return true
end

-- A handshake waits for its client: counted, the oldest dropped past the cap.
function Server:_wait(hs)
  local q = self.waiting
  while self.pending >= self.max_pending and q.head <= q.tail do
    local old = q[q.head]
    q[q.head] = nil
    q.head = q.head + 1
    if not old.settled then
      self.stats.evicted = self.stats.evicted + 1
      self:_settle(old)
      if old.stream then pcall(old.stream.destroy, old.stream) end
    end
  end
  q.tail = q.tail + 1
  q[q.tail] = hs
  self.pending = self.pending + 1
  self.pending_by_source[hs.source] = (self.pending_by_source[hs.source] or 0) + 1
end

-- The handshake no longer waits (connected, failed or dropped).
function Server:_settle(hs)
  if hs.settled then return end
  hs.settled = true
  self.pending = self.pending - 1
  local n = self.pending_by_source[hs.source] - 1
  self.pending_by_source[hs.source] = n > 0 and n or nil
  if hs.hp_id and self.holepunches[hs.hp_id] == hs then self.holepunches[hs.hp_id] = nil end
  if hs.punch and hs.punch.timer then
    hs.punch.timer:cancel()
    hs.punch.timer = nil
  end
  local q = self.waiting
  while q.head <= q.tail and q[q.head].settled do
    q[q.head] = nil
    q.head = q.head + 1
  end
end

-- Synchronous (runs from the router): the Noise reply, or nil.
function Server:_on_peer_handshake(msg, req)
  if self.closed then return nil end
  local k = msg.noise
  local now = self.h.env.now()
  self:_sweep(now)
  local hs = self.connects[k]
  if hs then
    -- the same first message (through another relay) gets the same reply
    self.stats.duplicates = self.stats.duplicates + 1
    return { noise = hs.reply }
  end
  -- the client's address counts as the source when one of our relays
  -- vouches for it; anyone else is counted by its own address
  local from = req.from
  local client = msg.peer_address or from
  local vouched = msg.peer_address == nil or (self.announcer and self.announcer:is_relay(from))
  local src = vouched and client or from
  local source = src.host .. ":" .. src.port
  local admitted, why = self:_admit(source, host_key(src.host))
  if not admitted then
    self.stats.refused = self.stats.refused + 1
    if self.onrefuse then self.onrefuse(source, why, self.admitted_by_source[source], req.from, msg.peer_address) end
    return nil
  end
  hs = self:_add_handshake(k, client, msg.peer_address == nil, source, host_key(src.host))
  if not hs then
    -- nothing is kept for a failed handshake
    self.stats.failed = self.stats.failed + 1
    return nil
  end
  self.stats.handshakes = self.stats.handshakes + 1
  hs.k, hs.at = k, now
  self.connects[k] = hs
  local q = self.remembered
  q.tail = q.tail + 1
  q[q.tail] = hs
  self.nremembered = self.nremembered + 1
  return { noise = hs.reply }
end

function Server:_holepunch_id(hs)
  local id = self.next_hp_id
  while self.holepunches[id] do id = (id + 1) % 65536 end
  self.next_hp_id = (id + 1) % 65536
  self.holepunches[id] = hs
  hs.hp_id = id
  return id
end

-- A puncher socket for a holepunch that starts, within max_punchers.
function Server:_open_puncher(hs, remote_firewall)
  if self.closed or hs.settled or self.punchers >= self.max_punchers then return nil end
  local host = hs.host or ""
  local n = self.punchers_by_host[host] or 0
  if n >= self.max_punchers_per_source then return nil end
  local p = punch.puncher(self.h, self.h:session(), false, remote_firewall)
  if not p then return nil end
  self.punchers = self.punchers + 1
  self.punchers_by_host[host] = n + 1
  p.onclose = function()
    self.punchers = self.punchers - 1
    local left = self.punchers_by_host[host] - 1
    self.punchers_by_host[host] = left > 0 and left or nil
  end
  return p
end

function Server:_add_handshake(noise, client_address, direct, source, source_host)
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
  if stream then self.node:_own(stream) end -- node:destroy() ends the handshake task
  local hs = { done = false, settled = true, source = source, host = source_host, stream = stream }
  local hp_id = (stream and not our_remote) and self:_holepunch_id(hs) or 0
  local function fail()
    if stream then stream:destroy() end
    if hs.hp_id then self.holepunches[hs.hp_id] = nil end
    return nil
  end
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
  if not reply or not hs_noise:complete() then return fail() end
  local r = hs_noise:result()
  if self.firewall then
    local ok, refuse = pcall(self.firewall, r.remote_public_key, remote, client_address)
    if not ok or refuse then return fail() end
  end
  hs.reply = reply
  if err ~= ERROR.NONE then
    -- an error reply is remembered for duplicates, nothing waits
    fail()
    hs.stream = nil
    return hs
  end
  stream:firewall("connect", remote.udx.id)
  hs.settled = false
  self:_wait(hs)
  local handshake = { tx = r.tx, rx = r.rx, hash = r.hash, public_key = self.keypair.public_key, remote_public_key = r.remote_public_key }

  if remote.firewall == FIREWALL.OPEN and not direct then
    -- an OPEN client waits for our first packet; the address is only what
    -- the first message says until the client answers (hs.unproven)
    stream:connect(h:socket().udx, remote.udx.id, client_address.port, client_address.host)
    hs.unproven = true
  elseif not direct and not our_remote then
    -- we are not reachable: the client holepunches; our puncher socket
    -- opens with the first holepunch round
    hs.punch = holepunch.prepare(h, crypto.holepunch_secret(r.hash), remote.firewall, function(fw) return self:_open_puncher(hs, fw) end)
  end
  -- otherwise the client connects to us (it asked us directly, or we are
  -- OPEN): its first packet connects our stream (firewall "connect"), so a
  -- first message never followed up costs no connection, only a pending slot

  ludx.spawn("dht server handshake", function()
    -- punching takes a probe round and up to 10 probe rounds of 1 s
    local ok = stream:wait_connected(hs.punch and 2 * HANDSHAKE_INITIAL_TIMEOUT or HANDSHAKE_INITIAL_TIMEOUT)
    -- the stream (if any) now holds the puncher socket; closing waits for it
    if hs.punch and hs.punch.puncher then hs.punch.puncher:release() end
    local live = ok and not self.closed and not hs.settled
    local conn
    -- our side of the SecretStream, careful resume seeded before its header
    local function open_conn()
      self:_resume(stream, r.remote_public_key)
      return require("ludx.secretstream").wrap(stream, { initiator = false, handshake = handshake, keepalive = self.keepalive })
    end
    if live and hs.unproven then
      -- we connected to the named address at once: our header goes out
      -- (the client waits for it), and the handshake stays pending until
      -- a packet comes back from there; a silent address costs no
      -- connection and makes nobody known
      conn = open_conn()
      local deadline = ludx.now() + HANDSHAKE_INITIAL_TIMEOUT
      while not (stream.closed or stream.shut or hs.settled or self.closed) and stream:stats().packets_received == 0 and ludx.now() < deadline do
        stream:wait_readable(deadline - ludx.now()) -- a readable event (or the timeout)
      end
      live = not (stream.closed or hs.settled or self.closed) and stream:stats().packets_received > 0
    end
    self:_settle(hs)
    if not live then
      if conn then conn:destroy() end
      stream:destroy()
      return
    end
    hs.done = true
    self.known:set(hs.host, true)
    if not conn then conn = open_conn() end
    conn.udx_stream = stream
    self.connections = self.connections + 1
    local t = ludx.spawn("dht connection", self.handler, conn)
    t.quiet = false
  end)
  return hs
end

-- Careful resume for a stream about to send its header to a client whose
-- key the handshake proved: seeded from the node's store, remembered there
-- when it closes.
function Server:_resume(stream, remote_public_key)
  if not self.resume then return end
  local host = stream:remote_address()
  if host then self.resume:track(stream, remote_public_key, host) end
end

M.errors = errors

return M
