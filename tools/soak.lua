-- Soak: transfers under random seeded faults for a set time, four at a
-- time over fresh socket pairs: loss, reordering, duplication, short
-- blackouts and bursts of send errors. Every transfer must complete with
-- the same BLAKE2b on both ends. Prints a line per minute and a summary:
-- transfers, bytes moved, faults injected, failures (must be 0), RSS.
--
--   ludx tools/soak.lua [SECONDS=600] [SEED=1]
local here = debug.getinfo(1, "S").source:match("^@(.*)/tools/soak%.lua$") or "."
package.path = here .. "/spec/?.lua;" .. package.path
local ludx = require "ludx"
local U = require "hardening_util"

local seconds = tonumber(arg and arg[1]) or 600
local seed = tonumber(arg and arg[2]) or 1
local rng = seed
local function rand()
  rng = (rng * 1103515245 + 12345) % 2147483648
  return rng / 2147483648
end

local totals = { transfers = 0, bytes = 0, failed = 0, dropped = 0, send_errors = 0, retransmits = 0, blackouts = 0, error_bursts = 0 }
local failures = {}

local function fault_config(n)
  local f = {
    seed = seed * 100000 + n,
    loss = ({ 0, 0.01, 0.05, 0.10, 0.20 })[1 + math.floor(rand() * 5)],
    reorder = rand() < 0.5 and rand() * 0.2 or 0,
    reorder_us = math.floor(rand() * 3000),
    duplicate = rand() < 0.4 and rand() * 0.1 or 0,
    direction = "tx",
  }
  return f
end

local function one(n)
  local size = math.floor(64 * 1024 + rand() * 4 * 1024 * 1024)
  local fa, fb = fault_config(2 * n), fault_config(2 * n + 1)
  local blackout = rand() < 0.15 and math.floor(200 + rand() * 1800) or nil
  local errors = rand() < 0.15 and ({ "ENETUNREACH", "EPERM", "EMSGSIZE", "ENOBUFS" })[1 + math.floor(rand() * 4)] or nil
  local r = U.transfer({
    size = size,
    seed = n,
    timeout = 60000,
    stream2 = { read_buffer_limit = blackout and 256 * 1024 or nil },
    setup = function(ctx)
      assert(ctx.a:set_fault(fa))
      assert(ctx.b:set_fault(fb))
    end,
    at = math.floor(size / 3),
    at_fn = function(ctx)
      if blackout then
        totals.blackouts = totals.blackouts + 1
        assert(ctx.a:set_fault({ seed = n, blackout_ms = blackout, loss = fa.loss, direction = "both" }))
      elseif errors then
        totals.error_bursts = totals.error_bursts + 1
        assert(ctx.a:set_fault({ seed = n, send_error = 1.0, send_errno = errors, direction = "tx" }))
        ludx.after(300 + math.floor(rand() * 700), function() ctx.a:set_fault(fa) end)
      end
    end,
  })
  totals.transfers = totals.transfers + 1
  totals.bytes = totals.bytes + (r.bytes or 0)
  for _, st in ipairs({ r.sock1, r.sock2 }) do
    totals.dropped = totals.dropped + st.fault_dropped
    totals.send_errors = totals.send_errors + st.send_err_netunreach + st.send_err_perm + st.send_err_msgsize + st.send_err_nobufs
  end
  totals.retransmits = totals.retransmits + r.stats1.retransmits
  if not r.ok then
    totals.failed = totals.failed + 1
    failures[#failures + 1] = string.format("transfer %d (%d bytes, loss %.2f/%.2f, blackout %s, errors %s): %s", n, size,
      fa.loss, fb.loss, tostring(blackout), tostring(errors), U.describe(r))
  end
end

local ok, msg = ludx.run(function()
  local t0 = ludx.now()
  local rss0 = U.rss()
  local n, next_report = 0, 60000
  local workers = {}
  for w = 1, 4 do
    workers[w] = ludx.spawn("soak " .. w, function()
      while ludx.now() - t0 < seconds * 1000 do
        n = n + 1
        one(n)
      end
    end)
  end
  local function line(label)
    io.write(string.format("%s %4ds: %d transfers, %.1f MB moved, %d datagrams dropped + %d send errors injected (%d blackouts, %d error bursts), %d retransmits, %d failed, RSS %.1f MB (start %.1f), Lua heap %.1f MB\n",
      label, math.floor((ludx.now() - t0) / 1000), totals.transfers, totals.bytes / 1e6, totals.dropped, totals.send_errors,
      totals.blackouts, totals.error_bursts, totals.retransmits, totals.failed, U.rss() / 1e6, rss0 / 1e6,
      collectgarbage("count") / 1024))
    io.flush()
  end
  while true do
    local alive = false
    for _, w in ipairs(workers) do
      if w.state ~= "dead" then alive = true end
    end
    if not alive then break end
    ludx.sleep(500)
    if ludx.now() - t0 >= next_report then
      line("soak")
      next_report = next_report + 60000
    end
  end
  line("soak done")
end)
if ok == nil and msg then
  io.stderr:write("soak: " .. tostring(msg) .. "\n")
  os.exit(1)
end
for _, f in ipairs(failures) do io.write("FAILED " .. f .. "\n") end
os.exit(totals.failed == 0 and totals.transfers > 0 and 0 or 1)
