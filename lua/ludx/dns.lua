-- Host name lookups through libuv's getaddrinfo, as a task wait.
local core = require "ludx.core"
local sched = require "ludx.sched"
local dispatch = require "ludx.dispatch"
local queue = require "ludx.queue"

local type = type

local M = {}

--- Resolves a host name: a list of addresses ({"127.0.0.1", ...}).
-- family: 4, 6 or nil for both. An IP literal comes back as it is.
function M.lookup(host, family, timeout)
  if type(host) ~= "string" then error("bad argument 'host' to 'lookup' (string expected, got " .. type(host) .. ")", sched.user_level()) end
  if family ~= nil and family ~= 4 and family ~= 6 then error("bad argument 'family' to 'lookup' (4, 6 or nil expected)", sched.user_level()) end
  timeout = sched.check_timeout(timeout, "lookup")
  if host:match("^%d+%.%d+%.%d+%.%d+$") or host:find(":", 1, true) then return { host } end
  local op = { waiters = queue.waiters() }
  op.ref = dispatch.ref(op)
  local req, msg, code = core.lookup(host, op.ref, family or 0)
  if not req then
    dispatch.unref(op.ref)
    return nil, msg, code
  end
  op.req = req -- the op (held by its ref) keeps the pending request alive
  -- a cancelled lookup lets go of its ref too
  local done, ok, m, c = pcall(op.waiters.wait, op.waiters, "lookup " .. host, timeout, "lookup")
  dispatch.unref(op.ref)
  if not done then error(ok, 0) end
  if ok == nil and c then return nil, m, c end
  return req:result()
end

dispatch.on_event(core.EV.LOOKUP, function(op)
  op.waiters:wake_all(true)
end)

return M
