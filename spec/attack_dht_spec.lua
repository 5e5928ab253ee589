-- Hostile peers against a real ludx DHT node over loopback (issue 13, DHT
-- node): reflection/amplification, storage floods, request floods spread
-- over many ports, forged-signature ANNOUNCE floods, DELAYED_PING floods.
-- Each case sends a short, bounded flood and asserts the bound. Hosts
-- 127.0.0.x / 127.0.x.1 all route on loopback: a host that never answers
-- models a spoofed victim address.
local ludx = require "ludx"
local udx = require "ludx.udx"
local dht = require "ludx.dht"
local msgs = require "ludx.dht.messages"
local compact = require "ludx.compact"
local signing = require "ludx.dht.signing"
local crypto = require "ludx.dht.crypto"
local H = require "helper"
local run = H.run

local C = { LOOKUP = 3, ANNOUNCE = 4, MUTABLE_GET = 7, IMMUTABLE_PUT = 8, IMMUTABLE_GET = 9 }

local function say(fmt, ...)
  io.stderr:write("  [attack dht] ", string.format(fmt, ...), "\n")
end

local U = require "hardening_util"
local req = U.dht_request

-- Reads what sock gets until it is quiet for quiet_ms; returns bytes,
-- datagrams and the list of decoded responses.
local function drain(sock, quiet_ms)
  local bytes, n, list = 0, 0, {}
  while true do
    local d = sock:recv(quiet_ms)
    if not d then break end
    bytes, n = bytes + #d, n + 1
    local kind, m = msgs.decode(d)
    if kind == "response" then list[#list + 1] = m end
  end
  return bytes, n, list
end

local function persistent(node)
  for _ = 1, 200 do
    if node.h.persistent then return node.h.persistent end
    ludx.sleep(10)
  end
  error("node never became persistent")
end

-- A token for sock's host from the node (an IMMUTABLE_GET reply carries one).
local function token_for(sock, port)
  for try = 1, 20 do
    sock:send(req(port, { tid = 60000 + try, command = C.IMMUTABLE_GET, target = string.rep("\1", 32) }), port, "127.0.0.1")
    local d = sock:recv(500)
    local kind, m
          if d then kind, m = msgs.decode(d) end
    if kind == "response" and m.token then return m.token end
  end
  error("no token")
end

local function gen_bytes(g)
  local n = 0
  for _, v in pairs(g.map) do n = n + #v end
  return n
end

describe("DHT node under attack", function()
  it("replies to a host that never proved it receives stay within 3x of its requests; a real client still gets values",
    run(function()
      local tn = assert(dht.testnet(3, { timeout = 20000 }))
      local writer = assert(tn:create_node())
      local big = string.rep("i", 1000)
      local put = assert(writer:immutable_put(big))
      local kp = dht.keypair(string.rep("\5", 32))
      assert(writer:mutable_put(kp, string.rep("m", 900), { seq = 1 }))
      local topic = dht.hash("amplified topic")
      for i = 1, 20 do assert(writer:announce(topic, dht.keypair(string.rep(string.char(i), 32)))) end
      -- the node under attack: one that stores the values and the records
      local node = tn.nodes[2]
      local p = persistent(node)
      assert(p.immutables:get(put.hash), "value stored")
      local _, port = node:address()
      for i, c in ipairs(U.amplification_cases(put.hash, kp.public_key, topic)) do
        -- each "victim" is its own host that never answers
        local sent, got = U.amplification(port, c[2], "127.0.0." .. (10 + i), 25, 5, 20)
        say("%-13s 25 requests, %d bytes sent, %d bytes back: %.1fx", c[1], sent, got, got / sent)
        assert.is_true(got <= 3 * sent, c[1] .. " amplified " .. got .. "/" .. sent)
      end
      -- a client on its own host that answers (a real node) still reads
      -- both values from this network: its retry follows our probe
      local client = assert(dht.new({ bootstrap = tn.bootstrap, host = "127.0.0.20", port = 0, ephemeral = true, firewalled = false }))
      assert(client:ready(20000))
      assert.are.equal(big, (client:immutable_get(put.hash, { timeout = 20000 })))
      local got = assert(client:mutable_get(kp.public_key, { timeout = 20000 }))
      assert.are.equal(string.rep("m", 900), got.value)
      local found = 0
      for reply in client:lookup(topic, { timeout = 20000 }) do found = math.max(found, #reply.peers) end
      assert.are.equal(20, found)
      client:destroy()
      tn:destroy()
    end, 180000))

  it("a 15 KB IMMUTABLE_PUT flood from 40 hosts stays within the byte budget", run(function()
    local budget = 2 * 1024 * 1024
    local node = assert(dht.bootstrapper(0, "127.0.0.1", { max_store_bytes = budget, max_store_bytes_per_host = 1024 * 1024 * 1024 }))
    assert(node:ready(10000))
    local p = persistent(node)
    local _, port = node:address()
    collectgarbage("collect")
    local heap0 = collectgarbage("count") * 1024
    local rss0 = U.rss()
    local acks, sent = 0, 0
    for h = 1, 40 do
      local sock = assert(udx.bind("127.0.0." .. (100 + h), 0))
      local token = token_for(sock, port)
      for i = 1, 25 do
        local value = crypto.random(15 * 1024)
        assert(sock:send(req(port, { tid = i, token = token, command = C.IMMUTABLE_PUT, target = dht.hash(value), value = value }), port,
          "127.0.0.1"))
        sent = sent + 1
      end
      local _, n = drain(sock, 100)
      acks = acks + n
      sock:close()
    end
    local stored = gen_bytes(p.immutables.latest) + gen_bytes(p.immutables.oldest)
    collectgarbage("collect")
    local heap = collectgarbage("count") * 1024 - heap0
    local rss = (U.rss() or 0) - (rss0 or 0)
    say("%d x 15 KB puts from 40 hosts (%d acked): %d KB stored (budget %d KB), Lua heap +%d KB, RSS +%d KB", sent, acks,
      math.floor(stored / 1024), math.floor(budget / 1024), math.floor(heap / 1024), math.floor(rss / 1024))
    assert.is_true(acks >= 100, "the node stored nothing at all")
    assert.is_true(stored <= budget, "stored " .. stored)
    assert.is_true(heap <= budget + 4 * 1024 * 1024, "heap grew " .. heap)
    node:destroy()
  end, 180000))

  it("one host writing from 99 ports is held to its quota; another host still stores", run(function()
    local quota = 256 * 1024
    local node = assert(dht.bootstrapper(0, "127.0.0.1", { max_store_bytes_per_host = quota }))
    assert(node:ready(10000))
    local p = persistent(node)
    local _, port = node:address()
    local token
    for s = 1, 99 do
      local sock = assert(udx.bind("127.0.0.30", 0))
      token = token or token_for(sock, port)
      for i = 1, 4 do
        local value = crypto.random(15 * 1024)
        assert(sock:send(req(port, { tid = i, token = token, command = C.IMMUTABLE_PUT, target = dht.hash(value), value = value }), port,
          "127.0.0.1"))
      end
      if s % 10 == 0 then ludx.sleep(20) end
      sock:close()
    end
    ludx.sleep(200)
    local stored = gen_bytes(p.immutables.latest) + gen_bytes(p.immutables.oldest)
    say("396 x 15 KB puts from 99 ports of one host: %d KB stored (quota %d KB)", math.floor(stored / 1024), math.floor(quota / 1024))
    assert.is_true(stored <= quota, "stored " .. stored)
    local other = assert(udx.bind("127.0.0.31", 0))
    local value = "another host's value"
    other:send(req(port, { tid = 7, token = token_for(other, port), command = C.IMMUTABLE_PUT, target = dht.hash(value), value = value }), port,
      "127.0.0.1")
    assert.is_truthy(other:recv(2000))
    assert.are.equal(value, p.immutables:get(dht.hash(value)))
    other:close()
    node:destroy()
  end, 180000))

  it("a DELAYED_PING flood pends at most the caps", run(function()
    local node = assert(dht.bootstrapper(0, "127.0.0.1", { max_delayed_pings = 100, max_delayed_pings_per_host = 8 }))
    assert(node:ready(10000))
    local _, port = node:address()
    local value = compact.encode(compact.uint32, 10000)
    for h = 1, 20 do
      local sock = assert(udx.bind("127.0.0." .. (40 + h), 0))
      for i = 1, 100 do
        assert(sock:send(req(port, { tid = i, internal = true, command = msgs.DELAYED_PING, value = value }), port, "127.0.0.1"))
      end
      ludx.sleep(10)
      sock:close()
    end
    ludx.sleep(200)
    local pending = 0
    for _ in pairs(node.h._pending_timers or {}) do pending = pending + 1 end
    say("2000 DELAYED_PINGs of 10 s from 20 hosts: %d pending (caps 100 in all, 8 per host)", pending)
    assert.is_true(pending <= 100, "pending " .. pending)
    assert.is_true(pending >= 8)
    node:destroy()
  end, 30000))

  it("responses to no request of ours are dropped before decoding", run(function()
    local node = assert(dht.bootstrapper(0, "127.0.0.1"))
    assert(node:ready(10000))
    local _, port = node:address()
    local decode, calls = msgs.decode, 0
    msgs.decode = function(...)
      calls = calls + 1
      return decode(...)
    end
    local sock = assert(udx.bind("127.0.0.60", 0))
    local closer = {}
    for i = 1, 20 do closer[i] = { host = "10.0.0." .. i, port = 1000 + i } end
    local inflight = node.h.io.inflight
    local sent = 0
    for tid = 1, 2000 do
      if not inflight[tid] then
        sent = sent + 1
        sock:send(msgs.encode_response({ tid = tid, to = { host = "127.0.0.1", port = port }, closer_nodes = closer }), port, "127.0.0.1")
      end
      if tid % 100 == 0 then ludx.sleep(5) end
    end
    ludx.sleep(200)
    msgs.decode = decode
    say("%d unsolicited responses: %d decoded", sent, calls)
    assert.is_true(calls <= 10, "decoded " .. calls)
    sock:close()
    node:destroy()
  end, 30000))

  it("address prefixes: IPv4 /24, IPv6 /48 (mapped IPv4 as IPv4)", function()
    local prefix = require("ludx.dht.io").prefix
    assert.are.equal("1.2.3", prefix("1.2.3.4"))
    assert.are.equal("1.2.3", prefix("::ffff:1.2.3.4"))
    assert.are.equal("2001:db8:1", prefix("2001:db8:1:2::5"))
    assert.are.equal("2001:db8:1", prefix("2001:db8:1:2:3:4:5:6"))
    assert.are.equal("2001:db8:0", prefix("2001:DB8::1"))
    assert.are.equal("0:0:0", prefix("::1"))
  end)

  it("a LOOKUP of a name with many records costs what it returns, not what is stored", function()
    local cache = require "ludx.dht.cache"
    local env = { now = function() return 0 end }
    local r = cache.records({ env = env, max_age = 0 })
    for i = 1, 100000 do r:add("topic", "id" .. i, "record" .. (i % 7 == 0 and "x" or "")) end
    for i = 1, 5 do r:add("small", "id" .. i, "r" .. i) end
    local rand = require("ludx.dht.sim").rng(7)
    -- distinct records, all of them when fewer than asked
    local seen = {}
    for _, v in ipairs(r:get("small", 20, rand)) do seen[v] = true end
    assert.are.equal(5, #r:get("small", 20, rand))
    for i = 1, 5 do assert.is_true(seen["r" .. i]) end
    collectgarbage("collect")
    collectgarbage("stop")
    local before = collectgarbage("count")
    local got = r:get("topic", 20, rand)
    local kb = collectgarbage("count") - before
    collectgarbage("restart")
    say("20 of 100000 records under one name: %.1f KB allocated", kb)
    assert.are.equal(20, #got)
    assert.is_true(kb < 64, "allocated " .. kb .. " KB")
  end)

  -- A legitimate client pinging 20/s from its own /24 while a flood runs
  -- in another process; returns answered, sent, p50, p99 (ms).
  -- The peer's "done N" line (past the rest of its "ready" line).
local function done_line(p)
  for _ = 1, 3 do
    local l = p:read_line(60000)
    if not l or l:match("^done") then return l end
  end
end

local function legit_during(flood_args, port)
    local process = require "ludx.process"
    local p = assert(process.spawn(H.ludx_bin, flood_args))
    assert(p:expect("ready", 30000, true))
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
    local n = 60
    for i = 1, n do
      sent_at[i] = ludx.now()
      sock:send(req(port, { tid = i, internal = true, command = msgs.PING }), port, "127.0.0.1")
      ludx.sleep(50)
    end
    ludx.sleep(1000)
    local out = done_line(p)
    p:wait(10000)
    p:close()
    sock:close()
    receiver:join()
    local list = {}
    for _, v in pairs(rtts) do list[#list + 1] = v end
    table.sort(list)
    local function pct(q) return list[math.max(1, math.ceil(q * #list))] or -1 end
    return #list, n, pct(0.5), pct(0.99), out
  end

  it("a ping flood spread over 200 ports of one /24 does not starve a client from another /24", run(function()
    -- caps scaled down so that a loaded machine still floods past them
    local node = assert(dht.bootstrapper(0, "127.0.0.1", { max_requests = 2000, max_requests_per_prefix = 400 }))
    assert(node:ready(10000))
    local _, port = node:address()
    local answered, n, p50, p99, out = legit_during({ "spec/attack_dht_peer.lua", "ping", tostring(port), "127.0.0.2", "200", "5000", "3500" },
      port)
    say("ping flood from 200 ports (%s): legit %d/%d answered, p50 %d ms, p99 %d ms, %d dropped", tostring(out), answered, n, p50, p99,
      node.h.io.stats.flood_dropped)
    assert.is_true(answered >= 0.95 * n, "answered " .. answered .. "/" .. n)
    node:destroy()
  end, 180000))

  it("a ping flood from 20 /24s past max_requests does not starve a client from another /24", run(function()
    local node = assert(dht.bootstrapper(0, "127.0.0.1", { max_requests = 1000, max_requests_per_prefix = 400 }))
    assert(node:ready(10000))
    local _, port = node:address()
    local hosts = {}
    for i = 1, 20 do hosts[i] = "127.0." .. (1 + i) .. ".1" end
    local answered, n, p50, p99, out = legit_during({ "spec/attack_dht_peer.lua", "ping", tostring(port), table.concat(hosts, ","), "10",
      "5000", "3500" }, port)
    say("ping flood from 20 /24s (%s): legit %d/%d answered, p50 %d ms, p99 %d ms, %d dropped", tostring(out), answered, n, p50, p99,
      node.h.io.stats.flood_dropped)
    assert.is_true(answered >= 0.95 * n, "answered " .. answered .. "/" .. n)
    node:destroy()
  end, 180000))

  it("a forged-signature ANNOUNCE flood from 20 /24s is held to the verification budget", run(function()
    local calls = 0
    local verify = signing.verify_announce
    signing.verify_announce = function(...)
      calls = calls + 1
      return verify(...)
    end
    local node = assert(dht.bootstrapper(0, "127.0.0.1", { max_verifications = 200 }))
    assert(node:ready(10000))
    local _, port = node:address()
    local hosts = {}
    for i = 1, 20 do hosts[i] = "127.0." .. (1 + i) .. ".1" end
    local t0 = ludx.now()
    local answered, n, p50, p99, out = legit_during({ "spec/attack_dht_peer.lua", "announce", tostring(port), table.concat(hosts, ","), "10",
      "4000", "3500" }, port)
    local secs = (ludx.now() - t0) / 1000
    signing.verify_announce = verify
    say("forged ANNOUNCE flood from 20 /24s (%s): %d signature checks in %.1f s, legit %d/%d answered, p50 %d ms, p99 %d ms", tostring(out),
      calls, secs, answered, n, p50, p99)
    assert.is_true(calls <= 200 * (math.ceil(secs) + 1), "checks " .. calls)
    assert.is_true(answered >= 0.95 * n, "answered " .. answered .. "/" .. n)
    node:destroy()
  end, 180000))
end)
