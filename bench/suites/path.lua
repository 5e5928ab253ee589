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

-- The same peer twice over 100 Mbit/s, 40 ms: the first contact starts as
-- any stranger; the second starts from the rate and min RTT the first
-- measured (careful resume: a jump to half of it once the first RTT
-- matches). The sample is the second transfer's; first_goodput_pct is the
-- first contact's in the same run.
local function resumed_case()
  local spec = {
    name = "100M-40ms-0-resumed",
    description = "100 Mbit/s, 40 ms RTT, 1000-packet queue, {size}, no loss, a second transfer to the same peer (careful resume)",
    bytes = 50 * MB, quick_bytes = 5 * MB, chunk = 65536,
    path = { rate = 100e6, delay_ms = 20, queue = 1000, seed = 1 },
    systems = { "ludx -> ludx" }, baseline = "ludx -> ludx",
    timeout = 600000,
  }
  local case = transfer.case(spec)
  local run = case.run
  function case.run(ctx, system)
    spec.sender_opts = nil
    local first = run(ctx, system)
    if not first.ok then return first end
    local st = first.sender or {}
    if not (tonumber(st.bbrBw) and tonumber(st.minRtt)) then return { ok = false, error = "the sender reported no bbrBw/minRtt" } end
    spec.sender_opts = { resumeRate = st.bbrBw, resumeRttMs = st.minRtt }
    local second = run(ctx, system)
    spec.sender_opts = nil
    if second.ok and first.extra then second.extra.first_goodput_pct = first.extra.goodput_pct end
    return second
  end
  return case
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
    resumed_case(),
    -- 16 streams of one socket through a bottleneck whose queue is a quarter
    -- of the BDP in 1500-byte datagrams (84 of them; 500 KB BDP; ludx's MTU
    -- search makes its datagrams ~2 KB over loopback: about a third): what they take of
    -- the link together (goodput; steady_pct from a quarter to three
    -- quarters of the bytes), Jain's index of their rates (jain) and the
    -- median RTT they saw (rtt_med_ms against 40 ms idle). emu_late_max_ms:
    -- how late the emulator ran (a loaded machine idles the link).
    transfer.case({
      name = "16-streams-shallow",
      description = "16 streams of one socket, 100 Mbit/s, 40 ms RTT, 84-packet queue (1/4 BDP in 1500-byte packets), {size} in all",
      bytes = 64 * MB, quick_bytes = 16 * MB, chunk = 65536, streams = 16,
      systems = { "udx-native -> udx-native", "ludx -> ludx" },
      path = { rate = 100e6, delay_ms = 20, queue = 84, seed = 5 },
      timeout = 600000,
    }),
  },
}
