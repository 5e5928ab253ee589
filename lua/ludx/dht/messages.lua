-- dht-rpc wire messages: the request (type 0x03) and the response (0x13).
--
-- request  = {tid=, to={host,port}, id=?, token=?, internal=bool, command=,
--             target=?, value=?}
-- response = {tid=, to={host,port}, id=?, token=?, closer_nodes={...}?,
--             error=0.., value=?}
-- Optional fields are present on the wire only when set. A zero-length
-- value decodes as nil, as dht-rpc does.
local compact = require "ludx.compact"

local M = {}

M.VERSION = 3
M.REQUEST_ID = 0x03 -- (0 << 4) | VERSION
M.RESPONSE_ID = 0x13 -- (1 << 4) | VERSION

-- core commands (internal flag set)
M.PING = 0
M.PING_NAT = 1
M.FIND_NODE = 2
M.DOWN_HINT = 3
M.DELAYED_PING = 4

-- response error codes
M.OK = 0
M.UNKNOWN_COMMAND = 1
M.INVALID_TOKEN = 2

local w = compact.writer()

local function bad(field, what)
  error("dht message: " .. field .. " " .. what, 3)
end

local function check32(v, field)
  if v ~= nil and (type(v) ~= "string" or #v ~= 32) then bad(field, "must be 32 bytes") end
end

function M.encode_request(m)
  check32(m.id, "id")
  check32(m.token, "token")
  check32(m.target, "target")
  local value = m.value
  local flags = (m.id and 1 or 0) + (m.token and 2 or 0) + (m.internal and 4 or 0) + (m.target and 8 or 0) + (value and 16 or 0)
  w:uint8(M.REQUEST_ID)
  w:uint8(flags)
  w:uint16(m.tid)
  w:ipv4(m.to.host, m.to.port)
  if m.id then w:fixed32(m.id) end
  if m.token then w:fixed32(m.token) end
  w:uint(m.command)
  if m.target then w:fixed32(m.target) end
  if value then w:buffer(value) end
  return w:finish()
end

function M.encode_response(m)
  check32(m.id, "id")
  check32(m.token, "token")
  local closer = m.closer_nodes
  if closer and #closer == 0 then closer = nil end
  local err = m.error or 0
  local value = m.value
  local flags = (m.id and 1 or 0) + (m.token and 2 or 0) + (closer and 4 or 0) + (err > 0 and 8 or 0) + (value and 16 or 0)
  w:uint8(M.RESPONSE_ID)
  w:uint8(flags)
  w:uint16(m.tid)
  w:ipv4(m.to.host, m.to.port)
  if m.id then w:fixed32(m.id) end
  if m.token then w:fixed32(m.token) end
  if closer then
    w:uint(#closer)
    for i = 1, #closer do w:ipv4(closer[i].host, closer[i].port) end
  end
  if err > 0 then w:uint(err) end
  if value then w:buffer(value) end
  return w:finish()
end

local function read_to(r)
  local host, port = r:ipv4()
  return { host = host, port = port }
end

--- Decodes a datagram: "request" or "response", then the message; or nil,
-- err for anything else (too short, unknown type, truncated, over limits).
function M.decode(buf)
  if type(buf) ~= "string" or #buf < 2 then return nil, "too short" end
  local t = buf:byte(1)
  if t ~= M.REQUEST_ID and t ~= M.RESPONSE_ID then return nil, "not a dht-rpc message" end
  local r = compact.reader(buf, 2)
  local flags = r:uint()
  local m = { tid = r:uint16(), to = read_to(r) }
  if flags % 2 == 1 then m.id = r:fixed32() end
  if math.floor(flags / 2) % 2 == 1 then m.token = r:fixed32() end
  if t == M.REQUEST_ID then
    m.internal = math.floor(flags / 4) % 2 == 1
    m.command = r:uint()
    if math.floor(flags / 8) % 2 == 1 then m.target = r:fixed32() end
    if math.floor(flags / 16) % 2 == 1 then m.value = r:buffer() end
  else
    if math.floor(flags / 4) % 2 == 1 then
      local n = r:count()
      local nodes = {}
      for i = 1, n do
        if r.err then break end
        local host, port = r:ipv4()
        nodes[i] = { host = host, port = port }
      end
      m.closer_nodes = nodes
    end
    m.error = math.floor(flags / 8) % 2 == 1 and r:uint() or 0
    if math.floor(flags / 16) % 2 == 1 then m.value = r:buffer() end
  end
  if r.err then return nil, r.err end
  if m.value == "" then m.value = nil end
  return t == M.REQUEST_ID and "request" or "response", m
end

return M
