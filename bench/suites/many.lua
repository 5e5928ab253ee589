-- 100 concurrent streams on one socket at each end, 100 MB in all (1 MB
-- each), over loopback; all four pairings.
local transfer = require "ludx.bench.transfer"

local MB = 1024 * 1024

return {
  name = "many",
  cases = {
    transfer.case({
      name = "100-streams",
      description = "100 concurrent streams on one socket, {size} in all, loopback",
      bytes = 100 * MB, quick_bytes = 20 * MB, chunk = 65536, streams = 100,
    }),
    -- 16 streams of one socket through a bottleneck whose queue is a quarter
    -- of the BDP (84 datagrams of 1500 bytes; 500 KB BDP): what they take of
    -- the link together (goodput), Jain's index of their rates (jain) and
    -- the median RTT they saw (rtt_med_ms against 40 ms idle)
    transfer.case({
      name = "16-streams-shallow",
      description = "16 streams of one socket, 100 Mbit/s, 40 ms RTT, 84-packet queue (1/4 BDP), {size} in all",
      bytes = 64 * MB, quick_bytes = 16 * MB, chunk = 65536, streams = 16,
      systems = { "udx-native -> udx-native", "ludx -> ludx" },
      path = { rate = 100e6, delay_ms = 20, queue = 84, seed = 5 },
      timeout = 600000,
    }),
  },
}
