-- The flooding peer of spec/attack_handshake_spec.lua, a separate ludx
-- process: sends valid Noise IK first messages (each a fresh ephemeral key,
-- so each costs the server a full handshake) to a ludx server's node at
-- RATE per second from SOCKETS source ports, for SECONDS, then stops.
--   ludx spec/attack_handshake_peer.lua PORT TARGET_HEX SERVER_PK_HEX RATE SECONDS SOCKETS MODE
-- MODE "direct": PEER_HANDSHAKE FROM_CLIENT to the server's node;
-- "relayed": FROM_RELAY (as if relayed, peer_address = a made-up client).
-- Prints "ready" when it starts sending, then "done <sent> <ms>".
local ludx = require "ludx"
local udx = require "ludx.udx"
local crypto = require "ludx.dht.crypto"
local compact = require "ludx.compact"
local hm = require "ludx.dht.hyperdht_messages"
local msgs = require "ludx.dht.messages"
local consts = require "ludx.dht.constants"

local port = assert(tonumber(arg[1]))
local function unhex(s)
  return (s:gsub("..", function(h) return string.char(tonumber(h, 16)) end))
end
local target = unhex(arg[2])
local server_pk = unhex(arg[3])
local rate = tonumber(arg[4] or "2000")
local seconds = tonumber(arg[5] or "5")
local nsockets = tonumber(arg[6] or "16")
local mode = arg[7] or "direct"

local socks = {}
for i = 1, nsockets do socks[i] = assert(udx.bind("127.0.0.1", 0)) end
local keys = {}
for i = 1, 8 do keys[i] = crypto.keypair() end

local n = 0
local function first_message()
  n = n + 1
  local noise = crypto.noise_ik(true, keys[n % #keys + 1], server_pk)
  local payload = compact.encode(hm.noise_payload, {
    error = consts.ERROR.NONE,
    firewall = consts.FIREWALL.UNKNOWN,
    addresses4 = {},
    udx = { reusable_socket = false, id = n % 4294967295 + 1, seq = 0 },
    secret_stream = {},
  })
  return assert(noise:send(payload))
end

local function request(msg1, tid)
  local value
  if mode == "relayed" then
    value = compact.encode(hm.handshake, { mode = hm.FROM_RELAY, noise = msg1, peer_address = { host = "127.0.0.1", port = 1024 + n % 60000 } })
  else
    value = compact.encode(hm.handshake, { mode = hm.FROM_CLIENT, noise = msg1 })
  end
  return msgs.encode_request({ tid = tid % 65536, to = { host = "127.0.0.1", port = port }, command = consts.COMMANDS.PEER_HANDSHAKE, target = target, value = value })
end

-- a short stock first, so the flood starts at full rate
local stock = {}
for i = 1, math.min(rate, 4000) do stock[i] = first_message() end

io.write("ready\n")
io.flush()
local t0 = ludx.now()
local sent = 0
while true do
  local elapsed = ludx.now() - t0
  if elapsed >= seconds * 1000 then break end
  local due = math.floor(rate * elapsed / 1000) - sent
  for _ = 1, math.min(due, 200) do
    local msg1 = table.remove(stock) or first_message()
    local s = socks[sent % nsockets + 1]
    s:send(request(msg1, sent), port, "127.0.0.1")
    sent = sent + 1
  end
  -- the replies are not read: drop what queued
  for _, s in ipairs(socks) do
    while s.h:take() do end
  end
  ludx.sleep(5)
end
io.write(string.format("done %d %d\n", sent, math.floor(ludx.now() - t0)))
io.flush()
for _, s in ipairs(socks) do s:close() end
