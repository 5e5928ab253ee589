-- Issue 13: the amplification guard cut a FIND_NODE reply to an unproven
-- host down to no closer nodes and still sent it. A new hyperdht node
-- that bootstraps through such a reply learns nothing, takes the
-- (empty) answer as final and ends its bootstrap with an empty table, so
-- its firewall check runs late, in the middle of its first connect (the
-- relayed holepunches of hyperdht's test suite then failed). Past the
-- budget a query reply now goes out with some closer nodes or not at all:
-- the requester retries, and by then it has answered our probe.
local ludx = require "ludx"
local dht = require "ludx.dht"
local udx = require "ludx.udx"
local crypto = require "ludx.dht.crypto"
local msgs = require "ludx.dht.messages"
local H = require "helper"
local run = H.run

local function say(fmt, ...)
  io.stderr:write("  [amp closer] ", string.format(fmt, ...), "\n")
end

describe("amplification guard and closer nodes", function()
  it("never sends a query reply cut down to no closer nodes; the retry after the probe gets them", run(function()
    local tn = assert(dht.testnet(6, { timeout = 20000 }))
    local node = tn.nodes[1] -- the bootstrapper: the others are in its table
    local _, port = node:address()
    for _ = 1, 400 do
      if #node.h.table:closest(crypto.hash("x")) >= 4 then break end
      ludx.sleep(10)
    end
    local known = #node.h.table:closest(crypto.hash("x"))
    assert.is_true(known >= 4, "table holds " .. known)
    -- a small table gives small replies: a factor of 1 (the amplification
    -- knob) puts them over budget as 20 closer nodes are over 3x
    node.h.io.amplification = 1
    -- a host the node has never heard from (so not proven), which keeps
    -- asking without answering the probe
    local client = assert(udx.bind("127.0.3.1", 0))
    local _, cport = client:address()
    local function find(tid)
      return msgs.encode_request({ tid = tid, to = { host = "127.0.0.1", port = port }, internal = true,
        command = msgs.FIND_NODE, target = crypto.hash("target " .. tid) })
    end
    local replies, empty, probe = 0, 0, nil
    for tid = 1, 40 do
      assert(client:send(find(tid), port, "127.0.0.1"))
      -- every datagram that comes back before the next request
      while true do
        local d, host, rport = client:recv(replies + empty > 0 and 50 or 200)
        if not d then break end
        local kind, m = msgs.decode(d)
        if kind == "response" then
          if not m.closer_nodes or #m.closer_nodes == 0 then
            empty = empty + 1
          else
            replies = replies + 1
          end
        elseif kind == "request" and m.command == msgs.PING and m.internal then
          probe = { tid = m.tid, host = host, port = rport }
        end
      end
    end
    say("40 FIND_NODEs from an unproven host: %d replies with closer nodes, %d with none, probed: %s", replies, empty,
      tostring(probe ~= nil))
    assert.are.equal(0, empty)
    assert.is_truthy(probe, "never probed")
    -- the client answers the probe; its next FIND_NODE gets a full reply
    assert(client:send(msgs.encode_response({ tid = probe.tid, to = { host = "127.0.3.1", port = cport } }), probe.port, probe.host))
    local full
    for tid = 100, 120 do
      assert(client:send(find(tid), port, "127.0.0.1"))
      -- earlier replies may still be queued: read up to this one's
      local deadline = ludx.now() + 500
      while ludx.now() < deadline do
        local d = client:recv(math.max(1, deadline - ludx.now()))
        if not d then break end
        local kind, m = msgs.decode(d)
        if kind == "response" and m.tid == tid then
          if m.closer_nodes and #m.closer_nodes >= known then full = #m.closer_nodes end
          break
        end
      end
      if full then break end
    end
    say("after the probe: a reply with %s closer nodes", tostring(full))
    assert.is_truthy(full, "no full reply after the probe")
    client:close()
    tn:destroy()
  end, 60000))
end)
