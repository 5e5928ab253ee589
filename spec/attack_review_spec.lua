-- Hostile peers found in the security review of issue 13: each case is a
-- bypass of a bound the first round set, against the real code.
local ludx = require "ludx"
local dht = require "ludx.dht"
local crypto = require "ludx.dht.crypto"
local compact = require "ludx.compact"
local hm = require "ludx.dht.hyperdht_messages"
local consts = require "ludx.dht.constants"
local udx = require "ludx.udx"
local msgs = require "ludx.dht.messages"
local H = require "helper"
local run = H.run

local function say(fmt, ...)
  io.stderr:write("  [attack review] ", string.format(fmt, ...), "\n")
end

local function persistent(node)
  for _ = 1, 200 do
    if node.h.persistent then return node.h.persistent end
    ludx.sleep(10)
  end
  error("node never became persistent")
end

-- A bootstrapper holding a 1,000-byte immutable value; returns the node,
-- its port, the value and get(tid), an IMMUTABLE_GET request for it.
local function value_node()
  local node = assert(dht.bootstrapper(0, "127.0.0.1"))
  assert(node:ready(10000))
  local value = string.rep("v", 1000)
  local target = crypto.hash(value)
  persistent(node).immutables:set(target, value)
  local _, port = node:address()
  local function get(tid)
    return msgs.encode_request({ tid = tid, to = { host = "127.0.0.1", port = port }, command = 9, target = target })
  end
  return node, port, value, get
end

local function gen_bytes(g)
  local n = 0
  for _, v in pairs(g.map) do n = n + #v end
  return n
end

describe("security review", function()
  -- An IPv6 host owns a whole /64 (SLAAC, privacy addresses): a quota per
  -- address is no quota. Each put below comes from another address of one
  -- /64, with a token (a round trip each: the attacker does receive there).
  it("IMMUTABLE_PUTs from 64 addresses of one IPv6 /64 are held to one host's quota", run(function()
    local quota = 64 * 1024
    local node = assert(dht.bootstrapper(0, "127.0.0.1", { max_store_bytes_per_host = quota }))
    assert(node:ready(10000))
    local p = persistent(node)
    local acks = 0
    local function put(host, value)
      p:on_immutable_put({ from = { host = host, port = 4000 }, target = crypto.hash(value), token = "t", value = value,
        reply = function() acks = acks + 1 end })
    end
    for i = 1, 64 do put(string.format("2001:db8:1:2::%x", i), crypto.random(15 * 1024)) end
    local stored = gen_bytes(p.immutables.latest) + gen_bytes(p.immutables.oldest)
    say("64 x 15 KB puts from 64 addresses of one /64: %d KB stored (quota %d KB)", math.floor(stored / 1024), math.floor(quota / 1024))
    assert.is_true(stored <= quota, "stored " .. stored)
    -- another /64 still stores
    local before = acks
    put("2001:db8:1:3::1", "another network's value")
    assert.are.equal(before + 1, acks)
    node:destroy()
  end, 30000))

  -- A valid Noise IK first message to server_pk (a fresh ephemeral each).
  local function first_message(server_pk, kp, firewall)
    local noise = crypto.noise_ik(true, kp, server_pk)
    return assert(noise:send(compact.encode(hm.noise_payload, {
      error = consts.ERROR.NONE, firewall = firewall or consts.FIREWALL.UNKNOWN, addresses4 = {},
      udx = { reusable_socket = false, id = 7, seq = 0 }, secret_stream = {},
    })))
  end

  -- Sources that once connected skip the overall handshake budget. Keyed
  -- by host:port, one host that connected once from each of 100 ports
  -- (cheap: one real connection per port) then has 100 x the per-source
  -- rate past the budget. The exemption belongs to the host, within the
  -- per-source rate.
  it("a host known from 100 ports gets no more past the handshake budget than from one", run(function()
    local tn = assert(dht.testnet(3, { timeout = 20000 }))
    local sn = assert(tn:create_node())
    local server = sn:server(function(conn) conn:close() end, { max_handshakes = 20, max_handshakes_per_source = 16 })
    local kp = dht.keypair(string.rep("\8", 32))
    assert(server:listen(kp, 20000))
    local ckp = dht.keypair()
    -- the state after one real connection from each port (known by
    -- source, or by host)
    for p = 1, 100 do server.known:set("127.0.0.9:" .. (20000 + p), true) end
    server.known:set("127.0.0.9", true)
    server.window = -1 -- a fresh second of admissions
    -- the 400 take ~150 ms: on a real clock they crossed a second boundary
    -- 1 run in ~7 and the budget refilled (40 admitted); hold the clock still
    local env, now = server.h.env, server.h.env.now
    local t = now()
    env.now = function() return t end
    local before = server.stats.handshakes
    local ok, err = pcall(function()
      for p = 1, 100 do
        for _ = 1, 4 do
          server:_on_peer_handshake({ noise = first_message(kp.public_key, ckp) }, { from = { host = "127.0.0.9", port = 20000 + p } })
        end
      end
    end)
    env.now = now -- the env is every node's in this process
    assert(ok, err)
    local admitted = server.stats.handshakes - before
    say("400 first messages from 100 known ports of one host: %d handshakes (budget 20, 16 per source)", admitted)
    assert.is_true(admitted <= 20 + 16, "admitted " .. admitted)
    -- another known host still gets through past the budget
    server.known:set("127.0.0.10:1", true)
    server.known:set("127.0.0.10", true)
    before = server.stats.handshakes
    server:_on_peer_handshake({ noise = first_message(kp.public_key, ckp) }, { from = { host = "127.0.0.10", port = 1 } })
    assert.are.equal(before + 1, server.stats.handshakes)
    server:close({ fast = true })
    tn:destroy()
  end, 60000))

  -- A first message that says "my firewall is OPEN" with a peer_address
  -- (as a relay would send it) made the server connect to that address at
  -- once and count it as a connection: the handler ran, the host became
  -- known (past the handshake budget), and the share's per-address cap was
  -- keyed by an address the attacker picked. Nothing is proven until the
  -- client sends: the handshake stays pending until its first packet.
  it("an OPEN first message naming a silent address runs no handler and makes nobody known", run(function()
    local tn = assert(dht.testnet(3, { timeout = 20000 }))
    local sn = assert(tn:create_node())
    local handled = 0
    local server = sn:server(function(conn)
      handled = handled + 1
      conn:close()
    end)
    local kp = dht.keypair(string.rep("\9", 32))
    assert(server:listen(kp, 20000))
    local victim = assert(udx.bind("127.0.0.1", 0))
    local _, vport = victim:address()
    for i = 1, 3 do
      server:_on_peer_handshake({ noise = first_message(kp.public_key, dht.keypair(), consts.FIREWALL.OPEN), peer_address = { host = "127.0.0.1", port = vport } },
        { from = { host = "127.0.0.11", port = 30000 + i } })
    end
    -- the server's first packets reach the named address...
    assert.is_truthy(victim:recv(10000))
    ludx.sleep(100)
    say("3 OPEN first messages naming a silent address: %d handler runs, %d connections, known: %s", handled, server.connections,
      tostring(server.known:get("127.0.0.11") or server.known:get("127.0.0.11:30001")))
    -- ...but nothing answered: no connection, nobody known
    assert.are.equal(0, handled)
    assert.are.equal(0, server.connections)
    assert.is_nil(server.known:get("127.0.0.11"))
    assert.is_nil(server.known:get("127.0.0.11:30001"))
    victim:close()
    server:close({ fast = true })
    tn:destroy()
  end, 60000))

  -- A reply over the amplification budget goes out only after the host
  -- answered a probe PING, and probes in flight were capped (64, 1 s each)
  -- with no eviction: 64 spoofed GETs a second from silent hosts held
  -- every slot, and a new client never got a probe, so never a value.
  it("64 silent hosts holding the probe slots do not keep a new client from being probed", run(function()
    local node, port, value, get = value_node()
    local io_ = node.h.io
    local silent = {}
    for i = 1, io_.max_probes do
      silent[i] = assert(udx.bind("127.0.1." .. i, 0))
      assert(silent[i]:send(get(i), port, "127.0.0.1"))
    end
    for _ = 1, 1000 do
      if io_.nprobes >= io_.max_probes then break end
      ludx.sleep(5)
    end
    local held = io_.nprobes
    local client = assert(udx.bind("127.0.2.1", 0))
    assert(client:send(get(500), port, "127.0.0.1"))
    -- the probe: a PING from the node, which the client answers
    local probed
    local deadline = ludx.now() + 5000
    while ludx.now() < deadline and not probed do
      local d, host, rport = client:recv(deadline - ludx.now())
      local kind, m
      if d then kind, m = msgs.decode(d) end
      if kind == "request" and m.command == msgs.PING and m.internal then
        probed = true
        assert(client:send(msgs.encode_response({ tid = m.tid, to = { host = "127.0.2.1", port = select(2, client:address()) } }), rport, host))
      end
    end
    say("%d silent hosts hold %d probe slots: the new client was probed: %s", #silent, held, tostring(probed))
    assert.is_true(probed, "no probe for the new client")
    -- its retry gets the value
    local got
    for try = 1, 20 do
      assert(client:send(get(600 + try), port, "127.0.0.1"))
      local d = client:recv(500)
      local kind, m
      if d then kind, m = msgs.decode(d) end
      if kind == "response" and m.value == value then
        got = true
        break
      end
    end
    assert.is_true(got, "no value")
    for _, s in ipairs(silent) do s:close() end
    client:close()
    node:destroy()
  end, 60000))

  -- A verification PING's answer carries nothing unguessable but its 16-bit
  -- tid: an off-path sender could answer with every tid in the victim's
  -- name, get the victim verified and then reflect full replies at it.
  it("a probe answered with many wrong tids in a host's name verifies nothing", run(function()
    local node, port, _, get = value_node()
    local io_ = node.h.io
    -- the victim's address (it never answers) and the spoofer, another
    -- port of the same host (off-path: it sees nothing the node sends)
    local victim = assert(udx.bind("127.0.3.1", 0))
    local spoofer = assert(udx.bind("127.0.3.1", 0))
    local _, vport = victim:address()
    assert(victim:send(get(1), port, "127.0.0.1"))
    for _ = 1, 1000 do
      if io_.probes["127.0.3.1"] then break end
      ludx.sleep(1)
    end
    assert.is_truthy(io_.probes["127.0.3.1"], "no probe")
    -- a sweep of the tid space in the victim's name: here 64 wrong tids,
    -- then the right one (a real sweep reaches it after ~32,000 on average)
    local right
    for tid, r in pairs(io_.inflight) do
      if r.probe and r.to.host == "127.0.3.1" then right = tid end
    end
    assert.is_number(right)
    local sent = 0
    -- (right = 65535 made the old bounds 0 .. 65599: every tid, the right one among them)
    for k = 1, 64 do
      spoofer:send(msgs.encode_response({ tid = (right + k) % 65536, to = { host = "127.0.3.1", port = vport } }), port, "127.0.0.1")
      sent = sent + 1
    end
    spoofer:send(msgs.encode_response({ tid = right, to = { host = "127.0.3.1", port = vport } }), port, "127.0.0.1")
    for _ = 1, 200 do
      if not io_.probes["127.0.3.1"] then break end
      ludx.sleep(5)
    end
    local verified = io_:is_verified("127.0.3.1")
    say("%d wrong tids then the right one in the victim's name: victim verified %s, spoofed probes %s", sent, tostring(verified),
      tostring(io_.stats.probe_spoofed))
    assert.is_false(verified)
    victim:close()
    spoofer:close()
    node:destroy()
  end, 120000))

  -- Puncher sockets are capped (32 at once, each held up to 10 s until a
  -- holepunch starts), but not per client: one host that completes a
  -- handshake and sends one holepunch round 4 times a second held every
  -- socket, and no other client could holepunch to the server.
  it("one host holds at most its share of the server's puncher sockets", run(function()
    local tn = assert(dht.testnet(3, { timeout = 20000 }))
    local sn = assert(tn:create_node())
    local server = sn:server(function(conn) conn:close() end)
    assert(server:listen(dht.keypair(string.rep("\10", 32)), 20000))
    local held = {}
    for _ = 1, 40 do
      local punch = server:_open_puncher({ settled = false, host = "127.0.0.12" }, consts.FIREWALL.UNKNOWN)
      if punch then held[#held + 1] = punch end
    end
    say("40 holepunch rounds from one host: %d puncher sockets open (cap %d in all)", #held, server.max_punchers)
    assert.is_true(#held <= 4, "one host holds " .. #held)
    local other = server:_open_puncher({ settled = false, host = "127.0.0.13" }, consts.FIREWALL.UNKNOWN)
    assert.is_truthy(other)
    other:destroy()
    for _, punch in ipairs(held) do punch:destroy() end
    assert.are.equal(0, server.punchers)
    server:close({ fast = true })
    tn:destroy()
  end, 60000))
  it("a sender reusing a relayed client's target and tid cannot take over that client's answer", function()
    local router = require "ludx.dht.router"
    local now = 0
    local r = router.new({ env = { now = function() return now end } })
    local target = string.rep("t", 32)
    local client = { host = "10.0.0.1", port = 1111 }
    local spoofer = { host = "10.6.6.6", port = 6666 }
    local server = { host = "10.0.0.9", port = 9999 }
    r:_expect("h", { target = target, tid = 77, from = client })
    -- the same target and tid from someone else (it must not replace the client's entry)
    r:_expect("h", { target = target, tid = 77, from = spoofer })
    local to = r:_answer("h", { target = target, tid = 77, from = server }, client)
    assert.are.same(client, to)
    -- an answer naming an address we never relayed for goes nowhere
    assert.is_nil(r:_answer("h", { target = target, tid = 77, from = server }, { host = "10.1.1.1", port = 1 }))
    assert.is_nil(r:_answer("h", { target = target, tid = 77, from = server }, nil))
  end)
end)
