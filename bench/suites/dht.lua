-- A DHT of ludx nodes on loopback, in one process: n persistent nodes on
-- real UDP sockets (a bootstrap node plus n-1), then announces and lookups
-- between random nodes. Reports the lookup success rate, the median and p99
-- lookup time, hops and messages per lookup, and the memory per node.
local ludx = require "ludx"
local dht = require "ludx.dht"
local bench = require "ludx.bench"

local format = string.format

local function rss_kb()
  local f = io.open("/proc/self/status")
  if not f then return 0 end
  local s = f:read("*a")
  f:close()
  return tonumber(s:match("VmRSS:%s*(%d+)")) or 0
end

local function percentile(t, p)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  if #s == 0 then return nil end
  return s[math.max(1, math.ceil(p * #s))]
end

local function lookups(ctx, n, nlookups, ntopics)
  math.randomseed(7)
  collectgarbage()
  local heap0, rss0 = collectgarbage("count"), rss_kb()
  local t0 = ludx.now()
  local net = assert(dht.testnet(n, { timeout = 600000 }))
  local build_s = (ludx.now() - t0) / 1000
  collectgarbage()
  local heap_per_node = (collectgarbage("count") - heap0) / n
  local rss_per_node = (rss_kb() - rss0) / n
  ctx.log(format("dht: %d nodes up in %.1f s, %.1f KB heap and %.1f KB RSS per node", n, build_s, heap_per_node, rss_per_node))

  local topics = {}
  for i = 1, ntopics do
    local kp = dht.keypair()
    local topic = dht.hash("bench topic " .. i)
    local node = net.nodes[math.random(2, n)]
    local ok, msg = node:announce(topic, kp, { timeout = 60000 })
    if not ok then ctx.log("dht: announce failed: " .. tostring(msg)) end
    topics[i] = { topic = topic, kp = kp }
  end

  local times, hops, msgs = {}, {}, {}
  local found = 0
  for i = 1, nlookups do
    local t = topics[(i - 1) % ntopics + 1]
    local node = net.nodes[math.random(2, n)]
    local t1 = ludx.now()
    local q = node:lookup(t.topic, { timeout = 60000 })
    local hit = false
    for reply in q do
      for _, p in ipairs(reply.peers or {}) do
        if p.public_key == t.kp.public_key then hit = true end
      end
    end
    times[#times + 1] = ludx.now() - t1
    hops[#hops + 1] = q.query.hops
    msgs[#msgs + 1] = q.query.successes + q.query.errors
    if hit then found = found + 1 end
  end
  net:destroy()
  return {
    ok = true,
    nodes = n,
    lookups = nlookups,
    success_rate = found / nlookups,
    lookup_ms_median = bench.median(times),
    lookup_ms_p99 = percentile(times, 0.99),
    hops_median = bench.median(hops),
    hops_max = percentile(hops, 1),
    messages_median = bench.median(msgs),
    messages_p99 = percentile(msgs, 0.99),
    heap_kb_per_node = heap_per_node,
    rss_kb_per_node = rss_per_node,
    bootstrap_s = build_s,
    mb_s = 0,
  }
end

local function render(samples, case_id)
  local out = { format("  %-6s %6s %8s %10s %10s %6s %9s %10s %10s %8s", "nodes", "runs", "success", "lookup ms", "p99 ms",
    "hops", "messages", "heap KB/n", "RSS KB/n", "boot s") }
  for _, s in ipairs(samples) do
    if s.case == case_id then
      if s.ok then
        out[#out + 1] = format("  %-6d %6d %7.1f%% %10.1f %10.1f %6.1f %9.1f %10.1f %10.1f %8.1f", s.nodes, s.lookups,
          100 * s.success_rate, s.lookup_ms_median, s.lookup_ms_p99, s.hops_median, s.messages_median,
          s.heap_kb_per_node, s.rss_kb_per_node, s.bootstrap_s)
      else
        out[#out + 1] = "  FAILED: " .. tostring(s.error)
      end
    end
  end
  return table.concat(out, "\n")
end

return {
  name = "dht",
  cases = {
    {
      name = "lookups",
      description = "1000 DHT nodes on loopback in one process; 200 lookups of announced topics",
      describe = function(ctx)
        if ctx.quick then return "100 DHT nodes on loopback in one process; 50 lookups of announced topics" end
        return "1000 DHT nodes on loopback in one process; 200 lookups of announced topics"
      end,
      systems = { "ludx" },
      baseline = "ludx",
      runs = 1,
      warmups = 0,
      run = function(ctx)
        if ctx.quick then return lookups(ctx, 100, 50, 10) end
        return lookups(ctx, 1000, 200, 20)
      end,
      render = render,
      metric = { field = "lookup_ms_median", unit = "ms", better = "lower" },
    },
  },
}
