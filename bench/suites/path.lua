-- Transfers through ludx-pathemu: a bottleneck with a queue, delay and loss
-- on the data direction. Goodput is reported as a share of the link's
-- payload rate (1452 payload bytes per 1500 on the wire), and the median
-- RTT the sender measured during the transfer (ludx ends).
local transfer = require "ludx.bench.transfer"

local MB = 1024 * 1024

local function path_case(name, description, path, bytes, quick_bytes)
  return transfer.case({
    name = name,
    description = description,
    bytes = bytes, quick_bytes = quick_bytes, chunk = 65536,
    path = path,
    timeout = 600000,
  })
end

return {
  name = "path",
  cases = {
    path_case("100M-40ms-0", "100 Mbit/s, 40 ms RTT, 1000-packet queue, {size}, no loss",
      { rate = 100e6, delay_ms = 20, queue = 1000, seed = 1 }, 50 * MB, 5 * MB),
    path_case("100M-40ms-1pct", "100 Mbit/s, 40 ms RTT, 1000-packet queue, {size}, 1% loss",
      { rate = 100e6, delay_ms = 20, queue = 1000, loss = 0.01, seed = 2 }, 50 * MB, 5 * MB),
    path_case("100M-40ms-5pct", "100 Mbit/s, 40 ms RTT, 1000-packet queue, {size}, 5% loss",
      { rate = 100e6, delay_ms = 20, queue = 1000, loss = 0.05, seed = 3 }, 50 * MB, 5 * MB),
    path_case("20M-100ms", "20 Mbit/s, 100 ms RTT, 1000-packet queue, {size}",
      { rate = 20e6, delay_ms = 50, queue = 1000, seed = 4 }, 20 * MB, 2 * MB),
  },
}
