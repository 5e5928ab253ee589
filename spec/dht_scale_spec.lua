-- A 300-node hyperdht network in simulated time: everyone bootstraps,
-- lookups find the true closest nodes, announces are found. Correctness
-- only; speeds belong in bench/.
local scale = require "ludx.dht.scale"

describe("dht at scale (simulated)", function()
  it("300 nodes: bootstrap, k-closest lookups, announce/lookup", function()
    local r = scale.run({ nodes = 300, queries = 8, seed = 4 })
    assert.is_true(r.bootstrapped)
    assert.are.equal(300, r.nodes)
    assert.is_true(r.mean_table_size >= 40, "tables too small: " .. r.mean_table_size)
    assert.is_true(r.mean_closest_hits >= 18, "closest hits " .. r.mean_closest_hits)
    assert.is_true(r.mean_announce_copies_found >= 10, "announce copies found " .. r.mean_announce_copies_found)
  end)

  it("100 nodes with 10% loss still converge", function()
    local r = scale.run({ nodes = 100, queries = 4, seed = 5, loss = 0.1 })
    assert.is_true(r.bootstrapped)
    assert.is_true(r.mean_closest_hits >= 15, "closest hits " .. r.mean_closest_hits)
    assert.is_true(r.mean_announce_copies_found >= 5, "announce copies found " .. r.mean_announce_copies_found)
  end)
end)
