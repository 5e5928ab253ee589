--- What the soak scripts (bench/soak/) share: the process's RSS, and a run
-- of requests in steps, each step sampled after a full collection, with
-- the first 10% of the run set against the last 10%.
local ludx = require "ludx"

local M = {}

--- Resident memory of this process, KB (0 where /proc is missing).
function M.rss_kb()
  local f = io.open("/proc/self/statm")
  if not f then return 0 end
  local _, resident = f:read("*n", "*n")
  f:close()
  return (resident or 0) * 4
end

--- Runs one(i) for i = 1..opts.warmup (not sampled), then opts.count more
-- in opts.steps steps (default 20). After each step: a full collection and
-- a sample of the heap and the RSS (KB), and of opts.extra.fn() when given
-- (printed as opts.extra.name). Returns the samples (heap, rss, extra, one
-- per step), seconds, and the two ends: h0/h1, r0/r1 (means of the first
-- and the last two samples) with dh/dr, their change in percent.
function M.run(one, opts)
  local steps, warmup = opts.steps or 20, opts.warmup or 0
  for i = 1, warmup do one(i) end
  local s = { heap = {}, rss = {}, extra = {} }
  local t0 = ludx.now()
  local per = opts.count / steps
  for k = 1, steps do
    for i = 1, per do one(warmup + (k - 1) * per + i) end
    collectgarbage()
    collectgarbage()
    s.heap[k], s.rss[k] = collectgarbage("count"), M.rss_kb()
    local line = string.format("%3d%%  heap %8.1f KB  rss %6d KB", k * 100 / steps, s.heap[k], s.rss[k])
    if opts.extra then
      s.extra[k] = opts.extra.fn()
      line = line .. string.format("  %s %d", opts.extra.name, s.extra[k])
    end
    io.write(line, "\n")
  end
  s.seconds = (ludx.now() - t0) / 1000
  s.h0, s.h1 = (s.heap[1] + s.heap[2]) / 2, (s.heap[steps - 1] + s.heap[steps]) / 2
  s.r0, s.r1 = (s.rss[1] + s.rss[2]) / 2, (s.rss[steps - 1] + s.rss[steps]) / 2
  s.dh, s.dr = (s.h1 / s.h0 - 1) * 100, (s.r1 / s.r0 - 1) * 100
  return s
end

return M
