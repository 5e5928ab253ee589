-- ludx.resume: what streams measured of a path, for the next stream to the
-- same peer (careful resume, draft-ietf-tsvwg-careful-resume).
--
--   local resume = require "ludx.resume"
--   local store = resume.store({ max = 256, max_age = 3600000 })
--   store:seed(stream, remote_public_key, host, port)   -- before the first write
--   ...                                                 -- the transfer
--   store:remember(stream, remote_public_key, host, port)
--
-- or, for a stream a connect or server just made (ludx.dht does this for
-- every connection: the node's store, opts.resume = false to opt out):
--
--   store:track(stream, remote_public_key, host)  -- seeds now, remembers on close
--
-- An entry is kept per remote key and address (a peer seen over another
-- path is another entry: a path's capacity is not the peer's); port nil
-- names the path by host alone (a peer's ports change between
-- connections: holepunched sockets, restarts). The store
-- holds at most `max` entries (the least recently used goes first) and
-- forgets an entry after `max_age` ms. A stream seeded from it starts as a
-- stranger's would and jumps to half the remembered rate only once its
-- first RTT sample matches (udx Stream:set_resume).
local ludx = require "ludx"
local check = require "ludx.check"

local M = {}

M.DEFAULT_MAX = 256
M.DEFAULT_MAX_AGE = 3600000 -- ms
-- A closed stream is remembered by track() only when it delivered this
-- much: a completed transfer whose estimate means something, not a
-- handshake or a few messages (and a peer must move this much of our data
-- per entry it makes).
M.DEFAULT_MIN_BYTES = 1048576

local Store = {}
Store.__index = Store

local function bad(name, fname, expected, got)
  check.fail(name, fname, expected, got)
end

local function key_of(fname, public_key, host, port)
  if public_key ~= nil and type(public_key) ~= "string" then bad("public_key", fname, "string or nil", type(public_key)) end
  if type(host) ~= "string" then bad("host", fname, "string", type(host)) end
  if port ~= nil and (type(port) ~= "number" or port % 1 ~= 0 or port < 0 or port > 65535) then bad("port", fname, "port number or nil", tostring(port)) end
  return (public_key or "") .. "\0" .. host .. "\0" .. (port or "")
end

--- A store of at most opts.max entries (default 256), each forgotten after
-- opts.max_age ms (default one hour); track() remembers streams that
-- delivered at least opts.min_bytes (default 1 MiB).
function M.store(opts)
  if opts ~= nil and type(opts) ~= "table" then bad("opts", "store", "table", type(opts)) end
  opts = opts or {}
  local max, age = opts.max or M.DEFAULT_MAX, opts.max_age or M.DEFAULT_MAX_AGE
  local min_bytes = opts.min_bytes or M.DEFAULT_MIN_BYTES
  if type(max) ~= "number" or max < 1 or max % 1 ~= 0 then bad("max", "store", "positive integer", tostring(max)) end
  if type(age) ~= "number" or age <= 0 then bad("max_age", "store", "positive number of ms", tostring(age)) end
  if type(min_bytes) ~= "number" or min_bytes < 0 or min_bytes ~= min_bytes then bad("min_bytes", "store", "non-negative number", tostring(min_bytes)) end
  -- a ring of entries in use order: head is the most recent
  local head = {}
  head.prev, head.next = head, head
  return setmetatable({ max = max, max_age = age, min_bytes = min_bytes, n = 0, map = {}, head = head }, Store)
end

local function unlink(e)
  e.prev.next, e.next.prev = e.next, e.prev
end

local function push_front(self, e)
  local h = self.head
  e.prev, e.next = h, h.next
  h.next.prev = e
  h.next = e
end

local function drop(self, e)
  unlink(e)
  self.map[e.key] = nil
  self.n = self.n - 1
end

--- The entry for a peer and address: {rate = payload bytes/s, rtt_ms =,
-- at = ms} or nil (never seen, or forgotten).
function Store:get(public_key, host, port)
  local k = key_of("get", public_key, host, port)
  local e = self.map[k]
  if not e then return nil end
  if ludx.now() - e.at > self.max_age then
    drop(self, e)
    return nil
  end
  unlink(e)
  push_front(self, e)
  return { rate = e.rate, rtt_ms = e.rtt_ms, at = e.at }
end

--- Records what a stream measured (its bandwidth estimate and min RTT;
-- nothing when it measured neither). Returns true when recorded.
function Store:remember(stream, public_key, host, port)
  local k = key_of("remember", public_key, host, port)
  if type(stream) ~= "table" or type(stream.stats) ~= "function" then bad("stream", "remember", "udx stream", type(stream)) end
  local st = stream:stats()
  if not st or not (st.bbr_bw and st.bbr_bw > 0) or not (st.min_rtt_ms and st.min_rtt_ms > 0) then return false end
  local e = self.map[k]
  if e then
    unlink(e)
  else
    if self.n >= self.max then drop(self, self.head.prev) end
    e = { key = k }
    self.map[k] = e
    self.n = self.n + 1
  end
  e.rate, e.rtt_ms, e.at = st.bbr_bw, st.min_rtt_ms, ludx.now()
  push_front(self, e)
  return true
end

--- Seeds a stream that has not written yet from the entry for the peer and
-- address: true when there was one, false otherwise; nil, msg, code when
-- the stream refused (it already sent).
function Store:seed(stream, public_key, host, port)
  local e = self:get(public_key, host, port)
  if not e then return false end
  if type(stream) ~= "table" or type(stream.set_resume) ~= "function" then bad("stream", "seed", "udx stream", type(stream)) end
  local ok, msg, code = stream:set_resume(e.rate, e.rtt_ms)
  if not ok then return nil, msg, code end
  return true
end

--- For a stream just connected to an authenticated peer, before its first
-- write: seeds it from the entry for (public_key, host, port) and, when it
-- closes, remembers what it measured if it delivered at least min_bytes
-- and did not time out (a path that died is not one to jump on). Only
-- call it with a key the handshake proved: each key makes an entry.
-- Returns what seed() returns.
function Store:track(stream, public_key, host, port)
  key_of("track", public_key, host, port)
  if type(stream) ~= "table" or type(stream.set_resume) ~= "function" then bad("stream", "track", "udx stream", type(stream)) end
  local seeded, msg, code = self:seed(stream, public_key, host, port)
  stream.on_close = function(s)
    local st = s:stats()
    if select(2, s:error()) == "ETIMEDOUT" or not st or (st.delivered or 0) * (st.max_payload or 0) < self.min_bytes then return end
    self:remember(s, public_key, host, port)
  end
  return seeded, msg, code
end

--- Entries held.
function Store:count()
  return self.n
end

return M
