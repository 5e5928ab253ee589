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
M.MAX_FILES = compact.MAX_ARRAY
M.MAX_SIZE = 2 ^ 53 -- bytes in one file (exact in a Lua number)

local KIND = { file = 1, dir = 2 }
local KIND_NAME = { [1] = "file", [2] = "dir" }

function M.chunk_count(size, chunk_size)
  return ceil(size / chunk_size)
end

--- Hashes one file: size, BLAKE2b-512, chunk hashes. on_bytes(n) after
-- each chunk (progress). nil, msg, code when it cannot be read.
function M.hash_file(full, chunk_size, on_bytes)
  local f, msg = io.open(full, "rb")
  if not f then return nil, msg, "EIO" end
  local h = core.hasher(64)
  local chunks, size = {}, 0
  while true do
    local data = f:read(chunk_size)
    if not data then break end
    h:update(data)
    chunks[#chunks + 1] = blake2b(data, 32)
    size = size + #data
    if on_bytes then on_bytes(#data) end
  end
  f:close()
  return { size = size, hash = unhex(h:hex()), chunks = chunks }
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
  local list
  list, msg, code = fs.walk(root)
  if not list then return nil, msg, code end
  if #list > M.MAX_FILES then return nil, root .. ": more than " .. M.MAX_FILES .. " files", "E2BIG" end
  local name = opts.name or paths.basename(fs.realpath(root) or root)
  if not paths.check_component(name) then name = "share" end
  local m = { version = M.VERSION, name = name, kind = st.type == "file" and "file" or "dir", chunk_size = chunk_size, files = {}, total = 0, skipped = {} }
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
    m.files[#m.files + 1] = { path = e.path, size = r.size, hash = r.hash, chunks = r.chunks, full = e.full }
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
    w:fixed64(f.hash)
    for i = 1, M.chunk_count(f.size, m.chunk_size) do w:fixed32(f.chunks[i]) end
  end
  return w:finish()
end

--- Decodes and checks a manifest from the network: the manifest, or nil,
-- reason. Every path is checked (see ludx.share.paths), every count is
-- bounded by the bytes that are there.
function M.decode(s)
  if type(s) ~= "string" then return nil, "manifest is not a string" end
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
  local ok, why = paths.check_component(m.name)
  if not ok then return nil, "manifest name: " .. why end
  if m.chunk_size < M.MIN_CHUNK or m.chunk_size > M.MAX_CHUNK then return nil, "manifest: chunk size out of range" end
  if count > M.MAX_FILES then return nil, "manifest: too many files" end
  if m.kind == "file" and count ~= 1 then return nil, "manifest: a file share holds one file" end
  m.files, m.total = {}, 0
  local rels = {}
  for i = 1, count do
    local f = { path = r:string(), size = r:uint() }
    f.hash = r:fixed64()
    if r.err then return nil, "manifest truncated" end
    if f.size > M.MAX_SIZE then return nil, "manifest: file " .. i .. " is too large" end
    local n = M.chunk_count(f.size, m.chunk_size)
    if n * 32 > r:remaining() then return nil, "manifest truncated" end
    f.chunks = {}
    for j = 1, n do f.chunks[j] = r:fixed32() end
    m.files[i] = f
    rels[i] = f.path
    m.total = m.total + f.size
  end
  if r.err then return nil, "manifest truncated" end
  if not r:done() then return nil, "manifest: trailing bytes" end
  ok, why = paths.check_set(rels)
  if not ok then return nil, "manifest: " .. why end
  m.encoded = s
  m.id = blake2b(s, 32)
  return m
end

return M
