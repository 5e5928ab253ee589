-- Bounded, expiring stores for DHT state (what xache and record-cache do).
--
-- Both keep two generations, "latest" and "oldest". Every 2/3 of max_age
-- (or when latest reaches max_size) the oldest generation is dropped and
-- latest becomes oldest, so an entry lives between 2/3 and 4/3 of max_age.
-- Rotation is lazy (on access, from env.now()), so idle nodes hold no timers.
--
-- With opts.max_bytes (and opts.bytes(k, v) -> cost of one entry) a
-- generation also rotates when it holds max_bytes / 2, so the two hold
-- at most max_bytes plus one entry: the oldest writes are evicted first.
local M = {}

local function count_new()
  return { map = {}, size = 0, bytes = 0 }
end

local function zero() return 0 end

---------------------------------------------------------------------------
-- Cache: key -> value; get() refreshes an old entry. retain() pins one.

local Cache = {}
Cache.__index = Cache

--- opts: max_size, max_age (ms; 0 = never), env (for now()).
function M.new(opts)
  local self = setmetatable({
    max_size = opts.max_size or math.huge,
    max_age = opts.max_age or 0,
    max_bytes = opts.max_bytes or math.huge,
    bytes = opts.bytes or zero,
    env = opts.env,
    latest = count_new(),
    oldest = count_new(),
    retained = count_new(),
  }, Cache)
  self.tick = (self.max_age > 0 and self.max_age < math.huge) and math.ceil(self.max_age * 2 / 3) or nil
  self.last_gc = self.tick and self.env.now() or 0
  return self
end

local function gen_set(c, g, k, v)
  local old = g.map[k]
  if old == nil then
    g.size = g.size + 1
  else
    g.bytes = g.bytes - c.bytes(k, old)
  end
  g.bytes = g.bytes + c.bytes(k, v)
  g.map[k] = v
end

local function gen_delete(c, g, k)
  local old = g.map[k]
  if old == nil then return false end
  g.bytes = g.bytes - c.bytes(k, old)
  g.map[k] = nil
  g.size = g.size - 1
  return true
end

function Cache:_gc()
  self.oldest = self.latest
  self.latest = count_new()
end

function Cache:_age()
  if not self.tick then return end
  local now = self.env.now()
  local n = 0
  while now - self.last_gc >= self.tick and n < 2 do
    self:_gc()
    self.last_gc = self.last_gc + self.tick
    n = n + 1
  end
  if now - self.last_gc >= self.tick then self.last_gc = now end
end

function Cache:set(k, v)
  self:_age()
  if self.retained.map[k] ~= nil then return self end
  gen_set(self, self.latest, k, v)
  gen_delete(self, self.oldest, k)
  if self.latest.size >= self.max_size or self.latest.bytes >= self.max_bytes / 2 then self:_gc() end
  return self
end

function Cache:retain(k, v)
  gen_set(self, self.retained, k, v)
  if not gen_delete(self, self.latest, k) then gen_delete(self, self.oldest, k) end
  return self
end

function Cache:delete(k)
  return gen_delete(self, self.latest, k) or gen_delete(self, self.oldest, k) or gen_delete(self, self.retained, k)
end

--- Bytes held by the two generations (retained entries aside).
function Cache:bytes_used()
  self:_age()
  return self.latest.bytes + self.oldest.bytes
end

function Cache:get(k)
  self:_age()
  local v = self.latest.map[k]
  if v ~= nil then return v end
  v = self.oldest.map[k]
  if v ~= nil then
    gen_delete(self, self.oldest, k)
    gen_set(self, self.latest, k, v)
    if self.latest.bytes >= self.max_bytes / 2 then self:_gc() end
    return v
  end
  return self.retained.map[k]
end

function Cache:has(k)
  return self:get(k) ~= nil
end

function Cache:size()
  self:_age()
  return self.latest.size + self.oldest.size + self.retained.size
end

function Cache:clear()
  self.latest, self.oldest, self.retained = count_new(), count_new(), count_new()
end

---------------------------------------------------------------------------
-- RecordCache: name -> set of (id -> record), at most max_size records.

local Records = {}
Records.__index = Records

local function store()
  return { names = {}, size = 0, bytes = 0 }
end

-- what one record costs (its strings and about a table's worth)
local RECORD_OVERHEAD = 128
local function record_bytes(id, value)
  return #id + #value + RECORD_OVERHEAD
end

local function store_add(s, name, id, value)
  local set = s.names[name]
  if not set then
    set = { list = {}, index = {} }
    s.names[name] = set
  end
  local i = set.index[id]
  if i then
    s.bytes = s.bytes + #value - #set.list[i].value
    set.list[i].value = value
    return false
  end
  set.list[#set.list + 1] = { id = id, value = value }
  set.index[id] = #set.list
  s.size = s.size + 1
  s.bytes = s.bytes + record_bytes(id, value)
  return true
end

local function store_remove(s, name, id)
  local set = s.names[name]
  if not set then return false end
  local i = set.index[id]
  if not i then return false end
  local last = set.list[#set.list]
  s.bytes = s.bytes - record_bytes(id, set.list[i].value)
  set.list[i] = last
  set.index[last.id] = i
  set.list[#set.list] = nil
  set.index[id] = nil
  s.size = s.size - 1
  if #set.list == 0 then s.names[name] = nil end
  return true
end

function M.records(opts)
  local self = setmetatable({
    max_size = opts.max_size or math.huge,
    max_age = opts.max_age or 0,
    max_bytes = opts.max_bytes or math.huge,
    env = opts.env,
    fresh = store(),
    stale = store(),
  }, Records)
  self.tick = (self.max_age > 0 and self.max_age < math.huge) and math.ceil(self.max_age * 2 / 3) or nil
  self.last_gc = self.tick and self.env.now() or 0
  return self
end

function Records:_gc()
  self.stale = self.fresh
  self.fresh = store()
end

Records._age = Cache._age

function Records:add(name, id, value)
  self:_age()
  store_remove(self.stale, name, id)
  store_add(self.fresh, name, id, value)
  if self.fresh.size > self.max_size or self.fresh.bytes >= self.max_bytes / 2 then self:_gc() end
end

function Records:bytes_used()
  self:_age()
  return self.fresh.bytes + self.stale.bytes
end

function Records:remove(name, id)
  store_remove(self.fresh, name, id)
  store_remove(self.stale, name, id)
end

--- Up to n records of name, in random order (rand() in [0,1)). Costs
-- O(n), however many records the name has (a lookup must not cost what
-- an attacker stored under one name).
function Records:get(name, n, rand)
  self:_age()
  local a, b = self.fresh.names[name], self.stale.names[name]
  a, b = a and a.list or {}, b and b.list or {}
  local na, total = #a, #a + #b
  if not n or n > total then n = total end
  rand = rand or math.random
  -- a partial Fisher-Yates over the joined index range, swaps kept sparse
  local swapped, out = {}, {}
  for i = 1, n do
    local j = i + math.floor(rand() * (total - i + 1))
    local vi, vj = swapped[i] or i, swapped[j] or j
    swapped[j] = vi
    out[i] = vj <= na and a[vj].value or b[vj - na].value
  end
  return out
end

function Records:size()
  self:_age()
  return self.fresh.size + self.stale.size
end

return M
