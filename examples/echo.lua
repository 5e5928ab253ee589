-- An echo server and its client, connected by public key over the DHT.
--
--   ludx examples/echo.lua                              both ends here, on a local DHT
--   ludx examples/echo.lua --bootstrap H:P server       prints its key; echoes until Ctrl-C
--   ludx examples/echo.lua --bootstrap H:P client KEY [WORDS...]
local ludx = require "ludx"
local dht = require "ludx.dht"
local crypto = require "ludx.crypto"

-- The server runs this as a task for each connection.
local function echo(conn)
  while true do
    local data = conn:read()
    if not data then break end -- the client finished
    conn:write(data)
  end
  conn:close() -- END after the last echo; returns once it is acknowledged
end

local function client(node, key, words)
  local conn = assert(node:connect(key))
  for _, word in ipairs(words) do
    assert(conn:write(word))
    print("echo: " .. assert(conn:read(nil, 5000)))
  end
  conn:close()
end

local function main()
  local bootstrap, role, key = nil, nil, nil
  local words = {}
  local i = 1
  while arg[i] do
    if arg[i] == "--bootstrap" then bootstrap, i = arg[i + 1], i + 1
    elseif not role then role = arg[i]
    elseif role == "client" and not key then key = crypto.unhex(arg[i])
    else words[#words + 1] = arg[i] end
    i = i + 1
  end
  if #words == 0 then words = { "hello", "ludx" } end

  local testnet
  if not bootstrap then -- a local DHT in this process
    testnet = assert(dht.testnet(3))
    bootstrap = testnet.bootstrap[1]
  end
  local node = assert(dht.new({ bootstrap = { bootstrap }, port = 0 }))
  assert(node:ready())

  if role == "client" then
    client(node, key, words)
  else
    local keypair = dht.keypair()
    local server = node:server(echo)
    -- wait for Ctrl-C or SIGTERM from before the key is printed: whoever
    -- reads the key may signal at once
    local stop = role == "server" and ludx.spawn("stop", ludx.signal, { "SIGINT", "SIGTERM" })
    assert(server:listen(keypair))
    print(crypto.hex(keypair.public_key))
    io.stdout:flush()
    if stop then
      -- then unannounce, close and exit
      local sig = stop:join()
      io.stderr:write("echo: ", sig, ", stopping\n")
      server:close() -- unannounces the key
      node:destroy()
      return
    end
    -- both ends in this process: a second node connects by key
    local other = assert(dht.new({ bootstrap = { bootstrap }, port = 0 }))
    assert(other:ready())
    client(other, keypair.public_key, words)
    other:destroy()
    server:close()
  end
  node:destroy()
  if testnet then testnet:destroy() end
end

main() -- `ludx` runs this file as a task on its loop
