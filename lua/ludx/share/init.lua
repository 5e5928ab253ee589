-- ludx.share: share a file or a directory by key, fetch it by key.
--
--   local share = require "ludx.share"
--   local s = assert(share.serve(node, "photos/"))     -- hashes, then announces
--   print(share.hex(s.key))                            -- the key to give out
--   local r = assert(share.fetch(node2, s.key, "copy"))  -- checks every chunk
--
-- The protocol (ludx.share.wire) runs over a DHT connection, a SecretStream
-- to the server's public key: the server sends a manifest (paths, sizes,
-- BLAKE2b-512 per file, BLAKE2b-256 per chunk), the client asks for chunks
-- and checks each one as it lands. Paths from the network are checked
-- (ludx.share.paths); an interrupted fetch continues from its verified
-- partial files (ludx.share.store).
local manifest = require "ludx.share.manifest"
local server = require "ludx.share.server"
local fetch = require "ludx.share.fetch"
local crypto = require "ludx.crypto"

local M = {}

M.manifest = manifest.build

--- Serves path (a file or a directory) or a manifest built before. opts as
-- ludx.share.server.serve, plus chunk_size and on_bytes(n) for hashing.
-- Returns the share (share.key, share.manifest, share:close()).
function M.serve(node, what, opts)
  opts = opts or {}
  server._options(opts) -- a wrong option raises before the hashing
  local m = what
  if type(what) == "string" then
    local msg, code
    m, msg, code = manifest.build(what, opts, "share.serve")
    if not m then return nil, msg, code end
  elseif type(what) ~= "table" or not what.encoded then
    error("bad argument 'what' to 'serve' (path or manifest expected, got " .. type(what) .. ")", 2)
  end
  local s, msg, code = server.serve(node, m, opts)
  if not s then
    if m ~= what then manifest.close(m) end
    return nil, msg, code
  end
  -- a manifest built here is the share's: its folder is let go with it
  s.own_manifest = m ~= what
  return s
end

M.fetch = fetch.fetch

--- A key as 64 hex characters.
function M.hex(key)
  return crypto.hex(key)
end

--- A key from 64 hex characters: 32 bytes, or nil, msg.
function M.parse_key(s)
  if type(s) ~= "string" or not s:match("^%x+$") or #s ~= 64 then
    return nil, "a key is 64 hex characters"
  end
  return crypto.unhex(s)
end

return M
