-- The receiving end of spec/load_streams_spec.lua, run as a separate ludx
-- process (as a real remote would be): N streams with ids base+1..base+N on
-- one socket, each connecting to its first source (firewall "connect") and
-- reading to EOF. Prints "ready <port>", then one "<i> <bytes> <hex>" line
-- per stream, then "done".
--   ludx spec/load_peer.lua N BASE_ID REMOTE_BASE_ID
local ludx = require "ludx"
local udx = require "ludx.udx"
local core = ludx.core

local n, base, rbase = tonumber(arg[1]), tonumber(arg[2]), tonumber(arg[3])
local sock = assert(udx.bind("127.0.0.1", 0))
local _, port = sock:address()
local left = n
for i = 1, n do
  local s = assert(udx.stream(base + i))
  assert(s:firewall("connect", rbase + i))
  ludx.spawn("r" .. i, function()
    local h, bytes = core.hasher(), 0
    while true do
      local chunk, _, code = s:read(nil, 60000)
      if not chunk then
        if code then
          io.write(string.format("%d %d error:%s\n", i, bytes, code))
          io.flush()
          left = left - 1
          return
        end
        break
      end
      h:update(chunk)
      bytes = bytes + #chunk
    end
    io.write(string.format("%d %d %s\n", i, bytes, h:hex()))
    io.flush()
    s:finish(10000)
    s:close()
    left = left - 1
  end)
end
io.write("ready " .. port .. "\n")
io.flush()
while left > 0 do ludx.sleep(20) end
io.write("done\n")
io.flush()
sock:close()
