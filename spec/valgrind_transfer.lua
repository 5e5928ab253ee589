-- Run by spec/hardening_valgrind_spec.lua in the ludx executable under
-- valgrind: a 1 MiB transfer over loopback with 2 % loss, each way ended,
-- everything closed. Prints "ok <hex>" when the hashes match.
local here = debug.getinfo(1, "S").source:match("^@(.*)/valgrind_transfer%.lua$") or "spec"
package.path = here .. "/?.lua;" .. package.path
local U = require "hardening_util"
local r = U.transfer({
  size = 1024 * 1024,
  seed = 3,
  setup = function(ctx)
    assert(ctx.a:set_fault({ seed = 5, loss = 0.02, direction = "tx" }))
  end,
})
assert(r.ok, U.describe(r))
print("ok " .. r.got)
