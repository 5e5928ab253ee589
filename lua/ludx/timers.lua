-- Timers of the scheduler: a binary heap of {at, seq, fn} in loop time (ms).
-- A cancelled entry stays in the heap, marked, until it reaches the top; when
-- marked entries are more than half of the heap (and more than 64), the heap
-- is rebuilt, so waits that end early (a read with a long timeout that got
-- its data) do not pile up. The rebuild costs O(n log n) once per n/2
-- cancels: O(log n) each.
local core = require "ludx.core"
local heap = require "ludx.heap"

local now = core.now
local type, tostring = type, tostring

local M = {}

local timers = heap.new()
local cancelled = 0 -- marked entries still in the heap

local function less(a, b)
  if a.at ~= b.at then return a.at < b.at end
  return a.seq < b.seq
end

local function compact()
  local keep = {}
  for i = 1, timers.n do
    local e = timers[i]
    if not e.cancelled then keep[#keep + 1] = e end
    timers[i] = nil
  end
  -- a sorted array is a valid heap
  table.sort(keep, less)
  for i = 1, #keep do timers[i] = keep[i] end
  timers.n = #keep
  cancelled = 0
end

--- Schedules fn() after ms; returns the entry (give it to cancel).
function M.add(ms, fn)
  return timers:push({ at = now() + ms, fn = fn })
end

--- Marks an entry cancelled; a no-op for one that fired or was cancelled.
function M.cancel(e)
  if e.cancelled or e.fired then return end
  e.cancelled = true
  cancelled = cancelled + 1
  if cancelled > 64 and cancelled * 2 > timers.n then compact() end
end

--- The loop time of the earliest live entry, or nil.
function M.next_deadline()
  while timers.n > 0 and timers:peek().cancelled do
    timers:pop()
    cancelled = cancelled - 1
  end
  return timers.n > 0 and timers:peek().at or nil
end

--- Runs the entries that are due.
function M.fire()
  local t = now()
  while timers.n > 0 and timers:peek().at <= t do
    local e = timers:pop()
    if e.cancelled then
      cancelled = cancelled - 1
    else
      e.fired = true
      e.fn()
    end
  end
end

--- Entries in the heap (live and cancelled), for tests and the soak.
function M.size()
  return timers.n, cancelled
end

local function handle_cancel(self)
  M.cancel(self)
end

--- Calls fn (not in a task; it must not wait) after ms milliseconds.
-- Returns a handle with :cancel().
-- A timer from after(): one line for the REPL and logs.
local Timer = {
  __tostring = function(t)
    if t.cancelled then return "<timer cancelled>" end
    if t.fired then return "<timer fired>" end
    return string.format("<timer due in %.0f ms>", math.max(0, t.at - now()))
  end,
}

function M.after(ms, fn)
  if type(ms) ~= "number" or ms < 0 or ms ~= ms then
    error("bad argument 'ms' to 'after' (non-negative number expected, got " .. tostring(ms) .. ")", 2)
  end
  if type(fn) ~= "function" then error("bad argument 'fn' to 'after' (function expected, got " .. type(fn) .. ")", 2) end
  local t = M.add(ms, fn)
  t.cancel = handle_cancel
  return setmetatable(t, Timer)
end

return M
