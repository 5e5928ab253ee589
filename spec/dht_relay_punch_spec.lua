-- Relayed holepunching between Node hyperdht peers through ludx relays
-- (issue 13): a network of ludx nodes only; for each of
-- LUDX_RELAY_PUNCH_RUNS runs (100) a fresh firewalled Node server and
-- client (spec/interop/peers/relay-punch.js, 4 runs at a time, fast open
-- every other run so both punch rounds are relayed half the time)
-- holepunch through the ludx relays: every run must open on both sides
-- (the client's open and the server's connection).
local ludx = require "ludx"
local dht = require "ludx.dht"
local node = require "interop.node"
local H = require "helper"
local run = H.run

local RUNS = tonumber(os.getenv("LUDX_RELAY_PUNCH_RUNS") or "100")

describe("relayed holepunches through ludx relays", function()
  it(RUNS .. " Node-to-Node holepunches all open on both sides", run(function()
    local tn = assert(dht.testnet(8, { timeout = 20000 }))
    local peer = assert(node.start("relay-punch.js", {
      bootstrap = tn.bootstrap[1], runs = RUNS, concurrency = 4, fresh = true, pinFirewall = false, fastOpen = "mixed",
    }, 60000))
    local runs, failed, punched = {}, {}, 0
    local done
    local deadline = ludx.now() + 30000 + RUNS * 4000
    while not done do
      local line, msg = peer.p:read_json(math.max(0, deadline - ludx.now()))
      assert(line, "relay-punch.js: " .. tostring(msg) .. "\n" .. peer:stderr())
      if line.event == "run" then
        runs[#runs + 1] = line
        if type(line.firewalled) == "table" and line.firewalled[1] == true and line.firewalled[2] == true then
          punched = punched + 1
        end
        if not (line.client and line.server) then failed[#failed + 1] = line end
      elseif line.event == "done" then
        done = line
      elseif line.event == "error" then
        error("relay-punch.js: " .. tostring(line.message))
      end
    end
    if #failed > 0 then
      local parts = {}
      for _, f in ipairs(failed) do
        parts[#parts + 1] = string.format("run %d client=%s server=%s %s", f.run, tostring(f.client), tostring(f.server),
          type(f.error) == "table" and tostring(f.error.code) or "")
      end
      print("failed runs: " .. table.concat(parts, "; "))
    end
    print(string.format("relayed holepunches: %d runs (%d between two firewalled peers), %d open on both sides, p50 %s ms, p99 %s ms",
      done.runs, punched, done.both, tostring(done.p50), tostring(done.p99)))
    assert.are.equal(RUNS, #runs)
    -- the peers start firewalled; dht-rpc may find one reachable later
    assert.is_true(punched >= RUNS / 2, punched .. " runs holepunched")
    assert.are.equal(RUNS, done.both)
    peer:close()
    tn:destroy()
  end, 60000 + RUNS * 4000))
end)
