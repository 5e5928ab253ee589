-- ludx.secretstream over ludx.pipe: handshakes, bulk transfer, the external
-- handshake of hyperdht, every kind of bad input, misuse and keep-alives.
local ludx = require "ludx"
local pipe = require "ludx.pipe"
local secretstream = require "ludx.secretstream"
local crypto = require "ludx.crypto"
local H = require "helper"
local run = H.run

local C = crypto -- core.crypto through ludx.crypto
local bxor, lshift = require("bit").bxor, require("bit").lshift

local function seed(n) return string.rep(string.char(n), 32) end

-- Reads until EOF or an error; returns the bytes, then nil or msg, code.
local function read_all(s, timeout)
  local parts = {}
  while true do
    local chunk, msg, code = s:read(nil, timeout or 5000)
    if chunk == nil then return table.concat(parts), msg, code end
    parts[#parts + 1] = chunk
  end
end

local function pair(opts_a, opts_b, pipe_opts)
  local a, b = pipe.pair(pipe_opts)
  local x = secretstream.wrap(a, opts_a or { initiator = true })
  local y = secretstream.wrap(b, opts_b or { initiator = false })
  return x, y, a, b
end

-- Sends `total` bytes from x to y in random write sizes (deterministic),
-- then finishes; y reads to EOF; both sides' bytes are hash-compared.
local function transfer(x, y, total, rng_seed, max_write)
  local block = C.randombytes(1024 * 1024, seed(rng_seed))
  local rnd = rng_seed * 7919
  local function random(n)
    rnd = (rnd * 1103515245 + 12345) % 2147483648
    return rnd % n
  end
  local writer = ludx.spawn("writer", function()
    local sent, acc, acc_len, digests = 0, {}, 0, {}
    while sent < total do
      local n = math.min(total - sent, 1 + random(max_write))
      local off = random(#block - n + 1)
      local data = block:sub(off + 1, off + n)
      assert(x:write(data, 10000))
      acc[#acc + 1] = data
      acc_len = acc_len + n
      sent = sent + n
      if acc_len >= 256 * 1024 then
        digests[#digests + 1] = table.concat(acc)
        acc, acc_len = {}, 0
      end
    end
    digests[#digests + 1] = table.concat(acc)
    assert(x:finish(10000))
    return C.blake2b(table.concat(digests), 64)
  end)
  local parts, got = {}, 0
  while true do
    local chunk, msg, code = y:read(nil, 10000)
    if chunk == nil then
      assert(msg == nil, tostring(msg) .. " " .. tostring(code))
      break
    end
    parts[#parts + 1] = chunk
    got = got + #chunk
  end
  assert.are.equal(total, got)
  local want = assert(writer:join())
  assert.are.equal(C.hex(want), C.hex(C.blake2b(table.concat(parts), 64)))
  return true
end

local function flip(s, bit)
  local i = math.floor(bit / 8) + 1
  return s:sub(1, i - 1) .. string.char(bxor(s:byte(i), lshift(1, bit % 8))) .. s:sub(i + 1)
end

describe("secretstream", function()
  it("XX over a pipe: 10 MB each way in random write sizes, hash-checked", run(function()
    local ka, kb = secretstream.keypair(seed(1)), secretstream.keypair(seed(2))
    local x, y = pair({ initiator = true, keypair = ka }, { initiator = false, keypair = kb })
    assert(x:ready(5000))
    assert(y:ready(5000))
    assert.are.equal(ka.public_key, x.public_key)
    assert.are.equal(kb.public_key, x.remote_public_key)
    assert.are.equal(ka.public_key, y.remote_public_key)
    assert.are.equal(64, #x.handshake_hash)
    assert.are.equal(x.handshake_hash, y.handshake_hash)
    local back = ludx.spawn("back", transfer, y, x, 10 * 1000 * 1000, 5, 300 * 1000)
    transfer(x, y, 10 * 1000 * 1000, 3, 200 * 1000)
    assert(back:join())
    local st = x:stats()
    assert.is_true(st.frames_out > 50)
    assert.are.equal(10 * 1000 * 1000, st.plaintext_out)
    assert.are.equal(10 * 1000 * 1000, st.plaintext_in)
    assert.is_true(st.bytes_written > st.plaintext_out) -- the pipe's own counter
    x:close()
    y:close()
  end, 120000))

  it("reads frames split into tiny raw chunks", run(function()
    local n = 0
    local x, y = pair(nil, nil, { chunk = function()
      n = n + 1
      return 1 + (n * 37) % 97
    end })
    transfer(x, y, 300 * 1000, 9, 5000)
    x:close()
    y:close()
  end))

  it("IK with the responder's key known to the initiator", run(function()
    local kr = secretstream.keypair(seed(2))
    local x, y = pair({ initiator = true, pattern = "IK", remote_public_key = kr.public_key },
      { initiator = false, pattern = "IK", keypair = kr })
    assert(x:write("over IK"))
    assert.are.equal("over IK", y:read(nil, 5000))
    assert.are.equal(x.public_key, y.remote_public_key)
    assert.are.equal(x.handshake_hash, y.handshake_hash)
    x:close()
    y:close()
  end))

  it("external handshake: no Noise frames, both send their header at once", run(function()
    local ki, kr = secretstream.keypair(seed(1)), secretstream.keypair(seed(2))
    -- the IK exchange hyperdht runs over the DHT
    local i = C.noise("IK", true, ki, C.NS.PEER_HANDSHAKE, kr.public_key)
    local r = C.noise("IK", false, kr, C.NS.PEER_HANDSHAKE)
    r:recv(i:send("client payload"))
    i:recv(r:send("server payload"))
    local ri, rr = i:result(), r:result()
    local a, b = pipe.pair()
    local x = secretstream.wrap(a, { initiator = true, handshake = ri })
    local y = secretstream.wrap(b, { initiator = false, handshake = rr })
    assert.is_true(x:ready(0))
    assert.are.equal(kr.public_key, x.remote_public_key)
    assert.are.equal(ri.hash, x.handshake_hash)
    assert(x:write("hello"))
    assert(y:write("world"))
    assert.are.equal("hello", y:read(nil, 5000))
    assert.are.equal("world", x:read(nil, 5000))
    -- the first bytes on the wire are the 59-byte header frame
    local tap_a, tap_b = pipe.pair()
    local z = secretstream.wrap(tap_a, { initiator = true, handshake = ri })
    local first = tap_b:read(59, 5000)
    assert.are.equal("\56\0\0" .. C.stream_id(ri.hash, true), first:sub(1, 35))
    z:close()
    x:close()
    y:close()
  end))

  it("wait_header returns once the peer's header frame arrived (external and XX)", run(function()
    local ki, kr = secretstream.keypair(seed(3)), secretstream.keypair(seed(4))
    local i = C.noise("IK", true, ki, C.NS.PEER_HANDSHAKE, kr.public_key)
    local r = C.noise("IK", false, kr, C.NS.PEER_HANDSHAKE)
    r:recv(i:send(""))
    i:recv(r:send(""))
    local ri, rr = i:result(), r:result()
    -- ready at once (the keys are known), but the peer has sent nothing yet
    local a, b = pipe.pair()
    local x = secretstream.wrap(a, { initiator = true, handshake = ri })
    assert.is_true(x:ready(0))
    local ok, _, code = x:wait_header(50)
    assert.is_nil(ok)
    assert.are.equal("ETIMEDOUT", code)
    -- the peer takes its end: its header frame comes
    local y = secretstream.wrap(b, { initiator = false, handshake = rr })
    assert.is_true(x:wait_header(5000))
    assert.is_true(y:wait_header(5000))
    assert.is_true(x:wait_header(0))
    -- a peer that ends before its header: EHEADER, not a wait until timeout
    local c, d = pipe.pair()
    local z = secretstream.wrap(c, { initiator = true, handshake = ri })
    d:finish()
    ok, _, code = z:wait_header(5000)
    assert.is_nil(ok)
    assert.are.equal("EHEADER", code)
    -- a Noise (XX) handshake: the header follows the last handshake message
    local p, q = pair()
    assert.is_true(p:wait_header(5000))
    assert.is_true(q:wait_header(5000))
    for _, s in ipairs({ x, y, z, p, q }) do s:close() end
    -- after close, every call says so
    ok, _, code = x:wait_header(0)
    assert.is_nil(ok)
    assert.are.equal("ECANCELED", code)
  end))

  it("queues writes made before the handshake and keeps their order", run(function()
    local x, y = pair()
    for i = 1, 5 do assert(x:write("w" .. i)) end
    assert(x:finish(5000))
    assert.are.equal("w1w2w3w4w5", (read_all(y)))
    y:close()
    x:close()
    -- past 1 MiB queued, write waits for the handshake; the order holds
    x, y = pair()
    local sent = {}
    for i = 1, 30 do
      sent[i] = string.rep(string.char(64 + i), 100 * 1000)
      assert(x:write(sent[i], 5000))
      if i == 5 then assert.is_falsy(x.is_ready) end
    end
    assert.is_true(x.is_ready)
    assert(x:finish(5000))
    assert.are.equal(table.concat(sent), (read_all(y)))
    x:close()
    y:close()
  end))

  it("half-close: a finished side still reads; the peer sees EOF after the data", run(function()
    local x, y = pair()
    assert(x:write("last words"))
    assert(x:finish(5000))
    assert.are.equal("last words", y:read(nil, 5000))
    assert.is_nil(y:read(nil, 5000))
    assert(y:write("reply"))
    assert(y:finish(5000))
    assert.are.same({ "reply" }, { read_all(x) })
    x:close()
    y:close()
  end))

  it("close is graceful: every frame written arrives, then EOF; later calls fail", run(function()
    local x, y = pair()
    assert(x:ready(5000))
    assert(y:ready(5000))
    for i = 1, 50 do assert(x:write(string.rep(string.char(i), 1000))) end
    assert.is_true(x:close(5000))
    local got = assert(read_all(y))
    assert.are.equal(50000, #got)
    assert.are.equal(string.rep(string.char(50), 1000), got:sub(-1000))
    assert.is_nil(y.err)
    assert.are.same({ nil, "stream is closed", "ECANCELED" }, { x:read() })
    assert.are.same({ nil, "stream is closed", "ECANCELED" }, { x:write("x") })
    assert.is_true(x:close())
    assert.is_true(y:close(5000))
  end))

  it("destroy resets the peer and ends every call", run(function()
    local x, y, a = pair()
    assert(x:ready(5000))
    x:destroy()
    assert.are.same({ "", "connection reset by peer", "ECONNRESET" }, { read_all(y) })
    assert.are.same({ nil, "connection reset by peer", "ECONNRESET" }, { y:write("x") })
    assert.are.same({ nil, "stream is closed", "ECANCELED" }, { x:write("x") })
    assert.are.same({ nil, "stream is closed", "ECANCELED" }, { x:read() })
    assert.are.same({ nil, "stream is closed", "ECANCELED" }, { a:write("raw") })
    assert.is_true(x:close())
    y:close()
  end))
end)

-- The test plays the sending side by hand: the stream under test is the
-- responder of an external handshake, the test holds the raw pipe end and
-- writes the frames it built with its own framer.
local function manual()
  local hash, k1, k2 = C.randombytes(64), C.randombytes(32), C.randombytes(32)
  local a, b = pipe.pair()
  local s = secretstream.wrap(b, { initiator = false, handshake = { tx = k2, rx = k1, hash = hash } })
  local f = C.framer()
  local header = f:start(true, k1, k2, hash)
  return s, a, f, header
end

local function expect_failed(s, a, codes, allowed_prefix)
  local got, msg, code = read_all(s)
  assert.is_string(msg)
  assert.is_truthy(codes[code], "unexpected code " .. tostring(code) .. " (" .. tostring(msg) .. ")")
  -- only authenticated bytes come out: a prefix of what was sent intact
  assert.are.equal(got, (allowed_prefix or ""):sub(1, #got))
  -- failed for good, and the raw stream is closed
  assert.are.same({ nil, msg, code }, { s:read() })
  assert.are.same({ nil, msg, code }, { s:write("x") })
  assert.are.same({ nil, msg, code }, { s:finish() })
  assert.are.equal("ECONNRESET", select(3, a:read(nil, 1000)))
  s:close()
  return code
end

describe("secretstream bad input", function()
  it("a flipped bit anywhere in the header or a data frame ends the stream", run(function()
    local codes = { EDECRYPT = true, EFRAME = true, EHEADER = true, ESTREAMID = true }
    local seen = {}
    local s0, a0, f0, header0 = manual()
    local first_len = #header0 + #f0:encrypt("first")
    s0:close()
    a0:close()
    for bit = 0, (first_len + 25) * 8 - 1 do
      local s, a, f, header = manual()
      local wire = header .. f:encrypt("first") .. f:encrypt("hello")
      a:write(flip(wire, bit))
      a:finish()
      local code = expect_failed(s, a, codes, bit >= first_len * 8 and "first" or "")
      seen[code] = true
    end
    assert.is_true(seen.EDECRYPT and seen.EFRAME and seen.EHEADER and seen.ESTREAMID and true)
  end, 60000))

  it("a truncated frame at EOF is EFRAME", run(function()
    for _, cut in ipairs({ 1, 10, 19, 21 }) do
      local s, a, f, header = manual()
      local frame = f:encrypt("hello")
      a:write(header .. frame:sub(1, #frame - cut))
      a:finish()
      assert.are.equal("EFRAME", expect_failed(s, a, { EFRAME = true }))
    end
    local s, a, _, header = manual()
    a:write(header:sub(1, 30))
    a:finish()
    assert.are.equal("EFRAME", expect_failed(s, a, { EFRAME = true }))
  end))

  it("bad lengths: below the tag size, zero, oversize", run(function()
    for _, prefix in ipairs({ "\16\0\0", "\0\0\0", "\1\0\0" }) do
      local s, a, _, header = manual()
      a:write(header .. prefix .. string.rep("\0", 16))
      assert.are.equal("EFRAME", expect_failed(s, a, { EFRAME = true }))
    end
    -- 2^24 - 1 announced, far fewer bytes sent, then EOF
    local s, a, _, header = manual()
    a:write(header .. "\255\255\255" .. string.rep("x", 1000))
    a:finish()
    assert.are.equal("EFRAME", expect_failed(s, a, { EFRAME = true }))
    -- a handshake frame above 65535 bytes
    local c, d = pipe.pair()
    local r = secretstream.wrap(d, { initiator = false })
    c:write("\112\17\1")
    assert.are.equal("EFRAME", expect_failed(r, c, { EFRAME = true }))
  end))

  it("a replayed or reordered frame is EDECRYPT", run(function()
    local s, a, f, header = manual()
    local f1 = f:encrypt("first")
    a:write(header .. f1)
    assert.are.equal("first", s:read(nil, 5000))
    a:write(f1)
    assert.are.equal("EDECRYPT", expect_failed(s, a, { EDECRYPT = true }))

    s, a, f, header = manual()
    f1 = f:encrypt("first")
    local f2 = f:encrypt("second")
    a:write(header .. f2 .. f1)
    assert.are.equal("EDECRYPT", expect_failed(s, a, { EDECRYPT = true }))
  end))

  it("a wrong header frame: bad length, wrong stream id, data before it", run(function()
    local s, a, _, header = manual()
    a:write("\57\0\0" .. header:sub(4) .. "x")
    assert.are.equal("EHEADER", expect_failed(s, a, { EHEADER = true }))
    -- the peer's id must be the other role's
    local hash = C.randombytes(64)
    local c, d = pipe.pair()
    local t = secretstream.wrap(d, { initiator = false, handshake = { tx = seed(1), rx = seed(2), hash = hash } })
    local f = C.framer()
    c:write(f:start(false, seed(2), seed(1), hash))
    assert.are.equal("ESTREAMID", expect_failed(t, c, { ESTREAMID = true }))
    -- EOF with no header at all
    local s2, a2 = manual()
    a2:finish()
    assert.are.equal("EHEADER", expect_failed(s2, a2, { EHEADER = true }))
  end))

  it("a wrong expected remote key is EREMOTEKEY on the side that expected it", run(function()
    local wrong = secretstream.keypair(seed(9)).public_key
    local x, y = pair({ initiator = true, remote_public_key = wrong }, { initiator = false })
    assert.are.equal("EREMOTEKEY", select(3, x:ready(5000)))
    assert.are.equal("ECONNRESET", select(3, y:ready(5000)))
    x, y = pair({ initiator = true }, { initiator = false, remote_public_key = wrong })
    assert.are.equal("EREMOTEKEY", select(3, y:ready(5000)))
    assert.are.same({ "", "connection reset by peer", "ECONNRESET" }, { read_all(x) })
    x:close()
    y:close()
    -- IK towards the wrong responder key: the responder cannot read msg1
    x, y = pair({ initiator = true, pattern = "IK", remote_public_key = wrong }, { initiator = false, pattern = "IK" })
    assert.are.equal("EHANDSHAKE", select(3, y:ready(5000)))
    assert.are.equal("ECONNRESET", select(3, x:ready(5000)))
    x:close()
    y:close()
  end))

  it("a handshake that does not complete in time is ETIMEDOUT", run(function()
    local a, b = pipe.pair()
    -- t0 before wrap, which starts the timeout: taken after msg1 came
    -- through, a 5 ms stall before that (a loaded machine) failed the check;
    -- 300 ms, not 30: a 30 ms stall before the read reset the pipe, msg1 lost
    local t0 = ludx.now()
    local x = secretstream.wrap(a, { initiator = true, handshake_timeout = 300 })
    assert(x:write("queued"))
    assert.are.equal(35, #b:read(nil, 1000)) -- msg1 only
    assert.are.same({ nil, "Noise handshake timed out after 300 ms", "ETIMEDOUT" }, { x:ready() })
    assert.is_true(ludx.now() - t0 >= 295)
    assert.are.equal("ETIMEDOUT", select(3, x:read()))
    assert.are.equal("ETIMEDOUT", select(3, x:write("x")))
    -- the peer never saw the queued write: only the reset follows msg1
    assert.are.equal("ECONNRESET", select(3, b:read(nil, 1000)))
    -- a ready() timeout of the caller is not a failure of the stream
    local c = pipe.pair()
    local z = secretstream.wrap(c, { initiator = true })
    assert.are.equal("ETIMEDOUT", select(3, z:ready(10)))
    assert(z:write("still fine"))
    z:close()
  end))

  it("bad handshake messages are EHANDSHAKE: invalid point, garbage, bit flips, early EOF", run(function()
    -- msg1 carrying the identity point as e
    local a, b = pipe.pair()
    local r = secretstream.wrap(b, { initiator = false })
    a:write(C.frame("\1" .. string.rep("\0", 31)))
    assert.are.equal("EHANDSHAKE", expect_failed(r, a, { EHANDSHAKE = true }))
    -- garbage instead of msg2
    a, b = pipe.pair()
    local i = secretstream.wrap(b, { initiator = true })
    assert.are.equal(35, #a:read(nil, 5000))
    a:write(C.frame(C.randombytes(96, seed(4))))
    assert.are.equal("EHANDSHAKE", expect_failed(i, a, { EHANDSHAKE = true }))
    -- a bit flipped in flight in msg2 (responder -> initiator)
    local c, d = pipe.pair()
    local flips = 0
    local tampered = setmetatable({
      write = function(self, data, timeout)
        if flips == 0 then
          flips = 1
          data = flip(data, 8 * 50)
        end
        return d:write(data, timeout)
      end,
    }, { __index = function(_, k) return function(_, ...) return d[k](d, ...) end end })
    local x = secretstream.wrap(c, { initiator = true })
    local y = secretstream.wrap(tampered, { initiator = false })
    assert.are.equal("EHANDSHAKE", select(3, x:ready(5000)))
    assert.are.equal("ECONNRESET", select(3, y:ready(5000)))
    -- the raw stream ends during the handshake
    a, b = pipe.pair()
    r = secretstream.wrap(b, { initiator = false })
    a:finish()
    assert.are.equal("EHANDSHAKE", select(3, r:ready(5000)))
    r:close()
  end))
end)

describe("secretstream misuse", function()
  it("wrap outside ludx.run says so", function()
    local a = pipe.pair()
    assert.has_error(function() secretstream.wrap(a, { initiator = true }) end,
      "secretstream.wrap must be called inside ludx.run (it starts tasks)")
  end)

  it("wrong argument types name the argument", run(function()
    local a = pipe.pair()
    assert.has_error(function() secretstream.wrap(nil, { initiator = true }) end,
      "bad argument 'raw' to 'wrap' (stream expected, got nil)")
    assert.has_error(function() secretstream.wrap({}, { initiator = true }) end,
      "bad argument 'raw' to 'wrap' (stream with read/write/finish/close expected, got no read)")
    assert.has_error(function() secretstream.wrap(a, { initiator = "yes" }) end,
      "bad argument 'opts.initiator' to 'wrap' (boolean expected, got string)")
    assert.has_error(function() secretstream.wrap(a, { initiator = true, keypair = { public_key = "x" } }) end,
      "bad argument 'opts.keypair.public_key' to 'wrap' (32-byte string expected, got 1 bytes)")
    assert.has_error(function() secretstream.wrap(a, { initiator = true, remote_public_key = 5 }) end,
      "bad argument 'opts.remote_public_key' to 'wrap' (32-byte string expected, got number 5)")
    assert.has_error(function() secretstream.wrap(a, { initiator = true, pattern = "NN" }) end,
      "bad argument 'opts.pattern' to 'wrap' ('XX' or 'IK' expected, got NN)")
    assert.has_error(function() secretstream.wrap(a, { initiator = true, pattern = "IK" }) end)
    assert.has_error(function() secretstream.wrap(a, { initiator = true, keepalive = -1 }) end,
      "bad argument 'opts.keepalive' to 'wrap' (non-negative number of ms expected, got -1)")
    assert.has_error(function() secretstream.wrap(a, { initiator = true, handshake = { tx = "k" } }) end,
      "bad argument 'opts.handshake.tx' to 'wrap' (32-byte string expected, got 1 bytes)")
    assert.has_error(function() secretstream.keypair("short") end,
      "bad argument 'seed' to 'keypair' (32-byte string expected, got 5 bytes)")
    local x = secretstream.wrap(a, { initiator = true })
    assert.has_error(function() x:write(5) end, "bad argument 'data' to 'write' (string expected, got number)")
    assert.has_error(function() x:read("all") end, "bad argument 'max' to 'read' (positive integer expected, got all)")
    assert.has_error(function() x:read(nil, -5) end)
    assert.has_error(function() x:ready("soon") end)
    x:close()
  end))

  it("a second concurrent reader or writer gets EBUSY", run(function()
    local x, y = pair(nil, nil, { highwater = 1000 })
    assert(x:ready(5000))
    local first = ludx.spawn("first reader", function() return y:read(nil, 5000) end)
    ludx.yield()
    assert.are.same({ nil, "busy reading", "EBUSY" }, { y:read(nil, 10) })
    -- nobody reads x's peer pipe past the high-water mark: the first writer waits
    local blocked = ludx.spawn("first writer", function() return y:write(string.rep("z", 5000), 5000) end)
    ludx.yield()
    assert.are.same({ nil, "busy writing", "EBUSY" }, { y:write("second") })
    assert(x:write("to the first reader"))
    assert.are.equal("to the first reader", first:join())
    assert.are.equal(5000, #x:read(nil, 5000))
    assert.is_true(blocked:join())
    x:close()
    y:close()
  end))

  it("a cancelled read leaves the stream readable (no EBUSY after it)", run(function()
    local x, y = pair()
    local t = ludx.spawn("reader", function() return y:read(nil, 5000) end)
    ludx.yield()
    t:cancel("enough")
    t:join(5000)
    assert(x:write("after"))
    assert.are.equal("after", y:read(nil, 5000))
    x:close()
    y:close()
    local x2, y2 = pair()
    local m = ludx.spawn("messages", function() return y2:recv_message(5000) end)
    ludx.yield()
    m:cancel("enough")
    m:join(5000)
    assert(x2:write("again"))
    assert.are.equal("again", y2:recv_message(5000))
    x2:close()
    y2:close()
  end))

  it("write after finish is EPIPE, after close ECANCELED; oversize writes are ETOOLARGE", run(function()
    local x, y = pair()
    assert.are.same({ nil, "Message is too large for an atomic write", "ETOOLARGE" },
      { x:write(string.rep("x", secretstream.MAX_WRITE + 1)) })
    assert(x:finish(5000))
    assert.are.same({ nil, "write after finish", "EPIPE" }, { x:write("late") })
    assert.are.same({ nil, "stream is finished", "EPIPE" }, { x:finish() })
    -- a finish that times out waiting for the handshake can be called again
    local p, q = pipe.pair()
    local z = secretstream.wrap(p, { initiator = true })
    assert(z:write("before"))
    assert.are.equal("ETIMEDOUT", select(3, z:finish(5)))
    assert.are.same({ nil, "write after finish", "EPIPE" }, { z:write("late") })
    local w = secretstream.wrap(q, { initiator = false })
    assert(z:finish(5000))
    assert.are.same({ "before" }, { read_all(w) })
    z:close()
    w:close()
    y:close()
    assert.are.same({ nil, "stream is closed", "ECANCELED" }, { y:write("late") })
    assert.are.same({ nil, "stream is closed", "ECANCELED" }, { y:finish() })
    x:close()
  end))
end)

describe("secretstream failure keeps what was decrypted", function()
  it("a reset after the peer's last frames: the reader gets every byte, then the error", run(function()
    local x, y = pair()
    assert(x:ready(5000))
    assert(y:ready(5000))
    local data = string.rep("0123456789abcdef", 8192) -- 128 KiB
    assert(x:write(data))
    -- wait until y's reader task decrypted it all (nothing read yet)
    local deadline = ludx.now() + 10000
    while y.rbytes < #data and ludx.now() < deadline do ludx.sleep(5) end
    assert.are.equal(#data, y.rbytes)
    x:destroy() -- the raw end resets: y fails with ECONNRESET
    assert(y:wait_closed(5000))
    local got = {}
    while true do
      local d, _, code = y:read(nil, 5000)
      if not d then
        assert.are.equal("ECONNRESET", code)
        break
      end
      got[#got + 1] = d
    end
    assert.are.equal(data, table.concat(got))
    assert.are.equal("ECONNRESET", select(3, y:read())) -- the error stays
    y:close()
    assert.are.equal(0, y.rbytes) -- close drops what the failure kept
    assert.are.equal("ECONNRESET", select(3, y:read())) -- a failed stream keeps its error
  end))
end)

describe("secretstream read_highwater", function()
  it("bounds what a peer's unread frames hold (bytes plus 64 per frame), and the rest waits in the raw stream", run(function()
    local x, y = pair(nil, { initiator = false, read_highwater = 16384 }, { highwater = 4096 })
    assert(x:ready(5000))
    assert(y:ready(5000))
    local sent = 0
    local flood = ludx.spawn("flood", function()
      for i = 1, 100000 do
        if not x:send_message(string.rep("m", 100), 200) then break end
        sent = i
      end
      return true
    end)
    assert(flood:join(60000))
    assert.is_true(sent < 100000, sent)
    -- 16 KiB at 100 + 64 per frame: about 100 frames buffered, not 4 MiB worth
    local entries = y.rtail - y.rhead + 1
    assert.is_true(entries <= 16384 / 164 + 16, tostring(entries)) -- + one raw read's frames
    -- nothing is lost: every frame sent is read, in order
    for _ = 1, sent do assert.are.equal(string.rep("m", 100), y:recv_message(5000)) end
    assert.has_error(function() secretstream.wrap(pipe.pair(), { initiator = true, read_highwater = 0 }) end)
    x:close()
    y:close()
  end, 90000))

  it("holds within a large raw read too: frames that came in one chunk are taken one by one", run(function()
    local x, y, _, b = pair(nil, { initiator = false, read_highwater = 16384 })
    -- queued before the handshake, then sent in one raw write: 500 KB at once
    for _ = 1, 5000 do assert(x:send_message(string.rep("m", 100))) end
    assert(x:ready(5000))
    assert(y:ready(5000))
    assert.are.equal(string.rep("m", 100), y:recv_message(5000))
    local entries = y.rtail - y.rhead + 1
    assert.is_true(entries <= 16384 / 164 + 16, tostring(entries)) -- was all 5,000 of the chunk
    assert.is_true(b.bytes > 0) -- the rest waits in the raw stream, or in the framer's one read
    for _ = 2, 5000 do assert.are.equal(string.rep("m", 100), y:recv_message(5000)) end
    x:close()
    y:close()
  end, 90000))
end)

describe("secretstream keep-alives", function()
  it("are sent when idle and dropped on receipt", run(function()
    local x, y = pair({ initiator = true, keepalive = 15 }, { initiator = false })
    assert(x:ready(5000))
    local deadline = ludx.now() + 5000
    while y:stats().keepalives_in < 3 and ludx.now() < deadline do
      -- nothing reaches the reader meanwhile: no empty chunks
      assert.are.equal("ETIMEDOUT", select(3, y:read(nil, 5)))
    end
    assert.is_true(x:stats().keepalives_out >= 3)
    assert.is_true(y:stats().keepalives_in >= 3)
    -- data still flows, and writes push the next keep-alive back
    assert(x:write("data"))
    assert.are.equal("data", y:read(nil, 5000))
    assert(x:finish(5000))
    local sent = x:stats().keepalives_out
    assert.is_nil(y:read(nil, 5000))
    assert.are.equal(sent, x:stats().keepalives_out) -- none after finish
    x:close()
    y:close()
  end))

  it("an empty write is an empty frame the reader never sees", run(function()
    local x, y = pair()
    assert(x:write(""))
    assert(x:write("after"))
    assert.are.equal("after", y:read(nil, 5000))
    assert.are.equal(1, y:stats().keepalives_in)
    x:close()
    y:close()
  end))
end)

describe("ludx.pipe (the raw stream of these specs)", function()
  it("reads up to max, reads EOF after finish, and resets on destroy", run(function()
    local a, b = pipe.pair()
    assert(a:write("hello "))
    assert(a:write("world"))
    assert.are.equal("hel", b:read(3))
    assert.are.equal("lo world", b:read())
    assert(a:finish())
    assert.are.same({ nil, "write after finish", "EPIPE" }, { a:write("x") })
    assert.is_nil(b:read())
    assert(b:write("back"))
    b:destroy()
    assert.are.same({ nil, "connection reset by peer", "ECONNRESET" }, { a:read() }) -- "back" is dropped
    assert.are.same({ nil, "stream is closed", "ECANCELED" }, { b:read() })
    assert.are.same({ bytes_written = 11, bytes_read = 0, writes = 2, reads = 0 }, a:stats())
  end))

  it("close is graceful: the peer reads what was buffered, then EOF; what it writes later is dropped", run(function()
    local a, b = pipe.pair()
    assert(a:write("last"))
    assert(b:write("unread"))
    assert.is_true(a:close())
    assert.are.equal("last", b:read())
    assert.is_nil(b:read())
    assert(b:write(string.rep("z", 4 * 1024 * 1024))) -- dropped: no wait, nothing held
    assert.are.equal(0, a.bytes)
    assert.are.same({ nil, "stream is closed", "ECANCELED" }, { a:read() })
    assert.is_true(a:close())
    assert.is_true(a:destroy())
  end))

  it("write waits above the high-water mark; a timed-out write is still delivered", run(function()
    local a, b = pipe.pair { highwater = 10 }
    assert.are.same({ nil, "timed out", "ETIMEDOUT" }, { a:write(string.rep("x", 20), 5) })
    local w = ludx.spawn("writer", function() return a:write("y", 5000) end)
    ludx.yield()
    assert.are.equal("waiting", w.state)
    assert.are.equal(string.rep("x", 20) .. "y", b:read()) -- the read drains: the writer goes on
    assert.is_true(w:join())
    local r = ludx.spawn("reader", function() return b:read(nil, 5000) end)
    ludx.yield()
    assert.are.same({ nil, "busy reading", "EBUSY" }, { b:read(nil, 10) })
    assert(a:write("z"))
    assert.are.equal("z", r:join())
    a:close()
  end))
end)
