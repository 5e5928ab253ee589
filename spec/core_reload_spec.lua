-- The ludx.core module may be loaded twice in one Lua state (busted unloads
-- modules between spec files; a host may reload). Collecting the first
-- module table must not shut down the runtime the second one uses: every
-- socket made since would be closed under it.
describe("ludx.core reloaded", function()
  it("the old module's collection leaves the runtime running", function()
    local old = require "ludx.core"
    package.loaded["ludx.core"] = nil
    local core = require "ludx.core"
    assert.are_not.equal(old, core)
    local sock = assert(core.udx_bind("127.0.0.1", 0, 4242))
    old = nil -- luacheck: ignore
    collectgarbage()
    collectgarbage()
    local host, port = sock:address()
    assert.are.equal("127.0.0.1", host)
    assert.is_true(port > 0)
    assert.is_true(sock:close())
    package.loaded["ludx.core"] = core
  end)
end)
