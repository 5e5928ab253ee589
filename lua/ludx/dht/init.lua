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
--   dht.keypair_from_file(path), dht.keypair_to_file(path, kp)
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

local check = require "ludx.check"
local bad_arg, pack = check.fail, check.pack

local function check_key(v, name, fname)
  check.bytes(v, 32, name, fname)
end

local function check_keypair(kp, name, fname)
  if type(kp) ~= "table" or type(kp.public_key) ~= "string" or #kp.public_key ~= 32 or type(kp.secret_key) ~= "string" or #kp.secret_key ~= 64 then
    bad_arg(name, fname, "key pair {public_key (32 bytes), secret_key (64 bytes)}", type(kp))
  end
end
M._check_keypair = check_keypair

-- A remote public key (or topic used as one) that is not a valid Ed25519
-- point cannot be reached: it fails at once instead of as a remote error.
local function public_key_ok(pk, name, fname)
  check.string(pk, name, fname)
  if not crypto.valid_public_key(pk) then return nil, "invalid public key", "EINVAL" end
  return true
end

-- A topic is any 32 bytes (a hash); another length fails the same way.
local function topic_ok(topic, name, fname)
  check.string(topic, name, fname)
  if #topic ~= 32 then return nil, "invalid topic", "EINVAL" end
  return true
end

local function opts_timeout(opts, fname)
  if type(opts) == "number" then return check.timeout(opts, fname), {} end
  if opts ~= nil and type(opts) ~= "table" then bad_arg("opts", fname, "table or timeout", type(opts)) end
  opts = opts or {}
  return check.timeout(opts.timeout, fname, "opts.timeout"), opts
end

--- Starts a callback-style operation and waits for its callback.
-- The callback gets (result) or (nil, err table).
local function await(what, timeout, start)
  local res = pack(ludx.await(what, timeout, start))
  if res[1] == nil and errors.is(res[2]) then return nil, res[2].msg, res[2].code end
  return unpack(res, 1, res.n)
end
M._await = await

-- await on a node: once the node is destroyed, whatever the operation
-- reported, the answer is NODE_DESTROYED (not a timeout nor "too few nodes").
local function node_await(node, what, timeout, start)
  if node.destroyed then return nil, "node destroyed", "NODE_DESTROYED" end
  local r = pack(await(what, timeout, start))
  if node.destroyed then return nil, "node destroyed", "NODE_DESTROYED" end
  return unpack(r, 1, r.n)
end

--- A new Ed25519 key pair {public_key, secret_key}; seed: 32 bytes.
function M.keypair(seed)
  if seed ~= nil then check_key(seed, "seed", "keypair") end
  return crypto.keypair(seed)
end

--- The key pair in a key file (`ludx keygen -o FILE`: the secret seed as
-- 64 hex characters); nil, msg, code (ENOENT, EINVAL, ...).
function M.keypair_from_file(path)
  return require("ludx.keyfile").read(path, "keypair_from_file")
end

--- Writes keypair (or a 32-byte seed) as a key file, mode 0600; never
-- replaces a file (nil, msg, "EEXIST"). Returns the key pair.
function M.keypair_to_file(path, keypair)
  return require("ludx.keyfile").write(path, keypair, "keypair_to_file")
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

local function results(node, query, timeout)
  local self = setmetatable({ queue = ludx.queue(), query = query, timeout = timeout, done = false }, Results)
  query.on_data = function(d) self.queue:put(d) end
  query.on_end = function(err)
    self.done = true
    if node.destroyed then
      self.err = errors.NODE_DESTROYED("node destroyed")
    elseif err and err.code ~= "REQUEST_DESTROYED" then
      self.err = err
    end
    self.queue:close()
  end
  self.deadline = check.deadline(timeout)
  query:start()
  return self
end

--- The next reply, or nil at the end (then q.err / q:error() tell why).
function Results:next()
  local v, _, code = self.queue:get(check.left(self.deadline))
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
-- One line for the REPL and logs: address, id, mode, state, table size.
Node.__tostring = function(n)
  local function short(k)
    if type(k) ~= "string" then return "?" end
    return (k:sub(1, 4):gsub(".", function(c) return string.format("%02x", c:byte()) end)) .. "..."
  end
  if n.destroyed then return "<dht node destroyed>" end
  local ok, a, p = pcall(n.address, n)
  if ok and type(a) == "table" then a, p = a.host, a.port end
  local okid, id = pcall(n.id, n)
  local size = 0
  local okn, list = pcall(n.nodes, n)
  if okn and type(list) == "table" then size = #list end
  return string.format("<dht node %s:%s id %s, key %s, %s, %s, %d nodes>", ok and tostring(a) or "?",
    ok and tostring(p) or "?", okid and short(id) or "?", short(n.keypair and n.keypair.public_key),
    n.h.ephemeral and "ephemeral" or "persistent", n.h.bootstrapped and "ready" or "bootstrapping", size)
end
-- the servers of ludx.dht.server print the same way
local function server_tostring(s)
  local pk = s.keypair and s.keypair.public_key
  local hex = type(pk) == "string" and (pk:sub(1, 4):gsub(".", function(c) return string.format("%02x", c:byte()) end)) .. "..." or "-"
  return string.format("<dht server key %s, %s, %d connections>", hex,
    s.closed and "closed" or (s.listening and "listening" or "not listening"), s.connections or 0)
end
M.Node = Node

--- A new DHT node, bound and bootstrapping. opts: bootstrap (list of
-- "host:port"; default the public HyperDHT nodes), host ("0.0.0.0"), port
-- (nil = 49737 or the next free, 0 = any), ephemeral (nil = adaptive),
-- firewalled, keypair (default for listen/connect), concurrency,
-- max_size / max_age (storage limits), max_requests /
-- max_requests_per_source (the request-flood cap, see ludx.dht.io), env /
-- transport (for simulation).
local new_node

function M.new(opts)
  return new_node(opts, "dht.new")
end

-- dht.new for a module that makes a node from its own options (swarm.new):
-- argument errors name fname.
function M._new(opts, fname)
  return new_node(opts, fname)
end

-- "host:port" or a list of them (or of {host=, port=}), as io.lua takes.
local function check_bootstrap(b, fname)
  if type(b) == "string" then b = { b } end
  if type(b) ~= "table" then bad_arg("opts.bootstrap", fname, "\"host:port\" or a list of them", type(b)) end
  for i, a in ipairs(b) do
    local ok = (type(a) == "string" and a:match("^.+:%d+$"))
      or (type(a) == "table" and type(a.host) == "string" and type(a.port) == "number")
    if not ok then
      bad_arg("opts.bootstrap[" .. i .. "]", fname, "\"host:port\"", type(a) == "string" and a or type(a))
    end
  end
  return b
end

new_node = function(opts, fname)
  if opts ~= nil and type(opts) ~= "table" then bad_arg("opts", fname, "table", type(opts)) end
  opts = opts or {}
  if opts.keypair ~= nil then check_keypair(opts.keypair, "opts.keypair", fname) end
  if opts.port ~= nil then check.port(opts.port, "opts.port", fname) end
  check.string(opts.host, "opts.host", fname, true)
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  if o.bootstrap ~= nil then o.bootstrap = check_bootstrap(o.bootstrap, fname) end
  o.env = opts.env or denv.env
  o.transport = opts.transport or denv.transport
  if o.bootstrap == nil then o.bootstrap = consts.BOOTSTRAP_NODES end
  if o.port == nil then o.port = consts.DEFAULT_PORT end
  -- careful resume: what connections measured, per remote key and host
  if opts.resume ~= nil and opts.resume ~= false and type(opts.resume) ~= "table" then
    bad_arg("opts.resume", fname, "false or a table of ludx.resume store options", type(opts.resume))
  end
  local resume_store = opts.resume ~= false and require("ludx.resume").store(opts.resume or nil) or nil
  o.resume = nil
  local ok, h = pcall(opts.bootstrapper and hyperdht.bootstrapper or hyperdht.new, o)
  if not ok then bad_arg("opts", fname, "valid options", tostring(h)) end
  local self = setmetatable({
    h = h, keypair = opts.keypair or crypto.keypair(), ready_waiters = ludx.waiters(), servers = {}, resume = resume_store,
    owned = setmetatable({}, { __mode = "k" }) }, Node)
  h:on("ready", function() self.ready_waiters:wake_all(true) end)
  local started, msg, code = h:start()
  if not started then return nil, msg, code end
  self.started = true
  ludx.track(self)
  return self
end

--- A node that is persistent at once on host:port (bootstrap nodes).
function M.bootstrapper(port, host, opts)
  if port ~= nil then check.port(port, "port", "dht.bootstrapper") end
  check.string(host, "host", "dht.bootstrapper", true)
  if opts ~= nil and type(opts) ~= "table" then bad_arg("opts", "dht.bootstrapper", "table", type(opts)) end
  local o = {}
  for k, v in pairs(opts or {}) do o[k] = v end
  o.port, o.host, o.bootstrapper = port or 0, host or "127.0.0.1", true
  o.bootstrap = o.bootstrap or {}
  return new_node(o, "dht.bootstrapper")
end

--- Waits until the bootstrap is done.
function Node:ready(timeout)
  timeout = check.timeout(type(timeout) == "table" and timeout.timeout or timeout, "ready")
  while self.destroyed or not self.h.bootstrapped do
    if self.destroyed or self.h.destroyed then return nil, "node destroyed", "NODE_DESTROYED" end
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
  check.string(host, "host", "ping")
  check.port(port, "port", "ping", 1)
  timeout = check.timeout(timeout, "ping")
  return node_await(self, "dht ping", timeout, function(cb)
    self.h:ping({ host = host, port = port }, nil, cb, function(err) cb(nil, err) end)
  end)
end

--- LOOKUP replies for a topic: an iterator over {from, to, token, peers =
-- {{public_key, relay_addresses}}, bump}. opts.timeout bounds it all.
function Node:lookup(topic, opts)
  local ok, msg, code = topic_ok(topic, "topic", "lookup")
  local timeout
  timeout, opts = opts_timeout(opts, "lookup")
  if not ok then return nil, msg, code end
  if self.destroyed then return nil, "node destroyed", "NODE_DESTROYED" end
  return results(self, self.h:lookup(topic, opts), timeout)
end

--- FIND_PEER replies for a public key: an iterator over {from, peer =
-- {public_key, relay_addresses}}.
function Node:find_peer(public_key, opts)
  local ok, msg, code = public_key_ok(public_key, "public_key", "find_peer")
  local timeout
  timeout, opts = opts_timeout(opts, "find_peer")
  if not ok then return nil, msg, code end
  if self.destroyed then return nil, "node destroyed", "NODE_DESTROYED" end
  return results(self, self.h:find_peer(public_key, opts), timeout)
end

--- Announces keypair.public_key under topic on the closest nodes.
-- opts.relay_addresses (up to 3 {host, port}), opts.timeout.
function Node:announce(topic, keypair, opts)
  local ok, msg, code = topic_ok(topic, "topic", "announce")
  check_keypair(keypair, "keypair", "announce")
  local timeout
  timeout, opts = opts_timeout(opts, "announce")
  if not ok then return nil, msg, code end
  if self.destroyed then return nil, "node destroyed", "NODE_DESTROYED" end
  local q = results(self, self.h:announce(topic, keypair, opts.relay_addresses or {}, opts), timeout)
  msg, code = select(2, q:collect())
  if msg then return nil, msg, code end
  return q:closest_nodes()
end

--- Removes keypair's announcement under topic.
function Node:unannounce(topic, keypair, opts)
  local ok, msg, code = topic_ok(topic, "topic", "unannounce")
  check_keypair(keypair, "keypair", "unannounce")
  local timeout
  timeout, opts = opts_timeout(opts, "unannounce")
  if not ok then return nil, msg, code end
  if self.destroyed then return nil, "node destroyed", "NODE_DESTROYED" end
  local q = results(self, self.h:lookup_and_unannounce(topic, keypair, opts), timeout)
  msg, code = select(2, q:collect())
  if msg then return nil, msg, code end
  return true
end

--- Stores value under H32(value): {hash =, closest_nodes =}.
function Node:immutable_put(value, opts)
  if type(value) ~= "string" then bad_arg("value", "immutable_put", "string", type(value)) end
  local timeout
  timeout, opts = opts_timeout(opts, "immutable_put")
  return node_await(self, "dht immutable_put", timeout, function(cb) self.h:immutable_put(value, opts, cb) end)
end

--- The value stored under hash (checked), and the reply it came in; nil
-- when nobody has it.
function Node:immutable_get(hash, opts)
  check_key(hash, "hash", "immutable_get")
  local timeout
  timeout, opts = opts_timeout(opts, "immutable_get")
  local r, msg, code = node_await(self, "dht immutable_get", timeout, function(cb) self.h:immutable_get(hash, opts, cb) end)
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
  return node_await(self, "dht mutable_put", timeout, function(cb) self.h:mutable_put(keypair, value, opts, cb) end)
end

--- The latest signed value of public_key: {value, seq, signature, from};
-- nil when none. opts.seq (minimum), opts.latest (false: first valid).
function Node:mutable_get(public_key, opts)
  local ok, msg, code = public_key_ok(public_key, "public_key", "mutable_get")
  local timeout
  timeout, opts = opts_timeout(opts, "mutable_get")
  if not ok then return nil, msg, code end
  return node_await(self, "dht mutable_get", timeout, function(cb) self.h:mutable_get(public_key, opts, cb) end)
end

--- A server: handler(conn) runs as a task for each connection. Call
-- server:listen(keypair) to announce it.
function Node:server(handler, opts)
  check.func(handler, "handler", "server")
  check.table(opts, "opts", "server", true)
  local server = require "ludx.dht.server"
  -- each connection and its handler task belong to the node (destroy ends them)
  local srv = server.new(self, function(conn)
    self:_own(conn)
    return handler(conn)
  end, opts)
  local mt = getmetatable(srv)
  if mt and not mt.__tostring then mt.__tostring = server_tostring end
  return srv
end

--- Connects to the server with public_key: a SecretStream connection.
-- opts: keypair, timeout, relay_addresses, resume (false: start as with a
-- stranger even when the node's resume store knows the peer's path).
function Node:connect(public_key, opts)
  local ok, msg, code = public_key_ok(public_key, "public_key", "connect")
  local timeout
  timeout, opts = opts_timeout(opts, "connect")
  if opts.keypair ~= nil then check_keypair(opts.keypair, "opts.keypair", "connect") end
  if not ok then return nil, msg, code end
  if self.destroyed then return nil, "node destroyed", "NODE_DESTROYED" end
  local connect = require "ludx.dht.connect"
  local conn
  conn, msg, code = connect.connect(self, public_key, opts, timeout)
  if not conn then
    if self.destroyed then return nil, "node destroyed", "NODE_DESTROYED" end
    return nil, msg, code
  end
  self:_own(conn)
  if self.destroyed then return nil, "node destroyed", "NODE_DESTROYED" end
  return conn
end

--- Registers obj (anything with close()) as made through this node:
-- destroy() closes it. Weak: a connection dropped by everyone goes away.
-- A node already destroyed closes obj at once.
function Node:_own(obj)
  if self.destroyed then
    pcall(obj.destroy or obj.close, obj)
  else
    self.owned[obj] = true
  end
  return obj
end

--- Ends everything at once: the servers stop (no unannounce), every
-- connection made through the node (client and server side, connecting
-- or open) is closed, so its tasks end and its readers and writers get an
-- error now; the sockets close; waiters get nil, "node destroyed",
-- "NODE_DESTROYED". Idempotent.
function Node:destroy()
  if self.destroyed then return true end
  self.destroyed = true
  ludx.untrack(self)
  for s in pairs(self.servers) do pcall(s.close, s, { fast = true }) end
  local list = {}
  for obj in pairs(self.owned) do list[#list + 1] = obj end
  self.owned = setmetatable({}, { __mode = "k" })
  for _, obj in ipairs(list) do pcall(obj.destroy or obj.close, obj) end
  self.h:destroy()
  self.ready_waiters:wake_all(nil, "node destroyed", "NODE_DESTROYED")
  if self.close_waiters then self.close_waiters:wake_all(true) end
  return true
end

--- Ends gracefully, then destroys: the servers unannounce (each waits up
-- to timeout ms, default 10 s, all at once). Outside a task it is destroy().
-- Idempotent.
function Node:close(timeout)
  timeout = check.timeout(type(timeout) == "table" and timeout.timeout or timeout, "close")
  if self.destroyed then return true end
  local in_task = ludx.in_task()
  if self.closing then
    -- a second close returns once the first one has destroyed the node
    if in_task then self.close_waiters:wait("dht node close", nil, "close") end
    return true
  end
  self.closing = true
  self.close_waiters = ludx.waiters()
  if in_task then
    -- whatever goes wrong here (a cancel included), destroy still runs
    local ok, err = pcall(function()
      local left = 0
      local done = ludx.waiters()
      for s in pairs(self.servers) do
        left = left + 1
        ludx.spawn("dht node close", function()
          pcall(s.close, s, { timeout = timeout })
          left = left - 1
          if left == 0 then done:wake_all(true) end
        end)
      end
      if left > 0 then done:wait("dht node close", timeout and timeout + 1000, "close") end
    end)
    if not ok then
      self:destroy()
      error(err, 0)
    end
  end
  return self:destroy()
end

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

--- Destroys every node (and so every connection made through them).
-- Idempotent.
function Testnet:destroy()
  for _, node in ipairs(self.nodes) do node:destroy() end
  self.nodes = {}
  return true
end
Testnet.close = Testnet.destroy

return M
