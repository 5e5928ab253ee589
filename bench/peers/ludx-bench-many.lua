-- One end of a timed transfer over N concurrent ludx streams sharing one
-- socket: ludx bench/peers/ludx-bench-many.lua '{"role":"send","streams":100}'.
-- The same options and lines as udx-bench-many.js: stream i (from 0) is id
-- 1+2i on the sender and 2+2i on the receiver, each carries bytes/N, and the
-- hash is BLAKE2b-512 of the per-stream BLAKE2b-512 hex digests in order.
-- ludx-only options: trace (ms between samples, 0 = every 10 ms for the
-- median RTT only) and traceFile (where the sender writes its samples, JSON
-- lines): one sample of the streams together each time, with the fields of
-- Stream:trace_take() (t_ms, delivered, cwnd, pacing_rate, rtt_ms,
-- min_rtt_ms, inflight, max_payload) plus streams = N and delivered_bytes:
-- delivered, cwnd, inflight and pacing_rate are sums over the streams,
-- rtt_ms is the median smoothed RTT of the streams with packets in flight,
-- min_rtt_ms the lowest.
local ludx = require "ludx"
local udx = require "ludx.udx"
local json = require "ludx.json"

local core = ludx.core

local DEFAULTS = {
  role = "send", bytes = 100 * 1024 * 1024, chunk = 65536, seed = 1, streams = 100, hash = "after",
  host = "127.0.0.1", port = 0, remoteHost = "127.0.0.1", remotePort = 0, timeoutMs = 120000, watchStdin = true,
  trace = 0, traceFile = "",
}

local function emit(obj)
  io.stdout:write(json.encode(obj), "\n")
  io.stdout:flush()
end

local function cpu_ms()
  local r = core.rusage()
  return r.utime * 1000, r.stime * 1000
end

local function combine(hashes)
  local h = core.hasher()
  for _, x in ipairs(hashes) do h:update(x) end
  return h:hex()
end

-- One trace sample of all the streams together (see the header). acked
-- keeps each stream's payload bytes acknowledged so far: its packets since
-- the last sample times its payload size now (MTU probing changes it).
local function sample_streams(streams, acked)
  local agg = { t_ms = core.wallclock(), streams = #streams, delivered = 0, delivered_bytes = 0, cwnd = 0, inflight = 0,
    pacing_rate = 0, max_payload = 0 }
  local rtts, min_rtt = {}, nil
  for i, s in ipairs(streams) do
    local st = s:stats_struct()
    local delivered = tonumber(st.delivered)
    local a = acked[i] or { packets = 0, bytes = 0 }
    acked[i] = a
    a.bytes = a.bytes + (delivered - a.packets) * st.max_payload
    a.packets = delivered
    agg.delivered = agg.delivered + delivered
    agg.delivered_bytes = agg.delivered_bytes + a.bytes
    agg.cwnd = agg.cwnd + st.cwnd
    agg.inflight = agg.inflight + st.inflight
    agg.pacing_rate = agg.pacing_rate + tonumber(st.pacing_rate)
    agg.max_payload = math.max(agg.max_payload, st.max_payload)
    if st.inflight > 0 and st.rtt_us > 0 then rtts[#rtts + 1] = st.rtt_us / 1000 end
    if st.min_rtt_us > 0 and (not min_rtt or st.min_rtt_us < min_rtt) then min_rtt = st.min_rtt_us end
  end
  table.sort(rtts)
  agg.rtt_ms = rtts[math.floor((#rtts + 1) / 2)] or 0
  agg.min_rtt_ms = (min_rtt or 0) / 1000
  return agg
end

local function write_trace(path, samples)
  local f = assert(io.open(path, "w"))
  for _, sample in ipairs(samples) do f:write(json.encode(sample), "\n") end
  f:close()
end

-- Ends every stream at once (a task each) and waits for all the ENDs' acks.
local function finish_all(streams, timeout)
  local tasks = {}
  for i, s in ipairs(streams) do
    tasks[i] = ludx.spawn("finish " .. i, function() s:finish(timeout) end)
  end
  for _, t in ipairs(tasks) do t:join() end
end

local function main(argv)
  local o = {}
  for k, v in pairs(DEFAULTS) do o[k] = v end
  if argv[1] then
    local given = json.decode(argv[1])
    if type(given) ~= "table" then
      emit({ event = "error", code = "EINVAL", message = "options are one JSON object" })
      return 2
    end
    for k, v in pairs(given) do
      if DEFAULTS[k] == nil then
        emit({ event = "error", code = "EINVAL", message = "unknown option " .. k })
        return 2
      end
      o[k] = v
    end
  end
  local sender = o.role == "send"
  local n = o.streams
  local per = math.floor(o.bytes / n)
  local sock = assert(udx.bind(o.host, o.port))
  local streams = {}
  for i = 0, n - 1 do streams[i + 1] = assert(udx.stream(sender and 1 + 2 * i or 2 + 2 * i)) end

  local remote = ludx.queue()
  if o.remotePort > 0 then remote:put({ port = o.remotePort, host = o.remoteHost }) end
  if o.watchStdin then
    require("ludx.stdin").watch(function(line)
      local m = json.decode(line)
      if type(m) == "table" and type(m.port) == "number" then remote:put(m) end
    end)
  end
  ludx.after(o.timeoutMs, function()
    emit({ event = "error", code = "ETIMEDOUT", message = "gave up after " .. o.timeoutMs .. " ms" })
    os.exit(1)
  end)

  local host, port = sock:address()
  emit({ event = "ready", host = host, port = port, streams = n })
  local r = remote:get()
  for i, s in ipairs(streams) do
    assert(s:connect(sock, sender and 2 + 2 * (i - 1) or 1 + 2 * (i - 1), r.port, r.host or o.remoteHost))
  end
  emit({ event = "connect", remotePort = r.port, streams = n })

  local u0, s0 = cpu_ms()
  local t0 = core.wallclock()
  local result
  local err
  if sender then
    local buf = core.datagen(o.seed):next(o.chunk)
    local full = math.floor(per / o.chunk)
    local tail = per - full * o.chunk
    local h = core.hasher()
    for _ = 1, full do h:update(buf) end
    if tail > 0 then h:update(buf:sub(1, tail)) end
    local one = h:hex()
    emit({ event = "start", t = t0 })
    -- every 10 ms (or trace ms), the smoothed RTT of each stream with
    -- packets in flight: the median of these is the RTT the streams saw
    -- together; with a trace, one sample of the streams together each time.
    -- The writers sample too: on a fast loopback one loop turn takes ~15 ms
    -- of writes and acks, and a sleeping sampler alone woke that rarely (37
    -- samples in a 256 MB transfer).
    local rtts, sampling, samples, acked = {}, true, {}, {}
    local tracing = o.trace > 0 and o.traceFile ~= ""
    local interval, last_sample = o.trace > 0 and o.trace or 10, 0
    local function maybe_sample()
      local t = core.wallclock()
      if t - last_sample < interval then return end
      last_sample = t
      if tracing then samples[#samples + 1] = sample_streams(streams, acked) end
      for _, s in ipairs(streams) do
        local st = s:stats_struct()
        if st.inflight > 0 and st.rtt_us > 0 then rtts[#rtts + 1] = st.rtt_us / 1000 end
      end
    end
    local tasks, done_at = {}, {}
    for i, s in ipairs(streams) do
      tasks[i] = ludx.spawn("send " .. i, function()
        for _ = 1, full do
          assert(s:write(buf))
          maybe_sample()
        end
        if tail > 0 then assert(s:write(buf:sub(1, tail))) end
        assert(s:flush(o.timeoutMs))
        done_at[i] = core.wallclock()
      end)
    end
    local sampler = ludx.spawn("rtt samples", function()
      while sampling do
        ludx.sleep(interval)
        maybe_sample()
      end
    end)
    for _, t in ipairs(tasks) do
      local ok, msg = t:join()
      if ok == nil and msg then err = msg end
    end
    sampling = false
    sampler:join()
    if tracing then write_trace(o.traceFile, samples) end
    local t1 = core.wallclock()
    -- Jain's fairness index of the streams' rates (bytes / time to flush)
    local sum, sum2 = 0, 0
    for i = 1, n do
      local x = per / math.max(1e-3, (done_at[i] or t1) - t0)
      sum, sum2 = sum + x, sum2 + x * x
    end
    table.sort(rtts)
    local u1, s1 = cpu_ms()
    -- every stream's END at once, as udx-bench-many.js ends them: one
    -- finish after another (each waits for its END's ack) kept the last
    -- receiver waiting 16 round trips, 10% of the 16-stream path case
    finish_all(streams, o.timeoutMs)
    for _, s in ipairs(streams) do while s:read(nil, o.timeoutMs) do end end
    local hashes = {}
    for i = 1, n do hashes[i] = one end
    result = { bytes = per * n, hash = combine(hashes), t_start = t0, t_end = t1, cpu_user_ms = u1 - u0, cpu_sys_ms = s1 - s0,
      jain = sum2 > 0 and sum * sum / (n * sum2) or json.null, rttMedianMs = rtts[math.floor((#rtts + 1) / 2)] or json.null }
  else
    local first, t25, t75
    local last -- when the last byte came (the ENDs follow the sender's flushes)
    local bytes = 0
    local total = per * n
    local kept = {}
    local tasks = {}
    for i, s in ipairs(streams) do
      kept[i] = {}
      tasks[i] = ludx.spawn("recv " .. i, function()
        while true do
          local chunk, msg, code = s:read(nil, o.timeoutMs)
          if not chunk then
            if code then error(msg, 0) end
            break
          end
          if not first then
            first = core.wallclock()
            emit({ event = "start", t = first })
          end
          bytes = bytes + #chunk
          last = core.wallclock()
          -- when a quarter and three quarters had arrived: the rate between
          -- is the steady state's, without the start and the end
          if not t25 and bytes >= total / 4 then t25 = core.wallclock() end
          if not t75 and bytes >= total * 3 / 4 then t75 = core.wallclock() end
          if o.hash ~= "off" then kept[i][#kept[i] + 1] = chunk end
        end
      end)
    end
    for _, t in ipairs(tasks) do
      local ok, msg = t:join()
      if ok == nil and msg then err = msg end
    end
    local t1 = core.wallclock()
    local u1, s1 = cpu_ms()
    finish_all(streams, o.timeoutMs)
    local hashes = {}
    for i = 1, n do
      local h = core.hasher()
      for _, c in ipairs(kept[i]) do h:update(c) end
      hashes[i] = h:hex()
    end
    result = { bytes = bytes, hash = o.hash ~= "off" and combine(hashes) or json.null, t_start = first or t0, t_end = t1, t_last = last or t1,
      cpu_user_ms = u1 - u0, cpu_sys_ms = s1 - s0,
      steadyBytesPerS = (t25 and t75 and t75 > t25) and (total / 2) / ((t75 - t25) / 1000) or json.null }
  end
  local retransmits, rtos = 0, 0
  for _, s in ipairs(streams) do
    local st = s:stats()
    retransmits, rtos = retransmits + st.retransmits, rtos + st.rto_count
  end
  result.event = "done"
  result.role = o.role
  result.streams = n
  result.ms = result.t_end - result.t_start
  result.retransmits = retransmits
  result.rtoCount = rtos
  result.error = err or json.null
  emit(result)
  os.exit(err and 1 or 0)
end

main({ ... })
