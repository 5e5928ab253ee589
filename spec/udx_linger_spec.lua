-- Linger (udx/src/linger.h): a stream that closed gracefully still ACKs the
-- peer's retransmitted END for a while, so losing our last ACK does not
-- leave the peer retransmitting its END until ETIMEDOUT. The loss is made by
-- a middlebox (a raw socket between the two streams) that drops exactly the
-- ACK of the peer's END; a hostile peer cannot make a socket hold more
-- records than its maximum.
local ludx = require "ludx"
local udx = require "ludx.udx"
local H = require "helper"
local U = require "hardening_util"
local run = H.run
local band = require("bit").band

local function le32(n)
  return string.char(n % 256, math.floor(n / 256) % 256, math.floor(n / 65536) % 256, math.floor(n / 16777216) % 256)
end
local function header(type, id, rwnd, seq, ack)
  return "\255\1" .. string.char(type, 0) .. le32(id) .. le32(rwnd) .. le32(seq) .. le32(ack)
end

local DATA, END = 1, 2

-- Forwards between two ports (each side connects to the middlebox);
-- drop(d, from_a) true drops a datagram. The sides connect to ids no stream
-- has (ids map to streams process-wide, the middlebox's socket must get
-- their datagrams raw): it puts the real id in (to_b, to_a). Returns the
-- socket and a log of what passed from a to b.
local function middlebox(pa, pb, to_a, to_b, drop)
  local m = assert(udx.bind("127.0.0.1", 0))
  local log = {}
  ludx.spawn("middlebox", function()
    while true do
      local d, _, port = m:recv()
      if not d then return end
      local from_a = port == pa
      if not drop(d, from_a) then
        d = d:sub(1, 4) .. le32(from_a and to_b or to_a) .. d:sub(9)
        if from_a then log[#log + 1] = d end
        m:send(d, from_a and pb or pa, "127.0.0.1")
      end
    end
  end)
  return m, log
end

describe("udx linger", function()
  it("the peer's END is acked after our last ACK was lost: its finish() completes, no ETIMEDOUT", run(function()
    local a = assert(udx.bind("127.0.0.1", 0, { linger_ms = 60000 })) -- long: a loaded machine may resend late
    local b = assert(udx.bind("127.0.0.1", 0))
    local _, pa = a:address()
    local _, pb = b:address()
    local b_end, dropped = nil, 0
    local ida, idb = U.ids()
    local via_a, via_b = U.ids() -- the ids each side sends to: no stream has them
    local m, log = middlebox(pa, pb, ida, idb, function(d, from_a)
      local type = d:byte(3)
      if not from_a then
        if band(type, END) ~= 0 then b_end = U.u32(d, 13) end
        return false
      end
      -- a's first pure ACK that covers b's END: the last packet a sends
      if b_end and dropped == 0 and band(type, 0x3b) == 0 and U.u32(d, 17) > b_end then
        dropped = 1
        return true
      end
      return false
    end)
    local _, pm = m:address()
    local sa = assert(udx.stream(ida))
    -- the give-up time bounds how long the old code takes to fail
    local sb = assert(udx.stream(idb, { timeout = 8000 }))
    assert(sa:connect(a, via_b, pm, "127.0.0.1"))
    assert(sb:connect(b, via_a, pm, "127.0.0.1"))

    assert(sa:write("hello"))
    assert(sa:finish(20000)) -- a's END acked: a waits only for b's END now
    assert.are.equal("hello", sb:read(nil, 20000))
    assert.is_nil(sb:read(nil, 20000)) -- b sees the end
    local finisher = ludx.spawn("b finish", function()
      return sb:finish(30000)
    end)
    assert.is_nil(sa:read(nil, 20000)) -- a reads b's END: both ends done
    -- b's END comes again; a, closed, answers it from its linger record
    assert.are.same({ true }, { finisher:join() })
    assert.are.equal(1, dropped)
    assert.is_nil(sb:error())
    local st = a:stats()
    assert.are.equal(1, st.linger_records)
    assert.is_true(st.linger_acks >= 1)
    -- what a sent after the drop is a pure ACK past b's END
    local last = log[#log]
    assert.are.equal(0, band(last:byte(3), 0x3b))
    assert.are.equal(b_end + 1, U.u32(last, 17))
    sa:close()
    sb:close()
    m:close()
    a:close()
    b:close()
  end, 60000))

  it("udx-native's END is acked after our last ACK was lost: it closes cleanly, no ETIMEDOUT", run(function()
    local node = require "interop.node"
    local json = require "ludx.json"
    local a = assert(udx.bind("127.0.0.1", 0, { linger_ms = 60000 }))
    local _, pa = a:address()
    local ida, idn = U.ids()
    local via_a, via_n = U.ids()
    local peer = assert(node.start("udx-peer.js", { mode = "recv", id = idn, remoteId = via_a }))
    local n_end, dropped = nil, 0
    local m = middlebox(pa, peer.ready.port, ida, idn, function(d, from_a)
      local type = d:byte(3)
      if not from_a then
        if band(type, END) ~= 0 then n_end = U.u32(d, 13) end
        return false
      end
      if n_end and dropped == 0 and band(type, 0x3b) == 0 and U.u32(d, 17) > n_end then
        dropped = 1
        return true
      end
      return false
    end)
    local _, pm = m:address()
    local sa = assert(udx.stream(ida))
    assert(sa:connect(a, via_n, pm, "127.0.0.1"))
    assert(peer:send({ port = pm }))
    assert(sa:write("hello"))
    assert(sa:finish(20000))
    assert.is_nil(sa:read(nil, 20000)) -- udx-native ends its half: both ends done
    local done = assert(peer:expect("done", 30000))
    assert.are.equal(1, dropped)
    assert.are.equal(5, done.bytes)
    assert.are.equal(json.null, done.error) -- the old code: ETIMEDOUT after 13 RTO
    assert.is_true(a:stats().linger_acks >= 1)
    assert.are.equal(0, peer:wait())
    peer:close()
    sa:close()
    m:close()
    a:close()
  end, 60000))

  -- Closes one stream pair gracefully: a's stream ends and reads b's end.
  local function graceful(a, b)
    local _, pa = a:address()
    local _, pb = b:address()
    local ida, idb = U.ids()
    local sa = assert(udx.stream(ida))
    local sb = assert(udx.stream(idb))
    assert(sa:connect(a, idb, pb, "127.0.0.1"))
    assert(sb:connect(b, ida, pa, "127.0.0.1"))
    assert(sa:finish(20000))
    assert.is_nil(sb:read(nil, 20000))
    assert(sb:finish(20000))
    assert.is_nil(sa:read(nil, 20000))
    while not sa.finalized or not sb.finalized do ludx.sleep(5) end
    return ida, idb
  end

  it("holds at most linger_max records (the oldest goes); each answers DATA/END with at most 8 ACKs, other sources nothing", run(function()
    local a = assert(udx.bind("127.0.0.1", 0, { linger_max = 2, linger_ms = 60000 }))
    local b = assert(udx.bind("127.0.0.1", 0, { linger_max = 0 }))
    local raw = assert(udx.bind("127.0.0.1", 0)) -- an off-path sender
    local _, pa = a:address()
    local ids = {}
    for i = 1, 3 do ids[i] = { graceful(a, b) } end
    local st = a:stats()
    assert.are.equal(3, st.linger_records)
    assert.are.equal(1, st.linger_evicted)
    assert.are.equal(0, b:stats().linger_records) -- turned off there
    -- every datagram for no live stream is checked against each record: few
    assert.has_error(function() a:set_linger(4097, 2000) end)
    -- the hostile peer (it owns b's address: a raw socket cannot, so it
    -- speaks from b's socket) resends an END to every record many times
    local acks0 = st.linger_acks
    for round = 1, 20 do
      for i = 1, 3 do
        assert(b:send(header(END, ids[i][1], 65536, 0, 1), pa, "127.0.0.1"))
      end
      if round % 5 == 0 then ludx.sleep(1) end
    end
    -- and from elsewhere: never answered
    for _ = 1, 10 do assert(raw:send(header(DATA, ids[3][1], 65536, 0, 1), pa, "127.0.0.1")) end
    -- a sentinel after each flood: once both are in, a has seen everything
    assert(b:send("sentinel b", pa, "127.0.0.1"))
    assert(raw:send("sentinel raw", pa, "127.0.0.1"))
    local seen, unanswered = 0, 0
    while seen < 2 do
      local d = assert(a:recv(20000))
      if d:sub(1, 8) == "sentinel" then seen = seen + 1 else unanswered = unanswered + 1 end
    end
    st = a:stats()
    -- 2 records x 8 ACKs; the evicted one answers nothing, nor does anyone
    -- answer the off-path source: those datagrams go to the raw queue
    assert.are.equal(acks0 + 2 * 8, st.linger_acks)
    assert.are.equal(20 + 2 * (20 - 8) + 10, unanswered)
    -- the ACKs reached b's socket (for streams that are gone: raw datagrams)
    local got = 0
    while got < 16 do
      local d = assert(b:recv(20000))
      assert.are.equal(0, d:byte(3))
      got = got + 1
    end
    assert.is_nil(raw:recv(0))
    a:close()
    b:close()
    raw:close()
  end, 60000))
end)
