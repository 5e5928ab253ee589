-- The bench harness and udx-native's missing TIME_WAIT: when the sender's
-- ack of the receiver's END is lost, a udx-native sender has already closed
-- its stream and the receiver's END goes unanswered until ETIMEDOUT. Every
-- byte had arrived, so the sample is good (count and hash checked) and the
-- close fault is reported beside it (close_timeouts). A 1% loss path made
-- the baseline pair fail this way about once in 100 runs.
local ludx = require "ludx"
local udx = require "ludx.udx"
local H = require "helper"
local U = require "hardening_util"
local transfer = require "ludx.bench.transfer"
local bench = require "ludx.bench"
local run = H.run
local band = require("bit").band


local END = 2

-- Sits between the sender and the receiver (both connect to it; it keeps
-- the stream ids, which no stream of this process has) and drops the
-- sender's first pure ACK past the receiver's END.
local function lose_last_ack()
  local m = assert(udx.bind("127.0.0.1", 0))
  local _, pm = m:address()
  local state = { dropped = 0 }
  local function connect(s, r)
    local ps, pr = s.ready.port, r.ready.port
    ludx.spawn("middlebox", function()
      local r_end
      while true do
        local d, _, port = m:recv()
        if not d then return end
        local from_s = port == ps
        local drop = false
        if #d >= 20 then
          local type = d:byte(3)
          if not from_s and band(type, END) ~= 0 then r_end = U.u32(d, 13) end
          -- a pure ACK (no data, end, sack, message, destroy) acking the END
          if from_s and r_end and state.dropped == 0 and band(type, 0x3b) == 0 and U.u32(d, 17) > r_end then
            drop = true
            state.dropped = 1
          end
        end
        if not drop then m:send(d, from_s and pr or ps, "127.0.0.1") end
      end
    end)
    s:send({ port = pm, host = "127.0.0.1" })
    r:send({ port = pm, host = "127.0.0.1" })
  end
  return connect, state, m
end

describe("bench harness", function()
  it("a udx-native pair whose last ACK is lost still gives a verified sample, with the close fault beside it", run(function()
    local system = "udx-native -> udx-native"
    if not transfer.available(system) then
      pending("bench peers not installed (tools/install-node-deps)")
      return
    end
    local connect, state, m = lose_last_ack()
    local sample = transfer.transfer(bench.root(), system, { bytes = 256 * 1024, chunk = 65536, connect = connect, timeout = 120000 })
    m:close()
    assert.are.equal(1, state.dropped)
    assert.is_true(sample.ok, tostring(sample.error))
    assert.are.equal(256 * 1024, sample.bytes)
    assert.are.equal(1, sample.extra.close_timeouts)
  end, 180000))
end)
