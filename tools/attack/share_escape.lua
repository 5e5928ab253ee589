-- A malicious share server against `ludx fetch` (ludx.share.fetch): each
-- try serves a manifest whose name or paths aim outside DEST (or through a
-- symbolic link already in DEST, or at a file that is there), answers the
-- GETs honestly, and counts what landed outside DEST or was replaced.
--
--   build/ludx tools/attack/share_escape.lua
local dht = require "ludx.dht"
local share = require "ludx.share"
local manifest = require "ludx.share.manifest"
local wire = require "ludx.share.wire"
local fs = require "ludx.fs"
local blake2b = require("ludx.core").crypto.blake2b

local CHUNK = 16384

local function write(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

local function read(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

local function craft(name, kind, files)
  local m = { version = 1, name = name, kind = kind, chunk_size = CHUNK, files = {} }
  for i, f in ipairs(files) do
    m.files[i] = { path = f.path, size = #f.data, hash = blake2b(f.data, 64), chunks = { #f.data > 0 and blake2b(f.data, 32) or nil }, data = f.data }
  end
  return m
end

local function serve(node, m)
  local kp = dht.keypair()
  local encoded = manifest.encode(m)
  local srv = node:server(function(conn)
    local rd = wire.reader(conn, wire.CLIENT_MESSAGE_MAX)
    if rd:next(10000) ~= wire.HELLO then return conn:close() end
    conn:write(wire.manifest(encoded))
    while true do
      local k, b = rd:next(10000)
      if k ~= wire.GET then break end
      local g = wire.decode(k, b)
      conn:write(wire.data(g.id, g.file, g.offset, m.files[g.file + 1].data:sub(g.offset + 1, g.offset + g.length)))
    end
    conn:close()
  end)
  assert(srv:listen(kp))
  return kp.public_key, srv
end

local base = os.tmpname()
os.remove(base)
local dest, outside = base .. "/dest", base .. "/outside"
assert(fs.mkdirp(dest))
assert(fs.mkdirp(outside))
local victim = outside .. "/authorized_keys"
write(victim, "mine")
os.execute("ln -s '" .. outside .. "' '" .. dest .. "/link'")
write(dest .. "/notes.txt", "my notes")

local evil = { path = "x", data = "evil key" }
local tries = {
  { "file share named ../outside/authorized_keys", craft("../outside/authorized_keys", "file", { evil }), dest },
  { "file share named sub/../../outside/new1", craft("sub/../../outside/new1", "file", { evil }), dest },
  { "file share named link/new2", craft("link/new2", "file", { evil }), dest },
  { "dir share named /abs/new3, no DEST", craft(outside .. "/new3", "dir", { evil }), nil },
  { "file share named /abs/new4, no DEST", craft(outside .. "/new4", "file", { evil }), nil },
  { "dir share, path link/new5", craft("d", "dir", { { path = "link/new5", data = "evil" } }), dest },
  { "dir share, path link/authorized_keys", craft("d", "dir", { { path = "link/authorized_keys", data = "evil" } }), dest },
  { "dir share, path notes.txt (exists in DEST)", craft("d", "dir", { { path = "notes.txt", data = "theirs" } }), dest },
}

local tn = assert(dht.testnet(3))
local a, b = assert(tn:create_node()), assert(tn:create_node())
local escaped, replaced = 0, 0
for i, t in ipairs(tries) do
  local before = {}
  for _, e in ipairs(require("ludx.core").fs_scandir(outside)) do before[e.name] = true end
  local key, srv = serve(a, t[2])
  local r, msg, code = share.fetch(b, key, t[3], { timeout = 20000 })
  srv:close({ fast = true })
  local new = 0
  for _, e in ipairs(require("ludx.core").fs_scandir(outside)) do
    if not before[e.name] then new = new + 1 end
  end
  local hit = new > 0 or read(victim) ~= "mine" or read(dest .. "/notes.txt") ~= "my notes"
  if read(victim) ~= "mine" or read(dest .. "/notes.txt") ~= "my notes" then replaced = replaced + 1 end
  if new > 0 or read(victim) ~= "mine" then escaped = escaped + 1 end
  print(string.format("%d. %-44s %s", i, t[1], hit and "WROTE (" .. (r and "fetched" or tostring(code)) .. ")" or ("refused: " .. tostring(code) .. " " .. tostring(msg):sub(1, 70))))
  write(victim, "mine")
  write(dest .. "/notes.txt", "my notes")
end
print(string.format("%d of %d tries wrote outside DEST; %d replaced a file ludx did not make", escaped, #tries - 1, replaced))
tn:destroy()
os.execute("rm -rf '" .. base .. "'")
