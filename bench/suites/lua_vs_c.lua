-- The same transfer driven from Lua (ludx-bench.lua) and from C only
-- (ludx-cbench, the udx library with no Lua): what the binding costs.
local transfer = require "ludx.bench.transfer"

local MB = 1024 * 1024

return {
  name = "lua-vs-c",
  cases = {
    transfer.case({
      name = "plain-64k",
      description = "{size} over loopback, 64 KB writes, Lua ends against C-only ends",
      bytes = 200 * MB, quick_bytes = 20 * MB, chunk = 65536,
      -- both ends hash as the bytes arrive (in C either way) and keep
      -- nothing: storing 200 MB for a later hash measures page faults,
      -- not the binding
      hash = "inline",
      systems = { "ludx-c -> ludx-c", "ludx -> ludx", "ludx -> ludx-c", "ludx-c -> ludx" },
      baseline = "ludx-c -> ludx-c",
    }),
  },
}
