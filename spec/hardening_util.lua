-- Shared by the hardening and load specs and by tools/soak: seeded
-- transfers over loopback UDX sockets, checked by BLAKE2b of what was
-- written and what was read, with hooks to inject faults mid-transfer.
local ludx = require "ludx"
local udx = require "ludx.udx"

local core = ludx.core
local U = {}

local next_id = 1000
--- A fresh pair of stream ids (unique within the process).
--- The little-endian 32-bit number at byte `at` (1-based) of d: a udx
-- header's id (5), rwnd (9), seq (13) or ack (17).
function U.u32(d, at)
  return d:byte(at) + d:byte(at + 1) * 256 + d:byte(at + 2) * 65536 + d:byte(at + 3) * 16777216
end

function U.ids()
  next_id = next_id + 2
  return next_id - 1, next_id
end

--- Resident set size of this process in bytes (Linux), or nil.
function U.rss()
  local f = io.open("/proc/self/statm", "r")
  if not f then return nil end
  local _, res = f:read("*n", "*n")
  f:close()
  return res and res * 4096 or nil
end

local function close_all(list)
  for _, o in ipairs(list) do
    if o and o.close then o:close() end
  end
end

--- Streams s1 -> s2 over two new sockets a and b. opts1/opts2 are
-- udx.stream options.
function U.pair(opts1, opts2)
  local a = assert(udx.bind("127.0.0.1", 0))
  local b = assert(udx.bind("127.0.0.1", 0))
  local _, pa = a:address()
  local _, pb = b:address()
  local id1, id2 = U.ids()
  local s1 = assert(udx.stream(id1, opts1))
  local s2 = assert(udx.stream(id2, opts2))
  assert(s1:connect(a, id2, pb, "127.0.0.1"))
  assert(s2:connect(b, id1, pa, "127.0.0.1"))
  return s1, s2, a, b
end

--- Writes `size` seeded bytes to s (in chunks), then finishes. Returns the
-- hex digest of what was written, or nil, msg, code on error.
function U.send(s, size, seed, timeout)
  local gen = core.datagen(seed)
  local h = core.hasher()
  local left = size
  local chunk = 65536
  while left > 0 do
    local n = math.min(chunk, left)
    local data = gen:next(n)
    h:update(data)
    local ok, msg, code = s:write(data, timeout)
    if not ok then return nil, msg, code end
    left = left - n
  end
  local ok, msg, code = s:finish(timeout)
  if not ok then return nil, msg, code end
  return h:hex()
end

--- Reads s to EOF. Returns digest, bytes; or nil, msg, code, bytes.
-- on_progress(bytes) runs after each chunk.
function U.receive(s, timeout, on_progress)
  local h = core.hasher()
  local n = 0
  while true do
    local chunk, msg, code = s:read(nil, timeout)
    if not chunk then
      if code then return nil, msg, code, n end
      return h:hex(), n
    end
    h:update(chunk)
    n = n + #chunk
    if on_progress then on_progress(n) end
  end
end

--- One transfer of opts.size bytes from s1 to s2 over fresh sockets.
-- opts: size, seed, timeout (per wait, ms), stream1/stream2 (stream options),
-- setup(ctx) before the transfer (faults), at(bytes, fn(ctx)) once the
-- reader has that many bytes. Returns a result table: ok (hashes equal and
-- complete), sent, got, bytes, elapsed_ms, send_err/recv_err (msg, code),
-- stats of both streams and sockets.
function U.transfer(opts)
  local size, seed = opts.size, opts.seed or 1
  local timeout = opts.timeout or 30000
  local s1, s2, a, b = U.pair(opts.stream1, opts.stream2)
  local ctx = { s1 = s1, s2 = s2, a = a, b = b, extra = {} }
  if opts.setup then opts.setup(ctx) end
  local t0 = ludx.now()
  local res = {}
  local writer = ludx.spawn("transfer writer", function()
    local sent, msg, code = U.send(s1, size, seed, timeout)
    res.sent = sent
    if not sent then res.send_err = { msg, code } end
  end)
  local fired = false
  local got, n_or_msg, code, n = U.receive(s2, timeout, function(bytes)
    if opts.at and not fired and bytes >= opts.at then
      fired = true
      opts.at_fn(ctx)
    end
  end)
  if got then
    res.got, res.bytes = got, n_or_msg
    -- our END too, so both sides close cleanly
    local ok, m, c = s2:finish(timeout)
    if not ok then res.finish_err = { m, c } end
  else
    res.recv_err = { n_or_msg, code }
    res.bytes = n
  end
  writer:join(timeout * 4)
  res.elapsed_ms = ludx.now() - t0
  res.stats1, res.stats2 = s1:stats(), s2:stats()
  res.sock1, res.sock2 = a:stats(), b:stats()
  res.ok = res.sent ~= nil and res.got == res.sent and res.bytes == size
  close_all({ s1, s2 })
  close_all(ctx.extra)
  -- sockets close once the streams on them are gone
  a:close()
  b:close()
  return res, ctx
end

--- A one-line description of a result for reports.
function U.describe(r)
  local err = r.send_err or r.recv_err
  return string.format("%s bytes=%d %.0f ms retransmits=%d%s", r.ok and "ok" or "FAILED", r.bytes or 0,
    r.elapsed_ms or 0, r.stats1 and r.stats1.retransmits or 0,
    err and (" err=" .. tostring(err[2]) .. " (" .. tostring(err[1]) .. ")") or "")
end

--- A dht-rpc request to 127.0.0.1:port, encoded (m: the request fields;
-- tid 1 unless given). For the hostile peers of the DHT specs and tools.
function U.dht_request(port, m)
  m.to = { host = "127.0.0.1", port = port }
  m.tid = m.tid or 1
  return require("ludx.dht.messages").encode_request(m)
end

--- The requests of the amplification measure, one per command whose reply
-- can outgrow it: {name, request fields}. hash: a stored immutable value's;
-- public_key: a stored mutable value's signer; topic: an announced topic.
function U.amplification_cases(hash, public_key, topic)
  local msgs = require "ludx.dht.messages"
  local compact = require "ludx.compact"
  return {
    { "IMMUTABLE_GET", { command = 9, target = hash } },
    { "MUTABLE_GET", { command = 7, target = require("ludx.dht").hash(public_key), value = compact.encode(compact.uint, 0) } },
    { "LOOKUP", { command = 3, target = topic } },
    { "FIND_NODE", { internal = true, command = msgs.FIND_NODE, target = require("ludx.dht.crypto").random(32) } },
    { "PING", { internal = true, command = msgs.PING } },
  }
end

--- Sends count requests m (tids 1..count) from a new socket on host, a
-- victim that never answers, to 127.0.0.1:port, pausing pause_ms after
-- every `every`; returns the bytes sent and the bytes that came back
-- (until 300 ms pass with nothing).
function U.amplification(port, m, host, count, every, pause_ms)
  local sock = assert(udx.bind(host, 0))
  local sent, got = 0, 0
  for n = 1, count do
    m.tid = n
    local buf = U.dht_request(port, m)
    sent = sent + #buf
    assert(sock:send(buf, port, "127.0.0.1"))
    if n % every == 0 then ludx.sleep(pause_ms) end
  end
  while true do
    local d = sock:recv(300)
    if not d then break end
    got = got + #d
  end
  sock:close()
  return sent, got
end

return U
