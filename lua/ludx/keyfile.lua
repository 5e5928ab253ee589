-- ludx.keyfile: Ed25519 key pairs in files, as `ludx keygen -o FILE` writes
-- them and ludx.dht.keypair_from_file / `ludx share --key FILE` read them.
--
-- The file holds the 32-byte secret seed as 64 hex characters and a
-- newline; the pair derives from it. A file is created with mode 0600 from
-- the start (open with O_CREAT|O_EXCL, never chmod afterwards) and is never
-- overwritten. Reading also takes the two lines `ludx keygen` prints
-- ("public HEX" / "secret HEX"), checking that they agree.
local ffi = require "ffi"
local core = require "ludx.core"
local crypto = require "ludx.crypto"
local check = require "ludx.check"

pcall(ffi.cdef, [[
int open(const char *path, int flags, ...);
long write(int fd, const void *buf, size_t count);
int close(int fd);
int unlink(const char *path);
]])

local M = {}

-- open(2) flags: Linux (every architecture ludx builds on) and BSD/macOS.
local O_WRONLY, O_CREAT, O_EXCL
if ffi.os == "OSX" or ffi.os == "BSD" then
  O_WRONLY, O_CREAT, O_EXCL = 0x1, 0x200, 0x800
else
  O_WRONLY, O_CREAT, O_EXCL = 0x1, 0x40, 0x80
end
local MODE = tonumber("600", 8)

-- The largest file worth reading: the two-line form is ~140 bytes.
local MAX_FILE = 4096

local function errno_error()
  return nil, core.strerror(-ffi.errno())
end

--- The key pair {public_key, secret_key} in the file at path, or nil,
-- msg, code (ENOENT and the like from the file system; EINVAL when it is
-- not a key file).
function M.read(path, fname)
  check.string(path, "path", fname or "keypair_from_file")
  local f, msg, errno = io.open(path, "rb")
  if not f then return nil, msg, select(2, core.strerror(-(errno or 5))) end
  local s = f:read(MAX_FILE + 1) or ""
  f:close()
  local bad = path .. ": not a key file (64 hex characters of secret seed expected)"
  if #s > MAX_FILE then return nil, bad, "EINVAL" end
  local seed = s:match("^%s*(%x+)%s*$")
  local public = nil
  if not seed then
    public, seed = s:match("^%s*public%s+(%x+)%s*\n%s*secret%s+(%x+)%s*$")
  end
  if not seed or #seed ~= 64 or (public and #public ~= 64) then return nil, bad, "EINVAL" end
  local kp = crypto.keypair(crypto.unhex(seed))
  if public and crypto.unhex(public) ~= kp.public_key then
    return nil, path .. ": the public key does not belong to the secret seed", "EINVAL"
  end
  return kp
end

--- Writes a key file for keypair (or a 32-byte seed), mode 0600, refusing
-- to replace an existing file (nil, msg, "EEXIST"). Returns the key pair.
function M.write(path, keypair, fname)
  fname = fname or "keypair_to_file"
  check.string(path, "path", fname)
  local seed
  if type(keypair) == "string" then
    seed = check.bytes(keypair, 32, "keypair", fname)
  elseif type(keypair) == "table" and type(keypair.secret_key) == "string" and #keypair.secret_key == 64 then
    -- libsodium's secret key is seed .. public key
    seed = keypair.secret_key:sub(1, 32)
  else
    check.fail("keypair", fname, "key pair or 32-byte seed", check.what(keypair))
  end
  local kp = crypto.keypair(seed)
  local fd = ffi.C.open(path, bit.bor(O_WRONLY, O_CREAT, O_EXCL), ffi.new("int", MODE))
  if fd < 0 then return errno_error() end
  local text = crypto.hex(seed) .. "\n"
  local n = ffi.C.write(fd, text, #text)
  local failed = n ~= #text and { errno_error() }
  if ffi.C.close(fd) ~= 0 and not failed then failed = { errno_error() } end
  if failed then
    ffi.C.unlink(path)
    return unpack(failed, 1, 3)
  end
  return kp
end

return M
