-- The ludx executable as a service runs it (issue 14): output reaches a pipe
-- line by line, and -e code and scripts see `ludx` as the REPL does.
local H = require "helper"
local run = H.run

local function script(src)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(src)
  f:close()
  return path
end

describe("the ludx executable", function()
  it("print and io.write on a pipe are line-buffered: a killed process keeps its lines", run(function()
    -- the script kills itself with SIGKILL: nothing buffered survives that
    local path = script([[
      local ffi = require "ffi"
      ffi.cdef "int kill(int pid, int sig);"
      print("printed line")
      io.write("written line\n")
      io.stdout:write("partial")
      ffi.C.kill(require("ludx.core").getpid(), 9)
    ]])
    local out, _, _, sig = H.ludx({ path })
    os.remove(path)
    assert.are.equal(9, sig)
    assert.are.equal("printed line\nwritten line\n", (out:gsub("partial$", "")))
  end))

  it("-e code and scripts see ludx loaded, as in the REPL", run(function()
    local out, err, status = H.ludx({ "-e", "ludx.sleep(1); print(type(ludx.spawn), ludx == require 'ludx')" })
    assert.are.equal(0, status, err)
    assert.are.equal("function\ttrue\n", out)
    local path = script("print(ludx.run ~= nil, (...))\n")
    out, err, status = H.ludx({ path, "x" })
    os.remove(path)
    assert.are.equal(0, status, err)
    assert.are.equal("true\tx\n", out)
  end))
end)
