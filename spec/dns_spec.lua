local ludx = require "ludx"
local H = require "helper"
local run = H.run

describe("ludx.lookup", function()
  it("resolves a name without blocking the loop", run(function()
    local ticks = 0
    local ticker = ludx.spawn("ticker", function()
      while true do
        ludx.sleep(1)
        ticks = ticks + 1
      end
    end)
    local addrs = assert(ludx.lookup("localhost", 4))
    ticker:cancel()
    assert.are.equal("127.0.0.1", addrs[1])
  end))

  it("returns an IP literal as it is", run(function()
    assert.are.same({ "10.1.2.3" }, ludx.lookup("10.1.2.3"))
    assert.are.same({ "::1" }, ludx.lookup("::1"))
  end))

  it("fails with the resolver's code for an unknown name", run(function()
    local addrs, msg, code = ludx.lookup("no-such-host.invalid")
    assert.is_nil(addrs)
    assert.is_string(msg)
    assert.matches("^EAI_", code)
  end))

  it("names a wrong argument", run(function()
    local ok, err = pcall(ludx.lookup, 42)
    assert.is_false(ok)
    assert.matches("bad argument 'host' to 'lookup'", err)
  end))
end)
