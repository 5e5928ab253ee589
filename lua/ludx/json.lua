-- JSON for control lines between processes (peers, bench results).
-- Strict decoding: anything malformed is an error, never a partial value.
local M = {}

local byte, char, sub, find, format, concat = string.byte, string.char, string.sub, string.find, string.format, table.concat

M.null = setmetatable({}, { __tostring = function() return "null" end })

local escapes = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }

local function encode_string(s)
  return '"' .. s:gsub('[%c"\\]', function(c)
    return escapes[c] or format("\\u%04x", byte(c))
  end) .. '"'
end

local function is_array(t)
  local n = #t
  if n == 0 then return next(t) == nil and getmetatable(t) == M.array_mt end
  for k in pairs(t) do
    if type(k) ~= "number" or k < 1 or k > n or k % 1 ~= 0 then return false end
  end
  return true
end

M.array_mt = {}

--- Marks an empty table to encode as [] instead of {}.
function M.array(t)
  return setmetatable(t or {}, M.array_mt)
end

local function encode(v, out, seen)
  local t = type(v)
  if v == nil or v == M.null then
    out[#out + 1] = "null"
  elseif t == "boolean" then
    out[#out + 1] = tostring(v)
  elseif t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then error("json: cannot encode " .. tostring(v)) end
    if v % 1 == 0 and v >= -2 ^ 53 and v <= 2 ^ 53 then
      out[#out + 1] = format("%d", v)
    else
      out[#out + 1] = format("%.17g", v)
    end
  elseif t == "string" then
    out[#out + 1] = encode_string(v)
  elseif t == "table" then
    if seen[v] then error("json: cannot encode a cycle") end
    seen[v] = true
    if is_array(v) then
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        encode(v[i], out, seen)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in pairs(v) do
        if type(k) ~= "string" and type(k) ~= "number" then error("json: object keys must be strings") end
        keys[#keys + 1] = tostring(k)
      end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        out[#out + 1] = encode_string(k)
        out[#out + 1] = ":"
        local val = v[k]
        if val == nil then val = v[tonumber(k)] end
        encode(val, out, seen)
      end
      out[#out + 1] = "}"
    end
    seen[v] = nil
  else
    error("json: cannot encode a " .. t)
  end
end

function M.encode(v)
  local out = {}
  encode(v, out, {})
  return concat(out)
end

local decode_value

local function skip(s, i)
  local _, e = find(s, "^[ \t\r\n]*", i)
  return e + 1
end

local function fail(s, i, what)
  error(format("json: %s at position %d", what, i), 0)
end

local function utf8(cp)
  if cp < 0x80 then return char(cp) end
  if cp < 0x800 then return char(0xC0 + math.floor(cp / 0x40), 0x80 + cp % 0x40) end
  if cp < 0x10000 then
    return char(0xE0 + math.floor(cp / 0x1000), 0x80 + math.floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
  end
  return char(0xF0 + math.floor(cp / 0x40000), 0x80 + math.floor(cp / 0x1000) % 0x40, 0x80 + math.floor(cp / 0x40) % 0x40, 0x80 + cp % 0x40)
end

local unescape = { b = "\b", f = "\f", n = "\n", r = "\r", t = "\t", ['"'] = '"', ["\\"] = "\\", ["/"] = "/" }

local function decode_string(s, i)
  local parts = {}
  local j = i + 1
  while true do
    local a, b = find(s, '^[^"\\%c]+', j)
    if a then
      parts[#parts + 1] = sub(s, a, b)
      j = b + 1
    end
    local c = sub(s, j, j)
    if c == '"' then return concat(parts), j + 1 end
    if c == "\\" then
      local e = sub(s, j + 1, j + 1)
      if e == "u" then
        local hex = sub(s, j + 2, j + 5)
        if not hex:match("^%x%x%x%x$") then fail(s, j, "bad \\u escape") end
        local cp = tonumber(hex, 16)
        j = j + 6
        if cp >= 0xD800 and cp <= 0xDBFF and sub(s, j, j + 1) == "\\u" then
          local lo = tonumber(sub(s, j + 2, j + 5), 16)
          if lo and lo >= 0xDC00 and lo <= 0xDFFF then
            cp = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
            j = j + 6
          end
        end
        parts[#parts + 1] = utf8(cp)
      elseif unescape[e] then
        parts[#parts + 1] = unescape[e]
        j = j + 2
      else
        fail(s, j, "bad escape")
      end
    else
      fail(s, j, c == "" and "unterminated string" or "control character in string")
    end
  end
end

function decode_value(s, i, depth)
  if depth > 200 then fail(s, i, "nesting too deep") end
  i = skip(s, i)
  local c = sub(s, i, i)
  if c == "{" then
    local obj = {}
    i = skip(s, i + 1)
    if sub(s, i, i) == "}" then return obj, i + 1 end
    while true do
      if sub(s, i, i) ~= '"' then fail(s, i, "object key expected") end
      local k
      k, i = decode_string(s, i)
      i = skip(s, i)
      if sub(s, i, i) ~= ":" then fail(s, i, "':' expected") end
      obj[k], i = decode_value(s, i + 1, depth + 1)
      i = skip(s, i)
      local d = sub(s, i, i)
      if d == "}" then return obj, i + 1 end
      if d ~= "," then fail(s, i, "',' or '}' expected") end
      i = skip(s, i + 1)
    end
  elseif c == "[" then
    local arr = M.array({})
    i = skip(s, i + 1)
    if sub(s, i, i) == "]" then return arr, i + 1 end
    local n = 0
    while true do
      n = n + 1
      arr[n], i = decode_value(s, i, depth + 1)
      i = skip(s, i)
      local d = sub(s, i, i)
      if d == "]" then return arr, i + 1 end
      if d ~= "," then fail(s, i, "',' or ']' expected") end
      i = i + 1
    end
  elseif c == '"' then
    return decode_string(s, i)
  elseif find(s, "^true", i) then
    return true, i + 4
  elseif find(s, "^false", i) then
    return false, i + 5
  elseif find(s, "^null", i) then
    return M.null, i + 4
  else
    local a, b = find(s, "^-?%d+%.?%d*[eE]?[-+]?%d*", i)
    if not a then fail(s, i, c == "" and "unexpected end" or "unexpected '" .. c .. "'") end
    local n = tonumber(sub(s, a, b))
    if not n then fail(s, i, "bad number") end
    return n, b + 1
  end
end

--- Decodes s; returns the value, or nil, msg.
function M.decode(s)
  if type(s) ~= "string" then error("bad argument 's' to 'decode' (string expected, got " .. type(s) .. ")", 2) end
  local ok, v, i = pcall(decode_value, s, 1, 0)
  if not ok then return nil, v end
  i = skip(s, i)
  if i <= #s then return nil, format("json: trailing data at position %d", i) end
  return v
end

return M
