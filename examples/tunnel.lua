-- A TCP tunnel over ludx, as hypertele does: a TCP service on one machine
-- is reached through a local TCP port on another, over a DHT connection
-- (encrypted, found by public key, holepunched when needed).
--
--   ludx examples/tunnel.lua --bootstrap H:P server HOST:PORT   exposes HOST:PORT, prints the key
--   ludx examples/tunnel.lua --bootstrap H:P client KEY [PORT]  prints the local address to use
--   ludx examples/tunnel.lua                                    both ends here, to a TCP echo service
local ludx = require "ludx"
local dht = require "ludx.dht"
local tcp = require "ludx.tcp"
local crypto = require "ludx.crypto"

-- Copies one way until the end, then ends that way on the other side.
local function pump(from, to)
  while true do
    local data = from:read()
    if not data or not to:write(data) then break end
  end
  to:finish(5000)
end

-- Joins two streams (TCP and DHT connections have the same API).
local function splice(a, b)
  local other_way = ludx.spawn("tunnel pump", pump, b, a)
  pump(a, b)
  other_way:join()
  a:close()
  b:close()
end

local function serve(node, host, port)
  local keypair = dht.keypair()
  local server = node:server(function(conn)
    local service = tcp.connect(host, port, 5000)
    if not service then return conn:close() end
    splice(conn, service)
  end)
  assert(server:listen(keypair))
  return keypair.public_key, server
end

-- Listens on 127.0.0.1:port; each TCP client gets its own DHT connection.
local function listen(node, key, port)
  local listener = assert(tcp.listen("127.0.0.1", port or 0))
  ludx.spawn("tunnel listener", function()
    while true do
      local client = listener:accept()
      if not client then break end
      ludx.spawn("tunnel", function()
        local conn = node:connect(key)
        if not conn then return client:close() end
        splice(client, conn)
      end)
    end
  end)
  return listener
end

local function main()
  local bootstrap, words = nil, {}
  for i = 1, #arg do
    if arg[i] == "--bootstrap" then bootstrap = arg[i + 1]
    elseif arg[i - 1] ~= "--bootstrap" then words[#words + 1] = arg[i] end
  end
  local role = words[1]
  local testnet
  if not bootstrap then
    testnet = assert(dht.testnet(3))
    bootstrap = testnet.bootstrap[1]
  end
  local node = assert(dht.new({ bootstrap = { bootstrap }, port = 0 }))
  assert(node:ready())

  if role == "server" then
    local host, port = words[2]:match("^(.*):(%d+)$")
    -- until Ctrl-C or SIGTERM, waited for from before the key is printed
    -- (whoever reads it may signal at once); then unannounce, close, exit
    local stop = ludx.spawn("stop", ludx.signal, { "SIGINT", "SIGTERM" })
    local key, server = serve(node, host, tonumber(port))
    ludx.yield()
    print(crypto.hex(key))
    io.stdout:flush()
    stop:join()
    server:close()
    node:destroy()
    return
  elseif role == "client" then
    local stop = ludx.spawn("stop", ludx.signal, { "SIGINT", "SIGTERM" })
    local listener = listen(node, crypto.unhex(words[2]), tonumber(words[3]))
    ludx.yield()
    local _, port = listener:address()
    print("127.0.0.1:" .. port)
    io.stdout:flush()
    stop:join()
    listener:close()
    node:destroy()
    return
  end

  -- both ends here: a TCP echo service, the tunnel, and a TCP client
  local service = assert(tcp.listen("127.0.0.1", 0))
  ludx.spawn("echo service", function()
    local c = service:accept()
    while true do
      local data = c:read()
      if not data then break end
      c:write(data)
    end
    c:finish()
    c:close()
  end)
  local _, service_port = service:address()
  local key, server = serve(node, "127.0.0.1", service_port)
  local other = assert(dht.new({ bootstrap = { bootstrap }, port = 0 }))
  assert(other:ready())
  local listener = listen(other, key)
  local _, port = listener:address()
  local c = assert(tcp.connect("127.0.0.1", port))
  c:write("ping through the tunnel")
  print("reply: " .. c:read(nil, 10000))
  c:close()
  listener:close()
  server:close({ fast = true })
  service:close()
  other:destroy()
  node:destroy()
  testnet:destroy()
end

main() -- `ludx` runs this file as a task on its loop
