-- ludx.signal: a task waits until the process gets a signal.
--
-- One libuv watcher per signal name runs while at least one task waits for
-- it, and it keeps the loop alive (see bindings/signal.c). While it runs the
-- signal does not end the process; once the last waiter is gone the watcher
-- stops and the default disposition is back (SIGINT/SIGTERM kill again).
local core = require "ludx.core"
local sched = require "ludx.sched"
local dispatch = require "ludx.dispatch"

local type, pairs, ipairs, pcall, unpack, error = type, pairs, ipairs, pcall, unpack, error

local M = {}

local pack = require("ludx.check").pack

-- the signals a script may wait for (SIGKILL and SIGSTOP cannot be caught)
local CATCHABLE = {
  SIGINT = true, SIGTERM = true, SIGHUP = true, SIGQUIT = true,
  SIGUSR1 = true, SIGUSR2 = true, SIGWINCH = true, SIGCONT = true,
}

local entries = {} -- name -> {name, ref, tasks = {task = true}, count, watcher}

-- the handler other watchers of signals (core.signal) use too
dispatch.on_event(core.EV.SIGNAL, function(obj, signum)
  if obj and obj.on_signal then obj.on_signal(signum) end
end)

local function entry(name)
  local e = entries[name]
  if e then return e end
  e = { name = name, tasks = {}, count = 0 }
  e.on_signal = function()
    for task in pairs(e.tasks) do sched.wake(task, name) end
  end
  e.ref = dispatch.ref(e)
  entries[name] = e
  return e
end

local function leave(e, task)
  if not e.tasks[task] then return end
  e.tasks[task] = nil
  e.count = e.count - 1
  if e.count == 0 and e.watcher then
    e.watcher:stop()
    e.watcher = nil
  end
end

local function bad_name(v)
  error("bad argument 'name' to 'signal' (signal name such as \"SIGINT\" or a list of them expected, got " ..
    (type(v) == "string" and ("'" .. v .. "'") or type(v)) .. ")", sched.user_level())
end

local function check_name(v)
  if type(v) ~= "string" then bad_name(v) end
  local name = v:upper()
  if name:sub(1, 3) ~= "SIG" then name = "SIG" .. name end
  if not CATCHABLE[name] then bad_name(v) end
  return name
end

--- Waits in the current task until the process gets the signal `names` (a
-- name such as "SIGTERM", or a list of names) and returns the name of the one
-- that came; nil, "timed out", "ETIMEDOUT" after timeout ms. While a task
-- waits here, that signal does not end the process.
function M.wait(names, timeout)
  local task = sched.check_task("signal")
  local list = {}
  if type(names) == "table" then
    for i, v in ipairs(names) do list[i] = check_name(v) end
    if #list == 0 then bad_name(names) end
  else
    list[1] = check_name(names)
  end
  timeout = sched.check_timeout(timeout, "signal")
  local joined = {}
  for i, name in ipairs(list) do
    local e = entry(name)
    if not e.watcher then
      local w, msg, code = core.signal_wait(name, e.ref)
      if not w then
        for j = 1, i - 1 do leave(entries[list[j]], task) end
        return nil, msg, code
      end
      e.watcher = w
    end
    if not e.tasks[task] then
      e.tasks[task] = true
      e.count = e.count + 1
      joined[#joined + 1] = e
    end
  end
  local r = pack(pcall(sched.wait, "signal " .. table.concat(list, " or "), timeout, "signal"))
  for _, e in ipairs(joined) do leave(e, task) end
  if not r[1] then error(r[2], 0) end
  return unpack(r, 2, r.n)
end

--- How many tasks wait for the signal (for tests).
function M.waiting(name)
  local e = entries[check_name(name)]
  return e and e.count or 0
end

return M
