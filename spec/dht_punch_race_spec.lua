-- The mid-connect NAT race (hyperdht suite, issue 13): a client that
-- connects while its DHT bootstraps counts itself firewalled and punches;
-- its quick firewall check ends mid-punch. Over the simulated network:
-- a ludx client keeps the view it started with for every round, and a ludx
-- server given a round-2 payload that says OPEN with no addresses (a Node
-- client in that race) probes the address the relay saw instead of
-- aborting.
local P = require "sim_punch_util"
local announcer = require "ludx.dht.announcer"
local holepunch = require "ludx.dht.holepunch"
local punch = require "ludx.dht.punch"
local crypto = require "ludx.dht.crypto"
local consts = require "ludx.dht.constants"

local FIREWALL = consts.FIREWALL

local SEED = 5 -- this file's seeded world
local function network(n)
  local world, _, bs = P.network(n, SEED)
  return world, bs
end
local firewalled_node = P.firewalled_node

-- A firewalled server announced through relays, answering holepunches.
local function serve(world, server, name)
  local kp = crypto.keypair(crypto.hash(name))
  local target = crypto.hash(kp.public_key)
  local secret = crypto.hash("secret " .. name)
  local ann = announcer.new(server, kp, target)
  local hs = holepunch.prepare(server, secret, FIREWALL.UNKNOWN, function(fw) return punch.puncher(server, server:session(), false, fw) end)
  server.router:set(target, {
    record = ann.record,
    onpeerhandshake = function() return { noise = "reply" } end,
    onpeerholepunch = function(msg, req, respond)
      if msg.id ~= 0 then return respond(nil) end
      holepunch.on_holepunch(server, ann, hs, msg, req, respond)
    end,
  })
  local started = false
  ann:start(function() started = true end)
  assert(world:run({ until_fn = function() return started end, max_ms = 60000 }))
  assert.is_true(#ann.relays >= 1)
  return { target = target, secret = secret, ann = ann, hs = hs }
end

-- Runs holepunch.client; rewrite(p) may change each round's plaintext
-- before it is sealed. Returns the path or the error, and the rounds sent.
local function punch_client(world, client, s, c, rewrite)
  local sent = {}
  local real = punch.payload
  punch.payload = function(...)
    local box = real(...)
    local encrypt = box.encrypt
    box.encrypt = function(self, p)
      if rewrite then p = rewrite(p) end
      sent[#sent + 1] = { firewall = p.firewall, punching = p.punching, addresses = p.addresses, error = p.error }
      return encrypt(self, p)
    end
    return box
  end
  local relay = s.ann.relays[1]
  local path, err
  local ok, puncher = pcall(holepunch.client, client, {
    target = s.target,
    payload = { firewall = FIREWALL.UNKNOWN, holepunch = { id = 0, relays = s.ann.relays } },
    secret = s.secret,
    relay_address = relay.relay_address,
    server_address = relay.peer_address,
    session = client:session(),
    fast_open = false,
    firewalled = c.firewalled,
  }, function(sock, port, host)
    if sock then path = { sock = sock, port = port, host = host } else err = port end
  end)
  punch.payload = real
  assert(ok, puncher)
  assert(world:run({ until_fn = function() return path or err end, max_ms = 60000 }))
  return path, err, sent, puncher
end

local function assert_consistent_rounds(sent)
  assert.is_true(#sent >= 2)
  for i, p in ipairs(sent) do
    if p.error == 0 and p.firewall ~= FIREWALL.UNKNOWN then
      assert.are_not.equal(FIREWALL.OPEN, p.firewall, "round " .. i .. " says OPEN")
      assert.is_true(p.addresses ~= nil and #p.addresses > 0, "round " .. i .. " has no addresses")
    end
  end
  assert.is_true(sent[#sent].punching)
end

describe("the mid-connect NAT race", function()
  it("a client whose firewall check ends during the probe round keeps its view", function()
    local world, bs = network(12)
    local server = firewalled_node(world, "192.168.1.2", bs)
    local client = firewalled_node(world, "172.16.5.9", bs)
    local s = serve(world, server, "race server 1")
    -- the quick firewall check "ends" as the first round leaves
    local real = client.router.peer_holepunch
    client.router.peer_holepunch = function(...)
      client.firewalled = false
      return real(...)
    end
    local path, err, sent, puncher = punch_client(world, client, s, {})
    client.router.peer_holepunch = real
    assert.is_nil(err)
    assert_consistent_rounds(sent)
    assert.are.equal("192.168.1.2", path.host)
    assert.are.equal(FIREWALL.CONSISTENT, puncher.nat.firewall)
    puncher:release()
    s.ann:stop()
  end)

  it("a client whose check ended after the handshake keeps the handshake's view", function()
    local world, bs = network(12)
    local server = firewalled_node(world, "192.168.1.2", bs)
    local client = firewalled_node(world, "172.16.5.9", bs)
    local s = serve(world, server, "race server 2")
    -- the handshake said "not OPEN" (what ludx.dht.connect passes); the
    -- node stopped counting itself firewalled before the puncher opened
    client.firewalled = false
    local path, err, sent, puncher = punch_client(world, client, s, { firewalled = true })
    assert.is_nil(err)
    assert_consistent_rounds(sent)
    assert.are.equal("192.168.1.2", path.host)
    puncher:release()
    s.ann:stop()
  end)

  it("a server punches a client whose round 2 says OPEN with no addresses", function()
    local world, bs = network(12)
    local server = firewalled_node(world, "192.168.1.2", bs)
    local client = firewalled_node(world, "172.16.5.9", bs)
    local s = serve(world, server, "race server 3")
    -- a hyperdht client in the race: round 2 carries OPEN, addresses null
    local path, err, sent, puncher = punch_client(world, client, s, {}, function(p)
      if not p.punching then return p end
      local q = {}
      for k, v in pairs(p) do q[k] = v end
      q.firewall, q.addresses = FIREWALL.OPEN, nil
      return q
    end)
    assert.is_nil(err)
    assert.are.equal(FIREWALL.OPEN, sent[#sent].firewall)
    assert.is_nil(sent[#sent].addresses)
    assert.are.equal("192.168.1.2", path.host)
    -- the server probed only the address the relay saw for the client
    local sp = s.hs.puncher
    assert.are.equal(1, #sp.remote_addresses)
    assert.are.equal("172.16.5.9", sp.remote_addresses[1].host)
    assert.are.equal(puncher.socket.port, sp.remote_addresses[1].port)
    assert.is_true(sp.socket.seen["172.16.5.9:" .. puncher.socket.port])
    puncher:release()
    s.ann:stop()
  end)
end)

describe("a hand-made round 2 with OPEN and no addresses at a ludx server", function()
  -- one sealed punching round straight into on_holepunch; from_relay says
  -- whether it came through one of the server's own relays
  local function round2(from_relay)
    local world, bs = network(12)
    local server = firewalled_node(world, "192.168.1.2", bs)
    local s = serve(world, server, "hand-made " .. tostring(from_relay))
    local ann = { is_relay = function() return from_relay end }
    local peer = { host = "172.16.5.9", port = 40000 }
    local msg = { id = 0, peer_address = peer, payload = s.hs.payload:encrypt({ error = 0, firewall = FIREWALL.OPEN, round = 1, punching = true }) }
    local req = { from = s.ann.relays[1].relay_address, to = { host = "192.168.1.2", port = 1 } }
    local reply
    holepunch.on_holepunch(server, ann, s.hs, msg, req, function(r) reply = r or false end)
    assert(world:run({ until_fn = function() return reply ~= nil end, max_ms = 30000 }))
    local rp = reply and s.hs.payload:decrypt(reply.payload)
    local p = s.hs.puncher
    local out = { rp = rp, addresses = p and p.remote_addresses, punching = p and p.punching }
    if p then p:destroy() end
    s.ann:stop()
    return out, peer
  end

  it("through one of its relays: it punches the address the relay saw", function()
    local out, peer = round2(true)
    assert.are.equal(0, out.rp.error)
    assert.is_true(out.rp.punching)
    assert.are.equal(1, #out.addresses)
    assert.are.equal(peer.host, out.addresses[1].host)
    assert.are.equal(peer.port, out.addresses[1].port)
  end)

  it("through a node that is not its relay: it aborts as hyperdht does", function()
    local out = round2(false)
    assert.are_not.equal(0, out.rp.error)
    assert.are.equal(0, #out.addresses)
  end)
end)

describe("a Node hyperdht client in the race", function()
  local ludx = require "ludx"
  local dht = require "ludx.dht"
  local node = require "interop.node"
  local H = require "helper"
  local json = require "ludx.json"
  local RUNS = 3

  local function echo(conn)
    while true do
      local data = conn:read()
      if not data then break end
      if not conn:write(data) then break end
    end
    conn:finish(10000)
    conn:close()
  end

  it("opens to a firewalled ludx server though its round 2 says OPEN with no addresses", H.run(function()
    local tn = assert(dht.testnet(5, { timeout = 20000 }))
    local n = assert(tn:create_node({ firewalled = true, quick_firewall = false }))
    assert.is_true(n:is_firewalled())
    local kp = dht.keypair(string.rep("\11", 32))
    local server = n:server(echo)
    assert(server:listen(kp, 20000))
    local hex = kp.public_key:gsub(".", function(c) return string.format("%02x", c:byte()) end)
    local peer = assert(node.start("race-client.js", { bootstrap = tn.bootstrap[1], publicKey = hex, runs = RUNS }, 60000))
    local runs, raced = {}, {}
    local deadline = ludx.now() + RUNS * 45000
    while true do
      local line, msg = peer.p:read_json(math.max(0, deadline - ludx.now()))
      assert(line, "race-client.js: " .. tostring(msg) .. "\n" .. peer:stderr())
      if line.event == "round" and line.punching and line.firewall == 1 and (line.addresses == nil or line.addresses == json.null) then
        raced[line.run] = true
      elseif line.event == "run" then
        runs[#runs + 1] = line
      elseif line.event == "error" then
        error("race-client.js: " .. tostring(line.message))
      elseif line.event == "done" then
        break
      end
    end
    assert.are.equal(RUNS, #runs)
    for _, r in ipairs(runs) do
      -- the race happened: round 2 carried OPEN and no addresses
      assert.is_true(raced[r.run], "run " .. r.run .. " did not race")
      assert.is_true(r.open, "run " .. r.run .. " did not open: " .. tostring(r.error and r.error.code))
      assert.is_true(r.echo, "run " .. r.run .. " got no echo")
    end
    peer:close()
    server:close()
    tn:destroy()
  end, 60000 + RUNS * 45000))
end)

describe("a ludx client that connects while it bootstraps", function()
  local dht = require "ludx.dht"
  local H = require "helper"
  local RUNS = 3

  -- dht.new starts firewalled and its quick firewall check (loopback
  -- answers) ends while the connect runs: before the fix the server
  -- aborted on the OPEN, address-less round and the stream never got an
  -- answer (PEER_CONNECTION_FAILED in 10 of 10 runs)
  it("reaches a firewalled ludx server", H.run(function()
    local tn = assert(dht.testnet(5, { timeout = 20000 }))
    local sn = assert(tn:create_node({ firewalled = true, quick_firewall = false }))
    local kp = dht.keypair(string.rep("\12", 32))
    local server = sn:server(function(c)
      local d = c:read(nil, 10000)
      if d then c:write(d) end
      c:finish(10000)
      c:close()
    end)
    assert(server:listen(kp, 20000))
    local flipped = 0
    for i = 1, RUNS do
      local n = assert(dht.new({ bootstrap = tn.bootstrap, host = "127.0.0.1", port = 0, firewalled = true }))
      assert.is_true(n:is_firewalled())
      local conn, msg, code = n:connect(kp.public_key, { timeout = 30000 })
      assert(conn, "run " .. i .. ": " .. tostring(msg) .. " " .. tostring(code))
      if not n:is_firewalled() then flipped = flipped + 1 end
      assert(conn:write("race " .. i))
      assert.are.equal("race " .. i, conn:read(nil, 10000))
      conn:close()
      n:destroy()
    end
    io.stderr:write(string.format("  [race] %d of %d clients stopped counting themselves firewalled during the connect\n", flipped, RUNS))
    server:close()
    sn:destroy()
    tn:destroy()
  end, 60000 + RUNS * 45000))
end)
