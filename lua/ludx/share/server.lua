-- The serving side of a share: a DHT server whose handler sends the
-- manifest and answers GETs from the files on disk (ludx.share.wire).
--
-- Clients are strangers: every resource one can make the server spend is
-- capped (defaults below, each an option of serve): connections in all,
-- per peer key and per address; GETs waiting per connection; bytes queued
-- for sending (write_limit) and buffered from the peer (read_limit) per
-- connection; how long a write may wait for the peer to take bytes
-- (write_timeout: a zero-window reader is cut off), how long a connection
-- may sit without a request (idle_timeout). Only regular files are served,
-- reached from the share's root folder handle without following any link,
-- and only when they are the very files
-- that were hashed (same device, inode and size; when the change time
-- differs, each chunk is checked against its hash before it is sent).
local ludx = require "ludx"
local check = require "ludx.check"
local core = ludx.core
local wire = require "ludx.share.wire"
local manifest = require "ludx.share.manifest"

local blake2b = core.crypto.blake2b

local M = {}

M.HELLO_TIMEOUT = 30000 -- ms for a client to say HELLO
M.IDLE_TIMEOUT = 120000 -- ms without a request (and nothing to send) before the server hangs up
M.WRITE_TIMEOUT = 30000 -- ms a write may wait for the peer to take bytes
M.MAX_CONNECTIONS = 64 -- connections at once
M.MAX_PER_PEER = 4 -- connections at once from one public key
M.MAX_PER_ADDRESS = 16 -- connections at once from one IP address
M.MAX_QUEUED = 64 -- GETs one connection may have waiting
M.WRITE_LIMIT = 2 * 1024 * 1024 -- bytes queued for sending per connection (40 MB/s at 50 ms RTT)
M.READ_LIMIT = 256 * 1024 -- bytes buffered from one peer (udx read buffer)

local Share = {}
Share.__index = Share

local function emit(self, event, info)
  if self.on_event then pcall(self.on_event, event, info) end
end

local function refuse(conn, code, message)
  conn:write(wire.error(code, message))
  conn:finish(2000)
  conn:close(2000) -- the client reads the error, then ends
  return nil, message
end

local function close_file(st)
  if st.fd then core.fs_close(st.fd) end
  st.fd, st.index, st.verify, st.vchunk, st.vdata = nil, nil, nil, nil, nil
end

-- One open file at a time per connection: GETs come in file order. The
-- file is reached from the share's root handle (m.root, opened once when
-- the manifest was built) without following any link on the way, and it
-- must be the one hashed.
local function open_file(st, m, index)
  if st.index == index then return st.fd end
  close_file(st)
  local file = m.files[index]
  if not m.root then return nil, "the manifest's folder is closed" end
  local fd, fst, code = m.root:open_read(file.rel)
  if not fd then return nil, (code == "ELOOP" or code == "ENOTDIR") and "a symbolic link on its path" or tostring(fst) end
  if (file.ino and (fst.ino ~= file.ino or fst.dev ~= file.dev)) or fst.size ~= file.size then
    core.fs_close(fd)
    return nil, "not the file that was hashed"
  end
  st.fd, st.index = fd, index
  -- changed since hashing (or a new file on a reused inode number): only
  -- bytes whose chunk hash still checks are sent
  st.verify = file.ctime ~= nil and fst.ctime ~= file.ctime
  return fd
end

-- n bytes at off of the open file; when st.verify, from a whole chunk
-- whose hash matches the manifest (the last one is kept), else nil.
local function read_at(st, m, file, off, n)
  if not st.verify then return core.fs_pread(st.fd, n, off) end
  local cs = m.chunk_size
  local ci = math.floor(off / cs)
  if st.vchunk ~= ci then
    st.vchunk, st.vdata = nil, nil
    local want = math.min(cs, file.size - ci * cs)
    local data = core.fs_pread(st.fd, want, ci * cs)
    if not data or #data ~= want or blake2b(data, 32) ~= manifest.chunk(m, file, ci + 1) then return nil end
    st.vchunk, st.vdata = ci, data
  end
  local at = off - ci * cs
  return st.vdata:sub(at + 1, at + n)
end

-- Waits until n more bytes fit under write_limit on the connection's udx
-- stream; gives up when the queue made no progress for write_timeout. The
-- stream's counters are refreshed when the loop turns, so bytes written
-- since then (st.unsynced) count too.
local function wait_room(self, conn, st, n)
  local raw = conn.udx_stream
  if not raw or not raw.stats_struct then return true end
  local s = raw:stats_struct()
  local room = math.max(0, self.write_limit - n)
  if tonumber(s.write_queued) + st.unsynced <= room then
    st.unsynced = st.unsynced + n
    return true
  end
  ludx.sleep(0) -- one turn of the loop: the counters are fresh
  st.unsynced = 0
  local queued, since = tonumber(s.write_queued), ludx.now()
  while queued > room do
    if raw:is_closed() then return nil, "closed", "ECANCELED" end
    ludx.sleep(2)
    local q = tonumber(s.write_queued)
    if q < queued then since = ludx.now() end
    queued = q
    if ludx.now() - since >= self.write_timeout then return nil, "the peer took no bytes for " .. self.write_timeout .. " ms", "ETIMEDOUT" end
  end
  st.unsynced = n
  return true
end

-- Writes bytes (the manifest) in pieces a SecretStream takes in one write,
-- each under write_limit like the DATA messages.
local function write_all(self, conn, st, bytes)
  local step = math.max(65536, math.min(1024 * 1024, math.floor(self.write_limit / 2)))
  for i = 1, #bytes, step do
    local piece = bytes:sub(i, i + step - 1)
    local ok, msg, code = wait_room(self, conn, st, #piece)
    if ok then ok, msg, code = st.write(piece) end
    if not ok then return nil, msg, code end
  end
  return true
end

local function serve_get(self, conn, st, g)
  local m = self.manifest
  local file = m.files[g.file + 1]
  if not file then return refuse(conn, wire.E_RANGE, "no file " .. g.file) end
  if g.length < 1 or g.length > wire.GET_MAX or g.offset + g.length > file.size then
    return refuse(conn, wire.E_RANGE, "bad range " .. g.offset .. "+" .. g.length .. " of file " .. g.file)
  end
  local fd, msg = open_file(st, m, g.file + 1)
  if not fd then return refuse(conn, wire.E_IO, "cannot serve " .. file.path .. ": " .. tostring(msg)) end
  local off, stop = g.offset, g.offset + g.length
  while off < stop do
    local n = math.min(wire.DATA_MAX, stop - off)
    -- a piece never spans two chunks (each is checked on its own)
    if st.verify then n = math.min(n, (math.floor(off / m.chunk_size) + 1) * m.chunk_size - off) end
    local data = read_at(st, m, file, off, n)
    if not data or #data ~= n then return refuse(conn, wire.E_IO, file.path .. " changed on disk") end
    local out = wire.data(g.id, g.file, off, data)
    local ok, wmsg, wcode = wait_room(self, conn, st, #out)
    if ok then ok, wmsg, wcode = st.write(out) end
    if not ok then
      conn:destroy()
      if wcode == "ETIMEDOUT" then wmsg = "the peer took no bytes for " .. self.write_timeout .. " ms" end
      return nil, wmsg
    end
    off = off + n
    st.bytes = st.bytes + n
    if ludx.now() - st.yielded > 2 then
      st.yielded = ludx.now()
      ludx.yield() -- other connections, and the loop's I/O, get a turn
    end
  end
  return true
end

-- Reads the client's messages as they come (so nothing piles up in the
-- stream's buffers) and queues GETs for the serving task, up to max_queued.
local function reader(self, rd, st)
  while not st.done do
    local kind, bytes, code = rd:next()
    if st.done then return end
    local req, why
    if not kind then
      st.ended = bytes and (bytes .. (code and (" (" .. code .. ")") or "")) or true
    else
      req, why = wire.decode(kind, bytes)
      if not req then
        st.fail = { wire.E_PROTOCOL, why }
      elseif kind == wire.GET then
        if st.qtail - st.qhead + 1 >= self.max_queued then
          st.fail = { wire.E_PROTOCOL, "more than " .. self.max_queued .. " requests waiting" }
        else
          st.qtail = st.qtail + 1
          st.queue[st.qtail] = req
        end
      elseif kind == wire.ERROR then
        st.ended = "peer: " .. tostring(req.message)
      else
        st.fail = { wire.E_PROTOCOL, "unexpected " .. (wire.NAMES[kind] or "?") }
      end
    end
    st.wake:wake_all(true)
    if st.ended or st.fail then return end
  end
end

local function count(tbl, key, d)
  if key == nil then return end
  local n = (tbl[key] or 0) + d
  tbl[key] = n > 0 and n or nil
end

-- true when one more connection from peer/host fits under the caps.
function Share:_room(peer, host)
  if self.active >= self.max_connections then return false, "too many connections" end
  if peer and (self.per_peer[peer] or 0) >= self.max_per_peer then return false, "too many connections from this peer" end
  if host and (self.per_address[host] or 0) >= self.max_per_address then return false, "too many connections from this address" end
  return true
end

local function handle(self, conn)
  local peer = conn.remote_public_key
  local host = conn.udx_stream and conn.udx_stream.remote_address and conn.udx_stream:remote_address() or nil
  local room, why = self:_room(peer, host)
  if not room then
    self.refused = self.refused + 1
    conn:write(wire.error(wire.E_BUSY, why))
    conn:close(2000) -- the error goes out before the END
    emit(self, "refuse", { peer = peer, host = host, error = why })
    return
  end
  self.active = self.active + 1
  count(self.per_peer, peer, 1)
  count(self.per_address, host, 1)
  if conn.udx_stream and conn.udx_stream.set_read_buffer_limit then conn.udx_stream:set_read_buffer_limit(self.read_limit) end
  local st = { bytes = 0, unsynced = 0, yielded = ludx.now(), queue = {}, qhead = 1, qtail = 0, wake = ludx.waiters() }
  st.write = function(bytes) return conn:write(bytes, self.write_timeout) end
  if self.on_connection then pcall(self.on_connection, conn) end
  emit(self, "connect", { peer = peer, host = host })
  local rd = wire.reader(conn, wire.CLIENT_MESSAGE_MAX)
  local err
  local kind, bytes = rd:next(self.hello_timeout)
  local hello = kind == wire.HELLO and wire.decode(kind, bytes)
  if not hello then
    err = kind and "no HELLO" or (bytes or "closed before HELLO")
    if kind then refuse(conn, wire.E_PROTOCOL, "expected HELLO") else conn:destroy() end
  elseif hello.version ~= wire.VERSION then
    err = "protocol version " .. hello.version
    refuse(conn, wire.E_VERSION, "this share speaks protocol version " .. wire.VERSION)
  else
    local ok, msg = write_all(self, conn, st, wire.manifest(self.manifest.encoded))
    if not ok then
      err = msg
      conn:destroy()
    end
    local task = not err and ludx.spawn("share reader", reader, self, rd, st)
    while not err do
      if st.qhead <= st.qtail then
        local g = st.queue[st.qhead]
        st.queue[st.qhead] = nil
        st.qhead = st.qhead + 1
        local served, reason = serve_get(self, conn, st, g)
        if not served then err = reason or "closed" end
      elseif st.fail then
        err = st.fail[2]
        refuse(conn, st.fail[1], st.fail[2])
      elseif st.ended then
        if st.ended ~= true then err = st.ended end
        conn:finish(5000)
        conn:close(5000) -- the client's END follows its last read
        break
      else
        local woke, _, code = st.wake:wait("share requests", self.idle_timeout)
        if not woke and code == "ETIMEDOUT" and st.qhead > st.qtail and not (st.fail or st.ended) then
          err = "idle for " .. self.idle_timeout .. " ms"
          conn:destroy()
        end
      end
    end
    st.done = true
    if task and not conn:is_closed() then conn:destroy() end
  end
  close_file(st)
  -- the slot is held until the stream is gone: a closed one lingers until
  -- the client's END (at most its close timeout), and a client that never
  -- ends must not get more streams than the caps by it
  local raw = conn.udx_stream
  if raw and raw.wait_closed then pcall(raw.wait_closed, raw, 10000) end
  self.active = self.active - 1
  self:_release()
  count(self.per_peer, peer, -1)
  count(self.per_address, host, -1)
  self.bytes = self.bytes + st.bytes
  emit(self, "close", { peer = peer, host = host, bytes = st.bytes, error = err })
end

-- The caps of serve from opts (numbers >= 1, the defaults in M); a wrong
-- one raises, naming share.serve (share.serve checks them before it hashes).
function M._options(opts)
  local function cap(name, default) return check.opt_number(opts, name, "share.serve", default, 1) end
  return {
    max_connections = cap("max_connections", M.MAX_CONNECTIONS),
    max_per_peer = cap("max_per_peer", M.MAX_PER_PEER),
    max_per_address = cap("max_per_address", M.MAX_PER_ADDRESS),
    max_queued = cap("max_queued", M.MAX_QUEUED),
    write_limit = cap("write_limit", M.WRITE_LIMIT),
    read_limit = cap("read_limit", M.READ_LIMIT),
    write_timeout = cap("write_timeout", M.WRITE_TIMEOUT),
    idle_timeout = cap("idle_timeout", M.IDLE_TIMEOUT),
    hello_timeout = cap("hello_timeout", M.HELLO_TIMEOUT),
  }
end

--- Serves manifest m (built with ludx.share.manifest) on node under
-- opts.keypair (default node.keypair). opts.on_event(event, info) for
-- "connect" / "close" ({peer, host, bytes, error}) / "refuse" ({peer,
-- host, error}); opts.on_connection(conn) runs first for each connection
-- (to attach policies). Caps (defaults in M): max_connections,
-- max_per_peer, max_per_address, max_queued, write_limit, read_limit
-- (bytes), write_timeout, idle_timeout, hello_timeout (ms). Returns the
-- share, with share.key (the public key) and share:close().
function M.serve(node, m, opts)
  opts = opts or {}
  local self = setmetatable(M._options(opts), Share)
  self.node, self.manifest, self.keypair = node, m, opts.keypair or node.keypair
  self.on_event, self.on_connection = opts.on_event, opts.on_connection
  self.active, self.bytes, self.refused, self.per_peer, self.per_address = 0, 0, 0, {}, {}
  self.key = self.keypair.public_key
  -- over a cap, a handshake is refused before a stream is made for it
  local firewall = function(remote_key, _, address)
    return not self:_room(remote_key, address and address.host)
  end
  self.server = node:server(function(conn) handle(self, conn) end, { firewall = firewall })
  local ok, msg, code = self.server:listen(self.keypair, opts.timeout)
  if not ok then
    self.server:close({ fast = true })
    return nil, msg, code
  end
  return self
end

-- A manifest the share built itself (share.serve of a path) holds its
-- folder open until the share is closed and its last transfer ended.
function Share:_release()
  if self.closed and self.own_manifest and self.active == 0 then manifest.close(self.manifest) end
end

--- Stops announcing and refuses new clients (open transfers go on).
-- opts.fast skips the unannounce round trip. Idempotent: a second close
-- waits for the first one's unannounce; destroy() ends it at once.
function Share:close(opts)
  -- the server's close waits for, or (fast) cuts short, the one running
  if self.closed then return self.server:close(opts) end
  self.closed = true
  local ok, msg, code = self.server:close(opts)
  self:_release()
  return ok, msg, code
end

--- close() without the unannounce round trip. Idempotent.
function Share:destroy()
  return self:close({ fast = true })
end

return M
