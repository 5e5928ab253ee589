-- The structure of the C bindings, checked from the sources (issue 15): no
-- file cycles among bindings/*.c (core.c registers each area; shared
-- helpers live in bind.c and small helper files), the event ring knows no
-- event kinds, and bindings/crypto.c and the framer reach libsodium only
-- through runtime/crypto.
local H = require "helper"

local function read(path)
  local f = assert(io.open(H.root .. "/" .. path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local function c_files()
  local p = assert(io.popen("ls " .. H.root .. "/bindings/*.c"))
  local list = {}
  for line in p:lines() do list[#list + 1] = line:match("([^/]+)$") end
  p:close()
  return list
end

-- Comments and strings out, so that only code is looked at.
local function code_of(s)
  s = s:gsub("/%*.-%*/", " ")
  s = s:gsub("//[^\n]*", " ")
  s = s:gsub('"[^"\n]*"', '""')
  return s
end

describe("bindings structure", function()
  it("no file depends on another that depends back on it (directly or not)", function()
    local files, defs, src = c_files(), {}, {}
    for _, f in ipairs(files) do
      src[f] = code_of(read("bindings/" .. f))
      -- a non-static function definition: the name at a line start, after
      -- its return type on the line before
      for prev, name in src[f]:gmatch("\n([^\n]*)\n([%a_][%w_]*) %(") do
        if not prev:match("^static") and not prev:match("^%s") and prev ~= "" and not prev:match("[;{}]") then
          defs[name] = defs[name] or f
        end
      end
    end
    local edges = {}
    for _, f in ipairs(files) do
      edges[f] = {}
      for name, owner in pairs(defs) do
        if owner ~= f and src[f]:match("[^%w_]" .. name .. "%s*%(") then edges[f][owner] = name end
      end
    end
    -- depth-first search for a cycle
    local state, path = {}, {}
    local function visit(f)
      state[f] = "open"
      path[#path + 1] = f
      for g, name in pairs(edges[f]) do
        if state[g] == "open" then
          error("file cycle: " .. table.concat(path, " -> ") .. " -> " .. g .. " (calls " .. name .. ")")
        elseif state[g] == nil then
          visit(g)
        end
      end
      path[#path] = nil
      state[f] = "done"
    end
    for _, f in ipairs(files) do
      if not state[f] then visit(f) end
    end
    -- the check sees the real graph: core.c registers the areas
    assert.is_not_nil(edges["core.c"]["udx_stream.c"])
    assert.is_not_nil(edges["udx_stream.c"]["udx.c"])
  end)

  it("runtime/ring.h names no event kind; the bindings register theirs", function()
    local ring = code_of(read("runtime/ring.h"))
    assert.is_nil(ring:match("LUDX_EV_"), "ring.h defines event kinds")
    for _, f in ipairs(c_files()) do
      local s = code_of(read("bindings/" .. f))
      assert.is_nil(s:match("LUDX_EV_UDX") or s:match("LUDX_EV_TCP") or s:match("LUDX_EV_LOOKUP"), f .. " uses a fixed binding kind")
    end
  end)

  it("bindings/crypto.c, framer.c and framer_udx.c call no libsodium function directly", function()
    for _, f in ipairs({ "crypto.c", "framer.c", "framer_udx.c" }) do
      local s = code_of(read("bindings/" .. f))
      local hit = s:match("[^%w_](crypto_[%w_]+%s*%()") or s:match("[^%w_](sodium_[%w_]+%s*%()")
        or s:match("[^%w_](randombytes_[%w_]+%s*%()")
      assert.is_nil(hit, f .. " calls libsodium: " .. tostring(hit))
      assert.is_nil(s:match("#include%s*<sodium.h>"), f .. " includes sodium.h")
    end
  end)
end)
