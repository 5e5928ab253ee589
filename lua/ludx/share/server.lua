-- The serving side of a share: a DHT server whose handler sends the
-- manifest and answers GETs from the files on disk (ludx.share.wire).
local ludx = require "ludx"
local wire = require "ludx.share.wire"

local M = {}

M.HELLO_TIMEOUT = 30000 -- ms for a client to say HELLO
M.IDLE_TIMEOUT = 120000 -- ms without a request before the server hangs up

local Share = {}
Share.__index = Share

local function emit(self, event, info)
  if self.on_event then pcall(self.on_event, event, info) end
end

-- Writes bytes in pieces a SecretStream takes in one write (the manifest
-- may exceed one frame).
local function write_all(conn, bytes)
  local step = 1024 * 1024
  for i = 1, #bytes, step do
    local ok, msg, code = conn:write(bytes:sub(i, i + step - 1))
    if not ok then return nil, msg, code end
  end
  return true
end

local function refuse(conn, code, message)
  conn:write(wire.error(code, message))
  conn:finish(2000)
  conn:close()
  return nil, message
end

-- One open file at a time per connection: GETs come in file order.
local function open_file(st, m, index)
  if st.index == index then return st.f end
  if st.f then st.f:close() end
  st.f, st.index = nil, nil
  local f, msg = io.open(m.files[index].full, "rb")
  if not f then return nil, msg end
  st.f, st.index = f, index
  return f
end

local function serve_get(self, conn, st, g)
  local m = self.manifest
  local file = m.files[g.file + 1]
  if not file then return refuse(conn, wire.E_RANGE, "no file " .. g.file) end
  if g.length < 1 or g.length > wire.GET_MAX or g.offset + g.length > file.size then
    return refuse(conn, wire.E_RANGE, "bad range " .. g.offset .. "+" .. g.length .. " of file " .. g.file)
  end
  local f, msg = open_file(st, m, g.file + 1)
  if not f then return refuse(conn, wire.E_IO, "cannot open " .. file.path .. ": " .. tostring(msg)) end
  f:seek("set", g.offset)
  local off, stop = g.offset, g.offset + g.length
  while off < stop do
    local n = math.min(wire.DATA_MAX, stop - off)
    local data = f:read(n)
    if not data or #data ~= n then return refuse(conn, wire.E_IO, file.path .. " changed on disk") end
    local ok, wmsg = conn:write(wire.data(g.id, g.file, off, data))
    if not ok then return nil, wmsg end
    off = off + n
    st.bytes = st.bytes + n
    if ludx.now() - st.yielded > 2 then
      st.yielded = ludx.now()
      ludx.yield() -- other connections, and the loop's I/O, get a turn
    end
  end
  return true
end

local function handle(self, conn)
  local peer = conn.remote_public_key
  self.active = self.active + 1
  local st = { bytes = 0, yielded = ludx.now() }
  if self.on_connection then pcall(self.on_connection, conn) end
  emit(self, "connect", { peer = peer })
  local rd = wire.reader(conn, wire.CLIENT_MESSAGE_MAX)
  local err
  local kind, bytes, code = rd:next(M.HELLO_TIMEOUT)
  local hello = kind == wire.HELLO and wire.decode(kind, bytes)
  if not hello then
    err = kind and "no HELLO" or (bytes or "closed before HELLO")
    if kind then refuse(conn, wire.E_PROTOCOL, "expected HELLO") else conn:close() end
  elseif hello.version ~= wire.VERSION then
    err = "protocol version " .. hello.version
    refuse(conn, wire.E_VERSION, "this share speaks protocol version " .. wire.VERSION)
  else
    local ok, msg = write_all(conn, wire.manifest(self.manifest.encoded))
    if not ok then err = msg end
    while not err do
      kind, bytes, code = rd:next(M.IDLE_TIMEOUT)
      if not kind then
        if bytes then err = bytes .. (code and (" (" .. code .. ")") or "") end
        conn:finish(5000)
        conn:close()
        break
      end
      local req, why = wire.decode(kind, bytes)
      if not req then
        err = why
        refuse(conn, wire.E_PROTOCOL, why)
      elseif kind == wire.GET then
        local served
        served, why = serve_get(self, conn, st, req)
        if not served then err = why end
      elseif kind == wire.ERROR then
        err = "peer: " .. req.message
        conn:close()
      else
        err = "unexpected " .. (wire.NAMES[kind] or "?")
        refuse(conn, wire.E_PROTOCOL, err)
      end
    end
  end
  if st.f then st.f:close() end
  self.active = self.active - 1
  self.bytes = self.bytes + st.bytes
  emit(self, "close", { peer = peer, bytes = st.bytes, error = err })
end

--- Serves manifest m (built with ludx.share.manifest) on node under
-- opts.keypair (default node.keypair). opts.on_event(event, info) for
-- "connect" / "close" ({peer, bytes, error}); opts.on_connection(conn) runs
-- first for each connection (to attach policies). Returns the share, with
-- share.key (the public key) and share:close().
function M.serve(node, m, opts)
  opts = opts or {}
  local self = setmetatable({
    node = node, manifest = m, keypair = opts.keypair or node.keypair,
    on_event = opts.on_event, on_connection = opts.on_connection,
    active = 0, bytes = 0,
  }, Share)
  self.key = self.keypair.public_key
  self.server = node:server(function(conn) handle(self, conn) end)
  local ok, msg, code = self.server:listen(self.keypair, opts.timeout)
  if not ok then
    self.server:close({ fast = true })
    return nil, msg, code
  end
  return self
end

--- Stops announcing and refuses new clients (open transfers go on).
-- opts.fast skips the unannounce round trip.
function Share:close(opts)
  if self.closed then return true end
  self.closed = true
  return self.server:close(opts)
end

--- close() without the unannounce round trip. Idempotent.
function Share:destroy()
  return self:close({ fast = true })
end

return M
