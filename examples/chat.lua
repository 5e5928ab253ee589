-- A chat between two peers over the DHT: each line typed goes to the other.
--
--   ludx examples/chat.lua --bootstrap H:P        opens a chat, prints its key
--   ludx examples/chat.lua --bootstrap H:P KEY    joins the chat of KEY
--   ludx examples/chat.lua                        two peers here, on a local DHT
--
-- Ctrl-D (end of input) leaves; the other side sees "left" and ends too.
local ludx = require "ludx"
local dht = require "ludx.dht"
local crypto = require "ludx.crypto"
local stdin = require "ludx.stdin"
local core = ludx.core

-- Peer lines print above the line being typed (on a terminal).
local function show(text)
  if require("ludx.progress").isatty(0) then
    core.line_write(text .. "\n")
  else
    print(text)
    io.stdout:flush()
  end
end

-- Prints what the peer says while our lines go out; ends on either side.
local function chat(conn)
  local listener = ludx.spawn("listen", function()
    while true do
      local text = conn:read()
      if not text then break end
      for line in text:gmatch("[^\n]+") do show("peer: " .. line) end
    end
    show("peer left")
  end)
  local typist = stdin.watch(function(line) conn:write(line .. "\n") end, function() conn:finish() end)
  listener:join()
  typist:cancel()
  conn:finish(1000)
  conn:close()
end

local function main()
  local bootstrap, key
  for i = 1, #arg do
    if arg[i] == "--bootstrap" then bootstrap = arg[i + 1]
    elseif arg[i - 1] ~= "--bootstrap" then key = crypto.unhex(arg[i]) end
  end
  if not bootstrap then -- two peers in this process, a short scripted talk
    local tn = assert(dht.testnet(3))
    local a, b = assert(tn:create_node()), assert(tn:create_node())
    local kp = dht.keypair()
    local server = a:server(function(conn)
      print("alice hears: " .. conn:read())
      conn:write("hello bob")
      conn:finish()
      conn:close()
    end)
    assert(server:listen(kp))
    local conn = assert(b:connect(kp.public_key))
    conn:write("hello alice")
    print("bob hears: " .. conn:read())
    conn:close()
    server:close()
    tn:destroy()
    return
  end

  local node = assert(dht.new({ bootstrap = { bootstrap }, port = 0 }))
  assert(node:ready())
  if key then
    chat(assert(node:connect(key)))
  else
    local kp = dht.keypair()
    local done = ludx.waiters()
    local server = node:server(function(conn)
      show("peer joined")
      chat(conn)
      done:wake_all(true)
    end)
    assert(server:listen(kp))
    print(crypto.hex(kp.public_key))
    io.stdout:flush()
    done:wait("a chat")
    server:close({ fast = true })
  end
  node:destroy()
end

main() -- `ludx` runs this file as a task on its loop
