-- ludx keygen [-o FILE]
local common = require "ludx.cmd.common"

local M = {}

local usage = [[
usage: ludx keygen [-o FILE]

Makes an Ed25519 key pair. Without -o it prints two lines, "public HEX" and
"secret HEX" (the 32-byte seed the pair derives from). With -o FILE it
writes the seed to FILE, readable by you only, and prints the public key
(64 hex characters) on a line of its own. `ludx share --key FILE`,
`ludx dht announce --key FILE` and ludx.dht.keypair_from_file(FILE) read it.

options:
  -o, --output FILE  write the secret seed to FILE (refuses to overwrite)
  -h, --help         this help
]]

function M.main(args)
  local opts, pos = common.parse(args, { help = "flag", output = "value" }, { h = "help", o = "output" })
  if not opts then return common.fail("keygen", pos, usage) end
  if opts.help then
    io.stdout:write(usage)
    return 0
  end
  if #pos > 0 then return common.fail("keygen", "no arguments expected", usage) end
  local crypto = require "ludx.crypto"
  local seed = crypto.randombytes(32)
  local kp = crypto.keypair(seed)
  if opts.output then
    local f = io.open(opts.output, "rb")
    if f then
      f:close()
      return common.fail("keygen", opts.output .. " exists; not overwriting it")
    end
    -- created 0600 with O_EXCL (ludx.keyfile): a file made since is not replaced
    local ok, msg = common.write_key(opts.output, seed)
    if not ok then return common.fail("keygen", msg) end
    io.stdout:write(crypto.hex(kp.public_key), "\n")
    return 0
  end
  io.stdout:write("public ", crypto.hex(kp.public_key), "\n", "secret ", crypto.hex(seed), "\n")
  return 0
end

return M
