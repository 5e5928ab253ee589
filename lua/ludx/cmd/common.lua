-- Shared by the peer commands (share, fetch, keygen, dht): option parsing,
-- key files, DHT nodes from --bootstrap, waiting for Ctrl-C.
local ludx = require "ludx"
local crypto = require "ludx.crypto"

local M = {}

--- Parses args against spec: { name = "flag" | "value", ... } with
-- aliases as spec.alias = { h = "help" }. Returns opts (names to true or
-- the value), positionals; or nil, message.
function M.parse(args, spec, alias)
  local opts, pos = {}, {}
  local i = 1
  while args[i] do
    local a = args[i]
    if a == "--" then
      for j = i + 1, #args do pos[#pos + 1] = args[j] end
      break
    end
    local name, value = a:match("^%-%-([%w-]+)=(.*)$")
    if not name then name = a:match("^%-%-([%w-]+)$") or a:match("^%-(%a)$") end
    if name then
      name = (alias and alias[name]) or name
      local kind = spec[name]
      if not kind then return nil, "unknown option '" .. a .. "'" end
      if kind == "flag" then
        if value then return nil, "option '--" .. name .. "' takes no value" end
        opts[name] = true
      else
        if not value then
          i = i + 1
          value = args[i]
          if value == nil then return nil, "option '" .. a .. "' needs a value" end
        end
        opts[name] = value
      end
    else
      pos[#pos + 1] = a
    end
    i = i + 1
  end
  return opts, pos
end

--- Prints "ludx <cmd>: msg" on stderr; returns the exit status (1).
function M.fail(cmd, msg, usage)
  io.stderr:write("ludx ", cmd, ": ", tostring(msg), "\n")
  if usage then io.stderr:write(usage) end
  return 1
end

--- "host:port,host:port" -> list; nil, msg on a bad entry.
function M.bootstrap(s)
  if s == nil then return nil end
  local list = {}
  for entry in s:gmatch("[^,%s]+") do
    local host, port = entry:match("^%[?([^%]]+)%]?:(%d+)$")
    port = tonumber(port)
    if not host or not port or port < 1 or port > 65535 then return nil, "bad bootstrap address '" .. entry .. "' (host:port expected)" end
    list[#list + 1] = host .. ":" .. port
  end
  if #list == 0 then return nil, "empty --bootstrap" end
  return list
end

local function loopback(list)
  for _, a in ipairs(list) do
    if not (a:match("^127%.") or a:match("^localhost:") or a:match("^::1:")) then return false end
  end
  return true
end

--- A DHT node for a command: opts.bootstrap (the --bootstrap value, or nil
-- for the public network), opts.port. On a loopback network (every
-- bootstrap node on 127.x) the node binds 127.0.0.1 and takes itself as
-- reachable, as the nodes of `ludx dht testnet` do.
function M.node(opts, keypair)
  local dht = require "ludx.dht"
  local list, msg = M.bootstrap(opts.bootstrap)
  if opts.bootstrap and not list then return nil, msg end
  local o = { bootstrap = list, port = tonumber(opts.port) or 0, keypair = keypair }
  if list and loopback(list) then
    o.host, o.ephemeral, o.firewalled = "127.0.0.1", true, false
  end
  local node, err, code = dht.new(o)
  if not node then return nil, err, code end
  local ok
  ok, err, code = node:ready(tonumber(opts.timeout) or 30000)
  if not ok then
    node:destroy()
    return nil, "the DHT did not answer: " .. tostring(err), code
  end
  return node
end

--- A key pair from a key file (ludx.dht.keypair_from_file), or a new
-- random one when path is nil.
function M.keypair(path)
  if not path then return crypto.keypair() end
  return require("ludx.keyfile").read(path)
end

--- Writes a seed as a key file, mode 0600 from its creation, never over
-- an existing file (ludx.dht.keypair_to_file).
function M.write_key(path, seed)
  local kp, msg = require("ludx.keyfile").write(path, seed)
  if not kp then return nil, path .. ": " .. msg end
  return true
end

--- A 32-byte topic from 64 hex characters, or the BLAKE2b-256 of any other
-- text (as `ludx dht announce NAME` and `lookup NAME` agree on it).
function M.topic(s)
  if #s == 64 and s:match("^%x+$") then return crypto.unhex(s) end
  return require("ludx.dht").hash(s)
end

local signal_hooked = false

--- Waits until SIGINT or SIGTERM; returns the signal's name.
function M.wait_signal()
  local core = ludx.core
  if not signal_hooked then
    signal_hooked = true
    ludx.on_event(core.EV.SIGNAL, function(obj, signum)
      if obj and obj.on_signal then obj.on_signal(signum) end
    end)
  end
  local w = ludx.waiters()
  local obj = {}
  obj.on_signal = function(signum) w:wake_all(signum) end
  local ref = ludx.ref(obj)
  local watchers = { core.signal("SIGINT", ref), core.signal("SIGTERM", ref) }
  local signum = w:wait("a signal (Ctrl-C)")
  for _, h in ipairs(watchers) do h:stop() end
  ludx.unref(ref)
  return signum == 15 and "SIGTERM" or "SIGINT"
end

--- Runs main(…) as the main task; returns its exit status (a raised error
-- or nil, msg is printed and gives 1).
function M.run(cmd, main, ...)
  local ok, status, tb = ludx.run(function(...)
    local st, msg = main(...)
    if st == nil and msg then return M.fail(cmd, msg) end
    return st or 0
  end, ...)
  if ok == nil then
    io.stderr:write("ludx ", cmd, ": ", tostring(status), "\n")
    if tb then io.stderr:write(tb, "\n") end
    return 1
  end
  return ok
end

return M
