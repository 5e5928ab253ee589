-- The ludx demo (`make run`): a local DHT in this process, a server peer and
-- a client. The client finds the server by its public key alone, connects
-- (a Noise handshake, then a SecretStream over a UDX stream), and the server
-- sends it 64 MB, encrypted, while a progress bar runs. Then the rate, a
-- hash check and the stream's stats at both ends.
local ludx = require "ludx"
local dht = require "ludx.dht"
local crypto = require "ludx.crypto"
local progress = require "ludx.progress"

local BLOCK = crypto.randombytes(1000000, string.rep("d", 32)) -- 1 MB, the same each run
local TOTAL = 64 * #BLOCK

local function main()
  local v = ludx.version()
  print(string.format("ludx %s on LuaJIT %s, libuv %s, libsodium %s", v.ludx, (v.luajit:gsub("^LuaJIT ", "")), v.libuv, v.libsodium))

  local testnet = assert(dht.testnet(5))
  print(string.format("a local DHT of %d nodes, bootstrap %s", #testnet.nodes, testnet.bootstrap[1]))
  local server_node = assert(testnet:create_node())
  local client_node = assert(testnet:create_node())

  -- the server: a key pair, and a task per connection that sends TOTAL bytes
  local keypair = dht.keypair()
  local sender_stats = ludx.queue() -- the server's task hands its stats over
  local server = server_node:server(function(conn)
    for _ = 1, TOTAL / #BLOCK do assert(conn:write(BLOCK)) end
    -- a graceful close: the END follows the last byte, and close returns
    -- once the client's stream has acknowledged everything
    assert(conn:close(30000))
    sender_stats:put(conn:stats())
  end)
  assert(server:listen(keypair))
  print("server listening as " .. crypto.hex(keypair.public_key))

  -- the client knows only the public key
  local t0 = ludx.now()
  local conn = assert(client_node:connect(keypair.public_key))
  print(string.format("client connected in %.1f ms (found through the DHT, Noise IK handshake)", ludx.now() - t0))

  local bar = progress.new({ label = "receiving" })
  local hash = ludx.core.hasher(32)
  local got = 0
  bar:start(TOTAL, 0)
  while true do
    local data = conn:read()
    if not data then break end
    hash:update(data)
    got = got + #data
    bar:update(#data)
  end
  bar:finish()

  local expect = ludx.core.hasher(32)
  for _ = 1, TOTAL / #BLOCK do expect:update(BLOCK) end
  assert(got == TOTAL, "received " .. got .. " bytes")
  assert(hash:hex() == expect:hex(), "the data does not match")
  local s = bar:state()
  print(string.format("%s in %.2f s: %.1f MB/s, encrypted (BLAKE2b of the data checks)", progress.bytes(got), s.seconds, got / s.seconds / 1e6))

  -- the reader sees the END as it arrives; the sender's finish returns once
  -- that END is acked, a moment later
  local st, tx = conn:stats(), sender_stats:get(5000) or {}
  print("stream stats:")
  print(string.format("  sender:   %d packets, %d retransmits, rtt %.3f ms (min %.3f), cwnd %d, mtu %d, bbr %s, pacing %.0f MB/s",
    tx.packets_sent or 0, tx.retransmits or 0, tx.rtt_ms or 0, tx.min_rtt_ms or 0, tx.cwnd or 0, tx.mtu or 0, tostring(tx.bbr_state), (tx.pacing_rate or 0) / 1e6))
  print(string.format("  receiver: %d packets, %d bytes on the wire, %d frames decrypted, %d acks sent, %d malformed",
    st.packets_received, st.bytes_received, st.frames_in, st.packets_sent, st.malformed))

  conn:close()
  server:close({ fast = true })
  testnet:destroy()
end

main() -- `ludx` runs this file as a task on its loop
