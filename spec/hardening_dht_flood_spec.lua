-- The DHT request-flood cap over real loopback sockets: a source that
-- floods a node with valid requests gets at most max_requests_per_source
-- answers per second, many sources together at most max_requests, the
-- rest is dropped before decoding and counted, other sources keep being
-- served, and the bookkeeping stays bounded.
local ludx = require "ludx"
local udx = require "ludx.udx"
local dht = require "ludx.dht"
local msgs = require "ludx.dht.messages"
local H = require "helper"
local run = H.run

-- The nodes' clock, held still during a burst: on a loaded machine a burst ran
-- past its one-second window and the next window refilled the cap (500 answered).
local held
local env = setmetatable({ now = function() return held or ludx.now() end }, { __index = require("ludx.dht.env").env })

local function ping(tid, port)
  return msgs.encode_request({ tid = tid % 65536, to = { host = "127.0.0.1", port = port }, internal = true, command = msgs.PING })
end

-- Answers a raw socket got within ms.
local function count_answers(sock, ms)
  local n = 0
  local deadline = ludx.now() + ms
  while ludx.now() < deadline do
    local d = sock:recv(math.max(1, deadline - ludx.now()))
    if d and d:byte(1) == msgs.RESPONSE_ID then n = n + 1 end
  end
  return n
end

-- Waits for the start of a fresh one-second window, so a burst falls in one.
local function align()
  local t = ludx.now() % 1000
  if t > 50 then ludx.sleep(1000 - t + 5) end
end

describe("DHT request-flood cap", function()
  it("one flooding source is capped per second; another source is still answered", run(function()
    local node = assert(dht.bootstrapper(0, "127.0.0.1", { max_requests_per_source = 100, max_requests = 1000, env = env }))
    local _, port = node:address()
    local flood = assert(udx.bind("127.0.0.1", 0))
    local other = assert(udx.bind("127.0.0.1", 0))
    align()
    held = ludx.now()
    -- in bursts of 100 (a slow node, e.g. under ASan, must not lose them
    -- in the kernel instead), the other source's requests in between
    local flooded, answered = 0, 0
    for b = 1, 20 do
      for i = 1, 100 do assert(flood:send(ping(b * 100 + i, port), port, "127.0.0.1")) end
      if b % 2 == 0 then assert(other:send(ping(b, port), port, "127.0.0.1")) end
      flooded = flooded + count_answers(flood, 5)
      answered = answered + count_answers(other, 1)
    end
    flooded = flooded + count_answers(flood, 300)
    answered = answered + count_answers(other, 100)
    held = nil
    local st = node.h.io.stats
    io.stderr:write(string.format("  [dht flood] 2000 requests from one source: %d answered, %d dropped; another source: %d/10 answered\n",
      flooded, st.flood_dropped, answered))
    assert.is_true(flooded <= 100, "answered " .. flooded)
    assert.is_true(flooded >= 50)
    assert.is_true(st.flood_dropped >= 1000)
    assert.are.equal(10, answered)
    -- the next second the source is served again
    align()
    assert(flood:send(ping(5000, port), port, "127.0.0.1"))
    assert.are.equal(1, count_answers(flood, 300))
    flood:close()
    other:close()
    node:destroy()
  end, 30000))

  it("many sources together are capped at max_requests per second; bookkeeping stays bounded", run(function()
    local node = assert(dht.bootstrapper(0, "127.0.0.1", { max_requests_per_source = 100, max_requests = 300, env = env }))
    local _, port = node:address()
    local socks = {}
    for i = 1, 10 do socks[i] = assert(udx.bind("127.0.0.1", 0)) end
    align()
    held = ludx.now()
    local total = 0
    for round = 1, 60 do
      for i = 1, 10 do assert(socks[i]:send(ping(round * 16 + i, port), port, "127.0.0.1")) end
      if round % 10 == 0 then
        for i = 1, 10 do total = total + count_answers(socks[i], 1) end
      end
    end
    for i = 1, 10 do total = total + count_answers(socks[i], i == 1 and 300 or 20) end
    held = nil
    local io_ = node.h.io
    local sources = 0
    for _ in pairs(io_.flood_sources) do sources = sources + 1 end
    io.stderr:write(string.format("  [dht flood] 600 requests from 10 sources: %d answered (cap 300), %d dropped, %d sources tracked\n",
      total, io_.stats.flood_dropped, sources))
    assert.is_true(total <= 300, "answered " .. total)
    assert.is_true(total >= 150)
    assert.is_true(io_.stats.flood_dropped >= 200)
    assert.is_true(sources <= 300)
    for i = 1, 10 do socks[i]:close() end
    node:destroy()
  end, 30000))
end)
