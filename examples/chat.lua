-- A topic chat on ludx.swarm + ludx.protomux: everyone who joins the same
-- room talks to everyone else; each line typed goes to every peer.
--
--   ludx examples/chat.lua --bootstrap H:P [ROOM]   joins ROOM (default "lobby")
--   ludx examples/chat.lua                          two peers here, on a local DHT
--
-- A Node peer in the same room (npm hyperswarm 4 + protomux 3, as installed
-- for the interop tests by `make node-deps`):
--   NODE_PATH=spec/interop/node_modules node examples/node/chat.js --bootstrap H:P [ROOM]
--
--   --nick NAME   sent to the peers in the handshake (default: none)
--
-- The protocol (examples/node/chat.js speaks the same, with Node's
-- hyperswarm and protomux): the room's topic is BLAKE2b-256 of its name. On
-- each swarm connection both sides open one protomux channel, protocol
-- "ludx-chat/1", no id; its handshake is a compact-encoding string (the
-- nickname, or empty) and it has one message type, a compact-encoding string:
-- one chat line, without its newline. A receiver keeps at most 64 KiB of a
-- line; a frame much longer ends the connection. Closing the channel leaves
-- the chat with that peer. Ctrl-D (end of input), Ctrl-C or SIGTERM leaves.
local ludx = require "ludx"
local dht = require "ludx.dht"
local swarm = require "ludx.swarm"
local crypto = require "ludx.crypto"
local stdin = require "ludx.stdin"
local protomux = require "ludx.protomux"
local compact = require "ludx.compact"
local core = ludx.core

local PROTOCOL = "ludx-chat/1"
local MAX_LINE = 64 * 1024 -- bytes of a line kept (sent and shown)
local MAX_FRAME = MAX_LINE + 4096 -- a longer protomux frame ends the connection

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

-- Opens the chat channel on a swarm connection: the channel and the remote's
-- nickname and the mux once both sides opened it, or nil (the mux and
-- connection end).
local function open_chat(conn, nick)
  local mux = protomux.from(conn, { max_message_size = MAX_FRAME })
  local ch = mux:channel({ protocol = PROTOCOL, handshake = compact.string, messages = { compact.string } })
  if ch and ch:open(nick or "") then
    local their_nick = ch:opened(30000)
    if their_nick then return ch, their_nick, mux end
  end
  mux:destroy()
  return nil
end

-- Calls on_line(line) for each chat line of the channel; returns once it closed.
local function lines(ch, on_line)
  while true do
    local i, line = ch:recv()
    if not i then return end
    if i == 1 then on_line(line:sub(1, MAX_LINE)) end
  end
end

local function say(ch, line)
  return ch:send(1, line:sub(1, MAX_LINE))
end

local function main()
  local bootstrap, room, nick
  for i = 1, #arg do
    if arg[i] == "--bootstrap" then bootstrap = arg[i + 1]
    elseif arg[i] == "--nick" then nick = arg[i + 1]
    elseif arg[i - 1] ~= "--bootstrap" and arg[i - 1] ~= "--nick" then room = arg[i] end
  end
  room = room or "lobby"
  local topic = dht.hash(room)

  if not bootstrap then -- two peers in this process, a short scripted talk
    local tn = assert(dht.testnet(3))
    local alice = assert(swarm.new({ dht = assert(tn:create_node()) }))
    local bob = assert(swarm.new({ dht = assert(tn:create_node()) }))
    local heard = ludx.queue()
    alice:on_connection(function(conn)
      local ch = open_chat(conn, "alice")
      if not ch then return end
      say(ch, "hello bob")
      lines(ch, function(line) heard:put("alice hears: " .. line) end)
    end)
    bob:on_connection(function(conn)
      local ch = open_chat(conn, "bob")
      if not ch then return end
      say(ch, "hello alice")
      lines(ch, function(line) heard:put("bob hears: " .. line) end)
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
  local peers = {} -- channel -> true, once open on both sides
  sw:on_connection(function(conn, info)
    local who = short(info.public_key)
    local ch, their_nick, mux = open_chat(conn, nick)
    if not ch then return end
    peers[ch] = true
    show(who .. " joined" .. (their_nick ~= "" and " (" .. their_nick .. ")" or ""))
    lines(ch, function(line) show(who .. ": " .. line) end)
    peers[ch] = nil
    mux:destroy()
    show(who .. " left")
  end)
  -- leave at the end of input (Ctrl-D), on Ctrl-C or on SIGTERM: unannounce,
  -- close, exit 0
  local stop = ludx.queue()
  local signals = ludx.spawn("stop", function() stop:put(ludx.signal({ "SIGINT", "SIGTERM" })) end)
  local typist = stdin.watch(function(line)
    for ch in pairs(peers) do say(ch, line) end
  end, function() stop:put("end of input") end)
  ludx.yield() -- the signal wait is in place before anyone can see us join
  sw:join(topic)
  show("joined " .. room .. " as " .. short(sw.keypair.public_key))
  local why = stop:get()
  if why ~= "end of input" then io.stderr:write("chat: ", why, ", leaving\n") end
  signals:cancel()
  typist:cancel()
  sw:close(5000)
end

main() -- `ludx` runs this file as a task on its loop
