-- Server handshakes per second per core: a ludx server and a Node hyperdht
-- server (each in its own process, on a two-node loopback DHT) answer
-- valid Noise IK first messages (PEER_HANDSHAKE FROM_CLIENT, each with a
-- fresh ephemeral key, so each is a full handshake) sent closed-loop from
-- this process. Reports answered handshakes per CPU-second of the server
-- process, per wall second, and the answer time (median, p99).
--
-- The second case floods a ludx server with 2,000 valid first messages per
-- second (spec/attack_handshake_peer.lua) while a legitimate client
-- connects and echoes over and over: the fraction connected and its p50 /
-- p99 connect times.
local ludx = require "ludx"
local udx = require "ludx.udx"
local dht = require "ludx.dht"
local json = require "ludx.json"
local process = require "ludx.process"
local bench = require "ludx.bench"
local crypto = require "ludx.dht.crypto"
local compact = require "ludx.compact"
local hm = require "ludx.dht.hyperdht_messages"
local msgs = require "ludx.dht.messages"
local consts = require "ludx.dht.constants"

local format = string.format
local KEY_SEED = string.rep("11", 32)

local function percentile(t, p)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  if #s == 0 then return 0 end
  return s[math.max(1, math.ceil(p * #s))]
end

local function hex(s)
  return (s:gsub(".", function(c) return format("%02x", c:byte()) end))
end

local function unhex(s)
  return (s:gsub("..", function(h) return string.char(tonumber(h, 16)) end))
end

-- N valid first messages for the server key (fresh ephemeral keys).
local function first_messages(server_pk, n)
  local out = {}
  local kp = crypto.keypair()
  for i = 1, n do
    local noise = crypto.noise_ik(true, kp, server_pk)
    out[i] = assert(noise:send(compact.encode(hm.noise_payload, {
      error = consts.ERROR.NONE,
      firewall = consts.FIREWALL.UNKNOWN,
      addresses4 = {},
      udx = { reusable_socket = false, id = i, seq = 0 },
      secret_stream = {},
    })))
  end
  return out
end

local function start_peer(ctx, system)
  local root = ctx.root
  local p, msg
  if system == "ludx" then
    p, msg = process.spawn(ludx.core.exepath(), { root .. "/bench/peers/ludx-handshake-server.lua", json.encode({ keySeed = KEY_SEED }) })
  else
    p, msg = process.spawn("node", { root .. "/bench/peers/hyperdht-handshake-server.js", json.encode({ keySeed = KEY_SEED }) })
  end
  if not p then error(system .. " server did not start: " .. tostring(msg)) end
  local ready = p:read_json(60000)
  if not ready or ready.event ~= "ready" then
    local err = p:stderr()
    p:close()
    error(system .. " server not ready: " .. tostring(ready and ready.message) .. " " .. err)
  end
  return p, ready
end

local function cpu(p)
  assert(p:write("cpu\n"))
  while true do
    local line = p:read_json(10000)
    if not line then error("no cpu line") end
    if line.event == "cpu" then return line.ms, line.handshakes end
  end
end

local function handshakes(ctx, system)
  local n = ctx.quick and 600 or 3000
  local inflight = 16
  local p, ready = start_peer(ctx, system)
  local pk = unhex(ready.publicKey)
  local target = crypto.hash(pk)
  local list = first_messages(pk, n)
  local socks = {}
  for i = 1, inflight do socks[i] = assert(udx.bind("127.0.0.1", 0)) end
  local cpu0 = cpu(p)
  local t0 = ludx.now()
  local next_msg, answered, lost, times = 1, 0, 0, {}
  local tasks = {}
  for i = 1, inflight do
    tasks[i] = ludx.spawn("handshake load " .. i, function()
      local s = socks[i]
      local tid = i * 4096
      while next_msg <= n do
        local msg1 = list[next_msg]
        next_msg = next_msg + 1
        tid = tid + 1
        local value = compact.encode(hm.handshake, { mode = hm.FROM_CLIENT, noise = msg1 })
        local req = msgs.encode_request({ tid = tid % 65536, to = { host = "127.0.0.1", port = ready.port },
          command = consts.COMMANDS.PEER_HANDSHAKE, target = target, value = value })
        local t1 = ludx.now()
        s:send(req, ready.port, "127.0.0.1")
        local got = false
        while not got do
          local d = s:recv(2000)
          if not d then break end
          local kind, m = msgs.decode(d)
          if kind == "response" and m.tid == tid % 65536 then got = true end
        end
        if got then
          answered = answered + 1
          times[#times + 1] = ludx.now() - t1
        else
          lost = lost + 1
        end
      end
    end)
  end
  for _, t in ipairs(tasks) do t:join() end
  local wall = (ludx.now() - t0) / 1000
  local cpu1, count = cpu(p)
  for _, s in ipairs(socks) do s:close() end
  p:close()
  local cpu_s = (cpu1 - cpu0) / 1000
  ctx.log(format("handshake: %s answered %d/%d (server counted %s) in %.2f s, server CPU %.2f s", system, answered, n,
    tostring(count), wall, cpu_s))
  return {
    ok = answered > 0,
    error = answered == 0 and "no answers" or nil,
    sent = n,
    answered = answered,
    lost = lost,
    cpu_s = cpu_s,
    wall_s = wall,
    per_core = cpu_s > 0 and answered / cpu_s or 0,
    per_s = answered / wall,
    ms_median = percentile(times, 0.5),
    ms_p99 = percentile(times, 0.99),
    mb_s = 0,
  }
end

local function render_rate(samples, case_id)
  local out = { format("  %-6s %5s %18s %14s %10s %10s %8s", "system", "runs", "handshakes/s/core", "handshakes/s",
    "answer ms", "p99 ms", "lost") }
  local by = {}
  for _, s in ipairs(samples) do
    if s.case == case_id and not s.warmup then
      by[s.system] = by[s.system] or {}
      table.insert(by[s.system], s)
    end
  end
  for _, system in ipairs({ "ludx", "node" }) do
    local list = by[system] or {}
    local ok = {}
    for _, s in ipairs(list) do
      if s.ok then ok[#ok + 1] = s end
    end
    if #ok == 0 then
      out[#out + 1] = format("  %-6s FAILED: %s", system, tostring(list[1] and list[1].error or "no samples"))
    else
      local function med(f)
        local t = {}
        for i, s in ipairs(ok) do t[i] = s[f] end
        return bench.median(t)
      end
      out[#out + 1] = format("  %-6s %5d %18.0f %14.0f %10.2f %10.2f %8d", system, #ok, med("per_core"), med("per_s"),
        med("ms_median"), med("ms_p99"), med("lost"))
    end
  end
  return table.concat(out, "\n")
end

-- A legitimate client under a flood of valid first messages.
local function flood(ctx)
  local seconds = ctx.quick and 4 or 10
  local tn = assert(dht.testnet(3, { timeout = 30000 }))
  local sn = assert(tn:create_node())
  local kp = dht.keypair(unhex(KEY_SEED))
  local server = sn:server(function(conn)
    local d = conn:read(nil, 10000)
    if d then conn:write(d) end
    conn:finish(5000)
    conn:close()
  end)
  assert(server:listen(kp, 30000))
  local cn = assert(tn:create_node())
  local warm = assert(cn:connect(kp.public_key, { timeout = 10000 }))
  warm:close()
  local _, port = sn:address()
  local p = assert(process.spawn(ludx.core.exepath(), {
    ctx.root .. "/spec/attack_handshake_peer.lua", tostring(port), hex(crypto.hash(kp.public_key)),
    hex(kp.public_key), "2000", tostring(seconds), "16", "direct",
  }))
  assert(p:read_line(120000) == "ready", "flood peer not ready")
  local done
  ludx.spawn("flood reader", function() done = p:read_line(seconds * 1000 + 60000) or "lost" end)
  local tries, ok, times = 0, 0, {}
  while not done do
    tries = tries + 1
    local t0 = ludx.now()
    local conn, msg = cn:connect(kp.public_key, { timeout = 5000 })
    local t1 = ludx.now()
    if conn and conn:write("ping") and conn:read(nil, 5000) == "ping" then
      ok = ok + 1
      times[#times + 1] = ludx.now() - t0
    end
    if ludx.now() - t0 > 300 then
      ctx.log(format("handshake flood: a slow try: connect %.0f ms%s, echo %.0f ms", t1 - t0, conn and "" or (" (" .. tostring(msg) .. ")"),
        ludx.now() - t1))
    end
    if conn then conn:close() end
    -- a client connects now and then, not in a tight loop (the server
    -- admits 16 handshakes a second from one source)
    ludx.sleep(100)
  end
  p:close()
  local sent, ms = done:match("done (%d+) (%d+)")
  local st = server.stats
  server:close({ fast = true })
  cn:destroy()
  sn:destroy()
  tn:destroy()
  return {
    ok = true,
    flood_rate = sent and tonumber(sent) / (tonumber(ms) / 1000) or 0,
    tries = tries,
    connected = ok / math.max(1, tries),
    ms_median = percentile(times, 0.5),
    ms_p99 = percentile(times, 0.99),
    admitted = st.handshakes,
    refused = st.refused,
    mb_s = 0,
  }
end

local function render_flood(samples, case_id)
  local out = { format("  %-6s %12s %8s %10s %10s %10s %10s %10s", "system", "flood msg/s", "tries", "connected",
    "p50 ms", "p99 ms", "admitted", "refused") }
  for _, s in ipairs(samples) do
    if s.case == case_id and not s.warmup then
      if s.ok then
        out[#out + 1] = format("  %-6s %12.0f %8d %9.1f%% %10.1f %10.1f %10d %10d", s.system, s.flood_rate, s.tries,
          100 * s.connected, s.ms_median, s.ms_p99, s.admitted, s.refused)
      else
        out[#out + 1] = "  FAILED: " .. tostring(s.error)
      end
    end
  end
  return table.concat(out, "\n")
end

return {
  name = "handshake",
  cases = {
    {
      name = "rate",
      description = "valid Noise IK first messages answered per CPU-second of the server process (loopback, closed loop)",
      systems = { "ludx", "node" },
      baseline = "node",
      runs = 3,
      warmups = 0,
      run = handshakes,
      render = render_rate,
    },
    {
      name = "flood",
      description = "a legitimate client connects and echoes while 2,000 valid first messages/s arrive (ludx server)",
      systems = { "ludx" },
      baseline = "ludx",
      runs = 1,
      warmups = 0,
      run = function(ctx) return flood(ctx) end,
      render = render_flood,
    },
  },
}
