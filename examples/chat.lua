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
local core = ludx.core

-- Lines from stdin, read by the loop, so peer messages print meanwhile.
local function stdin_lines()
  local ready = ludx.waiters()
  ludx.on_event(core.EV.LINE, function() ready:wake_all(true) end)
  local tty = core.line_start(ludx.ref({}))
  local function show(text) -- above the line being typed
    if tty then core.line_write(text .. "\n") else print(text) io.stdout:flush() end
  end
  local function next_line()
    while true do
      if tty then core.line_prompt("> ") end
      local line = core.line_take()
      if line == nil then return nil end -- end of input
      if type(line) == "string" then return line end
      ready:wait("stdin")
    end
  end
  return next_line, show
end

-- Prints what the peer says while our lines go out; ends on either side.
local function chat(conn, next_line, show)
  local listener = ludx.spawn("listen", function()
    while true do
      local text = conn:read()
      if not text then break end
      for line in text:gmatch("[^\n]+") do show("peer: " .. line) end
    end
    show("peer left")
  end)
  local typist = ludx.spawn("type", function()
    for line in next_line do
      if not conn:write(line .. "\n") then break end
    end
    conn:finish()
  end)
  listener:join()
  typist:cancel()
  conn:finish(1000)
  conn:close()
  core.line_stop()
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
  local next_line, show = stdin_lines()
  if key then
    chat(assert(node:connect(key)), next_line, show)
  else
    local kp = dht.keypair()
    local done = ludx.waiters()
    local server = node:server(function(conn)
      show("peer joined")
      chat(conn, next_line, show)
      done:wake_all(true)
    end)
    assert(server:listen(kp))
    show(crypto.hex(kp.public_key))
    done:wait("a chat")
    server:close({ fast = true })
  end
  node:destroy()
end

main() -- `ludx` runs this file as a task on its loop
