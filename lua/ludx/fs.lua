-- Filesystem helpers: stat, directory walks, mkdir -p, atomic writes.
local core = require("ludx").core

local M = {}

M.stat = core.fs_stat
M.lstat = core.fs_lstat
M.rename = core.fs_rename
M.unlink = core.fs_unlink
M.rmdir = core.fs_rmdir
M.realpath = core.fs_realpath
M.truncate = core.fs_truncate

function M.exists(path)
  return core.fs_stat(path) ~= nil
end

--- Creates path and its parents; true if it exists afterwards.
function M.mkdirp(path)
  if path == "" or path == "/" or path == "." then return true end
  local st = core.fs_stat(path)
  if st then
    if st.type == "directory" then return true end
    return nil, path .. " exists and is not a directory", "ENOTDIR"
  end
  local parent = path:match("^(.*)/[^/]+/?$")
  if parent and parent ~= "" then
    local ok, msg, code = M.mkdirp(parent)
    if not ok then return nil, msg, code end
  end
  local ok, msg, code = core.fs_mkdir(path)
  if not ok and code ~= "EEXIST" then return nil, msg, code end
  return true
end

--- Every regular file under root: { {path = "a/b.txt", size = n}, ... },
-- sorted, paths relative to root with "/" separators. A file root gives
-- one entry named after it. Symbolic links below root are not followed
-- (nor listed as files): they come back in the second list, {path=, type="link"}.
function M.walk(root)
  local st, msg, code = core.fs_stat(root)
  if not st then return nil, msg, code end
  if st.type == "file" then
    return { { path = root:match("([^/]+)$"), size = st.size, full = root, dev = st.dev, ino = st.ino } }, {}
  end
  local out, other = {}, {}
  local function visit(dir, rel)
    local entries, m = core.fs_scandir(dir)
    if not entries then error(m .. ": " .. dir, 0) end
    table.sort(entries, function(a, b) return a.name < b.name end)
    for _, e in ipairs(entries) do
      local full = dir .. "/" .. e.name
      local r = rel == "" and e.name or (rel .. "/" .. e.name)
      -- lstat: the type of the entry itself, never of what a link points to
      local s = core.fs_lstat(full)
      local t = s and s.type or e.type
      if t == "directory" then
        visit(full, r)
      elseif t == "file" then
        out[#out + 1] = { path = r, size = s.size, full = full, dev = s.dev, ino = s.ino }
      else
        other[#other + 1] = { path = r, type = t }
      end
    end
  end
  local ok, err = pcall(visit, root, "")
  if not ok then return nil, err, "EIO" end
  return out, other
end

return M
