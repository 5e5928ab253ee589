-- The DHT wire formats against the captured hex of the reference
-- implementation (dht-rpc 6, hyperdht 6).
local msg = require "ludx.dht.messages"
local hm = require "ludx.dht.hyperdht_messages"
local compact = require "ludx.compact"
local crypto = require "ludx.dht.crypto"
local consts = require "ludx.dht.constants"
local signing = require "ludx.dht.signing"

local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function unhex(h)
  h = h:gsub("%s", "")
  return (h:gsub("..", function(x) return string.char(tonumber(x, 16)) end))
end

local function seed(n)
  return string.rep(string.char(n), 32)
end

local ID_49738 = crypto.hash(unhex("7f0000014ac2"))

describe("dht-rpc messages", function()
  it("node ids are H32(ip || port)", function()
    local h = hex(ID_49738)
    assert.are.equal("ea50f556", h:sub(1, 8))
    assert.are.equal("ac6c", h:sub(-4))
  end)

  it("encodes the captured PING request", function()
    local s = msg.encode_request({ tid = 0x4211, to = { host = "127.0.0.1", port = 49738 }, internal = true, command = msg.PING })
    assert.are.equal("03041142" .. "7f0000014ac2" .. "00", hex(s))
    local kind, m = msg.decode(s)
    assert.are.equal("request", kind)
    assert.are.equal(0x4211, m.tid)
    assert.are.equal("127.0.0.1", m.to.host)
    assert.are.equal(49738, m.to.port)
    assert.is_true(m.internal)
    assert.are.equal(0, m.command)
    assert.is_nil(m.id)
    assert.is_nil(m.value)
  end)

  it("encodes the captured reply of a persistent node", function()
    local s = msg.encode_response({ tid = 0x4211, to = { host = "127.0.0.1", port = 47300 }, id = ID_49738 })
    assert.are.equal(42, #s)
    assert.are.equal("13011142" .. "7f000001c4b8" .. hex(ID_49738), hex(s))
    local kind, m = msg.decode(s)
    assert.are.equal("response", kind)
    assert.are.equal(ID_49738, m.id)
    assert.are.equal(0, m.error)
    assert.are.equal(47300, m.to.port)
  end)

  it("encodes the captured LOOKUP request and reply", function()
    local target = string.rep("\205", 32)
    local s = msg.encode_request({ tid = 0x4212, to = { host = "127.0.0.1", port = 49738 }, command = 3, target = target })
    assert.are.equal("03081242" .. "7f0000014ac2" .. "03" .. string.rep("cd", 32), hex(s))
    local token = string.rep("\17", 32)
    local reply = msg.encode_response({
      tid = 0x4212,
      to = { host = "127.0.0.1", port = 47300 },
      id = ID_49738,
      token = token,
      closer_nodes = { { host = "127.0.0.1", port = 49739 } },
    })
    assert.are.equal("13071242" .. "7f000001c4b8" .. hex(ID_49738) .. string.rep("11", 32) .. "017f0000014bc2", hex(reply))
    local _, m = msg.decode(reply)
    assert.are.equal(token, m.token)
    assert.are.equal(1, #m.closer_nodes)
    assert.are.equal(49739, m.closer_nodes[1].port)
  end)

  it("round-trips errors and values", function()
    local s = msg.encode_response({ tid = 1, to = { host = "1.2.3.4", port = 5 }, error = 2, value = "abc" })
    local _, m = msg.decode(s)
    assert.are.equal(2, m.error)
    assert.are.equal("abc", m.value)
    -- an empty value is sent (flag set) but decodes as nil, as dht-rpc does
    s = msg.encode_request({ tid = 1, to = { host = "1.2.3.4", port = 5 }, command = 7, value = "" })
    assert.are.equal("1", hex(s):sub(3, 3))
    _, m = msg.decode(s)
    assert.is_nil(m.value)
  end)

  it("rejects truncated and foreign datagrams", function()
    local s = msg.encode_response({ tid = 0x4211, to = { host = "127.0.0.1", port = 47300 }, id = ID_49738 })
    for i = 0, #s - 1 do
      local kind, err = msg.decode(s:sub(1, i))
      assert.is_nil(kind)
      assert.is_string(err)
    end
    assert.is_nil(msg.decode("\255\1\0\0"))
    assert.is_nil(msg.decode("\0"))
    -- closer nodes count over the array limit
    assert.is_nil(msg.decode(unhex("1304" .. "0000" .. "000000000000" .. "fe01001000")))
  end)

  it("refuses to encode wrong-sized ids", function()
    assert.has_error(function()
      msg.encode_request({ tid = 1, to = { host = "1.2.3.4", port = 5 }, command = 0, id = "short" })
    end)
  end)
end)

describe("hyperdht messages", function()
  local kp1 = crypto.keypair(seed(1))
  local target = string.rep("\7", 32)
  local token = string.rep("\17", 32)

  it("derives the namespaces", function()
    assert.are.equal("36386adddf9f6fd60db83a6f42fc159d1146aa8644037664230aaa1f0179d497", hex(consts.NS.ANNOUNCE))
    assert.are.equal("ded293cd93fb395e756ecf5fff426529e72c36eacc22e5ed944d9099a2561e32", hex(consts.NS.UNANNOUNCE))
    assert.are.equal("668e823edd5ce7f5338d68bf1161f4a3c28ce437ee2ab49efd30d99366039b1e", hex(consts.NS.MUTABLE_PUT))
    assert.are.equal("14d6d4b49214ab1033ed204976caa258bae9e1e8543b9ad1fd996a910b0c4e3a", hex(consts.NS.PEER_HANDSHAKE))
    assert.are.equal("f1191cd5e67b10b54a507033280ed1ff0e12278268d5679c8f93d417210d168b", hex(consts.NS.PEER_HOLEPUNCH))
    assert.are.equal("6b8a2a8623f28c6c02a1e22abe515ce31cafd9af61d4b69970639aa7eb96a8d5", hex(consts.NS.PLUGIN))
  end)

  it("encodes a peer record and the announce signature (V4)", function()
    assert.are.equal("8a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c", hex(kp1.public_key))
    local peer = { public_key = kp1.public_key, relay_addresses = {} }
    assert.are.equal(hex(kp1.public_key) .. "00", hex(compact.encode(hm.peer, peer)))
    local ann = { peer = peer }
    local inner = crypto.hash_batch({ target, ID_49738, token, compact.encode(hm.peer, peer), "" })
    assert.are.equal("0cc5f6e19a349e2e77c35d9400818cc4c2da3381a459ecdda54db32da594240e", hex(inner))
    local sig = signing.sign_announce(target, token, ID_49738, ann, kp1)
    assert.are.equal("f7983c89f0d9639b850789b969a563361d361368d5699264301a31e79dd7f69be7f8828efb46738cfe5856c805d73f96794ba8f782f896320f00052a66377405", hex(sig))
    ann.signature = sig
    local value = compact.encode(hm.announce, ann)
    assert.are.equal("05" .. hex(kp1.public_key) .. "00" .. hex(sig), hex(value))
    local back = assert(compact.decode(hm.announce, value))
    assert.are.equal(kp1.public_key, back.peer.public_key)
    assert.are.equal(sig, back.signature)
    assert.are.equal(0, back.bump)
    assert.is_true(signing.verify_announce(back.signature, target, token, ID_49738, back, consts.NS.ANNOUNCE))
    assert.is_false(signing.verify_announce(back.signature, target, token, ID_49738, back, consts.NS.UNANNOUNCE))
    local unsig = signing.sign_unannounce(target, token, ID_49738, { peer = peer }, kp1)
    assert.are.equal("15d8a0916bd5ea886a92b078377d74086d0dca7c572141d3c02cfcaf10c6315c55b128531c825faae33ce39306588f54c5a175105b1fd03040b45a59de3bd307", hex(unsig))
  end)

  it("signs mutable values (V4)", function()
    assert.are.equal("050568656c6c6f", hex(compact.encode(hm.mutable_signable, { seq = 5, value = "hello" })))
    local sig = signing.sign_mutable(5, "hello", kp1)
    assert.are.equal("563f636d6d357642b088e989ccaf880f196dc28dca9e6bc00ff9612ce20eeef535aed98997424eb6caabd42545691df10e1ab9132748c1012c963869db33e406", hex(sig))
    assert.is_true(signing.verify_mutable(sig, 5, "hello", kp1.public_key))
    assert.is_false(signing.verify_mutable(sig, 6, "hello", kp1.public_key))
    local put = compact.encode(hm.mutable_put_request, { public_key = kp1.public_key, seq = 5, value = "hello", signature = sig })
    local back = assert(compact.decode(hm.mutable_put_request, put))
    assert.are.equal("hello", back.value)
    assert.are.equal(5, back.seq)
    local get = compact.encode(hm.mutable_get_response, { seq = 5, value = "hello", signature = sig })
    assert.are.equal("050568656c6c6f" .. hex(sig), hex(get))
  end)

  it("hashes a server key to its connect target (V4)", function()
    assert.are.equal("c5e21ab1c9f6022d81c3b25e3436cb7f1df77f9652ae3e1310c28e621dd87b4c", hex(crypto.hash(kp1.public_key)))
  end)

  it("encodes lookupRawReply (V4)", function()
    local record = compact.encode(hm.peer, { public_key = kp1.public_key, relay_addresses = { { host = "127.0.0.1", port = 49738 } } })
    local s = compact.encode(hm.lookup_raw_reply, { peers = { record }, bump = 0 })
    assert.are.equal("01" .. hex(kp1.public_key) .. "01" .. "7f0000014ac2" .. "00", hex(s))
    local back = assert(compact.decode(hm.lookup_raw_reply, s))
    assert.are.equal(1, #back.peers)
    assert.are.equal(49738, back.peers[1].relay_addresses[1].port)
    -- the bump is optional on the wire
    back = assert(compact.decode(hm.lookup_raw_reply, s:sub(1, -2)))
    assert.are.equal(0, back.bump)
  end)

  it("encodes handshake and holepunch (V4)", function()
    local s = compact.encode(hm.handshake, { mode = hm.FROM_RELAY, noise = "\170\187", peer_address = { host = "127.0.0.1", port = 40000 } })
    assert.are.equal("010202aabb7f000001409c", hex(s))
    local back = assert(compact.decode(hm.handshake, s))
    assert.are.equal(2, back.mode)
    assert.are.equal("\170\187", back.noise)
    assert.are.equal(40000, back.peer_address.port)
    assert.is_nil(back.relay_address)
    s = compact.encode(hm.holepunch, { mode = 0, id = 3, payload = "\204\221", peer_address = { host = "1.2.3.4", port = 5 } })
    assert.are.equal("01000302ccdd010203040500", hex(s))
    back = assert(compact.decode(hm.holepunch, s))
    assert.are.equal(3, back.id)
    assert.are.equal("1.2.3.4", back.peer_address.host)
  end)

  it("encodes the noise payloads (V2b)", function()
    local client = {
      version = 1,
      error = 0,
      firewall = consts.FIREWALL.OPEN,
      addresses4 = { { host = "127.0.0.1", port = 40001 } },
      udx = { id = 0x11223344, seq = 0 },
      secret_stream = {},
    }
    assert.are.equal("011a0001017f000001419c0100fe443322110001", hex(compact.encode(hm.noise_payload, client)))
    local server = {
      holepunch = { id = 0, relays = { { relay_address = { host = "10.0.0.1", port = 1000 }, peer_address = { host = "1.2.3.4", port = 2000 } } } },
      udx = { reusable_socket = true, id = 7 },
      secret_stream = {},
    }
    local s = compact.encode(hm.noise_payload, server)
    assert.are.equal("0119000000010a000001e80301020304d0070101070001", hex(s))
    local back = assert(compact.decode(hm.noise_payload, s))
    assert.are.equal(1, back.version)
    assert.are.equal(7, back.udx.id)
    assert.is_true(back.udx.reusable_socket)
    assert.are.equal("1.2.3.4", back.holepunch.relays[1].peer_address.host)
    assert.are.same({}, back.addresses4)
    -- another version decodes to defaults
    back = assert(compact.decode(hm.noise_payload, "\2\255\255"))
    assert.are.equal(2, back.version)
    assert.is_nil(back.udx)
  end)

  it("round-trips holepunchPayload and pluginRequest", function()
    local p = { error = 0, firewall = 2, round = 1, punching = true, addresses = { { host = "5.6.7.8", port = 9 } }, token = string.rep("t", 32) }
    local back = assert(compact.decode(hm.holepunch_payload, compact.encode(hm.holepunch_payload, p)))
    assert.is_true(back.punching)
    assert.is_false(back.connected)
    assert.are.equal(2, back.firewall)
    assert.are.equal(9, back.addresses[1].port)
    assert.are.equal(p.token, back.token)
    assert.is_nil(back.remote_token)
    local pr = { plugin = "echo", version = 1, command = 2, value = "v" }
    back = assert(compact.decode(hm.plugin_request, compact.encode(hm.plugin_request, pr)))
    assert.are.same(pr, back)
  end)

  it("fails every truncation of every message", function()
    local sig = string.rep("s", 64)
    local samples = {
      { hm.announce, { peer = { public_key = kp1.public_key, relay_addresses = { { host = "1.1.1.1", port = 1 } } }, refresh = target, signature = sig, bump = 7 } },
      { hm.mutable_put_request, { public_key = kp1.public_key, seq = 300, value = "v", signature = sig } },
      { hm.handshake, { mode = 1, noise = "xyz", peer_address = { host = "1.1.1.1", port = 1 }, relay_address = { host = "2.2.2.2", port = 2 } } },
      { hm.noise_payload, { holepunch = { id = 1, relays = {} }, addresses4 = { { host = "1.1.1.1", port = 1 } }, udx = { id = 1 }, secret_stream = {}, relay_through = { public_key = target, token = token }, relay_addresses = {} } },
    }
    for _, sample in ipairs(samples) do
      local s = compact.encode(sample[1], sample[2])
      assert.is_table(compact.decode(sample[1], s))
      for i = 0, #s - 1 do
        local v, err = compact.decode(sample[1], s:sub(1, i))
        assert.is_nil(v)
        assert.is_string(err)
      end
    end
  end)
end)
