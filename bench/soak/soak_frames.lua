-- Soak: large SecretStream frames over udx, one pair per request. Frames
-- of 256 KiB and more are sealed straight into the send queue, in mappings
-- of their own that go as the peer acks them; the receiver gathers them in
-- its framer's buffer, trimmed a second after. Frames of 4 MiB and more are
-- sealed on the thread pool (a job, a run of the send queue and an event
-- each). Each pair sends a 4 MiB, a 1 MiB and a 300 KB frame each way,
-- reads them back whole, and closes gracefully. At
-- every 5% it records the Lua heap (after a full collection), the RSS and
-- the process's mappings; at the end it compares the last 10% with the
-- first 10%: the heap within 5%, no more mappings (a block left mapped per
-- frame would add one each, and 1 MiB of RSS), and the RSS within 15% (it
-- moves by about 1 MB, 9%, with what glibc keeps of freed chunks, up and
-- down, on an 11 MB process). The heap grows by a few bytes per pair with
-- the JIT on (its traces; flat with jit.off()).
--
--   build/ludx bench/soak/soak_frames.lua [PAIRS [WARMUP]]
--
-- WARMUP pairs (default PAIRS / 10) run first and are not sampled. Not a
-- timed test. Exit status 0 when all three hold.
--
-- Measured (2 cores, first 10% -> last 10%):
-- Before it (1 MiB and 300 KB frames only):
--   4,000 pairs, 400 warm-up, 47.5 s: heap 1986.8 -> 2006.4 KB (+1.0%), RSS 10452 -> 11492 KB (+10.0%), mappings 55 -> 55
--   4,000 pairs, 400 warm-up, 49.6 s: heap 1956.2 -> 1978.8 KB (+1.2%), RSS 10612 -> 11368 KB (+7.1%), mappings 53 -> 53
--   4,000 pairs, 400 warm-up, 47.9 s: heap 1955.4 -> 1976.3 KB (+1.1%), RSS 11424 -> 11480 KB (+0.5%), mappings 56 -> 56
--   (with jit.off(), 400-pair steps: heap 1560.2 -> 1560.4 KB)
-- With the 4 MiB frame (sealed on the thread pool):
--   400 pairs, 40 warm-up, 50.9 s: heap 6625.6 -> 5998.0 KB (-9.5%), RSS 24180 -> 23756 KB (-1.8%), mappings 64 -> 64
--   2,000 pairs, 200 warm-up, 207.1 s: heap 6066.3 -> 6048.3 KB (-0.3%), RSS 30424 -> 30444 KB (+0.1%), mappings 70 -> 70
local ludx = require "ludx"
local udx = require "ludx.udx"
local secretstream = require "ludx.secretstream"
local soak = require "ludx.bench.soak"

local PAIRS = tonumber(arg and arg[1]) or 2000
local WARMUP = tonumber(arg and arg[2]) or math.floor(PAIRS / 10)

local function mappings()
  local n = 0
  for _ in io.lines("/proc/self/maps") do n = n + 1 end
  return n
end

local a = assert(udx.bind("127.0.0.1", 0))
local b = assert(udx.bind("127.0.0.1", 0))
local _, pa = a:address()
local _, pb = b:address()
local huge = string.rep("h", 4 * 1024 * 1024 + 7)
local big = string.rep("f", 1024 * 1024)
local mid = string.rep("m", 300000)
local EACH = #huge + #big + #mid

local function read_n(s, n)
  local got = 0
  while got < n do
    local d, msg = s:read(nil, 10000)
    assert(d, msg)
    got = got + #d
  end
  return got
end

local function one(i)
  local id = (i * 2) % 1000000 + 10
  local s1 = assert(udx.stream(id))
  local s2 = assert(udx.stream(id + 1))
  assert(s1:connect(a, id + 1, pb, "127.0.0.1"))
  assert(s2:connect(b, id, pa, "127.0.0.1"))
  local x = secretstream.wrap(s1, { initiator = true })
  local y = secretstream.wrap(s2, { initiator = false })
  assert(x:ready(10000))
  assert(y:ready(10000))
  local peer = ludx.spawn("peer", function()
    assert(read_n(y, EACH) == EACH)
    assert(y:write(huge, 10000))
    assert(y:write(big, 10000))
    assert(y:write(mid, 10000))
    assert(y:close(10000))
  end)
  assert(x:write(huge, 10000))
  assert(x:write(big, 10000))
  assert(x:write(mid, 10000))
  assert(read_n(x, EACH) == EACH)
  assert(x:close(10000))
  peer:join()
  assert(s1:wait_closed(10000))
  assert(s2:wait_closed(10000))
  assert(not s1:error() and not s2:error(), "a graceful close ended with an error")
end

local r = soak.run(one, { count = PAIRS, warmup = WARMUP, extra = { name = "mappings", fn = mappings } })
a:close()
b:close()
local n = #r.extra
local m0, m1 = math.max(r.extra[1], r.extra[2]), math.max(r.extra[n - 1], r.extra[n])
local flat = r.dh <= 5 and r.dr <= 15 and m1 <= m0
print(string.format("%d large-frame pairs in %.1f s: heap %.1f -> %.1f KB (%+.1f%%), RSS %d -> %d KB (%+.1f%%), mappings %d -> %d: %s",
  PAIRS, r.seconds, r.h0, r.h1, r.dh, r.r0, r.r1, r.dr, m0, m1, flat and "FLAT" or "NOT FLAT"))
os.exit(flat and 0 or 1)
