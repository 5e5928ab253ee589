-- A testnet of persistent ludx DHT nodes on 127.0.0.1 for a Node harness
-- (tools/attack/hyperdht-suite/, issue 13): `build/ludx
-- tools/attack/ludx_testnet.lua N [BOOTSTRAP_HOST:PORT]` starts N nodes
-- (the first a bootstrapper unless a bootstrap is given), prints
-- {"event":"ready","bootstrap":"127.0.0.1:P","ports":[...]} and then serves
-- until stdin closes. The line "stats" on stdin prints the summed drop and
-- relay counters of all nodes as {"event":"stats",...}.
local ludx = require "ludx"
local dht = require "ludx.dht"
local json = require "ludx.json"
local stdin = require "ludx.stdin"

-- LUDX_RELAY_TRACE_FILE: every PEER_HANDSHAKE / PEER_HOLEPUNCH request a node
-- gets, what its router did (relayed to, replied to, refused) as JSON lines.
local trace_file = os.getenv("LUDX_RELAY_TRACE_FILE")
local trace_out = trace_file and assert(io.open(trace_file, "a"))
local t0 = ludx.now()

local function addr(a)
  return a and (tostring(a.host) .. ":" .. tostring(a.port)) or nil
end

local function trace(node)
  local h = node:raw()
  local hm = require "ludx.dht.hyperdht_messages"
  local compact = require "ludx.compact"
  local _, port = node:address()
  local r = h.router
  -- replies the amplification guard cuts or drops
  local fit = h.io._fit
  h.io._fit = function(io_, m, buf, budget)
    local before = #buf
    local out = fit(io_, m, buf, budget)
    trace_out:write(json.encode({ t = ludx.now() - t0, node = port, amp = out and "trimmed" or "dropped", to = addr(m.to), tid = m.tid,
      size = before, budget = budget, closer = m.closer_nodes and #m.closer_nodes or 0, value = m.value and #m.value or 0,
      verified = io_:is_verified(m.to.host) }), "\n")
    return out
  end
  local sends = nil -- while a router step runs: its datagrams
  for _, key in ipairs({ "server_socket", "client_socket" }) do
    local sock = h.io[key]
    local send = sock.send
    sock.send = function(so, data, p, host, ttl)
      local a, b, c = send(so, data, p, host, ttl)
      if sends then
        sends[#sends + 1] = string.format("%s %s:%d len=%d first=%d ttl=%s -> %s %s %s", key, tostring(host), p, #data,
          data:byte(1), tostring(ttl), tostring(a), tostring(b), tostring(c))
      end
      return a, b, c
    end
  end
  local function wrap(name, codec, msg)
    local orig = r[name]
    r[name] = function(self, req)
      local ok, v = pcall(compact.decode, codec, req.value or "")
      v = ok and v or {}
      local acts = {}
      local mt = getmetatable(req)
      local reply, relay = mt.reply, mt.relay
      req.reply = function(q, value, o)
        acts[#acts + 1] = "reply->" .. tostring(addr(o and o.to or q.from)) .. (value and "" or "(no value)")
        return reply(q, value, o)
      end
      req.relay = function(q, value, to, o)
        acts[#acts + 1] = "relay->" .. tostring(addr(to))
        return relay(q, value, to, o)
      end
      sends = {}
      local refused = self.stats.refused
      local amp = h.io.stats.amp_dropped
      orig(self, req)
      local sent = sends
      sends = nil
      trace_out:write(json.encode({ t = ludx.now() - t0, node = port, msg = msg, from = addr(req.from), tid = req.tid,
        mode = v.mode, pa = addr(v.peer_address), ra = addr(v.relay_address), acts = json.array(acts),
        sends = json.array(sent), refused = self.stats.refused - refused, amp_dropped = h.io.stats.amp_dropped - amp }), "\n")
      trace_out:flush()
    end
  end
  wrap("on_peer_handshake", hm.handshake, "hs")
  wrap("on_peer_holepunch", hm.holepunch, "hp")
end

local n = tonumber(arg and arg[1] or "") or 30
local boot = arg and arg[2]

local function stats(nodes)
  local s = { event = "stats" }
  for _, node in ipairs(nodes) do
    local h = node:raw()
    for k, v in pairs(h.io.stats) do s[k] = (s[k] or 0) + v end
    for k, v in pairs(h.router.stats) do s["router_" .. k] = (s["router_" .. k] or 0) + v end
  end
  return s
end

do
  local nodes = {}
  local bootstrap
  if boot then
    bootstrap = { boot }
  else
    local first = assert(dht.bootstrapper(0, "127.0.0.1"))
    nodes[1] = first
    local _, port = first:address()
    bootstrap = { "127.0.0.1:" .. port }
  end
  while #nodes < n do
    nodes[#nodes + 1] = assert(dht.new({ bootstrap = bootstrap, host = "127.0.0.1", port = 0, ephemeral = false,
      firewalled = false }))
  end
  local ports = {}
  for i, node in ipairs(nodes) do
    assert(node:ready(60000))
    if trace_out then trace(node) end
    local _, port = node:address()
    ports[i] = port
  end
  io.stdout:write(json.encode({ event = "ready", bootstrap = bootstrap[1], ports = ports }), "\n")
  io.stdout:flush()
  local done = ludx.waiters()
  stdin.watch(function(line)
    if line == "stats" then
      io.stdout:write(json.encode(stats(nodes)), "\n")
      io.stdout:flush()
    end
  end, function() done:wake_all(true) end)
  done:wait("stdin")
  for _, node in ipairs(nodes) do node:destroy() end
end
