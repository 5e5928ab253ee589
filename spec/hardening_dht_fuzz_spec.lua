-- Mutation fuzzing of the DHT decoders (dht-rpc messages, every hyperdht
-- message codec, the compact-encoding primitives): valid encodings are bit
-- flipped, truncated, extended, spliced and given huge counts. A decoder
-- must never raise, never take long (a count it cannot back with bytes
-- ends the read), and whatever it accepts must encode again and decode to
-- the same encoding. Seeded; LUDX_DHT_FUZZ_SECONDS runs it for a set time
-- in all (make fuzz does), else a fixed number of rounds.
local msgs = require "ludx.dht.messages"
local hm = require "ludx.dht.hyperdht_messages"
local compact = require "ludx.compact"

-- LUDX_DHT_FUZZ_SECONDS is for the whole file, shared by its 14 cases.
local SECONDS = tonumber(os.getenv("LUDX_DHT_FUZZ_SECONDS") or "")
if SECONDS then SECONDS = SECONDS / 14 end
local ROUNDS = 3000 -- per sample, without LUDX_DHT_FUZZ_SECONDS

local rng = 12345
local function rand(n)
  rng = (rng * 1103515245 + 12345) % 2147483648
  return rng % n
end

local function bytes(n)
  local t = {}
  for i = 1, n do t[i] = string.char(rand(256)) end
  return table.concat(t)
end

local K = string.rep("k", 32)
local A = { host = "10.1.2.3", port = 49737 }
local B = { host = "192.168.7.9", port = 1 }

-- codec name -> {codec, valid values}
local samples = {
  handshake = { hm.handshake, {
    { mode = 0, noise = bytes(80) },
    { mode = 4, noise = bytes(120), peer_address = A, relay_address = B },
  } },
  holepunch = { hm.holepunch, {
    { mode = 1, id = 7, payload = bytes(60), peer_address = A },
    { mode = 0, id = 0, payload = "" },
  } },
  noise_payload = { hm.noise_payload, {
    { firewall = 1, addresses4 = { A, B }, udx = { id = 5, seq = 9, reusable_socket = true }, secret_stream = true },
    { holepunch = { id = 3, relays = { { relay_address = A, peer_address = B } } }, relay_through = { public_key = K, token = K }, relay_addresses = { A } },
  } },
  holepunch_payload = { hm.holepunch_payload, {
    { connected = true, punching = true, round = 3, addresses = { A }, remote_address = B, token = K, remote_token = K },
    { error = 2 },
  } },
  peer = { hm.peer, { { public_key = K, relay_addresses = { A, B } } } },
  announce = { hm.announce, {
    { peer = { public_key = K, relay_addresses = { A } }, refresh = K, signature = K .. K, bump = 4 },
    {},
  } },
  mutable_put_request = { hm.mutable_put_request, { { public_key = K, seq = 300, value = bytes(50), signature = K .. K } } },
  mutable_get_response = { hm.mutable_get_response, { { seq = 2 ^ 40, value = bytes(10), signature = K .. K } } },
  plugin_request = { hm.plugin_request, { { plugin = "p", version = 1, command = 2, value = bytes(5) }, { plugin = "", version = 0, command = 0 } } },
  ipv4_array = { compact.ipv4Array, { { A, B, A } } },
  ipv6_array = { compact.ipv6Array, { { { host = "::1", port = 5 } } } },
  uint = { compact.uint, { 0, 252, 253, 65536, 2 ^ 33 } },
  buffer = { compact.buffer, { "", bytes(300) } },
}

local rpc_samples = {
  msgs.encode_request({ tid = 1, to = A, internal = true, command = msgs.PING }),
  msgs.encode_request({ tid = 2, to = A, id = K, token = K, command = 3, target = K, value = bytes(40) }),
  msgs.encode_response({ tid = 3, to = B, id = K, token = K, closer_nodes = { A, B, A }, value = bytes(30) }),
  msgs.encode_response({ tid = 4, to = B, error = 2 }),
}

-- One mutation of s.
local function mutate(s)
  local n = #s
  local op = rand(8)
  if op == 0 and n > 0 then -- flip bits
    local t = { s:byte(1, -1) }
    for _ = 1, 1 + rand(4) do
      local i = 1 + rand(n)
      t[i] = bit.bxor(t[i], bit.lshift(1, rand(8)))
    end
    return string.char(unpack(t))
  elseif op == 1 then -- truncate
    return s:sub(1, rand(n + 1))
  elseif op == 2 then -- extend
    return s .. bytes(1 + rand(40))
  elseif op == 3 and n > 0 then -- a byte set to an edge value
    local i = 1 + rand(n)
    local v = ({ 0, 0xfc, 0xfd, 0xfe, 0xff, 0x7f, 0x80 })[1 + rand(7)]
    return s:sub(1, i - 1) .. string.char(v) .. s:sub(i + 1)
  elseif op == 4 and n > 0 then -- a huge varint count inserted
    local i = 1 + rand(n)
    local big = ({ "\254\255\255\255\255", "\255\255\255\255\255\255\255\255\255", "\253\255\255", "\254\0\0\16\0" })[1 + rand(4)]
    return s:sub(1, i - 1) .. big .. s:sub(i)
  elseif op == 5 and n > 1 then -- delete a span
    local i = 1 + rand(n)
    return s:sub(1, i - 1) .. s:sub(i + 1 + rand(8))
  elseif op == 6 and n > 1 then -- duplicate a span
    local i = 1 + rand(n)
    local j = math.min(n, i + rand(16))
    return s:sub(1, j) .. s:sub(i, j) .. s:sub(j + 1)
  end
  return bytes(rand(64)) -- pure noise
end

local function deadline()
  if SECONDS then
    local t0 = os.clock()
    return function(_) return os.clock() - t0 < SECONDS end
  end
  return function(i) return i <= ROUNDS end
end

describe("DHT decoders under mutation", function()
  it("dht-rpc datagrams: decode never raises; what decodes re-encodes to a stable form", function()
    local n, accepted = 0, 0
    local more = deadline()
    local i = 0
    while more(i) do
      i = i + 1
      local s = rpc_samples[1 + rand(#rpc_samples)]
      for _ = 1, 1 + rand(3) do s = mutate(s) end
      local t0 = os.clock()
      local ok, kind, m = pcall(msgs.decode, s)
      assert(ok, "decode raised: " .. tostring(kind) .. " on " .. s:gsub(".", function(c) return string.format("%02x", c:byte()) end))
      assert(os.clock() - t0 < 0.5, "decode took too long") -- CPU time; a GC step or trace compile may land here
      n = n + 1
      if kind then
        accepted = accepted + 1
        assert.is_table(m)
        local ok2, again = pcall(kind == "request" and msgs.encode_request or msgs.encode_response, m)
        if ok2 then -- a decoded message with out-of-range fields may refuse to encode; never a crash
          local k2, m2 = msgs.decode(again)
          assert.are.equal(kind, k2)
          assert.are.equal(again, (kind == "request" and msgs.encode_request or msgs.encode_response)(m2))
        end
      end
    end
    io.stderr:write(string.format("  [dht fuzz] dht-rpc: %d inputs, %d decoded\n", n, accepted))
  end)

  for name, sample in pairs(samples) do
    it(name .. ": decode never raises; what decodes re-encodes to a stable form", function()
      local codec, values = sample[1], sample[2]
      local encoded = {}
      for k, v in ipairs(values) do
        encoded[k] = compact.encode(codec, v)
        local back = assert(compact.decode(codec, encoded[k], true))
        assert.are.equal(encoded[k], compact.encode(codec, back)) -- round trip
      end
      local n, accepted = 0, 0
      local more = deadline()
      local i = 0
      while more(i) do
        i = i + 1
        local s = encoded[1 + rand(#encoded)]
        for _ = 1, 1 + rand(3) do s = mutate(s) end
        local t0 = os.clock()
        local ok, v, err = pcall(compact.decode, codec, s)
        assert(ok, name .. " decode raised: " .. tostring(v))
        assert(os.clock() - t0 < 0.5, name .. " decode took too long") -- CPU time, as above
        n = n + 1
        if v ~= nil then
          accepted = accepted + 1
          local ok2, again = pcall(compact.encode, codec, v)
          if ok2 then
            local v2 = compact.decode(codec, again)
            assert.is_not_nil(v2)
            assert.are.equal(again, compact.encode(codec, v2))
          end
        else
          assert.is_string(err)
        end
      end
      io.stderr:write(string.format("  [dht fuzz] %-20s %d inputs, %d decoded\n", name, n, accepted))
    end)
  end
end)
