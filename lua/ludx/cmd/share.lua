-- ludx share [options] PATH
local common = require "ludx.cmd.common"

local M = {}

local usage = [[
usage: ludx share [options] PATH

Shares a file or a directory: hashes it (BLAKE2b), announces it on the DHT
and prints its key, 64 hex characters on a line of their own. Give the key
to `ludx fetch`. Serves until Ctrl-C or SIGTERM, then unannounces. Only
regular files are shared: symbolic links are not followed (they are listed
as left out).

options:
  --bootstrap H:P,...  DHT bootstrap nodes (default: the public HyperDHT
                       network; `ludx dht testnet` prints a local one)
  --key FILE           serve under the key pair in FILE (`ludx keygen -o`),
                       so the key stays the same across runs
  --rate RATE          limit each connection to RATE bytes/s (k, M, G suffixes)
  --peer-rate RATE     limit all connections of one peer together
  --chunk-size BYTES   chunk size of the manifest (default 1M)
  --max-connections N  clients served at once (default 64)
  --max-per-peer N     connections at once from one peer key (default 4)
  --max-per-address N  connections at once from one IP address (default 16)
  --write-limit BYTES  bytes queued for one client at most (default 2M)
  --write-timeout MS   drop a client that takes no bytes for MS (default 30000)
  --idle-timeout MS    drop a client that asks nothing for MS (default 120000)
  --port N             UDP port of the DHT node (default: any)
  --quiet              print only the key
  -h, --help           this help
]]

--- "10M" -> 10000000; nil on junk.
function M.rate(s)
  if s == nil then return nil end
  local n, suffix = tostring(s):match("^(%d+%.?%d*)([kKmMgG]?)i?[bB]?$")
  n = tonumber(n)
  if not n then return nil end
  local mul = ({ [""] = 1, k = 1e3, K = 1e3, m = 1e6, M = 1e6, g = 1e9, G = 1e9 })[suffix]
  return math.floor(n * mul)
end

local function size_arg(s)
  local n, suffix = tostring(s):match("^(%d+)([kKmM]?)$")
  n = tonumber(n)
  if not n then return nil end
  return n * (({ [""] = 1, k = 1024, K = 1024, m = 1048576, M = 1048576 })[suffix])
end

local function short(key)
  return require("ludx.crypto").hex(key):sub(1, 12)
end

local function main(opts, path)
  local share = require "ludx.share"
  local progress = require "ludx.progress"
  local kp, msg = common.keypair(opts.key)
  if not kp then return nil, msg end
  local log = opts.quiet and function() end or function(...) io.stderr:write(string.format(...), "\n") end

  -- hashing first: a share is announced only once it can answer
  local p = (not opts.quiet) and progress.new({ label = "hashing", out = io.stderr }) or nil
  -- the total comes from the manifest's own walk (from the root's folder
  -- handle): a second walk by path could be led outside the folder
  local m, err = share.manifest(path, {
    chunk_size = opts.chunk_size,
    on_total = p and function(total) p:start(total, 0) end,
    on_bytes = p and function(n) p:update(n) end,
  })
  if not m then return nil, err end
  if p then p:finish() end
  for _, sk in ipairs(m.skipped) do log("left out %s: %s", sk.path, sk.why) end

  local node
  node, err = common.node(opts, kp)
  if not node then return nil, err end

  local policy = (opts.rate or opts.peer_rate) and require "ludx.policy"
  local peers = opts.peer_rate and policy.per_peer({ rate = opts.peer_rate }) or nil
  -- SIGINT/SIGTERM are waited for from before the key is printed: whoever
  -- reads the key may signal at once
  local ludx = require "ludx"
  local stop = ludx.spawn("stop", ludx.signal, { "SIGINT", "SIGTERM" })
  local s
  s, err = share.serve(node, m, {
    keypair = kp,
    max_connections = opts.max_connections, max_per_peer = opts.max_per_peer,
    max_per_address = opts.max_per_address, write_limit = opts.write_limit,
    write_timeout = opts.write_timeout, idle_timeout = opts.idle_timeout,
    on_connection = function(conn)
      if opts.rate then policy.limit(conn, { rate = opts.rate }) end
      if peers then peers:add(conn) end
    end,
    on_event = function(ev, info)
      if ev == "connect" then
        log("peer %s connected", short(info.peer))
      elseif ev == "refuse" then
        log("peer %s refused: %s", short(info.peer), tostring(info.error))
      elseif ev == "close" then
        log("peer %s: %s sent%s", short(info.peer), progress.bytes(info.bytes), info.error and (" (" .. info.error .. ")") or "")
      end
    end,
  })
  if not s then
    stop:cancel()
    node:destroy()
    return nil, err
  end
  log("sharing %s: %d file%s, %s", m.name, #m.files, #m.files == 1 and "" or "s", progress.bytes(m.total))
  io.stdout:write(share.hex(s.key), "\n")
  io.stdout:flush()
  local sig = stop:join()
  log("%s: stopping", sig)
  -- unannounce (up to 10 s; a second Ctrl-C ends it at once), then close
  s:close()
  node:destroy()
  return 0
end

function M.main(args)
  local opts, pos = common.parse(args, {
    help = "flag", bootstrap = "value", key = "value", rate = "value", ["peer-rate"] = "value",
    ["chunk-size"] = "value", port = "value", quiet = "flag", timeout = "value",
    ["max-connections"] = "value", ["max-per-peer"] = "value", ["max-per-address"] = "value",
    ["write-limit"] = "value", ["write-timeout"] = "value", ["idle-timeout"] = "value",
  }, { h = "help" })
  if not opts then return common.fail("share", pos, usage) end
  if opts.help then
    io.stdout:write(usage)
    return 0
  end
  if #pos ~= 1 then return common.fail("share", "one PATH expected", usage) end
  if opts.rate then
    opts.rate = M.rate(opts.rate)
    if not opts.rate or opts.rate < 1 then return common.fail("share", "bad --rate") end
  end
  if opts["peer-rate"] then
    opts.peer_rate = M.rate(opts["peer-rate"])
    if not opts.peer_rate or opts.peer_rate < 1 then return common.fail("share", "bad --peer-rate") end
  end
  if opts["chunk-size"] then
    opts.chunk_size = size_arg(opts["chunk-size"])
    local manifest = require "ludx.share.manifest"
    if not opts.chunk_size or opts.chunk_size < manifest.MIN_CHUNK or opts.chunk_size > manifest.MAX_CHUNK then
      return common.fail("share", "--chunk-size must be 16k..16M")
    end
  end
  for _, k in ipairs({ "max-connections", "max-per-peer", "max-per-address", "write-timeout", "idle-timeout", "write-limit" }) do
    if opts[k] then
      local v = k == "write-limit" and size_arg(opts[k]) or tonumber(opts[k])
      if not v or v < 1 or v % 1 ~= 0 then return common.fail("share", "bad --" .. k) end
      opts[k:gsub("-", "_")] = v
    end
  end
  local st = require("ludx.fs").stat(pos[1])
  if not st then return common.fail("share", pos[1] .. ": no such file or directory") end
  return common.run("share", main, opts, pos[1])
end

return M
