-- ludx.resume: the careful-resume store (bounded LRU per remote key and
-- address) and Stream:set_resume over real loopback sockets.
local ludx = require "ludx"
local udx = require "ludx.udx"
local resume = require "ludx.resume"
local H = require "helper"
local run = H.run

local function pair()
  local a = assert(udx.bind("127.0.0.1", 0))
  local b = assert(udx.bind("127.0.0.1", 0))
  local _, pa = a:address()
  local _, pb = b:address()
  local s1 = assert(udx.stream(1))
  local s2 = assert(udx.stream(2))
  assert(s1:connect(a, 2, pb, "127.0.0.1"))
  assert(s2:connect(b, 1, pa, "127.0.0.1"))
  return s1, s2, a, b, pb
end

-- A stand-in with a stream's stats and set_resume.
local function fake(rate, rtt_ms)
  local f = { calls = {} }
  function f:stats() return { bbr_bw = rate, min_rtt_ms = rtt_ms } end
  function f:set_resume(r, t)
    self.calls[#self.calls + 1] = { r, t }
    return true
  end
  return f
end

local function transfer(s1, s2, bytes)
  local data = string.rep("r", bytes)
  local got = 0
  local reader = ludx.spawn("reader", function()
    while got < bytes do
      local c = assert(s2:read(nil, 10000))
      got = got + #c
    end
  end)
  assert(s1:write(data))
  assert(s1:flush(10000))
  reader:join()
  return got
end

describe("ludx.resume", function()
  it("keeps an entry per remote key and address and seeds from it", run(function()
    local store = resume.store()
    assert.is_nil(store:get("k1", "127.0.0.1", 1000))
    assert.is_true(store:remember(fake(12e6, 40), "k1", "127.0.0.1", 1000))
    local e = store:get("k1", "127.0.0.1", 1000)
    assert.are.equal(12e6, e.rate)
    assert.are.equal(40, e.rtt_ms)
    -- another key, or the same key over another address, is another path
    assert.is_nil(store:get("k2", "127.0.0.1", 1000))
    assert.is_nil(store:get("k1", "127.0.0.1", 1001))
    assert.is_nil(store:get("k1", "10.0.0.1", 1000))
    local s = fake()
    assert.is_false(store:seed(s, "k2", "127.0.0.1", 1000))
    assert.is_true(store:seed(s, "k1", "127.0.0.1", 1000))
    assert.are.same({ { 12e6, 40 } }, s.calls)
    -- nothing measured: nothing remembered
    assert.is_false(store:remember(fake(0, 0), "k3", "127.0.0.1", 1000))
    assert.are.equal(1, store:count())
  end))

  it("holds at most max entries whatever peers claim, the least recently used going first", run(function()
    local store = resume.store({ max = 8 })
    -- a hostile flood of keys and addresses
    for i = 1, 1000 do store:remember(fake(1e6 + i, 10), "key" .. i, "127.0.0.1", i % 65536) end
    assert.are.equal(8, store:count())
    assert.is_nil(store:get("key1", "127.0.0.1", 1))
    assert.is_not_nil(store:get("key993", "127.0.0.1", 993))
    -- a use makes an entry recent: the next insert evicts the oldest other
    store:remember(fake(5, 5), "new", "127.0.0.1", 1)
    assert.is_not_nil(store:get("key993", "127.0.0.1", 993))
    assert.is_nil(store:get("key994", "127.0.0.1", 994))
    assert.are.equal(8, store:count())
  end))

  it("forgets an entry after max_age", run(function()
    local store = resume.store({ max_age = 30 })
    store:remember(fake(1e6, 10), nil, "127.0.0.1", 5)
    assert.is_not_nil(store:get(nil, "127.0.0.1", 5))
    ludx.sleep(60)
    assert.is_nil(store:get(nil, "127.0.0.1", 5))
    assert.are.equal(0, store:count())
  end))

  it("raises on wrong arguments", function()
    assert.has_error(function() resume.store({ max = 0 }) end)
    assert.has_error(function() resume.store({ max_age = -1 }) end)
    local store = resume.store()
    assert.has_error(function() store:get(1, "127.0.0.1", 1) end)
    assert.has_error(function() store:get(nil, nil, 1) end)
    assert.has_error(function() store:get(nil, "127.0.0.1", 70000) end)
    assert.has_error(function() store:remember({}, nil, "127.0.0.1", 1) end)
  end)

  it("seeds a real stream before it sends and refuses once it has sent", run(function()
    local store = resume.store()
    local s1, s2, a, b, pb = pair()
    assert.are.equal(256 * 1024, transfer(s1, s2, 256 * 1024))
    assert.is_true(store:remember(s1, nil, "127.0.0.1", pb))
    local e = store:get(nil, "127.0.0.1", pb)
    assert.is_true(e.rate > 0 and e.rtt_ms > 0)
    -- this stream has sent: too late to seed it
    local ok, _, code = store:seed(s1, nil, "127.0.0.1", pb)
    assert.is_nil(ok)
    assert.are.equal("EBUSY", code)
    s1:close()
    s2:close()
    -- a fresh pair to the same address seeds and still transfers everything
    local s3 = assert(udx.stream(3))
    local s4 = assert(udx.stream(4))
    local _, pa = a:address()
    assert(s3:connect(a, 4, pb, "127.0.0.1"))
    assert(s4:connect(b, 3, pa, "127.0.0.1"))
    assert.is_true(store:seed(s3, nil, "127.0.0.1", pb))
    assert.are.equal(1024 * 1024, transfer(s3, s4, 1024 * 1024))
    assert.has_error(function() s3:set_resume(-1, 10) end)
    assert.has_error(function() s3:set_resume(1, "x") end)
    s3:close()
    s4:close()
    a:close()
    b:close()
  end))
end)
