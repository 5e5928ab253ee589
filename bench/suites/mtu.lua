-- Links of 1280, 1400 and 1500 bytes: each end in its own network namespace,
-- joined by a veth pair with that MTU (needs root and iproute2). The sender
-- reports the MTU its stream settled on (udx-native stays at 1200).
local ludx = require "ludx"
local process = require "ludx.process"
local transfer = require "ludx.bench.transfer"

local MB = 1024 * 1024
-- namespaces of this run only: concurrent runs must not share them
local NS_A, NS_B = "lxb" .. ludx.core.getpid() .. "-a", "lxb" .. ludx.core.getpid() .. "-b"
local ADDR_A, ADDR_B = "10.99.0.1", "10.99.0.2"

local function sh(args)
  local p = assert(process.spawn("ip", args))
  local status = p:wait(10000)
  local err = p:stderr()
  p:close()
  if status ~= 0 then error("ip " .. table.concat(args, " ") .. ": " .. err, 0) end
end

local function teardown()
  for _, ns in ipairs({ NS_A, NS_B }) do
    local p = process.spawn("ip", { "netns", "del", ns })
    if p then
      p:wait(10000)
      p:close()
    end
  end
end

local function link(mtu)
  return function(ctx)
    teardown()
    sh({ "netns", "add", NS_A })
    sh({ "netns", "add", NS_B })
    sh({ "link", "add", "ludxa", "netns", NS_A, "type", "veth", "peer", "name", "ludxb", "netns", NS_B })
    sh({ "-n", NS_A, "addr", "add", ADDR_A .. "/24", "dev", "ludxa" })
    sh({ "-n", NS_B, "addr", "add", ADDR_B .. "/24", "dev", "ludxb" })
    sh({ "-n", NS_A, "link", "set", "ludxa", "mtu", tostring(mtu), "up" })
    sh({ "-n", NS_B, "link", "set", "ludxb", "mtu", tostring(mtu), "up" })
    sh({ "-n", NS_A, "link", "set", "lo", "up" })
    sh({ "-n", NS_B, "link", "set", "lo", "up" })
    ctx.wrap_sender = { "ip", "netns", "exec", NS_A }
    ctx.wrap_receiver = { "ip", "netns", "exec", NS_B }
  end
end

local function mtu_case(mtu)
  return transfer.case({
    name = "link-" .. mtu,
    description = "a " .. mtu .. "-byte link between two network namespaces, {size}",
    bytes = 100 * MB, quick_bytes = 10 * MB, chunk = 65536,
    sender_opts = { host = ADDR_A },
    receiver_opts = { host = ADDR_B },
    setup = link(mtu),
    teardown = teardown,
  })
end

return {
  name = "mtu",
  cases = { mtu_case(1280), mtu_case(1400), mtu_case(1500) },
}
