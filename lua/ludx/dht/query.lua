-- The iterative Kademlia query of dht-rpc (C.6): visit ever closer nodes
-- with bounded concurrency, keep the k closest replies that carried an id,
-- then optionally commit to them (e.g. ANNOUNCE with their tokens).
-- Section marks (C.6, D.8, ...) are those of docs/protocol/hyperswarm.md.
--
--   local q = node:query({ target =, command =, value = }, opts)
--   q.on_data = function(data) ... end   -- each mapped reply without error
--   q.on_end = function(err) ... end     -- once; err nil on success
--   q:start()
--
-- opts: concurrency, nodes / closest_nodes (seed addresses), closest_replies,
-- map(reply) -> data|nil, commit(reply, node, query, done(err)), retries,
-- session, only_closest_nodes, force.
local io_mod = require "ludx.dht.io"
local kt = require "ludx.dht.table"
local msgs = require "ludx.dht.messages"
local compact = require "ludx.compact"
local errors = require "ludx.dht.errors"

local M = {}

local DONE, DOWN = {}, {}
local function noop() end
local function identity(m) return m end
local node_id = io_mod.node_id
local compare = kt.compare

local Query = {}
Query.__index = Query

function M.new(dht, target, internal, command, value, opts)
  opts = opts or {}
  local retries = opts.retries
  if retries == nil then retries = (internal and command == msgs.DOWN_HINT) and 3 or 5 end
  local self = setmetatable({
    dht = dht,
    k = dht.table.k,
    target = target,
    internal = internal,
    command = command,
    value = value,
    errors = 0,
    successes = 0,
    hops = 0, -- the longest chain of referrals that led to a reply
    _hops = {},
    concurrency = opts.concurrency or dht.concurrency,
    inflight = 0,
    map = opts.map or identity,
    retries = retries,
    force = opts.force == true,
    closest_replies = {},
    on_data = noop,
    on_end = noop,
    _slow = 0,
    _slowdown = false,
    _seen = {},
    _pending = {},
    _from_table = false,
    _commit = opts.commit,
    _committing = false,
    _session = opts.session or dht:session(),
    _auto_session = not opts.session,
    _only_closest = false,
    done = false,
  }, Query)
  if opts.commit == true then self._commit = M.auto_commit end
  self._onvisit = function(m, req) self:_on_visit(m, req) end
  self._onerror = function(err, req) self:_on_error(err, req) end
  self._oncycle = function(req) self:_on_cycle(req) end

  local nodes = opts.nodes or opts.closest_nodes
  local replies = opts.replies or opts.closest_replies
  if nodes then
    for i = #nodes, 1, -1 do
      local n = nodes[i]
      self:_add_pending({ id = n.id or node_id(n.host, n.port), host = n.host, port = n.port }, nil)
    end
  elseif replies then
    for i = #replies, 1, -1 do self:_add_pending(replies[i].from, nil) end
  end
  if opts.only_closest_nodes then self._only_closest = true end
  return self
end

--- The addresses of the closest replies.
function Query:closest_nodes()
  local out = {}
  for i, r in ipairs(self.closest_replies) do out[i] = r.from end
  return out
end

function Query:start()
  self.dht.stats.queries_active = self.dht.stats.queries_active + 1
  self.dht.stats.queries = self.dht.stats.queries + 1
  self:_add_from_table()
  if #self._pending < self.k then
    for _, n in ipairs(self.dht:bootstrap_list()) do self:_add_pending({ id = n.id, host = n.host, port = n.port }, nil) end
  end
  self:_read_more()
  return self
end

function Query:_add_from_table()
  if #self._pending >= self.k then return end
  self._from_table = true
  local closest = self.dht.table:closest(self.target, self.k - #self._pending)
  for _, n in ipairs(closest) do self:_add_pending({ id = n.id, host = n.host, port = n.port }, nil) end
end

function Query:_is_closer(id)
  local cr = self.closest_replies
  return #cr < self.k or compare(self.target, id, cr[#cr].from.id) < 0
end

function Query:_add_pending(node, ref)
  if self._only_closest then return false end
  local addr = node.host .. ":" .. node.port
  local refs = self._seen[addr]
  local closer = self:_is_closer(node.id)
  if refs == DONE then return closer end
  if refs == DOWN then
    if ref then self:_down_hint(ref, node) end
    return closer
  end
  if refs then
    if ref then refs[#refs + 1] = ref end
    return closer
  end
  if not closer then return false end
  self._seen[addr] = ref and { ref } or {}
  self._hops[addr] = (ref and self._hops[ref.host .. ":" .. ref.port] or 0) + 1
  self._pending[#self._pending + 1] = node
  return true
end

function Query:_read_more()
  if self.done or self._committing then return end
  local concurrency = (self._slowdown and 3 or self.concurrency) + self._slow
  local pending = self._pending
  while self.inflight < concurrency and #pending > 0 do
    local nxt = table.remove(pending)
    if not (nxt.id and not self:_is_closer(nxt.id)) then self:_visit(nxt) end
    if self.done then return end
  end
  -- reusing no table nodes: go slow until the first replies are in
  if not self._from_table and self.successes == 0 and self.errors == 0 then self._slowdown = true end
  if #pending > 0 then return end
  if self.inflight == 0 or (self._slow == self.inflight and #self.closest_replies >= self.k) then
    -- mostly failed on cached nodes only: try again from the table
    if not self._from_table and self.successes < self.k / 4 then
      self:_add_from_table()
      self:_read_more()
      return
    end
    self:_flush()
  end
end

function Query:_flush()
  if self._committing then return end
  self._committing = true
  if not self._commit then
    self:_finish(nil)
    return
  end
  local n = #self.closest_replies
  if n == 0 then
    self:_finish(errors.TOO_FEW_NODES())
    return
  end
  local pending, success, last_err = n, 0, nil
  local function settle(err)
    if err then last_err = err else success = success + 1 end
    pending = pending - 1
    if pending == 0 then
      if success > 0 then self:_finish(nil) else self:_finish(last_err or errors.TOO_FEW_NODES()) end
    end
  end
  local list = {}
  for i, m in ipairs(self.closest_replies) do list[i] = m end
  for _, m in ipairs(list) do
    local called = false
    self._commit(m, self.dht, self, function(err)
      if called then return end
      called = true
      settle(err)
    end)
  end
end

function Query:_finish(err)
  if self.done then return end
  self.done = true
  self.error = err
  self.dht.stats.queries_active = self.dht.stats.queries_active - 1
  if self._auto_session then self._session:destroy() end
  self.on_end(err)
end

--- Stops the query; on_end(err or REQUEST_DESTROYED) fires once.
function Query:destroy(err)
  if self.done then return end
  self:_finish(err or errors.REQUEST_DESTROYED())
end

function Query:_dec(req)
  if req.oncycle == noop then
    self._slow = self._slow - 1
  else
    req.oncycle = noop
  end
  self.inflight = self.inflight - 1
end

function Query:_on_visit(m, req)
  self:_dec(req)
  self._seen[req.to.host .. ":" .. req.to.port] = DONE
  if self.done or self._committing then return end
  if m.error == 0 then
    self.successes = self.successes + 1
    local h = self._hops[req.to.host .. ":" .. req.to.port]
    if h and h > self.hops then self.hops = h end
  else
    self.errors = self.errors + 1
  end
  if m.error == 0 and m.from.id and self:_is_closer(m.from.id) then self:_push_closest(m) end
  if m.closer_nodes then
    local filter = self.dht.filter_node
    local own = self.dht.table.id
    for _, n in ipairs(m.closer_nodes) do
      n.id = node_id(n.host, n.port)
      if (not filter or filter(n)) and n.id ~= own then
        if not self:_add_pending(n, m.from) then break end
      end
    end
  end
  if not self._from_table and self.successes + self.errors >= self.concurrency then self._slowdown = false end
  if m.error == 0 then
    local data = self.map(m)
    if data then self.on_data(data) end
  end
  self:_read_more()
end

function Query:_on_error(err, req)
  local addr = req.to.host .. ":" .. req.to.port
  local refs = self._seen[addr]
  if err and err.code == "REQUEST_TIMEOUT" then
    self._seen[addr] = DOWN
    if type(refs) == "table" and refs ~= DONE and refs ~= DOWN then
      for _, n in ipairs(refs) do self:_down_hint(n, req.to) end
    end
  end
  self:_dec(req)
  self.errors = self.errors + 1
  self:_read_more()
end

function Query:_on_cycle(req)
  req.oncycle = noop
  self._slow = self._slow + 1
  self:_read_more()
end

function Query:_down_hint(node, down)
  local dht = self.dht
  if dht.down_hints_limit ~= -1 and dht.down_hints_sent >= dht.down_hints_limit then return end
  dht.down_hints_sent = dht.down_hints_sent + 1
  local w = compact.writer()
  w:ipv4(down.host, down.port)
  dht:_request(node, false, true, msgs.DOWN_HINT, nil, w:finish(), self._session, noop, noop)
end

function Query:_push_closest(m)
  local cr = self.closest_replies
  cr[#cr + 1] = m
  for i = #cr - 1, 1, -1 do
    local prev = cr[i]
    local c = compare(self.target, prev.from.id, m.from.id)
    if c < 0 then break end
    if c == 0 then
      table.remove(cr, i + 1)
      break
    end
    cr[i + 1] = prev
    cr[i] = m
  end
  if #cr > self.k then cr[#cr] = nil end
end

function Query:_visit(to)
  self.inflight = self.inflight + 1
  local req = self.dht:_request(to, self.force, self.internal, self.command, self.target, self.value, self._session, self._onvisit, self._onerror)
  if not req then
    self:destroy(errors.NODE_DESTROYED())
    return
  end
  req.retries = self.force and 0 or self.retries
  req.oncycle = self._oncycle
end

--- The default commit: re-send the query's command with the reply token.
function M.auto_commit(reply, dht, query, done)
  if not reply.token then return done(errors.new("NO_TOKEN", "No token received for closest node")) end
  dht:request({ token = reply.token, target = query.target, command = query.command, value = query.value }, reply.from, nil,
    function() done(nil) end, function(err) done(err) end)
end

return M
