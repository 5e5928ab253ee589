-- NAT sampler (as nat-sampler does it): each sample is a pair of entries,
-- (host, port) and (host, 0), in a ring of 32 slots. An entry seen again
-- among the 4 most recent of its kind gains a hit. The result is the top
-- (host, port) when it reaches the threshold, else (host, 0) meaning "the
-- port is randomized", else unknown (host nil).
local M = {}

local Sampler = {}
Sampler.__index = Sampler

function M.new()
  return setmetatable({ host = nil, port = 0, size = 0, _a = nil, _b = nil, _threshold = 0, _top = 0, _samples = {} }, Sampler)
end

-- slots are 0-based like the ring they model
function Sampler:_bump(host, port, inc)
  local samples = self._samples
  for i = 0, 3 do
    local j = (self._top - inc - 2 * i) % 32
    if j >= #samples then return { host = host, port = port, hits = 1 } end
    local s = samples[j + 1]
    if s.port == port and s.host == host then
      s.hits = s.hits + 1
      return s
    end
  end
  return { host = host, port = port, hits = 1 }
end

--- Adds a sample (our address as a remote saw it). Returns its hit count.
function Sampler:add(host, port)
  local a = self:_bump(host, port, 2)
  local b = self:_bump(host, 0, 1)
  local samples = self._samples

  if #samples < 32 then
    self.size = self.size + 1
    local n = self.size
    self._threshold = n - (n < 4 and 0 or n < 8 and 1 or n < 12 and 2 or 3)
    samples[#samples + 1] = a
    samples[#samples + 1] = b
    self._top = self._top + 2
  else
    if self._top == 32 then self._top = 0 end
    local oa = samples[self._top + 1]
    samples[self._top + 1] = a
    self._top = self._top + 1
    oa.hits = oa.hits - 1
    local ob = samples[self._top + 1]
    samples[self._top + 1] = b
    self._top = self._top + 1
    ob.hits = ob.hits - 1
  end

  if self._a == nil or self._a.hits < a.hits then self._a = a end
  if self._b == nil or self._b.hits < b.hits then self._b = b end

  if self._a.hits >= self._threshold then
    self.host, self.port = self._a.host, self._a.port
  elseif self._b.hits >= self._threshold then
    self.host, self.port = self._b.host, 0
  else
    self.host, self.port = nil, 0
  end
  return a.hits
end

return M
