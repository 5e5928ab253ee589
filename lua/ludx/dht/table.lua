-- Kademlia routing table, as kademlia-routing-table lays it out: k nodes per
-- row, 256 rows, the row index is the first bit (MSB first) in which a
-- node id differs from our own id. Each row is kept sorted by id.
--
-- Nodes are tables with at least .id (a 32-byte string). A full row calls
-- table.on_full(node, row) and refuses the node.
local bit = require "bit"
local bxor = bit.bxor
local byte = string.byte
local floor = math.floor

local M = {}

local Table = {}
Table.__index = Table

-- leading zero bits of a non-zero byte
local CLZ8 = {}
for v = 1, 255 do
  local n = 0
  local x = v
  while x < 128 do
    x = x * 2
    n = n + 1
  end
  CLZ8[v] = n
end

function M.new(id, opts)
  if type(id) ~= "string" or #id ~= 32 then error("bad argument 'id' to 'table.new' (32-byte string expected)", 2) end
  return setmetatable({ id = id, k = (opts and opts.k) or 20, size = 0, rows = {}, nrows = #id * 8, on_full = nil }, Table)
end

--- Row index (0-based) of id relative to our id.
function Table:diff(id)
  local own = self.id
  for i = 1, #id do
    local a, b = byte(id, i), byte(own, i)
    if a ~= b then return (i - 1) * 8 + CLZ8[bxor(a, b)] end
  end
  return self.nrows - 1
end

-- binary search: index of id in row, or the insertion point negated
local function search(nodes, id)
  local l, r = 1, #nodes
  while l <= r do
    local m = floor((l + r) / 2)
    local mid = nodes[m].id
    if id == mid then return m end
    if id < mid then r = m - 1 else l = m + 1 end
  end
  return -l
end

--- Adds or replaces a node; false when its row is full.
function Table:add(node)
  local i = self:diff(node.id)
  local row = self.rows[i]
  if not row then
    row = { index = i, nodes = {} }
    self.rows[i] = row
  end
  local nodes = row.nodes
  local at = search(nodes, node.id)
  if at > 0 then
    nodes[at] = node
    return true
  end
  if #nodes >= self.k then
    if self.on_full then self.on_full(node, row) end
    return false
  end
  table.insert(nodes, -at, node)
  self.size = self.size + 1
  return true
end

function Table:remove(id)
  local row = self.rows[self:diff(id)]
  if not row then return false end
  local at = search(row.nodes, id)
  if at < 0 then return false end
  table.remove(row.nodes, at)
  self.size = self.size - 1
  return true
end

function Table:get(id)
  local row = self.rows[self:diff(id)]
  if not row then return nil end
  local at = search(row.nodes, id)
  if at < 0 then return nil end
  return row.nodes[at]
end

function Table:has(id)
  return self:get(id) ~= nil
end

--- A random node (rand() in [0,1) picks it), or nil when empty.
function Table:random(rand)
  if self.size == 0 then return nil end
  local n = floor((rand or math.random)() * self.size)
  for i = 0, self.nrows - 1 do
    local row = self.rows[i]
    if row then
      local len = #row.nodes
      if n < len then return row.nodes[n + 1] end
      n = n - len
    end
  end
  return nil
end

local function push_row(row, k, out)
  if not row then return end
  local nodes = row.nodes
  local missing = math.min(k - #out, #nodes)
  for j = 1, missing do out[#out + 1] = nodes[j] end
end

--- Up to k nodes near id: its own row, then the rows below it, then the
-- rows above it (as kademlia-routing-table does; not a full XOR sort).
function Table:closest(id, k)
  k = k or self.k
  local out = {}
  local d = self:diff(id)
  for i = d, 0, -1 do
    if #out >= k then break end
    push_row(self.rows[i], k, out)
  end
  for i = d + 1, self.nrows - 1 do
    if #out >= k then break end
    push_row(self.rows[i], k, out)
  end
  return out
end

function Table:to_array()
  return self:closest(self.id, math.huge)
end

--- XOR distance order of ids a and b towards target: < 0, 0 or > 0.
function M.compare(target, a, b)
  for i = 1, 32 do
    local x, y = byte(a, i), byte(b, i)
    if x ~= y then
      local t = byte(target, i)
      return bxor(t, x) - bxor(t, y)
    end
  end
  return 0
end

return M
