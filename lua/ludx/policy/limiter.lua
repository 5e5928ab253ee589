-- Limiters: token buckets (bytes/s) that udx streams join with a weight.
-- Lua creates and configures them; the send path in C enforces them on
-- every packet (udx/src/policy.c). While several members have data
-- waiting, they split the rate by weight; one alone gets all of it.
--
--   local lim = limiter.new({ rate = 10e6 })   -- 10 MB/s, burst 20 ms
--   lim:add(stream)                           -- a udx stream, or a stream over one
--   lim:add(other, 4)                         -- weight 4 (or "high", "normal", "low")
--   lim:set({ rate = 20e6 })
--   lim:stats()  --> {rate, burst, members, active, bytes, waits}
local ludx = require "ludx"
local core = ludx.core
local priority = require "ludx.policy.priority"

local M = {}

local Limiter = {}
Limiter.__index = Limiter
M.Limiter = Limiter

local check = require "ludx.check"
local bad_arg = check.fail

function M.check_opts(opts, fname)
  if type(opts) ~= "table" then bad_arg("opts", fname, "table {rate=, burst=}", type(opts)) end
  local rate = check.opt_number(opts, "rate", fname, 0, 0) -- bytes/s
  local burst = check.opt_number(opts, "burst", fname, 0, 0) -- bytes
  return math.floor(rate), math.floor(burst)
end

--- The udx stream under s: a udx stream itself, or a stream over one (a
-- SecretStream, a DHT connection). nil when there is none.
function M.udx_stream(s)
  local udx = require "ludx.udx"
  for _ = 1, 4 do
    if type(s) ~= "table" then return nil end
    if getmetatable(s) == udx.Stream then return s end
    s = rawget(s, "udx_stream") or rawget(s, "raw")
  end
  return nil
end

--- A limiter. opts.rate: bytes/s (0 = unlimited); opts.burst: bytes the
-- bucket holds (default: 20 ms at the rate).
function M.new(opts)
  local rate, burst = M.check_opts(opts or {}, "limiter")
  local h, msg, code = core.limiter(rate, burst)
  if not h then return nil, msg, code end
  return setmetatable({ h = h, rate = rate, burst = burst }, Limiter)
end

--- Adds a stream (or sets its weight): weight is a number >= 1 or a
-- priority class ("high", "normal", "low"; default "normal"). A stream is
-- in at most 4 limiters; it leaves them when it closes.
function Limiter:add(stream, weight)
  local s = M.udx_stream(stream)
  if not s then bad_arg("stream", "add", "udx stream or a stream over one", type(stream)) end
  local w = priority.weight(weight)
  if not w then bad_arg("weight", "add", "number >= 1 or 'high', 'normal', 'low'", tostring(weight)) end
  if s:is_closed() then return nil, "stream is closed", "EPIPE" end
  return self.h:add(s.id, w)
end

function Limiter:remove(stream)
  local s = M.udx_stream(stream)
  if not s then bad_arg("stream", "remove", "udx stream or a stream over one", type(stream)) end
  return self.h:remove(s.id)
end

--- New numbers; they apply at once.
function Limiter:set(opts)
  local rate, burst = M.check_opts(opts, "set")
  self.rate, self.burst = rate, burst
  return self.h:set(rate, burst)
end

--- {rate, burst, members, active, bytes, waits}: bytes is what members sent
-- through it (DATA payload), waits how often one was held back.
function Limiter:stats()
  return self.h:stats()
end

return M
