-- A file share with ludx.share: serve a directory by key, fetch it by key,
-- every chunk and file checked against BLAKE2b hashes on the way.
-- (`ludx share` and `ludx fetch` are the same thing as commands.)
--
--   ludx examples/share.lua [PATH]     shares PATH (default: this examples
--                                      folder) and fetches it back into a
--                                      temporary folder, on a local DHT
local dht = require "ludx.dht"
local share = require "ludx.share"
local progress = require "ludx.progress"

local function main()
  local path = arg[1] or (arg[0]:match("^(.*)/[^/]*$") or ".")
  local testnet = assert(dht.testnet(3))
  local alice, bob = assert(testnet:create_node()), assert(testnet:create_node())

  -- alice hashes the files and announces the share
  local s = assert(share.serve(alice, path))
  print(string.format("sharing %s (%d files, %s) as %s", s.manifest.name, #s.manifest.files,
    progress.bytes(s.manifest.total), share.hex(s.key)))

  -- bob knows only the key
  local dest = os.tmpname()
  os.remove(dest)
  local r = assert(share.fetch(bob, s.key, dest, {
    progress = progress.new({ label = "fetch" }),
    on_file = function(name) print("  verified " .. name) end,
  }))
  print(string.format("fetched %d files (%s) into %s", r.files, progress.bytes(r.bytes), r.target))

  os.execute("rm -rf '" .. dest .. "'")
  s:close({ fast = true })
  testnet:destroy()
end

main() -- `ludx` runs this file as a task on its loop
