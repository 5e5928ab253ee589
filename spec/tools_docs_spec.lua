-- The API reference and the type stubs are generated from docs/api.lua:
-- they must be current, every function they name must exist, and every
-- public function of a documented module must be named.
local H = require "helper"

local api = dofile(H.root .. "/docs/api.lua")

local function resolve(impl)
  local mod, field = impl:match("^(.-):(.+)$")
  return require(mod)[field]
end

local function name_of(entry)
  return (entry[1]:match("^:?([%w_]+)%("))
end

describe("docs", function()
  it("docs/api.md and docs/types are current (tools/gendocs --check)", function()
    local p = assert(io.popen("cd '" .. H.root .. "' && luajit tools/gendocs --check 2>&1"))
    local out = p:read("*a")
    local ok = p:close()
    assert(ok, out)
  end)

  it("the type stubs are valid Lua that returns its module table", function()
    local fs = require "ludx.fs"
    local files = assert(fs.walk(H.root .. "/docs/types"))
    assert.is_true(#files >= #api)
    for _, f in ipairs(files) do
      local chunk = assert(loadfile(f.full))
      assert.are.equal("table", type(chunk()), f.path)
    end
  end)

  for _, m in ipairs(api) do
    it("documents " .. m.name .. " as it is", function()
      local mod = require(m.name)
      local named = {}
      for _, e in ipairs(m.functions or {}) do
        local n = name_of(e)
        named[n] = true
        assert.are.equal("function", type(mod[n]), m.name .. "." .. n .. " is documented but missing")
      end
      for _, f in ipairs(m.fields or {}) do
        named[f[1]] = true
        assert(mod[f[1]] ~= nil, m.name .. "." .. f[1] .. " is documented but missing")
      end
      for _, n in ipairs(m.internal or {}) do named[n] = true end
      for k, v in pairs(mod) do
        if type(k) == "string" and k:sub(1, 1) ~= "_" then
          assert(named[k], m.name .. "." .. k .. " (" .. type(v) .. ") is exported but not documented in docs/api.lua")
        end
      end
      for _, c in ipairs(m.classes or {}) do
        if c.impl then
          local t = assert(resolve(c.impl), c.impl)
          local methods = {}
          for _, e in ipairs(c.methods) do
            local n = name_of(e)
            methods[n] = true
            assert.are.equal("function", type(t[n]), c.name .. ":" .. n .. " is documented but missing")
          end
          for k, v in pairs(t) do
            if type(v) == "function" and k:sub(1, 1) ~= "_" then
              assert(methods[k], c.name .. ":" .. k .. " is not documented in docs/api.lua")
            end
          end
        end
      end
    end)
  end
end)
