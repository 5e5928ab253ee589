-- A topic chat on ludx.swarm: everyone who joins the same room talks to
-- everyone else; each line typed goes to every peer.
--
--   ludx examples/chat.lua --bootstrap H:P [ROOM]   joins ROOM (default "lobby")
--   ludx examples/chat.lua                          two peers here, on a local DHT
--
-- The room's topic is BLAKE2b-256 of its name. On a connection each message
-- is one line of UTF-8 text ending in "\n" (examples/node/chat.js speaks
-- the same, with Node's hyperswarm). Ctrl-D (end of input) leaves.
local ludx = require "ludx"
local dht = require "ludx.dht"
local swarm = require "ludx.swarm"
local crypto = require "ludx.crypto"
local stdin = require "ludx.stdin"
local core = ludx.core

local MAX_LINE = 64 * 1024 -- a peer that sends a longer line is cut off

-- Peer lines print above the line being typed (on a terminal).
local function show(text)
  if require("ludx.progress").isatty(0) then
    core.line_write(text .. "\n")
  else
    print(text)
    io.stdout:flush()
  end
end

local function short(key)
  return crypto.hex(key):sub(1, 8)
end

-- Calls on_line(line) for each line the connection carries; returns at the end.
local function lines(conn, on_line)
  local buf = ""
  while true do
    local data = conn:read()
    if not data then return end
    buf = buf .. data
    for line in buf:gmatch("([^\n]*)\n") do on_line(line) end
    buf = buf:match("[^\n]*$")
    if #buf > MAX_LINE then return end
  end
end

local function main()
  local bootstrap, room
  for i = 1, #arg do
    if arg[i] == "--bootstrap" then bootstrap = arg[i + 1]
    elseif arg[i - 1] ~= "--bootstrap" then room = arg[i] end
  end
  room = room or "lobby"
  local topic = dht.hash(room)

  if not bootstrap then -- two peers in this process, a short scripted talk
    local tn = assert(dht.testnet(3))
    local alice = assert(swarm.new({ dht = assert(tn:create_node()) }))
    local bob = assert(swarm.new({ dht = assert(tn:create_node()) }))
    local heard = ludx.queue()
    alice:on_connection(function(conn)
      conn:write("hello bob\n")
      lines(conn, function(line) heard:put("alice hears: " .. line) end)
    end)
    bob:on_connection(function(conn)
      conn:write("hello alice\n")
      lines(conn, function(line) heard:put("bob hears: " .. line) end)
    end)
    assert(alice:join(topic):flushed())
    assert(bob:join(topic):flushed())
    local said = { heard:get(20000), heard:get(20000) }
    table.sort(said)
    for _, s in ipairs(said) do print(s) end
    alice:destroy()
    bob:destroy()
    tn:destroy()
    return
  end

  local sw = assert(swarm.new({ bootstrap = { bootstrap }, port = 0 }))
  local peers = {} -- conn -> true
  sw:on_connection(function(conn, info)
    local who = short(info.public_key)
    peers[conn] = true
    show(who .. " joined")
    lines(conn, function(line) show(who .. ": " .. line) end)
    peers[conn] = nil
    show(who .. " left")
  end)
  local typist = stdin.watch(function(line)
    for conn in pairs(peers) do conn:write(line .. "\n") end
  end, function() end)
  sw:join(topic)
  show("joined " .. room .. " as " .. short(sw.keypair.public_key))
  typist:join() -- until end of input
  sw:close(5000)
end

main() -- `ludx` runs this file as a task on its loop
