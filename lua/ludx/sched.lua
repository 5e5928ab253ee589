-- The task scheduler: tasks over the libuv loop.
--
-- A task is a coroutine with a name. A call that would block (sleep, a read,
-- a write above the high-water mark) suspends only its task. The loop belongs
-- to the C runtime: each turn, Lua runs the ready tasks, fires due timers,
-- lets libuv run once, then reads the turn's batch of C events from the ring
-- and wakes the tasks waiting on them. Times are in milliseconds.
--
-- Task lifecycle
--
--   spawn ---> ready ---> running ---> done ("dead")
--                ^           |
--                |           v
--                +------- waiting
--
-- spawn(name, fn, ...)  makes the task "ready" and queues it; it belongs to
--            the group of the ludx.run that spawned it (run returns when the
--            group is empty). Nothing runs before the spawner waits or yields.
-- ready      queued in a FIFO. Each pass runs only the tasks that were ready
--            when the pass began, so a task that keeps yielding cannot starve
--            timers or I/O.
-- running    the body runs until it waits, yields or returns.
-- waiting    wait(what, timeout) parked it (what is shown by ludx.tasks()).
--            The first of these makes it ready again; a token makes sure
--            only one of them counts:
--              wake(task, ...)  the values come back from wait;
--              the timeout      wait returns nil, "timed out", "ETIMEDOUT";
--              cancel(reason)   wait raises a cancel error in the task.
-- done       the body returned (its results are kept for join) or raised
--            (the error is kept, and reported on stderr with the name and a
--            traceback unless the task is quiet or it was a cancel). Joiners
--            wake, the group count drops, and the scheduler forgets the task:
--            a finished task is garbage once its owner lets go of it.
--
-- cancel: a waiting task wakes with the cancel error raised by its wait; a
-- ready task that never ran ends at once; one that ran gets the error when it
-- resumes; a running task cancelling itself gets it at its next wait. Waits
-- on a queue catch the error only to take their waiter off the queue, then
-- raise it again. A cancel ends the task quietly.
-- errors: an uncaught error ends its own task only. When no task of a run can
-- be woken any more (nothing ready, no timer, no live handle), the waiting
-- ones fail with a "deadlock" cancel that names what each waited on.
local core = require "ludx.core"
local timers = require "ludx.timers"
local dispatch = require "ludx.dispatch"
local check = require "ludx.check"

local coroutine_create, coroutine_resume, coroutine_running, coroutine_yield, coroutine_status =
  coroutine.create, coroutine.resume, coroutine.running, coroutine.yield, coroutine.status
local traceback = debug.traceback
local unpack, type, tostring, setmetatable, pcall = unpack, type, tostring, setmetatable, pcall

local now = core.now

local M = {}

local pack = check.pack

local Task = {}
Task.__index = Task

local tasks_by_co = setmetatable({}, { __mode = "k" })
local live = {} -- id -> task, until it ends
local ready, ready_head, ready_tail = {}, 1, 0
local current = nil
local next_task_id = 0
local running_loop = false

local Cancelled = {}
Cancelled.__index = Cancelled
Cancelled.__tostring = function(self) return self.reason end

local function is_cancel(err)
  return type(err) == "table" and getmetatable(err) == Cancelled
end
M.is_cancelled = is_cancel

local function push_ready(task, values)
  task.state = "ready"
  task.resume_values = values
  ready_tail = ready_tail + 1
  ready[ready_tail] = task
end

-- Groups: ludx.run waits for its function and every task spawned from it.
local function group_leave(group)
  group.count = group.count - 1
  if group.count == 0 and group.waiter then
    local w = group.waiter
    group.waiter = nil
    M.wake(w, true)
  end
end

local function report(task, err)
  if is_cancel(err) then return end
  io.stderr:write(string.format("ludx: task '%s' failed: %s\n", task.name, tostring(err)))
  -- without LuaJIT's [builtin#N] frames (the task's coroutine entry): noise
  if task.traceback then io.stderr:write((task.traceback:gsub("\n%s*%[builtin#%d+%][^\n]*", "")), "\n") end
  io.stderr:flush()
end

local function finish(task, ok, results)
  task.state = "dead"
  task.waiting = nil
  live[task.id] = nil
  tasks_by_co[task.co] = nil
  if ok then
    task.results = results
  else
    task.error = results
    if not task.quiet then
      report(task, results)
    elseif task.run_main and task.group.count > 1 and not is_cancel(results) then
      -- run returns this error only once the tasks it started end, which
      -- may be never (a node, a server): say it now
      io.stderr:write(string.format("ludx: the function given to ludx.run failed; run returns once its %d other task(s) end: %s\n",
        task.group.count - 1, tostring(results)))
      if task.traceback then io.stderr:write(task.traceback, "\n") end
      io.stderr:flush()
    end
  end
  if task.joiners then
    local joiners = task.joiners
    task.joiners = nil
    for i = 1, #joiners do M.wake(joiners[i], true) end
  end
  if task.on_exit then task.on_exit(task) end
  group_leave(task.group)
end

local function step_task(task)
  local values = task.resume_values
  task.resume_values = nil
  task.state = "running"
  task.started = true
  local prev = current
  current = task
  local r
  if values then
    r = pack(coroutine_resume(task.co, unpack(values, 1, values.n)))
  else
    r = pack(coroutine_resume(task.co))
  end
  current = prev
  if coroutine_status(task.co) == "dead" then
    if r[1] then
      -- the body returns (true, results...) or (false, err) from its xpcall
      if r[2] then
        finish(task, true, pack(unpack(r, 3, r.n)))
      else
        finish(task, false, r[3])
      end
    else
      finish(task, false, r[2])
    end
  elseif task.state == "running" then
    -- a bare coroutine.yield() inside a task: let the others run first
    push_ready(task, nil)
  end
end

local function run_ready()
  -- only what was ready when this pass began, so that I/O is never starved
  local last = ready_tail
  while ready_head <= last do
    local task = ready[ready_head]
    ready[ready_head] = nil
    ready_head = ready_head + 1
    if task.state == "ready" then step_task(task) end
  end
  if ready_head > ready_tail then ready_head, ready_tail = 1, 0 end
end

local function new_task(name, fn, group, ...)
  next_task_id = next_task_id + 1
  local task = setmetatable({ id = next_task_id, name = name, group = group, state = "ready" }, Task)
  local args = pack(...)
  task.co = coroutine_create(function()
    return xpcall(function() return fn(unpack(args, 1, args.n)) end, function(err)
      if not is_cancel(err) then task.traceback = (traceback("", 2):gsub("^\n", "")) end
      return err
    end)
  end)
  tasks_by_co[task.co] = task
  live[task.id] = task
  group.count = group.count + 1
  push_ready(task, nil)
  return task
end

local root_group = nil

--- Starts a named task. Returns the task; an uncaught error ends this task
-- only and is reported on stderr with its name and traceback.
function M.spawn(name, fn, ...)
  if type(name) == "function" then
    return M.spawn("task", name, fn, ...)
  end
  if type(name) ~= "string" then error("bad argument 'name' to 'spawn' (string expected, got " .. type(name) .. ")", 2) end
  if type(fn) ~= "function" then error("bad argument 'fn' to 'spawn' (function expected, got " .. type(fn) .. ")", 2) end
  local group = (current and current.group) or root_group
  if not group then
    error("ludx.spawn: no loop is running (call it inside ludx.run)", 2)
  end
  return new_task(name, fn, group, ...)
end

-- Errors about misuse point at the caller's line, outside ludx's own modules.
local user_level = check.user_level
M.user_level = user_level

--- The current task, or a raised error naming fname when the caller is not
-- a task of the running loop.
local function check_task(fname)
  local co = coroutine_running()
  local task = co and tasks_by_co[co]
  if task == current and task ~= nil then return task end
  local level = user_level()
  if co == nil or not running_loop then
    error("ludx." .. fname .. " must be called from a task (inside ludx.run or ludx.spawn)", level)
  end
  error("ludx." .. fname .. " was called inside a coroutine that is not a ludx task: " ..
    "a runtime wait cannot cross a user coroutine (start it with ludx.spawn instead)", level)
end
M.check_task = check_task

local function check_timeout(timeout, fname)
  return check.timeout(timeout, fname)
end
M.check_timeout = check_timeout

local TIMEOUT = pack(nil, "timed out", "ETIMEDOUT")

--- Suspends the current task until M.wake(task, ...) or the timeout.
-- `what` says what it waits on (ludx.tasks() shows it). Returns the values
-- given to wake, or nil, "timed out", "ETIMEDOUT".
function M.wait(what, timeout, fname)
  local task = check_task(fname or "wait")
  timeout = check_timeout(timeout, fname or "wait")
  task.state = "waiting"
  task.waiting = what
  local token = {}
  task.token = token
  if timeout then
    task.timer = timers.add(timeout, function()
      if task.token == token then
        task.token, task.timer, task.waiting = nil, nil, nil
        push_ready(task, TIMEOUT)
      end
    end)
  end
  local r = pack(coroutine_yield())
  if is_cancel(r[1]) then error(r[1], 0) end
  return unpack(r, 1, r.n)
end

--- Makes a waiting task ready; its wait returns the values given here.
-- Returns false when the task was not waiting.
function M.wake(task, ...)
  if task.state ~= "waiting" or not task.token then return false end
  task.token = nil
  task.waiting = nil
  if task.timer then
    timers.cancel(task.timer)
    task.timer = nil
  end
  push_ready(task, pack(...))
  return true
end

function M.current()
  return current
end

--- True when the caller runs in the current task itself (so it may wait):
-- false in a timer or event callback, and in a plain coroutine.
function M.in_task()
  local co = coroutine_running()
  return co ~= nil and current ~= nil and tasks_by_co[co] == current
end

function M.sleep(ms)
  if type(ms) ~= "number" or ms < 0 or ms ~= ms then
    check_task("sleep")
    error("bad argument 'ms' to 'sleep' (non-negative number expected, got " .. tostring(ms) .. ")", user_level())
  end
  M.wait("sleep", ms, "sleep")
  return true
end

--- Lets the other ready tasks run, then continues.
function M.yield()
  local task = check_task("yield")
  push_ready(task, nil)
  task.waiting = "yield"
  local r = coroutine_yield()
  if is_cancel(r) then error(r, 0) end
  return true
end

--- Starts a callback-style operation and waits for its callback in the
-- current task: start(cb) is called at once, and the first cb(...) ends the
-- wait with its values (later calls are ignored). Returns those values, or
-- nil, "timed out", "ETIMEDOUT" after timeout ms (a callback after that is
-- ignored too). A cancel of the task raises in it as from any wait.
function M.await(what, timeout, start)
  local task = check_task("await")
  if type(what) ~= "string" then error("bad argument 'what' to 'await' (string expected, got " .. type(what) .. ")", user_level()) end
  timeout = check_timeout(timeout, "await")
  if type(start) ~= "function" then error("bad argument 'start' to 'await' (function expected, got " .. type(start) .. ")", user_level()) end
  local res, waiting = nil, false
  start(function(...)
    if res then return end
    res = pack(...)
    if waiting then
      waiting = false
      M.wake(task, true)
    end
  end)
  while not res do
    waiting = true
    local r = pack(pcall(M.wait, what, timeout, "await"))
    waiting = false
    if not r[1] then
      res = res or {} -- a late callback must not wake the task in another wait
      error(r[2], 0)
    end
    if r[2] == nil and r[4] == "ETIMEDOUT" and not res then
      res = {}
      return nil, r[3], r[4]
    end
  end
  return unpack(res, 1, res.n)
end

function Task:cancel(reason)
  if self.state == "dead" then return false end
  local err = setmetatable({ reason = reason or "cancelled" }, Cancelled)
  if self.state == "waiting" then
    self.token = nil
    if self.timer then
      timers.cancel(self.timer)
      self.timer = nil
    end
    push_ready(self, pack(err))
  elseif self.state == "ready" then
    self.resume_values = pack(err)
    -- a task that never ran yet has nothing to raise the error in: end it now
    if coroutine_status(self.co) == "suspended" and not self.started then
      self.state = "dead"
      finish(self, false, err)
      return true
    end
  end
  return true
end

--- Cancels a task (a task object or its id): its current or next wait
-- raises "cancelled" (or reason), which ends it quietly.
function M.cancel(task, reason)
  if type(task) == "number" then
    local t = live[task]
    if t then return t:cancel(reason) end
    return false
  end
  return task:cancel(reason)
end

--- Waits until the task ends; returns its results, or nil, msg on error.
function Task:join(timeout)
  while self.state ~= "dead" do
    local me = check_task("join")
    self.joiners = self.joiners or {}
    local joiners = self.joiners
    joiners[#joiners + 1] = me
    local r = pack(pcall(M.wait, "join " .. self.name, timeout, "join"))
    -- a joiner that timed out or was cancelled leaves the list
    if self.joiners == joiners then
      for i = #joiners, 1, -1 do
        if joiners[i] == me then table.remove(joiners, i) break end
      end
    end
    if not r[1] then error(r[2], 0) end
    if r[2] == nil and r[4] == "ETIMEDOUT" then return nil, r[3], r[4] end
  end
  if self.error ~= nil then return nil, tostring(self.error) end
  return unpack(self.results, 1, self.results.n)
end

Task.__tostring = function(self) return "task " .. self.id .. " '" .. self.name .. "' (" .. self.state .. ")" end

--- The live tasks, oldest first: {id, name, state, waiting}.
function M.tasks()
  local ids = {}
  for id in pairs(live) do ids[#ids + 1] = id end
  table.sort(ids)
  local out = {}
  for i, id in ipairs(ids) do
    local t = live[id]
    out[i] = { id = t.id, name = t.name, state = t.state, waiting = t.waiting }
  end
  return out
end

--- How many tasks have not ended (cheaper than #ludx.tasks()).
function M.count()
  local n = 0
  for _ in pairs(live) do n = n + 1 end
  return n
end

---------------------------------------------------------------------------
-- The loop.

local function fail_deadlocked(group)
  for _, t in pairs(live) do
    if t.group == group and t.state == "waiting" then
      local what = t.waiting or "?"
      t.token = nil
      push_ready(t, pack(setmetatable({
        reason = "deadlock: task '" .. t.name .. "' waits on " .. what .. " and nothing is left that could wake it",
      }, Cancelled)))
      -- report it even though it is raised like a cancel
      io.stderr:write("ludx: task '", t.name, "' waits on ", what, " and nothing is left that could wake it\n")
    end
  end
end

local function loop(group)
  while group.count > 0 do
    run_ready()
    timers.fire()
    if group.count == 0 then break end
    local timeout = -1
    if ready_head <= ready_tail then
      timeout = 0
    else
      local d = timers.next_deadline()
      if d then
        timeout = d - now()
        if timeout < 0 then timeout = 0 end
      end
    end
    local n, alive = core.step(timeout)
    dispatch.dispatch()
    if n == 0 and not alive and timeout < 0 and ready_head > ready_tail and not timers.next_deadline() then
      fail_deadlocked(group)
    end
  end
end

local interrupt_handler = nil

--- Sets fn() to run (on the scheduler, not in a task) on Ctrl-C when the
-- REPL owns the terminal.
function M.on_interrupt(fn)
  interrupt_handler = fn
end

dispatch.on_event(core.EV.INTERRUPT, function()
  -- when Ctrl-C's hook already stopped a busy task, that was its effect
  if core.interrupt_clear() then return end
  if interrupt_handler then interrupt_handler() end
end)

--- Runs fn as the task "main" and drives the loop until it and every task
-- it spawned have ended. Returns fn's results, or nil, msg, traceback when
-- fn raised. Inside a task, it waits for them instead.
function M.run(fn, ...)
  if type(fn) ~= "function" then error("bad argument 'fn' to 'run' (function expected, got " .. type(fn) .. ")", 2) end
  local group = { count = 0 }
  if running_loop then
    local me = check_task("run")
    local task = new_task("main", fn, group, ...)
    task.quiet = true
    task.run_main = true
    while group.count > 0 do
      group.waiter = me
      M.wait("run", nil, "run")
    end
    if task.error ~= nil then return nil, tostring(task.error), task.traceback end
    return unpack(task.results, 1, task.results.n)
  end
  running_loop = true
  root_group = group
  local task = new_task("main", fn, group, ...)
  task.quiet = true
  task.run_main = true
  local ok, err = pcall(loop, group)
  -- what the tasks left open is closed, and its close events are drained
  if dispatch.close_tracked() > 0 then
    local quiet = 0
    for _ = 1, 50 do
      local n = core.step(0)
      dispatch.dispatch()
      quiet = n == 0 and quiet + 1 or 0
      if quiet >= 2 then break end
    end
  end
  running_loop = false
  root_group = nil
  if not ok then error(err, 0) end
  if task.error ~= nil then
    return nil, tostring(task.error), task.traceback
  end
  return unpack(task.results, 1, task.results.n)
end

function M.running()
  return running_loop
end

return M
