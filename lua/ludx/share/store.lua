-- Where a fetch writes, and what is already there.
--
-- A directory share lands in DEST (default ./NAME); a file share lands at
-- DEST, or DEST/NAME when DEST is a directory (default ./NAME). Data in
-- flight goes to ROOT/.ludx-partial/<hash of the path>.part and is renamed
-- into place once the whole file checks against the manifest. Only chunks
-- that verified are written, so on a restart the partial file is checked
-- chunk by chunk, cut after the last good chunk, and continued from there.
local core = require("ludx").core
local fs = require "ludx.fs"
local paths = require "ludx.share.paths"
local manifest = require "ludx.share.manifest"
local crypto = require "ludx.crypto"

local blake2b = core.crypto.blake2b

local M = {}

-- A layout is built from trusted parts (DEST as the user gave it: `base`)
-- and untrusted parts (the share's name and paths: `rel`, one checked
-- component each). base is the user's choice and is followed; it is opened
-- once (L.dir, a core.fs_opendir handle) and everything below it is
-- reached from that handle one component at a time, never through a
-- symbolic link (openat2 RESOLVE_NO_SYMLINKS, or O_NOFOLLOW per
-- component): a folder swapped for a link while we write makes the write
-- fail, it never lands outside DEST.

--- The target layout: {base=, root=, partial=, files = {{final=, part=,
-- under= (the path below base), part_under=}, ...}}.
function M.layout(m, dest)
  local out = { files = {} }
  if m.kind == "dir" then
    if dest then
      out.base, out.root, out.prefix = dest, dest, ""
    else
      out.base, out.root, out.prefix = ".", m.name, m.name .. "/"
    end
    for i, f in ipairs(m.files) do
      out.files[i] = { final = paths.join(out.root, f.path), rel = f.path, under = out.prefix .. f.path }
    end
  else
    local target, under
    local st = dest and fs.stat(dest)
    if not dest then
      out.base, target, under = ".", m.name, m.name
    elseif st and st.type == "directory" then
      out.base, target, under = dest, paths.join(dest, m.name), m.name
    else
      -- the user named the file: its directory is DEST's base
      out.base, target, under = paths.dirname(dest), dest, paths.basename(dest)
    end
    out.root, out.prefix = paths.dirname(target), ""
    out.files[1] = { final = target, rel = paths.basename(target), under = under }
  end
  out.partial = paths.join(out.root, paths.PARTIAL_DIR)
  out.partial_under = out.prefix .. paths.PARTIAL_DIR
  for _, f in ipairs(out.files) do
    local name = crypto.hex(blake2b(f.rel, 16)) .. ".part"
    f.part = paths.join(out.partial, name)
    f.part_under = out.partial_under .. "/" .. name
  end
  return out
end

-- The handle of base, opened once (following base: the user's choice):
-- the handle, or false when base does not exist yet (nothing is under it),
-- or nil, msg, code.
local function base_dir(L)
  if L.dir then return L.dir end
  local d, msg, code = core.fs_opendir(L.base)
  if not d then
    if code == "ENOENT" then return false end
    return nil, L.base .. ": " .. tostring(msg), code
  end
  L.dir = d
  return d
end

local function link_error(L, under)
  return nil, paths.join(L.base, under) .. ": a symbolic link inside DEST (ludx does not follow links there)", "ELOOP"
end

-- A failed call on a path under base: a link on the way reads as ELOOP
-- (openat2) or ENOTDIR (the O_NOFOLLOW walk).
local function fail_under(L, under, msg, code)
  if code == "ELOOP" or code == "ENOTDIR" then return link_error(L, under) end
  return nil, paths.join(L.base, under) .. ": " .. tostring(msg), code
end

-- Walks `under` (components below base): each existing component but the
-- last must be a directory, none may be a link. last: "file" (absent or a
-- regular file) or "directory". true, stat of the last (or nil), or nil, msg, code.
local function walk(L, under, last)
  local d, msg, code = base_dir(L)
  if d == nil then return nil, msg, code end
  if d == false then return true end
  local parts = {}
  for c in (under .. "/"):gmatch("([^/]*)/") do parts[#parts + 1] = c end
  local p
  for i, c in ipairs(parts) do
    p = p and (p .. "/" .. c) or c
    local st
    st, msg, code = d:lstat(p)
    if not st then
      if code == "ENOENT" then return true end
      return fail_under(L, p, msg, code)
    end
    if st.type == "link" then return link_error(L, p) end
    local want = i < #parts and "directory" or last
    if st.type ~= want then return nil, paths.join(L.base, p) .. ": exists and is not a " .. (want == "file" and "regular file" or want), "EEXIST" end
    if i == #parts then return true, st end
  end
  return true
end

--- Checks the layout against the disk before anything is written: no
-- link and no non-directory on the way to any file, nothing but regular
-- files at the final paths. true or nil, msg, code.
function M.check(L)
  local bst = fs.stat(L.base)
  if bst and bst.type ~= "directory" then return nil, L.base .. ": not a directory", "ENOTDIR" end
  local ok, msg, code = walk(L, L.partial_under, "directory")
  if not ok then return nil, msg, code end
  for _, t in ipairs(L.files) do
    ok, msg, code = walk(L, t.under, "file")
    if not ok then return nil, msg, code end
  end
  return true
end

-- Makes the directories of `under` below base one by one, refusing links.
local function mkdirs(L, under)
  local d, msg, code = base_dir(L)
  if not d then return nil, msg or (L.base .. ": does not exist"), code or "ENOENT" end
  local p
  for c in under:gmatch("([^/]+)/") do
    p = p and (p .. "/" .. c) or c
    local st
    st, msg, code = d:lstat(p)
    if not st and code == "ENOENT" then
      local ok
      ok, msg, code = d:mkdir(p)
      if not ok and code ~= "EEXIST" then return fail_under(L, p, msg, code) end
      st, msg, code = d:lstat(p)
    end
    if not st then return fail_under(L, p, msg, code) end
    if st.type ~= "directory" then return nil, paths.join(L.base, p) .. ": not a directory (or a link) inside DEST", "ELOOP" end
  end
  return true
end

-- Reads the chunks of the partial file that match hashes, in order: the
-- number of good chunks and a hasher fed with them.
local function verify_prefix(L, t, m, file, on_bytes)
  local chunk_size = m.chunk_size
  local h = core.hasher(64)
  local fd = L.dir and L.dir:open_read(t.part_under)
  if not fd then return 0, h end
  local good = 0
  for i = 1, file.nchunks do
    local want = math.min(chunk_size, file.size - (i - 1) * chunk_size)
    local data = core.fs_pread(fd, want, (i - 1) * chunk_size)
    if not data or #data ~= want or blake2b(data, 32) ~= manifest.chunk(m, file, i) then break end
    h:update(data)
    good = i
    if on_bytes then on_bytes(#data) end
  end
  core.fs_close(fd)
  return good, h
end

-- Cuts the partial file of t to size bytes.
local function truncate_part(L, t, size)
  local fd, msg, code = L.dir:open_write(t.part_under)
  if not fd then return fail_under(L, t.part_under, msg, code) end
  local ok
  ok, msg, code = core.fs_ftruncate(fd, size)
  core.fs_close(fd)
  if not ok then return nil, t.part .. ": " .. tostring(msg), code end
  return true
end

--- Looks at what is on disk for each file of m under layout L. Returns a
-- list of states: {done = true} for a file in place that checks, else
-- {first = next chunk (1-based), hasher = BLAKE2b-512 state so far,
-- have = verified bytes}. Partial files are cut after their last good chunk.
-- on_bytes(n) while checking. A file in place that does not match is an
-- error (EEXIST: ludx replaces only files it made) unless force is true.
-- Nothing is written before every final path was looked at.
function M.scan(m, L, on_bytes, force)
  local d, msg, code = base_dir(L)
  if d == nil then return nil, msg, code end
  local states = {}
  for i, f in ipairs(m.files) do
    local t = L.files[i]
    local st = d and d:lstat(t.under)
    if st then
      if st.type == "file" and st.size == f.size then
        local r = manifest.hash_file(t.under, m.chunk_size, on_bytes, d)
        if r and r.hash == manifest.hash(m, f) then states[i] = { done = true, have = f.size } end
      end
      if not states[i] and not force then
        return nil, t.final .. ": exists and differs from the share (ludx replaces only files it made; --force to replace)", "EEXIST"
      end
    end
  end
  for i, f in ipairs(m.files) do
    local t = L.files[i]
    local state = states[i]
    if not state then
      local pst = d and d:lstat(t.part_under)
      if pst and pst.type ~= "file" then return nil, t.part .. ": not a regular file", "EEXIST" end
      local good, h = 0, core.hasher(64)
      if pst and pst.type == "file" then
        good, h = verify_prefix(L, t, m, f, on_bytes)
        local keep = math.min(good * m.chunk_size, f.size)
        if pst.size ~= keep then
          local ok
          ok, msg, code = truncate_part(L, t, keep)
          if not ok then return nil, msg, code end
        end
      end
      state = { first = good + 1, hasher = h, have = math.min(good * m.chunk_size, f.size) }
    end
    states[i] = state
  end
  return states
end

--- Makes the directories the layout needs (DEST itself as asked; below
-- it, real directories only) and opens DEST once (L.dir).
function M.prepare(L)
  local ok, msg, code = fs.mkdirp(L.base)
  if not ok then return nil, L.base .. ": " .. tostring(msg), code end
  ok, msg, code = mkdirs(L, L.partial_under .. "/")
  if not ok then return nil, msg, code end
  return true
end

-- A partial file open for writing: h:write(bytes) at the next offset,
-- h:close().
local Part = {}
Part.__index = Part

function Part:write(bytes)
  if not self.fd then return nil, "closed" end
  local ok, msg = core.fs_pwrite(self.fd, bytes, self.offset)
  if not ok then return nil, msg end
  self.offset = self.offset + #bytes
  return true
end

function Part:close()
  if self.fd then core.fs_close(self.fd) end
  self.fd = nil
  return true
end

--- Opens a file's partial file for writing at offset (from 0: emptied
-- first), without following a link on the way or at the file.
function M.open_part(L, t, offset)
  local d, msg, code = base_dir(L)
  if not d then return nil, msg or (L.base .. ": does not exist"), code or "ENOENT" end
  local fd
  fd, msg, code = d:open_write(t.part_under)
  if not fd then return fail_under(L, t.part_under, msg, code) end
  if offset == 0 then
    local ok
    ok, msg, code = core.fs_ftruncate(fd, 0)
    if not ok then
      core.fs_close(fd)
      return nil, t.part .. ": " .. tostring(msg), code
    end
  end
  return setmetatable({ fd = fd, offset = offset }, Part)
end

--- Cuts a partial file back to offset (the start of a chunk that failed).
function M.cut(L, t, offset)
  if not L.dir then return nil, L.base .. ": not open", "EBADF" end
  return truncate_part(L, t, offset)
end

--- Moves a finished partial file into place (making its directories, none
-- through a link). The rename goes from L.dir to L.dir without following
-- a link on either path, so a folder swapped for a link fails it.
function M.commit(L, t, force)
  -- each directory is made (and walked) once; a link swapped in later
  -- fails the rename itself
  local parent = t.under:match("^(.*)/[^/]*$")
  local ok, msg, code
  L.made = L.made or {}
  if parent and not L.made[parent] then
    ok, msg, code = mkdirs(L, t.under)
    if not ok then return nil, msg, code end
    L.made[parent] = true
  end
  local d = L.dir
  local st
  st, msg, code = d:lstat(t.under)
  if not st and code ~= "ENOENT" then return fail_under(L, t.under, msg, code) end
  if st and (st.type ~= "file" or not force) then
    return nil, t.final .. ": appeared while fetching (ludx replaces only files it made)", "EEXIST"
  end
  ok, msg, code = d:rename(t.part_under, t.under)
  if not ok then return fail_under(L, t.under, msg, code) end
  return true
end

--- Removes the partial directory when nothing is left in it.
function M.cleanup(L)
  local d = L.dir
  if not d then return end
  local pd = d:opendir(L.partial_under)
  local entries = pd and pd:list(1)
  if pd then pd:close() end
  if entries and #entries == 0 then d:unlink(L.partial_under, true) end
end

--- Lets go of DEST's handle. Idempotent.
function M.close(L)
  if L.dir then L.dir:close() end
  L.dir = nil
end

return M
