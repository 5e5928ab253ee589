-- A rate limit per peer: every stream of one peer (one remote public key,
-- or one remote host for plain udx streams) joins that peer's limiter.
--
--   local peers = per_peer.new({ rate = 5e6 })
--   server handler: peers:add(conn)   -- conn from ludx.dht: its peer's limiter
local limiter = require "ludx.policy.limiter"

local M = {}

local Peers = {}
Peers.__index = Peers

function M.new(opts)
  local rate, burst = limiter.check_opts(opts, "per_peer")
  return setmetatable({ opts = { rate = rate, burst = burst }, limiters = {} }, Peers)
end

--- The peer a stream belongs to: its remote public key, else its remote host.
function M.peer_of(stream)
  if type(stream) == "table" and type(rawget(stream, "remote_public_key")) == "string" then return stream.remote_public_key end
  local s = limiter.udx_stream(stream)
  if s then
    local host = s:remote_address()
    if host then return host end
  end
  return nil
end

--- The limiter of a peer (made on first use).
function Peers:limiter(peer)
  local l = self.limiters[peer]
  if not l then
    l = assert(limiter.new(self.opts))
    self.limiters[peer] = l
  end
  return l
end

--- Adds a stream to its peer's limiter; returns that limiter. Limiters of
-- peers with no stream left are dropped along the way.
function Peers:add(stream, weight)
  local peer = M.peer_of(stream)
  if not peer then return nil, "the stream has no peer yet", "ENOTCONN" end
  for p, l in pairs(self.limiters) do
    if p ~= peer and l:stats().members == 0 then self.limiters[p] = nil end
  end
  local l = self:limiter(peer)
  local ok, msg, code = l:add(stream, weight)
  if not ok then return nil, msg, code end
  return l
end

--- New numbers for every peer, now and later.
function Peers:set(opts)
  local rate, burst = limiter.check_opts(opts, "set")
  self.opts = { rate = rate, burst = burst }
  for _, l in pairs(self.limiters) do l:set(self.opts) end
  return true
end

--- {peer = stats, ...}
function Peers:stats()
  local out = {}
  for p, l in pairs(self.limiters) do out[p] = l:stats() end
  return out
end

return M
