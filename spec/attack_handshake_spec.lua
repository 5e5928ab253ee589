-- Hostile peers against the handshake and relay paths (issue 13), over
-- real loopback sockets:
-- - relay paths (PEER_HANDSHAKE / PEER_HOLEPUNCH FROM_CLIENT, FROM_SERVER,
--   relay_address, peer_address) aimed at a third party send it nothing;
-- - a flood of valid Noise IK first messages keeps pending handshakes and
--   puncher sockets bounded, remembers nothing for failed ones, and a
--   legitimate client still connects.
local ludx = require "ludx"
local udx = require "ludx.udx"
local dht = require "ludx.dht"
local msgs = require "ludx.dht.messages"
local compact = require "ludx.compact"
local hm = require "ludx.dht.hyperdht_messages"
local consts = require "ludx.dht.constants"
local H = require "helper"
local run = H.run

local C = consts.COMMANDS
local LOCAL = "127.0.0.1"

local function request(tid, port, command, target, value)
  return msgs.encode_request({ tid = tid % 65536, to = { host = LOCAL, port = port }, command = command, target = target, value = value })
end

-- Packets a socket got within ms.
local function drain(sock, ms)
  local n, bytes = 0, 0
  local deadline = ludx.now() + ms
  while ludx.now() < deadline do
    local d = sock:recv(math.max(1, deadline - ludx.now()))
    if d then
      n = n + 1
      bytes = bytes + #d
    end
  end
  return n, bytes
end

-- A ping round trip from sock: everything sock sent before was handled.
-- The ping is sent again each second (UDP, and a node past one of its rate
-- caps drops requests), within 30 s.
local function sync(sock, port, tid)
  local ping = msgs.encode_request({ tid = tid, to = { host = LOCAL, port = port }, internal = true, command = msgs.PING })
  local deadline = ludx.now() + 30000
  while ludx.now() < deadline do
    assert(sock:send(ping, port, LOCAL))
    local again = math.min(deadline, ludx.now() + 1000)
    while ludx.now() < again do
      local d = sock:recv(again - ludx.now())
      if d and d:byte(1) == msgs.RESPONSE_ID then
        local _, m = msgs.decode(d)
        if m and m.tid == tid then return true end
      end
    end
  end
  error("no ping reply")
end

describe("relay paths aimed at a third party", function()
  it("send the third party nothing", run(function()
    local tn = assert(dht.testnet(3, { timeout = 20000 }))
    -- a server announced on the testnet, so the nodes hold forward entries
    local sn = assert(tn:create_node())
    local server = sn:server(function(conn) conn:close() end)
    local kp = dht.keypair(string.rep("\7", 32))
    assert(server:listen(kp, 20000))
    local target = dht.hash(kp.public_key)
    local attacker = assert(udx.bind(LOCAL, 0))
    local victim = assert(udx.bind(LOCAL, 0))
    local _, vport = victim:address()
    local va = { host = LOCAL, port = vport }
    local noise = string.rep("n", 1200) -- a big payload, as the attack used
    local sent = 0
    for i, node in ipairs(tn.nodes) do
      local _, port = node:address()
      for j = 1, 25 do
        local tid = i * 1000 + j * 8
        local t = j % 2 == 0 and target or dht.hash("random " .. j)
        local reqs = {
          request(tid, port, C.PEER_HANDSHAKE, t, compact.encode(hm.handshake, { mode = hm.FROM_CLIENT, noise = noise, relay_address = va })),
          request(tid + 1, port, C.PEER_HANDSHAKE, t, compact.encode(hm.handshake, { mode = hm.FROM_SERVER, noise = noise, peer_address = va })),
          request(tid + 2, port, C.PEER_HOLEPUNCH, t, compact.encode(hm.holepunch, { mode = hm.FROM_CLIENT, id = 0, payload = noise, peer_address = va })),
          request(tid + 3, port, C.PEER_HOLEPUNCH, t, compact.encode(hm.holepunch, { mode = hm.FROM_SERVER, id = 0, payload = noise, peer_address = va })),
          request(tid + 4, port, C.PEER_HANDSHAKE, t, compact.encode(hm.handshake, { mode = hm.FROM_SECOND_RELAY, noise = noise, peer_address = va, relay_address = va })),
        }
        for _, r in ipairs(reqs) do
          assert(attacker:send(r, port, LOCAL))
          sent = sent + 1
        end
      end
      sync(attacker, port, 60000 + i)
    end
    local _, sport = sn:address()
    sync(attacker, sport, 61000)
    local n, bytes = drain(victim, 300)
    io.stderr:write(string.format("  [relay] %d relay requests aimed at a third party: it got %d packets, %d bytes\n", sent, n, bytes))
    assert.are.equal(0, n)
    attacker:close()
    victim:close()
    server:close({ fast = true })
    sn:destroy()
    tn:destroy()
  end, 60000))
end)

---------------------------------------------------------------------------
-- Floods of valid first messages

local process = require "ludx.process"
local hex = require("ludx.crypto").hex
local U = require "hardening_util"

-- Open file descriptors of this process.
local function fds()
  local f = assert(io.open("/proc/self/stat"))
  local pid = f:read("*n")
  f:close()
  local n = 0
  local p = io.popen("ls /proc/" .. pid .. "/fd 2>/dev/null")
  if not p then return 0 end
  for _ in p:lines() do n = n + 1 end
  p:close()
  return n
end

local function percentile(list, q)
  if #list == 0 then return nil end
  local l = {}
  for i, v in ipairs(list) do l[i] = v end
  table.sort(l)
  return l[math.min(#l, math.floor(q * #l) + 1)]
end

-- Starts the flooding peer against node (the server's node) and waits for
-- its "ready"; state.done gets its last line.
local function flood(node, kp, rate, seconds, mode)
  local _, port = node:address()
  local p = assert(process.spawn(H.ludx_bin, {
    "spec/attack_handshake_peer.lua", tostring(port), hex(dht.hash(kp.public_key)), hex(kp.public_key),
    tostring(rate), tostring(seconds), os.getenv("LUDX_FLOOD_SOCKETS") or "16", mode,
  }))
  local line = assert(p:read_line(120000))
  assert.are.equal("ready", line)
  local state = {}
  ludx.spawn("flood reader", function()
    state.done = p:read_line(seconds * 1000 + 60000) or "lost"
  end)
  return p, state
end

local function echo(conn)
  local data = conn:read(nil, 10000)
  if data then conn:write(data) end
  conn:finish(5000)
  conn:close()
end

local RATE = tonumber(os.getenv("LUDX_FLOOD_RATE") or "2000")

describe("a flood of valid Noise first messages", function()
  it("leaves pending handshakes and tasks bounded; a legitimate client still connects", run(function()
    local tn = assert(dht.testnet(3, { timeout = 20000 }))
    local sn = assert(tn:create_node())
    local kp = dht.keypair(string.rep("\8", 32))
    local server = sn:server(echo)
    assert(server:listen(kp, 20000))
    local cn = assert(tn:create_node())
    -- warm up: the client knows the way
    local c0 = assert(cn:connect(kp.public_key, { timeout = 10000 }))
    c0:close()
    local tasks0, rss0 = #ludx.tasks(), U.rss()
    local p, state = flood(sn, kp, RATE, 6, "direct")
    local ok, lat, tries, max_pending, max_tasks = 0, {}, 0, 0, 0
    while not state.done or tries < 10 do
      tries = tries + 1
      local t0 = ludx.now()
      local conn = cn:connect(kp.public_key, { timeout = 5000 })
      if conn and conn:write("ping") and conn:read(nil, 5000) == "ping" then
        ok = ok + 1
        lat[#lat + 1] = ludx.now() - t0
      end
      if conn then conn:close() end
      -- a client connects now and then, not in a tight loop (the server
      -- admits 16 handshakes a second from one source)
      ludx.sleep(100)
      max_pending = math.max(max_pending, server.pending or 0)
      max_tasks = math.max(max_tasks, #ludx.tasks())
      if tries >= 200 then break end
    end
    while not state.done do ludx.sleep(50) end
    p:close()
    local st = server.stats or { handshakes = -1, refused = -1, evicted = -1, duplicates = -1 }
    local rss = U.rss()
    io.stderr:write(string.format(
      "  [handshake flood] %s; legit %d/%d connected, p50 %s ms, p95 %s ms, p99 %s ms, max %s ms; server: %d handshakes, %d refused, "
        .. "%d evicted, %d duplicates; pending max %d; tasks %d -> max %d; rss +%.1f MB\n",
      state.done, ok, tries, tostring(percentile(lat, 0.5)), tostring(percentile(lat, 0.95)), tostring(percentile(lat, 0.99)),
      tostring(percentile(lat, 1)), st.handshakes, st.refused,
      st.evicted, st.duplicates, max_pending, tasks0, max_tasks, (rss - rss0) / 1e6))
    assert.is_true(ok >= 0.9 * tries, ok .. "/" .. tries)
    assert.is_true(max_pending <= (server.max_pending or 256))
    -- a task per waiting handshake at most, not one per first message
    assert.is_true(max_tasks <= tasks0 + 2 * (server.max_pending or 256) + 64, "tasks " .. max_tasks)
    server:close({ fast = true })
    cn:destroy()
    sn:destroy()
    tn:destroy()
  end, 180000))

  it("at a firewalled server opens no socket per relayed handshake", run(function()
    local tn = assert(dht.testnet(3, { timeout = 20000 }))
    local sn = assert(tn:create_node({ firewalled = true, quick_firewall = false }))
    assert.is_true(sn:is_firewalled())
    local kp = dht.keypair(string.rep("\9", 32))
    local server = sn:server(echo)
    assert(server:listen(kp, 20000))
    local fds0 = fds()
    local p, state = flood(sn, kp, RATE, 3, "relayed")
    local max_fds, max_pending = fds0, 0
    while not state.done do
      max_fds = math.max(max_fds, fds())
      max_pending = math.max(max_pending, server.pending or 0)
      ludx.sleep(100)
    end
    p:close()
    local st = server.stats or { handshakes = -1, refused = -1, evicted = -1, duplicates = -1 }
    io.stderr:write(string.format("  [relayed flood] %s; server: %d handshakes, %d refused, %d evicted; pending max %d; fds %d -> max %d\n",
      state.done, st.handshakes, st.refused, st.evicted, max_pending, fds0, max_fds))
        assert.is_true(max_pending <= (server.max_pending or 256))
    assert.is_true(max_fds <= fds0 + (server.max_punchers or 32) + 8, "fds " .. fds0 .. " -> " .. max_fds)
    server:close({ fast = true })
    sn:destroy()
    tn:destroy()
  end, 180000))
end)

describe("failed handshakes", function()
  it("leave no state behind", run(function()
    local tn = assert(dht.testnet(3, { timeout = 20000 }))
    local sn = assert(tn:create_node())
    local kp = dht.keypair(string.rep("\10", 32))
    local server = sn:server(function(conn) conn:close() end, { max_handshakes_per_source = 1e9, max_handshakes = 1e9 })
    assert(server:listen(kp, 20000))
    local target = dht.hash(kp.public_key)
    local _, port = sn:address()
    -- from 10 ports (one port is capped at 200 requests a second)
    for s = 1, 10 do
      local attacker = assert(udx.bind(LOCAL, 0))
      for i = 1, 100 do
        -- 32-byte "ephemeral key" plus garbage: the Noise message fails to open
        local junk = string.rep(string.char(i % 256), 32) .. string.rep(string.char(s), 64 + i % 64)
        local value = compact.encode(hm.handshake, { mode = hm.FROM_CLIENT, noise = junk })
        assert(attacker:send(request(s * 1000 + i, port, C.PEER_HANDSHAKE, target, value), port, LOCAL))
      end
      sync(attacker, port, 60000 + s)
      attacker:close()
    end
    local kept = 0
    for _ in pairs(server.connects) do kept = kept + 1 end
    io.stderr:write(string.format("  [garbage] 1000 failed first messages: %d remembered\n", kept))
    assert.are.equal(0, kept)
    server:close({ fast = true })
    sn:destroy()
    tn:destroy()
  end, 60000))
end)

describe("a peer's holepunch addresses", function()
  it("are capped: a peer cannot aim our probes at a list of strangers", function()
    local punch = require "ludx.dht.punch"
    local sent = {}
    local fake = {
      env = { after = function() return { cancel = function() end } end, now = function() return 0 end },
      firewalled = true,
      nodes = { length = 0 },
      acquire_socket = function()
        return { send = function(_, _, port, host) sent[#sent + 1] = host .. ":" .. port end, close = function() end }
      end,
    }
    local p = assert(punch.puncher(fake, nil, true, consts.FIREWALL.CONSISTENT))
    local addrs = {}
    for i = 1, 50 do addrs[i] = { host = "10.0.0." .. i, port = 1000 + i } end
    p:update_remote({ addresses = addrs, firewall = consts.FIREWALL.CONSISTENT, punching = true, verified = "10.0.0.1" })
    assert.are.equal(punch.MAX_REMOTE_ADDRESSES or 8, #p.remote_addresses)
    p:destroy()
  end)
end)
