-- Paths that come from the network are hostile until checked. A share path
-- is relative, uses "/" between components, and every component is a plain
-- name: no "", ".", "..", "/", NUL or control characters, no backslash, no
-- drive letter, at most 255 bytes; the whole path at most 4096 bytes and
-- 128 components. The name ".ludx-partial" is reserved for the fetcher's
-- partial files. A manifest's name is one component.
local M = {}

M.MAX_PATH = 4096
M.MAX_COMPONENT = 255
M.MAX_DEPTH = 128
M.PARTIAL_DIR = ".ludx-partial"

--- One component: the name, or nil, reason.
function M.check_component(c)
  if type(c) ~= "string" then return nil, "not a string" end
  if c == "" then return nil, "empty component" end
  if c == "." or c == ".." then return nil, "'" .. c .. "' component" end
  if c:find("/", 1, true) then return nil, "'/' inside a name" end
  if #c > M.MAX_COMPONENT then return nil, "component longer than " .. M.MAX_COMPONENT .. " bytes" end
  if c:find("%z") then return nil, "NUL byte" end
  if c:find("[%c\127]") then return nil, "control character" end
  if c:find("\\", 1, true) then return nil, "backslash" end
  if c:find("^%a:") then return nil, "drive letter" end
  if c == M.PARTIAL_DIR then return nil, "reserved name " .. M.PARTIAL_DIR end
  return c
end

--- A relative share path: the path and its components, or nil, reason.
-- max_depth: components allowed (default M.MAX_DEPTH).
function M.check(path, max_depth)
  if type(path) ~= "string" then return nil, "path is not a string" end
  if path == "" then return nil, "empty path" end
  if #path > M.MAX_PATH then return nil, "path longer than " .. M.MAX_PATH .. " bytes" end
  if path:sub(1, 1) == "/" then return nil, "absolute path" end
  max_depth = max_depth or M.MAX_DEPTH
  local parts = {}
  for c in (path .. "/"):gmatch("([^/]*)/") do
    local ok, why = M.check_component(c)
    if not ok then return nil, why end
    if #parts >= max_depth then return nil, "more than " .. max_depth .. " components" end
    parts[#parts + 1] = c
  end
  return path, parts
end

--- Checks a list of paths together: each valid, none twice, and no path is
-- a directory of another (a file "a" and a file "a/b"). true or nil, reason.
-- Memory and time are linear in the input (one sort key per path, no path
-- prefix kept): with "/" as NUL (never in a name), a path that lies inside
-- file p sorts right after p or after another such path, so comparing
-- neighbours finds every clash.
function M.check_set(list, max_depth)
  local keys = {}
  for i, p in ipairs(list) do
    local ok, why = M.check(p, max_depth)
    if not ok then return nil, "path " .. i .. ": " .. why end
    keys[i] = p:gsub("/", "\0")
  end
  table.sort(keys)
  for i = 2, #keys do
    local prev, cur = keys[i - 1], keys[i]
    if prev == cur then return nil, "path " .. prev:gsub("%z", "/") .. " is listed twice" end
    if cur:sub(1, #prev + 1) == prev .. "\0" then
      return nil, "path " .. cur:gsub("%z", "/") .. " is inside the file " .. prev:gsub("%z", "/")
    end
  end
  return true
end

--- Joins a checked relative path under root.
function M.join(root, rel)
  if root == "" or root == "." then return rel end
  if root:sub(-1) == "/" then return root .. rel end
  return root .. "/" .. rel
end

function M.dirname(path)
  local d = path:match("^(.*)/[^/]*$")
  if d == nil then return "." end
  if d == "" then return "/" end
  return d
end

function M.basename(path)
  local p = path:gsub("/+$", "")
  return p:match("([^/]+)$") or p
end

return M
