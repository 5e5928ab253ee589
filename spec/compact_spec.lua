local compact = require "ludx.compact"

local function hex(s)
  return (s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
end

local function unhex(h)
  h = h:gsub("%s", "")
  return (h:gsub("..", function(x) return string.char(tonumber(x, 16)) end))
end

local function enc(f)
  local w = compact.writer()
  f(w)
  return hex(w:finish())
end

describe("compact", function()
  it("encodes uint as 1, 3, 5 or 9 bytes", function()
    assert.are.equal("00", enc(function(w) w:uint(0) end))
    assert.are.equal("fc", enc(function(w) w:uint(0xFC) end))
    assert.are.equal("fdfd00", enc(function(w) w:uint(0xFD) end))
    assert.are.equal("fdffff", enc(function(w) w:uint(0xFFFF) end))
    assert.are.equal("fe00000100", enc(function(w) w:uint(0x10000) end))
    assert.are.equal("feffffffff", enc(function(w) w:uint(0xFFFFFFFF) end))
    assert.are.equal("ff0000000001000000", enc(function(w) w:uint(2 ^ 32) end))
    assert.are.equal("ff0100000000001000", enc(function(w) w:uint(2 ^ 52 + 1) end))
  end)

  it("decodes uint in every width", function()
    for _, n in ipairs({ 0, 1, 0xFC, 0xFD, 0x1234, 0xFFFF, 0x10000, 0xFFFFFFFF, 2 ^ 32, 2 ^ 53 }) do
      local w = compact.writer()
      w:uint(n)
      local r = compact.reader(w:finish())
      assert.are.equal(n, r:uint())
      assert.is_nil(r.err)
      assert.is_true(r:done())
    end
  end)

  it("encodes fixed-width integers little-endian", function()
    assert.are.equal("4211", enc(function(w) w:uint16(0x1142) end))
    assert.are.equal("78563412", enc(function(w) w:uint32(0x12345678) end))
    local r = compact.reader(unhex("4211785634120a"))
    assert.are.equal(0x1142, r:uint16())
    assert.are.equal(0x12345678, r:uint32())
    assert.are.equal(10, r:uint8())
    assert.is_nil(r.err)
  end)

  it("fails truncated uints without reading past the end", function()
    for _, h in ipairs({ "", "fd", "fd01", "fe010203", "ff01020304050607" }) do
      local r = compact.reader(unhex(h))
      assert.are.equal(0, r:uint())
      assert.are.equal("out of bounds", r.err)
      assert.is_true(r:done())
    end
  end)

  it("reads within a sub-range only", function()
    local r = compact.reader("xx\5abcdefyy", 3, 8)
    assert.are.equal("abcde", r:buffer())
    assert.is_nil(r.err)
    r = compact.reader("xx\5abcdefyy", 3, 7)
    assert.are.equal("", r:buffer())
    assert.are.equal("out of bounds", r.err)
  end)

  it("encodes buffers and strings with a uint length", function()
    assert.are.equal("00", enc(function(w) w:buffer("") end))
    assert.are.equal("00", enc(function(w) w:buffer(nil) end))
    assert.are.equal("0568656c6c6f", enc(function(w) w:string("hello") end))
    local big = string.rep("x", 300)
    local w = compact.writer()
    w:buffer(big)
    local s = w:finish()
    assert.are.equal("fd2c01", hex(s:sub(1, 3)))
    assert.are.equal(big, compact.reader(s):buffer())
  end)

  it("fails a buffer longer than its input", function()
    local r = compact.reader(unhex("05616263"))
    assert.are.equal("", r:buffer())
    assert.are.equal("out of bounds", r.err)
    r = compact.reader(unhex("feffffff7f00"))
    r:buffer()
    assert.are.equal("out of bounds", r.err)
  end)

  it("keeps the first error and keeps failing", function()
    local r = compact.reader(unhex("fd01"))
    r:uint()
    r:fixed32()
    r:ipv4()
    assert.are.equal("out of bounds", r.err)
  end)

  it("encodes fixed32/64 and refuses other sizes", function()
    local k = string.rep("\7", 32)
    assert.are.equal(string.rep("07", 32), enc(function(w) w:fixed32(k) end))
    assert.has_error(function() compact.writer():fixed32("short") end)
    assert.has_error(function() compact.writer():fixed64(k) end)
    local r = compact.reader(k)
    assert.are.equal(k, r:fixed32())
    assert.are.equal("", r:fixed32())
    assert.are.equal("out of bounds", r.err)
  end)

  it("encodes ipv4 addresses as 4 bytes then a uint16 port", function()
    assert.are.equal("7f0000014ac2", enc(function(w) w:ipv4("127.0.0.1", 49738) end))
    local host, port = compact.reader(unhex("0102030405 00")):ipv4()
    assert.are.equal("1.2.3.4", host)
    assert.are.equal(5, port)
    assert.has_error(function() compact.writer():ipv4("localhost", 1) end)
    assert.has_error(function() compact.writer():ipv4("1.2.3.256", 1) end)
    assert.has_error(function() compact.writer():ipv4("1.2.3.4", 65536) end)
    local r = compact.reader(unhex("7f000001"))
    r:ipv4()
    assert.are.equal("out of bounds", r.err)
  end)

  it("encodes ipv6 addresses as 16 bytes then a uint16 port", function()
    assert.are.equal("00000000000000000000000000000001" .. "5000", enc(function(w) w:ipv6("::1", 80) end))
    assert.are.equal("fe800000000000000000000000001234" .. "0100", enc(function(w) w:ipv6("fe80::1234", 1) end))
    local s = unhex("20010db8000000000000000000000001" .. "bb01")
    local host, port = compact.reader(s):ipv6()
    assert.are.equal("2001:db8:0:0:0:0:0:1", host)
    assert.are.equal(443, port)
    assert.are.equal(hex(s), enc(function(w) w:ipv6(host, port) end))
    assert.has_error(function() compact.writer():ipv6("1::2::3", 1) end)
  end)

  it("round-trips arrays and rejects counts over 0x100000", function()
    local arr = compact.ipv4Array
    local s = compact.encode(arr, { { host = "127.0.0.1", port = 1 }, { host = "10.0.0.2", port = 65535 } })
    assert.are.equal("027f00000101000a000002ffff", hex(s))
    local v = assert(compact.decode(arr, s))
    assert.are.equal(2, #v)
    assert.are.equal("10.0.0.2", v[2].host)
    assert.are.equal(65535, v[2].port)
    -- a count over the limit fails at once
    local v2, err = compact.decode(arr, unhex("fe01001000"))
    assert.is_nil(v2)
    assert.are.equal("array is too big", err)
    -- a huge count within the limit but no data fails quickly, not after 1M reads
    v2, err = compact.decode(arr, unhex("fe00001000"))
    assert.is_nil(v2)
    assert.are.equal("out of bounds", err)
    -- truncated element
    v2, err = compact.decode(arr, unhex("027f0000010100"))
    assert.is_nil(v2)
    assert.are.equal("out of bounds", err)
  end)

  it("decode can insist on consuming everything", function()
    assert.are.equal(5, compact.decode(compact.uint, "\5\6"))
    local v, err = compact.decode(compact.uint, "\5\6", true)
    assert.is_nil(v)
    assert.are.equal("trailing bytes", err)
    assert.is_nil(compact.decode(compact.uint, nil))
  end)

  it("refuses to encode negative, fractional or oversized integers", function()
    local w = compact.writer()
    assert.has_error(function() w:uint(-1) end)
    assert.has_error(function() w:uint(1.5) end)
    assert.has_error(function() w:uint("1") end)
    assert.has_error(function() w:uint16(65536) end)
    assert.has_error(function() w:uint32(2 ^ 32) end)
    assert.has_error(function() w:uint8(256) end)
  end)

  it("a writer is reusable and encode is re-entrant", function()
    local w = compact.writer()
    w:uint(1)
    assert.are.equal("01", hex(w:finish()))
    w:uint(2)
    assert.are.equal("02", hex(w:finish()))
    local inner = { encode = function(w2, v) w2:buffer(compact.encode(compact.uint, v)) end }
    assert.are.equal("0105", hex(compact.encode(inner, 5)))
  end)

  it("survives random garbage", function()
    math.randomseed(7)
    local arr = compact.array({
      encode = function() end,
      decode = function(r) return { r:uint(), r:buffer(), r:ipv4(), r:fixed32() } end,
    })
    for _ = 1, 2000 do
      local n = math.random(0, 40)
      local t = {}
      for i = 1, n do t[i] = string.char(math.random(0, 255)) end
      local v, err = compact.decode(arr, table.concat(t))
      assert.is_true(v ~= nil or type(err) == "string")
    end
  end)
  -- vectors printed by compact-encoding 2.x (spec/interop/node_modules)
  it("matches compact-encoding byte for byte (the codecs protomux users need)", function()
    local json = require "ludx.json"
    local vectors = {
      { compact.int, -3, "05" }, { compact.int, 1000, "fdd007" }, { compact.int8, -1, "01" },
      { compact.int16, -300, "5702" }, { compact.int32, -70000, "df220200" },
      { compact.float64, 1.5, "000000000000f83f" }, { compact.float32, -2.25, "000010c0" },
      { compact.bool, true, "01" }, { compact.bool, false, "00" }, { compact.uint24, 0x123456, "563412" },
      { compact.uint64, 2 ^ 40 + 5, "0500000000010000" }, { compact.int64, -(2 ^ 40), "ffffffffff010000" },
      { compact.optional_buffer, nil, "00" }, { compact.optional_buffer, "ab", "026162" },
      { compact.fixed8, unhex("0102030405060708"), "0102030405060708" },
      { compact.string, "h\195\169llo", "0668c3a96c6c6f" }, { compact.frame(compact.string), "hi", "03026869" },
      { compact.array(compact.uint), { 1, 300 }, "0201fd2c01" },
    }
    for _, v in ipairs(vectors) do
      local bytes = compact.encode(v[1], v[2])
      assert.are.equal(v[3], hex(bytes))
      assert.are.same(v[2], compact.decode(v[1], bytes, true))
    end
    assert.are.equal("077b2261223a317d", hex(compact.encode(compact.json, { a = 1 })))
    assert.are.same({ a = 1 }, compact.decode(compact.json, unhex("077b2261223a317d")))
    assert.are.equal("085b312c2278225d0a", hex(compact.encode(compact.ndjson, json.array({ 1, "x" }))))
    assert.is_false(compact.decode(compact.bool, "\2")) -- only 1 is true
    assert.is_nil(compact.decode(compact.uint64, "\0\0\0\0\0\0\32\0")) -- past 2^53 - 1
    assert.is_nil(compact.decode(compact.json, "\3{a:")) -- truncated / not JSON
    assert.is_nil(compact.decode(compact.frame(compact.uint32), "\2\1\2")) -- value longer than its frame
    assert.is_nil(compact.decode(compact.float64, "\1\2"))
    assert.has_error(function() compact.encode(compact.int, 0.5) end)
    assert.has_error(function() compact.encode(compact.fixed8, "short") end)
  end)
end)
