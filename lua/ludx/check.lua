-- ludx.check: the argument checks, pack and deadlines the modules share.
--
-- A wrong argument is a programming error: it raises
--   bad argument 'NAME' to 'FUNCTION' (EXPECTED expected, got GOT)
-- at the first caller outside ludx's own modules, so the message points at
-- the user's line, not at the helper that noticed.
--
--   local check = require "ludx.check"
--   check.fail("port", "connect", "port number 1..65535", tostring(port))
--   check.string(data, "data", "write")            -- any string
--   check.bytes(key, 32, "public_key", "connect")  -- exactly 32 bytes
--   check.port(port, "port", "ping", 1)            -- integer min..65535
--   check.timeout(t, "read")                       -- nil or ms >= 0
--   check.opt_number(opts, "max_peers", "swarm.new", 64, 0, true)  -- opts.max_peers, integer >= 0
--   local deadline = check.deadline(timeout); ... check.left(deadline)
--   local r = check.pack(f()); return unpack(r, 1, r.n)
local type, tostring, select, format, huge = type, tostring, select, string.format, math.huge
local getinfo = debug.getinfo

local M = {}

--- { n = select("#", ...), ... }: keeps trailing nils.
function M.pack(...)
  return { n = select("#", ...), ... }
end

-- Every file under this directory is ludx's own (lua/ludx/...).
local module_dir = getinfo(1, "S").source:match("^@(.*/)[^/]*$") or "\0"

--- The error() level of the first Lua caller outside ludx's modules, as
-- seen from the function that calls user_level.
function M.user_level()
  local level = 2
  while true do
    local info = getinfo(level + 1, "S")
    if not info then return 1 end
    local src = info.source
    if src:sub(1, 1) ~= "@" or src:sub(2, #module_dir + 1) ~= module_dir then
      if info.what ~= "C" then return level end
    end
    level = level + 1
  end
end

--- Raises "bad argument 'name' to 'fname' (expected expected, got got)".
function M.fail(name, fname, expected, got)
  error(format("bad argument '%s' to '%s' (%s expected, got %s)", name, fname, expected, tostring(got)), M.user_level())
end

-- What a wrong value was, for the message: a string's length, else its type.
local function what(v)
  if type(v) == "string" then return #v .. " bytes" end
  if type(v) == "number" or type(v) == "boolean" then return type(v) .. " " .. tostring(v) end
  return type(v)
end
M.what = what

--- v must be a string; optional: nil passes.
function M.string(v, name, fname, optional)
  if v == nil and optional then return nil end
  if type(v) ~= "string" then M.fail(name, fname, "string", type(v)) end
  return v
end

--- v must be a string of exactly len bytes; optional: nil passes.
function M.bytes(v, len, name, fname, optional)
  if v == nil and optional then return nil end
  if type(v) ~= "string" or #v ~= len then M.fail(name, fname, len .. "-byte string", what(v)) end
  return v
end

--- v must be a table; optional: nil passes (and returns {}).
function M.table(v, name, fname, optional)
  if v == nil and optional then return {} end
  if type(v) ~= "table" then M.fail(name, fname, "table", type(v)) end
  return v
end

--- v must be a function; optional: nil passes.
function M.func(v, name, fname, optional)
  if v == nil and optional then return nil end
  if type(v) ~= "function" then M.fail(name, fname, "function", type(v)) end
  return v
end

--- v must be an integer in min..max.
function M.integer(v, min, max, name, fname)
  if type(v) ~= "number" or v % 1 ~= 0 or v < min or v > max then
    M.fail(name, fname, "integer " .. min .. ".." .. max, type(v) == "number" and tostring(v) or type(v))
  end
  return v
end

--- A port: an integer min (0 or 1) ..65535.
function M.port(v, name, fname, min)
  min = min or 0
  if type(v) ~= "number" or v % 1 ~= 0 or v < min or v > 65535 then
    M.fail(name, fname, "port number " .. min .. "..65535", type(v) == "number" and tostring(v) or type(v))
  end
  return v
end

--- nil, or a timeout in ms (a non-negative number).
function M.timeout(t, fname, name)
  if t == nil then return nil end
  if type(t) ~= "number" or t < 0 or t ~= t then
    M.fail(name or "timeout", fname, "non-negative number of ms", tostring(t))
  end
  return t
end

--- opts[name], a number option (a cap, a size, ms): nil gives default;
-- else a number in min..max (max: none when nil), an integer when integer
-- is true (math.huge passes: no cap). A wrong one raises naming 'opts.NAME'
-- to fname (the public function) at the user's line.
function M.opt_number(opts, name, fname, default, min, integer, max)
  local v = opts[name]
  if v == nil then return default end
  max = max or huge
  if type(v) ~= "number" or v ~= v or v < min or v > max or (integer and v % 1 ~= 0 and v ~= huge) then
    local range = max == huge and ">= " .. min or min .. ".." .. max
    M.fail("opts." .. name, fname, (integer and "integer " or "number ") .. range, type(v) == "number" and "number " .. v or type(v))
  end
  return v
end

local now = nil

--- The clock reading at which timeout ms will have passed (nil: never).
function M.deadline(timeout)
  if not timeout then return nil end
  now = now or require("ludx").now
  return now() + timeout
end

--- The ms left until deadline (0 when past; nil for no deadline).
function M.left(deadline)
  if not deadline then return nil end
  now = now or require("ludx").now
  local t = deadline - now()
  return t > 0 and t or 0
end

return M
