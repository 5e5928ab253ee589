-- ludx.policy: transfer policies. Lua configures them, C enforces them in
-- the send path (token buckets and weights, never Lua per packet).
--
--   local policy = require "ludx.policy"
--   policy.limit(conn, { rate = 2e6 })            -- this stream: 2 MB/s
--   local peers = policy.per_peer({ rate = 5e6 })  -- each peer: 5 MB/s
--   peers:add(conn)
--   local link = policy.limiter({ rate = 20e6 })  -- streams sharing 20 MB/s
--   link:add(video, "high"); link:add(backup, "low")   -- 16:1 while both send
--   policy.schedule.new("smallest", items)         -- chunk order of a share
--
-- Rates are bytes of stream payload per second. Streams are udx streams or
-- streams over one (SecretStreams, ludx.dht connections).
local limiter = require "ludx.policy.limiter"
local peer = require "ludx.policy.peer"
local priority = require "ludx.policy.priority"

local M = {}

M.limiter = limiter.new
M.per_peer = peer.new
M.schedule = require "ludx.policy.schedule"
M.PRIORITY = priority.CLASSES
M.udx_stream = limiter.udx_stream

--- Limits one stream on its own: a limiter of its own, returned.
function M.limit(stream, opts)
  local l, msg, code = limiter.new(opts)
  if not l then return nil, msg, code end
  local ok
  ok, msg, code = l:add(stream)
  if not ok then return nil, msg, code end
  return l
end

--- Sets a stream's priority class (or weight) in a shared limiter.
function M.priority(link, stream, class)
  if getmetatable(link) ~= limiter.Limiter then
    error("bad argument 'link' to 'priority' (limiter expected, got " .. type(link) .. ")", 2)
  end
  return link:add(stream, class)
end

return M
