-- Soak: streams that end with a graceful close (issue 14), one pair per
-- request: a udx stream writes 10 KB and closes (END after the last byte,
-- returns once acked); its peer reads to EOF and closes; both must close
-- without an error. At every 5% it records the Lua heap (after a full
-- collection) and the RSS; at the end it compares the last 10% of the run
-- with the first 10%: a close that leaks nothing holds both flat (within 5%).
--
--   build/ludx bench/soak/soak_close.lua [PAIRS [WARMUP]]
--
-- WARMUP pairs (default PAIRS / 10) run first and are not sampled. The
-- samples are made before the run, so they do not count as growth. Not a
-- timed test. Exit status 0 when both are flat.
--
-- Measured (2 cores, first 10% -> last 10% of the run), with the lingering
-- streams in a list linked through them (a FIFO that kept stale entries
-- held up to 64 dead streams per socket: a heap sawtooth read as +6.1%):
--     200,000 pairs, 20,000 warm-up, 18 s:   heap 287.5 -> 291.7 KB (+1.4%), RSS 4836 -> 4840 KB (+0.1%)
--   1,000,000 pairs, 100,000 warm-up, 106 s: heap 284.8 -> 284.8 KB (+0.0%), RSS 4574 -> 4704 KB (+2.8%)
--   (one list for the process, the streams done sending evicted first:)
--   1,000,000 pairs, 100,000 warm-up, 108 s: heap 302.4 -> 302.4 KB (+0.0%), RSS 4816 -> 4820 KB (+0.1%)
local ludx = require "ludx"
local udx = require "ludx.udx"
local soak = require "ludx.bench.soak"

local PAIRS = tonumber(arg and arg[1]) or 200000
local WARMUP = tonumber(arg and arg[2]) or math.floor(PAIRS / 10)

local a = assert(udx.bind("127.0.0.1", 0))
local b = assert(udx.bind("127.0.0.1", 0))
local _, pa = a:address()
local _, pb = b:address()
local data = string.rep("q", 10000)

local function one(i)
  local id = (i * 2) % 1000000 + 10
  local s1 = assert(udx.stream(id))
  local s2 = assert(udx.stream(id + 1))
  assert(s1:connect(a, id + 1, pb, "127.0.0.1"))
  assert(s2:connect(b, id, pa, "127.0.0.1"))
  assert(s1:write(data))
  local peer = ludx.spawn("peer", function()
    local n = 0
    while true do
      local d = s2:read(nil, 5000)
      if not d then break end
      n = n + #d
    end
    assert(n == #data, "peer read " .. n)
    assert(s2:close(5000))
  end)
  assert(s1:close(5000))
  peer:join()
  assert(s1:wait_closed(5000))
  assert(s2:wait_closed(5000))
  assert(not s1:error() and not s2:error(), "a graceful close ended with an error")
end

local r = soak.run(one, { count = PAIRS, warmup = WARMUP })
a:close()
b:close()
local flat = r.dh <= 5 and r.dr <= 5
print(string.format("%d graceful close pairs in %.1f s: heap %.1f -> %.1f KB (%+.1f%%), RSS %d -> %d KB (%+.1f%%): %s",
  PAIRS, r.seconds, r.h0, r.h1, r.dh, r.r0, r.r1, r.dr, flat and "FLAT" or "NOT FLAT"))
os.exit(flat and 0 or 1)
