-- ACK policies of a ludx receiver: one ACK per DATA packet (as libudx)
-- against coalesced ACKs (once per receive batch and every few packets, at
-- once for gaps, duplicates and END). What matters is the sender: a
-- udx-native sender must not slow down or retransmit more when its ACKs
-- are coalesced. udx-native -> udx-native runs in each case as the same-run
-- reference.
local transfer = require "ludx.bench.transfer"

local MB = 1024 * 1024

local function case(name, policy)
  return transfer.case({
    name = name,
    description = "{size} over loopback, 64 KB writes, ludx receiver acks " .. policy,
    bytes = 200 * MB, quick_bytes = 20 * MB, chunk = 65536,
    systems = { "udx-native -> udx-native", "udx-native -> ludx", "ludx -> ludx" },
    receiver_opts = { ackPolicy = policy },
  })
end

-- The same through ludx-pathemu with 1% loss (gaps are acked at once).
local function path_case(name, policy)
  return transfer.case({
    name = name,
    description = "{size}, 100 Mbit/s, 40 ms RTT, 1000-packet queue, 1% loss, ludx receiver acks " .. policy,
    bytes = 20 * MB, quick_bytes = 5 * MB, chunk = 65536,
    systems = { "udx-native -> udx-native", "udx-native -> ludx" },
    receiver_opts = { ackPolicy = policy },
    path = { rate = 100e6, delay_ms = 20, queue = 1000, loss = 0.01, seed = 2 },
    timeout = 600000,
  })
end

return {
  name = "acks",
  cases = {
    case("ack-each", "each"),
    case("ack-batch", "batch"),
    path_case("path-ack-each", "each"),
    path_case("path-ack-batch", "batch"),
  },
}
