-- DHT errors: tables {code =, msg =} that print as "CODE: msg". The task
-- API returns them as nil, msg, code.
local M = {}

local Error = {}
Error.__index = Error
Error.__tostring = function(e) return e.code .. ": " .. e.msg end

function M.new(code, msg)
  return setmetatable({ code = code, msg = msg or code }, Error)
end

function M.is(v)
  return getmetatable(v) == Error
end

local defaults = {
  REQUEST_TIMEOUT = "Request timed out",
  REQUEST_DESTROYED = "Request destroyed",
  NODE_DESTROYED = "Node destroyed",
  TOO_FEW_NODES = "Too few nodes responded",
  PEER_NOT_FOUND = "Peer not found",
  PEER_CONNECTION_FAILED = "Could not connect to peer",
  BAD_HANDSHAKE_REPLY = "Bad handshake reply",
  BAD_HOLEPUNCH_REPLY = "Bad holepunch reply",
  HOLEPUNCH_ABORTED = "Holepunch aborted",
  HOLEPUNCH_INVALID = "Invalid holepunch payload",
  HOLEPUNCH_PROBE_TIMEOUT = "Holepunching probe did not finish in time",
  HOLEPUNCH_DOUBLE_RANDOMIZED_NATS = "Both remote and local NATs are randomized",
  CANNOT_HOLEPUNCH = "Cannot holepunch to remote",
  REMOTE_ABORTED = "Remote aborted",
  HANDSHAKE_UNFINISHED = "Handshake did not finish",
  HANDSHAKE_INVALID = "Received invalid handshake",
  ALREADY_LISTENING = "Already listening",
  KEYPAIR_ALREADY_USED = "Keypair already used",
  SERVER_INCOMPATIBLE = "Server is using an incompatible version",
  SERVER_ERROR = "Server returned an error",
  STREAM_NOT_CONNECTED = "Stream is not connected",
  INVALID_TOKEN = "Invalid token",
  UNKNOWN_COMMAND = "Unknown command",
  SEQ_REUSED = "Sequence number reused with a different value",
  SEQ_TOO_LOW = "Sequence number lower than the stored one",
}

for code, msg in pairs(defaults) do
  M[code] = function(m) return M.new(code, m or msg) end
end

return M
