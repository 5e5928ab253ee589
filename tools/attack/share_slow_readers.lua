-- Slow readers against `ludx share`: starts a local DHT (`ludx dht testnet`)
-- and `ludx share FILE` as separate processes, then opens N connections
-- (each with its own key) that say HELLO, ask for the whole file and never
-- read (GETS=n: n more one-byte GETs after those; TRICKLE=bytes: read that much every 100 ms). Prints the share process's RSS before and once the readers stalled,
-- and how many connections the server still holds open after the wait.
--
--   build/ludx tools/attack/share_slow_readers.lua [N=50] [MiB=64] [WAIT_S=10] [share flags...]
local ludx = require "ludx"
local process = require "ludx.process"
local dht = require "ludx.dht"
local wire = require "ludx.share.wire"

local args = { ... }
if #args == 0 and arg then args = arg end
local n = tonumber(args[1]) or 50
local mib = tonumber(args[2]) or 64
local wait_s = tonumber(args[3]) or 10
local extra = {}
for i = 4, #args do extra[#extra + 1] = args[i] end
local bin = os.getenv("LUDX_BIN") or "build/ludx"

local function rss_kb(pid)
  local f = io.open("/proc/" .. pid .. "/status")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return tonumber(s:match("VmRSS:%s*(%d+)"))
end

local file = os.tmpname()
do
  local f = assert(io.open(file, "wb"))
  local block = string.rep("x", 1024 * 1024)
  for _ = 1, mib do f:write(block) end
  f:close()
end

local tn = assert(process.spawn(bin, { "dht", "testnet" }))
local bs = assert(tn:read_line(20000))
local sargs = { "share", "--bootstrap", bs, "--quiet" }
for _, x in ipairs(extra) do sargs[#sargs + 1] = x end
sargs[#sargs + 1] = file
local sh = assert(process.spawn(bin, sargs))
local hexkey = assert(sh:read_line(60000), "no key from ludx share")
local key = require("ludx.share").parse_key(hexkey)

local node = assert(dht.new({ bootstrap = { bs }, port = 0 }))
assert(node:ready(20000))
local base = rss_kb(sh.pid)

local conns = {}
for i = 1, n do
  local conn, msg = node:connect(key, { keypair = dht.keypair(), timeout = 20000 })
  if conn then
    if os.getenv("SMALL_WINDOW") then conn.udx_stream:set_read_buffer_limit(65536) end
    conn:write(wire.hello())
    -- ask for everything in 1 MiB pieces, then never read again
    for c = 0, mib - 1 do conn:write(wire.get(c, 0, c * 1048576, 1048576)) end
    -- GETS=n: then n more one-byte GETs (requests the server must buffer)
    local extra_gets = tonumber(os.getenv("GETS") or "")
    if extra_gets then
      local batch = {}
      for g = 1, extra_gets do
        batch[#batch + 1] = wire.get(mib + g, 0, 0, 1)
        if #batch == 4096 or g == extra_gets then
          conn:write(table.concat(batch), 1000)
          batch = {}
        end
      end
    end
    conns[#conns + 1] = conn
    -- TRICKLE=bytes: read that much every 100 ms (a slow reader, not a stopped one)
    local trickle = tonumber(os.getenv("TRICKLE") or "")
    if trickle then
      ludx.spawn("trickle", function()
        while not conn.closed do
          local d = conn:read(trickle, 30000)
          if not d then break end
          ludx.sleep(100)
        end
      end)
    end
  else
    io.stderr:write("connect ", i, ": ", tostring(msg), "\n")
  end
end
ludx.sleep(wait_s * 1000)
local peak = rss_kb(sh.pid)
-- which connections did the server cut off? (a closed one reads an error or EOF)
local alive = 0
for _, c in ipairs(conns) do
  if not (c.err or c.eof or (c.udx_stream and c.udx_stream.closed)) then alive = alive + 1 end
end
print(string.format("readers=%d connected=%d file=%dMiB rss_before=%.1fMB rss_after=%.1fMB per_reader=%.2fMB still_open_after_%ds=%d",
  n, #conns, mib, base / 1024, peak / 1024, (peak - base) / 1024 / math.max(1, #conns), wait_s, alive))
for _, c in ipairs(conns) do c:close() end
sh:kill("SIGINT")
sh:wait(10000)
tn:kill("SIGINT")
tn:wait(10000)
node:destroy()
os.remove(file)
