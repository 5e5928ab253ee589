-- compact-encoding: the binary encodings of the hyperswarm stack.
--
-- Everything is little-endian. A writer collects bytes; a reader walks a
-- string and never reads past its end: a read that does not fit sets
-- r.err (the first error sticks), returns 0 or "" and moves to the end, so
-- a decoder reads all its fields and checks r.err once.
--
--   local w = compact.writer()
--   w:uint(300); w:buffer("hi"); w:ipv4("127.0.0.1", 49737)
--   local bytes = w:finish()
--   local r = compact.reader(bytes)
--   local n, b, host, port = r:uint(), r:buffer(), r:ipv4()
--   if r.err then ... end
--
-- Codecs are tables {encode = function(w, v), decode = function(r)}; the
-- primitives exist as codecs too (compact.uint, compact.buffer, ...) and
-- compact.array(codec) builds an array codec with the 0x100000 count limit.
local byte, char, sub, floor = string.byte, string.char, string.sub, math.floor
local type, tostring, setmetatable, error = type, tostring, setmetatable, error

local M = {}

M.MAX_ARRAY = 0x100000

local has_sbuf, sbuf = pcall(require, "string.buffer")

---------------------------------------------------------------------------
-- Writer

local Writer = {}
Writer.__index = Writer

local function new_parts()
  -- the same put/tostring/reset shape as a string.buffer
  local p = { n = 0 }
  function p:put(s)
    self.n = self.n + 1
    self[self.n] = s
    return self
  end
  function p:tostring()
    return table.concat(self, "", 1, self.n)
  end
  function p:reset()
    for i = self.n, 1, -1 do self[i] = nil end
    self.n = 0
    return self
  end
  return p
end

--- A new writer. Writers may be reused after finish().
function M.writer()
  return setmetatable({ buf = has_sbuf and sbuf.new(64) or new_parts(), len = 0 }, Writer)
end

local function bad_uint(n, what)
  error("compact: " .. what .. " expects a non-negative integer, got " .. tostring(n), 3)
end

local function u16(n)
  return char(n % 256, floor(n / 256) % 256)
end

local function u32(n)
  return char(n % 256, floor(n / 0x100) % 256, floor(n / 0x10000) % 256, floor(n / 0x1000000) % 256)
end

function Writer:put(s)
  self.buf:put(s)
  self.len = self.len + #s
  return self
end
Writer.raw = Writer.put

function Writer:uint8(n)
  if type(n) ~= "number" or n < 0 or n > 0xFF or n % 1 ~= 0 then bad_uint(n, "uint8") end
  self.buf:put(char(n))
  self.len = self.len + 1
  return self
end

function Writer:uint16(n)
  if type(n) ~= "number" or n < 0 or n > 0xFFFF or n % 1 ~= 0 then bad_uint(n, "uint16") end
  self.buf:put(u16(n))
  self.len = self.len + 2
  return self
end

function Writer:uint32(n)
  if type(n) ~= "number" or n < 0 or n > 0xFFFFFFFF or n % 1 ~= 0 then bad_uint(n, "uint32") end
  self.buf:put(u32(n))
  self.len = self.len + 4
  return self
end

--- Varint: 1 byte up to 0xFC, else 0xFD+u16, 0xFE+u32, 0xFF+u64.
function Writer:uint(n)
  if type(n) ~= "number" or n < 0 or n % 1 ~= 0 or n >= 2 ^ 64 then bad_uint(n, "uint") end
  local buf = self.buf
  if n <= 0xFC then
    buf:put(char(n))
    self.len = self.len + 1
  elseif n <= 0xFFFF then
    buf:put(char(0xFD, n % 256, floor(n / 256)))
    self.len = self.len + 3
  elseif n <= 0xFFFFFFFF then
    buf:put("\254", u32(n))
    self.len = self.len + 5
  else
    buf:put("\255", u32(n % 0x100000000), u32(floor(n / 0x100000000)))
    self.len = self.len + 9
  end
  return self
end

--- Exactly n raw bytes (fixed32, fixed64).
function Writer:fixed(s, n)
  if type(s) ~= "string" or #s ~= n then
    error("compact: fixed" .. n .. " expects a " .. n .. "-byte string, got " .. (type(s) == "string" and #s .. " bytes" or type(s)), 2)
  end
  self.buf:put(s)
  self.len = self.len + n
  return self
end

function Writer:fixed32(s)
  return self:fixed(s, 32)
end

function Writer:fixed64(s)
  return self:fixed(s, 64)
end

--- uint length, then the bytes. nil encodes as empty.
function Writer:buffer(s)
  if s == nil then s = "" end
  if type(s) ~= "string" then error("compact: buffer expects a string, got " .. type(s), 2) end
  self:uint(#s)
  self.buf:put(s)
  self.len = self.len + #s
  return self
end
Writer.string = Writer.buffer

local ipcache = {}
local ipcache_n = 0

local function ip4_bytes(host)
  local b = ipcache[host]
  if b then return b end
  local a, b1, c, d = host:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  a, b1, c, d = tonumber(a), tonumber(b1), tonumber(c), tonumber(d)
  if not a or a > 255 or b1 > 255 or c > 255 or d > 255 then return nil end
  b = char(a, b1, c, d)
  -- host strings are interned, so a small plain cache pays off
  if ipcache_n > 4096 then
    ipcache = {}
    ipcache_n = 0
  end
  ipcache[host] = b
  ipcache_n = ipcache_n + 1
  return b
end
M.ip4_bytes = ip4_bytes

--- 4 bytes of IP then uint16 port.
function Writer:ipv4(host, port)
  local b = type(host) == "string" and ip4_bytes(host)
  if not b then error("compact: ipv4 expects a dotted IPv4 host, got " .. tostring(host), 2) end
  if type(port) ~= "number" or port < 0 or port > 0xFFFF or port % 1 ~= 0 then bad_uint(port, "ipv4 port") end
  self.buf:put(b, u16(port))
  self.len = self.len + 6
  return self
end

local function ip6_bytes(host)
  if type(host) ~= "string" then return nil end
  local head, tail = host, nil
  local dbl = host:find("::", 1, true)
  if dbl then head, tail = host:sub(1, dbl - 1), host:sub(dbl + 2) end
  local function groups(s)
    local out = {}
    if s == "" then return out end
    for g in (s .. ":"):gmatch("([^:]*):") do
      local v = g:match("^%x%x?%x?%x?$") and tonumber(g, 16)
      if not v then return nil end
      out[#out + 1] = v
    end
    return out
  end
  local h, t = groups(head), {}
  if tail then t = groups(tail) end
  if not h or not t then return nil end
  local n = #h + #t
  if (dbl and n > 7) or (not dbl and n ~= 8) then return nil end
  local parts = {}
  for _, v in ipairs(h) do parts[#parts + 1] = char(floor(v / 256), v % 256) end
  for _ = 1, 8 - n do parts[#parts + 1] = "\0\0" end
  for _, v in ipairs(t) do parts[#parts + 1] = char(floor(v / 256), v % 256) end
  return table.concat(parts)
end

--- 16 bytes of IP (groups big-endian, as written) then uint16 port.
function Writer:ipv6(host, port)
  local b = ip6_bytes(host)
  if not b then error("compact: ipv6 expects an IPv6 host, got " .. tostring(host), 2) end
  if type(port) ~= "number" or port < 0 or port > 0xFFFF or port % 1 ~= 0 then bad_uint(port, "ipv6 port") end
  self.buf:put(b, u16(port))
  self.len = self.len + 18
  return self
end

--- The bytes written; the writer is empty again afterwards.
function Writer:finish()
  local s = self.buf:tostring()
  self.buf:reset()
  self.len = 0
  return s
end

---------------------------------------------------------------------------
-- Reader

local Reader = {}
Reader.__index = Reader

--- A reader over s[i..j] (1-based, inclusive; defaults to all of s).
function M.reader(s, i, j)
  if type(s) ~= "string" then error("bad argument 's' to 'reader' (string expected, got " .. type(s) .. ")", 2) end
  return setmetatable({ s = s, i = i or 1, e = j or #s, err = nil }, Reader)
end

function Reader:fail(msg)
  if not self.err then self.err = msg or "out of bounds" end
  self.i = self.e + 1
end

function Reader:remaining()
  return self.e - self.i + 1
end

function Reader:done()
  return self.i > self.e
end

function Reader:uint8()
  local i = self.i
  if i > self.e then
    self:fail()
    return 0
  end
  self.i = i + 1
  return byte(self.s, i)
end

function Reader:uint16()
  local i = self.i
  if i + 1 > self.e then
    self:fail()
    return 0
  end
  self.i = i + 2
  local a, b = byte(self.s, i, i + 1)
  return a + b * 256
end

function Reader:uint32()
  local i = self.i
  if i + 3 > self.e then
    self:fail()
    return 0
  end
  self.i = i + 4
  local a, b, c, d = byte(self.s, i, i + 3)
  return a + b * 0x100 + c * 0x10000 + d * 0x1000000
end

function Reader:uint()
  local i = self.i
  if i > self.e then
    self:fail()
    return 0
  end
  local a = byte(self.s, i)
  if a <= 0xFC then
    self.i = i + 1
    return a
  end
  self.i = i + 1
  if a == 0xFD then return self:uint16() end
  if a == 0xFE then return self:uint32() end
  local lo = self:uint32()
  local hi = self:uint32()
  if self.err then return 0 end
  return lo + hi * 0x100000000
end

function Reader:fixed(n)
  local i = self.i
  if i + n - 1 > self.e then
    self:fail()
    return ""
  end
  self.i = i + n
  return sub(self.s, i, i + n - 1)
end

function Reader:fixed32()
  return self:fixed(32)
end

function Reader:fixed64()
  return self:fixed(64)
end

function Reader:buffer()
  local len = self:uint()
  if self.err then return "" end
  if len > self.e - self.i + 1 then
    self:fail()
    return ""
  end
  local i = self.i
  self.i = i + len
  return sub(self.s, i, i + len - 1)
end
Reader.string = Reader.buffer

--- The rest of the input.
function Reader:rest()
  local s = sub(self.s, self.i, self.e)
  self.i = self.e + 1
  return s
end

function Reader:ipv4()
  local i = self.i
  if i + 5 > self.e then
    self:fail()
    return "0.0.0.0", 0
  end
  self.i = i + 6
  local a, b, c, d, p1, p2 = byte(self.s, i, i + 5)
  return a .. "." .. b .. "." .. c .. "." .. d, p1 + p2 * 256
end

function Reader:ipv6()
  local i = self.i
  if i + 17 > self.e then
    self:fail()
    return "::", 0
  end
  self.i = i + 18
  local g = {}
  for k = 0, 7 do
    local hi, lo = byte(self.s, i + 2 * k, i + 2 * k + 1)
    g[k + 1] = string.format("%x", hi * 256 + lo)
  end
  local p1, p2 = byte(self.s, i + 16, i + 17)
  return table.concat(g, ":"), p1 + p2 * 256
end

--- An array count: fails above the limit (0x100000).
function Reader:count()
  local n = self:uint()
  if n > M.MAX_ARRAY then
    self:fail("array is too big")
    return 0
  end
  return n
end

---------------------------------------------------------------------------
-- Codecs

local function prim(name)
  return {
    encode = function(w, v) return w[name](w, v) end,
    decode = function(r) return r[name](r) end,
  }
end

M.uint = prim("uint")
M.uint8 = prim("uint8")
M.uint16 = prim("uint16")
M.uint32 = prim("uint32")
M.fixed32 = prim("fixed32")
M.fixed64 = prim("fixed64")
M.buffer = prim("buffer")
M.string = prim("string")
M.raw = { encode = function(w, v) return w:raw(v) end, decode = function(r) return r:rest() end }

--- {host=, port=} tables.
M.ipv4Address = {
  encode = function(w, a) return w:ipv4(a.host, a.port) end,
  decode = function(r)
    local host, port = r:ipv4()
    return { host = host, port = port }
  end,
}

M.ipv6Address = {
  encode = function(w, a) return w:ipv6(a.host, a.port) end,
  decode = function(r)
    local host, port = r:ipv6()
    return { host = host, port = port }
  end,
}

--- An array of codec items: uint count, then the items.
function M.array(codec)
  local enc, dec = codec.encode, codec.decode
  return {
    encode = function(w, list)
      local n = #list
      w:uint(n)
      for i = 1, n do enc(w, list[i]) end
    end,
    decode = function(r)
      local n = r:count()
      local out = {}
      for i = 1, n do
        if r.err then break end
        out[i] = dec(r)
      end
      if r.err then return {} end
      return out
    end,
  }
end

M.ipv4Array = M.array(M.ipv4Address)
M.ipv6Array = M.array(M.ipv6Address)

---------------------------------------------------------------------------
-- More codecs of compact-encoding 2.x/3.x, byte for byte. A decoder that
-- does not fit sets r.err (as every read does); an encoder given a wrong
-- value raises.

M.utf8 = M.string

--- One byte: 1 for true, 0 for false; any other byte decodes as false.
M.bool = {
  encode = function(w, v) return w:uint8(v and 1 or 0) end,
  decode = function(r) return r:uint8() == 1 end,
}

--- Encodes nothing, decodes nil.
M.none = { encode = function() end, decode = function() return nil end }

--- A buffer that may be nil: nil (or "") is one 0 byte and decodes as nil.
M.optional_buffer = {
  encode = function(w, v) return w:buffer(v) end,
  decode = function(r)
    local b = r:buffer()
    if b == "" then return nil end
    return b
  end,
}
M.optionalBuffer = M.optional_buffer

--- Exactly n raw bytes.
function M.fixed(n)
  if type(n) ~= "number" or n < 0 or n % 1 ~= 0 then
    error("bad argument 'n' to 'fixed' (non-negative integer expected, got " .. tostring(n) .. ")", 2)
  end
  return {
    encode = function(w, v) return w:fixed(v, n) end,
    decode = function(r) return r:fixed(n) end,
  }
end
M.fixed8 = M.fixed(8)
M.fixed16 = M.fixed(16)
M.fixed24 = M.fixed(24)

--- Three bytes, little-endian.
M.uint24 = {
  encode = function(w, n)
    if type(n) ~= "number" or n < 0 or n > 0xFFFFFF or n % 1 ~= 0 then bad_uint(n, "uint24") end
    w:put(char(n % 256, floor(n / 256) % 256, floor(n / 0x10000) % 256))
  end,
  decode = function(r)
    local lo = r:uint16()
    return lo + r:uint8() * 0x10000
  end,
}

--- Eight bytes, little-endian (up to 2^53 exactly, as compact-encoding).
M.uint64 = {
  encode = function(w, n)
    if type(n) ~= "number" or n < 0 or n % 1 ~= 0 or n > 2 ^ 53 - 1 then bad_uint(n, "uint64") end
    w:put(u32(n % 0x100000000) .. u32(floor(n / 0x100000000)))
  end,
  decode = function(r)
    local lo = r:uint32()
    local v = lo + r:uint32() * 0x100000000
    if v > 2 ^ 53 - 1 then
      r:fail("uint64 out of the safe integer range")
      return 0
    end
    return v
  end,
}

-- ZigZag over an unsigned codec: 0, -1, 1, -2, 2 ... map to 0, 1, 2, 3, 4.
local function zigzag(u, name)
  local ue, ud = u.encode, u.decode
  return {
    encode = function(w, n)
      if type(n) ~= "number" or n % 1 ~= 0 or n > 2 ^ 52 - 1 or n < -2 ^ 52 then
        error("compact: " .. name .. " expects an integer within +-2^52, got " .. tostring(n), 2)
      end
      return ue(w, n < 0 and -2 * n - 1 or 2 * n)
    end,
    decode = function(r)
      local v = ud(r)
      if v % 2 == 0 then return v / 2 end
      return -(v + 1) / 2
    end,
  }
end
M.int = zigzag(M.uint, "int")
M.int8 = zigzag(M.uint8, "int8")
M.int16 = zigzag(M.uint16, "int16")
M.int24 = zigzag(M.uint24, "int24")
M.int32 = zigzag(M.uint32, "int32")
M.int64 = zigzag(M.uint64, "int64")

local ffi = require "ffi"
local f64 = ffi.new("double[1]")
local f32 = ffi.new("float[1]")
-- LuaJIT runs on little-endian hosts here (x86-64, arm64); the bytes are
-- the IEEE 754 ones in memory order.
assert(ffi.abi("le"), "compact: float codecs assume a little-endian host")

--- IEEE 754 double, little-endian.
M.float64 = {
  encode = function(w, n)
    if type(n) ~= "number" then error("compact: float64 expects a number, got " .. type(n), 2) end
    f64[0] = n
    w:put(ffi.string(f64, 8))
  end,
  decode = function(r)
    local s = r:fixed(8)
    if r.err then return 0 end
    ffi.copy(f64, s, 8)
    return f64[0]
  end,
}

--- IEEE 754 single, little-endian.
M.float32 = {
  encode = function(w, n)
    if type(n) ~= "number" then error("compact: float32 expects a number, got " .. type(n), 2) end
    f32[0] = n
    w:put(ffi.string(f32, 4))
  end,
  decode = function(r)
    local s = r:fixed(4)
    if r.err then return 0 end
    ffi.copy(f32, s, 4)
    return f32[0]
  end,
}

--- A length-prefixed codec: uint byte length, then the value (compact
-- frame(codec)); the value must use exactly its frame.
function M.frame(codec)
  local dec = codec.decode
  return {
    encode = function(w, v) return w:buffer(M.encode(codec, v)) end,
    decode = function(r)
      local len = r:uint()
      if r.err then return nil end
      if len > r.e - r.i + 1 then
        r:fail()
        return nil
      end
      local sub_r = M.reader(r.s, r.i, r.i + len - 1)
      local v = dec(sub_r)
      r.i = r.i + len
      if sub_r.err then r:fail(sub_r.err) end
      return v
    end,
  }
end

local json -- ludx.json, loaded on first use

local function json_codec(suffix)
  return {
    encode = function(w, v)
      json = json or require "ludx.json"
      return w:string(json.encode(v) .. suffix)
    end,
    decode = function(r)
      json = json or require "ludx.json"
      local s = r:string()
      if r.err then return nil end
      local v, err = json.decode(s)
      if v == nil and err then r:fail("bad JSON: " .. tostring(err)) end
      return v
    end,
  }
end

--- A string of JSON (ludx.json: null decodes as json.null).
M.json = json_codec("")
--- The same with a newline after the JSON text.
M.ndjson = json_codec("\n")

local shared = M.writer()

--- Encodes v with codec into a string.
function M.encode(codec, v)
  local w = shared
  shared = nil -- re-entrant: a nested encode makes its own writer
  if not w then w = M.writer() end
  local ok, err = pcall(codec.encode, w, v)
  local s = w:finish()
  shared = w
  if not ok then error(err, 2) end
  return s
end

--- Decodes a string with codec: v, or nil, err when the input is
-- truncated, over a limit, or (with opts.exact) has bytes left over.
function M.decode(codec, s, exact)
  if type(s) ~= "string" then return nil, "not a string" end
  local r = M.reader(s)
  local v = codec.decode(r)
  if r.err then return nil, r.err end
  if exact and r.i <= r.e then return nil, "trailing bytes" end
  return v
end

return M
