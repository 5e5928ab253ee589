-- Objects, refs and the C event dispatch. Each C object gets a ref (a
-- number) when it is made; C callbacks post records {kind, ref, a, b} to the
-- ring, and after each loop turn dispatch() hands every record to the
-- handler of its kind with the object its ref names. Also the list of
-- objects to close when the outermost ludx.run ends.
local core = require "ludx.core"
local ffi = require "ffi"

pcall(ffi.cdef, core.EVENT_CDEF)

local pcall, tonumber, tostring, setmetatable = pcall, tonumber, tostring, setmetatable

local M = {}

local handlers = {}
local objects = {}
local next_ref = 0

-- Refs are not reused while they could still be in flight: an event that
-- arrives after its object let go (a late exit, a close) must not reach a
-- newer object. They wrap after 2^32 - 1, skipping those still in use.
function M.ref(obj)
  repeat
    next_ref = next_ref % 0xFFFFFFFF + 1
  until objects[next_ref] == nil
  objects[next_ref] = obj
  return next_ref
end

function M.unref(r)
  if r then objects[r] = nil end
end

function M.object(r)
  return objects[r]
end

--- Registers fn(obj, a, b, ref) for events of a kind; obj is the object the
-- event's ref names (events for released refs are dropped).
function M.on_event(kind, fn)
  handlers[kind] = fn
end

local dispatch_ev, dispatch_i, dispatch_n = nil, 0, 0

local function dispatch_some()
  while dispatch_i < dispatch_n do
    local e = dispatch_ev[dispatch_i]
    dispatch_i = dispatch_i + 1
    local h = handlers[e.kind]
    if h then
      local obj = objects[e.ref]
      if obj ~= nil or e.ref == 0 then h(obj, tonumber(e.a), tonumber(e.b), e.ref) end
    end
  end
end

--- Hands this turn's events to their handlers; a handler that raises is
-- reported and the rest of the batch still goes out.
function M.dispatch()
  local p, n = core.events()
  if n == 0 then return end
  dispatch_ev, dispatch_i, dispatch_n = ffi.cast("const ludx_event_t *", p), 0, n
  while dispatch_i < dispatch_n do
    local ok, err = pcall(dispatch_some)
    if not ok then
      io.stderr:write("ludx: event handler failed: ", tostring(err), "\n")
    end
  end
  dispatch_ev = nil
end

-- Objects that must be closed when the outermost ludx.run ends.
local tracked = setmetatable({}, { __mode = "k" })

function M.track(obj)
  tracked[obj] = true
end

function M.untrack(obj)
  tracked[obj] = nil
end

--- Closes every tracked object; returns how many there were.
function M.close_tracked()
  local list = {}
  for obj in pairs(tracked) do list[#list + 1] = obj end
  for _, obj in ipairs(list) do
    tracked[obj] = nil
    pcall(obj.destroy or obj.close, obj) -- the loop ends: nothing can wait
  end
  return #list
end

return M
