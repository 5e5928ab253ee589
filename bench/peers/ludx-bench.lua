-- One end of a timed bulk transfer over ludx (optionally SecretStream):
--   ludx bench/peers/ludx-bench.lua '{"role":"send",...}'
-- The same options and JSON lines as udx-bench.js (bench/peers/README.md):
-- ready, connect, [handshake], start, done. Extra options: trace (ms between
-- stats samples, 0 = off) and traceFile (where the samples go, JSON lines),
-- ackPolicy ("each" or "batch").
local ludx = require "ludx"
local udx = require "ludx.udx"
local json = require "ludx.json"
local secretstream = require "ludx.secretstream"

local core = ludx.core

local DEFAULTS = {
  role = "send", bytes = 200 * 1024 * 1024, chunk = 65536, seed = 1, secret = false, keySeed = "",
  hash = "inline", id = 0, remoteId = 0, host = "127.0.0.1", port = 0, remoteHost = "127.0.0.1",
  remotePort = 0, timeoutMs = 120000, watchStdin = true, trace = 0, traceFile = "", ackPolicy = "",
  resumeRate = 0, resumeRttMs = 0, -- careful resume from an earlier transfer (bytes/s, ms)
}

local function emit(obj)
  io.stdout:write(json.encode(obj), "\n")
  io.stdout:flush()
end

local wall_ms = core.wallclock

local function cpu_ms()
  local r = core.rusage()
  return r.utime * 1000, r.stime * 1000
end

-- Memory of the transport: the process's RSS less the data the bench
-- itself holds (the sender's blocks, the bytes a receiver keeps for its
-- hash), sampled every RSS_EVERY bytes, and the kernel's peak (VmHWM, reset
-- when the transfer starts) less what is held at the end, which catches a
-- peak between samples (inside one call); the larger goes out as rssMb.
local RSS_EVERY = 4 * 1024 * 1024

local function status_kb(field)
  local f = io.open("/proc/self/status")
  if not f then return 0 end
  local s = f:read("*a")
  f:close()
  return tonumber(s:match(field .. ":%s*(%d+)")) or 0
end

local function rss_meter()
  local m = { peak = 0, next = 0 }
  function m.sample(done, held)
    if done < m.next then return end
    m.next = done + RSS_EVERY
    local v = status_kb("VmRSS") * 1024 - held
    if v > m.peak then m.peak = v end
  end
  -- the start: VmHWM from here (what setup took does not count)
  function m.start(held)
    local f = io.open("/proc/self/clear_refs", "w")
    if f then
      f:write("5")
      f:close()
    end
    m.sample(0, held)
  end
  -- the end: held is what the bench holds now (its most)
  function m.finish(held)
    m.next = 0
    m.sample(0, held)
    local v = status_kb("VmHWM") * 1024 - held
    if v > m.peak then m.peak = v end
  end
  function m.mb() return m.peak / 1048576 end
  return m
end

local function parse_args(argv)
  local o = {}
  for k, v in pairs(DEFAULTS) do o[k] = v end
  if argv[1] and argv[1]:match("^%s*{") then
    local given = assert(json.decode(argv[1]))
    for k, v in pairs(given) do
      if DEFAULTS[k] == nil then error("unknown option " .. k, 0) end
      o[k] = v
    end
  else
    local i = 1
    while argv[i] do
      local key, value = argv[i]:match("^%-%-([%w-]+)=?(.*)$")
      if not key then error("unknown option " .. argv[i], 0) end
      key = key:gsub("-(%l)", string.upper)
      if DEFAULTS[key] == nil then error("unknown option " .. argv[i], 0) end
      if value == "" then
        i = i + 1
        value = argv[i]
      end
      if type(DEFAULTS[key]) == "number" then value = tonumber(value)
      elseif type(DEFAULTS[key]) == "boolean" then value = value == "true" or value == "1" end
      o[key] = value
      i = i + 1
    end
  end
  return o
end

local function raw_stats(s)
  local st = s:stats()
  return {
    mtu = st.mtu, rtt = st.rtt_ms, cwnd = st.cwnd, rtoCount = st.rto_count, retransmits = st.retransmits,
    fastRecoveries = st.fast_recoveries, packetsTransmitted = st.packets_sent, packetsReceived = st.packets_received,
    bytesTransmitted = st.bytes_sent, bytesReceived = st.bytes_received, bbrState = st.bbr_state,
    pacingRate = st.pacing_rate, minRtt = st.min_rtt_ms, bbrBw = st.bbr_bw,
  }
end

-- The data is distinct per write: the xorshift32 stream from seed, cut
-- into `chunk`-byte writes, made before the clock starts (up to 1 GiB of
-- it; past that the writes cycle through what was made). One block sent
-- again and again flatters a LuaJIT receiver: equal strings are interned,
-- so a receiver that gets whole blocks keeps one copy and never touches new
-- memory, which 64 KB writes got and one big write not.
local DISTINCT_MAX = 1024 * 1024 * 1024

local function send(stream, raw, o)
  local gen = core.datagen(o.seed)
  local full = math.floor(o.bytes / o.chunk)
  local tail = o.bytes - full * o.chunk
  local blocks = {}
  for i = 1, math.max(1, math.min(full, math.ceil(DISTINCT_MAX / o.chunk))) do blocks[i] = gen:next(o.chunk) end
  local writes = {}
  for i = 1, full do writes[i] = blocks[(i - 1) % #blocks + 1] end
  if tail > 0 then writes[full + 1] = (full < #blocks and gen:next(tail)) or blocks[full % #blocks + 1]:sub(1, tail) end
  local hash = nil
  if o.hash ~= "off" then
    local h = core.hasher()
    for i = 1, #writes do h:update(writes[i]) end
    hash = h:hex()
  end
  local held = 0
  for i = 1, #blocks do held = held + #blocks[i] end
  if #writes > full then held = held + #writes[#writes] end
  local rss, written = rss_meter(), 0
  rss.start(held)
  local u0, s0 = cpu_ms()
  local t0 = wall_ms()
  emit({ event = "start", t = t0 })
  local err
  for i = 1, #writes do
    local ok, _, code = stream:write(writes[i])
    if not ok then
      err = code
      break
    end
    written = written + #writes[i]
    rss.sample(written, held)
  end
  -- every byte acked: flush on a plain stream, finish (END acked) on a secret one
  if not err then
    local ok, _, code
    if o.secret then ok, _, code = stream:finish(o.timeoutMs) else ok, _, code = stream:flush(o.timeoutMs) end
    if not ok then err = code end
  end
  local t1 = wall_ms()
  local u1, s1 = cpu_ms()
  rss.finish(held)
  if not err and not o.secret then stream:finish(o.timeoutMs) end
  -- the remote ends its half once it has everything. Reading it closes the
  -- stream; its socket's linger record still acknowledges a retransmitted
  -- END whose first ack was lost (a 5%-loss path loses some)
  while stream:read(nil, o.timeoutMs) do end
  return { bytes = o.bytes, hash = hash, t_start = t0, t_end = t1, ms = t1 - t0, cpu_user_ms = u1 - u0, cpu_sys_ms = s1 - s0,
    rssMb = rss.mb() }, err
end

-- 'after' keeps the bytes as the Node receiver does: copied into 1 MiB
-- batches (in C, outside the Lua heap), hashed after the end. The strings
-- read are dropped as an application drops them; kept as they came,
-- thousands of live read-sized strings would make LuaJIT's allocator and
-- GC pacing, not the transport, what is measured (CPU and memory).
local function recv(stream, raw, o)
  local h = o.hash ~= "off" and core.hasher() or nil
  local kept = o.hash == "after"
  local u0, s0 = cpu_ms()
  local t0 = wall_ms()
  local first
  local last -- when the last byte came (the END follows the sender's flush)
  local bytes = 0
  local err
  local rss = rss_meter()
  rss.start(0)
  while true do
    local chunk, _, code = stream:read(nil, o.timeoutMs)
    if not chunk then
      err = code
      break
    end
    if not first then
      first = wall_ms()
      emit({ event = "start", t = first })
    end
    bytes = bytes + #chunk
    last = wall_ms()
    if kept then h:keep(chunk) elseif h then h:update(chunk) end
    rss.sample(bytes, kept and bytes or 0)
  end
  local t1 = wall_ms()
  local u1, s1 = cpu_ms()
  rss.finish(kept and bytes or 0)
  stream:finish(o.timeoutMs)
  return {
    bytes = bytes, hash = h and h:hex() or nil, t_start = first or t0, t_connect = t0, t_end = t1, t_last = last or t1,
    ms = t1 - (first or t0), cpu_user_ms = u1 - u0, cpu_sys_ms = s1 - s0, rssMb = rss.mb(),
  }, err
end

-- The sender samples its stats every 10 ms (or `trace` ms) for the median
-- RTT during the transfer, and writes the samples to traceFile if given.
local function finish_trace(raw, o)
  local samples = raw:trace_take()
  if o.traceFile ~= "" then
    local f = assert(io.open(o.traceFile, "w"))
    for _, sample in ipairs(samples) do f:write(json.encode(sample), "\n") end
    f:close()
  end
  local rtts = {}
  for _, sample in ipairs(samples) do
    if sample.rtt_ms > 0 then rtts[#rtts + 1] = sample.rtt_ms end
  end
  table.sort(rtts)
  if #rtts == 0 then return nil end
  return rtts[math.floor((#rtts + 1) / 2)]
end

local function main(argv)
  local ok, o = pcall(parse_args, argv)
  if not ok then
    emit({ event = "error", code = "EINVAL", message = tostring(o) })
    return 2
  end
  local sender = o.role == "send"
  if not sender and o.role ~= "recv" then
    emit({ event = "error", code = "EINVAL", message = "role must be send or recv" })
    return 2
  end
  local id = o.id ~= 0 and o.id or (sender and 1 or 2)
  local remote_id = o.remoteId ~= 0 and o.remoteId or (sender and 2 or 1)
  -- linger: a closed stream acks the other end's retransmitted END for at
  -- least 15 s, past udx-native's give-up (13 RTO), while we wait for release
  local sock = assert(udx.bind(o.host, o.port, { linger_ms = 15000 }))
  local raw = assert(udx.stream(id, { ack_policy = o.ackPolicy ~= "" and o.ackPolicy or nil }))
  local status = 0

  local connected = ludx.queue()
  if o.remotePort > 0 then connected:put({ port = o.remotePort, host = o.remoteHost }) end
  -- after our done line the harness closes stdin once both ends are done:
  -- until then the socket stays open, and with it the closed stream's
  -- linger record that acknowledges a retransmitted END
  local released = ludx.queue()
  local done = false
  if o.watchStdin then
    -- the harness sends {"port":P}; a closed stdin means it is gone
    require("ludx.stdin").watch(function(line)
      local m = json.decode(line)
      if type(m) == "table" and type(m.port) == "number" then connected:put(m) end
    end, function()
      if not done then
        io.stderr:write("stdin closed, exiting\n")
        os.exit(3)
      end
      released:put(true)
    end)
  end

  local watchdog = ludx.after(o.timeoutMs, function()
    emit({ event = "error", code = "ETIMEDOUT", message = "gave up after " .. o.timeoutMs .. " ms" })
    os.exit(1)
  end)

  local host, port = sock:address()
  emit({ event = "ready", host = host, port = port, id = id })
  local remote = connected:get()
  assert(raw:connect(sock, remote_id, remote.port, remote.host or o.remoteHost))
  if sender and o.resumeRate > 0 then assert(raw:set_resume(o.resumeRate, o.resumeRttMs)) end
  emit({ event = "connect", remoteId = remote_id, remotePort = remote.port })
  if sender then raw:trace(o.trace > 0 and o.trace or 10) end
  local stream = raw
  if o.secret then
    local seed = o.keySeed ~= "" and require("ludx.crypto").unhex(o.keySeed) or string.rep(string.char(id % 256), 32)
    stream = secretstream.wrap(raw, { initiator = sender, keypair = secretstream.keypair(seed) })
    assert(stream:ready(o.timeoutMs))
    emit({ event = "handshake", handshakeHash = require("ludx.crypto").hex(stream.handshake_hash) })
  end
  local r, err
  if sender then r, err = send(stream, raw, o) else r, err = recv(stream, raw, o) end
  watchdog:cancel()
  local rtt_median = sender and finish_trace(raw, o) or nil
  r.event = "done"
  r.role = o.role
  r.secret = o.secret
  r.mb_per_s = r.bytes / 1e6 / (r.ms / 1000)
  local st = raw_stats(raw)
  r.retransmits = st.retransmits
  r.rtoCount = st.rtoCount
  r.error = err or json.null
  r.stats = st
  r.rttMedianMs = rtt_median or json.null
  emit(r)
  if err then status = 1 end
  done = true
  if o.watchStdin then released:get(10000) end
  raw:destroy() -- the process exits: no linger
  sock:close()
  os.exit(status)
end

main({ ... })
