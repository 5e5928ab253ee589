-- ludx: tasks over the libuv loop. This module gathers the public API of
-- the parts, each in its own module:
--   ludx.sched     tasks, waits, cancel, join, the loop (ludx.run)
--   ludx.timers    the timer heap (ludx.after)
--   ludx.dispatch  refs of C objects and the dispatch of their events
--   ludx.queue     wait queues (ludx.waiters) and channels (ludx.queue)
--   ludx.dns       host name lookups (ludx.lookup)
--   ludx.signal    waiting for a signal (ludx.signal)
local core = require "ludx.core"
local sched = require "ludx.sched"
local timers = require "ludx.timers"
local dispatch = require "ludx.dispatch"
local queue = require "ludx.queue"
local dns = require "ludx.dns"
local signal = require "ludx.signal"

local M = {}
M.core = core
M.EV = core.EV
M.now = core.now
M.version = core.version

-- tasks and the loop
M.run = sched.run
M.running = sched.running
M.spawn = sched.spawn
M.wait = sched.wait
M.wake = sched.wake
M.await = sched.await
M.current = sched.current
M.in_task = sched.in_task
M.sleep = sched.sleep
M.yield = sched.yield
M.cancel = sched.cancel
M.tasks = sched.tasks
M.is_cancelled = sched.is_cancelled
M.user_level = sched.user_level
M.check_timeout = sched.check_timeout
M.on_interrupt = sched.on_interrupt

-- timers
M.after = timers.after

-- C objects and their events
M.ref = dispatch.ref
M.unref = dispatch.unref
M.object = dispatch.object
M.on_event = dispatch.on_event
M.track = dispatch.track
M.untrack = dispatch.untrack

-- wait queues
M.waiters = queue.waiters
M.queue = queue.queue

M.lookup = dns.lookup
M.signal = signal.wait

return M
