-- One lifecycle for every object (issue 14): close waits for the graceful
-- end where there is one, destroy is immediate, both can be called again,
-- and both wake whoever waits on the object with a code.
local ludx = require "ludx"
local udx = require "ludx.udx"
local secretstream = require "ludx.secretstream"
local dht = require "ludx.dht"
local swarm = require "ludx.swarm"
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
-- `how`, and returns what each waiter got.
local function ended(obj, how, waits)
  local tasks = {}
  for name, f in pairs(waits) do tasks[name] = ludx.spawn(name, f) end
  for _ = 1, 3 do ludx.yield() end
  for name, t in pairs(tasks) do assert.are.equal("waiting", t.state, name) end
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
      assert(s1:write(string.rep("x", 4 * 1024 * 1024))) -- the peer reads nothing
      local got = ended(s1, how, {
        read = function() return s1:read(nil, T) end,
        recv = function() return s1:recv(T) end,
        write = function() return s1:write(string.rep("y", 8 * 1024 * 1024), T) end,
        flush = function() return s1:flush(T) end,
        wait_closed = function() return s1:wait_closed(T) end,
      })
      for _, name in ipairs({ "read", "recv", "write", "flush" }) do
        assert.are.same({ nil, "stream is closed", "ECANCELED" }, got[name], name)
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
      assert.are.same({ nil, "stream is closed", "EPIPE" }, got.read)
      assert.are.same({ true }, got.wait_closed)
      y:close()
      a:close()
      b:close()
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
