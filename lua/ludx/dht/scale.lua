-- A whole hyperdht network in one process, in simulated time: n nodes (a
-- bootstrapper plus n-1 persistent nodes), then lookups, announces and
-- connects-by-handshake from fresh clients. For scale runs and benches:
--
--   local r = require("ludx.dht.scale").run({ nodes = 1000, queries = 20 })
--   print(r.bootstrap_cpu_s, r.heap_kb_per_node, r.mean_closest_hits)
--
-- Measures only; asserts nothing about speed.
local sim = require "ludx.dht.sim"
local hyperdht = require "ludx.dht.hyperdht"
local crypto = require "ludx.dht.crypto"
local ktable = require "ludx.dht.table"

local M = {}

local function ip(i)
  return "10." .. math.floor(i / 62500) .. "." .. math.floor(i / 250) % 250 .. "." .. (i % 250 + 1)
end

--- Builds the network. opts: nodes (default 100), seed, loss, latency.
-- Returns world, nodes, bootstrap list.
function M.network(opts)
  local n = opts.nodes or 100
  local world = sim.world({ seed = opts.seed or 1, loss = opts.loss, latency = opts.latency })
  local bs = { ip(0) .. ":49737" }
  local boot = hyperdht.bootstrapper({ env = world.env, transport = world:transport(ip(0)), host = ip(0), port = 49737 })
  assert(boot:start())
  local nodes, ready = { boot }, 0
  boot:on("ready", function() ready = ready + 1 end)
  for i = 1, n - 1 do
    local node = hyperdht.new({ env = world.env, transport = world:transport(ip(i)), host = ip(i), port = 49737,
      bootstrap = bs, ephemeral = false, firewalled = false })
    node:on("ready", function() ready = ready + 1 end)
    assert(node:start())
    nodes[#nodes + 1] = node
    -- joins are spread over time, as in a real network
    if i % 50 == 0 then world:run({ max_ms = 200 }) end
  end
  local ok = world:run({ until_fn = function() return ready == n end, max_ms = opts.max_ms or 600000 })
  return world, nodes, bs, ok
end

local client_seq = 0

--- A fresh ephemeral client on the network, bootstrapped.
function M.client(world, bs)
  client_seq = client_seq + 1
  local host = "11." .. math.floor(client_seq / 62500) .. "." .. math.floor(client_seq / 250) % 250 .. "." .. (client_seq % 250 + 1)
  local c = hyperdht.new({ env = world.env, transport = world:transport(host), host = host, bootstrap = bs, ephemeral = true })
  local ready = false
  c:on("ready", function() ready = true end)
  assert(c:start())
  world:run({ until_fn = function() return ready end, max_ms = 60000 })
  return c
end

local function drain(world, q)
  local done, err = false, nil
  local out = {}
  q.on_data = function(d) out[#out + 1] = d end
  q.on_end = function(e) done, err = true, e end
  q:start()
  world:run({ until_fn = function() return done end, max_ms = 120000 })
  return out, err, done
end
M.drain = drain

--- Runs the whole measurement. opts: nodes, queries (default 10), seed, loss.
function M.run(opts)
  opts = opts or {}
  collectgarbage()
  local heap0 = collectgarbage("count")
  local cpu0 = os.clock()
  local world, nodes, bs, ok = M.network(opts)
  -- let the bootstrap traffic and its timers settle
  world:run({ max_ms = 20000 })
  local r = { nodes = #nodes, bootstrapped = ok, bootstrap_cpu_s = os.clock() - cpu0, simulated_s = world:now() / 1000 }
  collectgarbage()
  r.heap_kb_per_node = (collectgarbage("count") - heap0) / #nodes
  r.datagrams = world.net.stats.sent
  local size = 0
  for _, n in ipairs(nodes) do size = size + n.table.size end
  r.mean_table_size = size / #nodes

  local ids = {}
  for _, n in ipairs(nodes) do ids[#ids + 1] = n:id() end
  local hits, requests, found = 0, 0, 0
  local queries = opts.queries or 10
  local cpu1 = os.clock()
  for j = 1, queries do
    local c = M.client(world, bs)
    local target = crypto.hash("scale target " .. j)
    local q = c:find_node(target)
    drain(world, q)
    table.sort(ids, function(a, b) return ktable.compare(target, a, b) < 0 end)
    local got = {}
    for _, rep in ipairs(q.closest_replies) do got[rep.from.id] = true end
    for i = 1, math.min(20, #ids) do
      if got[ids[i]] then hits = hits + 1 end
    end
    requests = requests + q.successes + q.errors
    -- announce from this client, look it up from another
    local kp = crypto.keypair()
    drain(world, c:announce(target, kp, {}))
    local other = M.client(world, bs)
    local replies = drain(world, other:lookup(target))
    for _, rep in ipairs(replies) do
      for _, p in ipairs(rep.peers) do
        if p.public_key == kp.public_key then
          found = found + 1
          break
        end
      end
    end
    c:destroy()
    other:destroy()
  end
  r.queries = queries
  r.mean_closest_hits = hits / queries
  r.mean_requests_per_query = requests / queries
  r.mean_announce_copies_found = found / queries
  r.query_cpu_s = os.clock() - cpu1
  return r, world, nodes
end

return M
