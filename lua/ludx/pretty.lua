-- Pretty-printing of Lua values for the REPL: tables are shown with sorted
-- keys, limited depth and length, and cycles marked; objects print their
-- __tostring, or one line of their fields; binary strings print as hex and
-- long strings are cut.
local M = {}

local format, rep, concat, sort = string.format, string.rep, table.concat, table.sort

local function is_identifier(s)
  return type(s) == "string" and s:match("^[%a_][%w_]*$") ~= nil
end

local function quote(s)
  local q = format("%q", s):gsub("\\\n", "\\n")
  return q
end

-- Whether s reads as text: UTF-8 without control bytes other than tab, CR
-- and LF (looked at up to `upto` bytes).
local function is_text(s, upto)
  local n = math.min(#s, upto)
  local i = 1
  while i <= n do
    local c = s:byte(i)
    if c < 0x80 then
      if (c < 0x20 and c ~= 9 and c ~= 10 and c ~= 13) or c == 0x7f then return false end
      i = i + 1
    else
      local len = c >= 0xf0 and c <= 0xf4 and 4 or (c >= 0xe0 and 3) or (c >= 0xc2 and c < 0xe0 and 2) or nil
      if not len or c > 0xf4 then return false end
      for j = i + 1, i + len - 1 do
        local d = s:byte(j)
        if d == nil or d < 0x80 or d > 0xbf then return false end
      end
      i = i + len
    end
  end
  return true
end

M.MAX_STRING = 1000 -- bytes of a string shown before it is cut
M.MAX_HEX = 32 -- bytes of binary shown in hex

local function hex(s)
  return (s:gsub(".", function(c) return format("%02x", c:byte()) end))
end

--- A string as the REPL shows it: quoted text (cut past MAX_STRING bytes),
-- or binary (keys, hashes, packets) as hex: <32 bytes 1f2e...>.
function M.string(s)
  if not is_text(s, M.MAX_STRING) then
    if #s <= M.MAX_HEX then return format("<%d bytes %s>", #s, hex(s)) end
    return format("<%d bytes %s...>", #s, hex(s:sub(1, M.MAX_HEX / 2)))
  end
  if #s > M.MAX_STRING then
    local cut = M.MAX_STRING
    -- not inside a UTF-8 character
    while cut > 1 and (s:byte(cut + 1) or 0) >= 0x80 and (s:byte(cut + 1) or 0) < 0xc0 do cut = cut - 1 end
    return quote(s:sub(1, cut)) .. format("... (%d bytes)", #s)
  end
  return quote(s)
end

local function scalar(v)
  local t = type(v)
  if t == "string" then return M.string(v) end
  if t == "number" or t == "boolean" or t == "nil" then return tostring(v) end
  return "<" .. tostring(v) .. ">"
end

-- An object: a table whose metatable lends it methods (no __tostring).
local function is_object(x)
  local mt = getmetatable(x)
  if type(mt) ~= "table" or type(mt.__index) ~= "table" or mt.__index == _G then return false end
  for _, v in pairs(mt.__index) do
    if type(v) == "function" then return true end
  end
  return false
end

-- An object in one line: its public fields (not _private ones, not
-- functions), nested tables as {...}, cut at about 100 characters.
local function object_line(x)
  local keys = {}
  for k, v in pairs(x) do
    if type(k) == "string" and k:sub(1, 1) ~= "_" and type(v) ~= "function" then keys[#keys + 1] = k end
  end
  sort(keys)
  local parts, len = {}, 0
  for _, k in ipairs(keys) do
    local v = x[k]
    local mt = type(v) == "table" and getmetatable(v)
    local shown
    if mt and mt.__tostring then
      shown = tostring(v)
    elseif type(v) == "table" then
      shown = next(v) == nil and "{}" or "{...}"
    else
      shown = scalar(v)
    end
    if #shown > 40 then shown = shown:sub(1, 37) .. "..." end
    local part = (is_identifier(k) and k or format("[%q]", k)) .. " = " .. shown
    if len + #part > 100 then
      parts[#parts + 1] = "..."
      break
    end
    parts[#parts + 1] = part
    len = len + #part + 2
  end
  return "<object " .. (#parts > 0 and "{ " .. concat(parts, ", ") .. " }" or "{}") .. ">"
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
    if is_object(x) then return object_line(x) end
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
