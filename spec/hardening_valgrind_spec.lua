-- The ludx executable under valgrind: a UDX transfer
-- (spec/valgrind_transfer.lua) and a DHT connect (spec/valgrind_dht.lua)
-- with no memory errors and no leaks. Skipped when valgrind is missing and
-- under tools/test-asan (valgrind cannot run an ASan binary).
local H = require "helper"
local run = H.run

local function have_valgrind()
  local f = io.popen("command -v valgrind 2>/dev/null")
  local path = f:read("*l")
  f:close()
  return path ~= nil and path ~= ""
end

-- Runs script under valgrind; returns stdout, stderr, status.
local function valgrind(script)
  local process = require "ludx.process"
  local p = assert(process.spawn("valgrind", {
    "--leak-check=full", "--show-leak-kinds=definite,indirect,possible",
    "--errors-for-leak-kinds=definite,indirect,possible", "--error-exitcode=99",
    H.ludx_bin, script,
  }, { stderr = "pipe" }))
  local out = {}
  while true do
    local chunk = p:read(300000)
    if not chunk then break end
    out[#out + 1] = chunk
  end
  local status = p:wait(300000)
  local err = p:stderr()
  p:close()
  return table.concat(out), err, status
end

local function check(name, out, err, status, expect)
  local summary = err:match("ERROR SUMMARY:[^\n]*") or "?"
  local heap = err:match("in use at exit:[^\n]*") or "?"
  io.stderr:write("  [valgrind] " .. name .. ": " .. heap .. "; " .. summary .. "\n")
  assert.matches(expect, out)
  assert.are.equal(0, status, err)
  assert.matches("ERROR SUMMARY: 0 errors", err)
  assert.is_nil(err:match("definitely lost: [1-9]"))
  assert.is_nil(err:match("indirectly lost: [1-9]"))
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
    local out, err, status = valgrind("spec/valgrind_transfer.lua")
    check("transfer", out, err, status, "^ok %x+")
  end, 300000))

  it("a DHT connect (testnet, relayed IK handshake, SecretStream echo): no memory errors, every heap block freed", run(function()
    local out, err, status = valgrind("spec/valgrind_dht.lua")
    check("dht connect", out, err, status, "^ok")
  end, 300000))
end)
