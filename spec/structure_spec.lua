-- The structure claims of docs/architecture.md checked from the sources
-- (issue 15), beside bindings_structure_spec: the Lua modules read no other
-- module's private fields, the section marks that comments cite exist in
-- docs/protocol and each citing file names that document, udx keeps no
-- static buffer that every instance would share, and the fuzz build's copy
-- of the udx engine's source list is the engine's list.
local H = require "helper"

local function read(path)
  local f = assert(io.open(H.root .. "/" .. path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local function files(cmd)
  local p = assert(io.popen("cd " .. H.root .. " && " .. cmd))
  local list = {}
  for line in p:lines() do list[#list + 1] = line end
  p:close()
  return list
end

-- Lua with comments and string literals blanked: only code is looked at.
local function lua_code(s)
  s = s:gsub("%-%-%[(=*)%[.-%]%1%]", " ")
  s = s:gsub("%-%-[^\n]*", " ")
  s = s:gsub('"[^"\n]*"', '""')
  s = s:gsub("'[^'\n]*'", "''")
  return s
end

-- field patterns (Lua patterns on code) and the module that owns them
local PRIVATE = {
  { pat = "[%w_%]%)]%.err_code%f[^%w_]", owner = { ["lua/ludx/udx.lua"] = true }, what = "a udx stream's err_code (use :error())" },
  { pat = "[%w_%]%)]%.err_msg%f[^%w_]", owner = { ["lua/ludx/udx.lua"] = true }, what = "a udx stream's err_msg (use :error())" },
  { pat = "[%w_%]%)]%.statsp%f[^%w_]", owner = { ["lua/ludx/udx.lua"] = true }, what = "a udx stream's statsp (use :stats_struct())" },
  { pat = "%f[%w_]raw%.h%f[^%w_]", owner = {}, what = "a raw stream's C handle (use :handle())" },
  { pat = "%f[%w_]raw%.readers%f[^%w_]", owner = {}, what = "a raw stream's readers (use :wait_readable())" },
  { pat = "%f[%w_]raw%.writers%f[^%w_]", owner = {}, what = "a raw stream's writers (use :wait_drain())" },
  { pat = "%f[%w_]raw%.closed%f[^%w_]", owner = {}, what = "a raw stream's closed flag (use :is_closed())" },
  { pat = "%f[%w_]conn%.closed%f[^%w_]", owner = {}, what = "a connection's closed flag (use :is_closed())" },
  { pat = "%f[%w_]conn%.err%f[^%w_]", owner = {}, what = "a connection's err (use :is_closed() / wait_closed)" },
}

describe("structure", function()
  it("no Lua module reads another module's private stream fields", function()
    local hits = {}
    for _, f in ipairs(files("git ls-files 'lua/ludx/*.lua'")) do
      local n = 0
      local code = lua_code(read(f))
      for line in (code .. "\n"):gmatch("([^\n]*)\n") do
        n = n + 1
        for _, p in ipairs(PRIVATE) do
          if not p.owner[f] and line:find(p.pat) then hits[#hits + 1] = f .. ":" .. n .. ": " .. p.what end
        end
      end
    end
    assert.are.same({}, hits)
  end)

  it("the udx stream and SecretStream say whether they closed without a wait", function()
    local ludx = require "ludx"
    local udx = require "ludx.udx"
    local ss = require "ludx.secretstream"
    assert.is_function(udx.Stream.is_closed)
    assert.is_function(ss.Stream.is_closed)
    ludx.run(function()
      local s = assert(udx.stream(1))
      assert.is_false(s:is_closed())
      s:close()
      assert(s:wait_closed(10000))
      assert.is_true(s:is_closed())
    end)
  end)

  it("every section mark a comment cites exists in docs/protocol, and the file names the document", function()
    local doc = read("docs/protocol/hyperswarm.md")
    local sections = {}
    for mark in doc:gmatch("\n###? ([A-E]%.%d+) ") do sections[mark] = true end
    assert.is_true(sections["C.6"] and sections["D.8"] and sections["A.3"])
    local bad = {}
    local list = files("git ls-files 'lua/ludx/*.lua' 'udx/*.c' 'udx/*.h' 'runtime/*.c' 'runtime/*.h' 'bindings/*.c' 'bindings/*.h'")
    local citing = 0
    for _, f in ipairs(list) do
      local s = read(f)
      local comments = {}
      if f:match("%.lua$") then
        for c in s:gmatch("%-%-([^\n]*)") do comments[#comments + 1] = c end
      else
        for c in s:gmatch("//([^\n]*)") do comments[#comments + 1] = c end
        for c in s:gmatch("/%*(.-)%*/") do comments[#comments + 1] = c end
      end
      local cites = false
      for _, c in ipairs(comments) do
        -- a mark: "D.8", "C.1-C.8", "(A.2, A.3 step 4"; not "0.5" or "e.g."
        for mark in c:gmatch("%f[%w.]([A-E]%.%d+)%f[^%w.]") do
          cites = true
          if not sections[mark] then bad[#bad + 1] = f .. ": cites " .. mark .. ", not a section of docs/protocol/hyperswarm.md" end
        end
      end
      if cites then
        citing = citing + 1
        if not s:find("docs/protocol/hyperswarm.md", 1, true) then
          bad[#bad + 1] = f .. ": cites section marks without naming docs/protocol/hyperswarm.md"
        end
      end
    end
    assert.is_true(citing >= 10, "found " .. citing .. " citing files")
    assert.are.same({}, bad)
  end)

  it("udx keeps no buffer shared by every instance (two loops may run in two threads)", function()
    local engine = {}
    for name in read("udx/CMakeLists.txt"):match("set%(UDX_ENGINE_SOURCES(.-)%)"):gmatch("src/([%w_]+)%.c") do
      engine[name .. ".c"] = true
    end
    local bad = {}
    for _, f in ipairs(files("git ls-files 'udx/src/*.c'")) do
      local n = 0
      for line in (read(f) .. "\n"):gmatch("([^\n]*)\n") do
        n = n + 1
        -- a static variable (not a function, not const): in the engine none
        -- at all, in the io layer no array (the process-wide once-flags of
        -- logging stay)
        if line:match("^%s*static%s") and not line:match("static%s+const%s") and line:match("[;=%[]") then
          if engine[f:match("[^/]+$")] or line:match("%[") then bad[#bad + 1] = f .. ":" .. n .. ": " .. line end
        end
      end
    end
    assert.are.same({}, bad)
  end)

  it("the fuzz build compiles exactly the udx engine's sources", function()
    local engine = read("udx/CMakeLists.txt"):match("set%(UDX_ENGINE_SOURCES(.-)%)")
    local want = {}
    for name in engine:gmatch("src/([%w_]+)%.c") do want[#want + 1] = name end
    local fuzz = read("fuzz/CMakeLists.txt"):match("set%(LUDX_FUZZ_UDX_ENGINE ([^%)]*)%)")
    local got = {}
    for name in fuzz:gmatch("[%w_]+") do got[#got + 1] = name end
    table.sort(want)
    table.sort(got)
    assert.is_true(#want >= 13)
    assert.are.same(want, got)
  end)
end)
