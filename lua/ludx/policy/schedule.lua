-- Chunk scheduling for a share of many files: which chunk a fetcher asks
-- for next. Chunks of one file always come in order (each file is checked
-- and hashed as it is written); the policy picks the file.
--
--   local sched = schedule.new("smallest", {
--     { file = 1, first = 1, count = 3, size = 3000000 },   -- chunks first..first+count-1
--     ...
--   }, { spread = 4 })
--   local file, chunk = sched:next()     -- nil when every chunk was handed out
--
-- Orders:
--   sequential  files in manifest order, one after the other (the default)
--   smallest    the smallest files first: many files complete early
--   largest     the largest files first
--   interleave  round robin over up to opts.spread files at once (default 4):
--               several files make progress together
--
-- This runs once per chunk (a megabyte), never per packet.
local check = require "ludx.check"

local M = {}

M.ORDERS = { "sequential", "smallest", "largest", "interleave" }

local Sched = {}
Sched.__index = Sched

local function known(order)
  for _, o in ipairs(M.ORDERS) do
    if o == order then return true end
  end
  return false
end

--- A scheduler over items {file=, first=, count=, size=}; items with count
-- 0 are skipped.
function M.new(order, items, opts)
  order = order or "sequential"
  if not known(order) then
    error("bad argument 'order' to 'schedule.new' (one of " .. table.concat(M.ORDERS, ", ") .. " expected, got " .. tostring(order) .. ")", 2)
  end
  if type(items) ~= "table" then error("bad argument 'items' to 'schedule.new' (table expected, got " .. type(items) .. ")", 2) end
  local list = {}
  for i, it in ipairs(items) do
    if it.count > 0 then list[#list + 1] = { file = it.file, next = it.first, last = it.first + it.count - 1, size = it.size or 0, pos = i } end
  end
  if order == "smallest" then
    table.sort(list, function(a, b)
      if a.size ~= b.size then return a.size < b.size end
      return a.pos < b.pos
    end)
  elseif order == "largest" then
    table.sort(list, function(a, b)
      if a.size ~= b.size then return a.size > b.size end
      return a.pos < b.pos
    end)
  end
  opts = check.table(opts, "opts", "schedule.new", true)
  local spread = check.opt_number(opts, "spread", "schedule.new", 4, 1)
  if order ~= "interleave" then spread = 1 end
  return setmetatable({ order = order, list = list, head = 1, active = {}, turn = 0, spread = spread }, Sched)
end

--- The next (file, chunk) to ask for, or nil when all are handed out.
function Sched:next()
  local active = self.active
  -- keep up to `spread` files open, taken in the policy's order
  while #active < self.spread and self.head <= #self.list do
    active[#active + 1] = self.list[self.head]
    self.head = self.head + 1
  end
  if #active == 0 then return nil end
  self.turn = self.turn % #active + 1
  local it = active[self.turn]
  local file, chunk = it.file, it.next
  it.next = it.next + 1
  if it.next > it.last then
    table.remove(active, self.turn)
    self.turn = self.turn - 1
  end
  return file, chunk
end

--- How many chunks are still to hand out.
function Sched:remaining()
  local n = 0
  for _, it in ipairs(self.active) do n = n + it.last - it.next + 1 end
  for i = self.head, #self.list do n = n + self.list[i].last - self.list[i].next + 1 end
  return n
end

return M
