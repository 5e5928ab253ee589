-- ludx.crypto: the hyperswarm crypto primitives (core.crypto) plus a few Lua
-- helpers. Everything of core.crypto is reachable here; see bindings/crypto.c
-- for the full list. Byte strings are Lua strings.
--
--   crypto.keypair([seed32])        -> {public_key = 32 bytes, secret_key = 64 bytes}
--   crypto.hex(bytes), crypto.unhex(hex)
--   crypto.NS.<name>                -> the 32-byte namespaces of secret-stream and hyperdht
--   crypto.handshake{pattern=, initiator=, keypair=, prologue=, remote_public_key=}
--                                   -> a Noise handshake (core.crypto.noise)
local C = require("ludx.core").crypto

local M = setmetatable({}, { __index = C })

local format, byte, char = string.format, string.byte, string.char

--- A key pair table; from crypto_sign_seed_keypair when a 32-byte seed is given.
function M.keypair(seed)
  if seed ~= nil and (type(seed) ~= "string" or #seed ~= 32) then
    error("bad argument 'seed' to 'keypair' (32-byte string expected, got " ..
      (type(seed) == "string" and #seed .. " bytes" or type(seed)) .. ")", 2)
  end
  local pk, sk = C.keypair(seed)
  return { public_key = pk, secret_key = sk }
end

function M.hex(s)
  if type(s) ~= "string" then error("bad argument 's' to 'hex' (string expected, got " .. type(s) .. ")", 2) end
  return (s:gsub(".", function(c) return format("%02x", byte(c)) end))
end

--- Hex to bytes; white space is ignored. Raises on anything else.
function M.unhex(h)
  if type(h) ~= "string" then error("bad argument 'h' to 'unhex' (string expected, got " .. type(h) .. ")", 2) end
  h = h:gsub("%s", "")
  if #h % 2 ~= 0 or h:find("[^%x]") then error("bad argument 'h' to 'unhex' (hex digits expected)", 2) end
  return (h:gsub("%x%x", function(d) return char(tonumber(d, 16)) end))
end

--- Namespaces: hypercore-crypto namespace(name, i) = H32(H32(name) || i).
M.NS = {
  INITIATOR = C.ns("hyperswarm/secret-stream", 0),
  RESPONDER = C.ns("hyperswarm/secret-stream", 1),
  SEND = C.ns("hyperswarm/secret-stream", 2),
  PEER_HANDSHAKE = C.ns("hyperswarm/dht", 0),
  PEER_HOLEPUNCH = C.ns("hyperswarm/dht", 1),
  ANNOUNCE = C.ns("hyperswarm/dht", 4),
  UNANNOUNCE = C.ns("hyperswarm/dht", 5),
  MUTABLE_PUT = C.ns("hyperswarm/dht", 6),
  PLUGIN = C.ns("hyperswarm/dht", 10),
}

--- A Noise handshake from an options table (pattern defaults to "XX").
function M.handshake(opts)
  if type(opts) ~= "table" then error("bad argument 'opts' to 'handshake' (table expected, got " .. type(opts) .. ")", 2) end
  return C.noise(opts.pattern or "XX", opts.initiator, opts.keypair, opts.prologue, opts.remote_public_key)
end

return M
