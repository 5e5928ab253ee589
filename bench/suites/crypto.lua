-- libsodium's secretstream push and pull on one core for the frame sizes
-- ludx sends (one frame per write: 64 KB writes, up to 16 MB ones), and
-- encrypted-64k ludx -> ludx against the limit the cipher sets: 1 / (plain
-- CPU s/GB + cipher s/GB) at the busier end, from the same run.
local ludx = require "ludx"
local transfer = require "ludx.bench.transfer"

local C = ludx.core.crypto
local MB = 1024 * 1024
local format = string.format

-- Seconds per GB of push and pull for frames of `frame` bytes.
local function cipher(frame, total)
  local push_s, pull_s = C.secretstream_rate(frame, total)
  assert(push_s, pull_s)
  local gb = math.ceil(total / frame) * frame / 1e9
  return push_s / gb, pull_s / gb
end

local function rate_case(name, frame)
  return {
    name = name,
    description = format("secretstream push and pull of %s frames on one core", transfer.size(frame)),
    describe = function(ctx)
      return format("secretstream push and pull of %s frames on one core, %s each run", transfer.size(frame),
        transfer.size(ctx.quick and 64 * MB or 512 * MB))
    end,
    systems = { "push", "pull" },
    baseline = "push",
    run = function(ctx, system)
      local push, pull = cipher(frame, ctx.quick and 64 * MB or 512 * MB)
      local s_per_gb = system == "push" and push or pull
      return { ok = true, mb_s = 1000 / s_per_gb, cpu_s_per_gb = s_per_gb }
    end,
  }
end

local function render_limit(samples, id)
  local out = { format("  %-14s %5s %10s %10s %10s %10s %10s %12s %9s", "system", "runs", "enc MB/s", "plain MB/s",
    "limit MB/s", "of limit", "CPU limit", "send/recv", "cipher") }
  local bench = require "ludx.bench"
  local by = {}
  for _, s in ipairs(samples) do
    if s.case == id and s.ok then
      local b = by[s.system] or {}
      by[s.system] = b
      for k, v in pairs(s) do
        if type(v) == "number" then
          b[k] = b[k] or {}
          b[k][#b[k] + 1] = v
        end
      end
    end
  end
  for system, b in pairs(by) do
    out[#out + 1] = format("  %-14s %5d %10.1f %10.1f %10.1f %9.1f%% %9.1f%% %5.2f/%5.2f %4.2f/%4.2f", system, #b.mb_s,
      bench.median(b.mb_s), bench.median(b.plain_mb_s), bench.median(b.limit_mb_s), 100 * bench.median(b.of_limit),
      100 * bench.median(b.cpu_of_limit), bench.median(b.enc_cpu_send_s_per_gb), bench.median(b.enc_cpu_recv_s_per_gb),
      bench.median(b.push_s_per_gb), bench.median(b.pull_s_per_gb))
  end
  out[#out + 1] = "  (send/recv: CPU s/GB of the encrypted ends; cipher: push/pull s/GB; CPU limit: plain + cipher"
  out[#out + 1] = "   s/GB over the encrypted CPU s/GB at the busier end, what 'of limit' reaches when both ends get a core)"
  return table.concat(out, "\n")
end

-- One run: plain-64k and encrypted-64k ludx -> ludx and the cipher at the
-- same frame size, back to back. The limit is what the encrypted transfer
-- would reach if encryption cost only the cipher: each end's plain CPU
-- s/GB plus its half (push at the sender, pull at the receiver), the
-- busier end bounding.
local limit_case = {
  name = "encrypted-64k-limit",
  description = "200 MB ludx -> ludx over loopback in 64 KB writes, plain and SecretStream, against the cipher",
  describe = function(ctx)
    return format("%s ludx -> ludx over loopback in 64 KB writes, plain and SecretStream, against the cipher",
      ctx.quick and "20 MB" or "200 MB")
  end,
  systems = { "ludx -> ludx" },
  baseline = "ludx -> ludx",
  available = transfer.available,
  run = function(ctx, system)
    local bytes = ctx.quick and 20 * MB or 200 * MB
    local plain = transfer.transfer(ctx.root, system, { bytes = bytes, chunk = 65536 })
    if not plain.ok then return { ok = false, error = "plain: " .. tostring(plain.error) } end
    local enc = transfer.transfer(ctx.root, system, { bytes = bytes, chunk = 65536, secret = true })
    if not enc.ok then return { ok = false, error = "encrypted: " .. tostring(enc.error) } end
    local push, pull = cipher(65536, 256 * MB)
    local send = plain.cpu_send_s_per_gb + push
    local recv = plain.cpu_recv_s_per_gb + pull
    local limit = 1000 / math.max(send, recv)
    return {
      ok = true,
      mb_s = enc.mb_s,
      plain_mb_s = plain.mb_s,
      limit_mb_s = limit,
      of_limit = enc.mb_s / limit,
      -- the same ratio in CPU time: what encryption costs besides the
      -- cipher, whatever else the machine runs (a shared machine's wall
      -- rates follow its load; CPU s/GB do not)
      cpu_of_limit = math.max(send, recv) / math.max(enc.cpu_send_s_per_gb, enc.cpu_recv_s_per_gb),
      plain_cpu_send_s_per_gb = plain.cpu_send_s_per_gb,
      plain_cpu_recv_s_per_gb = plain.cpu_recv_s_per_gb,
      enc_cpu_send_s_per_gb = enc.cpu_send_s_per_gb,
      enc_cpu_recv_s_per_gb = enc.cpu_recv_s_per_gb,
      push_s_per_gb = push,
      pull_s_per_gb = pull,
    }
  end,
  render = render_limit,
}

return {
  name = "crypto",
  cases = {
    rate_case("frame-1k", 1024),
    rate_case("frame-64k", 65536), -- a 64 KB write is one frame
    rate_case("frame-1m", MB),
    rate_case("frame-16m", 16777198), -- the largest write, one frame
    limit_case,
  },
}
