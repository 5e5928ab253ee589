-- The real environment of a DHT node: the ludx loop's clock and timers,
-- a random source, DNS, and UDP sockets from ludx.udx (so UDX streams can
-- share the DHT's sockets, as hyperdht does).
--
-- Timer and socket callbacks run outside any task and must not wait; an
-- error in one is reported on stderr and does not stop the node.
local ludx = require "ludx"
local crypto = require "ludx.dht.crypto"
local sim = require "ludx.dht.sim"

local M = {}

local function guard(what, fn)
  return function(...)
    local ok, err = xpcall(fn, debug.traceback, ...)
    if not ok then io.stderr:write("ludx.dht: ", what, " failed: ", tostring(err), "\n") end
  end
end
M.guard = guard

local seed_bytes = crypto.random(4)
local rand = sim.rng(seed_bytes:byte(1) + seed_bytes:byte(2) * 256 + seed_bytes:byte(3) * 65536 + seed_bytes:byte(4) * 16777216)

M.env = {
  now = ludx.now,
  after = function(ms, fn) return ludx.after(ms, guard("timer", fn)) end,
  random = rand,
  random_bytes = crypto.random,
  wall_time = function() return os.time() * 1000 end,
  --- cb(ip or nil); runs the lookup in its own task.
  resolve = function(host, cb)
    ludx.spawn("dht resolve " .. host, function()
      local r = ludx.lookup(host, 4, 10000)
      cb(r and r[1] or nil)
    end)
  end,
}

---------------------------------------------------------------------------
-- UDP transport over ludx.udx sockets: one receive task per socket.

local Sock = {}
Sock.__index = Sock

function Sock:address()
  if self.closed then return nil end
  return self.udx:address()
end

function Sock:send(data, port, host, ttl)
  if self.closed then return nil, "socket is closed", "EBADF" end
  return self.udx:send(data, port, host, ttl and ttl > 0 and ttl or nil)
end

function Sock:close()
  if self.closed then return true end
  self.closed = true
  if self.task then self.task:cancel("socket closed") end
  return self.udx:close()
end

M.transport = {
  bind = function(host, port)
    local udx = require "ludx.udx"
    local s, msg, code = udx.bind(host or "0.0.0.0", port or 0)
    if not s then return nil, msg, code end
    local self = setmetatable({ udx = s, closed = false, onmessage = nil }, Sock)
    local deliver = guard("dht message handler", function(data, h, p)
      if self.onmessage then self.onmessage(data, h, p) end
    end)
    self.task = ludx.spawn("dht socket", function()
      while not self.closed do
        local data, h, p = s:recv()
        if not data then break end
        deliver(data, h, p)
      end
    end)
    self.task.quiet = true
    return self
  end,
}

return M
