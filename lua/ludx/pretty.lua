-- Pretty-printing of Lua values for the REPL: tables are shown with sorted
-- keys, limited depth and length, and cycles marked.
local M = {}

local format, rep, concat, sort = string.format, string.rep, table.concat, table.sort

local function is_identifier(s)
  return type(s) == "string" and s:match("^[%a_][%w_]*$") ~= nil
end

local function quote(s)
  local q = format("%q", s):gsub("\\\n", "\\n")
  return q
end

local function scalar(v)
  local t = type(v)
  if t == "string" then return quote(v) end
  if t == "number" or t == "boolean" or t == "nil" then return tostring(v) end
  return "<" .. tostring(v) .. ">"
end

local function key_order(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then return ta < tb end
  if ta == "number" or ta == "string" then return a < b end
  return tostring(a) < tostring(b)
end

--- Formats v. opts: depth (default 3), items (per table, default 50),
-- indent (default 2).
function M.format(v, opts)
  opts = opts or {}
  local max_depth = opts.depth or 3
  local max_items = opts.items or 50
  local step = rep(" ", opts.indent or 2)
  local seen = {}

  local function fmt(x, depth, pad)
    if type(x) ~= "table" then return scalar(x) end
    if seen[x] then return "<cycle " .. tostring(x) .. ">" end
    local mt = getmetatable(x)
    if mt and mt.__tostring then return tostring(x) end
    if depth >= max_depth then return "{...}" end
    seen[x] = true
    local n = #x
    local keys = {}
    for k in pairs(x) do
      if not (type(k) == "number" and k >= 1 and k <= n and k % 1 == 0) then keys[#keys + 1] = k end
    end
    sort(keys, key_order)
    local parts = {}
    local count = 0
    local inner = pad .. step
    for i = 1, n do
      count = count + 1
      if count > max_items then break end
      parts[#parts + 1] = fmt(x[i], depth + 1, inner)
    end
    for _, k in ipairs(keys) do
      count = count + 1
      if count > max_items then break end
      local key = is_identifier(k) and k or ("[" .. fmt(k, max_depth, inner) .. "]")
      parts[#parts + 1] = key .. " = " .. fmt(x[k], depth + 1, inner)
    end
    local total = n + #keys
    if total > max_items then parts[#parts + 1] = format("... (%d more)", total - max_items) end
    seen[x] = nil
    if #parts == 0 then return "{}" end
    local one = "{ " .. concat(parts, ", ") .. " }"
    if #one <= 72 and not one:find("\n") then return one end
    return "{\n" .. inner .. concat(parts, ",\n" .. inner) .. "\n" .. pad .. "}"
  end

  return fmt(v, 0, "")
end

return M
