-- Every cryptographic primitive the DHT uses, in one place.
--
--   hash(msg [, key])         BLAKE2b-256 (crypto_generichash), optional key
--   hash_batch(list [, key])  BLAKE2b-256 of the concatenation
--   ns(name, i)               hypercore-crypto namespace H32(H32(name) || i)
--   random(n)                 n random bytes
--   keypair([seed])           Ed25519 {public_key =, secret_key =}
--   sign(msg, secret_key)     64-byte detached signature
--   verify(sig, msg, public_key) -> boolean
--   secretbox(msg, nonce, key) / secretbox_open(cipher, nonce, key)
--
-- TEMPORARY: until the runtime exposes these functions to Lua, they are
-- reached through the LuaJIT FFI to the system libsodium. Only this file
-- knows that; swapping the backend changes nothing else.
local ffi = require "ffi"

local M = {}

pcall(ffi.cdef, [[
int sodium_init(void);
int crypto_generichash(unsigned char *out, size_t outlen, const unsigned char *in,
                       unsigned long long inlen, const unsigned char *key, size_t keylen);
void randombytes_buf(void *buf, size_t size);
int crypto_sign_seed_keypair(unsigned char *pk, unsigned char *sk, const unsigned char *seed);
int crypto_sign_keypair(unsigned char *pk, unsigned char *sk);
int crypto_sign_detached(unsigned char *sig, unsigned long long *siglen_p, const unsigned char *m,
                         unsigned long long mlen, const unsigned char *sk);
int crypto_sign_verify_detached(const unsigned char *sig, const unsigned char *m,
                                unsigned long long mlen, const unsigned char *pk);
int crypto_secretbox_easy(unsigned char *c, const unsigned char *m, unsigned long long mlen,
                          const unsigned char *n, const unsigned char *k);
int crypto_secretbox_open_easy(unsigned char *m, const unsigned char *c, unsigned long long clen,
                               const unsigned char *n, const unsigned char *k);
]])

local sodium = ffi.load("sodium")
assert(sodium.sodium_init() >= 0, "libsodium failed to initialise")

local buf32 = ffi.new("unsigned char[32]")
local buf64 = ffi.new("unsigned char[64]")
local pkbuf = ffi.new("unsigned char[32]")
local skbuf = ffi.new("unsigned char[64]")

local function check_str(v, name, fname, len)
  if type(v) ~= "string" or (len and #v ~= len) then
    error(string.format("bad argument '%s' to '%s' (%s expected, got %s)", name, fname,
      len and (len .. "-byte string") or "string", type(v) == "string" and (#v .. " bytes") or type(v)), 3)
  end
end

function M.hash(msg, key)
  check_str(msg, "msg", "hash")
  local klen = 0
  if key ~= nil then
    check_str(key, "key", "hash")
    klen = #key
  end
  sodium.crypto_generichash(buf32, 32, msg, #msg, key, klen)
  return ffi.string(buf32, 32)
end

function M.hash64(msg)
  check_str(msg, "msg", "hash64")
  sodium.crypto_generichash(buf64, 64, msg, #msg, nil, 0)
  return ffi.string(buf64, 64)
end

function M.hash_batch(list, key)
  return M.hash(table.concat(list), key)
end

function M.ns(name, i)
  return M.hash(M.hash(name) .. string.char(i))
end

function M.random(n)
  local b = ffi.new("unsigned char[?]", n)
  sodium.randombytes_buf(b, n)
  return ffi.string(b, n)
end

function M.keypair(seed)
  if seed ~= nil then
    check_str(seed, "seed", "keypair", 32)
    sodium.crypto_sign_seed_keypair(pkbuf, skbuf, seed)
  else
    sodium.crypto_sign_keypair(pkbuf, skbuf)
  end
  return { public_key = ffi.string(pkbuf, 32), secret_key = ffi.string(skbuf, 64) }
end

function M.sign(msg, secret_key)
  check_str(msg, "msg", "sign")
  check_str(secret_key, "secret_key", "sign", 64)
  sodium.crypto_sign_detached(buf64, nil, msg, #msg, secret_key)
  return ffi.string(buf64, 64)
end

function M.verify(sig, msg, public_key)
  if type(sig) ~= "string" or #sig ~= 64 or type(msg) ~= "string" or type(public_key) ~= "string" or #public_key ~= 32 then
    return false
  end
  return sodium.crypto_sign_verify_detached(sig, msg, #msg, public_key) == 0
end

--- crypto_secretbox_easy: 16-byte tag then the ciphertext.
function M.secretbox(msg, nonce, key)
  check_str(msg, "msg", "secretbox")
  check_str(nonce, "nonce", "secretbox", 24)
  check_str(key, "key", "secretbox", 32)
  local out = ffi.new("unsigned char[?]", #msg + 16)
  sodium.crypto_secretbox_easy(out, msg, #msg, nonce, key)
  return ffi.string(out, #msg + 16)
end

--- The plaintext, or nil when the box does not open.
function M.secretbox_open(cipher, nonce, key)
  if type(cipher) ~= "string" or #cipher < 16 then return nil end
  check_str(nonce, "nonce", "secretbox_open", 24)
  check_str(key, "key", "secretbox_open", 32)
  local out = ffi.new("unsigned char[?]", #cipher - 16 + 1)
  if sodium.crypto_secretbox_open_easy(out, cipher, #cipher, nonce, key) ~= 0 then return nil end
  return ffi.string(out, #cipher - 16)
end

return M
