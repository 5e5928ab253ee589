-- The ludx end of bench/suites/handshake.lua: a two-node DHT on loopback
-- and a server listening on the second node with the key of keySeed, its
-- admission caps opened up (the bench measures the cost of a handshake,
-- not the caps). Prints {"event":"ready","port":P,"publicKey":hex}; then
-- each stdin line "cpu" gets {"event":"cpu","ms":user+system ms,"handshakes":n}.
local ludx = require "ludx"
local dht = require "ludx.dht"
local json = require "ludx.json"
local crypto = require "ludx.crypto"

local opts = json.decode(arg[1] or "{}") or {}
local seed = crypto.unhex(opts.keySeed or string.rep("11", 32))

local function emit(obj)
  io.stdout:write(json.encode(obj), "\n")
  io.stdout:flush()
end

local function cpu_ms()
  local r = ludx.core.rusage()
  return (r.utime + r.stime) * 1000
end

local tn = assert(dht.testnet(2, { timeout = 30000 }))
local node = tn.nodes[2]
local server = node:server(function(conn) conn:destroy() end, {
  max_handshakes = 1e9, max_handshakes_per_source = 1e9, max_pending = 1024, max_pending_per_source = 1e9,
})
local kp = dht.keypair(seed)
assert(server:listen(kp, 30000))
local _, port = node:address()
require("ludx.stdin").watch(function(line)
  if line == "cpu" then emit({ event = "cpu", ms = cpu_ms(), handshakes = server.stats.handshakes }) end
end)
emit({ event = "ready", port = port, publicKey = crypto.hex(kp.public_key) })
