-- Hostile peers against the handshake and relay paths (issue 13), over
-- real loopback sockets:
-- - relay paths (PEER_HANDSHAKE / PEER_HOLEPUNCH FROM_CLIENT, FROM_SERVER,
--   relay_address, peer_address) aimed at a third party send it nothing;
-- - a flood of valid Noise IK first messages keeps pending handshakes and
--   puncher sockets bounded, remembers nothing for failed ones, and a
--   legitimate client still connects.
local ludx = require "ludx"
local udx = require "ludx.udx"
local dht = require "ludx.dht"
local msgs = require "ludx.dht.messages"
local compact = require "ludx.compact"
local hm = require "ludx.dht.hyperdht_messages"
local consts = require "ludx.dht.constants"
local H = require "helper"
local run = H.run

local C = consts.COMMANDS
local LOCAL = "127.0.0.1"

local function request(tid, port, command, target, value)
  return msgs.encode_request({ tid = tid % 65536, to = { host = LOCAL, port = port }, command = command, target = target, value = value })
end

-- Packets a socket got within ms.
local function drain(sock, ms)
  local n, bytes = 0, 0
  local deadline = ludx.now() + ms
  while ludx.now() < deadline do
    local d = sock:recv(math.max(1, deadline - ludx.now()))
    if d then
      n = n + 1
      bytes = bytes + #d
    end
  end
  return n, bytes
end

-- A ping round trip from sock: everything sock sent before was handled.
local function sync(sock, port, tid)
  assert(sock:send(msgs.encode_request({ tid = tid, to = { host = LOCAL, port = port }, internal = true, command = msgs.PING }), port, LOCAL))
  local deadline = ludx.now() + 10000
  while ludx.now() < deadline do
    local d = sock:recv(deadline - ludx.now())
    if d and d:byte(1) == msgs.RESPONSE_ID then
      local _, m = msgs.decode(d)
      if m and m.tid == tid then return true end
    end
  end
  error("no ping reply")
end

describe("relay paths aimed at a third party", function()
  it("send the third party nothing", run(function()
    local tn = assert(dht.testnet(3, { timeout = 20000 }))
    -- a server announced on the testnet, so the nodes hold forward entries
    local sn = assert(tn:create_node())
    local server = sn:server(function(conn) conn:close() end)
    local kp = dht.keypair(string.rep("\7", 32))
    assert(server:listen(kp, 20000))
    local target = dht.hash(kp.public_key)
    local attacker = assert(udx.bind(LOCAL, 0))
    local victim = assert(udx.bind(LOCAL, 0))
    local _, vport = victim:address()
    local va = { host = LOCAL, port = vport }
    local noise = string.rep("n", 1200) -- a big payload, as the attack used
    local sent = 0
    for i, node in ipairs(tn.nodes) do
      local _, port = node:address()
      for j = 1, 25 do
        local tid = i * 1000 + j * 8
        local t = j % 2 == 0 and target or dht.hash("random " .. j)
        local reqs = {
          request(tid, port, C.PEER_HANDSHAKE, t, compact.encode(hm.handshake, { mode = hm.FROM_CLIENT, noise = noise, relay_address = va })),
          request(tid + 1, port, C.PEER_HANDSHAKE, t, compact.encode(hm.handshake, { mode = hm.FROM_SERVER, noise = noise, peer_address = va })),
          request(tid + 2, port, C.PEER_HOLEPUNCH, t, compact.encode(hm.holepunch, { mode = hm.FROM_CLIENT, id = 0, payload = noise, peer_address = va })),
          request(tid + 3, port, C.PEER_HOLEPUNCH, t, compact.encode(hm.holepunch, { mode = hm.FROM_SERVER, id = 0, payload = noise, peer_address = va })),
          request(tid + 4, port, C.PEER_HANDSHAKE, t, compact.encode(hm.handshake, { mode = hm.FROM_SECOND_RELAY, noise = noise, peer_address = va, relay_address = va })),
        }
        for _, r in ipairs(reqs) do
          assert(attacker:send(r, port, LOCAL))
          sent = sent + 1
        end
      end
      sync(attacker, port, 60000 + i)
    end
    local _, sport = sn:address()
    sync(attacker, sport, 61000)
    local n, bytes = drain(victim, 300)
    io.stderr:write(string.format("  [relay] %d relay requests aimed at a third party: it got %d packets, %d bytes\n", sent, n, bytes))
    assert.are.equal(0, n)
    attacker:close()
    victim:close()
    server:close({ fast = true })
    sn:destroy()
    tn:destroy()
  end, 60000))
end)
