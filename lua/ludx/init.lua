-- ludx: tasks over the libuv loop.
--
-- A task is a coroutine with a name. A call that would block (sleep, a read,
-- a write above the high-water mark) suspends only its task. The loop belongs
-- to the C runtime: each turn, Lua runs the ready tasks, fires due timers,
-- lets libuv run once, then reads the turn's batch of C events from the ring
-- and wakes the tasks waiting on them. Times are in milliseconds.
local core = require "ludx.core"
local ffi = require "ffi"

pcall(ffi.cdef, core.EVENT_CDEF)

local M = {}
M.core = core
M.EV = core.EV

local coroutine_create, coroutine_resume, coroutine_running, coroutine_yield, coroutine_status =
  coroutine.create, coroutine.resume, coroutine.running, coroutine.yield, coroutine.status
local traceback = debug.traceback
local unpack, select, type, tostring, setmetatable = unpack, select, type, tostring, setmetatable

local now = core.now
M.now = now

local function pack(...)
  return { n = select("#", ...), ... }
end

---------------------------------------------------------------------------
-- Timers: a binary heap of {at, seq, fn}; cancelled entries are skipped.

local timers = require("ludx.heap").new()

local function timer_add(ms, fn)
  return timers:push({ at = now() + ms, fn = fn })
end

local function next_deadline()
  while timers.n > 0 and timers:peek().cancelled do timers:pop() end
  return timers.n > 0 and timers:peek().at or nil
end

local function fire_timers()
  local t = now()
  while timers.n > 0 and timers:peek().at <= t do
    local e = timers:pop()
    if not e.cancelled then e.fn() end
  end
end

--- Calls fn (not in a task; it must not wait) after ms milliseconds.
-- Returns a handle with :cancel().
function M.after(ms, fn)
  if type(ms) ~= "number" or ms < 0 or ms ~= ms then
    error("bad argument 'ms' to 'after' (non-negative number expected, got " .. tostring(ms) .. ")", 2)
  end
  if type(fn) ~= "function" then error("bad argument 'fn' to 'after' (function expected, got " .. type(fn) .. ")", 2) end
  local t = timer_add(ms, fn)
  t.cancel = function(self) self.cancelled = true end
  return t
end

---------------------------------------------------------------------------
-- Tasks.

local Task = {}
Task.__index = Task

local tasks_by_co = setmetatable({}, { __mode = "k" })
local live = {}        -- task -> true
local live_order = {}  -- ids in creation order, for ludx.tasks()
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
  if task.traceback then io.stderr:write(task.traceback, "\n") end
  io.stderr:flush()
end

local function finish(task, ok, results)
  task.state = "dead"
  task.waiting = nil
  live[task] = nil
  tasks_by_co[task.co] = nil
  if ok then
    task.results = results
  else
    task.error = results
    if not task.quiet then report(task, results) end
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
  live[task] = true
  live_order[#live_order + 1] = task
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
local module_dir = debug.getinfo(1, "S").source:match("^@(.*/)[^/]*$") or "\0"

local function user_level()
  local level = 2
  while true do
    local info = debug.getinfo(level + 1, "S")
    if not info then return 1 end
    local src = info.source
    if src:sub(1, 1) ~= "@" or src:sub(2, #module_dir + 1) ~= module_dir then
      if info.what ~= "C" then return level end
    end
    level = level + 1
  end
end
M.user_level = user_level

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

local function check_timeout(timeout, fname)
  if timeout == nil then return nil end
  if type(timeout) ~= "number" or timeout < 0 or timeout ~= timeout then
    error("bad argument 'timeout' to '" .. fname .. "' (non-negative number of ms expected, got " .. tostring(timeout) .. ")", user_level())
  end
  return timeout
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
    task.timer = timer_add(timeout, function()
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
    task.timer.cancelled = true
    task.timer = nil
  end
  push_ready(task, pack(...))
  return true
end

function M.current()
  return current
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

function Task:cancel(reason)
  if self.state == "dead" then return false end
  local err = setmetatable({ reason = reason or "cancelled" }, Cancelled)
  if self.state == "waiting" then
    self.token = nil
    if self.timer then
      self.timer.cancelled = true
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
    for t in pairs(live) do
      if t.id == task then return t:cancel(reason) end
    end
    return false
  end
  return task:cancel(reason)
end

--- Waits until the task ends; returns its results, or nil, msg on error.
function Task:join(timeout)
  while self.state ~= "dead" do
    local me = check_task("join")
    self.joiners = self.joiners or {}
    self.joiners[#self.joiners + 1] = me
    local ok, msg, code = M.wait("join " .. self.name, timeout, "join")
    if ok == nil and code == "ETIMEDOUT" then return nil, msg, code end
  end
  if self.error ~= nil then return nil, tostring(self.error) end
  return unpack(self.results, 1, self.results.n)
end

Task.__tostring = function(self) return "task " .. self.id .. " '" .. self.name .. "' (" .. self.state .. ")" end

--- The live tasks: {id, name, state, waiting}.
function M.tasks()
  local out = {}
  local keep = {}
  for _, t in ipairs(live_order) do
    if live[t] then
      keep[#keep + 1] = t
      out[#out + 1] = { id = t.id, name = t.name, state = t.state, waiting = t.waiting }
    end
  end
  live_order = keep
  return out
end

---------------------------------------------------------------------------
-- Objects and events. Each C object gets a ref (a number) when it is made;
-- its events come back with that ref.

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

local function dispatch()
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

---------------------------------------------------------------------------
-- Wait queues: the building block of the object APIs.

local Waiters = {}
Waiters.__index = Waiters

function M.waiters()
  return setmetatable({ n = 0 }, Waiters)
end

--- Waits on the queue; returns what wake_one/wake_all passed, or a timeout.
function Waiters:wait(what, timeout, fname)
  local task = check_task(fname or "wait")
  self.n = self.n + 1
  self[self.n] = task
  local r = pack(M.wait(what, timeout, fname))
  for i = 1, self.n do
    if self[i] == task then
      table.remove(self, i)
      self.n = self.n - 1
      break
    end
  end
  return unpack(r, 1, r.n)
end

function Waiters:wake_one(...)
  while self.n > 0 do
    local t = table.remove(self, 1)
    self.n = self.n - 1
    if M.wake(t, ...) then return true end
  end
  return false
end

function Waiters:wake_all(...)
  local list = {}
  for i = 1, self.n do list[i] = self[i] end
  for i = self.n, 1, -1 do self[i] = nil end
  self.n = 0
  for i = 1, #list do M.wake(list[i], ...) end
  return #list > 0
end

function Waiters:count()
  return self.n
end

--- A channel: put never waits (unless a limit is set), get waits.
local Queue = {}
Queue.__index = Queue

function M.queue(limit)
  return setmetatable({ items = {}, head = 1, tail = 0, limit = limit, getters = M.waiters(), putters = M.waiters() }, Queue)
end

function Queue:size()
  return self.tail - self.head + 1
end

function Queue:put(v, timeout)
  while self.limit and self:size() >= self.limit do
    local ok, msg, code = self.putters:wait("queue put", timeout, "put")
    if ok == nil and code then return nil, msg, code end
  end
  self.tail = self.tail + 1
  self.items[self.tail] = v
  self.getters:wake_one(true)
  return true
end

function Queue:get(timeout)
  while self.head > self.tail do
    if self.closed then return nil, "queue closed", "EOF" end
    local ok, msg, code = self.getters:wait("queue get", timeout, "get")
    if ok == nil and code then return nil, msg, code end
  end
  local v = self.items[self.head]
  self.items[self.head] = nil
  self.head = self.head + 1
  self.putters:wake_one(true)
  return v
end

function Queue:close()
  self.closed = true
  self.getters:wake_all(true)
end

---------------------------------------------------------------------------
-- The loop.

local function fail_deadlocked(group)
  for t in pairs(live) do
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

local function close_tracked()
  local list = {}
  for obj in pairs(tracked) do list[#list + 1] = obj end
  for _, obj in ipairs(list) do
    tracked[obj] = nil
    pcall(obj.close, obj)
  end
  return #list
end

local function loop(group)
  while group.count > 0 do
    run_ready()
    fire_timers()
    if group.count == 0 then break end
    local timeout = -1
    if ready_head <= ready_tail then
      timeout = 0
    else
      local d = next_deadline()
      if d then
        timeout = d - now()
        if timeout < 0 then timeout = 0 end
      end
    end
    local n, alive = core.step(timeout)
    dispatch()
    if n == 0 and not alive and timeout < 0 and ready_head > ready_tail and not next_deadline() then
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

M.on_event(core.EV.INTERRUPT, function()
  core.interrupt_clear()
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
  local ok, err = pcall(loop, group)
  -- what the tasks left open is closed, and its close events are drained
  if close_tracked() > 0 then
    local quiet = 0
    for _ = 1, 50 do
      local n = core.step(0)
      dispatch()
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

--- Resolves a host name: a list of addresses ({"127.0.0.1", ...}).
-- family: 4, 6 or nil for both. An IP literal comes back as it is.
local lookups = {}

function M.lookup(host, family, timeout)
  if type(host) ~= "string" then error("bad argument 'host' to 'lookup' (string expected, got " .. type(host) .. ")", user_level()) end
  if family ~= nil and family ~= 4 and family ~= 6 then error("bad argument 'family' to 'lookup' (4, 6 or nil expected)", user_level()) end
  timeout = check_timeout(timeout, "lookup")
  if host:match("^%d+%.%d+%.%d+%.%d+$") or host:find(":", 1, true) then return { host } end
  local op = { waiters = M.waiters() }
  op.ref = M.ref(op)
  local req, msg, code = core.lookup(host, op.ref, family or 0)
  if not req then
    M.unref(op.ref)
    return nil, msg, code
  end
  lookups[op.ref] = req
  local ok, m, c = op.waiters:wait("lookup " .. host, timeout, "lookup")
  lookups[op.ref] = nil
  M.unref(op.ref)
  if ok == nil and c then return nil, m, c end
  return req:result()
end

M.on_event(core.EV.LOOKUP, function(op)
  op.waiters:wake_all(true)
end)

function M.running()
  return running_loop
end

M.version = core.version

return M
