-- Every cryptographic primitive the DHT uses, in one place (over the
-- runtime's crypto, core.crypto on libsodium).
--
--   hash(msg [, key])         BLAKE2b-256 (crypto_generichash), optional key
--   hash_batch(list [, key])  BLAKE2b-256 of the concatenation
--   ns(name, i)               hypercore-crypto namespace H32(H32(name) || i)
--   random(n)                 n random bytes
--   keypair([seed])           Ed25519 {public_key =, secret_key =}
--   sign(msg, secret_key)     64-byte detached signature
--   verify(sig, msg, public_key) -> boolean
--   secretbox(msg, nonce, key) / secretbox_open(cipher, nonce, key)
--   noise_ik(initiator, keypair, remote_public_key) -> handshake with
--     hyperdht's prologue NS.PEER_HANDSHAKE (send, recv, complete, result)
--   holepunch_secret(hash64)  H32(NS.PEER_HOLEPUNCH; key = hash)
local C = require("ludx.core").crypto

local M = {}

local blake2b, blake2b_batch = C.blake2b, C.blake2b_batch

local check = require "ludx.check"

local function check_str(v, name, fname, len)
  if len then check.bytes(v, len, name, fname) else check.string(v, name, fname) end
end

function M.hash(msg, key)
  if key == nil then return blake2b(msg, 32) end
  return blake2b(msg, 32, key)
end

function M.hash64(msg)
  return blake2b(msg, 64)
end

function M.hash_batch(list, key)
  if key == nil then return blake2b_batch(list, 32) end
  return blake2b_batch(list, 32, key)
end

M.ns = C.ns

function M.random(n)
  return C.randombytes(n)
end

function M.keypair(seed)
  if seed ~= nil then check_str(seed, "seed", "keypair", 32) end
  local pk, sk = C.keypair(seed)
  return { public_key = pk, secret_key = sk }
end

function M.sign(msg, secret_key)
  return C.sign(msg, secret_key)
end

function M.verify(sig, msg, public_key)
  if type(sig) ~= "string" or #sig ~= 64 or type(msg) ~= "string" or type(public_key) ~= "string" or #public_key ~= 32 then
    return false
  end
  return C.verify(sig, msg, public_key) == true
end

--- crypto_secretbox_easy: 16-byte tag then the ciphertext.
function M.secretbox(msg, nonce, key)
  return C.secretbox(msg, nonce, key)
end

--- The plaintext, or nil when the box does not open.
function M.secretbox_open(cipher, nonce, key)
  if type(cipher) ~= "string" or #cipher < 16 then return nil end
  return (C.secretbox_open(cipher, nonce, key))
end

local PEER_HANDSHAKE = C.ns("hyperswarm/dht", 0)

--- A Noise IK handshake as hyperdht runs it (prologue NS.PEER_HANDSHAKE).
-- The initiator passes the server's public key.
function M.noise_ik(initiator, keypair, remote_public_key)
  return C.noise("IK", initiator, keypair, PEER_HANDSHAKE, remote_public_key)
end

-- A fixed local key: DH with it is the check the Noise handshake makes on a
-- remote static key (an Ed25519 point that maps to Curve25519, not of
-- small order).
local probe_sk = nil

--- True when pk is 32 bytes and a usable Ed25519 public key.
function M.valid_public_key(pk)
  if type(pk) ~= "string" or #pk ~= 32 then return false end
  probe_sk = probe_sk or select(2, C.keypair(string.rep("\0", 32)))
  return C.dh(probe_sk, pk) ~= nil
end

M.holepunch_secret = C.holepunch_secret
M.stream_id = C.stream_id

return M
