-- The holepunch rounds over PEER_HOLEPUNCH (D.9), callback style.
-- Section marks (C.6, D.8, ...) are those of docs/protocol/hyperswarm.md.
--
-- Client: a probe round (exchange NAT kinds and addresses through the
-- server's relay), then a punch round (punching = true, tokens echoed to
-- verify addresses), then both pucnhers probe until the client receives
-- the server's echo: that source and puncher socket are the path.
-- Server: prepare() gives the state a handshake needs; on_holepunch()
-- answers each round.
local punch = require "ludx.dht.punch"
local consts = require "ludx.dht.constants"
local errors = require "ludx.dht.errors"

local FIREWALL, ERROR = consts.FIREWALL, consts.ERROR
local HANDSHAKE_INITIAL_TIMEOUT = 10000

local M = {}

local function same(a, b)
  return a ~= nil and b ~= nil and a.host == b.host and a.port == b.port
end

local function consistent(fw)
  return fw == FIREWALL.OPEN or fw == FIREWALL.CONSISTENT
end

local function pick_server_relay(relays, client_relay)
  for _, r in ipairs(relays) do
    if same(r.relay_address, client_relay) then return r end
  end
  return relays[1]
end

--- Client side. c = {target, payload (the server's noise payload, with
-- holepunch), secret (holepunch secret), relay_address (the node the
-- handshake went through), server_address (the REPLY's peer address),
-- session, fast_open, firewalled}. cb(socket, port, host) on a path;
-- cb(nil, err). firewalled: what the handshake told the server (not OPEN:
-- true); our NAT view keeps it for the whole connect (default: the node's
-- state when the puncher opens).
-- The returned puncher owns the socket: call puncher:release() once a
-- stream is connected on it.
function M.client(h, c, cb)
  local puncher, perr = punch.puncher(h, c.session, true, c.payload.firewall, c.firewalled)
  if not puncher then return cb(nil, perr or errors.HOLEPUNCH_ABORTED()) end
  local payload = punch.payload(c.secret, h.env)
  local round = 0
  local finished = false
  local server_relay = pick_server_relay(c.payload.holepunch.relays, c.relay_address)

  local function finish(sock, port, host)
    if finished then return end
    finished = true
    cb(sock, port, host)
  end
  local function fail(err)
    if finished then return end
    finished = true
    puncher.onabort = function() end
    puncher:destroy()
    cb(nil, err)
  end
  puncher.onconnect = function(sock, port, host) finish(sock, port, host) end
  puncher.onabort = function() fail(errors.HOLEPUNCH_ABORTED()) end

  local function update(peer_address, relay_address, p, k)
    round = round + 1
    h.router:peer_holepunch(c.target, {
      id = c.payload.holepunch.id,
      payload = payload:encrypt(p),
      peer_address = peer_address,
      socket = puncher.socket,
      session = c.session,
    }, relay_address, function(res, err)
      if finished then return end
      if not res then return fail(err) end
      local rp = payload:decrypt(res.payload)
      if not rp then return fail(errors.HOLEPUNCH_INVALID()) end
      if rp.error ~= ERROR.NONE then return fail(errors.REMOTE_ABORTED("Remote aborted with error code " .. rp.error)) end
      local echoed = rp.remote_token ~= nil and p.token ~= nil and rp.remote_token == p.token
      puncher:update_remote({ punching = rp.punching, firewall = rp.firewall, addresses = rp.addresses, verified = echoed and peer_address.host or nil })
      k(res, rp)
    end)
  end

  local function abort(err)
    if finished then return end
    pcall(update, server_relay.peer_address, server_relay.relay_address,
      { error = ERROR.ABORTED, firewall = FIREWALL.UNKNOWN, round = round }, function() end)
    fail(err)
  end

  local function probe_round(server_address, retry, k)
    if server_address then puncher:open_session(server_address) end
    update(server_relay.peer_address, server_relay.relay_address, {
      error = ERROR.NONE,
      firewall = puncher.nat.firewall,
      round = round,
      punching = false,
      addresses = puncher.nat.addresses,
      remote_address = server_address,
    }, function(res, rp)
      puncher.nat:add(res.to, res.from)
      local function decide()
        puncher:analyze(function(stable)
          if finished then return end
          if (puncher.remote_firewall == FIREWALL.UNKNOWN or not rp.token) and retry then
            return probe_round(server_address, false, k)
          end
          if puncher.remote_firewall == FIREWALL.UNKNOWN or puncher.nat.firewall == FIREWALL.UNKNOWN then
            return abort(errors.HOLEPUNCH_PROBE_TIMEOUT())
          end
          if puncher.remote_firewall >= FIREWALL.RANDOM and puncher.nat.firewall >= FIREWALL.RANDOM then
            return abort(errors.HOLEPUNCH_DOUBLE_RANDOMIZED_NATS())
          end
          if not stable then return abort(errors.HOLEPUNCH_ABORTED("unstable NAT")) end
          k(rp.token, res.peer_address)
        end)
      end
      -- a remote that does not know its NAT yet gets a moment
      if puncher.remote_firewall == FIREWALL.UNKNOWN then h.env.after(1000, decide) else decide() end
    end)
  end

  probe_round(c.fast_open ~= false and c.server_address or nil, true, function(token, peer_address)
    local server_address = c.server_address
    -- same relay: the server's choice of socket is the one to use
    if same(server_relay.relay_address, c.relay_address) and not same(server_address, peer_address) then
      server_address = peer_address
      puncher:open_session(server_address)
    end
    puncher.nat:freeze()
    update(server_address, c.relay_address, {
      error = ERROR.NONE,
      firewall = puncher.nat.firewall,
      round = round,
      punching = true,
      addresses = puncher.nat.addresses,
      token = payload:token(server_address),
      remote_token = token,
    }, function()
      if not puncher.remote_holepunching then return fail(errors.new("REMOTE_NOT_HOLEPUNCHING", "Remote is not holepunching")) end
      if not puncher:punch() then return fail(errors.new("REMOTE_NOT_HOLEPUNCHABLE", "Remote is not holepunchable")) end
      -- the probes run; onconnect or onabort ends it
    end)
  end)
  return puncher
end

---------------------------------------------------------------------------
-- Server side

--- The holepunch state of one handshake: the payload box, and open(
-- remote_firewall) -> a puncher or nil, called at the first holepunch
-- round (so a handshake costs no socket until a holepunch starts). The
-- puncher is destroyed 10 s after it opened unless punching starts.
function M.prepare(h, secret, remote_firewall, open)
  return { puncher = nil, opened = false, open = open, remote_firewall = remote_firewall, payload = punch.payload(secret, h.env), round = 0 }
end

local function open_puncher(h, hs)
  if hs.opened then return hs.puncher end
  hs.opened = true
  local puncher = hs.open(hs.remote_firewall)
  if not puncher then return nil end
  hs.puncher = puncher
  hs.timer = h.env.after(HANDSHAKE_INITIAL_TIMEOUT, function()
    hs.timer = nil
    if not puncher.punching and not puncher.connected then puncher:destroy() end
  end)
  return puncher
end

local function abort_reply(h, hs, err)
  local p = hs.puncher
  if p then p:destroy() end
  if not hs.payload then return nil end
  return { socket = h:socket(), payload = hs.payload:encrypt({ error = err or ERROR.ABORTED, firewall = FIREWALL.UNKNOWN, round = hs.round }) }
end

local function has_addr(addrs, a)
  for _, x in ipairs(addrs or {}) do
    if x.host == a.host and x.port == a.port then return true end
  end
  return false
end

--- Answers one PEER_HOLEPUNCH round: respond(reply or nil).
function M.on_holepunch(h, announcer, hs, msg, req, respond)
  local peer_address = msg.peer_address
  if not peer_address then return respond(nil) end
  local rp = hs.payload:decrypt(msg.payload)
  if not rp then return respond(nil) end
  local p = open_puncher(h, hs)
  if not p or p.destroyed then return respond(abort_reply(h, hs)) end
  local is_server_relay = announcer:is_relay(req.from)
  if rp.error ~= ERROR.NONE then
    if rp.round >= hs.round then hs.round = rp.round end
    return respond(abort_reply(h, hs))
  end
  local token = hs.payload:token(peer_address)
  local echoed = is_server_relay and rp.remote_token ~= nil and rp.remote_token == token
  if req.socket == p.socket then p.nat:add(req.to, req.from) end
  local addresses = rp.addresses
  if rp.firewall == FIREWALL.OPEN and (addresses == nil or #addresses == 0) and is_server_relay then
    -- a peer OPEN with no addresses (a hyperdht client whose firewall check
    -- ended mid-connect): the source of this sealed round as one of our own
    -- relays saw it is its puncher socket; probe that one address (same
    -- probe bounds) instead of aborting
    addresses = { peer_address }
  end
  if rp.round >= hs.round then
    hs.round = rp.round
    p:update_remote({ punching = rp.punching, firewall = rp.firewall, addresses = addresses, verified = echoed and peer_address.host or nil })
  end
  p:analyze(function(stable)
    if p.destroyed then return respond(nil) end
    if not p.remote_holepunching and not stable then return respond(abort_reply(h, hs)) end
    -- fast mode: the client opened a session to us already
    if consistent(p.nat.firewall) and rp.remote_address and has_addr(p.nat.addresses, rp.remote_address) then
      p:ping(peer_address)
    end
    if p.remote_holepunching then
      if not p:punch() then return respond(abort_reply(h, hs)) end
      if hs.timer then
        hs.timer:cancel()
        hs.timer = nil
      end
    end
    if p.nat.firewall ~= FIREWALL.UNKNOWN then p.nat:freeze() end
    respond({
      socket = p.socket,
      payload = hs.payload:encrypt({
        error = ERROR.NONE,
        firewall = p.nat.firewall,
        round = hs.round,
        connected = p.connected,
        punching = p.punching,
        addresses = p.nat.addresses,
        token = is_server_relay and token or nil,
        remote_token = rp.token,
      }),
    })
  end)
end

return M
