-- A hostile DHT peer for spec/attack_dht_spec.lua and tools/attack/dht_flood.lua,
-- run as its own ludx process (so the flood does not share the node's loop):
--
--   ludx spec/attack_dht_peer.lua MODE NODE_PORT HOSTS PORTS RATE MS
--
-- binds PORTS sockets on each host of HOSTS (comma-separated, e.g.
-- 127.0.0.2 or 127.0.2.1,127.0.3.1) and sends RATE requests per second
-- round-robin over them for MS milliseconds, then prints "done SENT" and
-- exits. MODE: "ping" (PINGs), "announce" (ANNOUNCEs with a valid token
-- and forged signatures; the token comes from one LOOKUP per host), "put"
-- (IMMUTABLE_PUTs of fresh 15 KB values, with a token). It
-- never answers anything. Prints "ready" once bound (and tokens held).
local ludx = require "ludx"
local udx = require "ludx.udx"
local msgs = require "ludx.dht.messages"
local compact = require "ludx.compact"
local hm = require "ludx.dht.hyperdht_messages"
local crypto = require "ludx.dht.crypto"

local mode, port = arg[1], tonumber(arg[2])
local rate, ms = tonumber(arg[5]), tonumber(arg[6])
local nports = tonumber(arg[4])
local LOOKUP, ANNOUNCE, IMMUTABLE_PUT = 3, 4, 8
local target = string.rep("\42", 32)

ludx.run(function()
  local socks = {}
  local tokens = {}
  for host in arg[3]:gmatch("[^,]+") do
    for _ = 1, nports do
      local s = assert(udx.bind(host, 0))
      socks[#socks + 1] = { s = s, host = host }
    end
  end
  if mode == "announce" or mode == "put" then
    for _, e in ipairs(socks) do
      if not tokens[e.host] then
        for try = 1, 20 do
          e.s:send(msgs.encode_request({ tid = try, to = { host = "127.0.0.1", port = port }, command = LOOKUP, target = target }), port,
            "127.0.0.1")
          local d = e.s:recv(500)
          local kind, m
          if d then kind, m = msgs.decode(d) end
          if kind == "response" and m.token then
            tokens[e.host] = m.token
            break
          end
        end
        assert(tokens[e.host], "no token for " .. e.host)
      end
    end
  end
  -- replies are read and dropped (a real attacker's victim would get them)
  for _, e in ipairs(socks) do
    ludx.spawn("drain", function()
      while e.s:recv() do end
    end).quiet = true
  end
  io.write("ready\n")
  io.flush()
  local sent, tid = 0, 0
  local start = ludx.now()
  local batch = math.max(1, math.floor(rate / 100)) -- one batch per 10 ms
  local i = 0
  while ludx.now() - start < ms do
    for _ = 1, batch do
      i = i % #socks + 1
      tid = (tid + 1) % 65536
      local e = socks[i]
      local buf
      if mode == "announce" then
        -- S below the group order, so libsodium does the full check
        local sig = crypto.random(63) .. string.char(math.random(0, 15))
        local ann = { peer = { public_key = crypto.random(32), relay_addresses = {} }, signature = sig }
        buf = msgs.encode_request({ tid = tid, to = { host = "127.0.0.1", port = port }, token = tokens[e.host], command = ANNOUNCE,
          target = target, value = compact.encode(hm.announce, ann) })
      elseif mode == "put" then
        local value = crypto.random(15 * 1024)
        buf = msgs.encode_request({ tid = tid, to = { host = "127.0.0.1", port = port }, token = tokens[e.host], command = IMMUTABLE_PUT,
          target = crypto.hash(value), value = value })
      else
        buf = msgs.encode_request({ tid = tid, to = { host = "127.0.0.1", port = port }, internal = true, command = msgs.PING })
      end
      if e.s:send(buf, port, "127.0.0.1") then sent = sent + 1 end
    end
    -- keep to the rate: sleep until this many should have gone
    local due = start + sent * 1000 / rate
    if due > ludx.now() then ludx.sleep(math.max(1, math.floor(due - ludx.now()))) end
  end
  io.write("done " .. sent .. "\n")
  io.flush()
  for _, e in ipairs(socks) do e.s:close() end
end)
