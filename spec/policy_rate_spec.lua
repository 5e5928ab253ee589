-- Rate limits per stream and per peer, measured over loopback: a limiter
-- holds its members to its rate (the limit is an upper bound, asserted with
-- a tolerance; a loaded machine may lag far behind it, so below it only
-- progress is asserted).
local ludx = require "ludx"
local udx = require "ludx.udx"
local policy = require "ludx.policy"
local H = require "helper"
local run = H.run

local CHUNK = string.rep("x", 65536)

-- A socket and n stream pairs over it: {send=, recv=} each.
local function pairs_on(n)
  local sock = assert(udx.bind("127.0.0.1", 0))
  local _, port = sock:address()
  local list = {}
  for i = 1, n do
    local a, b = assert(udx.stream(100 + 2 * i)), assert(udx.stream(101 + 2 * i))
    assert(a:connect(sock, 101 + 2 * i, port))
    assert(b:connect(sock, 100 + 2 * i, port))
    list[i] = { send = a, recv = b, got = 0 }
  end
  return sock, list
end

-- Keeps every pair busy for ms; returns bytes received per pair.
local function pump(list, ms, active)
  local stop = false
  local tasks = {}
  for i, p in ipairs(list) do
    if not active or active[i] then
      tasks[#tasks + 1] = ludx.spawn("writer", function()
        while not stop do p.send:write(CHUNK, 100) end
      end)
    end
    tasks[#tasks + 1] = ludx.spawn("reader", function()
      while not stop do
        local d = p.recv:read(nil, 50)
        if d then p.got = p.got + #d end
      end
    end)
  end
  local t0 = ludx.now()
  ludx.sleep(ms)
  stop = true
  for _, t in ipairs(tasks) do t:join(2000) end
  local out = {}
  for i, p in ipairs(list) do
    out[i] = p.got
    p.got = 0
  end
  return out, (ludx.now() - t0) / 1000
end

local function close_all(sock, list)
  for _, p in ipairs(list) do
    p.send:close()
    p.recv:close()
  end
  sock:close()
end

local function near(x, want, tol, what)
  assert(math.abs(x - want) <= want * tol, string.format("%s: %.0f, expected %.0f +- %d%%", what, x, want, tol * 100))
end

-- A rate limit is an upper bound: at most want + tol. Below it, only
-- liveness (a fifth of want): a loaded 2-core machine lags behind any rate
-- (2.26 MB/s against 4 at load 14).
local function within(x, want, tol, what)
  assert(x <= want * (1 + tol) and x >= want / 5,
    string.format("%s: %.0f, expected at most %.0f + %d%% (and at least a fifth)", what, x, want, tol * 100))
end

describe("policy rate limits", function()
  it("holds one stream to its rate, and a new rate applies at once", run(function()
    local sock, list = pairs_on(1)
    local lim = assert(policy.limit(list[1].send, { rate = 2e6 }))
    local got, secs = pump(list, 1500)
    within(got[1] / secs, 2e6, 0.3, "bytes/s at 2 MB/s")
    assert(lim:set({ rate = 4e6 }))
    got, secs = pump(list, 1500)
    within(got[1] / secs, 4e6, 0.3, "bytes/s at 4 MB/s")
    local st = lim:stats()
    assert.are.equal(1, st.members)
    assert.is_true(st.waits > 0)
    assert.is_true(st.bytes > 0)
    close_all(sock, list)
  end, 30000))

  it("lets a stream go free when it leaves its limiter", run(function()
    local sock, list = pairs_on(1)
    local lim = assert(policy.limit(list[1].send, { rate = 1e6 }))
    assert(lim:remove(list[1].send))
    local got, secs = pump(list, 1000)
    -- free of the 1 MB/s limit: above it even on a loaded machine
    assert.is_true(got[1] / secs > 2e6, "unlimited stream moved " .. got[1] / secs .. " bytes/s")
    close_all(sock, list)
  end, 30000))

  it("shares one peer's rate among its streams", run(function()
    local sock, list = pairs_on(2)
    local peers = policy.per_peer({ rate = 3e6 })
    -- both senders talk to 127.0.0.1: one peer
    local l1 = assert(peers:add(list[1].send))
    local l2 = assert(peers:add(list[2].send))
    assert.are.equal(l1, l2)
    local got, secs = pump(list, 1500)
    within((got[1] + got[2]) / secs, 3e6, 0.3, "the peer's bytes/s at 3 MB/s")
    near(got[1] / (got[1] + got[2]), 0.5, 0.3, "share of one of two equal streams")
    assert.are.equal(2, l1:stats().members)
    close_all(sock, list)
  end, 30000))

  it("limits streams over a SecretStream through their udx stream", run(function()
    local secretstream = require "ludx.secretstream"
    local sock, list = pairs_on(1)
    local a = secretstream.wrap(list[1].send, { initiator = true })
    local b = secretstream.wrap(list[1].recv, { initiator = false })
    assert(a:ready(5000))
    assert(policy.limit(a, { rate = 2e6 }))
    local got, stop = 0, false
    ludx.spawn("reader", function()
      while not stop do
        local d = b:read(nil, 50)
        if d then got = got + #d end
      end
    end)
    local t0 = ludx.now()
    while ludx.now() - t0 < 1500 do a:write(CHUNK, 100) end
    stop = true
    within(got / ((ludx.now() - t0) / 1000), 2e6, 0.35, "encrypted bytes/s at 2 MB/s")
    a:close()
    b:close()
    sock:close()
  end, 30000))

  it("names bad arguments", function()
    assert.has_error(function() policy.limiter({ rate = -1 }) end, "bad argument 'opts.rate' to 'limiter' (number >= 0 expected, got number -1)")
    assert.has_error(function() policy.limiter({ burst = "big" }) end, "bad argument 'opts.burst' to 'limiter' (number >= 0 expected, got string)")
    assert.has_error(function() policy.limiter("fast") end)
    local lim = policy.limiter({ rate = 1e6 })
    assert.has_error(function() lim:add({}) end, "bad argument 'stream' to 'add' (udx stream or a stream over one expected, got table)")
    assert.has_error(function() policy.per_peer() end)
  end)
end)
