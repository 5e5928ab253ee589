-- dht.connect(public_key) (D.8): Noise IK with prologue NS.PEER_HANDSHAKE
-- sent as PEER_HANDSHAKE through the relays FIND_PEER finds (or given relay
-- addresses, or the server's own node), then a UDX stream on the DHT's own
-- socket to the server's stream id, wrapped as a SecretStream with the
-- handshake's keys.
-- Section marks (C.6, D.8, ...) are those of docs/protocol/hyperswarm.md.
--
-- Paths: a direct reply (connect to the node we asked); a server that is
-- OPEN (its first public address, else the address the relay saw); a
-- client that is OPEN (the server connects to us; we wait for its first
-- packet); otherwise holepunching (ludx.dht.holepunch) through the
-- server's relay, and the stream runs on the puncher socket.
local compact = require "ludx.compact"
local crypto = require "ludx.dht.crypto"
local hm = require "ludx.dht.hyperdht_messages"
local consts = require "ludx.dht.constants"
local errors = require "ludx.dht.errors"
local server_mod = require "ludx.dht.server"
local holepunch = require "ludx.dht.holepunch"

local FIREWALL, ERROR = consts.FIREWALL, consts.ERROR
local PARALLEL = 2
local PASSIVE_TIMEOUT = 10000

local M = {}

--- Reserved / private IPv4 ranges (not worth connecting to from afar).
function M.is_bogon(host)
  local a, b = host:match("^(%d+)%.(%d+)%.")
  a, b = tonumber(a), tonumber(b)
  if not a then return true end
  return a == 0 or a == 10 or a == 127 or a >= 224 or (a == 100 and b >= 64 and b <= 127) or (a == 169 and b == 254)
    or (a == 172 and b >= 16 and b <= 31) or (a == 192 and b == 168) or (a == 198 and (b == 18 or b == 19))
    or host:match("^192%.0%.[02]%.") ~= nil or host:match("^198%.51%.100%.") ~= nil or host:match("^203%.0%.113%.") ~= nil
end

local function first_remote_address(addrs, fallback)
  for _, a in ipairs(addrs or {}) do
    if not M.is_bogon(a.host) then return a end
  end
  return fallback
end

-- Runs the handshake over the relays; cb({payload, result, address,
-- server_address, client_address, relayed}) or cb(nil, err).
local function handshake(h, target, public_key, keypair, opts, stream_id, cb)
  local remote = h:remote_address()
  local payload = {
    error = ERROR.NONE,
    firewall = remote and FIREWALL.OPEN or FIREWALL.UNKNOWN,
    addresses4 = remote and { remote } or {},
    udx = { reusable_socket = false, id = stream_id, seq = 0 },
    secret_stream = {},
  }
  local noise = crypto.noise_ik(true, keypair, public_key)
  local msg1 = noise:send(compact.encode(hm.noise_payload, payload))
  if not msg1 then return cb(nil, errors.HANDSHAKE_INVALID()) end
  local session = h:session()
  local finished, attempts, inflight, query_done = false, 0, 0, false
  local pending, seen = {}, {}
  local q

  local function finish(res, err)
    if finished then return end
    finished = true
    if q then q:destroy() end
    session:destroy()
    cb(res, err)
  end

  local try_next
  local function on_reply(address, reply, err)
    inflight = inflight - 1
    if finished then return end
    if reply then
      local plain, msg, code = noise:recv(reply.noise)
      if not plain then return finish(nil, errors.new("HANDSHAKE_INVALID", msg or code)) end
      local sp = compact.decode(hm.noise_payload, plain)
      if not sp then return finish(nil, errors.HANDSHAKE_INVALID()) end
      if sp.version ~= 1 then return finish(nil, errors.SERVER_INCOMPATIBLE()) end
      if sp.error ~= ERROR.NONE then return finish(nil, errors.SERVER_ERROR("Server returned error " .. sp.error)) end
      if not sp.udx then return finish(nil, errors.SERVER_ERROR("Server did not send UDX data")) end
      return finish({
        payload = sp,
        result = noise:result(),
        address = address,
        relayed = reply.relayed,
        server_address = reply.server_address,
        client_address = reply.client_address,
        client_firewall = payload.firewall,
      })
    end
    try_next()
  end

  try_next = function()
    while not finished and inflight < PARALLEL and #pending > 0 do
      local address = table.remove(pending, 1)
      inflight = inflight + 1
      attempts = attempts + 1
      h.router:peer_handshake(target, { noise = msg1, session = session }, address, function(reply, err)
        on_reply(address, reply, err)
      end)
    end
    if not finished and query_done and inflight == 0 and #pending == 0 then
      finish(nil, attempts > 0 and errors.PEER_CONNECTION_FAILED() or errors.PEER_NOT_FOUND())
    end
  end

  local function add(address)
    local key = address.host .. ":" .. address.port
    if seen[key] then return end
    seen[key] = true
    pending[#pending + 1] = { host = address.host, port = address.port }
    try_next()
  end

  for _, a in ipairs(opts.relay_addresses or {}) do add(a) end
  q = h:find_peer(target, { hash = false, session = session, retries = 3 })
  q.on_data = function(data) add(data.from) end
  q.on_end = function()
    query_done = true
    try_next()
  end
  q:start()
end

--- Connects; returns the SecretStream or nil, msg, code.
function M.connect(node, public_key, opts, timeout)
  local h = node.h
  local await = require("ludx.dht")._await
  local keypair = opts.keypair or node.keypair
  local target = crypto.hash(public_key)
  local check = require "ludx.check"
  local deadline = check.deadline(timeout)
  local function left()
    return check.left(deadline)
  end

  local stream, sid = server_mod.new_stream()
  if not stream then return nil, "no free UDX stream id", "EBUSY" end
  node:_own(stream) -- node:destroy() ends a connect in flight
  local res, msg, code = await("dht connect", left(), function(cb)
    handshake(h, target, public_key, keypair, opts, sid, cb)
  end)
  if not res then
    stream:destroy()
    return nil, msg, code
  end

  local sp = res.payload
  local remote_id = sp.udx.id
  local holepunchable = sp.holepunch ~= nil and #(sp.holepunch.relays or {}) > 0
  if not res.relayed then
    -- the server's own node answered
    stream:connect(h:socket().udx, remote_id, res.address.port, res.address.host)
  elseif sp.firewall == FIREWALL.OPEN or not holepunchable then
    local addr = first_remote_address(sp.addresses4, res.server_address)
    stream:connect(h:socket().udx, remote_id, addr.port, addr.host)
  elseif res.client_firewall == FIREWALL.OPEN then
    -- the server connects to our public address; its first packet connects us
    stream:firewall("connect", remote_id)
    local ok, m, c = stream:wait_connected(math.min(PASSIVE_TIMEOUT, left() or PASSIVE_TIMEOUT))
    if not ok then
      stream:destroy()
      if c == "ETIMEDOUT" then return nil, "Holepunch aborted", "HOLEPUNCH_ABORTED" end
      return nil, m, c
    end
  elseif holepunchable then
    local puncher
    local sock, port, host = await("dht holepunch", left(), function(cb)
      puncher = holepunch.client(h, {
        target = target,
        payload = sp,
        secret = crypto.holepunch_secret(res.result.hash),
        relay_address = res.address,
        server_address = res.server_address,
        session = h:session(),
        fast_open = opts.fast_open,
        -- the view the handshake gave stays for the whole connect
        firewalled = res.client_firewall ~= FIREWALL.OPEN,
      }, cb)
    end)
    if not sock then
      if puncher then puncher:destroy() end
      stream:destroy()
      return nil, port, host
    end
    stream:connect(sock.udx, remote_id, port, host)
    puncher:release()
  else
    stream:destroy()
    return nil, "Cannot holepunch to remote", "CANNOT_HOLEPUNCH"
  end

  -- careful resume: a peer (proven by the handshake) seen before over this
  -- host starts from what was measured then; the stream is remembered when
  -- it closes (ludx.resume)
  if node.resume and opts.resume ~= false then
    local host = stream:remote_address()
    if host then node.resume:track(stream, public_key, host) end
  end
  local secretstream = require "ludx.secretstream"
  local r = res.result
  local conn = secretstream.wrap(stream, {
    initiator = true,
    keepalive = opts.keepalive or 5000,
    handshake = { tx = r.tx, rx = r.rx, hash = r.hash, public_key = keypair.public_key, remote_public_key = public_key },
  })
  conn.udx_stream = stream
  -- A ludx server holds no connection (its handler has not run) until a
  -- packet of ours arrives: when we connect to it (direct, or it is OPEN)
  -- its stream connects on our first packet; when it connects to us (we
  -- are OPEN) it waits for a packet back. We return once its header has
  -- arrived and ours is acknowledged, so a caller that sees the connection
  -- open knows the server has it too, as with Node's hyperdht (it emits a
  -- direct connection at the handshake). ludx.swarm's duplicate rule needs
  -- that order: the accepting side decides before the dialer's opens.
  local ok, m, c = conn:wait_header(math.min(PASSIVE_TIMEOUT, left() or PASSIVE_TIMEOUT))
  if not ok then
    conn:destroy()
    if c == "ETIMEDOUT" then return nil, "the server did not answer on the stream", "PEER_CONNECTION_FAILED" end
    return nil, m, c
  end
  return conn
end

return M
