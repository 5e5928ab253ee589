-- A simulated world for DHT tests and scale runs: a deterministic clock,
-- a seeded random source and an in-memory datagram network with loss,
-- latency and simple stateful firewalls. No OS sockets, no real time.
--
--   local world = sim.world({ seed = 1, loss = 0.05 })
--   local env, transport = world.env, world:transport("10.0.0.1")
--   ... start nodes with env/transport ...
--   world:run({ until_fn = function() return done end, max_ms = 60000 })
--
-- The network part also runs on the real loop: sim.network(env, opts) with
-- env = the ludx timers (see ludx.dht.env).
local bit = require "bit"

local M = {}

--- xorshift32: a function returning numbers in [0, 1).
function M.rng(seed)
  local x = bit.tobit(seed or 1)
  if x == 0 then x = 0x2545F491 end
  return function()
    x = bit.bxor(x, bit.lshift(x, 13))
    x = bit.bxor(x, bit.rshift(x, 17))
    x = bit.bxor(x, bit.lshift(x, 5))
    local u = x < 0 and x + 4294967296 or x
    return u / 4294967296
  end
end

---------------------------------------------------------------------------
-- Clock: a binary heap of events in simulated milliseconds.

local heap = require "ludx.heap"

local Clock = {}
Clock.__index = Clock

function M.clock()
  return setmetatable({ t = 0, events = heap.new() }, Clock)
end

local function cancel(ev)
  ev.cancelled = true
end

function Clock:after(ms, fn)
  return self.events:push({ at = self.t + ms, fn = fn, cancel = cancel })
end

--- Runs events in time order until until_fn() is true (checked after each
-- event), no events are left, or the clock passes max_ms from now.
-- Returns true when until_fn was satisfied.
function Clock:run(opts)
  opts = opts or {}
  local deadline = self.t + (opts.max_ms or math.huge)
  local until_fn = opts.until_fn
  if until_fn and until_fn() then return true end
  local events = self.events
  while events.n > 0 do
    local ev = events:peek()
    if ev.at > deadline then break end
    events:pop()
    if not ev.cancelled then
      if ev.at > self.t then self.t = ev.at end
      ev.fn()
      if until_fn and until_fn() then return true end
    end
  end
  if self.t < deadline and deadline ~= math.huge and not opts.keep_time then self.t = deadline end
  return until_fn ~= nil and until_fn() or false
end

---------------------------------------------------------------------------
-- Network

local Network = {}
Network.__index = Network

--- env: {now, after, random}. opts: loss (0..1), latency (ms, or a
-- function returning ms), strict (let handler errors raise; default
-- true), seed (for the loss draw; else env.random).
function M.network(env, opts)
  opts = opts or {}
  local lat = opts.latency or 1
  return setmetatable({
    env = env,
    sockets = {},
    loss = opts.loss or 0,
    latency = type(lat) == "function" and lat or function() return lat end,
    rand = opts.seed and M.rng(opts.seed) or env.random,
    firewalls = {},
    strict = opts.strict ~= false,
    next_port = 20000,
    stats = { sent = 0, delivered = 0, lost = 0, blocked = 0 },
    on_drop = nil,
  }, Network)
end

--- Makes host firewalled: a socket there receives only from addresses it
-- has sent to (a port-restricted stateful firewall).
function Network:firewall(host, on)
  self.firewalls[host] = on ~= false
end

local Socket = {}
Socket.__index = Socket

function Network:bind(host, port)
  if type(host) ~= "string" or host == "0.0.0.0" then return nil, "simulated sockets need a concrete host", "EINVAL" end
  if port == 0 then
    repeat
      self.next_port = self.next_port + 1
      if self.next_port > 65535 then self.next_port = 20001 end
      port = self.next_port
    until not self.sockets[host .. ":" .. port]
  end
  local key = host .. ":" .. port
  if self.sockets[key] then return nil, "address already in use", "EADDRINUSE" end
  local s = setmetatable({ net = self, host = host, port = port, key = key, seen = {}, closed = false }, Socket)
  self.sockets[key] = s
  return s
end

--- A transport for the DHT I/O layer whose sockets live on `host`.
function Network:transport(host)
  return {
    bind = function(h, port)
      if h == nil or h == "0.0.0.0" then h = host end
      return self:bind(h, port)
    end,
  }
end

function Socket:address()
  return self.host, self.port
end

function Socket:send(data, port, host)
  if self.closed then return nil, "socket is closed", "EBADF" end
  local net = self.net
  net.stats.sent = net.stats.sent + 1
  local key = host .. ":" .. port
  if net.firewalls[self.host] then self.seen[key] = true end
  if net.loss > 0 and net.rand() < net.loss then
    net.stats.lost = net.stats.lost + 1
    return true
  end
  local from_host, from_port = self.host, self.port
  net.env.after(net.latency(self, host, port), function()
    local dst = net.sockets[key]
    if not dst or dst.closed then return end
    if net.firewalls[dst.host] and not dst.seen[from_host .. ":" .. from_port] then
      net.stats.blocked = net.stats.blocked + 1
      return
    end
    net.stats.delivered = net.stats.delivered + 1
    local fn = dst.onmessage
    if not fn then return end
    if net.strict then
      fn(data, from_host, from_port)
    else
      local ok, err = pcall(fn, data, from_host, from_port)
      if not ok then io.stderr:write("ludx.dht.sim: handler failed: ", tostring(err), "\n") end
    end
  end)
  return true
end

function Socket:close()
  if self.closed then return true end
  self.closed = true
  if self.net.sockets[self.key] == self then self.net.sockets[self.key] = nil end
  return true
end

---------------------------------------------------------------------------
-- World: clock + env + network.

local World = {}
World.__index = World

function M.world(opts)
  opts = opts or {}
  local clock = M.clock()
  local rand = M.rng(opts.seed or 1)
  local env = {
    now = function() return clock.t end,
    after = function(ms, fn) return clock:after(ms, fn) end,
    random = rand,
    random_bytes = function(n)
      local t = {}
      for i = 1, n do t[i] = string.char(math.floor(rand() * 256)) end
      return table.concat(t)
    end,
    wall_time = function() return clock.t end,
  }
  local net = M.network(env, { loss = opts.loss, latency = opts.latency or function() return 1 + math.floor(rand() * 9) end, seed = opts.loss_seed })
  return setmetatable({ clock = clock, env = env, net = net }, World)
end

function World:transport(host)
  return self.net:transport(host)
end

function World:run(opts)
  return self.clock:run(opts)
end

function World:now()
  return self.clock.t
end

return M
