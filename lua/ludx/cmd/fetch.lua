-- ludx fetch [options] KEY [DEST]
local common = require "ludx.cmd.common"

local M = {}

local usage = [[
usage: ludx fetch [options] KEY [DEST]

Downloads what `ludx share` serves under KEY (64 hex characters). A
directory lands in DEST (default ./NAME); a file lands at DEST, or in DEST
when it is a directory (default ./NAME). Every chunk and every file is
checked against the share's BLAKE2b hashes. An interrupted fetch keeps what
it verified (in .ludx-partial/) and running it again continues from there.
Files land only below DEST: no symbolic link there is followed, and a file
that is there already and differs is an error unless --force.

options:
  --bootstrap H:P,...  DHT bootstrap nodes (default: the public HyperDHT network)
  --order ORDER        which files first: sequential (default), smallest,
                       largest, interleave
  --window N           chunks asked for ahead (default 8, at most 64)
  --timeout MS         give up connecting after MS (default 30000)
  --force              replace files in DEST that differ from the share
  --max-manifest BYTES refuse a larger manifest (default 32M)
  --max-files N        refuse a manifest of more files (default 262144)
  --key FILE           connect as this key file's key pair (ludx keygen -o FILE);
                       default a new random key each run. A stable key lets
                       the server know this peer again (and start a second
                       transfer from the path capacity it measured)
  --port N             UDP port of the DHT node (default: any)
  --quiet              no progress, only errors
  --stats              print the connection's stats at the end
  -h, --help           this help

Progress goes to stdout: a bar on a terminal, plain lines otherwise.
]]

local function main(opts, key, dest)
  local share = require "ludx.share"
  local progress = require "ludx.progress"
  local kp, err = common.keypair(opts.key) -- a new random one without --key
  if not kp then return nil, err end
  local node
  node, err = common.node(opts, kp)
  if not node then return nil, err end
  local p = (not opts.quiet) and progress.new({ label = "fetch" }) or nil
  local say = opts.quiet and function() end or function(...) io.stdout:write(string.format(...), "\n") end
  local r, msg, code = share.fetch(node, key, dest, {
    order = opts.order,
    window = tonumber(opts.window),
    timeout = tonumber(opts.timeout) or 30000,
    force = opts.force, max_manifest = opts.max_manifest, max_files = opts.max_files,
    progress = p,
    on_manifest = function(m, layout)
      local target = m.kind == "file" and layout.files[1].final or layout.root
      say("%s: %d file%s, %s -> %s", m.name, #m.files, #m.files == 1 and "" or "s", progress.bytes(m.total), target)
      if p then io.stdout:write("checking what is on disk...\n") end
    end,
  })
  node:destroy()
  if not r then return nil, msg .. (code and (" (" .. code .. ")") or "") end
  say("verified %d file%s (BLAKE2b), %s received%s, %s", r.files, r.files == 1 and "" or "s",
    progress.bytes(r.received), r.skipped > 0 and (", " .. r.skipped .. " already there") or "", r.target)
  if opts.stats and r.stats then
    local keys = {}
    for k, v in pairs(r.stats) do
      if type(v) ~= "table" then keys[#keys + 1] = k end
    end
    table.sort(keys)
    for _, k in ipairs(keys) do io.stdout:write(string.format("  %-16s %s\n", k, tostring(r.stats[k]))) end
  end
  return 0
end

function M.main(args)
  local opts, pos = common.parse(args, {
    help = "flag", bootstrap = "value", order = "value", window = "value", timeout = "value", port = "value", quiet = "flag", stats = "flag",
    force = "flag", ["max-manifest"] = "value", ["max-files"] = "value", key = "value",
  }, { h = "help" })
  if not opts then return common.fail("fetch", pos, usage) end
  if opts.help then
    io.stdout:write(usage)
    return 0
  end
  if #pos < 1 or #pos > 2 then return common.fail("fetch", "KEY [DEST] expected", usage) end
  local key, why = require("ludx.share").parse_key(pos[1])
  if not key then return common.fail("fetch", "bad KEY: " .. why) end
  if opts.order then
    local ok = false
    for _, o in ipairs(require("ludx.policy.schedule").ORDERS) do ok = ok or o == opts.order end
    if not ok then return common.fail("fetch", "bad --order '" .. opts.order .. "'") end
  end
  if opts["max-manifest"] then
    local n, suffix = tostring(opts["max-manifest"]):match("^(%d+)([kKmM]?)$")
    opts.max_manifest = n and tonumber(n) * (({ [""] = 1, k = 1024, K = 1024, m = 1048576, M = 1048576 })[suffix])
    if not opts.max_manifest or opts.max_manifest < 1 then return common.fail("fetch", "bad --max-manifest") end
  end
  if opts["max-files"] then
    opts.max_files = tonumber(opts["max-files"])
    if not opts.max_files or opts.max_files < 1 then return common.fail("fetch", "bad --max-files") end
  end
  if opts.window and not (tonumber(opts.window) and tonumber(opts.window) >= 1) then return common.fail("fetch", "bad --window") end
  return common.run("fetch", main, opts, key, pos[2])
end

return M
