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
local check = require "ludx.check"
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
M.MAX_ENTRIES = 2 * M.MAX_FILES -- entries (files, folders, links) build walks (opts.max_entries)

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
-- of what was hashed. The file must be a regular file, opened without
-- following a symbolic link: `where` is a path (only its last component
-- is not followed), or, with dir (a core.fs_opendir handle), a relative
-- path under dir reached without following any link. on_bytes(n) after
-- each chunk (progress). nil, msg, code when it cannot be read.
function M.hash_file(where, chunk_size, on_bytes, dir)
  local fd, st, code
  if dir then
    fd, st, code = dir:open_read(where)
  else
    fd, st, code = core.fs_open_read(where)
  end
  if not fd then return nil, where .. ": " .. tostring(st), code end
  local h = core.hasher(64)
  local chunks, size = {}, 0
  while true do
    local data, msg, c = core.fs_pread(fd, chunk_size, size)
    if not data then
      core.fs_close(fd)
      return nil, where .. ": " .. tostring(msg), c
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

-- Every regular file under the folder handle root, sorted: {path=, size=}
-- ({path=, type=} in `other` for links, devices, and folders that stopped
-- being folders while walked, or lie deeper than paths.MAX_DEPTH). Each
-- folder is entered from its parent's handle, never through a link (a
-- folder swapped for a link after it was listed is refused by the open,
-- not by a check before it). At most max_entries entries in all.
-- on_entry(path, type) between entries (a test hook).
local function walk(root, max_entries, on_entry)
  local out, other, seen = {}, {}, 0
  local function visit(d, rel, depth)
    local entries, msg, code = d:list(max_entries - seen)
    if not entries then
      if code == "E2BIG" then msg = "more than " .. max_entries .. " entries (opts.max_entries)" end
      return nil, (rel == "" and "." or rel) .. ": " .. tostring(msg), code
    end
    seen = seen + #entries
    table.sort(entries, function(a, b) return a.name < b.name end)
    for _, e in ipairs(entries) do
      local r = rel == "" and e.name or (rel .. "/" .. e.name)
      if on_entry then on_entry(r, e.type) end
      if e.type == "directory" then
        local sub, why
        if depth < paths.MAX_DEPTH then
          sub, why = d:opendir(e.name)
        else
          why = "deeper than " .. paths.MAX_DEPTH .. " folders"
        end
        if sub then
          local ok, m2, c2 = visit(sub, r, depth + 1)
          sub:close()
          if not ok then return nil, m2, c2 end
        else
          other[#other + 1] = { path = r, type = "directory", why = "not entered: " .. tostring(why) }
        end
      elseif e.type == "file" then
        out[#out + 1] = { path = r, size = e.size }
      else
        other[#other + 1] = { path = r, type = e.type }
      end
    end
    return true
  end
  local ok, msg, code = visit(root, "", 1)
  if not ok then return nil, msg, code end
  return out, other
end

local function close_root(m)
  if m.root then m.root:close() end
  m.root = nil
end

--- Builds the manifest of a file or a directory (every regular file under
-- it, sorted). opts: chunk_size, on_total(bytes) once the files to hash
-- are known, on_bytes(n) while hashing, name, max_entries (entries walked in all, M.MAX_ENTRIES). Files whose paths a
-- fetcher would refuse are left out and listed in m.skipped ({path, why}).
--
-- The root is the user's choice and is followed when it is a link (a file
-- root: its folder is opened where the link points); it is opened once and
-- kept in m.root (a core.fs_opendir handle; manifest.close(m) lets it go).
-- Nothing below it is ever followed: the walk, the hashing and the server
-- reach every file from m.root one component at a time without links.
function M.build(root, opts, fname)
  opts = opts or {}
  fname = fname or "manifest.build" -- share.serve builds under its own name
  local chunk_size = check.opt_number(opts, "chunk_size", fname, M.CHUNK_SIZE, M.MIN_CHUNK, true, M.MAX_CHUNK)
  local max_entries = check.opt_number(opts, "max_entries", fname, M.MAX_ENTRIES, 1, true)
  check.func(opts.on_total, "opts.on_total", fname, true)
  check.func(opts.on_bytes, "opts.on_bytes", fname, true)
  local st, msg, code = fs.stat(root)
  if not st then return nil, root .. ": " .. tostring(msg), code end
  if st.type ~= "file" and st.type ~= "directory" then
    return nil, root .. ": not a file or a directory", "EINVAL"
  end
  local real = fs.realpath(root)
  local m = { version = M.VERSION, kind = st.type == "file" and "file" or "dir", chunk_size = chunk_size, files = {}, total = 0, skipped = {} }
  local list, other
  if m.kind == "dir" then
    m.root, msg, code = core.fs_opendir(root)
    if not m.root then return nil, root .. ": " .. tostring(msg), code end
    list, other, code = walk(m.root, max_entries, opts._on_entry)
    if not list then
      close_root(m)
      return nil, root .. ": " .. tostring(other), code
    end
  else
    -- a file: its folder (where a link points) opened once, the file by name
    if not real then return nil, root .. ": cannot resolve it", "ENOENT" end
    m.root, msg, code = core.fs_opendir(paths.dirname(real))
    if not m.root then return nil, root .. ": " .. tostring(msg), code end
    local base = paths.basename(real)
    list, other = { { path = base, size = st.size } }, {}
  end
  if #list > M.MAX_FILES then
    close_root(m)
    return nil, root .. ": more than " .. M.MAX_FILES .. " files", "E2BIG"
  end
  local name = opts.name or paths.basename(real or root)
  if not paths.check_component(name) then name = "share" end
  m.name = name
  -- only regular files are served: links (never followed) and others are left out
  for _, e in ipairs(other) do
    m.skipped[#m.skipped + 1] = { path = e.path, why = e.why or (e.type == "link" and "a symbolic link (not followed)" or "not a regular file") }
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
      e.rel, e.path = e.path, path
    elseif not ("/" .. e.path .. "/"):find("/" .. paths.PARTIAL_DIR .. "/", 1, true) then
      m.skipped[#m.skipped + 1] = { path = e.path, why = why }
    end
  end
  local ok, why = paths.check_set(rels)
  if not ok then
    close_root(m)
    return nil, root .. ": " .. why, "EINVAL"
  end
  if m.kind == "file" and #keep == 0 then
    close_root(m)
    return nil, root .. ": " .. tostring(m.skipped[1] and m.skipped[1].why), "EINVAL"
  end
  if opts.on_total then
    local total = 0
    for _, e in ipairs(keep) do total = total + (e.size or 0) end
    opts.on_total(total)
  end
  for _, e in ipairs(keep) do
    local r
    r, msg, code = M.hash_file(e.rel, chunk_size, opts.on_bytes, m.root)
    if not r then
      close_root(m)
      return nil, paths.join(root, tostring(msg)), code
    end
    m.files[#m.files + 1] = {
      path = e.path, rel = e.rel, size = r.size, hash = r.hash, chunks = r.chunks, nchunks = #r.chunks,
      dev = r.dev, ino = r.ino, ctime = r.ctime,
    }
    m.total = m.total + r.size
  end
  m.encoded = M.encode(m)
  m.id = blake2b(m.encoded, 32)
  return m
end

--- Lets go of the folder a built manifest holds open (m.root); a server
-- of m cannot open files afterwards. Idempotent.
function M.close(m)
  close_root(m)
  return true
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
