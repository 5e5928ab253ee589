-- The manifest of a share: what it holds and how to check it.
--
--   { version = 1, name = "photos", kind = "dir" | "file",
--     chunk_size = 1048576, total = bytes,
--     files = { { path = "a/b.jpg", size = n, hash = 64 bytes,
--                 chunks = { 32 bytes, ... } }, ... } }
--
-- hash is BLAKE2b-512 of the whole file (what `b2sum` prints); chunks are
-- BLAKE2b-256 of each chunk_size piece (the last one may be shorter), so a
-- fetcher checks every chunk as it arrives and what a partial file on disk
-- already holds. Encoded with compact-encoding:
--
--   uint version, string name, uint8 kind (1 file, 2 dir), uint chunk_size,
--   uint count, then per file: string path, uint size, fixed64 hash and
--   ceil(size / chunk_size) fixed32 chunk hashes.
local compact = require "ludx.compact"
local core = require("ludx").core
local fs = require "ludx.fs"
local paths = require "ludx.share.paths"

local blake2b = core.crypto.blake2b
local unhex = require("ludx.crypto").unhex
local ceil = math.ceil

local M = {}

M.VERSION = 1
M.CHUNK_SIZE = 1024 * 1024
M.MIN_CHUNK = 16 * 1024
M.MAX_CHUNK = 16 * 1024 * 1024
M.MAX_FILES = 262144 -- files in a manifest a fetcher takes (opts.max_files)
M.MAX_BYTES = 32 * 1024 * 1024 -- bytes of a manifest a fetcher takes (opts.max_manifest)
M.MAX_SIZE = 2 ^ 53 -- bytes in one file (exact in a Lua number)

local KIND = { file = 1, dir = 2 }
local KIND_NAME = { [1] = "file", [2] = "dir" }

function M.chunk_count(size, chunk_size)
  return ceil(size / chunk_size)
end

--- The BLAKE2b-512 of file f (kept in m.encoded for a decoded manifest).
function M.hash(m, f)
  if f.hash then return f.hash end
  return m.encoded:sub(f.hash_at, f.hash_at + 63)
end

--- The BLAKE2b-256 of chunk i (1-based) of file f. A decoded manifest
-- keeps its chunk hashes in m.encoded (no string per chunk: memory stays
-- linear in the manifest's bytes); a built one has them in f.chunks.
function M.chunk(m, f, i)
  if f.chunks then return f.chunks[i] end
  local at = f.chunk_at + (i - 1) * 32
  return m.encoded:sub(at, at + 31)
end

--- Hashes one file: size, BLAKE2b-512, chunk hashes, and the dev/inode
-- of what was hashed. The file is opened without following a symbolic
-- link and must be a regular file. on_bytes(n) after each chunk
-- (progress). nil, msg, code when it cannot be read.
function M.hash_file(full, chunk_size, on_bytes)
  local fd, st, code = core.fs_open_read(full)
  if not fd then return nil, full .. ": " .. tostring(st), code end
  local h = core.hasher(64)
  local chunks, size = {}, 0
  while true do
    local data, msg, c = core.fs_pread(fd, chunk_size, size)
    if not data then
      core.fs_close(fd)
      return nil, full .. ": " .. tostring(msg), c
    end
    if data == "" then break end
    h:update(data)
    chunks[#chunks + 1] = blake2b(data, 32)
    size = size + #data
    if on_bytes then on_bytes(#data) end
  end
  core.fs_close(fd)
  return { size = size, hash = unhex(h:hex()), chunks = chunks, dev = st.dev, ino = st.ino, ctime = st.ctime }
end

--- Builds the manifest of a file or a directory (every regular file under
-- it, sorted). opts: chunk_size, on_bytes(n) while hashing, name. Files
-- whose paths a fetcher would refuse are left out and listed in m.skipped
-- ({path, why}).
function M.build(root, opts)
  opts = opts or {}
  local chunk_size = opts.chunk_size or M.CHUNK_SIZE
  if type(chunk_size) ~= "number" or chunk_size < M.MIN_CHUNK or chunk_size > M.MAX_CHUNK or chunk_size % 1 ~= 0 then
    error("bad argument 'opts.chunk_size' to 'build' (" .. M.MIN_CHUNK .. ".." .. M.MAX_CHUNK .. " expected)", 2)
  end
  local st, msg, code = fs.stat(root)
  if not st then return nil, root .. ": " .. tostring(msg), code end
  if st.type ~= "file" and st.type ~= "directory" then
    return nil, root .. ": not a file or a directory", "EINVAL"
  end
  local list, other
  list, other = fs.walk(root)
  if not list then return nil, other, "EIO" end
  if #list > M.MAX_FILES then return nil, root .. ": more than " .. M.MAX_FILES .. " files", "E2BIG" end
  local name = opts.name or paths.basename(fs.realpath(root) or root)
  if not paths.check_component(name) then name = "share" end
  local m = { version = M.VERSION, name = name, kind = st.type == "file" and "file" or "dir", chunk_size = chunk_size, files = {}, total = 0, skipped = {} }
  -- only regular files are served: links (never followed) and others are left out
  for _, e in ipairs(other) do
    m.skipped[#m.skipped + 1] = { path = e.path, why = e.type == "link" and "a symbolic link (not followed)" or "not a regular file" }
  end
  -- files a fetcher would refuse are left out (and listed in m.skipped),
  -- and so are partial downloads (.ludx-partial)
  local keep, rels = {}, {}
  for _, e in ipairs(list) do
    local path = m.kind == "file" and name or e.path
    local ok, why = paths.check(path)
    if ok then
      keep[#keep + 1] = e
      rels[#rels + 1] = path
      e.path = path
    elseif not ("/" .. e.path .. "/"):find("/" .. paths.PARTIAL_DIR .. "/", 1, true) then
      m.skipped[#m.skipped + 1] = { path = e.path, why = why }
    end
  end
  local ok, why = paths.check_set(rels)
  if not ok then return nil, root .. ": " .. why, "EINVAL" end
  if m.kind == "file" and #keep == 0 then return nil, root .. ": " .. tostring(m.skipped[1] and m.skipped[1].why), "EINVAL" end
  for _, e in ipairs(keep) do
    local r
    r, msg, code = M.hash_file(e.full, chunk_size, opts.on_bytes)
    if not r then return nil, msg, code end
    m.files[#m.files + 1] = { path = e.path, size = r.size, hash = r.hash, chunks = r.chunks, nchunks = #r.chunks, full = e.full, dev = r.dev, ino = r.ino, ctime = r.ctime }
    m.total = m.total + r.size
  end
  m.encoded = M.encode(m)
  m.id = blake2b(m.encoded, 32)
  return m
end

function M.encode(m)
  local w = compact.writer()
  w:uint(m.version)
  w:string(m.name)
  w:uint8(KIND[m.kind])
  w:uint(m.chunk_size)
  w:uint(#m.files)
  for _, f in ipairs(m.files) do
    w:string(f.path)
    w:uint(f.size)
    w:fixed64(M.hash(m, f))
    for i = 1, M.chunk_count(f.size, m.chunk_size) do w:fixed32(M.chunk(m, f, i)) end
  end
  return w:finish()
end

--- Decodes and checks a manifest from the network: the manifest, or nil,
-- reason. Every path is checked (see ludx.share.paths), every count is
-- bounded by the bytes that are there and by the caps in opts:
-- max_manifest (bytes, M.MAX_BYTES), max_files (M.MAX_FILES), max_depth
-- (components per path, paths.MAX_DEPTH). Work and memory are linear in
-- the manifest's size.
function M.decode(s, opts)
  if type(s) ~= "string" then return nil, "manifest is not a string" end
  opts = opts or {}
  local max_bytes, max_files = opts.max_manifest or M.MAX_BYTES, opts.max_files or M.MAX_FILES
  if #s > max_bytes then return nil, "manifest of " .. #s .. " bytes (the limit is " .. max_bytes .. ")" end
  local r = compact.reader(s)
  local m = { version = r:uint() }
  if r.err then return nil, "manifest truncated" end
  if m.version ~= M.VERSION then return nil, "manifest version " .. m.version .. " (this ludx reads " .. M.VERSION .. ")" end
  m.name = r:string()
  m.kind = KIND_NAME[r:uint8()]
  m.chunk_size = r:uint()
  local count = r:uint()
  if r.err then return nil, "manifest truncated" end
  if not m.kind then return nil, "manifest: unknown kind" end
  -- the name is one plain component: it becomes a path below DEST
  local ok, why = paths.check_component(m.name)
  if not ok then return nil, "manifest name: " .. why end
  if m.chunk_size < M.MIN_CHUNK or m.chunk_size > M.MAX_CHUNK then return nil, "manifest: chunk size out of range" end
  if count > max_files then return nil, "manifest: " .. count .. " files (the limit is " .. max_files .. ")" end
  -- each entry takes at least 66 bytes: a lying count cannot allocate
  if count * 66 > r:remaining() then return nil, "manifest truncated" end
  if m.kind == "file" and count ~= 1 then return nil, "manifest: a file share holds one file" end
  m.files, m.total = {}, 0
  local rels = {}
  for i = 1, count do
    local f = { path = r:string(), size = r:uint() }
    if r.err or r:remaining() < 64 then return nil, "manifest truncated" end
    f.hash_at = r.i
    r.i = r.i + 64
    if f.size > M.MAX_SIZE then return nil, "manifest: file " .. i .. " is too large" end
    local n = M.chunk_count(f.size, m.chunk_size)
    if n * 32 > r:remaining() then return nil, "manifest truncated" end
    f.nchunks, f.chunk_at = n, r.i
    r.i = r.i + n * 32
    m.files[i] = f
    rels[i] = f.path
    m.total = m.total + f.size
  end
  if r.err then return nil, "manifest truncated" end
  if not r:done() then return nil, "manifest: trailing bytes" end
  ok, why = paths.check_set(rels, opts.max_depth)
  if not ok then return nil, "manifest: " .. why end
  m.encoded = s
  m.id = blake2b(s, 32)
  return m
end

return M
