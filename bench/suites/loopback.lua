-- 200 MB over loopback, plain and encrypted (SecretStream), 64 KB writes and
-- one big write; all four pairings against udx-native -> udx-native.
local transfer = require "ludx.bench.transfer"

local MB = 1024 * 1024

return {
  name = "loopback",
  cases = {
    transfer.case({
      name = "plain-64k",
      description = "{size} over loopback, 64 KB writes",
      bytes = 200 * MB, quick_bytes = 20 * MB, chunk = 65536,
    }),
    transfer.case({
      name = "plain-one-write",
      description = "{size} over loopback, one write",
      bytes = 200 * MB, quick_bytes = 20 * MB, chunk = 200 * MB, skip_quick = true,
    }),
    transfer.case({
      name = "encrypted-64k",
      description = "{size} over loopback, SecretStream, 64 KB writes",
      bytes = 200 * MB, quick_bytes = 20 * MB, chunk = 65536, secret = true,
    }),
    transfer.case({
      name = "encrypted-one-write",
      description = "{size} over loopback, SecretStream, one 16 MB write per frame",
      -- a SecretStream frame carries at most 2^24 - 18 bytes: the largest write
      bytes = 200 * MB, chunk = 16777198, secret = true, skip_quick = true,
    }),
  },
}
