-- A C event that cannot be posted (the event ring cannot grow: out of
-- memory) must not be lost silently: several kinds fire only on an
-- empty -> non-empty edge, so one lost post is a task that waits forever.
-- The process aborts with a message naming the event instead.
-- LUDX_FAULT_RING_CAP=N makes the ring's growth past N records fail.
local H = require "helper"

-- 300 sockets each get one datagram in the same loop turn: 300 posts of
-- UDX_SOCKET_RECV before Lua takes the batch (the ring starts at 256).
local script = [[
local ludx = require "ludx"
local udx = require "ludx.udx"
local socks = {}
for i = 1, 300 do socks[i] = assert(udx.bind("127.0.0.1", 0)) end
local tx = assert(udx.bind("127.0.0.1", 0))
for i = 1, 300 do
  local _, port = socks[i]:address()
  assert(tx:send("x", port, "127.0.0.1"))
end
local got = 0
for i = 1, 300 do
  if socks[i]:recv(3000) then got = got + 1 end
end
print("received " .. got)
]]

describe("event posts", function()
  it("300 events in one turn all arrive", H.run(function()
    local out, err, status = H.ludx({ "-e", script })
    assert.are.equal(0, status, err)
    assert.matches("received 300", out)
  end, 60000))

  it("a post the ring cannot take aborts the process with a message, never a silent loss", H.run(function()
    local out, err, status, sig = H.ludx({ "-e", script }, { env = { LUDX_FAULT_RING_CAP = "256" } })
    assert.is_not.matches("received", out)
    assert.matches("ludx: cannot post event UDX_SOCKET_RECV", err)
    assert.is_true(status ~= 0 or (sig ~= nil and sig ~= 0), "the process must not exit cleanly")
  end, 60000))
end)
