-- Soak: a service answers REQUESTS requests (1,000,000 by default), each in
-- its own task, while clients open and close connections throughout (1 to 8
-- requests per TCP connection over loopback). At every 1% it records the Lua
-- heap (after a full collection) and the RSS; at the end it compares the
-- last 10% of the run with the first 10%: a service that leaks nothing per
-- request holds both flat (within 5%).
--
--   build/ludx bench/soak/soak_requests.lua [REQUESTS [CLIENTS [WARMUP]]]
--
-- WARMUP requests (default REQUESTS / 10) run first and are not sampled, as
-- a benchmark's warm-up runs: the JIT compiles the service's paths then, and
-- its traces (which the Lua heap holds) do not count as growth.
--
-- Not a timed test: it runs as fast as the machine lets it. Output: one line
-- per 1%, then the comparison; the exit status is 0 when both are flat.
--
-- Measured (2 loaded cores, 32 clients, first 10% -> last 10% of the run):
--   1,000,000 requests, JIT off: heap 346 -> 357 KB (+3.2%), RSS 5119 -> 5155 KB (+0.7%)
--   1,000,000 requests, JIT on:  heap 525 -> 565 KB (+7.7%), RSS 5838 -> 5922 KB (+1.4%)
--   3,000,000 requests, JIT on:  heap 531 -> 559 KB (+5.3%), RSS 6052 -> 6086 KB (+0.6%)
--   (those three without a warm-up; with the default 100,000-request warm-up:)
--   1,000,000 requests, JIT on:  heap 538 -> 562 KB (+4.5%), RSS 6282 -> 6330 KB (+0.8%),
--                                245,157 connections, 15.3k requests/s
--   (those four kept their 100 samples in tables made as the run went, ~27 KB
--   counted as growth; with the samples made before the run, on 2 cores at
--   load 6-10, 32 clients, 100,000-request warm-up:)
--   1,000,000 requests, JIT on:  heap 591 -> 604 KB (+2.2%), RSS 6077 -> 6126 KB (+0.8%),
--                                151 s, 7.3k requests/s (old sampling, 2 runs: +5.2%, +5.9%: NOT FLAT)
--   1,000,000 requests, JIT off: heap 382 -> 366 KB (-4.0%), RSS 5453 -> 5425 KB (-0.5%),
--                                159 s, 6.9k requests/s
-- With the JIT on, the heap holds the compiled traces too (148 -> 174 of
-- them over the 3M run, about 1.3 KB each): the JIT's growth, not a leak per
-- request (0.01 byte per request, slowing down). Before the scheduler fix
-- every request left ~2 KB: heap 154 MB, RSS 200 MB after 76,000 requests.
local ludx = require "ludx"
local tcp = require "ludx.tcp"

local REQUESTS = math.floor(tonumber(arg[1]) or 1000000)
local CLIENTS = math.floor(tonumber(arg[2]) or 32)
local WARMUP = math.floor(tonumber(arg[3]) or REQUESTS / 10)
local STEP = math.max(1, math.floor(REQUESTS / 100))
-- LUDX_SOAK_JIT=off runs it interpreted (tells JIT code growth from a leak)
if os.getenv("LUDX_SOAK_JIT") == "off" then jit.off() end

local rss_kb = require("ludx.bench.soak").rss_kb

local function heap_kb()
  collectgarbage("collect")
  collectgarbage("collect")
  return collectgarbage("count")
end

-- A line reader over a connection: requests and answers are lines.
local function reader(conn)
  local buf = ""
  return function()
    while true do
      local i = buf:find("\n", 1, true)
      if i then
        local line = buf:sub(1, i - 1)
        buf = buf:sub(i + 1)
        return line
      end
      local data, msg, code = conn:read(nil, 60000)
      if not data then return nil, msg, code end
      buf = buf .. data
    end
  end
end

-- The service: each request is its own task, which writes the answer.
local function answer(conn, line)
  local n = tonumber(line:match("^GET (%d+)$"))
  if not n then return conn:write("ERR\n") end
  return conn:write("OK " .. (n * 2) .. "\n")
end

local function serve_connection(conn)
  local next_line = reader(conn)
  while true do
    local line = next_line()
    if not line then break end
    ludx.spawn("request", answer, conn, line):join()
  end
  conn:close()
end

-- task and timer counts (this tree's modules; -1 on an older tree)
local has_sched, sched = pcall(require, "ludx.sched")
local has_timers, timers = pcall(require, "ludx.timers")
local function task_count() return has_sched and sched.count() or -1 end
local function timer_count() return has_timers and (timers.size()) or -1 end

-- compiled traces alive: they live in the Lua heap and their machine code
-- in the RSS, and their number grows (bounded by jit.opt maxtrace) as the JIT
-- meets more paths; it is not per request
local function trace_count()
  local ok, util = pcall(require, "jit.util")
  if not ok then return -1 end
  local n = 0
  for i = 1, 65535 do
    if util.traceinfo(i) then n = n + 1 elseif i > 4000 then break end
  end
  return n
end

-- The 100 samples are made before the run and filled in place: grown as
-- the run goes, they were themselves ~27 KB of "growth" between the first
-- and the last 10% (the whole of what a run with the JIT on measured).
local samples, nsamples = {}, 0
for i = 1, 100 do samples[i] = { done = 0, heap = 0, rss = 0, tasks = 0, t = 0 } end
local t0 = ludx.now()

local function sample(done)
  nsamples = nsamples + 1
  local s = samples[nsamples]
  s.done, s.heap, s.rss, s.tasks, s.t = done, heap_kb(), rss_kb(), task_count(), (ludx.now() - t0) / 1000
  io.stdout:write(string.format("%3d%%  %8d requests  heap %8.0f KB  rss %7d KB  tasks %4d  timers %5d  traces %4d  %6.1f s\n",
    nsamples, done, s.heap, s.rss, s.tasks, timer_count(), trace_count(), s.t))
end

local function main()
  local server = assert(tcp.listen("127.0.0.1", 0, { backlog = 512 }))
  local _, port = server:address()
  ludx.spawn("accept", function()
    while true do
      local conn = server:accept()
      if not conn then break end
      ludx.spawn("connection", serve_connection, conn)
    end
  end)

  local issued, done, conns = 0, 0, 0
  local clients = {}
  for c = 1, CLIENTS do
    clients[c] = ludx.spawn("client", function()
      local seq = c
      while issued < WARMUP + REQUESTS do
        local conn = assert(tcp.connect("127.0.0.1", port, 60000))
        conns = conns + 1
        local next_line = reader(conn)
        seq = (seq * 1103515245 + 12345) % 2147483648
        local k = 1 + math.floor(seq / 65536) % 8 -- requests on this connection
        for _ = 1, k do
          if issued >= WARMUP + REQUESTS then break end
          issued = issued + 1
          local n = issued
          assert(conn:write("GET " .. n .. "\n"))
          local line = assert(next_line())
          assert(line == "OK " .. (n * 2), line)
          done = done + 1
          if done > WARMUP and (done - WARMUP) % STEP == 0 and nsamples < 100 then sample(done - WARMUP) end
        end
        -- half end politely, half drop the connection
        if math.floor(seq / 524288) % 2 == 0 then conn:finish(60000) end
        conn:close()
      end
    end)
  end
  for _, t in ipairs(clients) do t:join() end
  server:close()

  local function avg(from, to, field)
    local sum, n = 0, 0
    for i = from, to do
      if samples[i] then sum, n = sum + samples[i][field], n + 1 end
    end
    return n > 0 and sum / n or 0
  end
  local m = nsamples
  local tenth = math.max(1, math.floor(m / 10))
  local ok = true
  io.stdout:write(string.format("%d requests (%d of them warm-up) on %d connections by %d clients in %.1f s (%.0f requests/s)\n",
    done, WARMUP, conns, CLIENTS, (ludx.now() - t0) / 1000, done / ((ludx.now() - t0) / 1000)))
  for _, field in ipairs({ "heap", "rss" }) do
    local first, last = avg(1, tenth, field), avg(m - tenth + 1, m, field)
    local change = first > 0 and (last - first) / first * 100 or 0
    local flat = math.abs(change) <= 5
    ok = ok and flat
    io.stdout:write(string.format("%-4s first 10%%: %.0f KB  last 10%%: %.0f KB  change %+.2f%%  %s\n",
      field, first, last, change, flat and "flat" or "NOT FLAT"))
  end
  return ok and 0 or 1
end

local status = ludx.run(main)
os.exit(status or 2)
