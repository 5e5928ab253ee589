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

M.lstat = core.fs_lstat

-- A layout is built from trusted parts (DEST as the user gave it: `base`)
-- and untrusted parts (the share's name and paths: `rel`, one checked
-- component each). Nothing under base is followed: every component must
-- be a real directory (or not exist yet), and every final path is proven
-- to be under base with realpath before a file is moved there.

--- The target layout: {base=, root=, partial=, files = {{final=, part=,
-- under= (the path below base)}, ...}}.
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
    f.part = paths.join(out.partial, crypto.hex(blake2b(f.rel, 16)) .. ".part")
  end
  return out
end

-- Walks `under` (components below base): each existing component but the
-- last must be a directory, none may be a link. last: "file" (absent or a
-- regular file) or "directory". true, stat of the last (or nil), or nil, msg, code.
local function walk(base, under, last)
  local p = base
  local parts = {}
  for c in (under .. "/"):gmatch("([^/]*)/") do parts[#parts + 1] = c end
  for i, c in ipairs(parts) do
    p = paths.join(p, c)
    local st = M.lstat(p)
    if not st then return true end
    if st.type == "link" then return nil, p .. ": a symbolic link inside DEST (ludx does not follow links there)", "ELOOP" end
    local want = i < #parts and "directory" or last
    if st.type ~= want then return nil, p .. ": exists and is not a " .. (want == "file" and "regular file" or want), "EEXIST" end
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
  local ok, msg, code = walk(L.base, L.partial_under, "directory")
  if not ok then return nil, msg, code end
  for _, t in ipairs(L.files) do
    ok, msg, code = walk(L.base, t.under, "file")
    if not ok then return nil, msg, code end
  end
  return true
end

-- Makes the directories of `under` below base one by one, refusing links.
local function mkdirs(base, under)
  local p = base
  for c in under:gmatch("([^/]+)/") do
    p = paths.join(p, c)
    local st = M.lstat(p)
    if not st then
      local ok, msg, code = core.fs_mkdir(p)
      if not ok and code ~= "EEXIST" then return nil, p .. ": " .. tostring(msg), code end
      st = M.lstat(p)
    end
    if not st or st.type ~= "directory" then return nil, p .. ": not a directory (or a link) inside DEST", "ELOOP" end
  end
  return true
end

-- The parent of a final path, resolved, must lie under the resolved base.
local function prove_under(L, t)
  local real_base = L.real_base or fs.realpath(L.base)
  L.real_base = real_base
  local real_dir = fs.realpath(paths.dirname(t.final))
  if not real_base or not real_dir then return nil, t.final .. ": cannot resolve its directory", "ENOENT" end
  local want = (t.under:match("^(.*)/[^/]*$"))
  local expect = want and (real_base == "/" and "/" .. want or real_base .. "/" .. want) or real_base
  if real_dir ~= expect then return nil, t.final .. ": resolves outside DEST (" .. real_dir .. ")", "ELOOP" end
  return true
end

-- Reads the chunks of path that match hashes, in order: the number of good
-- chunks and a hasher fed with them.
local function verify_prefix(path, m, file, on_bytes)
  local chunk_size = m.chunk_size
  local h = core.hasher(64)
  local f = io.open(path, "rb")
  if not f then return 0, h end
  local good = 0
  for i = 1, file.nchunks do
    local want = math.min(chunk_size, file.size - (i - 1) * chunk_size)
    local data = f:read(want)
    if not data or #data ~= want or blake2b(data, 32) ~= manifest.chunk(m, file, i) then break end
    h:update(data)
    good = i
    if on_bytes then on_bytes(#data) end
  end
  f:close()
  return good, h
end

--- Looks at what is on disk for each file of m under layout L. Returns a
-- list of states: {done = true} for a file in place that checks, else
-- {first = next chunk (1-based), hasher = BLAKE2b-512 state so far,
-- have = verified bytes}. Partial files are cut after their last good chunk.
-- on_bytes(n) while checking. A file in place that does not match is an
-- error (EEXIST: ludx replaces only files it made) unless force is true.
-- Nothing is written before every final path was looked at.
function M.scan(m, L, on_bytes, force)
  local states = {}
  for i, f in ipairs(m.files) do
    local t = L.files[i]
    local st = M.lstat(t.final)
    if st then
      if st.type == "file" and st.size == f.size then
        local r = manifest.hash_file(t.final, m.chunk_size, on_bytes)
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
      local pst = M.lstat(t.part)
      if pst and pst.type ~= "file" then return nil, t.part .. ": not a regular file", "EEXIST" end
      local good, h = 0, core.hasher(64)
      if pst and pst.type == "file" then
        good, h = verify_prefix(t.part, m, f, on_bytes)
        local keep = math.min(good * m.chunk_size, f.size)
        if pst.size ~= keep then
          local ok, msg, code = fs.truncate(t.part, keep)
          if not ok then return nil, t.part .. ": " .. tostring(msg), code end
        end
      end
      state = { first = good + 1, hasher = h, have = math.min(good * m.chunk_size, f.size) }
    end
    states[i] = state
  end
  return states
end

--- Makes the directories the layout needs (DEST itself as asked; below
-- it, real directories only).
function M.prepare(L)
  local ok, msg, code = fs.mkdirp(L.base)
  if not ok then return nil, L.base .. ": " .. tostring(msg), code end
  ok, msg, code = mkdirs(L.base, L.partial_under .. "/")
  if not ok then return nil, msg, code end
  return true
end

--- Opens a file's partial file for writing at offset.
function M.open_part(t, offset)
  local f, msg = io.open(t.part, offset > 0 and "r+b" or "wb")
  if not f then return nil, msg, "EIO" end
  if offset > 0 then f:seek("set", offset) end
  return f
end

--- Cuts a partial file back to offset (the start of a chunk that failed).
function M.cut(t, offset)
  return fs.truncate(t.part, offset)
end

--- Moves a finished partial file into place (making its directories, none
-- through a link), once its directory is proven to be under DEST.
function M.commit(L, t, force)
  -- each directory is made (and walked) once; the realpath proof below
  -- runs for every file, so a link swapped in later is still caught
  local parent = t.under:match("^(.*)/[^/]*$")
  local ok, msg, code
  L.made = L.made or {}
  if parent and not L.made[parent] then
    ok, msg, code = mkdirs(L.base, t.under)
    if not ok then return nil, msg, code end
    L.made[parent] = true
  end
  ok, msg, code = prove_under(L, t)
  if not ok then return nil, msg, code end
  local st = M.lstat(t.final)
  if st and (st.type ~= "file" or not force) then
    return nil, t.final .. ": appeared while fetching (ludx replaces only files it made)", "EEXIST"
  end
  ok, msg, code = fs.rename(t.part, t.final)
  if not ok then return nil, t.final .. ": " .. tostring(msg), code end
  return true
end

--- Removes the partial directory when nothing is left in it.
function M.cleanup(L)
  local entries = core.fs_scandir(L.partial)
  if entries and #entries == 0 then fs.rmdir(L.partial) end
end

return M
