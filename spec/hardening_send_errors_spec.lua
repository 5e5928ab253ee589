-- Send-error injection: a socket's (or one stream's) sends fail with
-- ENETUNREACH, EPERM, EMSGSIZE or ENOBUFS for a while. The socket and its
-- other streams keep working, every transfer completes hash-identical once
-- the errors stop, the errors are counted, and queues and memory return to
-- their baseline: nothing grows while sends fail.
local ludx = require "ludx"
local udx = require "ludx.udx"
local H = require "helper"
local U = require "hardening_util"
local run = H.run

local SIZE = 256 * 1024
local HWM = 262144 -- the udx high-water mark

local STAT = {
  ENETUNREACH = "send_err_netunreach",
  EPERM = "send_err_perm",
  EMSGSIZE = "send_err_msgsize",
  ENOBUFS = "send_err_nobufs",
}

-- n streams from socket a to socket b.
local function streams(n, a, b)
  local _, pa = a:address()
  local _, pb = b:address()
  local list = {}
  for i = 1, n do
    local id1, id2 = U.ids()
    local s1 = assert(udx.stream(id1))
    local s2 = assert(udx.stream(id2))
    assert(s1:connect(a, id2, pb, "127.0.0.1"))
    assert(s2:connect(b, id1, pa, "127.0.0.1"))
    list[i] = { s1 = s1, s2 = s2, seed = 100 + i }
  end
  return list
end

-- Starts the transfer of every pair; returns a function that waits for
-- them and asserts they are identical.
local function start(list, size)
  for _, p in ipairs(list) do
    p.writer = ludx.spawn("writer", function()
      p.sent, p.err = U.send(p.s1, size, p.seed, 30000)
    end)
    p.reader = ludx.spawn("reader", function()
      p.got, p.bytes = U.receive(p.s2, 30000)
    end)
  end
  return function()
    for _, p in ipairs(list) do
      p.reader:join(60000)
      p.writer:join(60000)
      assert.is_nil(p.err)
      assert.are.equal(size, p.bytes)
      assert.are.equal(p.sent, p.got)
    end
  end
end

local function close(list, ...)
  for _, p in ipairs(list) do
    p.s1:close()
    p.s2:close()
  end
  for _, s in ipairs({ ... }) do s:close() end
end

describe("send errors on a socket", function()
  for errno, field in pairs(STAT) do
    it(errno .. " for 600 ms: counted, then three streams complete and their queues drain", run(function()
      local a = assert(udx.bind("127.0.0.1", 0))
      local b = assert(udx.bind("127.0.0.1", 0))
      local list = streams(3, a, b)
      assert(a:set_fault({ seed = 7, send_error = 1.0, send_errno = errno, direction = "tx" }))
      local wait = start(list, SIZE)
      ludx.sleep(600)
      local during = a:stats()[field]
      assert.is_true(during > 0, errno .. " not counted")
      -- a raw datagram sent meanwhile is dropped and counted, not an error;
      -- but EMSGSIZE is the datagram's own fault, so send reports it
      local _, pb = b:address()
      local ok, _, code = a:send("raw", pb, "127.0.0.1")
      if errno == "EMSGSIZE" then
        assert.are.equal("EMSGSIZE", code)
      else
        assert.is_true(ok)
      end
      assert(a:set_fault(nil))
      wait()
      local st = a:stats()
      io.stderr:write(string.format("  [send errors] %-12s %s=%d packets_tx=%d\n", errno, field, st[field], st.packets_tx))
      assert.is_true(st[field] > during)
      for _, p in ipairs(list) do
        local s1 = p.s1:stats()
        assert.are.equal(0, s1.write_queued)
        assert.are.equal(0, s1.inflight)
        assert.are.equal(0, p.s2:stats().read_buffered)
      end
      close(list, a, b)
    end, 60000))
  end
end)

describe("send errors on one stream", function()
  it("the other streams on the socket complete while its sends fail; it completes afterwards", run(function()
    local a = assert(udx.bind("127.0.0.1", 0))
    local b = assert(udx.bind("127.0.0.1", 0))
    local failing = streams(1, a, b)
    local healthy = streams(2, a, b)
    assert(failing[1].s1:set_fault({ seed = 9, send_error = 1.0, send_errno = "ENOBUFS", direction = "tx" }))
    local wait_failing = start(failing, SIZE)
    local wait_healthy = start(healthy, SIZE)
    wait_healthy() -- done while every datagram of the other stream fails
    assert.are.equal(0, failing[1].s2:stats().bytes_received)
    assert.is_true(a:stats().send_err_nobufs > 0)
    assert(failing[1].s1:set_fault(nil))
    wait_failing()
    close(failing)
    close(healthy, a, b)
  end, 60000))
end)

describe("nothing grows while sends fail", function()
  it("2 s of failing sends under a writer that keeps writing: queue capped, memory flat, back to zero after", run(function()
    local a = assert(udx.bind("127.0.0.1", 0))
    local b = assert(udx.bind("127.0.0.1", 0))
    local list = streams(2, a, b)
    collectgarbage()
    local rss0 = U.rss()
    assert(a:set_fault({ seed = 11, send_error = 1.0, send_errno = "ENETUNREACH", direction = "tx" }))
    local size = 8 * 1024 * 1024
    local wait = start(list, size)
    local max_queued, samples = 0, {}
    for i = 1, 20 do
      ludx.sleep(100)
      for _, p in ipairs(list) do
        max_queued = math.max(max_queued, p.s1:stats().write_queued)
      end
      samples[i] = U.rss()
    end
    local errors = a:stats().send_err_netunreach
    assert(a:set_fault(nil))
    wait()
    collectgarbage()
    local rss1 = U.rss()
    io.stderr:write(string.format("  [send errors] 2 s failing: %d errors, max write_queued %d, RSS %0.1f -> %0.1f (10th) -> %0.1f (20th) -> %0.1f MB after\n",
      errors, max_queued, rss0 / 1e6, samples[10] / 1e6, samples[20] / 1e6, rss1 / 1e6))
    assert.is_true(errors > 0)
    -- a writer waits at the high-water mark: at most one 64 KiB write above it
    assert.is_true(max_queued <= HWM + 65536, "write queue grew to " .. max_queued)
    -- memory is flat over the second second of errors
    assert.is_true(samples[20] - samples[10] < 4 * 1024 * 1024, "RSS grew while sends failed")
    for _, p in ipairs(list) do
      assert.are.equal(0, p.s1:stats().write_queued)
      assert.are.equal(0, p.s1:stats().inflight)
    end
    close(list, a, b)
  end, 120000))
end)
