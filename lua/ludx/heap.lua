-- A binary min-heap of timed entries {at = time, seq = tie-break, ...}:
-- the timer queue of the task scheduler and of the DHT's simulated clock.
-- Cancelled entries are marked and skipped by their owner.
local floor = math.floor

local Heap = {}
Heap.__index = Heap

local function less(a, b)
  if a.at ~= b.at then return a.at < b.at end
  return a.seq < b.seq
end

local function new()
  return setmetatable({ n = 0, seq = 0 }, Heap)
end

--- Adds entry e (its seq is assigned here, so equal times keep their
-- order of insertion). Returns e.
function Heap:push(e)
  self.seq = self.seq + 1
  e.seq = self.seq
  local n = self.n + 1
  self.n = n
  self[n] = e
  local i = n
  while i > 1 do
    local p = floor(i / 2)
    if less(self[i], self[p]) then
      self[i], self[p] = self[p], self[i]
      i = p
    else
      break
    end
  end
  return e
end

--- The earliest entry, or nil.
function Heap:peek()
  return self[1]
end

--- Removes and returns the earliest entry.
function Heap:pop()
  local n = self.n
  if n == 0 then return nil end
  local top = self[1]
  self[1] = self[n]
  self[n] = nil
  n = n - 1
  self.n = n
  local i = 1
  while true do
    local l, r, m = 2 * i, 2 * i + 1, i
    if l <= n and less(self[l], self[m]) then m = l end
    if r <= n and less(self[r], self[m]) then m = r end
    if m == i then break end
    self[i], self[m] = self[m], self[i]
    i = m
  end
  return top
end

return { new = new }
