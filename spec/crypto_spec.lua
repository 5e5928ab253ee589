-- core.crypto / ludx.crypto through Lua: the hyperswarm vectors (V1-V4,
-- namespaces, stream ids), the Noise handshake and framer objects, and
-- argument checking.
local crypto = require "ludx.crypto"
local C = require("ludx.core").crypto

-- Flips one bit of the last byte: writing a fixed byte there left a random tag unchanged 1 time in 256.
local function flip_last(s)
  return s:sub(1, -2) .. string.char(require("bit").bxor(s:byte(-1), 1))
end

local hex, unhex = crypto.hex, crypto.unhex

local function seed(n) return string.rep(string.char(n), 32) end
local kp = {}
for n = 1, 4 do kp[n] = crypto.keypair(seed(n)) end

-- Appendix V2a (Noise XX, empty prologue, I = seed 1, R = seed 2, ephemerals seed 3 / seed 4)
local XX = {
  h_init = "ccb02d59b57b48c5bc64fafb7fc70680eb907d6830a9b039c39136733f44bbd6ebcddac9b202ff6bf777f1b1c8cb8cb964038751f8f11d8adb8ec976fea28f18",
  msg1 = "ed4928c628d1c2c6eae90338905995612959273a5c63f93636c14614ac8737d1",
  msg2 = "ca93ac1705187071d67b83c7ff0efe8108e8ec4530575d7726879333dbdabe7c 8924380c5066a7dcffff1174cebcbfefc17dafd675f6dc2e688de867ff96c431a1fcb7f80997fba29d5bbc64a50e8d74 e82bc092a89c62eacaf68db17bb5d0b5",
  msg3 = "585b6e8320c9dfc6764d48e242b912333244a85ae8769c90ee632f1d3bf6945d6d4729ee9c716f0f82946ce191158c48 0d53f508585c93bb66354bbee6b8bdad",
  hash = "aa42bcea44d843e3803e549191ae7eac847a85dccf21ef3918a7cf228d87b7889b194cdb190b8b2cf82daf543e71e86871532b84ba1d7982489eb3040dcfc412",
  i_tx = "36e72ba85cd0a2b5e7c9f44704a1757d7230c30dd39736e46f2190fcd1300c13",
  i_rx = "29c4a931005b47aaf766f5ec7a119810eb15399b8612e79071f77447826dee17",
  id_i = "a1d1ba79814a026a75d3d0d86df2d767c48c1a62a59d9e5d47876ab9b0867673",
  id_r = "87964fe510a0eef9766102bc05eb51bd18d4baf59ec0fe2e51fa323b19101cf6",
  send_ir = "ce10a1e3cc0ad57bdcb2e7b64917df0259b27032784b4dcf246f5a728d327d0f",
  send_ri = "09e50ea37afaafacfc2bf3239cbfd18502269676975b793c08f7945b7d02e8ff",
}

-- Appendix V2b (Noise IK as hyperdht runs it)
local IK = {
  client_payload = "011a0001017f000001419c0100fe443322110001",
  server_payload = "011a0001017f000001429c0100fe887766550001",
  h_init = "c790644db568c8ae7f0132299e4720b8181e1ad03317d9b245ebecdc01d27c378963e8709830f7f50cdffbd297cef921bf5d7a290d282cc055252457b616e708",
  msg1 = "ed4928c628d1c2c6eae90338905995612959273a5c63f93636c14614ac8737d1 605c88a9067c5f85bd7499907d5c869548dd90bed5350bb2e7cb47efe61f60bc315838e49205f95b5a618d7c8c212eeb f0fd5de81ac21376e31d91dd5c45e3c7b2c9804e15965f95e776c2f60af087d18f4760cc",
  msg2 = "ca93ac1705187071d67b83c7ff0efe8108e8ec4530575d7726879333dbdabe7c f6c2821870b51f7d0cea6b064e8ceeb3cffe66540717c73e5e107d81d9b54669472be99f",
  hash = "62fd63ee2ddae4918aae583b95c4db9a7654473729133bac0f83ddbc0960714f984c5edf2ba3c4f1a74584da706c03b03c7a57f37731228b328dd0840631d758",
  i_tx = "cc00d99bd3a15a6779df38fd42fd25a84d73264023e7c1da95cf3bcbdce9c210",
  i_rx = "78dd48ecef5d11fd953197694a8ee2d9f8d86d49d56d856e3dd7c8e78047826b",
  id_i = "84f68294db0b39ca8be5147bcf3b3ed7a3a712f12cea466bb1d713b660298763",
  id_r = "6c7446df7c73c9b8d2c5e26480566ae88e23a5dd2107bd09597dd0d8e843579c",
  holepunch = "b24ce7058997ff29fc8d47b6566dfdbba6d816eae434dab632a9c9c819c3e820",
}

-- Appendix V3 (frames of a Node secret-stream session with the V2a keys)
local V3 = {
  i_header = "380000 a1d1ba79814a026a75d3d0d86df2d767c48c1a62a59d9e5d47876ab9b0867673 1e330d7d7f70376be10735b9ca24175a82265b46c603d4ec",
  i_hello = "1600001001d3f70edcd14cbad1e1eb5696d7544bb8be035984",
  i_empty = "1100007afb00e1f7246b14689feec9528028bf05",
  r_header = "380000 87964fe510a0eef9766102bc05eb51bd18d4baf59ec0fe2e51fa323b19101cf6 753cef8803a7a431775523b8e4d94c88bb89b2c67f11d47a",
  r_world = "1600000e6464075d9a4d51ec9072d808888f8c257979bcf729",
}

local function xx_pair()
  local i = C.noise("XX", true, kp[1], "", nil)
  local r = C.noise("XX", false, kp[2], "", nil)
  assert(i:set_ephemeral(kp[3]))
  assert(r:set_ephemeral(kp[4]))
  return i, r
end

describe("crypto primitives", function()
  it("namespaces match the constants", function()
    local want = {
      INITIATOR = "a931a0155b5c09e6d28628236af83c4b8a6af9af60986edeede9dc5d63192bf7",
      RESPONDER = "742c9d833d430af4c48a8705e91631eecf295442bbca18996e597097723b1061",
      SEND = "aab97d097471f56651b0460ffc8aaa7d3342f7377597d60b925a1dac689adcbf",
      ANNOUNCE = "36386adddf9f6fd60db83a6f42fc159d1146aa8644037664230aaa1f0179d497",
      UNANNOUNCE = "ded293cd93fb395e756ecf5fff426529e72c36eacc22e5ed944d9099a2561e32",
      MUTABLE_PUT = "668e823edd5ce7f5338d68bf1161f4a3c28ce437ee2ab49efd30d99366039b1e",
      PEER_HANDSHAKE = "14d6d4b49214ab1033ed204976caa258bae9e1e8543b9ad1fd996a910b0c4e3a",
      PEER_HOLEPUNCH = "f1191cd5e67b10b54a507033280ed1ff0e12278268d5679c8f93d417210d168b",
      PLUGIN = "6b8a2a8623f28c6c02a1e22abe515ce31cafd9af61d4b69970639aa7eb96a8d5",
    }
    for name, h in pairs(want) do assert.are.equal(h, hex(crypto.NS[name]), name) end
    assert.are.equal(want.ANNOUNCE, hex(C.ns("hyperswarm/dht", 4)))
    local h = hex(C.blake2b("hyperswarm/secret-stream"))
    assert.are.equal("03b061a9", h:sub(1, 8))
    assert.are.equal("c155", h:sub(-4))
  end)

  it("seed key pairs give the vector public keys", function()
    local pks = {
      "8a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c",
      "8139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b394",
      "ed4928c628d1c2c6eae90338905995612959273a5c63f93636c14614ac8737d1",
      "ca93ac1705187071d67b83c7ff0efe8108e8ec4530575d7726879333dbdabe7c",
    }
    for n = 1, 4 do
      assert.are.equal(pks[n], hex(kp[n].public_key))
      assert.are.equal(seed(n) .. kp[n].public_key, kp[n].secret_key)
    end
    local pk, sk = C.keypair()
    assert.are.equal(32, #pk)
    assert.are.equal(64, #sk)
    assert.are_not.equal(pk, (C.keypair()))
  end)

  it("V1: noise-curve-ed DH is symmetric and not X25519", function()
    local want = "5612509e82825296cbaaae306ffe1088cbbe200de8ba23dad06f67e607f861df"
    assert.are.equal(want, hex(C.dh(kp[1].secret_key, kp[2].public_key)))
    assert.are.equal(want, hex(C.dh(kp[2].secret_key, kp[1].public_key)))
    -- the identity point and a non-canonical encoding are rejected
    local ok, msg, code = C.dh(kp[1].secret_key, unhex("01" .. string.rep("00", 31)))
    assert.is_nil(ok)
    assert.are.equal("EBADKEY", code)
    assert.is_string(msg)
    assert.are.equal("EBADKEY", select(3, C.dh(kp[1].secret_key, string.rep("\255", 32))))
  end)

  it("V4: signatures and hashes of the DHT records", function()
    local node_id = C.blake2b(unhex("7f0000014ac2"))
    assert.are.equal("ea50f556", hex(node_id):sub(1, 8))
    assert.are.equal("ac6c", hex(node_id):sub(-4))
    local target, token = string.rep("\7", 32), string.rep("\17", 32)
    local peer = kp[1].public_key .. "\0"
    local inner = C.blake2b_batch({ target, node_id, token, peer, "" })
    assert.are.equal("0cc5f6e19a349e2e77c35d9400818cc4c2da3381a459ecdda54db32da594240e", hex(inner))
    assert.are.equal(inner, C.blake2b(target .. node_id .. token .. peer))
    local signable = crypto.NS.ANNOUNCE .. inner
    local sig = C.sign(signable, kp[1].secret_key)
    assert.are.equal("f7983c89f0d9639b850789b969a563361d361368d5699264301a31e79dd7f69be7f8828efb46738cfe5856c805d73f96794ba8f782f896320f00052a66377405", hex(sig))
    assert.is_true(C.verify(sig, signable, kp[1].public_key))
    assert.is_false(C.verify(sig, "x" .. signable:sub(2), kp[1].public_key))
    assert.is_false(C.verify(sig, signable, kp[2].public_key))
    assert.is_false(C.verify(sig:sub(2), signable, kp[1].public_key)) -- short signature from a peer
    assert.are.equal("15d8a0916bd5ea886a92b078377d74086d0dca7c572141d3c02cfcaf10c6315c55b128531c825faae33ce39306588f54c5a175105b1fd03040b45a59de3bd307",
      hex(C.sign(crypto.NS.UNANNOUNCE .. inner, kp[1].secret_key)))
    local mut = crypto.NS.MUTABLE_PUT .. C.blake2b(unhex("050568656c6c6f"))
    assert.are.equal("563f636d6d357642b088e989ccaf880f196dc28dca9e6bc00ff9612ce20eeef535aed98997424eb6caabd42545691df10e1ab9132748c1012c963869db33e406",
      hex(C.sign(mut, kp[1].secret_key)))
    assert.are.equal("c5e21ab1c9f6022d81c3b25e3436cb7f1df77f9652ae3e1310c28e621dd87b4c", hex(C.blake2b(kp[1].public_key)))
  end)

  it("blake2b takes an output length and a key; batch equals the concatenation", function()
    assert.are.equal(64, #C.blake2b("x", 64))
    assert.are.equal(16, #C.blake2b("x", 16))
    local key = string.rep("k", 32)
    assert.are_not.equal(C.blake2b("abc"), C.blake2b("abc", 32, key))
    local parts = {}
    for i = 1, 40 do parts[i] = string.rep(string.char(i), i) end
    assert.are.equal(C.blake2b(table.concat(parts), 64, key), C.blake2b_batch(parts, 64, key))
    assert.are.equal(C.blake2b(""), C.blake2b_batch({}))
  end)

  it("secretbox seals and opens, and rejects tampering", function()
    local key, nonce = C.randombytes(32), C.randombytes(24)
    local box = C.secretbox("holepunch payload", nonce, key)
    assert.are.equal(17 + 16, #box)
    assert.are.equal("holepunch payload", C.secretbox_open(box, nonce, key))
    assert.are.equal("", C.secretbox_open(C.secretbox("", nonce, key), nonce, key))
    local bad = string.char((box:byte(1) + 1) % 256) .. box:sub(2)
    assert.are.same({ nil, "Message failed to decrypt", "EDECRYPT" }, { C.secretbox_open(bad, nonce, key) })
    assert.are.equal("EDECRYPT", select(3, C.secretbox_open("short", nonce, key)))
    assert.are.equal("EDECRYPT", select(3, C.secretbox_open(box, C.randombytes(24), key)))
  end)

  it("randombytes is deterministic with a seed", function()
    assert.are.equal(100, #C.randombytes(100))
    assert.are.equal("", C.randombytes(0))
    assert.are.equal(C.randombytes(64, seed(9)), C.randombytes(64, seed(9)))
    assert.are_not.equal(C.randombytes(64, seed(9)), C.randombytes(64, seed(8)))
  end)

  it("hex round trips", function()
    assert.are.equal("00ff10", hex("\0\255\16"))
    assert.are.equal("\0\255\16", unhex("00 ff\n10"))
    assert.has_error(function() unhex("abc") end)
  end)
end)

describe("Noise handshake", function()
  it("V2a: XX messages, hash, keys and stream ids", function()
    local i, r = xx_pair()
    assert.are.equal(XX.h_init, hex(i:hash()))
    assert.are.equal(XX.h_init, hex(r:hash()))
    assert.are.equal("send", i:status())
    assert.are.equal("recv", r:status())
    local m1 = assert(i:send())
    assert.are.equal(XX.msg1, hex(m1))
    assert.are.equal("", r:recv(m1))
    local m2 = assert(r:send(""))
    assert.are.equal(unhex(XX.msg2), m2)
    assert.are.equal("", i:recv(m2))
    local m3 = assert(i:send())
    assert.are.equal(unhex(XX.msg3), m3)
    assert.is_true(i:complete())
    assert.is_false(r:complete())
    assert.are.equal("", r:recv(m3))
    assert.are.equal("done", r:status())
    local a, b = i:result(), r:result()
    assert.are.equal(XX.hash, hex(a.hash))
    assert.are.equal(a.hash, b.hash)
    assert.are.equal(XX.i_tx, hex(a.tx))
    assert.are.equal(XX.i_rx, hex(a.rx))
    assert.are.equal(a.tx, b.rx)
    assert.are.equal(a.rx, b.tx)
    assert.are.equal(kp[2].public_key, a.remote_public_key)
    assert.are.equal(kp[1].public_key, b.remote_public_key)
    assert.are.equal(kp[1].public_key, a.public_key)
    assert.are.equal(XX.id_i, hex(C.stream_id(a.hash, true)))
    assert.are.equal(XX.id_r, hex(C.stream_id(a.hash, false)))
    -- the unordered-send keys of A.5
    assert.are.equal(XX.send_ir, hex(C.blake2b(crypto.NS.INITIATOR .. crypto.NS.SEND, 32, a.hash)))
    assert.are.equal(XX.send_ri, hex(C.blake2b(crypto.NS.RESPONDER .. crypto.NS.SEND, 32, a.hash)))
  end)

  it("V2b: IK with the hyperdht prologue and payloads", function()
    local i = C.noise("IK", true, kp[1], crypto.NS.PEER_HANDSHAKE, kp[2].public_key)
    local r = crypto.handshake { pattern = "IK", initiator = false, keypair = kp[2], prologue = crypto.NS.PEER_HANDSHAKE }
    i:set_ephemeral(kp[3])
    r:set_ephemeral(kp[4])
    assert.are.equal(IK.h_init, hex(i:hash()))
    assert.are.equal(IK.h_init, hex(r:hash()))
    local m1 = assert(i:send(unhex(IK.client_payload)))
    assert.are.equal(unhex(IK.msg1), m1)
    assert.are.equal(IK.client_payload, hex(r:recv(m1)))
    local m2 = assert(r:send(unhex(IK.server_payload)))
    assert.are.equal(unhex(IK.msg2), m2)
    assert.is_true(r:complete())
    assert.are.equal(IK.server_payload, hex(i:recv(m2)))
    local a, b = i:result(), r:result()
    assert.are.equal(IK.hash, hex(a.hash))
    assert.are.equal(IK.i_tx, hex(a.tx))
    assert.are.equal(IK.i_rx, hex(a.rx))
    assert.are.equal(a.tx, b.rx)
    assert.are.equal(kp[1].public_key, b.remote_public_key)
    assert.are.equal(IK.id_i, hex(C.stream_id(a.hash, true)))
    assert.are.equal(IK.id_r, hex(C.stream_id(b.hash, false)))
    assert.are.equal(IK.holepunch, hex(C.holepunch_secret(a.hash)))
  end)

  it("bad messages fail the handshake with a code, and it stays failed", function()
    local i, r = xx_pair()
    local m1 = i:send()
    -- XX msg1 has no key yet: a payload there is plaintext (A.1)
    local _, r0 = xx_pair()
    assert.are.equal("x", r0:recv(m1 .. "x"))
    assert.are.same({ nil, "Noise handshake failed", "EHANDSHAKE" }, { r:recv(m1:sub(1, 31)) })
    assert.are.equal("failed", r:status())
    assert.are.same({ "failed", "Noise handshake failed", "EHANDSHAKE" }, { r:status() })
    assert.are.equal("EHANDSHAKE", select(3, r:recv(m1)))
    assert.are.equal("EHANDSHAKE", select(3, r:send()))
    assert.are.equal("ESTATE", select(3, r:result()))

    -- a flipped bit in msg2 and msg3
    for _, which in ipairs({ 2, 3 }) do
      local a, b = xx_pair()
      b:recv(a:send())
      local m2 = b:send()
      if which == 2 then
        local bad = m2:sub(1, 40) .. string.char((m2:byte(41) + 1) % 256) .. m2:sub(42)
        assert.are.equal("EHANDSHAKE", select(3, a:recv(bad)))
      else
        a:recv(m2)
        local m3 = a:send()
        assert.are.equal("EHANDSHAKE", select(3, b:recv(flip_last(m3))))
      end
    end

    -- an invalid ephemeral point fails the DH of the reply
    local _, r2 = xx_pair()
    assert.are.equal("", r2:recv(unhex("01" .. string.rep("00", 31))))
    assert.are.equal("EBADKEY", select(3, r2:send()))

    -- a wrong expected remote key
    local a = C.noise("XX", true, kp[1], "", kp[3].public_key)
    local b = C.noise("XX", false, kp[2], "", nil)
    b:recv(a:send())
    assert.are.same({ nil, "remote public key does not match the expected key", "EREMOTEKEY" }, { a:recv(b:send()) })

    -- not our turn: an error, the handshake goes on
    local c = C.noise("XX", false, kp[2])
    assert.are.equal("ESTATE", select(3, c:send()))
    assert.are.equal("recv", c:status())
    -- random garbage of every length never raises
    for n = 0, 200 do
      local h = C.noise("XX", false, kp[2])
      local p, _, code = h:recv(C.randombytes(n, seed(n % 256)))
      if n < 32 then assert.are.equal("EHANDSHAKE", code) else assert.are.equal(n - 32, #p) end
      local g = C.noise("XX", true, kp[1])
      g:send()
      local q, _, code2 = g:recv(C.randombytes(n, seed(n % 256)))
      assert.is_nil(q)
      assert.is_true(code2 == "EHANDSHAKE" or code2 == "EBADKEY", code2)
    end
  end)

  it("checks its arguments and names them", function()
    assert.has_error(function() C.noise("XY", true, kp[1]) end, "bad argument 'pattern' to 'noise' ('XX' or 'IK' expected, got 'XY')")
    assert.has_error(function() C.noise("XX", 1, kp[1]) end, "bad argument 'initiator' to 'noise' (boolean expected, got number)")
    assert.has_error(function() C.noise("XX", true, { public_key = "x" }) end)
    assert.has_error(function() C.noise("IK", true, kp[1]) end)
    assert.has_error(function() C.noise("XX", true, kp[1], 5) end, "bad argument 'prologue' to 'noise' (string expected, got number)")
    local h = C.noise("XX", true)
    assert.has_error(function() h:recv(nil) end, "bad argument 'message' to 'recv' (string expected, got nil)")
    assert.has_error(function() h:send(12) end, "bad argument 'payload' to 'send' (string expected, got number)")
    h:destroy()
    assert.has_error(function() h:send() end, "handshake is closed")
  end)
end)

describe("framer", function()
  it("V3: decrypts the frames of a Node session in any chunking", function()
    local i_tx, i_rx, hash = unhex(XX.i_tx), unhex(XX.i_rx), unhex(XX.hash)
    local wire = unhex(V3.i_header .. V3.i_hello .. V3.i_empty)
    for _, step in ipairs({ #wire, 1, 7 }) do
      local r = C.framer()
      assert.are.equal(59, #assert(r:start(false, i_rx, i_tx, hash)))
      local got = {}
      for at = 1, #wire, step do
        got[#got + 1] = assert(r:feed(wire:sub(at, at + step - 1)))
      end
      assert.are.equal("hello", table.concat(got))
      assert.is_true(r:ready())
      local st = r:stats()
      assert.are.equal(2, st.frames_in)
      assert.are.equal(1, st.keepalives_in)
      assert.are.equal(5, st.bytes_in)
      assert.are.equal(0, r:pending())
    end
    local i = C.framer()
    local header = i:start(true, i_tx, i_rx, hash)
    assert.are.equal(unhex("380000" .. XX.id_i), header:sub(1, 35))
    assert.are.equal("world", i:feed(unhex(V3.r_header .. V3.r_world)))
  end)

  it("V3: a Noise responder reads the whole initiator transcript", function()
    local r = C.noise("XX", false, kp[2])
    r:set_ephemeral(kp[4])
    local f = C.framer()
    local wire = C.frame(unhex(XX.msg1)) .. C.frame(unhex(XX.msg3)) .. unhex(V3.i_header .. V3.i_hello .. V3.i_empty)
    local data, m = f:feed(wire)
    assert.are.equal("", data)
    assert.are.equal(unhex(XX.msg1), m)
    assert.are.equal(#wire - 35, f:pending())
    r:recv(m)
    assert.are.equal(unhex(XX.msg2), r:send())
    data, m = f:feed("")
    assert.are.equal("", data)
    assert.are.equal(unhex(XX.msg3), m)
    r:recv(m)
    local res = r:result()
    f:start(false, res.tx, res.rx, res.hash)
    assert.are.equal("hello", f:feed(""))
  end)

  it("round trips, and any bad input fails it with a code and no data", function()
    local hash = C.randombytes(64)
    local k1, k2 = C.randombytes(32), C.randombytes(32)
    local a, b = C.framer(), C.framer()
    local ha = a:start(true, k1, k2, hash)
    local hb = b:start(false, k2, k1, hash)
    local f1, f2 = a:encrypt("one"), a:encrypt("two")
    assert.are.equal("onetwo", b:feed(ha .. f1 .. f2))
    assert.are.equal("x", a:feed(hb .. b:encrypt("x")))
    assert.are.equal(20, #a:encrypt(""))
    -- a replayed frame, after good ones in the same feed: nothing comes out
    local f3 = a:encrypt("three")
    assert.are.same({ nil, "Message failed to decrypt", "EDECRYPT" }, { b:feed(f3 .. f3) })
    assert.are.equal("EDECRYPT", select(3, b:feed("")))
    assert.are.equal("EDECRYPT", select(2, b:error()))
    -- bad header frames
    local c = C.framer()
    c:start(false, k2, k1, hash)
    assert.are.equal("EHEADER", select(3, c:feed("\57\0\0")))
    local d = C.framer()
    d:start(true, k1, k2, hash)
    assert.are.equal("ESTREAMID", select(3, d:feed(ha)))
    -- an oversize write is refused, the framer goes on
    assert.are.same({ nil, "Message is too large for an atomic write", "ETOOLARGE" }, { a:encrypt(string.rep("x", C.MAX_WRITE + 1)) })
    assert.are.equal(24, #a:encrypt("fine"))
    -- handshake frames: 0 and > 65535 are invalid lengths
    assert.are.equal("EFRAME", select(3, C.framer():feed("\0\0\0")))
    assert.are.equal("EFRAME", select(3, C.framer():feed("\0\0\1")))
    -- not started: no keys to encrypt with
    assert.are.equal("ESTATE", select(3, C.framer():encrypt("x")))
    assert.are.equal("ESTATE", select(3, a:start(true, k1, k2, hash)))
  end)

  it("random bytes in any state never raise and never yield plaintext", function()
    local hash, k1, k2 = C.randombytes(64), C.randombytes(32), C.randombytes(32)
    local header = C.framer():start(true, k1, k2, hash)
    for n = 1, 300 do
      local junk = C.randombytes(n * 7 % 300, seed(n % 256))
      for state = 1, 3 do
        local f = C.framer()
        if state > 1 then f:start(false, k2, k1, hash) end
        local first = state == 3 and header or ""
        local data, m, code = f:feed(first .. junk)
        for _ = 1, 3 do
          if data == nil or m == nil then break end
          data, m, code = f:feed("") -- handshake frames: go on with the rest
        end
        if data == nil then
          assert.is_string(code)
        else
          assert.are.equal("", data)
        end
      end
    end
  end)

  it("checks its arguments and names them", function()
    local f = C.framer()
    assert.has_error(function() f:feed(5) end, "bad argument 'data' to 'feed' (string expected, got number)")
    assert.has_error(function() f:start("yes") end, "bad argument 'initiator' to 'start' (boolean expected, got string)")
    assert.has_error(function() f:start(true, "short", "", "") end, "bad argument 'tx' to 'start' (32-byte string expected, got 5 bytes)")
    assert.has_error(function() C.blake2b(nil) end, "bad argument 'data' to 'blake2b' (string expected, got nil)")
    assert.has_error(function() C.blake2b("x", 8) end)
    assert.has_error(function() C.blake2b("x", 32, "short") end)
    assert.has_error(function() C.blake2b_batch({ "a", 1 }) end)
    assert.has_error(function() C.keypair("short") end)
    assert.has_error(function() crypto.keypair(5) end, "bad argument 'seed' to 'keypair' (32-byte string expected, got number)")
    assert.has_error(function() C.sign("m", "short") end)
    assert.has_error(function() C.verify("s", "m", "short") end)
    assert.has_error(function() C.secretbox("m", "n", string.rep("k", 32)) end)
    assert.has_error(function() C.ns("x", 256) end)
    assert.has_error(function() C.stream_id(string.rep("h", 64), nil) end)
    assert.has_error(function() C.randombytes(-1) end)
    f:destroy()
    f:destroy()
    assert.has_error(function() f:feed("") end, "framer is closed")
  end)
end)

describe("unordered datagrams", function()
  it("seal in one direction, open in the other, as A.5 lays them out", function()
    local hash = unhex(XX.hash)
    local i, r = C.unordered(true, hash), C.unordered(false, hash)
    local d = i:seal("ping")
    assert.are.equal(4 + 24, #d)
    assert.are.equal("ping", r:open(d))
    -- counter(8) || secretbox(msg, nonce = counter || 16 zeros, key I->R)
    local nonce = d:sub(1, 8) .. string.rep("\0", 16)
    assert.are.equal("ping", C.secretbox_open(d:sub(9), nonce, unhex(XX.send_ir)))
    local d2 = i:seal("ping")
    assert.are_not.equal(d, d2)
    assert.are.equal("pong", i:open(r:seal("pong")))
    assert.are.equal("EDECRYPT", select(3, i:open(d)))
    assert.are.equal("EDECRYPT", select(3, r:open(flip_last(d))))
    assert.are.equal("EFRAME", select(3, r:open(string.rep("x", 23))))
    assert.are.equal("", r:open(i:seal("")))
  end)
end)
