-- ludx dht lookup|announce|testnet ...
local common = require "ludx.cmd.common"

local M = {}

local usage = [[
usage: ludx dht lookup [options] TOPIC
       ludx dht announce [options] TOPIC
       ludx dht testnet [options] [N]

  lookup TOPIC     prints the public keys announced under TOPIC, one per
                   line (with their relay addresses)
  announce TOPIC   announces a key pair under TOPIC and prints its public
                   key; with --wait it stays and announces again every
                   10 minutes until interrupted
  testnet [N]      runs a local DHT of N nodes (default 3) in this process
                   and prints the bootstrap address (host:port) on a line
                   of its own; runs until interrupted

TOPIC is 64 hex characters (32 bytes) or any text, which is hashed with
BLAKE2b-256 first.

options:
  --bootstrap H:P,...  DHT bootstrap nodes (default: the public HyperDHT network)
  --key FILE           announce this key pair (`ludx keygen -o FILE`)
  --wait               announce: keep announcing until interrupted
  --host HOST          testnet: address to bind (default 127.0.0.1)
  --port N             testnet: port of the bootstrap node (default: any);
                       others: the node's UDP port
  --timeout MS         give up after MS (default 30000)
  -h, --help           this help
]]

local function hex(b)
  return require("ludx.crypto").hex(b)
end

local function lookup(opts, topic)
  local node, err = common.node(opts)
  if not node then return nil, err end
  local seen, n = {}, 0
  local q = node:lookup(common.topic(topic), { timeout = tonumber(opts.timeout) or 30000 })
  for reply in q do
    for _, peer in ipairs(reply.peers or {}) do
      if not seen[peer.public_key] then
        seen[peer.public_key] = true
        n = n + 1
        local relays = {}
        for _, a in ipairs(peer.relay_addresses or {}) do relays[#relays + 1] = a.host .. ":" .. a.port end
        io.stdout:write(hex(peer.public_key), #relays > 0 and (" " .. table.concat(relays, ",")) or "", "\n")
        io.stdout:flush()
      end
    end
  end
  local msg = q:error()
  node:destroy()
  if msg and n == 0 then return nil, "lookup failed: " .. msg end
  io.stderr:write(string.format("%d peer%s\n", n, n == 1 and "" or "s"))
  return 0
end

local function announce(opts, topic)
  local kp, err = common.keypair(opts.key)
  if not kp then return nil, err end
  local node
  node, err = common.node(opts, kp)
  if not node then return nil, err end
  local t = common.topic(topic)
  local ludx = require "ludx"
  local closest, msg = node:announce(t, kp, { timeout = tonumber(opts.timeout) or 30000 })
  if not closest then
    node:destroy()
    return nil, "announce failed: " .. tostring(msg)
  end
  io.stdout:write(hex(kp.public_key), "\n")
  io.stdout:flush()
  io.stderr:write(string.format("announced on %d node%s\n", #closest, #closest == 1 and "" or "s"))
  if opts.wait then
    local task = ludx.spawn("re-announce", function()
      while true do
        ludx.sleep(10 * 60 * 1000)
        node:announce(t, kp)
      end
    end)
    common.wait_signal()
    task:cancel()
    node:unannounce(t, kp, { timeout = 5000 })
  end
  node:destroy()
  return 0
end

local function testnet(opts, n)
  local dht = require "ludx.dht"
  local tn, err = dht.testnet(n, { host = opts.host or "127.0.0.1", port = tonumber(opts.port), timeout = tonumber(opts.timeout) or 30000 })
  if not tn then return nil, "testnet: " .. tostring(err) end
  io.stdout:write(tn.bootstrap[1], "\n")
  io.stdout:flush()
  io.stderr:write(string.format("a DHT of %d nodes; use --bootstrap %s (Ctrl-C stops it)\n", n, tn.bootstrap[1]))
  common.wait_signal()
  tn:destroy()
  return 0
end

function M.main(args)
  local opts, pos = common.parse(args, {
    help = "flag", bootstrap = "value", key = "value", wait = "flag", host = "value", port = "value", timeout = "value",
  }, { h = "help" })
  if not opts then return common.fail("dht", pos, usage) end
  local sub = pos[1]
  if opts.help or sub == "help" then
    io.stdout:write(usage)
    return 0
  end
  if sub == "lookup" or sub == "announce" then
    if #pos ~= 2 then return common.fail("dht", sub .. ": one TOPIC expected", usage) end
    return common.run("dht " .. sub, sub == "lookup" and lookup or announce, opts, pos[2])
  elseif sub == "testnet" then
    local n = tonumber(pos[2] or "3")
    if #pos > 2 or not n or n < 2 or n > 1000 or n % 1 ~= 0 then return common.fail("dht", "testnet: N must be 2..1000", usage) end
    return common.run("dht testnet", testnet, opts, n)
  end
  return common.fail("dht", sub and ("unknown command '" .. sub .. "'") or "a command expected", usage)
end

return M
