-- 100 concurrent streams on one socket at each end, 100 MB in all (1 MB
-- each), over loopback; all four pairings. (16 streams through a shallow
-- bottleneck: the path suite.)
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
  },
}
