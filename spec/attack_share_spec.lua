-- Hostile peers against ludx share / ludx fetch (issue 13, file sharing):
-- a share server that aims files outside DEST or sends huge manifests and
-- messages, shared folders with symbolic links, and clients that connect
-- too often or never read. Each case asserts the bound on the real code.
local ludx = require "ludx"
local dht = require "ludx.dht"
local share = require "ludx.share"
local manifest = require "ludx.share.manifest"
local paths = require "ludx.share.paths"
local wire = require "ludx.share.wire"
local compact = require "ludx.compact"
local fs = require "ludx.fs"
local core = require "ludx.core"
local H = require "helper"
local run = H.run

local blake2b = core.crypto.blake2b

local dirs = {}
local function newdir()
  local d = os.tmpname()
  os.remove(d)
  assert(fs.mkdirp(d))
  d = assert(fs.realpath(d))
  dirs[#dirs + 1] = d
  return d
end

local function write(path, data)
  assert(fs.mkdirp(paths.dirname(path)))
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

-- every entry under dir (links included, not followed), sorted
local function listing(dir)
  local out = {}
  local function visit(d, rel)
    for _, e in ipairs(core.fs_scandir(d) or {}) do
      local r = rel == "" and e.name or rel .. "/" .. e.name
      out[#out + 1] = r
      if e.type == "directory" then visit(d .. "/" .. e.name, r) end
    end
  end
  visit(dir, "")
  table.sort(out)
  return out
end

local CHUNK = 16384

-- A manifest table for files {path=, data=} (name/kind as given, unchecked).
local function craft(name, kind, files)
  local m = { version = 1, name = name, kind = kind, chunk_size = CHUNK, files = {} }
  for i, f in ipairs(files) do
    local chunks = {}
    for o = 1, #f.data, CHUNK do chunks[#chunks + 1] = blake2b(f.data:sub(o, o + CHUNK - 1), 32) end
    m.files[i] = { path = f.path, size = #f.data, hash = blake2b(f.data, 64), chunks = chunks, data = f.data }
  end
  return m
end

-- A hostile share server: sends `encoded` as the manifest (or calls
-- opts.after_hello(conn)), then answers GETs honestly from files[i].data.
local function hostile(node, encoded, files, opts)
  opts = opts or {}
  local kp = dht.keypair()
  local srv = node:server(function(conn)
    local rd = wire.reader(conn, wire.CLIENT_MESSAGE_MAX)
    local kind = rd:next(10000)
    if kind ~= wire.HELLO then return conn:close() end
    if opts.after_hello then return opts.after_hello(conn) end
    for i = 1, #encoded, 1024 * 1024 do
      if not conn:write((i == 1 and wire.manifest(encoded) or encoded):sub(i == 1 and 1 or i, i + 1024 * 1024 - 1)) then return end
    end
    while true do
      local k, b = rd:next(10000)
      if k ~= wire.GET then break end
      local g = wire.decode(k, b)
      local data = files[g.file + 1].data:sub(g.offset + 1, g.offset + g.length)
      for o = 1, #data, wire.DATA_MAX do
        if not conn:write(wire.data(g.id, g.file, g.offset + o - 1, data:sub(o, o + wire.DATA_MAX - 1))) then return end
      end
    end
    conn:close()
  end)
  assert(srv:listen(kp))
  return kp.public_key, srv
end

describe("attack: share", function()
  local tn, a, b

  before_each(function()
    tn = nil
  end)
  after_each(function()
    if tn then tn:destroy() end
  end)
  teardown(function()
    for _, d in ipairs(dirs) do os.execute("chmod -R u+w '" .. d .. "' 2>/dev/null; rm -rf '" .. d .. "'") end
  end)

  local function net()
    tn = assert(dht.testnet(3, { timeout = 20000 }))
    a = assert(tn:create_node())
    b = assert(tn:create_node())
  end

  describe("a server aiming outside DEST", function()
    it("cannot write outside DEST with a crafted name or path, nor through a link in DEST", run(function()
      net()
      local base = newdir()
      local dest, outside = base .. "/dest", base .. "/outside"
      assert(fs.mkdirp(dest))
      assert(fs.mkdirp(outside))
      write(outside .. "/authorized_keys", "mine")
      assert(os.execute("ln -s '" .. outside .. "' '" .. dest .. "/link'") == 0)
      local payload = { path = "x", data = "evil key" }
      local cases = {
        -- file share: the name is the target under DEST
        { m = craft("../outside/authorized_keys", "file", { payload }), dest = dest },
        { m = craft("sub/../../outside/new1", "file", { payload }), dest = dest },
        { m = craft("link/new2", "file", { payload }), dest = dest },
        -- an absolute name with no DEST given
        { m = craft(outside .. "/new3", "dir", { payload }), dest = nil },
        { m = craft(outside .. "/new4", "file", { payload }), dest = nil },
        -- a directory share through a link that was already in DEST
        { m = craft("d", "dir", { { path = "link/new5", data = "evil" } }), dest = dest },
        { m = craft("d", "dir", { { path = "link/authorized_keys", data = "evil" } }), dest = dest },
      }
      for i, c in ipairs(cases) do
        local key, srv = hostile(a, manifest.encode(c.m), c.m.files)
        local r, msg, code = share.fetch(b, key, c.dest, { timeout = 20000 })
        srv:close({ fast = true })
        assert(r == nil, "case " .. i .. " fetched")
        assert(type(msg) == "string" and type(code) == "string", "case " .. i .. ": no error")
        assert.are.same({ "authorized_keys" }, listing(outside))
        assert.are.equal("mine", read(outside .. "/authorized_keys"))
        -- refused before anything was written
        assert.are.same({ "link" }, listing(dest))
      end
    end, 120000))

    it("never replaces a file it did not create, unless told to (force)", run(function()
      net()
      local dest = newdir()
      write(dest .. "/notes.txt", "my notes")
      local m = craft("d", "dir", { { path = "new.txt", data = "new" }, { path = "notes.txt", data = "their notes" } })
      local key, srv = hostile(a, manifest.encode(m), m.files)
      local r, msg, code = share.fetch(b, key, dest)
      assert.is_nil(r)
      assert.are.equal("EEXIST", code)
      assert.matches("notes.txt", msg)
      assert.are.equal("my notes", read(dest .. "/notes.txt"))
      assert.are.same({ "notes.txt" }, listing(dest))
      -- a file share onto an existing file: the same
      local f = craft("one.txt", "file", { { path = "one.txt", data = "theirs" } })
      local key2, srv2 = hostile(a, manifest.encode(f), f.files)
      r, msg, code = share.fetch(b, key2, dest .. "/notes.txt")
      assert.is_nil(r)
      assert.are.equal("EEXIST", code)
      assert.are.equal("my notes", read(dest .. "/notes.txt"))
      -- with force, both go through
      r = assert(share.fetch(b, key, dest, { force = true }))
      assert.are.equal("their notes", read(dest .. "/notes.txt"))
      assert.are.equal("new", read(dest .. "/new.txt"))
      srv:close({ fast = true })
      srv2:close({ fast = true })
    end, 60000))
  end)

  it("refuses a link swapped into DEST while fetching", run(function()
    net()
    local base = newdir()
    local dest, outside = base .. "/dest", base .. "/outside"
    assert(fs.mkdirp(outside))
    local m = craft("d", "dir", { { path = "a/one", data = "1" }, { path = "b/two", data = "2" } })
    local key, srv = hostile(a, manifest.encode(m), m.files)
    local r, msg, code = share.fetch(b, key, dest, {
      window = 1,
      on_file = function(p)
        if p == "a/one" then assert(os.execute("ln -s '" .. outside .. "' '" .. dest .. "/b'") == 0) end
      end,
    })
    srv:close({ fast = true })
    assert.is_nil(r)
    assert.are.equal("ELOOP", code)
    assert.matches("link", msg)
    assert.are.same({}, listing(outside))
  end, 60000))

  describe("manifest bounds", function()
    -- one path of n components of one byte each: "a/a/.../a"
    local function deep(n, i) return string.char(97 + i % 26, 97 + math.floor(i / 26) % 26) .. string.rep("/a", n - 1) end

    it("checks a path set in memory linear in its size (no prefix kept per path)", function()
      -- 250 paths of 2,047 components (4 KiB each): ~1 MB of paths
      local list = {}
      for i = 1, 250 do list[i] = deep(2047, i) end
      collectgarbage()
      collectgarbage("stop")
      local before = collectgarbage("count")
      local ok = pcall(paths.check_set, list)
      local grew = collectgarbage("count") - before
      collectgarbage("restart")
      collectgarbage()
      -- checking costs a few times the input at most, and paths that deep are refused
      assert(grew < 16 * 1024, string.format("checking 1 MB of paths took %.0f MB", grew / 1024))
      assert.is_false(ok and paths.check_set(list) == true)
      -- a wide, legal set is linear too
      list = {}
      for i = 1, 20000 do list[i] = "dir" .. (i % 50) .. "/sub" .. (i % 7) .. "/f" .. i end
      assert.is_true(paths.check_set(list))
    end)

    it("refuses too deep, too many, or too large before anything is written", run(function()
      net()
      local dest = newdir()
      local function try(m, opts)
        local key, srv = hostile(a, type(m) == "string" and m or manifest.encode(m), type(m) == "table" and m.files or {})
        local r, msg, code = share.fetch(b, key, dest .. "/x", opts)
        srv:close({ fast = true })
        assert.is_nil(r)
        assert.are.same({}, listing(dest))
        return msg, code
      end
      local one = { data = "z" }
      local msg, code = try(craft("d", "dir", { { path = deep(200, 1), data = "z" } }))
      assert.are.equal("EPROTO", code)
      assert.matches("components", msg)
      local many = {}
      for i = 1, 101 do many[i] = { path = "f" .. i, data = one.data } end
      msg, code = try(craft("d", "dir", many), { max_files = 100 })
      assert.matches("files", msg)
      msg, code = try(craft("d", "dir", many), { max_manifest = 4096 })
      assert.are.equal("EPROTO", code)
      assert.matches("manifest", msg)
    end, 60000))

    it("refuses a DATA message larger than the protocol's at once", run(function()
      net()
      local m = craft("d", "dir", { { path = "f", data = string.rep("q", 100000) } })
      local key, srv = hostile(a, manifest.encode(m), m.files, {
        after_hello = function(conn)
          conn:write(wire.manifest(manifest.encode(m)))
          local rd = wire.reader(conn, wire.CLIENT_MESSAGE_MAX)
          local k, bytes = rd:next(10000)
          if k ~= wire.GET then return conn:close() end
          local g = wire.decode(k, bytes)
          -- announce 32 MiB of DATA, send a little, then stall
          local head = wire.data(g.id, g.file, 0, string.rep("q", 1000))
          local len = 32 * 1024 * 1024
          conn:write(string.char(len % 256, math.floor(len / 256) % 256, math.floor(len / 65536) % 256, math.floor(len / 16777216)) .. head:sub(5))
          while rd:next(60000) do end
          conn:close()
        end,
      })
      local dest = newdir() .. "/d"
      local t0 = ludx.now()
      local r, msg, code = share.fetch(b, key, dest)
      assert.is_nil(r)
      assert.are.equal("EPROTO", code)
      assert.matches("limit", msg)
      -- at once: not after the read timeout
      assert(ludx.now() - t0 < 20000, "took " .. (ludx.now() - t0) .. " ms")
      srv:close({ fast = true })
    end, 60000))
  end)
end)
