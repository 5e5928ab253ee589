-- One lifecycle for every object (issue 14): close waits for the graceful
-- end where there is one, destroy is immediate, both can be called again,
-- and both wake whoever waits on the object with a code.
local ludx = require "ludx"
local udx = require "ludx.udx"
local secretstream = require "ludx.secretstream"
local dht = require "ludx.dht"
local swarm = require "ludx.swarm"
local pipe = require "ludx.pipe"
local tcp = require "ludx.tcp"
local H = require "helper"
local run = H.run

local T = 60000

local next_id = 1000
local function pair()
  local a = assert(udx.bind("127.0.0.1", 0))
  local b = assert(udx.bind("127.0.0.1", 0))
  local _, pa = a:address()
  local _, pb = b:address()
  next_id = next_id + 2
  local s1 = assert(udx.stream(next_id))
  local s2 = assert(udx.stream(next_id + 1))
  assert(s1:connect(a, next_id + 1, pb, "127.0.0.1"))
  assert(s2:connect(b, next_id, pa, "127.0.0.1"))
  return s1, s2, a, b
end

-- Starts one task per waiter, lets them all park, ends the object with
-- `how` (after running before_end, if given), and returns what each
-- waiter got.
local function ended(obj, how, waits, before_end)
  local tasks = {}
  for name, f in pairs(waits) do tasks[name] = ludx.spawn(name, f) end
  for _ = 1, 3 do ludx.yield() end
  for name, t in pairs(tasks) do assert.are.equal("waiting", t.state, name) end
  if before_end then before_end() end
  assert.is_true(obj[how](obj))
  local got = {}
  for name, t in pairs(tasks) do got[name] = { t:join(T) } end
  -- both again, in either order
  assert.is_true(obj[how](obj))
  assert.is_true(obj[how == "close" and "destroy" or "close"](obj))
  return got
end

describe("every waiter wakes with a code", function()
  for _, how in ipairs({ "close", "destroy" }) do
    it("socket:" .. how .. "()", run(function()
      local sock = assert(udx.bind("127.0.0.1", 0))
      local got = ended(sock, how, { recv = function() return sock:recv(T) end })
      assert.are.same({ nil, "socket is closed", "EBADF" }, got.recv)
    end))

    it("udx stream:" .. how .. "()", run(function()
      local s1, s2, a, b = pair()
      assert(s1:write(string.rep("x", 4 * 1024 * 1024))) -- the peer reads nothing yet
      local drained
      local got = ended(s1, how, {
        read = function() return s1:read(nil, T) end,
        recv = function() return s1:recv(T) end,
        write = function() return s1:write(string.rep("y", 8 * 1024 * 1024), T) end,
        flush = function() return s1:flush(T) end,
        wait_closed = function() return s1:wait_closed(T) end,
      }, how == "close" and function()
        -- a graceful close completes once the peer takes every byte and ends
        drained = ludx.spawn("drain", function()
          local n = 0
          while true do
            local d = s2:read(nil, T)
            if not d then break end
            n = n + #d
          end
          assert(s2:close(T))
          return n
        end)
      end)
      for _, name in ipairs({ "read", "recv" }) do
        assert.are.same({ nil, "stream is closed", "ECANCELED" }, got[name], name)
      end
      if how == "close" then
        -- the writer's bytes are queued and go out before the END; flush
        -- completes as the close does
        assert.are.same({ true }, got.write)
        assert.are.same({ true }, got.flush)
        assert.are.same({ 12 * 1024 * 1024 }, { drained:join(T) })
        assert.is_nil(s1:error())
      else
        assert.are.same({ nil, "stream is closed", "ECANCELED" }, got.write)
        assert.are.same({ nil, "stream is closed", "ECANCELED" }, got.flush)
      end
      assert.are.same({ true }, got.wait_closed)
      s2:destroy()
      a:close()
      b:close()
    end))

    it("SecretStream:" .. how .. "()", run(function()
      local s1, s2, a, b = pair()
      local x = secretstream.wrap(s1, { initiator = true })
      local y = secretstream.wrap(s2, { initiator = false })
      assert(x:ready(T))
      assert(y:ready(T))
      local got = ended(x, how, {
        read = function() return x:read(nil, T) end,
        wait_closed = function() return x:wait_closed(T) end,
      })
      assert.are.same({ nil, "stream is closed", "ECANCELED" }, got.read)
      assert.are.same({ true }, got.wait_closed)
      y:close()
      a:close()
      b:close()
    end))

    -- one code for our own end across stream types: ECANCELED, as a udx
    -- stream gives; EPIPE and EOF stay what the peer's end gives
    it("pipe end:" .. how .. "()", run(function()
      local p, q = pipe.pair({ highwater = 4 })
      local got = ended(p, how, {
        read = function() return p:read(nil, T) end,
        write = function() return p:write("more than four", T) end, -- q reads nothing
      })
      assert.are.same({ nil, "stream is closed", "ECANCELED" }, got.read)
      -- after a close its bytes were the peer's to read (ended() then
      -- destroys p too, which drops them)
      assert.are.same(how == "close" and { true } or { nil, "stream is closed", "ECANCELED" }, got.write)
      assert.are.same({ nil, "connection reset by peer", "ECONNRESET" }, { q:read() })
      assert.are.same({ nil, "stream is closed", "ECANCELED" }, { p:read() })
      assert.are.same({ nil, "stream is closed", "ECANCELED" }, { p:write("x") })
      assert.are.same({ nil, "stream is closed", "ECANCELED" }, { p:finish() })
    end))

    it("tcp connection:" .. how .. "()", run(function()
      local server = assert(tcp.listen("127.0.0.1", 0))
      local _, port = server:address()
      local c = assert(tcp.connect("127.0.0.1", port, T))
      local s = assert(server:accept(T))
      local got = ended(c, how, { read = function() return c:read(nil, T) end })
      assert.are.same({ nil, "connection is closed", "ECANCELED" }, got.read)
      assert.are.same({ nil, "connection is closed", "ECANCELED" }, { c:read() })
      assert.are.same({ nil, "connection is closed", "ECANCELED" }, { c:write("x") })
      assert.are.same({ nil, "connection is closed", "ECANCELED" }, { c:finish() })
      assert.is_nil((s:read(nil, T))) -- the peer reads the end
      s:close()
      server:close()
    end))

    it("swarm:" .. how .. "() during a join that cannot finish", run(function()
      -- a bootstrap that never answers: the join's first round takes long
      local silent = assert(udx.bind("127.0.0.1", 0))
      local _, port = silent:address()
      local sw = assert(swarm.new({ bootstrap = "127.0.0.1:" .. port, host = "127.0.0.1" }))
      local session = sw:join(dht.hash("lifecycle " .. how))
      local got = ended(sw, how, {
        flushed = function() return session:flushed(T) end,
        listen = function() return sw:listen(T) end,
      })
      assert.are.same({ nil, "topic left", "SWARM_TOPIC_LEFT" }, got.flushed)
      assert.is_nil(got.listen[1])
      assert.is_string(got.listen[3])
      silent:close()
    end))
  end
end)

-- Holds the server's unannounce (announcer:stop) until release() is called,
-- so a close is surely in progress while the test acts.
local function hold_unannounce(server)
  local held = {}
  server.announcer.stop = function(_, cb) held.cb = cb end
  return held, function()
    if held.cb then held.cb() end
  end
end

-- Yields until cond() holds, at most n times (nothing here needs I/O).
local function within_yields(cond, n)
  for _ = 1, n or 20 do
    if cond() then return true end
    ludx.yield()
  end
  return cond() and true or false
end

-- Two closes of obj (a swarm or a share) while its server's unannounce is
-- held: the second must not return before the first. Returns the order
-- they returned in; settled(), if given, must hold when the second returns.
local function second_close_order(obj, settled)
  local _, release = hold_unannounce(obj.server)
  local order = {}
  local a = ludx.spawn("first close", function()
    obj:close()
    order[#order + 1] = "first"
  end)
  assert.is_true(within_yields(function() return a.state == "waiting" end))
  local b = ludx.spawn("second close", function()
    assert.is_true(obj:close())
    order[#order + 1] = "second"
    if settled then return settled() end
    return true
  end)
  for _ = 1, 5 do ludx.yield() end
  assert.are.same({}, order) -- the second close has not returned early
  release()
  assert.is_true(b:join(T))
  a:join(T)
  return order
end

describe("close and destroy, again and in turn", function()
  for _, how in ipairs({ "close", "destroy" }) do
    it("swarm:" .. how .. "() wakes listen and flush with the swarm's own code", run(function()
      local silent = assert(udx.bind("127.0.0.1", 0))
      local _, port = silent:address()
      local sw = assert(swarm.new({ bootstrap = "127.0.0.1:" .. port, host = "127.0.0.1" }))
      sw:join(dht.hash("lifecycle flush " .. how))
      local want = how == "close" and { nil, "swarm closed", "SWARM_CLOSED" }
        or { nil, "swarm destroyed", "SWARM_DESTROYED" }
      local got = ended(sw, how, {
        flush = function() return sw:flush(T) end,
        listen = function() return sw:listen(T) end,
      })
      assert.are.same(want, got.flush)
      assert.are.same(want, got.listen)
      -- and so do later calls
      assert.are.same(want, { sw:flush(T) })
      assert.are.same(want, { sw:listen(T) })
      silent:close()
    end))
  end

  it("a second swarm:close() waits for the first one's end", run(function()
    local tn = assert(dht.testnet(3))
    local sw = assert(swarm.new({ dht = assert(tn:create_node()) }))
    assert(sw:listen(T))
    -- when the second close returns, the swarm is destroyed
    assert.are.same({ "first", "second" }, second_close_order(sw, function() return sw.destroyed end))
    tn:destroy()
  end, 90000))

  it("swarm.new{bootstrap=5} names swarm.new and the argument, at the caller's line", run(function()
    local ok, err = pcall(swarm.new, { bootstrap = 5 })
    assert.is_false(ok)
    assert.matches("bad argument 'opts.bootstrap' to 'swarm.new'", err, 1, true)
    assert.matches("lifecycle_spec.lua", err, 1, true)
  end))

  local function new_share(tn)
    local share = require "ludx.share"
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write("lifecycle\n")
    f:close()
    local s = assert(share.serve(assert(tn:create_node()), path))
    return s, path
  end

  it("a second share:close() waits for the unannounce", run(function()
    local tn = assert(dht.testnet(3))
    local s, path = new_share(tn)
    assert.are.same({ "first", "second" }, second_close_order(s))
    os.remove(path)
    tn:destroy()
  end, 90000))

  it("share:destroy() during a graceful close ends it at once", run(function()
    local tn = assert(dht.testnet(3))
    local s, path = new_share(tn)
    hold_unannounce(s.server) -- never answers
    local a = ludx.spawn("close", function() return s:close({ timeout = 10 * T }) end)
    assert.is_true(within_yields(function() return a.state == "waiting" end))
    assert.is_true(s:destroy())
    assert.is_true(within_yields(function() return a.state == "dead" end), "close still waits after destroy")
    assert.is_true(a:join(T))
    os.remove(path)
    tn:destroy()
  end, 90000))
end)
