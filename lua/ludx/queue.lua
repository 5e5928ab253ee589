-- Wait queues, the building block of the object APIs, and channels.
--
-- A Waiters is a FIFO of the tasks waiting on one thing (a stream's data, a
-- lookup's answer). Each waiting task is a node of a doubly linked list, so a
-- task whose wait ends by timeout or cancel takes itself off in O(1): a queue
-- never keeps tasks that stopped waiting on it.
local sched = require "ludx.sched"

local unpack, setmetatable, pcall, error = unpack, setmetatable, pcall, error

local M = {}

local pack = require("ludx.check").pack

local Waiters = {}
Waiters.__index = Waiters

function M.waiters()
  local w = setmetatable({ n = 0 }, Waiters)
  w.head = { } -- sentinel: head.next is the oldest waiter, head.prev the newest
  w.head.next, w.head.prev = w.head, w.head
  return w
end

local function unlink(self, node)
  if not node.linked then return end
  node.linked = false
  node.prev.next = node.next
  node.next.prev = node.prev
  node.prev, node.next = nil, nil
  self.n = self.n - 1
end

--- Waits on the queue; returns what wake_one/wake_all passed, or a timeout.
function Waiters:wait(what, timeout, fname)
  local task = sched.check_task(fname or "wait")
  local head = self.head
  local node = { task = task, linked = true, prev = head.prev, next = head }
  head.prev.next = node
  head.prev = node
  self.n = self.n + 1
  local r = pack(pcall(sched.wait, what, timeout, fname))
  unlink(self, node)
  if not r[1] then
    -- cancelled after wake_one chose it: the wake-up goes to the next waiter
    -- (an item put in a queue must not wait for a getter that is gone)
    local woken = node.woken
    if woken then self:wake_one(unpack(woken, 1, woken.n)) end
    error(r[2], 0)
  end
  return unpack(r, 2, r.n)
end

function Waiters:wake_one(...)
  local head = self.head
  while head.next ~= head do
    local node = head.next
    unlink(self, node)
    if sched.wake(node.task, ...) then
      node.woken = pack(...)
      return true
    end
  end
  return false
end

function Waiters:wake_all(...)
  local list = {}
  local head = self.head
  while head.next ~= head do
    local node = head.next
    unlink(self, node)
    list[#list + 1] = node.task
  end
  for i = 1, #list do sched.wake(list[i], ...) end
  return #list > 0
end

function Waiters:count()
  return self.n
end

--- A channel: put never waits (unless a limit is set), get waits.
local Queue = {}
Queue.__index = Queue
-- One line for the REPL and logs: items, limit, tasks waiting, state.
Queue.__tostring = function(q)
  return string.format("<queue %d items%s, %d getting, %d putting%s>", q:size(),
    q.limit and (", limit " .. q.limit) or "", q.getters.n, q.putters.n, q.closed and ", closed" or "")
end

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
  if self.head > self.tail then self.head, self.tail = 1, 0 end
  self.putters:wake_one(true)
  return v
end

function Queue:close()
  self.closed = true
  self.getters:wake_all(true)
end

return M
