-- `ludx bench --quick` as a smoke test: every transfer completes and is
-- verified; the tables, raw samples and plots are written. No speed is
-- asserted here.
local H = require "helper"
local json = require "ludx.json"
local run = H.run

describe("ludx bench", function()
  it("--quick runs the default suites, verifies every transfer and writes samples and plots", run(function()
    local out_json = os.tmpname()
    local plots = os.tmpname()
    os.remove(plots)
    local out, err, status = H.ludx({ "bench", "--quick", "--json", out_json, "--plot", plots }, { timeout = 300000 })
    assert.are.equal(0, status, out .. err)
    assert.matches("loopback / plain%-64k", out)
    assert.matches("path / 100M%-40ms%-0", out)
    assert.matches("udx%-native %-> udx%-native", out)
    assert.matches("ludx %-> ludx", out)
    assert.matches("commit ", out)
    local samples, env = 0, nil
    for line in io.lines(out_json) do
      local v = assert(json.decode(line))
      if v.kind == "environment" then env = v.environment end
      if v.kind == "sample" then
        samples = samples + 1
        assert.is_true(v.ok, tostring(v.error))
        assert.is_true(v.mb_s > 0)
      end
    end
    assert.is_not_nil(env)
    assert.is_true(samples >= 8)
    for _, name in ipairs({ "throughput", "cwnd", "rtt" }) do
      local f = assert(io.open(plots .. "/loopback-plain-64k-" .. name .. ".svg"))
      local svg = f:read("*a")
      f:close()
      assert.matches("<svg", svg)
      assert.matches("time %(s%)", svg)
    end
    -- the table renders again from the raw samples
    local out2, _, status2 = H.ludx({ "bench", "loopback", "--render", out_json })
    assert.are.equal(0, status2)
    assert.matches("loopback / plain%-64k", out2)
    os.remove(out_json)
    os.execute("rm -rf '" .. plots .. "'")
  end, 300000))

  it("rejects an unknown suite and an unknown option", run(function()
    local _, err, status = H.ludx({ "bench", "no-such-suite" })
    assert.are.equal(1, status)
    assert.matches("no%-such%-suite", err)
    local _, err2, status2 = H.ludx({ "bench", "--frob" })
    assert.are.equal(1, status2)
    assert.matches("unknown option", err2)
  end))
end)
