-- The ludx executable under valgrind: a transfer (spec/valgrind_transfer.lua)
-- with no memory errors and no leaks. Skipped when valgrind is missing.
-- (A DHT connect joins this once the DHT exists.)
local H = require "helper"
local run = H.run

local function have_valgrind()
  local f = io.popen("command -v valgrind 2>/dev/null")
  local path = f:read("*l")
  f:close()
  return path ~= nil and path ~= ""
end

describe("valgrind", function()
  if not have_valgrind() then
    pending("valgrind is not installed")
    return
  end
  if os.getenv("LUDX_SANITIZED") then
    pending("valgrind cannot run an ASan build (make test covers it)")
    return
  end
  it("a 1 MiB transfer with 2% loss: no memory errors, every heap block freed", run(function()
    local process = require "ludx.process"
    local p = assert(process.spawn("valgrind", {
      "--leak-check=full", "--show-leak-kinds=definite,indirect,possible",
      "--errors-for-leak-kinds=definite,indirect,possible", "--error-exitcode=99",
      H.ludx_bin, "spec/valgrind_transfer.lua",
    }, { stderr = "pipe" }))
    local out = {}
    while true do
      local chunk = p:read(120000)
      if not chunk then break end
      out[#out + 1] = chunk
    end
    local status = p:wait(120000)
    local err = p:stderr()
    p:close()
    out = table.concat(out)
    local summary = err:match("ERROR SUMMARY:[^\n]*") or "?"
    local heap = err:match("in use at exit:[^\n]*") or "?"
    io.stderr:write("  [valgrind] " .. heap .. "; " .. summary .. "\n")
    assert.matches("^ok %x+", out)
    assert.are.equal(0, status, err)
    assert.matches("ERROR SUMMARY: 0 errors", err)
    assert.is_nil(err:match("definitely lost: [1-9]"))
    assert.is_nil(err:match("indirectly lost: [1-9]"))
  end, 180000))
end)
