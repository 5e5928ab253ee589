-- Spec helpers for holepunching over the simulated network
-- (dht_holepunch_spec, dht_punch_race_spec): a seeded world with a
-- bootstrapper and n open nodes, and firewalled nodes in it.
local sim = require "ludx.dht.sim"
local hyperdht = require "ludx.dht.hyperdht"

local M = {}

function M.ip(i)
  return "10.0.0." .. (i + 1)
end

-- A world (seed) with a bootstrapper and n persistent open nodes, all
-- bootstrapped; returns world, nodes (bootstrapper first), bootstrap list.
function M.network(n, seed)
  local world = sim.world({ seed = seed })
  local ip = M.ip
  local boot = hyperdht.bootstrapper({ env = world.env, transport = world:transport(ip(0)), host = ip(0), port = 49737 })
  assert(boot:start())
  local bs = { ip(0) .. ":49737" }
  local nodes = { boot }
  for i = 1, n do
    local node = hyperdht.new({ env = world.env, transport = world:transport(ip(i)), host = ip(i), port = 49737, bootstrap = bs, ephemeral = false, firewalled = false })
    assert(node:start())
    nodes[#nodes + 1] = node
  end
  assert(world:run({ until_fn = function()
    for _, x in ipairs(nodes) do
      if not x.bootstrapped then return false end
    end
    return true
  end, max_ms = 60000 }))
  return world, nodes, bs
end

-- A node behind a stateful firewall at host, once it is ready.
function M.firewalled_node(world, host, bs)
  world.net:firewall(host)
  local node = hyperdht.new({ env = world.env, transport = world:transport(host), host = host, bootstrap = bs })
  local ready = false
  node:on("ready", function() ready = true end)
  assert(node:start())
  assert(world:run({ until_fn = function() return ready end, max_ms = 60000 }))
  return node
end

return M
