-- One role of the NAT holepunching spec (spec/dht_nat_spec.lua), run inside
-- a network namespace of spec/nat/lab.sh:
--   ludx spec/nat/peer.lua testnet HOST             DHT nodes on HOST
--   ludx spec/nat/peer.lua server BOOTSTRAP         echo server, key seed 1
--   ludx spec/nat/peer.lua client BOOTSTRAP PUBKEY  connects, echoes 1 MB
-- JSON lines on stdout; exits when stdin closes.
local ludx = require "ludx"
local dht = require "ludx.dht"
local json = require "ludx.json"
local crypto = require "ludx.crypto"

local role, a, b = ...

local function emit(t)
  io.stdout:write(json.encode(t), "\n")
  io.stdout:flush()
end

local core = ludx.core

-- stdin closing (the spec is done or gone) ends the process
require("ludx.stdin").watch(function() end, function() os.exit(0) end)

if role == "testnet" then
  local net = assert(dht.testnet(5, { host = a, timeout = 30000 }))
  emit({ event = "ready", bootstrap = net.bootstrap })
elseif role == "server" then
  local node = assert(dht.new({ bootstrap = { a }, host = "0.0.0.0", port = 0 }))
  assert(node:ready(30000))
  local kp = dht.keypair(string.rep("\1", 32))
  local server = node:server(function(conn)
    local raw = conn.raw
    emit({ event = "connection", remote = { raw:remote_address() } })
    while true do
      local data = conn:read(nil, 30000)
      if not data then break end
      assert(conn:write(data))
    end
    conn:finish(10000)
  end)
  assert(server:listen(kp))
  emit({ event = "listening", public_key = crypto.hex(kp.public_key), firewalled = node:is_firewalled() })
elseif role == "client" then
  local node = assert(dht.new({ bootstrap = { a }, host = "0.0.0.0", port = 0 }))
  assert(node:ready(30000))
  local conn, msg, code = node:connect(crypto.unhex(b), { timeout = 30000 })
  if not conn then
    emit({ event = "done", ok = false, code = code, message = msg })
    os.exit(1)
  end
  local remote_host, remote_port = conn.raw:remote_address()
  local payload = core.datagen(5):next(1024 * 1024)
  ludx.spawn("writer", function()
    assert(conn:write(payload))
    assert(conn:finish(30000))
  end)
  local parts = {}
  while true do
    local data = conn:read(nil, 30000)
    if not data then break end
    parts[#parts + 1] = data
  end
  emit({ event = "done", ok = table.concat(parts) == payload, bytes = #table.concat(parts),
    remote_host = remote_host, remote_port = remote_port, firewalled = node:is_firewalled() })
  conn:close()
  node:destroy()
  os.exit(0)
end
