-- ludx.dht: a hyperdht-compatible DHT node for tasks.
--
--   local dht = require "ludx.dht"
--   local node = assert(dht.new({ bootstrap = { "127.0.0.1:49737" } }))
--   assert(node:ready())
--   assert(node:announce(topic, keypair))
--   for reply in node:lookup(topic) do ... reply.peers ... end
--   local conn = assert(node:connect(server_public_key))
--   node:destroy()
--
-- Keys, topics and hashes are 32-byte binary strings. Calls that wait take
-- an optional timeout (ms, or opts.timeout). Errors: nil, message, code,
-- with hyperdht's codes (PEER_NOT_FOUND, REQUEST_TIMEOUT, ...).
--
--   dht.new(opts) / dht.bootstrapper(port, host) / dht.testnet(n, opts)
--   dht.keypair([seed]), dht.hash(data)
--   node:ready() node:address() node:remote_address() node:id()
--   node:lookup(topic) node:find_peer(pk)        -> iterators (q.err, q:close())
--   node:announce(topic, kp, {relay_addresses}) node:unannounce(topic, kp)
--   node:immutable_put(value) node:immutable_get(hash)
--   node:mutable_put(kp, value, {seq}) node:mutable_get(pk, {seq, latest})
--   node:server(handler, {firewall}) -> server:listen(kp) server:close()
--   node:connect(pk, {keypair, relay_addresses, timeout}) -> SecretStream
--   node:ping(host, port) node:nodes() node:destroy()
--
-- The protocol engine underneath (ludx.dht.rpc, .hyperdht) is callback
-- driven over an env (clock, timers, random) and a transport (sockets), so
-- ludx.dht.sim can run whole networks in simulated time.
local ludx = require "ludx"
local hyperdht = require "ludx.dht.hyperdht"
local denv = require "ludx.dht.env"
local crypto = require "ludx.dht.crypto"
local consts = require "ludx.dht.constants"
local errors = require "ludx.dht.errors"

local M = {}

M.FIREWALL = consts.FIREWALL
M.BOOTSTRAP = consts.BOOTSTRAP_NODES
M.DEFAULT_PORT = consts.DEFAULT_PORT

local function bad_arg(name, fname, expected, got)
  error(string.format("bad argument '%s' to '%s' (%s expected, got %s)", name, fname, expected, got), ludx.user_level())
end

local function check_key(v, name, fname)
  if type(v) ~= "string" or #v ~= 32 then
    bad_arg(name, fname, "32-byte string", type(v) == "string" and (#v .. " bytes") or type(v))
  end
end

local function check_keypair(kp, name, fname)
  if type(kp) ~= "table" or type(kp.public_key) ~= "string" or #kp.public_key ~= 32 or type(kp.secret_key) ~= "string" or #kp.secret_key ~= 64 then
    bad_arg(name, fname, "key pair {public_key (32 bytes), secret_key (64 bytes)}", type(kp))
  end
end

local function opts_timeout(opts, fname)
  if type(opts) == "number" then return ludx.check_timeout(opts, fname), {} end
  if opts ~= nil and type(opts) ~= "table" then bad_arg("opts", fname, "table or timeout", type(opts)) end
  opts = opts or {}
  return ludx.check_timeout(opts.timeout, fname), opts
end

local function pack(...)
  return { n = select("#", ...), ... }
end

--- Starts a callback-style operation and waits for its callback.
-- The callback gets (result) or (nil, err table).
local function await(what, timeout, start)
  local w = ludx.waiters()
  local res = nil
  start(function(...)
    if res then return end
    res = pack(...)
    w:wake_all(true)
  end)
  while not res do
    local ok, msg, code = w:wait(what, timeout, what)
    if ok == nil and code then return nil, msg, code end
  end
  if res[1] == nil and errors.is(res[2]) then return nil, res[2].msg, res[2].code end
  return unpack(res, 1, res.n)
end
M._await = await

--- A new Ed25519 key pair {public_key, secret_key}; seed: 32 bytes.
function M.keypair(seed)
  if seed ~= nil then check_key(seed, "seed", "keypair") end
  return crypto.keypair(seed)
end

--- BLAKE2b-256, as hyperdht hashes keys into targets.
function M.hash(data)
  if type(data) ~= "string" then bad_arg("data", "hash", "string", type(data)) end
  return crypto.hash(data)
end

---------------------------------------------------------------------------
-- Query results as an iterator: for reply in q do ... end. An internal
-- queue carries the replies, so the loop body may wait freely.

local Results = {}
Results.__index = Results

local function results(query, timeout)
  local self = setmetatable({ queue = ludx.queue(), query = query, timeout = timeout, err = nil, done = false }, Results)
  query.on_data = function(d) self.queue:put(d) end
  query.on_end = function(err)
    self.done = true
    if err and err.code ~= "REQUEST_DESTROYED" then self.err = err end
    self.queue:close()
  end
  self.deadline = timeout and (ludx.now() + timeout) or nil
  query:start()
  return self
end

--- The next reply, or nil at the end (then q.err / q:error() tell why).
function Results:next()
  local t = self.deadline and math.max(0, self.deadline - ludx.now()) or nil
  local v, msg, code = self.queue:get(t)
  if v == nil and code == "ETIMEDOUT" then
    self.query:destroy()
    self.err = errors.REQUEST_TIMEOUT("query timed out")
    return nil
  end
  return v
end

Results.__call = function(self) return self:next() end

--- nil, or message, code of what ended the query early.
function Results:error()
  if not self.err then return nil end
  return self.err.msg, self.err.code
end

--- Stops the query.
function Results:close()
  self.query:destroy()
  self.queue:close()
end

--- Every remaining reply as a list; or nil, msg, code.
function Results:collect()
  local out = {}
  for r in self do out[#out + 1] = r end
  if self.err then return nil, self.err.msg, self.err.code end
  return out
end

--- The addresses of the closest nodes that replied (after the end).
function Results:closest_nodes()
  return self.query:closest_nodes()
end

---------------------------------------------------------------------------

local Node = {}
Node.__index = Node
M.Node = Node

--- A new DHT node, bound and bootstrapping. opts: bootstrap (list of
-- "host:port"; default the public HyperDHT nodes), host ("0.0.0.0"), port
-- (nil = 49737 or the next free, 0 = any), ephemeral (nil = adaptive),
-- firewalled, keypair (default for listen/connect), concurrency,
-- max_size / max_age (storage limits), max_requests /
-- max_requests_per_source (the request-flood cap, see ludx.dht.io), env /
-- transport (for simulation).
function M.new(opts)
  if opts ~= nil and type(opts) ~= "table" then bad_arg("opts", "new", "table", type(opts)) end
  opts = opts or {}
  if opts.keypair ~= nil then check_keypair(opts.keypair, "opts.keypair", "new") end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.env = opts.env or denv.env
  o.transport = opts.transport or denv.transport
  if o.bootstrap == nil then o.bootstrap = consts.BOOTSTRAP_NODES end
  if o.port == nil then o.port = consts.DEFAULT_PORT end
  local ok, h = pcall(opts.bootstrapper and hyperdht.bootstrapper or hyperdht.new, o)
  if not ok then bad_arg("opts", "new", "valid options", tostring(h)) end
  local self = setmetatable({ h = h, keypair = opts.keypair or crypto.keypair(), ready_waiters = ludx.waiters(), servers = {} }, Node)
  h:on("ready", function() self.ready_waiters:wake_all(true) end)
  local started, msg, code = h:start()
  if not started then return nil, msg, code end
  self.started = true
  ludx.track(self)
  return self
end

--- A node that is persistent at once on host:port (bootstrap nodes).
function M.bootstrapper(port, host, opts)
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  o.port, o.host, o.bootstrapper = port or 0, host or "127.0.0.1", true
  o.bootstrap = o.bootstrap or {}
  return M.new(o)
end

--- Waits until the bootstrap is done.
function Node:ready(timeout)
  timeout = ludx.check_timeout(type(timeout) == "table" and timeout.timeout or timeout, "ready")
  while not self.h.bootstrapped do
    if self.h.destroyed then return nil, "node destroyed", "NODE_DESTROYED" end
    local ok, msg, code = self.ready_waiters:wait("dht ready", timeout, "ready")
    if ok == nil and code then return nil, msg, code end
  end
  return true
end

function Node:address()
  return self.h:address()
end

--- Our public address when it is known and reachable, else nil.
function Node:remote_address()
  local a = self.h:remote_address()
  if not a then return nil end
  return a.host, a.port
end

function Node:id()
  return self.h:id()
end

function Node:is_persistent()
  return not self.h.ephemeral
end

function Node:is_firewalled()
  return self.h.firewalled
end

--- The table nodes, most recently seen first: {{host=, port=}, ...}.
function Node:nodes(limit)
  return self.h:to_array(limit)
end

--- Pings host:port; the reply message or nil, msg, code.
function Node:ping(host, port, timeout)
  if type(host) ~= "string" then bad_arg("host", "ping", "string", type(host)) end
  timeout = ludx.check_timeout(timeout, "ping")
  return await("dht ping", timeout, function(cb)
    self.h:ping({ host = host, port = port }, nil, cb, function(err) cb(nil, err) end)
  end)
end

--- LOOKUP replies for a topic: an iterator over {from, to, token, peers =
-- {{public_key, relay_addresses}}, bump}. opts.timeout bounds it all.
function Node:lookup(topic, opts)
  check_key(topic, "topic", "lookup")
  local timeout
  timeout, opts = opts_timeout(opts, "lookup")
  return results(self.h:lookup(topic, opts), timeout)
end

--- FIND_PEER replies for a public key: an iterator over {from, peer =
-- {public_key, relay_addresses}}.
function Node:find_peer(public_key, opts)
  check_key(public_key, "public_key", "find_peer")
  local timeout
  timeout, opts = opts_timeout(opts, "find_peer")
  return results(self.h:find_peer(public_key, opts), timeout)
end

--- Announces keypair.public_key under topic on the closest nodes.
-- opts.relay_addresses (up to 3 {host, port}), opts.timeout.
function Node:announce(topic, keypair, opts)
  check_key(topic, "topic", "announce")
  check_keypair(keypair, "keypair", "announce")
  local timeout
  timeout, opts = opts_timeout(opts, "announce")
  local q = results(self.h:announce(topic, keypair, opts.relay_addresses or {}, opts), timeout)
  local _, msg, code = q:collect()
  if msg then return nil, msg, code end
  return q:closest_nodes()
end

--- Removes keypair's announcement under topic.
function Node:unannounce(topic, keypair, opts)
  check_key(topic, "topic", "unannounce")
  check_keypair(keypair, "keypair", "unannounce")
  local timeout
  timeout, opts = opts_timeout(opts, "unannounce")
  local q = results(self.h:lookup_and_unannounce(topic, keypair, opts), timeout)
  local _, msg, code = q:collect()
  if msg then return nil, msg, code end
  return true
end

--- Stores value under H32(value): {hash =, closest_nodes =}.
function Node:immutable_put(value, opts)
  if type(value) ~= "string" then bad_arg("value", "immutable_put", "string", type(value)) end
  local timeout
  timeout, opts = opts_timeout(opts, "immutable_put")
  return await("dht immutable_put", timeout, function(cb) self.h:immutable_put(value, opts, cb) end)
end

--- The value stored under hash (checked), and the reply it came in; nil
-- when nobody has it.
function Node:immutable_get(hash, opts)
  check_key(hash, "hash", "immutable_get")
  local timeout
  timeout, opts = opts_timeout(opts, "immutable_get")
  local r, msg, code = await("dht immutable_get", timeout, function(cb) self.h:immutable_get(hash, opts, cb) end)
  if r == nil then return nil, msg, code end
  return r.value, r
end

--- Signs value with keypair at opts.seq (default 0) and stores it:
-- {public_key, seq, signature, closest_nodes}.
function Node:mutable_put(keypair, value, opts)
  check_keypair(keypair, "keypair", "mutable_put")
  if type(value) ~= "string" then bad_arg("value", "mutable_put", "string", type(value)) end
  local timeout
  timeout, opts = opts_timeout(opts, "mutable_put")
  return await("dht mutable_put", timeout, function(cb) self.h:mutable_put(keypair, value, opts, cb) end)
end

--- The latest signed value of public_key: {value, seq, signature, from};
-- nil when none. opts.seq (minimum), opts.latest (false: first valid).
function Node:mutable_get(public_key, opts)
  check_key(public_key, "public_key", "mutable_get")
  local timeout
  timeout, opts = opts_timeout(opts, "mutable_get")
  return await("dht mutable_get", timeout, function(cb) self.h:mutable_get(public_key, opts, cb) end)
end

--- A server: handler(conn) runs as a task for each connection. Call
-- server:listen(keypair) to announce it.
function Node:server(handler, opts)
  if type(handler) ~= "function" then bad_arg("handler", "server", "function", type(handler)) end
  local server = require "ludx.dht.server"
  return server.new(self, handler, opts)
end

--- Connects to the server with public_key: a SecretStream connection.
-- opts: keypair, timeout, relay_addresses.
function Node:connect(public_key, opts)
  check_key(public_key, "public_key", "connect")
  local timeout
  timeout, opts = opts_timeout(opts, "connect")
  if opts.keypair ~= nil then check_keypair(opts.keypair, "opts.keypair", "connect") end
  local connect = require "ludx.dht.connect"
  return connect.connect(self, public_key, opts, timeout)
end

--- Closes the servers, the sockets and everything in flight.
function Node:destroy()
  if self.destroyed then return true end
  self.destroyed = true
  ludx.untrack(self)
  for s in pairs(self.servers) do pcall(s.close, s, { fast = true }) end
  self.h:destroy()
  self.ready_waiters:wake_all(nil, "node destroyed", "NODE_DESTROYED")
  return true
end
Node.close = Node.destroy

--- The underlying callback-style node (ludx.dht.hyperdht).
function Node:raw()
  return self.h
end

---------------------------------------------------------------------------
-- A local network for tests: a bootstrap node plus n-1 persistent nodes.

local Testnet = {}
Testnet.__index = Testnet

--- Starts n nodes (at least 2) on host (127.0.0.1) and waits until they
-- are all bootstrapped. Returns {bootstrap = {"host:port"}, nodes = {...}}.
function M.testnet(n, opts)
  n = n or 5
  if type(n) ~= "number" or n < 2 then bad_arg("n", "testnet", "number >= 2", tostring(n)) end
  local timeout
  timeout, opts = opts_timeout(opts, "testnet")
  local host = opts.host or "127.0.0.1"
  local self = setmetatable({ nodes = {}, host = host }, Testnet)
  local first, msg, code = M.bootstrapper(opts.port or 0, host, { env = opts.env, transport = opts.transport })
  if not first then return nil, msg, code end
  self.nodes[1] = first
  local _, port = first:address()
  self.bootstrap = { host .. ":" .. port }
  for i = 2, n do
    local node
    node, msg, code = M.new({ bootstrap = self.bootstrap, host = host, port = 0, ephemeral = false, firewalled = false,
      env = opts.env, transport = opts.transport, max_age = opts.max_age })
    if not node then
      self:destroy()
      return nil, msg, code
    end
    self.nodes[i] = node
  end
  for _, node in ipairs(self.nodes) do
    local ok
    ok, msg, code = node:ready(timeout)
    if not ok then
      self:destroy()
      return nil, msg, code
    end
  end
  return self
end

--- Another node joined to this testnet (ephemeral, not firewalled unless
-- opts say otherwise).
function Testnet:create_node(opts)
  local o = { bootstrap = self.bootstrap, host = self.host, port = 0, ephemeral = true, firewalled = false }
  for k, v in pairs(opts or {}) do o[k] = v end
  local node, msg, code = M.new(o)
  if not node then return nil, msg, code end
  local ok
  ok, msg, code = node:ready(o.timeout)
  if not ok then
    node:destroy()
    return nil, msg, code
  end
  self.nodes[#self.nodes + 1] = node
  return node
end

function Testnet:destroy()
  for _, node in ipairs(self.nodes) do node:destroy() end
  self.nodes = {}
end

return M
