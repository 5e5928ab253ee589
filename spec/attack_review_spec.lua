-- Hostile peers found in the security review of issue 13: each case is a
-- bypass of a bound the first round set, against the real code.
local ludx = require "ludx"
local dht = require "ludx.dht"
local crypto = require "ludx.dht.crypto"
local H = require "helper"
local run = H.run

local function say(fmt, ...)
  io.stderr:write("  [attack review] ", string.format(fmt, ...), "\n")
end

local function persistent(node)
  for _ = 1, 200 do
    if node.h.persistent then return node.h.persistent end
    ludx.sleep(10)
  end
  error("node never became persistent")
end

local function gen_bytes(g)
  local n = 0
  for _, v in pairs(g.map) do n = n + #v end
  return n
end

describe("security review", function()
  -- An IPv6 host owns a whole /64 (SLAAC, privacy addresses): a quota per
  -- address is no quota. Each put below comes from another address of one
  -- /64, with a token (a round trip each: the attacker does receive there).
  it("IMMUTABLE_PUTs from 64 addresses of one IPv6 /64 are held to one host's quota", run(function()
    local quota = 64 * 1024
    local node = assert(dht.bootstrapper(0, "127.0.0.1", { max_store_bytes_per_host = quota }))
    assert(node:ready(10000))
    local p = persistent(node)
    local acks = 0
    local function put(host, value)
      p:on_immutable_put({ from = { host = host, port = 4000 }, target = crypto.hash(value), token = "t", value = value,
        reply = function() acks = acks + 1 end })
    end
    for i = 1, 64 do put(string.format("2001:db8:1:2::%x", i), crypto.random(15 * 1024)) end
    local stored = gen_bytes(p.immutables.latest) + gen_bytes(p.immutables.oldest)
    say("64 x 15 KB puts from 64 addresses of one /64: %d KB stored (quota %d KB)", math.floor(stored / 1024), math.floor(quota / 1024))
    assert.is_true(stored <= quota, "stored " .. stored)
    -- another /64 still stores
    local before = acks
    put("2001:db8:1:3::1", "another network's value")
    assert.are.equal(before + 1, acks)
    node:destroy()
  end, 30000))
end)
