-- hyperdht message values (carried in the dht-rpc value field), as codecs
-- for ludx.compact: {encode = function(w, m), decode = function(r)}.
--
-- Addresses are {host =, port =}. Field names follow hyperdht in
-- snake_case (peer_address, public_key, relay_addresses, ...).
local compact = require "ludx.compact"

local M = {}

local floor = math.floor

local function bit(flags, b)
  return floor(flags / b) % 2 == 1
end

local ipv4 = compact.ipv4Address
local ipv4_array = compact.ipv4Array
local ipv6_array = compact.ipv6Array

local function nonempty(list)
  return list ~= nil and #list > 0
end

-- relay modes
M.FROM_CLIENT = 0
M.FROM_SERVER = 1
M.FROM_RELAY = 2
M.FROM_SECOND_RELAY = 3
M.REPLY = 4

--- handshake: flags (1 peerAddress, 2 relayAddress), mode, noise, addresses.
M.handshake = {
  encode = function(w, m)
    w:uint((m.peer_address and 1 or 0) + (m.relay_address and 2 or 0))
    w:uint(m.mode)
    w:buffer(m.noise)
    if m.peer_address then ipv4.encode(w, m.peer_address) end
    if m.relay_address then ipv4.encode(w, m.relay_address) end
  end,
  decode = function(r)
    local flags = r:uint()
    local m = { mode = r:uint(), noise = r:buffer() }
    if bit(flags, 1) then m.peer_address = ipv4.decode(r) end
    if bit(flags, 2) then m.relay_address = ipv4.decode(r) end
    return m
  end,
}

--- holepunch: flags (1 peerAddress), mode, id, payload, peerAddress?.
M.holepunch = {
  encode = function(w, m)
    w:uint(m.peer_address and 1 or 0)
    w:uint(m.mode)
    w:uint(m.id)
    w:buffer(m.payload)
    if m.peer_address then ipv4.encode(w, m.peer_address) end
  end,
  decode = function(r)
    local flags = r:uint()
    local m = { mode = r:uint(), id = r:uint(), payload = r:buffer() }
    if bit(flags, 1) then m.peer_address = ipv4.decode(r) end
    return m
  end,
}

local relay_info = {
  encode = function(w, m)
    ipv4.encode(w, m.relay_address)
    ipv4.encode(w, m.peer_address)
  end,
  decode = function(r)
    return { relay_address = ipv4.decode(r), peer_address = ipv4.decode(r) }
  end,
}
local relay_info_array = compact.array(relay_info)

--- The plaintext inside the Noise IK messages of PEER_HANDSHAKE.
-- {version=1, error=, firewall=, holepunch={id=, relays={...}}?,
--  addresses4={...}, addresses6={...}, udx={reusable_socket=, id=, seq=}?,
--  secret_stream={}?, relay_through={public_key=, token=}?,
--  relay_addresses={...}?}
M.noise_payload = {
  encode = function(w, m)
    local flags = (m.holepunch and 1 or 0) + (nonempty(m.addresses4) and 2 or 0) + (nonempty(m.addresses6) and 4 or 0)
      + (m.udx and 8 or 0) + (m.secret_stream and 16 or 0) + (m.relay_through and 32 or 0) + (m.relay_addresses and 64 or 0)
    w:uint(1)
    w:uint(flags)
    w:uint(m.error or 0)
    w:uint(m.firewall or 0)
    if m.holepunch then
      w:uint(m.holepunch.id)
      relay_info_array.encode(w, m.holepunch.relays or {})
    end
    if nonempty(m.addresses4) then ipv4_array.encode(w, m.addresses4) end
    if nonempty(m.addresses6) then ipv6_array.encode(w, m.addresses6) end
    if m.udx then
      w:uint(1)
      w:uint(m.udx.reusable_socket and 1 or 0)
      w:uint(m.udx.id)
      w:uint(m.udx.seq or 0)
    end
    if m.secret_stream then w:uint(1) end
    if m.relay_through then
      w:uint(1)
      w:uint(0)
      w:fixed32(m.relay_through.public_key)
      w:fixed32(m.relay_through.token)
    end
    if m.relay_addresses then ipv4_array.encode(w, m.relay_addresses) end
  end,
  decode = function(r)
    local version = r:uint()
    local m = { version = version, error = 0, firewall = 0, addresses4 = {}, addresses6 = {} }
    if version ~= 1 then return m end -- the caller answers VERSION_MISMATCH
    local flags = r:uint()
    m.error = r:uint()
    m.firewall = r:uint()
    if bit(flags, 1) then m.holepunch = { id = r:uint(), relays = relay_info_array.decode(r) } end
    if bit(flags, 2) then m.addresses4 = ipv4_array.decode(r) end
    if bit(flags, 4) then m.addresses6 = ipv6_array.decode(r) end
    if bit(flags, 8) then
      local v = r:uint()
      local features = r:uint()
      m.udx = { version = v, reusable_socket = features % 2 == 1, id = r:uint(), seq = r:uint() }
    end
    if bit(flags, 16) then m.secret_stream = { version = r:uint() } end
    if bit(flags, 32) then
      local v = r:uint()
      r:uint()
      m.relay_through = { version = v, public_key = r:fixed32(), token = r:fixed32() }
    end
    if bit(flags, 64) then m.relay_addresses = ipv4_array.decode(r) end
    return m
  end,
}

--- The plaintext of an encrypted PEER_HOLEPUNCH payload.
M.holepunch_payload = {
  encode = function(w, m)
    local flags = (m.connected and 1 or 0) + (m.punching and 2 or 0) + (m.addresses and 4 or 0)
      + (m.remote_address and 8 or 0) + (m.token and 16 or 0) + (m.remote_token and 32 or 0)
    w:uint(flags)
    w:uint(m.error or 0)
    w:uint(m.firewall or 0)
    w:uint(m.round or 0)
    if m.addresses then ipv4_array.encode(w, m.addresses) end
    if m.remote_address then ipv4.encode(w, m.remote_address) end
    if m.token then w:fixed32(m.token) end
    if m.remote_token then w:fixed32(m.remote_token) end
  end,
  decode = function(r)
    local flags = r:uint()
    local m = { error = r:uint(), firewall = r:uint(), round = r:uint(), connected = bit(flags, 1), punching = bit(flags, 2) }
    if bit(flags, 4) then m.addresses = ipv4_array.decode(r) end
    if bit(flags, 8) then m.remote_address = ipv4.decode(r) end
    if bit(flags, 16) then m.token = r:fixed32() end
    if bit(flags, 32) then m.remote_token = r:fixed32() end
    return m
  end,
}

--- The stored record: {public_key=, relay_addresses={...}}.
M.peer = {
  encode = function(w, m)
    w:fixed32(m.public_key)
    ipv4_array.encode(w, m.relay_addresses or {})
  end,
  decode = function(r)
    return { public_key = r:fixed32(), relay_addresses = ipv4_array.decode(r) }
  end,
}
local peers = compact.array(M.peer)

--- LOOKUP reply: {peers = {raw records (encode) / peer tables (decode)}, bump=}.
M.lookup_raw_reply = {
  encode = function(w, m)
    w:uint(#m.peers)
    for i = 1, #m.peers do w:raw(m.peers[i]) end
    w:uint(m.bump or 0)
  end,
  decode = function(r)
    local m = { peers = peers.decode(r) }
    m.bump = r:done() and 0 or r:uint()
    return m
  end,
}

--- announce / unannounce: {peer=?, refresh=?, signature=?, bump=0}.
M.announce = {
  encode = function(w, m)
    local bump = m.bump or 0
    w:uint((m.peer and 1 or 0) + (m.refresh and 2 or 0) + (m.signature and 4 or 0) + (bump > 0 and 8 or 0))
    if m.peer then M.peer.encode(w, m.peer) end
    if m.refresh then w:fixed32(m.refresh) end
    if m.signature then w:fixed64(m.signature) end
    if bump > 0 then w:uint(bump) end
  end,
  decode = function(r)
    local flags = r:uint()
    local m = { bump = 0 }
    if bit(flags, 1) then m.peer = M.peer.decode(r) end
    if bit(flags, 2) then m.refresh = r:fixed32() end
    if bit(flags, 4) then m.signature = r:fixed64() end
    if bit(flags, 8) then m.bump = r:uint() end
    return m
  end,
}

M.mutable_signable = {
  encode = function(w, m)
    w:uint(m.seq)
    w:buffer(m.value)
  end,
  decode = function(r)
    return { seq = r:uint(), value = r:buffer() }
  end,
}

M.mutable_put_request = {
  encode = function(w, m)
    w:fixed32(m.public_key)
    w:uint(m.seq)
    w:buffer(m.value)
    w:fixed64(m.signature)
  end,
  decode = function(r)
    return { public_key = r:fixed32(), seq = r:uint(), value = r:buffer(), signature = r:fixed64() }
  end,
}

M.mutable_get_response = {
  encode = function(w, m)
    w:uint(m.seq)
    w:buffer(m.value)
    w:fixed64(m.signature)
  end,
  decode = function(r)
    return { seq = r:uint(), value = r:buffer(), signature = r:fixed64() }
  end,
}

M.plugin_request = {
  encode = function(w, m)
    w:string(m.plugin)
    w:uint(m.version)
    w:uint(m.command)
    w:uint(m.value and 1 or 0)
    if m.value then w:buffer(m.value) end
  end,
  decode = function(r)
    local m = { plugin = r:string(), version = r:uint(), command = r:uint() }
    if bit(r:uint(), 1) then m.value = r:buffer() end
    return m
  end,
}

M.encode = compact.encode
M.decode = compact.decode

return M
