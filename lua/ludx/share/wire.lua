-- The share protocol's messages, over any stream with read/write (a
-- SecretStream from ludx.dht in practice).
--
-- A message is a uint32 LE length, then that many bytes: one type byte and
-- a body in compact-encoding.
--
--   HELLO    client -> server   uint version
--   MANIFEST server -> client   the encoded manifest (ludx.share.manifest)
--   GET      client -> server   uint id, uint file, uint offset, uint length
--   DATA     server -> client   uint id, uint file, uint offset, raw bytes
--   ERROR    either way         uint code, string message; the sender closes
--
-- The server answers GETs in the order they came, each with DATA messages
-- that cover the range in order, so a client may pipeline requests.
local compact = require "ludx.compact"

local M = {}

M.VERSION = 1
M.HELLO, M.MANIFEST, M.GET, M.DATA, M.ERROR = 1, 2, 3, 4, 5
M.NAMES = { "HELLO", "MANIFEST", "GET", "DATA", "ERROR" }

M.DATA_MAX = 64000           -- payload bytes in one DATA message
M.DATA_MESSAGE_MAX = M.DATA_MAX + 64 -- a whole DATA message (type, id, file, offset, payload)
M.GET_MAX = 16 * 1024 * 1024       -- bytes one GET may ask for
M.READ_MAX = 65536
M.CLIENT_MESSAGE_MAX = 1024        -- what a server accepts
M.SERVER_MESSAGE_MAX = 64 * 1024 * 1024 -- what a client accepts (the manifest)

-- error codes
M.E_PROTOCOL, M.E_VERSION, M.E_RANGE, M.E_IO, M.E_BUSY = 1, 2, 3, 4, 5

local char, byte, concat = string.char, string.byte, table.concat

local function u32(n)
  return char(n % 256, math.floor(n / 256) % 256, math.floor(n / 65536) % 256, math.floor(n / 16777216) % 256)
end

--- One message as bytes.
function M.frame(kind, body)
  body = body or ""
  return u32(#body + 1) .. char(kind) .. body
end

function M.hello()
  return M.frame(M.HELLO, compact.encode(compact.uint, M.VERSION))
end

function M.manifest(encoded)
  return M.frame(M.MANIFEST, encoded)
end

function M.get(id, file, offset, length)
  local w = compact.writer()
  w:uint(id):uint(file):uint(offset):uint(length)
  return M.frame(M.GET, w:finish())
end

--- A DATA message: the header and the payload, joined (one write).
function M.data(id, file, offset, payload)
  local w = compact.writer()
  w:uint(id):uint(file):uint(offset)
  local head = w:finish()
  return u32(#head + #payload + 1) .. char(M.DATA) .. head .. payload
end

function M.error(code, message)
  local w = compact.writer()
  w:uint(code):string(message)
  return M.frame(M.ERROR, w:finish())
end

--- Decodes a message (bytes: its type byte then the body, as Reader:next
-- gives it): a table with the fields above (kind included), or nil, reason.
function M.decode(kind, bytes)
  local r = compact.reader(bytes, 2)
  local m = { kind = kind }
  if kind == M.HELLO then
    m.version = r:uint()
  elseif kind == M.MANIFEST then
    m.encoded = bytes:sub(2)
    return m
  elseif kind == M.GET then
    m.id, m.file, m.offset, m.length = r:uint(), r:uint(), r:uint(), r:uint()
  elseif kind == M.DATA then
    m.id, m.file, m.offset = r:uint(), r:uint(), r:uint()
    if not r.err then m.payload = r:rest() end
  elseif kind == M.ERROR then
    m.code, m.message = r:uint(), r:string()
  else
    return nil, "unknown message type " .. kind
  end
  if r.err then return nil, "truncated " .. (M.NAMES[kind] or "?") .. " message" end
  return m
end

---------------------------------------------------------------------------
-- A reader of whole messages over a stream's chunks, without copying a
-- byte more than once or twice.

local Reader = {}
Reader.__index = Reader

--- stream: anything with read([max][, timeout]). max: the largest message.
function M.reader(stream, max)
  return setmetatable({ stream = stream, max = max, parts = {}, head = 1, tail = 0, have = 0 }, Reader)
end

local function take(self, want)
  local out, got = {}, 0
  while got < want do
    local p = self.parts[self.head]
    if #p <= want - got then
      out[#out + 1] = p
      got = got + #p
      self.parts[self.head] = nil
      self.head = self.head + 1
    else
      local k = want - got
      out[#out + 1] = p:sub(1, k)
      self.parts[self.head] = p:sub(k + 1)
      got = want
    end
  end
  self.have = self.have - want
  return #out == 1 and out[1] or concat(out)
end

local function fill(self, want, timeout)
  while self.have < want do
    -- reads of at most 64 KiB keep every string on LuaJIT's own heap (a
    -- larger one is a fresh mmap, and its munmap costs more than the copy)
    local chunk, msg, code = self.stream:read(M.READ_MAX, timeout)
    if not chunk then
      if msg then return nil, msg, code end
      if self.have == 0 then return false end
      return nil, "the stream ended inside a message", "EPROTO"
    end
    self.tail = self.tail + 1
    self.parts[self.tail] = chunk
    self.have = self.have + #chunk
  end
  return true
end

--- The next message: kind, bytes (the type byte and the body; decode with
-- M.decode(kind, bytes)); nil at a clean end (between messages); nil, msg,
-- code on an error or a message longer than max.
function Reader:next(timeout)
  if self.head > self.tail then self.head, self.tail = 1, 0 end
  local ok, msg, code = fill(self, 4, timeout)
  if not ok then return nil, msg, code end
  local a, b, c, d = byte(take(self, 4), 1, 4)
  local len = a + b * 256 + c * 65536 + d * 16777216
  if len < 1 then return nil, "empty message", "EPROTO" end
  if len > self.max then return nil, "message of " .. len .. " bytes (the limit is " .. self.max .. ")", "EPROTO" end
  ok, msg, code = fill(self, len, timeout)
  if ok == false then return nil, "the stream ended inside a message", "EPROTO" end
  if not ok then return nil, msg, code end
  local bytes = take(self, len)
  return byte(bytes, 1), bytes
end

return M
