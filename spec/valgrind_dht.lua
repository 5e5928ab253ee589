-- Run by spec/hardening_valgrind_spec.lua in the ludx executable under
-- valgrind: a 3-node testnet, a server announced through it, a client that
-- connects by public key (Noise IK through a relay, then UDX + SecretStream)
-- and echoes 64 KiB; everything destroyed. Prints "ok" at the end.
local dht = require "ludx.dht"
local tn = assert(dht.testnet(3, { timeout = 120000 }))
local snode = assert(tn:create_node())
local cnode = assert(tn:create_node())
local kp = dht.keypair(string.rep("\1", 32))
local server = snode:server(function(conn)
  while true do
    local data = conn:read(nil, 60000)
    if not data then break end
    conn:write(data)
  end
  conn:finish(20000)
  conn:close()
end)
assert(server:listen(kp, 120000))
local conn = assert(cnode:connect(kp.public_key, { timeout = 120000 }))
local payload = string.rep("valgrind", 8192)
assert(conn:write(payload))
local got, n = {}, 0
while n < #payload do
  local chunk = assert(conn:read(nil, 60000))
  got[#got + 1] = chunk
  n = n + #chunk
end
assert(table.concat(got) == payload, "echo differs")
conn:close()
server:close()
snode:destroy()
cnode:destroy()
tn:destroy()
print("ok")
