local H = require "helper"
local run = H.run

describe("the ludx executable", function()
  it("-v prints the versions of ludx, LuaJIT, libuv and libsodium", run(function()
    local out, _, status = H.ludx({ "-v" })
    assert.are.equal(0, status)
    assert.matches("ludx %d+%.%d+", out)
    assert.matches("LuaJIT 2%.1", out)
    assert.matches("libuv 1%.%d+", out)
    assert.matches("libsodium 1%.%d+", out)
  end))

  it("-e runs code as a task, with ludx.core preloaded", run(function()
    local out, _, status = H.ludx({ "-e", "local ludx = require 'ludx'; ludx.sleep(1); print(type(require('ludx.core').step))" })
    assert.are.equal(0, status)
    assert.are.equal("function\n", out)
  end))

  it("runs a script with arg as luajit sets it, and ... as the arguments", run(function()
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write("print(arg[0] == ..., #arg, arg[1], arg[2], select('#', ...))\n")
    f:close()
    local out, _, status = H.ludx({ path, "one", "two" })
    os.remove(path)
    assert.are.equal(0, status)
    assert.are.equal("false\t2\tone\ttwo\t2\n", out)
  end))

  it("exits with a non-zero status when the script fails", run(function()
    local _, err, status = H.ludx({ "-e", "error('script failed')" })
    assert.are.equal(1, status)
    assert.matches("script failed", err)
    local _, err2, status2 = H.ludx({ "/nonexistent/script.lua" })
    assert.are.equal(1, status2)
    assert.matches("cannot open", err2)
  end))

  it("a failing script is reported at once, and the tasks it started are stopped", run(function()
    local _, err, status = H.ludx({ "-e", [[
      local ludx = require "ludx"
      ludx.spawn("forever", function() while true do ludx.sleep(1000) end end)
      local t = nil
      return t.field
    ]] })
    assert.are.equal(1, status)
    assert.matches("attempt to index", err)
    assert.matches("stack traceback", err)
  end))

  it("rejects unknown options with the usage", run(function()
    local _, err, status = H.ludx({ "--frobnicate" })
    assert.are.equal(1, status)
    assert.matches("unknown option", err)
    assert.matches("usage: ludx", err)
  end))

  it("finds its Lua modules from the build tree", run(function()
    local out, _, status = H.ludx({ "-e", "print(package.searchpath('ludx', package.path))" })
    assert.are.equal(0, status)
    assert.matches("lua/ludx/init.lua", out)
  end))
end)
