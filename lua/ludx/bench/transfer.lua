-- Timed bulk transfers between two end processes, for bench suites.
--
-- An end is a program speaking the bench peer protocol (bench/peers/README):
-- "ludx" (bench/peers/ludx-bench.lua on the ludx executable), "udx-native"
-- (bench/peers/udx-bench.js on node), "ludx-c" (the C-only driver). A system
-- is "<sender> -> <receiver>". Each end is its own process with the same
-- stream ids (sender 1, receiver 2), so any pairing runs.
local ludx = require "ludx"
local json = require "ludx.json"
local process = require "ludx.process"
local svg = require "ludx.bench.svg"

local core = ludx.core

local M = {}

M.PAIRS = {
  "udx-native -> udx-native",
  "ludx -> ludx",
  "ludx -> udx-native",
  "udx-native -> ludx",
}
M.BASELINE = "udx-native -> udx-native"

local function exe_dir()
  return (core.exepath() or "build/ludx"):match("^(.*)/[^/]*$") or "."
end

local function end_command(kind, root, opts)
  local arg = json.encode(opts)
  local many = opts.streams ~= nil
  if kind == "ludx" then
    return core.exepath(), { root .. "/bench/peers/" .. (many and "ludx-bench-many.lua" or "ludx-bench.lua"), arg }
  elseif kind == "udx-native" then
    return "node", { root .. "/bench/peers/" .. (many and "udx-bench-many.js" or "udx-bench.js"), arg }
  elseif kind == "ludx-c" then
    return exe_dir() .. "/ludx-cbench", { arg }
  end
  error("unknown bench end '" .. tostring(kind) .. "'")
end

local End = {}
End.__index = End

local function start_end(kind, root, opts, wrap)
  local file, args = end_command(kind, root, opts)
  if wrap then
    -- e.g. run inside a network namespace: {"ip", "netns", "exec", name}
    local all = {}
    for i = 2, #wrap do all[#all + 1] = wrap[i] end
    all[#all + 1] = file
    for _, a in ipairs(args) do all[#all + 1] = a end
    file, args = wrap[1], all
  end
  local p, msg = process.spawn(file, args)
  if not p then error(kind .. " end did not start: " .. tostring(msg), 0) end
  local self = setmetatable({ p = p, kind = kind }, End)
  self.ready = self:expect("ready", 20000)
  return self
end

function End:expect(event, timeout)
  local deadline = ludx.now() + timeout
  while true do
    local line, msg = self.p:read_json(math.max(0, deadline - ludx.now()))
    if not line then
      error(string.format("%s end: %s waiting for '%s'; stderr: %s", self.kind, msg or "exited", event, self.p:stderr():sub(1, 2000)), 0)
    end
    if line.event == event then return line end
    if line.event == "error" then
      error(string.format("%s end: %s: %s", self.kind, tostring(line.code), tostring(line.message)), 0)
    end
  end
end

function End:send(obj)
  self.p:write(json.encode(obj) .. "\n")
end

-- An end exits after its done line once its stdin closes (a ludx end keeps
-- its stream until then, to acknowledge the other end's last packets); give
-- it a moment (a profiler wrapped around it must write its data) before it
-- is killed.
function End:close()
  self.p:close_stdin()
  self.p:wait(5000)
  self.p:close()
end

local function gb(bytes)
  return bytes / 1e9
end

local function null(v)
  if v == json.null then return nil end
  return v
end

--- One transfer of `system` with case options; returns a sample.
-- opts: bytes, chunk, secret, seed, sender_opts, receiver_opts, connect
-- (function(sender_end, receiver_end) for paths that are not direct),
-- wrap_sender / wrap_receiver (command prefixes), timeout.
function M.transfer(root, system, opts)
  local skind, rkind = system:match("^(%S+) %-> (%S+)$")
  assert(skind, "a system is '<sender> -> <receiver>'")
  local timeout = opts.timeout or 300000
  -- both ends hash outside their timed window (the receiver keeps the bytes
  -- and hashes them after the end), so CPU figures measure the transport
  local common = { secret = opts.secret or false, seed = opts.seed or 1, timeoutMs = timeout, hash = opts.hash or "after",
    streams = opts.streams }
  -- many-stream receivers know the total (for their steady-state rate)
  local ropts = { role = "recv", bytes = opts.streams and opts.bytes or nil }
  local sopts = { role = "send", bytes = opts.bytes, chunk = opts.chunk or 65536 }
  for k, v in pairs(common) do ropts[k], sopts[k] = v, v end
  for k, v in pairs(opts.receiver_opts or {}) do ropts[k] = v end
  for k, v in pairs(opts.sender_opts or {}) do sopts[k] = v end
  -- ends that are not ludx do not know ludx-only options
  local function strip(kind, o)
    if kind ~= "ludx" then o.trace, o.traceFile = nil, nil end
    if kind ~= "ludx" or o.streams then o.ackPolicy = nil end
    if kind == "ludx-c" or o.streams then o.secret = nil end
    return o
  end
  local r, s
  local ok, err = pcall(function()
    r = start_end(rkind, root, strip(rkind, ropts), opts.wrap_receiver)
    s = start_end(skind, root, strip(skind, sopts), opts.wrap_sender)
    if opts.connect then
      opts.connect(s, r)
    else
      s:send({ port = r.ready.port, host = r.ready.host })
      r:send({ port = s.ready.port, host = s.ready.host })
    end
  end)
  local sample = { ok = false }
  if ok then
    local ok2, res = pcall(function()
      local ds = s:expect("done", timeout)
      local dr = r:expect("done", timeout)
      return { ds, dr }
    end)
    if ok2 then
      local ds, dr = res[1], res[2]
      local serr, rerr = null(ds.error), null(dr.error)
      -- from the sender's first write to the receiver's last byte (t_last;
      -- its END comes an RTT later: the sender flushes, then ends)
      local elapsed = (tonumber(null(dr.t_last)) or dr.t_end) - ds.t_start
      sample.bytes = dr.bytes
      sample.mb_s = dr.bytes / 1e6 / (elapsed / 1000)
      sample.ms = elapsed
      sample.cpu_send_s_per_gb = (ds.cpu_user_ms + ds.cpu_sys_ms) / 1000 / gb(ds.bytes)
      sample.cpu_recv_s_per_gb = (dr.cpu_user_ms + dr.cpu_sys_ms) / 1000 / gb(ds.bytes)
      sample.retransmits = tonumber(null(ds.retransmits)) or 0
      sample.rtos = tonumber(null(ds.rtoCount)) or 0
      sample.sender = ds.stats
      sample.receiver = dr.stats
      sample.extra = {}
      if ds.rttMedianMs and null(ds.rttMedianMs) then sample.extra.rtt_med_ms = ds.rttMedianMs end
      if ds.jain and null(ds.jain) then sample.extra.jain = ds.jain end
      if dr.steadyBytesPerS and null(dr.steadyBytesPerS) then sample.steady_bytes_s = dr.steadyBytesPerS end
      if type(ds.stats) == "table" and tonumber(ds.stats.mtu) then sample.extra.mtu = tonumber(ds.stats.mtu) end
      -- peak RSS of each end less the data the bench holds (MiB)
      if tonumber(null(ds.rssMb)) then sample.extra.rss_send_mb = tonumber(ds.rssMb) end
      if tonumber(null(dr.rssMb)) then sample.extra.rss_recv_mb = tonumber(dr.rssMb) end
      -- a udx-native receiver whose END went unanswered after every byte came
      if null(dr.closeError) then sample.extra.close_timeouts = 1 end
      if serr or rerr then
        sample.error = "sender " .. tostring(serr) .. ", receiver " .. tostring(rerr)
      elseif dr.bytes ~= ds.bytes then
        sample.error = string.format("received %d of %d bytes", dr.bytes, ds.bytes)
      elseif ds.hash ~= dr.hash then
        sample.error = "hash mismatch: sent " .. tostring(ds.hash) .. ", received " .. tostring(dr.hash)
      else
        sample.ok = true
      end
    else
      sample.error = res
    end
  else
    sample.error = err
  end
  if s then s:close() end
  if r then r:close() end
  return sample
end

local function pathemu_bin()
  local dir = exe_dir()
  for _, p in ipairs({ dir .. "/ludx-pathemu", dir .. "/bench/ludx-pathemu" }) do
    local f = io.open(p)
    if f then
      f:close()
      return p
    end
  end
  return dir .. "/ludx-pathemu"
end

--- Emulator flags for a path spec: {rate = bits/s, delay_ms = one way,
-- queue = datagrams, loss = probability (data direction), seed}.
local function pathemu_args(path, a_port, b_port)
  local args = {
    "--a", "127.0.0.1:" .. a_port, "--b", "127.0.0.1:" .. b_port,
    "--delay", tostring(path.delay_ms or 0) .. "ms",
    "--queue", tostring(path.queue or 1000),
    "--overhead", "28", -- IPv4 + UDP headers count towards the rate
    "--seed", tostring(path.seed or 1),
  }
  if path.rate then args[#args + 1] = "--rate"; args[#args + 1] = tostring(path.rate) end
  -- loss on the data direction (sender A -> receiver B), as a lossy link
  if path.loss and path.loss > 0 then args[#args + 1] = "--ab-loss"; args[#args + 1] = tostring(path.loss) end
  return args
end

--- Connects a sender and receiver through a fresh ludx-pathemu; returns
-- the connect function and a way to read the emulator's final counters.
function M.path_connect(path)
  local emu
  local function connect(s, r)
    local p, msg = process.spawn(pathemu_bin(), pathemu_args(path, s.ready.port, r.ready.port))
    if not p then error("ludx-pathemu did not start: " .. tostring(msg), 0) end
    emu = p
    local ready = p:read_json(10000)
    if not ready or ready.event ~= "ready" then error("ludx-pathemu: no ready line; " .. p:stderr(), 0) end
    s:send({ port = ready.port_a, host = "127.0.0.1" })
    r:send({ port = ready.port_b, host = "127.0.0.1" })
  end
  local function finish()
    if not emu then return nil end
    emu:close_stdin()
    local stats = emu:read_json(5000)
    emu:wait(5000)
    emu:close()
    emu = nil
    return stats
  end
  return connect, finish
end

--- The payload rate of a link of `rate` bits/s for full 1500-byte packets:
-- the UDX payload (1452 bytes) of every 1500 bytes on the wire.
function M.payload_rate(rate)
  return rate / 8 * 1452 / 1500
end

--- Whether the ends of a system can run here: false and what to install
-- when an end's program is missing (Node peers, the C driver).
function M.available(system)
  local bench = require "ludx.bench"
  local skind, rkind = tostring(system):match("^(%S+) %-> (%S+)$")
  if not skind then return true end
  for _, kind in ipairs({ skind, rkind }) do
    if kind == "udx-native" then
      local ok, why = bench.node_available("udx-native")
      if not ok then return false, why end
    elseif kind == "ludx-c" then
      local f = io.open(exe_dir() .. "/ludx-cbench")
      if not f then return false, "ludx-cbench is not built (make build)" end
      f:close()
    end
  end
  return true
end

--- A size in bytes as people read it: "200 MB", "512 KB", "100 B".
function M.size(bytes)
  if type(bytes) ~= "number" then return "?" end
  local MB, KB = 1024 * 1024, 1024
  if bytes >= MB then
    local v = bytes / MB
    return (v % 1 == 0 and string.format("%d MB", v) or string.format("%.1f MB", v))
  elseif bytes >= KB then
    local v = bytes / KB
    return (v % 1 == 0 and string.format("%d KB", v) or string.format("%.1f KB", v))
  end
  return string.format("%d B", bytes)
end

-- Fewer points, evenly spaced, the first and last kept.
local function thin(trace, max)
  if #trace <= max then return trace end
  local out = {}
  local step = (#trace - 1) / (max - 1)
  for i = 0, max - 1 do out[#out + 1] = trace[math.floor(i * step + 0.5) + 1] end
  return out
end

M.PLOT_MIN_POINTS = 50
M.PLOT_MAX_POINTS = 600
M.PLOT_RETRIES = 3
M.PLOT_MAX_BYTES = 256 * 1024 * 1024

--- A case over the given systems. spec: name, description ("{size}" is
-- replaced by the bytes actually sent, --quick included), bytes, chunk,
-- secret, systems (default all four pairs), baseline, quick_bytes, and the
-- transfer options above; setup/teardown may set ctx.connect etc.
function M.case(spec)
  local case = {
    kind = "transfer",
    name = spec.name,
    description = spec.description,
    bytes = spec.bytes,
    systems = spec.systems or M.PAIRS,
    baseline = spec.baseline or M.BASELINE,
    setup = spec.setup,
    teardown = spec.teardown,
    runs = spec.runs,
    warmups = spec.warmups,
    skip_quick = spec.skip_quick,
    available = spec.available or M.available,
  }
  local function bytes(ctx)
    if ctx.quick and spec.quick_bytes then return spec.quick_bytes end
    return spec.bytes
  end
  function case.describe(ctx)
    local b = bytes(ctx)
    ctx.bytes = b
    local d = spec.description or spec.name
    if d:find("{size}", 1, true) then return (d:gsub("{size}", M.size(b))) end
    return d .. "; " .. M.size(b) .. " per transfer"
  end
  local function options(ctx)
    local o = {}
    for k, v in pairs(spec) do o[k] = v end
    o.bytes = bytes(ctx)
    o.connect = ctx.connect or spec.connect
    o.wrap_sender = ctx.wrap_sender or spec.wrap_sender
    o.wrap_receiver = ctx.wrap_receiver or spec.wrap_receiver
    return o
  end
  function case.run(ctx, system)
    local o = options(ctx)
    local finish_path
    if spec.path then o.connect, finish_path = M.path_connect(spec.path) end
    if ctx.before_run then ctx.before_run(ctx, system) end
    local sample = M.transfer(ctx.root, system, o)
    if finish_path then
      local stats = finish_path()
      if stats and stats.ab then
        sample.path = stats
        sample.extra = sample.extra or {}
        sample.extra.queue_drops = stats.ab.dropped_queue
        -- how late the emulator forwarded (a loaded machine): a late
        -- emulator idles the link and the figure is the machine's, not ours
        if tonumber(stats.ab.late_max_us) then sample.extra.emu_late_max_ms = stats.ab.late_max_us / 1000 end
      end
      if sample.ok and spec.path.rate then
        sample.extra.goodput_pct = 100 * sample.mb_s * 1e6 / M.payload_rate(spec.path.rate)
        -- from a quarter to three quarters of the bytes (many-stream ludx receivers)
        if sample.steady_bytes_s then
          sample.extra.steady_pct = 100 * sample.steady_bytes_s / M.payload_rate(spec.path.rate)
        end
      end
    end
    if ctx.after_run then ctx.after_run(ctx, system, sample) end
    return sample
  end
  -- One traced transfer of the plot system (its sender must be a ludx end:
  -- the others do not trace). The sampling interval follows the measured
  -- runs (about 200 points). A trace short of PLOT_MIN_POINTS is taken again
  -- at most PLOT_RETRIES times: at a finer interval when the timer can go
  -- finer (a loaded machine fires it late), else with more bytes (1 ms is
  -- the finest; the chart titles say so), up to PLOT_MAX_BYTES. A transfer
  -- that gives no sample at all is not retried: more bytes would not help.
  local function traced(ctx, system, o, interval)
    local trace_file = os.tmpname()
    o.sender_opts = {}
    for k, v in pairs(spec.sender_opts or {}) do o.sender_opts[k] = v end
    o.sender_opts.trace = interval
    o.sender_opts.traceFile = trace_file
    local finish_path
    if spec.path then o.connect, finish_path = M.path_connect(spec.path) end
    local sample = M.transfer(ctx.root, system, o)
    if finish_path then finish_path() end
    local trace = {}
    local f = io.open(trace_file)
    if f then
      for line in f:lines() do trace[#trace + 1] = json.decode(line) end
      f:close()
    end
    os.remove(trace_file)
    if not sample.ok then error("the traced transfer failed: " .. tostring(sample.error), 0) end
    return trace, sample
  end
  -- the traced system: plot_system, else the first of the case's systems
  -- with a ludx sender; a case with none has no plot
  local plot_system = spec.plot_system
  if not plot_system then
    for _, system in ipairs(case.systems) do
      if tostring(system):match("^ludx %->") then
        plot_system = system
        break
      end
    end
  end
  function case.plot(ctx, dir)
    local system = plot_system
    local skind = system:match("^(%S+) %->")
    if skind ~= "ludx" then error("the plot system " .. system .. " has no ludx sender (only ludx ends trace)", 0) end
    if not M.available(system) then error("the plot system " .. system .. " cannot run here", 0) end
    local ms = {}
    for _, s in ipairs(ctx.samples or {}) do
      if s.ok and s.system == system and s.ms then ms[#ms + 1] = s.ms end
    end
    local med = require("ludx.bench").median(ms)
    local interval = med and math.max(1, math.min(100, math.floor(med / 200))) or 5
    local o = options(ctx)
    local base_bytes = o.bytes
    local trace, traced_bytes, traced_interval
    for attempt = 1, 1 + M.PLOT_RETRIES do
      traced_bytes, traced_interval = o.bytes, interval
      trace = traced(ctx, system, o, interval)
      if #trace >= M.PLOT_MIN_POINTS or #trace == 0 or attempt > M.PLOT_RETRIES then break end
      if interval > 1 then
        -- aim at twice the minimum
        interval = math.max(1, math.floor(interval * #trace / (2 * M.PLOT_MIN_POINTS)))
      else
        local factor = math.min(16, math.ceil(2 * M.PLOT_MIN_POINTS / #trace))
        local grown = math.min(M.PLOT_MAX_BYTES, o.bytes * factor)
        if grown <= o.bytes then break end
        o.bytes = grown
      end
    end
    if #trace == 0 then
      error(string.format("the %s sender wrote no trace samples (a %s transfer at %d ms sampling)", system,
        M.size(traced_bytes), traced_interval), 0)
    end
    if #trace < M.PLOT_MIN_POINTS then
      error(string.format("only %d trace samples (a %s transfer at %d ms sampling)", #trace, M.size(traced_bytes),
        traced_interval), 0)
    end
    local title = system .. ", " .. case.describe({ quick = ctx.quick })
    if traced_bytes ~= base_bytes then
      title = title .. string.format(" (traced with %s: %s is too short to plot)", M.size(traced_bytes), M.size(base_bytes))
    end
    local charts = M.plots(dir, ctx.case.suite .. "-" .. spec.name, thin(trace, M.PLOT_MAX_POINTS), title)
    for _, c in ipairs(charts) do
      if ctx.add_chart then ctx.add_chart(c.title, c.svg) end
    end
  end
  if not plot_system then case.plot = nil end
  return case
end

--- Renders the three charts of a traced transfer; writes them into dir
-- when dir is given. Returns {{name, title, svg}, ...}.
function M.plots(dir, stem, trace, title)
  stem = stem:gsub("[^%w%-_]+", "-")
  if #trace < 2 then error("no trace samples", 0) end
  local t0 = trace[1].t_ms
  -- payload bytes acknowledged up to each sample (a many-stream trace
  -- counts them; else packets times the payload size of the time, which
  -- grows as the MTU is probed)
  local acked = { 0 }
  local minrtts = {}
  for i = 2, #trace do
    local a, b = trace[i - 1], trace[i]
    if b.delivered_bytes and a.delivered_bytes then
      acked[i] = acked[i - 1] + b.delivered_bytes - a.delivered_bytes
    else
      acked[i] = acked[i - 1] + (b.delivered - a.delivered) * (b.max_payload or 1400)
    end
    if (b.min_rtt_ms or 0) > 0 then minrtts[#minrtts + 1] = b.min_rtt_ms end
  end
  -- goodput over a trailing window of one round trip (the median min RTT)
  -- and at least 4 sampling intervals: acks come in bursts, and the rate of
  -- each interval alone jumps between 0 and several times the link's
  local steps = {}
  for i = 2, #trace do steps[#steps + 1] = trace[i].t_ms - trace[i - 1].t_ms end
  local median = require("ludx.bench").median
  local window = math.max(median(minrtts) or 0, 4 * (median(steps) or 0))
  local thr, cwnd, pace, rtt, minrtt = {}, {}, {}, {}, {}
  local j = 1
  for i = 2, #trace do
    local b = trace[i]
    local t = (b.t_ms - t0) / 1000
    while j + 1 < i and b.t_ms - trace[j + 1].t_ms >= window do j = j + 1 end
    local dt = (b.t_ms - trace[j].t_ms) / 1000
    if dt > 0 then thr[#thr + 1] = { t, (acked[i] - acked[j]) / 1e6 / dt } end
    cwnd[#cwnd + 1] = { t, b.cwnd }
    pace[#pace + 1] = { t, b.pacing_rate / 1e6 }
    rtt[#rtt + 1] = { t, b.rtt_ms }
    minrtt[#minrtt + 1] = { t, b.min_rtt_ms }
  end
  -- a many-stream sender's samples are of its streams together: the
  -- titles and series say so (one = single stream, many = N streams)
  local n = tonumber(trace[1].streams) or 1
  local function say(one, many) return n > 1 and many:gsub("N", n) or one end
  local charts = {
    { name = "throughput", title = title .. ": goodput" .. say("", ", N streams together"), spec = {
      x_label = "time (s)", y_label = "goodput (MB/s)",
      series = { { name = string.format("acknowledged payload, %s%.0f ms windows", n > 1 and "all streams, " or "",
        window), points = thr } } } },
    { name = "cwnd", title = title .. ": congestion window and pacing" .. say("", ", sums over N streams"), spec = {
      x_label = "time (s)", y_label = "cwnd (packets)", series = { { name = say("cwnd", "cwnd (sum)"), points = cwnd } },
      y2_label = "pacing rate (MB/s)", series2 = { { name = say("pacing rate", "pacing rate (sum)"), points = pace } } } },
    { name = "rtt", title = title .. ": round-trip time" .. say("", ", N streams"), spec = {
      x_label = "time (s)", y_label = "RTT (ms)",
      series = { { name = say("smoothed RTT", "smoothed RTT (median of the streams in flight)"), points = rtt },
        { name = say("min RTT (BBR)", "min RTT (lowest of the streams)"), points = minrtt } } } },
  }
  if dir then assert(require("ludx.fs").mkdirp(dir)) end
  for _, c in ipairs(charts) do
    c.spec.title = c.title
    c.svg = svg.chart(c.spec)
    c.spec = nil
    if dir then
      local f = assert(io.open(dir .. "/" .. stem .. "-" .. c.name .. ".svg", "w"))
      f:write(c.svg)
      f:close()
    end
  end
  return charts
end

return M
