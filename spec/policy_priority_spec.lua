-- Priorities between streams that share a socket: in one limiter, streams
-- with data to send split its rate by weight; an idle one gives its share
-- to the others. Measured over loopback with generous tolerances.
local ludx = require "ludx"
local udx = require "ludx.udx"
local policy = require "ludx.policy"
local H = require "helper"
local run = H.run

local CHUNK = string.rep("p", 65536)

local function setup(n)
  local sock = assert(udx.bind("127.0.0.1", 0))
  local _, port = sock:address()
  local list = {}
  for i = 1, n do
    local a, b = assert(udx.stream(200 + 2 * i)), assert(udx.stream(201 + 2 * i))
    assert(a:connect(sock, 201 + 2 * i, port))
    assert(b:connect(sock, 200 + 2 * i, port))
    list[i] = { send = a, recv = b, got = 0, limit = math.huge }
  end
  return sock, list
end

-- Each writer sends up to p.limit bytes; readers count for ms.
local function pump(list, ms)
  local stop = false
  local tasks = {}
  for _, p in ipairs(list) do
    tasks[#tasks + 1] = ludx.spawn("writer", function()
      local sent = 0
      while not stop and sent < p.limit do
        local n = math.min(#CHUNK, p.limit - sent)
        if p.send:write(n == #CHUNK and CHUNK or CHUNK:sub(1, n), 100) then sent = sent + n end
      end
    end)
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
  return (ludx.now() - t0) / 1000
end

local function close_all(sock, list)
  for _, p in ipairs(list) do
    p.send:close()
    p.recv:close()
  end
  sock:close()
end

describe("policy priorities", function()
  it("splits a link's rate 3:1 by weight", run(function()
    local sock, list = setup(2)
    local link = policy.limiter({ rate = 4e6 })
    assert(link:add(list[1].send, 3))
    assert(link:add(list[2].send, 1))
    local secs = pump(list, 2000)
    local a, b = list[1].got, list[2].got
    local share = a / (a + b)
    assert(share > 0.65 and share < 0.85, "weight 3 of 3:1 got " .. share)
    local rate = (a + b) / secs
    assert(rate > 2.8e6 and rate < 5.2e6, "the link moved " .. rate .. " bytes/s at 4 MB/s")
    assert.are.equal(2, link:stats().active)
    close_all(sock, list)
  end, 30000))

  it("orders classes: high gets most, low least", run(function()
    local sock, list = setup(3)
    local link = policy.limiter({ rate = 6e6 })
    assert(policy.priority(link, list[1].send, "high"))
    assert(policy.priority(link, list[2].send, "normal"))
    assert(policy.priority(link, list[3].send, "low"))
    pump(list, 2000)
    local h, n, l = list[1].got, list[2].got, list[3].got
    assert(h > 2 * n and n > 2 * l, string.format("high %d, normal %d, low %d", h, n, l))
    close_all(sock, list)
  end, 30000))

  it("gives an idle stream's share to the busy one", run(function()
    local sock, list = setup(2)
    local link = policy.limiter({ rate = 4e6 })
    assert(link:add(list[1].send, 1))
    assert(link:add(list[2].send, 1))
    list[1].limit = 400000 -- done after a fraction of a second at 2 MB/s
    local secs = pump(list, 2000)
    assert.are.equal(400000, list[1].got)
    local total = (list[1].got + list[2].got) / secs
    -- without the hand-over the busy stream would stay at 2 MB/s
    assert(total > 2.9e6, "the link moved " .. total .. " bytes/s")
    assert.are.equal(1, link:stats().active)
    close_all(sock, list)
  end, 30000))
end)
