-- hyperdht constants: commands, namespaces, firewall kinds, error codes.
local crypto = require "ludx.dht.crypto"

local M = {}

M.COMMANDS = {
  PEER_HANDSHAKE = 0,
  PEER_HOLEPUNCH = 1,
  FIND_PEER = 2,
  LOOKUP = 3,
  ANNOUNCE = 4,
  UNANNOUNCE = 5,
  MUTABLE_PUT = 6,
  MUTABLE_GET = 7,
  IMMUTABLE_PUT = 8,
  IMMUTABLE_GET = 9,
  PLUGIN = 10,
}

M.BOOTSTRAP_NODES = {
  "88.99.3.86@node1.hyperdht.org:49737",
  "142.93.90.113@node2.hyperdht.org:49737",
  "138.68.147.8@node3.hyperdht.org:49737",
}

M.DEFAULT_PORT = 49737

M.FIREWALL = { UNKNOWN = 0, OPEN = 1, CONSISTENT = 2, RANDOM = 3 }

M.ERROR = {
  NONE = 0,
  ABORTED = 1,
  VERSION_MISMATCH = 2,
  TRY_LATER = 3,
  SEQ_REUSED = 16,
  SEQ_TOO_LOW = 17,
}

-- ns("hyperswarm/dht", command id)
local C = M.COMMANDS
M.NS = {
  ANNOUNCE = crypto.ns("hyperswarm/dht", C.ANNOUNCE),
  UNANNOUNCE = crypto.ns("hyperswarm/dht", C.UNANNOUNCE),
  MUTABLE_PUT = crypto.ns("hyperswarm/dht", C.MUTABLE_PUT),
  PEER_HANDSHAKE = crypto.ns("hyperswarm/dht", C.PEER_HANDSHAKE),
  PEER_HOLEPUNCH = crypto.ns("hyperswarm/dht", C.PEER_HOLEPUNCH),
  PLUGIN = crypto.ns("hyperswarm/dht", C.PLUGIN),
}

return M
