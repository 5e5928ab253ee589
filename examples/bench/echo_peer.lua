-- The peer of the latency example suite (latency.lua): a UDX stream that
-- sends back every byte it receives, optionally inside a SecretStream.
--
--   ludx echo_peer.lua plain|secret
--
-- Speaks JSON lines with the harness: prints {"event":"ready","port":P},
-- reads {"port":Q} (the harness's socket), connects its stream 2 to the
-- harness's stream 1, echoes until the harness ends its side, then prints
-- {"event":"done","bytes":N} and exits. A closed stdin ends it too.
local ludx = require "ludx"
local json = require "ludx.json"
local udx = require "ludx.udx"
local secretstream = require "ludx.secretstream"

local mode = arg[1] or "plain"

ludx.run(function()
  local sock = assert(udx.bind("127.0.0.1", 0))
  local raw = assert(udx.stream(2))
  local remote = ludx.queue()
  require("ludx.stdin").watch(function(line)
    local m = json.decode(line)
    if type(m) == "table" and type(m.port) == "number" then remote:put(m) end
  end)
  local _, port = sock:address()
  print(json.encode({ event = "ready", port = port }))
  io.stdout:flush()
  local r = remote:get()
  assert(raw:connect(sock, 1, r.port, "127.0.0.1"))
  local s = raw
  if mode == "secret" then
    s = secretstream.wrap(raw, { initiator = false, keypair = secretstream.keypair(string.rep("\2", 32)) })
    assert(s:ready(20000))
  end
  local total = 0
  while true do
    local chunk, err = s:read()
    if not chunk then
      if err then print(json.encode({ event = "error", code = "EREAD", message = tostring(err) })) end
      break
    end
    total = total + #chunk
    assert(s:write(chunk))
  end
  s:finish(10000)
  print(json.encode({ event = "done", bytes = total }))
  io.stdout:flush()
  s:close()
  sock:close()
  os.exit(0)
end)
