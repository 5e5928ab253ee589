-- Fault-injection matrix over real loopback sockets (udx fault API, seeded):
-- loss 0..30 %, reordering, duplication, corruption, blackouts mid-transfer,
-- the peer moving to another address. Every transfer completes with the
-- same BLAKE2b on both ends, or fails with a clear error (ETIMEDOUT after the
-- give-up time, EDECRYPT ...) — never a hang: each case runs under a
-- watchdog. LUDX_HARDENING_LONG=1 runs the bigger matrix (more sizes, every
-- blackout length from 1 to 5 s).
local ludx = require "ludx"
local udx = require "ludx.udx"
local H = require "helper"
local U = require "hardening_util"
local run = H.run

local LONG = os.getenv("LUDX_HARDENING_LONG") == "1"
local SIZE = LONG and 4 * 1024 * 1024 or 512 * 1024

local function report(name, r)
  io.stderr:write(string.format("  [faults] %-34s %s\n", name, U.describe(r)))
end

local function both_tx(fault)
  return function(ctx)
    local fa, fb = {}, {}
    for k, v in pairs(fault) do fa[k], fb[k] = v, v end
    fa.seed, fb.seed = (fault.seed or 1), (fault.seed or 1) + 1
    fa.direction, fb.direction = "tx", "tx"
    assert(ctx.a:set_fault(fa))
    assert(ctx.b:set_fault(fb))
  end
end

local function assert_intact(r, size)
  assert.is_true(r.ok, "transfer failed: " .. U.describe(r))
  assert.are.equal(size, r.bytes)
  assert.are.equal(r.sent, r.got)
end

describe("fault matrix: loss", function()
  for _, loss in ipairs({ 0, 0.01, 0.05, 0.10, 0.20, 0.30 }) do
    it(string.format("%.0f%% loss both ways: hash-identical", loss * 100), run(function()
      local r = U.transfer({ size = SIZE, seed = 11, setup = both_tx({ seed = 100 + loss * 1000, loss = loss }) })
      report(string.format("loss %.0f%%", loss * 100), r)
      assert_intact(r, SIZE)
      if loss >= 0.05 then
        assert.is_true(r.stats1.retransmits > 0)
        assert.is_true(r.sock1.fault_dropped > 0)
      end
    end, 120000))
  end
end)

describe("fault matrix: reordering, duplication", function()
  local cases = {
    { "reorder 10% by 2 ms", { reorder = 0.10, reorder_us = 2000 } },
    { "reorder 30% behind the next", { reorder = 0.30 } },
    { "duplicate 20%", { duplicate = 0.20 } },
    { "loss 5% + reorder 10% + dup 10%", { loss = 0.05, reorder = 0.10, reorder_us = 1000, duplicate = 0.10 } },
  }
  for i, c in ipairs(cases) do
    it(c[1] .. ": hash-identical", run(function()
      c[2].seed = 200 + i
      local r = U.transfer({ size = SIZE, seed = 20 + i, setup = both_tx(c[2]) })
      report(c[1], r)
      assert_intact(r, SIZE)
    end, 120000))
  end
end)

describe("fault matrix: corruption", function()
  -- UDX has no checksum of its own (UDP's catches corruption on a real
  -- path), so corrupted payload bytes reach the reader. Over UDX the
  -- transfer must still end (complete or a clear error); over SecretStream
  -- a corrupted frame is an authentication failure.
  it("UDX with 2% corrupted datagrams ends: complete or a clear error", run(function()
    local r = U.transfer({
      size = SIZE,
      seed = 31,
      stream1 = { timeout = 3000 },
      stream2 = { timeout = 3000, keepalive = 500 },
      timeout = 15000,
      setup = both_tx({ seed = 301, corrupt = 0.02 }),
    })
    report("UDX corrupt 2%", r)
    if r.sent and r.got and r.sent ~= r.got then
      io.stderr:write("  [faults]   (payload corrupted in flight reached the reader: UDX relies on UDP's checksum)\n")
    end
    if not (r.sent and r.got) then
      local err = r.recv_err or r.send_err
      assert.is_string(err and err[2], "no error code: " .. U.describe(r))
    end
  end, 120000))

  it("SecretStream over UDX with corrupted datagrams: hash-identical or EDECRYPT-class error", run(function()
    local secretstream = require "ludx.secretstream"
    local core = ludx.core
    local s1, s2, a, b = U.pair({ timeout = 3000 }, { timeout = 3000, keepalive = 500 })
    assert(a:set_fault({ seed = 311, corrupt = 0.01, direction = "tx" }))
    local res = {}
    local w = ludx.spawn("ss writer", function()
      local ss = assert(secretstream.wrap(s1, { initiator = true }))
      local ok, msg, code = ss:ready(15000)
      if not ok then res.send_err = { msg, code }; return end
      local gen, h = core.datagen(5), core.hasher()
      for _ = 1, SIZE / 65536 do
        local d = gen:next(65536)
        h:update(d)
        ok, msg, code = ss:write(d, 15000)
        if not ok then res.send_err = { msg, code }; return end
      end
      res.sent = h:hex()
      ss:finish(15000)
    end)
    local ss = assert(secretstream.wrap(s2, { initiator = false }))
    local h, n = core.hasher(), 0
    local ok, _, code = ss:ready(15000)
    if ok then
      while true do
        local chunk
        chunk, _, code = ss:read(nil, 15000)
        if not chunk then break end
        h:update(chunk)
        n = n + #chunk
      end
    end
    w:join(30000)
    local got = (code == nil and n == SIZE) and h:hex() or nil
    io.stderr:write(string.format("  [faults] %-34s bytes=%d %s\n", "SecretStream corrupt 1%", n,
      got and (got == res.sent and "ok" or "MISMATCH") or ("err=" .. tostring(code))))
    if got then
      assert.are.equal(res.sent, got)
    else
      assert.is_string(code or (res.send_err and res.send_err[2]))
    end
    s1:close()
    s2:close()
    a:close()
    b:close()
  end, 120000))
end)

describe("fault matrix: blackouts mid-transfer", function()
  local lengths = LONG and { 1000, 2000, 3000, 4000, 5000 } or { 1000, 5000 }
  for _, ms in ipairs(lengths) do
    it(string.format("a %d s blackout at half way: completes hash-identical", ms / 1000), run(function()
      local r = U.transfer({
        size = SIZE,
        seed = 40 + ms,
        stream2 = { read_buffer_limit = 64 * 1024 }, -- keeps the transfer in progress at half way
        at = SIZE / 2,
        at_fn = function(ctx)
          assert(ctx.a:set_fault({ seed = 1, blackout_ms = ms, direction = "both" }))
          assert(ctx.b:set_fault({ seed = 2, blackout_ms = ms, direction = "both" }))
        end,
      })
      report(string.format("blackout %d ms", ms), r)
      assert_intact(r, SIZE)
      assert.is_true(r.elapsed_ms >= ms, "finished before the blackout ended")
      assert.is_true(r.sock1.fault_dropped + r.sock2.fault_dropped > 0)
    end, 60000))
  end

  it("a blackout longer than the give-up time: ETIMEDOUT on both sides, no hang", run(function()
    local t0 = ludx.now()
    local r = U.transfer({
      size = SIZE,
      seed = 49,
      stream1 = { timeout = 1500 },
      stream2 = { timeout = 1500, keepalive = 250, read_buffer_limit = 64 * 1024 },
      timeout = 20000,
      at = SIZE / 4,
      at_fn = function(ctx)
        -- the reader pauses until both sides had a HEARTBEAT answered (the
        -- sender's zero-window probe, the reader's keepalive): only a peer
        -- known to answer is declared dead by silence (older libudx peers
        -- never answer)
        local t = ludx.now()
        while ctx.s1:stats().zwp_count < 1 and ludx.now() - t < 5000 do ludx.sleep(50) end
        ludx.sleep(300)
        assert(ctx.a:set_fault({ seed = 1, blackout_ms = 60000, direction = "both" }))
        assert(ctx.b:set_fault({ seed = 2, blackout_ms = 60000, direction = "both" }))
      end,
    })
    report("blackout past the give-up time", r)
    assert.is_false(r.ok)
    assert.are.equal("ETIMEDOUT", r.send_err and r.send_err[2])
    assert.are.equal("ETIMEDOUT", r.recv_err and r.recv_err[2])
    assert.is_true(ludx.now() - t0 < 15000)
  end, 30000))
end)

describe("fault matrix: the peer's address changes mid-transfer", function()
  it("both ends move to new sockets (change_remote); the old sockets close; hash-identical", run(function()
    local moved = {}
    local r = U.transfer({
      size = SIZE,
      seed = 51,
      stream2 = { read_buffer_limit = 64 * 1024 },
      at = SIZE / 2,
      at_fn = function(ctx)
        local a2 = assert(udx.bind("127.0.0.1", 0))
        local b2 = assert(udx.bind("127.0.0.1", 0))
        ctx.extra[#ctx.extra + 1] = a2
        ctx.extra[#ctx.extra + 1] = b2
        local _, pa2 = a2:address()
        local _, pb2 = b2:address()
        -- each side learns the other's new address (as a DHT reconnect
        -- would tell it) and moves; the reader keeps reading meanwhile
        ludx.spawn("move s1", function()
          assert(ctx.s1:change_remote(a2, ctx.s2.id, pb2, "127.0.0.1", 10000))
          moved[1] = true
          ctx.a:close() -- nothing uses it any more
        end)
        ludx.spawn("move s2", function()
          assert(ctx.s2:change_remote(b2, ctx.s1.id, pa2, "127.0.0.1", 10000))
          moved[2] = true
          ctx.b:close()
        end)
      end,
    })
    report("both ends move", r)
    assert_intact(r, SIZE)
    assert.is_true(moved[1] and moved[2])
  end, 60000))

  it("NAT-rebinding-like: the sender's source port changes unannounced, old mapping kept: hash-identical", run(function()
    local r = U.transfer({
      size = SIZE,
      seed = 52,
      -- s2 allows migration: by default a connected stream drops packets
      -- from another address (an off-path sender could forge them)
      stream2 = { read_buffer_limit = 64 * 1024, migration = true },
      at = SIZE / 2,
      at_fn = function(ctx)
        local a2 = assert(udx.bind("127.0.0.1", 0))
        ctx.extra[#ctx.extra + 1] = a2
        local _, pb = ctx.b:address()
        -- s1's datagrams now leave from a2's port; s2 is not told and keeps
        -- answering the old address, which still reaches s1
        ludx.spawn("rebind", function()
          assert(ctx.s1:change_remote(a2, ctx.s2.id, pb, "127.0.0.1", 10000))
        end)
      end,
    })
    report("rebinding, old mapping kept", r)
    assert_intact(r, SIZE)
  end, 60000))

  it("NAT-rebinding-like with the old mapping gone: ETIMEDOUT after the give-up time, no hang", run(function()
    local t0 = ludx.now()
    local r = U.transfer({
      size = SIZE,
      seed = 53,
      stream1 = { timeout = 1500 },
      stream2 = { timeout = 1500, keepalive = 250, read_buffer_limit = 64 * 1024 },
      timeout = 20000,
      at = SIZE / 4,
      at_fn = function(ctx)
        local a2 = assert(udx.bind("127.0.0.1", 0))
        ctx.extra[#ctx.extra + 1] = a2
        local _, pb = ctx.b:address()
        ludx.sleep(600) -- a keepalive HEARTBEAT gets answered first (see above)
        ludx.spawn("rebind", function()
          -- once the move completed, the old port disappears: s2's answers
          -- (to the address it knows) are lost
          if ctx.s1:change_remote(a2, ctx.s2.id, pb, "127.0.0.1", 10000) then ctx.a:close() end
        end)
      end,
    })
    report("rebinding, old mapping gone", r)
    assert.is_false(r.ok)
    assert.are.equal("ETIMEDOUT", r.send_err and r.send_err[2])
    assert.are.equal("ETIMEDOUT", r.recv_err and r.recv_err[2])
    assert.is_true(ludx.now() - t0 < 15000)
  end, 30000))
end)
