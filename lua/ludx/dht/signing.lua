-- hyperdht signatures: Ed25519 over a 64-byte "signable" = namespace ||
-- H32(fields). Announce binds the record to the target, the storing
-- node's id and its token; mutable values bind seq and value.
local crypto = require "ludx.dht.crypto"
local compact = require "ludx.compact"
local hm = require "ludx.dht.hyperdht_messages"
local NS = require("ludx.dht.constants").NS

local M = {}

--- ns || H32(target || node_id || token || encode(peer) || refresh).
function M.announce_signable(target, node_id, token, ann, ns)
  local h = crypto.hash_batch({ target, node_id, token, compact.encode(hm.peer, ann.peer), ann.refresh or "" })
  return ns .. h
end

function M.sign_announce(target, token, node_id, ann, keypair)
  return crypto.sign(M.announce_signable(target, node_id, token, ann, NS.ANNOUNCE), keypair.secret_key)
end

function M.sign_unannounce(target, token, node_id, ann, keypair)
  return crypto.sign(M.announce_signable(target, node_id, token, ann, NS.UNANNOUNCE), keypair.secret_key)
end

function M.verify_announce(sig, target, token, node_id, ann, ns)
  return crypto.verify(sig, M.announce_signable(target, node_id, token, ann, ns), ann.peer.public_key)
end

function M.mutable_signable(seq, value)
  return NS.MUTABLE_PUT .. crypto.hash(compact.encode(hm.mutable_signable, { seq = seq, value = value }))
end

function M.sign_mutable(seq, value, keypair)
  return crypto.sign(M.mutable_signable(seq, value), keypair.secret_key)
end

function M.verify_mutable(sig, seq, value, public_key)
  return crypto.verify(sig, M.mutable_signable(seq, value), public_key)
end

return M
