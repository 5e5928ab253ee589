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

--- The target layout: {root=, partial=, files = {{final=, part=}, ...}}.
function M.layout(m, dest)
  local out = { files = {} }
  if m.kind == "dir" then
    out.root = dest or m.name
    for i, f in ipairs(m.files) do out.files[i] = { final = paths.join(out.root, f.path), rel = f.path } end
  else
    local target = dest or m.name
    local st = fs.stat(target)
    if st and st.type == "directory" then target = paths.join(target, m.name) end
    out.root = paths.dirname(target)
    out.files[1] = { final = target, rel = paths.basename(target) }
  end
  out.partial = paths.join(out.root, paths.PARTIAL_DIR)
  for _, f in ipairs(out.files) do
    f.part = paths.join(out.partial, crypto.hex(blake2b(f.rel, 16)) .. ".part")
  end
  return out
end

-- Reads the chunks of path that match hashes, in order: the number of good
-- chunks and a hasher fed with them.
local function verify_prefix(path, file, chunk_size, on_bytes)
  local h = core.hasher(64)
  local f = io.open(path, "rb")
  if not f then return 0, h end
  local good = 0
  for i = 1, #file.chunks do
    local want = math.min(chunk_size, file.size - (i - 1) * chunk_size)
    local data = f:read(want)
    if not data or #data ~= want or blake2b(data, 32) ~= file.chunks[i] then break end
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
-- on_bytes(n) while checking.
function M.scan(m, L, on_bytes)
  local states = {}
  for i, f in ipairs(m.files) do
    local t = L.files[i]
    local st = fs.stat(t.final)
    local state
    if st and st.type == "file" and st.size == f.size then
      local r = manifest.hash_file(t.final, m.chunk_size, on_bytes)
      if r and r.hash == f.hash then state = { done = true, have = f.size } end
    end
    if not state then
      local pst = fs.stat(t.part)
      local good, h = 0, core.hasher(64)
      if pst and pst.type == "file" then
        good, h = verify_prefix(t.part, f, m.chunk_size, on_bytes)
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

--- Makes the directories the layout needs.
function M.prepare(L)
  local ok, msg, code = fs.mkdirp(L.partial)
  if not ok then return nil, L.partial .. ": " .. tostring(msg), code end
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

--- Moves a finished partial file into place (making its directories).
function M.commit(t)
  local ok, msg, code = fs.mkdirp(paths.dirname(t.final))
  if not ok then return nil, t.final .. ": " .. tostring(msg), code end
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
