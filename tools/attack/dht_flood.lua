-- Measures a ludx DHT node (default caps) under the issue-13 attacks and
-- prints one line per figure. The node runs in this process; floods come
-- from spec/attack_dht_peer.lua in another ludx process.
--
--   build/ludx tools/attack/dht_flood.lua [SECONDS [PARTS]]
--
-- SECONDS per flood (default 5); PARTS a comma list of amplification,
-- floods, delayed, storage (default all). LUDX_LUA_DIR=<old tree>/lua
-- measures another version of the modules.
--
-- Figures: bytes back per byte sent for each command to a host that never
-- answers (amplification); a legitimate client's pings (20/s, from
-- 127.0.1.1) answered and p50/p99 during a ping flood over 200 ports of
-- 127.0.0.2, one from 20 /24s, and a forged-signature ANNOUNCE flood;
-- RSS and bytes stored under a 15 KB IMMUTABLE_PUT flood from 99 ports.
package.path = "spec/?.lua;" .. package.path
local ludx = require "ludx"
local udx = require "ludx.udx"
local dht = require "ludx.dht"
local msgs = require "ludx.dht.messages"
local compact = require "ludx.compact"
local U = require "hardening_util"

local SECS = tonumber(arg[1]) or 5
local BIN = os.getenv("LUDX_BIN") or "build/ludx"

local function out(fmt, ...)
  io.write(string.format(fmt, ...), "\n")
  io.flush()
end

local req = U.dht_request

local function persistent(node)
  for _ = 1, 500 do
    if node.h.persistent then return node.h.persistent end
    ludx.sleep(10)
  end
end

local function amplification()
  local tn = assert(dht.testnet(3, { timeout = 20000 }))
  local w = assert(tn:create_node())
  local put = assert(w:immutable_put(string.rep("i", 1000)))
  local kp = dht.keypair(string.rep("\5", 32))
  assert(w:mutable_put(kp, string.rep("m", 900), { seq = 1 }))
  local topic = dht.hash("amplified topic")
  for i = 1, 20 do assert(w:announce(topic, dht.keypair(string.rep(string.char(i), 32)))) end
  local _, port = tn.nodes[2]:address()
  for i, c in ipairs(U.amplification_cases(put.hash, kp.public_key, topic)) do
    local sent, got = U.amplification(port, c[2], "127.0.0." .. (10 + i), 100, 10, 10)
    out("amplification %-13s 100 requests %6d B sent %7d B back  %.1fx", c[1], sent, got, got / sent)
  end
  tn:destroy()
end

-- The peer's "done N" line (past the rest of its "ready" line).
local function done_line(p)
  for _ = 1, 3 do
    local l = p:read_line(60000)
    if not l or l:match("^done") then return l end
  end
end

local function legit_during(name, args, port, node)
  local process = require "ludx.process"
  local p = assert(process.spawn(BIN, args))
  assert(p:expect("ready", 60000, true))
  local sock = assert(udx.bind("127.0.1.1", 0))
  local sent_at, rtts = {}, {}
  local receiver = ludx.spawn("legit recv", function()
    while true do
      local d = sock:recv()
      if not d then return end
      local kind, m = msgs.decode(d)
      if kind == "response" and sent_at[m.tid] and not rtts[m.tid] then rtts[m.tid] = ludx.now() - sent_at[m.tid] end
    end
  end)
  local n = SECS * 20
  local cpu0 = os.clock()
  for i = 1, n do
    sent_at[i] = ludx.now()
    sock:send(req(port, { tid = i, internal = true, command = msgs.PING }), port, "127.0.0.1")
    ludx.sleep(50)
  end
  local cpu = os.clock() - cpu0
  ludx.sleep(1000)
  local line = done_line(p) or "?"
  p:wait(20000)
  p:close()
  sock:close()
  receiver:join()
  local list = {}
  for _, v in pairs(rtts) do list[#list + 1] = v end
  table.sort(list)
  local function pct(q) return list[math.max(1, math.ceil(q * #list))] or -1 end
  out("%s (%s): legit %d/%d answered (%.0f%%), p50 %d ms, p99 %d ms, node dropped %d, node CPU %.0f%%", name, line, #list, n,
    100 * #list / n, pct(0.5), pct(0.99), node.h.io.stats.flood_dropped, 100 * cpu / (n * 0.05))
end

local function floods()
  local node = assert(dht.bootstrapper(0, "127.0.0.1"))
  assert(node:ready(10000))
  local _, port = node:address()
  legit_during("ping flood, 200 ports of 127.0.0.2, 40000/s", { "spec/attack_dht_peer.lua", "ping", tostring(port), "127.0.0.2", "200",
    "40000", tostring(SECS * 1000) }, port, node)
  node:destroy()
  local hosts = {}
  for i = 1, 20 do hosts[i] = "127.0." .. (1 + i) .. ".1" end
  node = assert(dht.bootstrapper(0, "127.0.0.1"))
  assert(node:ready(10000))
  _, port = node:address()
  legit_during("ping flood, 20 /24s x 10 ports, 40000/s", { "spec/attack_dht_peer.lua", "ping", tostring(port), table.concat(hosts, ","),
    "10", "40000", tostring(SECS * 1000) }, port, node)
  node:destroy()
  node = assert(dht.bootstrapper(0, "127.0.0.1"))
  assert(node:ready(10000))
  _, port = node:address()
  local signing = require "ludx.dht.signing"
  local calls, verify = 0, signing.verify_announce
  signing.verify_announce = function(...)
    calls = calls + 1
    return verify(...)
  end
  legit_during("forged ANNOUNCE flood, 20 /24s x 10 ports, 10000/s", { "spec/attack_dht_peer.lua", "announce", tostring(port),
    table.concat(hosts, ","), "10", "10000", tostring(SECS * 1000) }, port, node)
  signing.verify_announce = verify
  out("  signature checks: %d in %d s", calls, SECS)
  node:destroy()
end

local function storage()
  collectgarbage("collect")
  local rss0 = U.rss()
  local node = assert(dht.bootstrapper(0, "127.0.0.1"))
  assert(node:ready(10000))
  local p = persistent(node)
  local _, port = node:address()
  local process = require "ludx.process"
  -- 99 ports of one host, then 99 ports spread over 33 hosts (quota aside)
  for _, spec in ipairs({ { "127.0.0.2", 99 }, { nil, 3 } }) do
    local hosts = spec[1]
    if not hosts then
      local l = {}
      for i = 1, 33 do l[i] = "127.0.0." .. (100 + i) end
      hosts = table.concat(l, ",")
    end
    local pr = assert(process.spawn(BIN, { "spec/attack_dht_peer.lua", "put", tostring(port), hosts, tostring(spec[2]), "3000",
      tostring(SECS * 2000) }))
    assert(pr:expect("ready", 60000, true))
    local peak = 0
    local t0 = ludx.now()
    while ludx.now() - t0 < SECS * 2000 + 500 do
      ludx.sleep(250)
      peak = math.max(peak, U.rss() or 0)
    end
    local line = done_line(pr) or "?"
    pr:wait(20000)
    pr:close()
    local stored = 0
    for _, g in ipairs({ p.immutables.latest, p.immutables.oldest }) do
      for _, v in pairs(g.map) do stored = stored + #v end
    end
    out("15 KB IMMUTABLE_PUT flood from %s (%s): stored %.1f MB, RSS %.0f -> peak %.0f MB", spec[1] and "99 ports of one host" or
      "33 hosts x 3 ports", line, stored / 1e6, (rss0 or 0) / 1e6, peak / 1e6)
  end
  node:destroy()
end

local function delayed()
  local node = assert(dht.bootstrapper(0, "127.0.0.1"))
  assert(node:ready(10000))
  local _, port = node:address()
  collectgarbage("collect")
  local rss0 = U.rss()
  local value = compact.encode(compact.uint32, 10000)
  local socks = {}
  for h = 1, 50 do socks[h] = assert(udx.bind("127.0.0." .. (150 + h), 0)) end
  for round = 1, 150 do
    for h = 1, 50 do socks[h]:send(req(port, { tid = round, internal = true, command = msgs.DELAYED_PING, value = value }), port, "127.0.0.1") end
    ludx.sleep(5)
  end
  ludx.sleep(300)
  local pending = 0
  for _ in pairs(node.h._pending_timers or {}) do pending = pending + 1 end
  out("DELAYED_PING flood, 7500 x 10 s from 50 hosts: %d pending, RSS +%.1f MB", pending, ((U.rss() or 0) - (rss0 or 0)) / 1e6)
  for _, s in ipairs(socks) do s:close() end
  node:destroy()
end

local parts = arg[2] or "amplification,floods,delayed,storage"
ludx.run(function()
  if parts:find("amplification") then amplification() end
  if parts:find("floods") then floods() end
  if parts:find("delayed") then delayed() end
  if parts:find("storage") then storage() end
end)
