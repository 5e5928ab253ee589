local ludx = require "ludx"
local H = require "helper"
local run = H.run

describe("tasks", function()
  it("run returns the function's results", function()
    local a, b, c = ludx.run(function(x) return x, "two", nil end, 1)
    assert.are.equal(1, a)
    assert.are.equal("two", b)
    assert.is_nil(c)
  end)

  it("run returns nil, msg when the function raises", function()
    local ok, msg = ludx.run(function() error("kaboom") end)
    assert.is_nil(ok)
    assert.matches("kaboom", msg)
  end)

  it("run waits for every task the function spawned", function()
    local done = {}
    ludx.run(function()
      for i = 1, 3 do
        ludx.spawn("child" .. i, function()
          ludx.sleep(5 * i)
          ludx.spawn("grandchild" .. i, function()
            ludx.sleep(5)
            done[#done + 1] = "g" .. i
          end)
          done[#done + 1] = "c" .. i
        end)
      end
    end)
    assert.are.equal(6, #done)
  end)

  it("runs ready tasks in order and fairly", run(function()
    local order = {}
    local a = ludx.spawn("a", function()
      for i = 1, 3 do
        order[#order + 1] = "a" .. i
        ludx.yield()
      end
    end)
    local b = ludx.spawn("b", function()
      for i = 1, 3 do
        order[#order + 1] = "b" .. i
        ludx.sleep(0)
      end
    end)
    a:join()
    b:join()
    assert.are.equal("a1 b1 a2 b2 a3 b3", table.concat(order, " "))
  end))

  it("a task that keeps yielding does not starve timers or others", run(function()
    local ticks = 0
    local spinner = ludx.spawn("spinner", function()
      while true do ludx.yield() end
    end)
    ludx.spawn("ticker", function()
      for _ = 1, 5 do
        ludx.sleep(1)
        ticks = ticks + 1
      end
    end):join()
    spinner:cancel()
    assert.are.equal(5, ticks)
  end))

  it("sleep waits at least its time and now() has sub-millisecond resolution", run(function()
    local t0 = ludx.now()
    ludx.sleep(15)
    local dt = ludx.now() - t0
    assert.is_true(dt >= 14.9, "slept " .. dt)
    local a, b = ludx.now(), ludx.now()
    assert.is_true(b >= a)
    local fractional = false
    for _ = 1, 100 do
      local t = ludx.now()
      if t % 1 ~= 0 then fractional = true break end
    end
    assert.is_true(fractional)
  end))

  it("timers fire in deadline order", run(function()
    local order, tasks = {}, {}
    for _, ms in ipairs({ 30, 10, 20, 0 }) do
      tasks[#tasks + 1] = ludx.spawn("s" .. ms, function()
        ludx.sleep(ms)
        order[#order + 1] = ms
      end)
    end
    -- joined, not a fixed sleep(50): the tasks set their timers a pass after
    -- that sleep, and a 20 ms stall in between (a loaded machine) woke it first
    for _, t in ipairs(tasks) do t:join() end
    assert.are.same({ 0, 10, 20, 30 }, order)
  end))

  it("every wait takes a timeout and returns nil, 'timed out', 'ETIMEDOUT'", run(function()
    local q = ludx.queue()
    local v, msg, code = q:get(10)
    assert.is_nil(v)
    assert.are.equal("timed out", msg)
    assert.are.equal("ETIMEDOUT", code)
    local w = ludx.waiters()
    assert.are.same({ nil, "timed out", "ETIMEDOUT" }, { w:wait("something", 5) })
    local t = ludx.spawn("slow", function() ludx.sleep(200) end)
    assert.are.same({ nil, "timed out", "ETIMEDOUT" }, { t:join(5) })
    t:cancel()
  end))

  it("a wake before the timeout wins, and a timed-out wait is not woken later", run(function()
    local q = ludx.queue()
    ludx.spawn("producer", function()
      ludx.sleep(5)
      q:put("x")
    end)
    assert.are.equal("x", q:get(1000))
    assert.is_nil(q:get(1))
    q:put("late")
    assert.are.equal("late", q:get(0))
  end))

  it("an uncaught error ends its task only", run(function()
    local survivor_done = false
    local bad = ludx.spawn("bad", function()
      ludx.sleep(1)
      error("bad task")
    end)
    bad.quiet = true
    local survivor = ludx.spawn("survivor", function()
      ludx.sleep(5)
      survivor_done = true
      return "ok"
    end)
    local v, msg = bad:join()
    assert.is_nil(v)
    assert.matches("bad task", msg)
    assert.are.equal("ok", survivor:join())
    assert.is_true(survivor_done)
  end))

  it("reports an uncaught error on stderr with the task's name and traceback", run(function()
    local out, err, status = H.ludx({ "-e", [[
      local ludx = require "ludx"
      ludx.spawn("worker-7", function() ludx.sleep(1); local t = nil; return t.field end)
      ludx.sleep(10)
      print("main still ran")
    ]] })
    assert.matches("main still ran", out)
    assert.matches("task 'worker%-7' failed", err)
    assert.matches("attempt to index", err)
    assert.matches("stack traceback", err)
    assert.are.equal(0, status)
  end))

  it("lists live tasks with their names and what they wait on", run(function()
    local q = ludx.queue()
    local t = ludx.spawn("consumer", function() return q:get() end)
    ludx.yield()
    local found
    for _, info in ipairs(ludx.tasks()) do
      if info.name == "consumer" then found = info end
    end
    assert.is_not_nil(found)
    assert.are.equal("waiting", found.state)
    assert.are.equal("queue get", found.waiting)
    q:put(42)
    assert.are.equal(42, t:join())
  end))

  it("cancel ends a waiting task quietly", run(function()
    local t = ludx.spawn("sleeper", function() ludx.sleep(100000) end)
    ludx.yield()
    assert.is_true(t:cancel("stop"))
    local v, msg = t:join()
    assert.is_nil(v)
    assert.are.equal("stop", msg)
    assert.are.equal("dead", t.state)
  end))
end)

describe("object refs", function()
  it("are not reused after release, so late events cannot reach a newer object", function()
    local a = ludx.ref({})
    ludx.unref(a)
    local b = ludx.ref({})
    assert.are_not.equal(a, b)
    assert.is_nil(ludx.object(a))
    ludx.unref(b)
  end)

  it("a process closed before its exit event leaves no stray dispatch", run(function()
    local process = require "ludx.process"
    local p = assert(process.spawn("sh", { "-c", "exit 3" }))
    p:close()
    local other = assert(process.spawn("sh", { "-c", "sleep 0.05; exit 4" }))
    assert.are.equal(4, other:wait(5000))
    other:close()
  end))
end)

describe("misuse", function()
  it("a waiting call outside a task fails at once with a clear message", function()
    local ok, err = pcall(ludx.sleep, 10)
    assert.is_false(ok)
    assert.matches("must be called from a task", err)
    ok, err = pcall(function() return ludx.queue():get(10) end)
    assert.is_false(ok)
    assert.matches("must be called from a task", err)
  end)

  it("a runtime wait crossing a user coroutine fails at once", run(function()
    local co = coroutine.wrap(function() ludx.sleep(1) end)
    local ok, err = pcall(co)
    assert.is_false(ok)
    assert.matches("not a ludx task", err)
    assert.matches("tasks_spec.lua", err)
  end))

  it("wrong argument types raise errors that name the argument", run(function()
    assert.has_error(function() ludx.sleep("soon") end)
    local _, err = pcall(ludx.sleep, "soon")
    assert.matches("bad argument 'ms' to 'sleep'", err)
    _, err = pcall(ludx.spawn, "name", 42)
    assert.matches("bad argument 'fn' to 'spawn'", err)
    _, err = pcall(ludx.queue().get, ludx.queue(), -1)
    assert.matches("bad argument 'timeout'", err)
    _, err = pcall(ludx.run, "not a function")
    assert.matches("bad argument 'fn' to 'run'", err)
  end))

  it("spawn without a running loop says so", function()
    local ok, err = pcall(ludx.spawn, "x", function() end)
    assert.is_false(ok)
    assert.matches("no loop is running", err)
  end)

  it("a task that waits on nothing that can wake it is failed, not hung", function()
    local ok, msg = ludx.run(function()
      ludx.waiters():wait("a promise nobody keeps")
    end)
    assert.is_nil(ok)
    assert.matches("nothing is left that could wake it", msg)
  end)
end)

-- issue 14: a service that spawns a task per request must not grow.
describe("long-running services", function()
  local function heap_kb()
    collectgarbage("collect")
    collectgarbage("collect")
    return collectgarbage("count")
  end

  it("a ludx.run whose function fails while its tasks live says so at once, not when they end", run(function()
    -- the nested run cannot return before "bg" ends: its error must not wait
    local out, err, status = H.ludx({ "-e", [[
      local ok, msg = ludx.run(function()
        ludx.spawn("bg", function() ludx.sleep(20) io.stderr:write("bg done\n") end)
        error("boom")
      end)
      io.stderr:write("returned ", tostring(ok), " ", tostring(msg), "\n")
    ]] })
    assert.are.equal(0, status, err)
    assert.are.equal("", out)
    local said, bg = err:find("failed; run returns once its 1 other task(s) end: (command line):3: boom", 1, true), err:find("bg done", 1, true)
    assert.is_truthy(said, err)
    assert.is_true(said < bg, err)
    assert.matches("returned nil %(command line%):3: boom\n$", err)
  end))

  it("finished tasks are freed without anyone calling ludx.tasks()", run(function()
    local N = 50000
    -- warm up the tables that grow once
    for _ = 1, 1000 do ludx.spawn("warm", function() end) end
    ludx.yield()
    local before = heap_kb()
    for b = 1, N / 1000 do
      for _ = 1, 1000 do
        ludx.spawn("request", function(x) return x end, b)
      end
      ludx.yield() -- they run and end
    end
    local grown = heap_kb() - before
    -- each finished task held about 0.8 KB before the fix (40 MB here)
    assert.is_true(grown < 4096, string.format("heap grew by %.0f KB over %d finished tasks", grown, N))
  end, 120000))

  it("waits woken before their timeout leave no timers behind", run(function()
    local N = 50000
    local q = ludx.queue()
    local before = heap_kb()
    for _ = 1, N do
      q:put(1)
      assert.are.equal(1, q:get(3600000)) -- no wait: an item is there
      local t = ludx.spawn("getter", function() return q:get(3600000) end)
      ludx.yield() -- the getter waits with an hour's timeout
      q:put(2)
      assert.are.equal(2, t:join())
    end
    local grown = heap_kb() - before
    assert.is_true(grown < 4096, string.format("heap grew by %.0f KB over %d early wake-ups", grown, N))
  end, 120000))

  it("a task cancelled while waiting on a queue leaves no waiter behind", run(function()
    local N = 10000
    local q = ludx.queue()
    local getters = {}
    for i = 1, N do getters[i] = ludx.spawn("getter", function() return q:get() end) end
    ludx.yield()
    assert.are.equal(N, q.getters:count())
    for i = 1, N do getters[i]:cancel() end
    ludx.yield()
    assert.are.equal(0, q.getters:count())
    -- the next getter gets the next item at once
    local last = ludx.spawn("last", function() return q:get() end)
    ludx.yield()
    q:put("x")
    assert.are.equal("x", last:join())
    assert.are.equal(0, q.getters:count())
  end, 120000))

  it("a getter cancelled after a put chose it passes the item to the next getter", run(function()
    local q = ludx.queue()
    local first = ludx.spawn("first", function() return q:get() end)
    local second = ludx.spawn("second", function() return q:get() end)
    ludx.yield()
    q:put("item") -- wakes the first getter...
    first:cancel() -- ...which is cancelled before it runs
    assert.are.equal("item", second:join(10000))
  end))

  it("cancelled or timed-out waiters leave every wait queue (putters, waiters, joiners)", run(function()
    local q = ludx.queue(1)
    q:put(1)
    local putters, waits, joins = {}, {}, {}
    local w = ludx.waiters()
    local forever = ludx.spawn("forever", function() ludx.waiters():wait("nothing", 3600000) end)
    for i = 1, 1000 do
      putters[i] = ludx.spawn("putter", function() return q:put(i) end)
      waits[i] = ludx.spawn("waiter", function() return w:wait("event") end)
      joins[i] = ludx.spawn("joiner", function() return forever:join() end)
    end
    ludx.yield()
    assert.are.equal(1000, q.putters:count())
    assert.are.equal(1000, w:count())
    for i = 1, 1000 do
      putters[i]:cancel()
      waits[i]:cancel()
      joins[i]:cancel()
    end
    ludx.yield()
    assert.are.equal(0, q.putters:count())
    assert.are.equal(0, w:count())
    assert.are.equal(0, #(forever.joiners or {}))
    -- a timed-out joiner leaves too
    assert.are.same({ nil, "timed out", "ETIMEDOUT" }, { forever:join(0) })
    assert.are.equal(0, #(forever.joiners or {}))
    forever:cancel()
  end))
end)

describe("ludx.await", function()
  it("waits for a callback and returns its values", run(function()
    local cb
    local t = ludx.spawn("a", function()
      return ludx.await("op", 10000, function(f) cb = f end)
    end)
    ludx.yield()
    cb(1, "two")
    cb(3) -- a second call is ignored
    local a, b = t:join()
    assert.are.equal(1, a)
    assert.are.equal("two", b)
    -- a callback called at once
    assert.are.equal("now", ludx.await("sync", nil, function(f) f("now") end))
  end))

  it("times out, and a late callback is then ignored", run(function()
    local cb
    local a, msg, code = ludx.await("slow op", 1, function(f) cb = f end)
    assert.is_nil(a)
    assert.are.equal("timed out", msg)
    assert.are.equal("ETIMEDOUT", code)
    cb(true) -- must not wake this task in its next wait
    local woke = ludx.waiters():wait("next", 5)
    assert.is_nil(woke)
  end))

  it("is cancelled like any wait, and names its arguments", run(function()
    local cb
    local t = ludx.spawn("a", function() return ludx.await("op", nil, function(f) cb = f end) end)
    t.quiet = true
    ludx.yield()
    t:cancel("stop")
    ludx.yield()
    assert.are.equal("dead", t.state)
    cb(true)
    local ok, err = pcall(ludx.await, "op", nil, 42)
    assert.is_false(ok)
    assert.matches("bad argument 'start' to 'await'", err)
  end))
end)

describe("the scheduler's modules", function()
  it("each part is its own module and require 'ludx' keeps the whole API", function()
    for _, m in ipairs({ "ludx.sched", "ludx.timers", "ludx.dispatch", "ludx.queue", "ludx.dns", "ludx.signal" }) do
      assert.are.equal("table", type(require(m)), m)
    end
    for _, f in ipairs({ "run", "running", "spawn", "wait", "wake", "await", "current", "sleep", "yield", "cancel",
      "tasks", "is_cancelled", "user_level", "check_timeout", "on_interrupt", "after", "ref", "unref", "object",
      "on_event", "track", "untrack", "waiters", "queue", "lookup", "signal", "now", "version" }) do
      assert.are.equal("function", type(ludx[f]), "ludx." .. f)
    end
    -- the lifecycle is written at the top of the scheduler
    local path = package.searchpath("ludx.sched", package.path)
    local f = assert(io.open(path))
    local head = f:read(4096)
    f:close()
    assert.matches("Task lifecycle", head)
  end)

  it("ludx.dht waits through the public ludx.await", function()
    local src = assert(io.open(package.searchpath("ludx.dht", package.path))):read("*a")
    assert.matches("ludx%.await%(", src)
  end)
end)
