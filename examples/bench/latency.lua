-- Request/response latency over one UDX stream, plain and encrypted
--
-- An example of a suite of your own (docs/bench.md):
--
--   ludx bench examples/bench/latency.lua
--   ludx bench examples/bench/latency.lua --runs 5 --report /tmp/lat/index.html
--
-- Each run starts a peer process (echo_peer.lua, next to this file) that
-- echoes what it gets, sends it `requests` requests of `size` bytes one at a
-- time, waits for each whole answer, and records every round trip. A run
-- counts only when the bytes that came back hash the same as those sent.
local udx = require "ludx.udx"
local secretstream = require "ludx.secretstream"
local bench = require "ludx.bench"
local svg = require "ludx.bench.svg"

-- files next to this suite, wherever it is run from
local here = debug.getinfo(1, "S").source:match("^@(.*)/[^/]*$") or "."
local PEER = here .. "/echo_peer.lua"

-- one run of `system` ("udx" or "secretstream"): a sample table
local function round_trips(ctx, system, requests, size)
  local peer = bench.peer(PEER, { system == "secretstream" and "secret" or "plain" }, { name = "echo peer" })
  local sock = assert(udx.bind("127.0.0.1", 0))
  local raw = assert(udx.stream(1))
  local _, port = sock:address()
  peer:send({ port = port })
  assert(raw:connect(sock, 2, peer.ready.port, "127.0.0.1"))
  local s = raw
  if system == "secretstream" then
    s = secretstream.wrap(raw, { initiator = true, keypair = secretstream.keypair(string.rep("\1", 32)) })
    assert(s:ready(20000))
  end
  local payload = bench.payload(size * requests, 7)
  local rtts, back = {}, {}
  local t_start = bench.now()
  for i = 1, requests do
    local req = payload:sub((i - 1) * size + 1, i * size)
    local t0 = bench.now()
    assert(s:write(req))
    local got = 0
    while got < size do
      local chunk, err = s:read(size - got, 20000)
      if not chunk then error("read: " .. tostring(err), 0) end
      got = got + #chunk
      back[#back + 1] = chunk
    end
    rtts[i] = bench.now() - t0
  end
  local elapsed = bench.now() - t_start
  s:finish(10000)
  local done = peer:expect("done", 20000)
  s:close()
  sock:close()
  peer:close()
  ctx.rtts = ctx.rtts or {}
  ctx.rtts[system] = rtts
  local sum = bench.summary(rtts)
  local ok = bench.hash(table.concat(back)) == bench.hash(payload) and done.bytes == #payload
  return {
    ok = ok,
    error = not ok and "the echoed bytes differ from those sent" or nil,
    requests = requests,
    bytes = size,
    p50_ms = sum.median,
    p90_ms = sum.p90,
    p99_ms = sum.p99,
    max_ms = sum.max,
    requests_per_s = requests / (elapsed / 1000),
  }
end

-- a table of its own: the generic table would show every numeric field
local function render(samples, id)
  local out = { string.format("  %-14s %5s %9s %9s %9s %9s %10s", "system", "runs", "p50 ms", "p90 ms", "p99 ms",
    "max ms", "req/s") }
  for _, system in ipairs({ "udx", "secretstream" }) do
    local p50, p90, p99, mx, rps = {}, {}, {}, {}, {}
    for _, s in ipairs(samples) do
      if s.case == id and s.system == system and s.ok then
        p50[#p50 + 1], p90[#p90 + 1], p99[#p99 + 1], mx[#mx + 1] = s.p50_ms, s.p90_ms, s.p99_ms, s.max_ms
        rps[#rps + 1] = s.requests_per_s
      end
    end
    if #p50 > 0 then
      out[#out + 1] = string.format("  %-14s %5d %9.3f %9.3f %9.3f %9.3f %10.0f", system, #p50, bench.median(p50),
        bench.median(p90), bench.median(p99), bench.median(mx), bench.median(rps))
    end
  end
  for _, s in ipairs(samples) do
    if s.case == id and not s.ok then out[#out + 1] = "  " .. s.system .. " FAILED: " .. tostring(s.error) end
  end
  return table.concat(out, "\n")
end

local function case(name, size, requests, quick_requests)
  return {
    name = name,
    description = string.format("%d-byte requests, one at a time, echoed by a peer process", size),
    systems = { "udx", "secretstream" },
    baseline = "udx",
    -- the number --compare judges this case by
    metric = { field = "p50_ms", unit = "ms", better = "lower" },
    describe = function(ctx)
      return string.format("%d requests of %d bytes, one at a time, echoed by a peer process",
        ctx.quick and quick_requests or requests, size)
    end,
    run = function(ctx, system)
      return round_trips(ctx, system, ctx.quick and quick_requests or requests, size)
    end,
    render = render,
    -- one chart: the round trips of the last measured run of each system
    plot = function(ctx, dir)
      local series = {}
      for _, system in ipairs({ "udx", "secretstream" }) do
        local pts = {}
        for i, v in ipairs((ctx.rtts or {})[system] or {}) do pts[i] = { i, v } end
        if #pts > 0 then series[#series + 1] = { name = system, points = pts } end
      end
      if #series == 0 then error("no round trips recorded", 0) end
      local title = ctx.case.suite .. " / " .. name .. ": round-trip time per request"
      local text = svg.chart({ title = title, x_label = "request", y_label = "round trip (ms)", series = series })
      if dir then
        assert(require("ludx.fs").mkdirp(dir))
        local f = assert(io.open(dir .. "/" .. ctx.case.suite .. "-" .. name .. "-rtt.svg", "w"))
        f:write(text)
        f:close()
      end
      ctx.add_chart(title, text)
    end,
  }
end

return {
  name = "latency",
  cases = {
    case("small", 64, 500, 100),
    case("16k", 16384, 200, 50),
  },
}
