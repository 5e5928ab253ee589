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

local write, read = H.write_file, H.read_file

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
      if opts.corrupt and g.offset == opts.corrupt then data = ("!"):rep(#data) end
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
      assert.is_string(msg)
      assert.are.equal("EEXIST", code)
      assert.are.equal("my notes", read(dest .. "/notes.txt"))
      -- with force, both go through
      assert(share.fetch(b, key, dest, { force = true }))
      assert.are.equal("their notes", read(dest .. "/notes.txt"))
      assert.are.equal("new", read(dest .. "/new.txt"))
      srv:close({ fast = true })
      srv2:close({ fast = true })
    end, 60000))
  end)

  it("refuses a link swapped into DEST while fetching", run(function()
    net()
    -- b/ not made yet, or a/ made for the first file and swapped after it
    for _, case in ipairs({ { "a/one", "b/two", "b" }, { "a/one", "a/two", "a" } }) do
      local base = newdir()
      local dest, outside = base .. "/dest", base .. "/outside"
      assert(fs.mkdirp(outside))
      local m = craft("d", "dir", { { path = case[1], data = "1" }, { path = case[2], data = "2" } })
      local key, srv = hostile(a, manifest.encode(m), m.files)
      local r, msg, code = share.fetch(b, key, dest, {
        window = 1,
        on_file = function(p)
          if p == case[1] then
            assert(os.execute("rm -rf '" .. dest .. "/" .. case[3] .. "' && ln -s '" .. outside .. "' '" .. dest .. "/" .. case[3] .. "'") == 0)
          end
        end,
      })
      srv:close({ fast = true })
      assert.is_nil(r)
      assert.are.equal("ELOOP", code)
      assert.matches(case[3] == "b" and "a link" or "a symbolic link inside DEST", msg)
      assert.are.same({}, listing(outside))
    end
  end, 60000))

  it("writes no partial file outside DEST when its folder is swapped for a link", run(function()
    net()
    local had = core.fs_openat2()
    for _, on in ipairs(had and { true, false } or { false }) do
      core.fs_openat2(on)
      local base = newdir()
      local dest, outside = base .. "/dest", base .. "/outside"
      assert(fs.mkdirp(outside))
      local m = craft("d", "dir", { { path = "a/one", data = "1" }, { path = "b/two", data = ("2"):rep(3 * CHUNK) } })
      local key, srv = hostile(a, manifest.encode(m), m.files)
      -- after the first file: .ludx-partial becomes a link to outside; each
      -- chunk written since is looked for there
      local seen = {}
      local r, msg, code = share.fetch(b, key, dest, {
        window = 1,
        on_file = function(p)
          if p == "a/one" then
            assert(os.execute("rm -rf '" .. dest .. "/.ludx-partial' && ln -s '" .. outside .. "' '" .. dest .. "/.ludx-partial'") == 0)
          end
        end,
        progress = {
          start = function() end, finish = function() end, stop = function() end,
          update = function() for _, e in ipairs(listing(outside)) do seen[#seen + 1] = e end end,
        },
      })
      core.fs_openat2(had)
      srv:close({ fast = true })
      assert.are.same({}, seen)
      assert.are.same({}, listing(outside))
      assert.is_nil(r)
      assert.are.equal("ELOOP", code)
      assert.matches("symbolic link inside DEST", msg)
    end
  end, 60000))

  it("keeps only verified chunks when a server sends bytes that do not match", run(function()
    net()
    local data = string.rep("0123456789abcdef", 4 * CHUNK / 16)
    local m = craft("d", "dir", { { path = "f", data = data } })
    local key, srv = hostile(a, manifest.encode(m), m.files, { corrupt = 2 * CHUNK })
    local dest = newdir()
    local r, msg, code = share.fetch(b, key, dest, { window = 1 })
    srv:close({ fast = true })
    assert.is_nil(r)
    assert.are.equal("EVERIFY", code)
    assert.matches("chunk 3", msg)
    local L = require("ludx.share.store").layout(assert(manifest.decode(manifest.encode(m))), dest)
    assert.are.equal(2 * CHUNK, fs.stat(L.files[1].part).size)
    assert.is_nil(fs.stat(dest .. "/f"))
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
      assert.are.equal("EPROTO", code)
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

describe("attack: share server", function()
  local tn, a, b

  after_each(function()
    if tn then tn:destroy() end
    tn = nil
  end)
  teardown(function()
    for _, d in ipairs(dirs) do os.execute("rm -rf '" .. d .. "'") end
  end)

  local function net()
    tn = assert(dht.testnet(3, { timeout = 20000 }))
    a = assert(tn:create_node())
    b = assert(tn:create_node())
  end

  -- A raw client: HELLO, the manifest, then GET for each {file, offset,
  -- length}; every DATA payload joined, and the ERROR message if one came.
  local function raw_get(node, key, gets)
    local conn = assert(node:connect(key))
    assert(conn:write(wire.hello()))
    local rd = wire.reader(conn, wire.SERVER_MESSAGE_MAX)
    local kind, bytes = rd:next(10000)
    assert.are.equal(wire.MANIFEST, kind)
    local m = assert(manifest.decode(wire.decode(kind, bytes).encoded))
    for i, g in ipairs(gets) do assert(conn:write(wire.get(i, g[1], g[2], g[3]))) end
    local got, err = {}, nil
    while true do
      local k, b2 = rd:next(10000)
      if not k then break end
      local msg = wire.decode(k, b2)
      if k == wire.DATA then got[#got + 1] = msg.payload end
      if k == wire.ERROR then
        err = msg.message
        break
      end
    end
    conn:close()
    return table.concat(got), err, m
  end

  describe("serves only the regular files it hashed", function()
    it("leaves out a symbolic link in the shared folder and never serves it", run(function()
      net()
      local base = newdir()
      local src, outside = base .. "/src", base .. "/outside"
      write(outside .. "/secret", "SECRET-BYTES")
      write(src .. "/ok.txt", "ok")
      assert(os.execute("ln -s '" .. outside .. "/secret' '" .. src .. "/leak'") == 0)
      assert(os.execute("ln -s '" .. outside .. "' '" .. src .. "/dirleak'") == 0)
      local s = assert(share.serve(a, src))
      local names = {}
      for _, f in ipairs(s.manifest.files) do names[#names + 1] = f.path end
      assert.are.same({ "ok.txt" }, names)
      assert.are.equal(2, #s.manifest.skipped)
      local dest = newdir() .. "/copy"
      assert(share.fetch(b, s.key, dest))
      assert.are.same({ "ok.txt" }, listing(dest))
      s:close({ fast = true })
    end, 60000))

    it("does not serve a link, a dir link or another file swapped in after hashing", run(function()
      net()
      local base = newdir()
      local src, outside = base .. "/src", base .. "/outside"
      local secret = "SECRET-" .. string.rep("s", 993)
      write(outside .. "/secret", secret)
      write(outside .. "/d/f", secret)
      write(src .. "/a", string.rep("a", #secret))
      write(src .. "/b", string.rep("b", #secret))
      write(src .. "/d/f", string.rep("f", #secret))
      local s = assert(share.serve(a, src))
      assert.are.same({ "a", "b", "d/f" }, { s.manifest.files[1].path, s.manifest.files[2].path, s.manifest.files[3].path })
      -- after hashing: a becomes a link to the secret, b another file with
      -- the secret's bytes, d a link to a folder holding the same name
      os.remove(src .. "/a")
      assert(os.execute("ln -s '" .. outside .. "/secret' '" .. src .. "/a'") == 0)
      os.remove(src .. "/b")
      write(src .. "/b", secret)
      assert(os.execute("rm -rf '" .. src .. "/d' && ln -s '" .. outside .. "/d' '" .. src .. "/d'") == 0)
      for i = 0, 2 do
        local data, err = raw_get(b, s.key, { { i, 0, #secret } })
        assert.is_nil(data:find("SECRET", 1, true), "file " .. i .. " leaked")
        assert.is_string(err, "file " .. i .. ": no error")
      end
      s:close({ fast = true })
    end, 60000))
  end)

  -- A local user who can write inside the shared folder swaps a folder for
  -- a link to one outside it, at a fixed point of the walk or of the
  -- hashing (hooks, no race). Both ways of resolving a path run: openat2
  -- (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) and the O_NOFOLLOW walk.
  describe("a folder swapped for a link while sharing", function()
    local had = core.fs_openat2()
    local modes = had and { true, false } or { false }
    after_each(function() core.fs_openat2(had) end)

    local function tree()
      local base = newdir()
      local src, outside = base .. "/src", base .. "/outside"
      local secret = "SECRET-" .. string.rep("s", 100)
      write(outside .. "/f", secret)
      write(outside .. "/g", secret)
      write(src .. "/a.txt", "first file, hashed before sub/f")
      write(src .. "/sub/f", "inside")
      local function swap()
        assert(os.execute("rm -rf '" .. src .. "/sub' && ln -s '" .. outside .. "' '" .. src .. "/sub'") == 0)
      end
      return src, outside, secret, swap
    end

    local function no_secret(m, secret)
      for _, f in ipairs(m.files) do
        assert.are_not.equal(blake2b(secret, 64), f.hash, f.path .. " holds bytes from outside the folder")
        assert.is_nil(f.path:match("^sub/"), f.path .. " listed from outside the folder")
      end
    end

    it("lists nothing outside when the swap comes between two entries of the walk", function()
      for _, on in ipairs(modes) do
        core.fs_openat2(on)
        local src, _, secret, swap = tree()
        local m = assert(manifest.build(src, {
          _on_entry = function(path, t)
            if path == "sub" and t == "directory" then swap() end
          end,
        }))
        no_secret(m, secret)
        assert.are.same({ "a.txt" }, { m.files[1].path, m.files[2] and m.files[2].path })
        assert.are.equal("sub", m.skipped[1] and m.skipped[1].path)
        manifest.close(m)
      end
    end)

    it("hashes nothing outside when the swap comes between the walk and the hashing", function()
      for _, on in ipairs(modes) do
        core.fs_openat2(on)
        local src, _, secret, swap = tree()
        local swapped = false
        local m, msg = manifest.build(src, {
          on_bytes = function()
            if not swapped then
              swapped = true
              swap()
            end
          end,
        })
        assert.is_true(swapped)
        if m then no_secret(m, secret) end
        assert.is_nil(m)
        assert.matches("sub/f", msg, 1, true)
      end
    end)

    it("serves nothing outside when the swap comes after hashing", run(function()
      net()
      for _, on in ipairs(modes) do
        core.fs_openat2(on)
        local src, _, _, swap = tree()
        local s = assert(share.serve(a, src))
        assert.are.equal("sub/f", s.manifest.files[2].path)
        swap()
        local data, err = raw_get(b, s.key, { { 1, 0, 6 } })
        assert.are.equal("", data)
        assert.matches("symbolic link", err)
        s:close({ fast = true })
      end
    end, 60000))

    it("follows a link given as the root (the user's choice), never one below it", run(function()
      net()
      local src, outside, secret = tree()
      local base = src:match("^(.*)/src$")
      assert(os.execute("ln -s '" .. outside .. "' '" .. src .. "/sub/out'") == 0)
      assert(os.execute("ln -s src '" .. base .. "/linked' && ln -s src/a.txt '" .. base .. "/linked.txt'") == 0)
      local s = assert(share.serve(a, base .. "/linked"))
      assert.are.equal("src", s.manifest.name)
      assert.are.same({ "a.txt", "sub/f" }, { s.manifest.files[1].path, s.manifest.files[2].path })
      local dest = newdir() .. "/copy"
      assert(share.fetch(b, s.key, dest))
      assert.are.same({ "a.txt", "sub", "sub/f" }, listing(dest))
      assert.is_truthy(s.manifest.root)
      s:close({ fast = true })
      while s.active > 0 do ludx.sleep(5) end -- the transfer's end (bounded by the test's timeout)
      assert.is_nil(s.manifest.root, "the folder a share built itself is let go with it")
      -- a file root given as a link: the file it points to
      local one = assert(share.serve(a, base .. "/linked.txt"))
      assert.are.equal("a.txt", one.manifest.name)
      local got = assert(share.fetch(b, one.key, newdir() .. "/one.txt"))
      assert.is_truthy(got)
      one:close({ fast = true })
      assert.is_nil(read(dest .. "/sub/out/f"))
      assert.is_nil((read(dest .. "/sub/f") or ""):find(secret, 1, true))
    end, 60000))

    it("walks at most max_entries entries, and holds no folder open after it", function()
      local d = newdir()
      for i = 1, 6 do write(d .. "/sub/f" .. i, "x") end
      -- fds of this process (Linux) open on the folder or below it. Not a
      -- count of all fds: streams of earlier tests may still be closing
      local real = assert(core.fs_realpath(d))
      local function held()
        local n = 0
        for _, fd in ipairs(core.fs_scandir("/proc/self/fd") or {}) do
          local to = core.fs_realpath("/proc/self/fd/" .. fd.name)
          if to and to:sub(1, #real) == real then n = n + 1 end
        end
        return n
      end
      for _ = 1, 20 do
        local m, msg, code = manifest.build(d, { max_entries = 6 })
        assert.is_nil(m)
        assert.are.equal("E2BIG", code)
        assert.matches("max_entries", msg)
        m = assert(manifest.build(d, { max_entries = 7 }))
        assert.are.equal(6, #m.files)
        manifest.close(m)
        manifest.close(m)
      end
      assert.are.equal(0, held())
    end)
  end)

  describe("resource caps", function()
    local function src_share(size, opts)
      local src = newdir()
      write(src .. "/big", string.rep("x", size))
      return assert(share.serve(a, src .. "/big", opts))
    end

    -- HELLO, then the manifest or the ERROR that came instead
    local function hello(node, key, kp)
      local conn, msg, code = node:connect(key, { keypair = kp })
      if not conn then return nil, msg, code end
      conn:write(wire.hello())
      local rd = wire.reader(conn, wire.SERVER_MESSAGE_MAX)
      local kind, bytes, c = rd:next(10000)
      if kind == wire.MANIFEST then return conn end
      conn:close()
      if kind == wire.ERROR then return nil, wire.decode(kind, bytes).message, "EREFUSED" end
      return nil, bytes or "closed", c or "ECONNRESET"
    end

    it("caps connections in all, per peer key and per address", run(function()
      net()
      local refused = 0
      local s = src_share(10, { max_connections = 4, max_per_peer = 2, max_per_address = 3, on_event = function(ev) if ev == "refuse" then refused = refused + 1 end end })
      local k1, k2, k3 = dht.keypair(), dht.keypair(), dht.keypair()
      local open = {}
      open[1] = assert(hello(b, s.key, k1))
      open[2] = assert(hello(b, s.key, k1))
      -- a third from the same key is refused
      assert.is_nil((hello(b, s.key, k1)))
      open[3] = assert(hello(b, s.key, k2))
      -- all from 127.0.0.1: the fourth from this address is refused
      assert.is_nil((hello(b, s.key, k3)))
      for _, c in ipairs(open) do c:close() end
      -- closed ones make room again once the server has seen the resets
      -- (a refused handshake is silent, as hyperdht's: each costs the
      -- client its connect timeout, so wait for the room, then connect)
      for _ = 1, 1500 do
        if s.active == 0 then break end
        ludx.sleep(20)
      end
      assert.are.equal(0, s.active)
      local again = assert(hello(b, s.key, k3))
      again:close()
      assert(s.server and s.active <= 4)
      s:close({ fast = true })
    end, 180000))

    it("cuts off a reader that takes no bytes (write stall), and an idle one", run(function()
      net()
      local closed = {}
      local s = src_share(12 * 1024 * 1024, {
        write_timeout = 300, idle_timeout = 300,
        on_event = function(ev, info) if ev == "close" then closed[#closed + 1] = tostring(info.error) end end,
      })
      -- asks for everything and never reads
      local conn = assert(hello(b, s.key))
      for i = 0, 11 do assert(conn:write(wire.get(i, 0, i * 1048576, 1048576))) end
      -- says HELLO and never asks
      local idle = assert(hello(b, s.key))
      for _ = 1, 1000 do
        if #closed >= 2 then break end
        ludx.sleep(20)
      end
      table.sort(closed)
      assert.are.equal(2, #closed)
      assert.matches("idle", closed[1])
      assert.matches("no bytes", closed[2])
      conn:close()
      idle:close()
      s:close({ fast = true })
    end, 60000))

    it("refuses a client with too many requests waiting", run(function()
      net()
      local s = src_share(1000, { max_queued = 16 })
      local conn = assert(hello(b, s.key))
      local flood = {}
      for i = 1, 200 do flood[i] = wire.get(i, 0, 0, 1000) end
      assert(conn:write(table.concat(flood)))
      local rd = wire.reader(conn, wire.SERVER_MESSAGE_MAX)
      local last, datas = nil, 0
      while true do
        local k, bytes = rd:next(10000)
        if not k then break end
        if k == wire.DATA then datas = datas + 1 end
        last = wire.decode(k, bytes)
      end
      assert.are.equal(wire.ERROR, last and last.kind)
      assert.matches("requests waiting", last.message)
      assert(datas < 200)
      conn:close()
      s:close({ fast = true })
    end, 60000))

    it("holds at most write_limit bytes per slow reader", run(function()
      net()
      local conns = {}
      local limit = 256 * 1024
      local s = src_share(16 * 1024 * 1024, { write_limit = limit, write_timeout = 60000, on_connection = function(c) conns[#conns + 1] = c end })
      local readers = {}
      for r = 1, 4 do
        local c = assert(hello(b, s.key, dht.keypair()))
        for i = 0, 15 do assert(c:write(wire.get(i, 0, i * 1048576, 1048576))) end
        readers[r] = c
      end
      -- the readers' windows close; then what each server connection queues stops growing
      local function queued()
        local q = 0
        for _, c in ipairs(conns) do q = math.max(q, tonumber(c.udx_stream:stats_struct().write_queued)) end
        return q
      end
      local stable, last, peak = 0, -1, 0
      for _ = 1, 2000 do
        local q = queued()
        peak = math.max(peak, q)
        if q == last then stable = stable + 1 else stable = 0 end
        last = q
        if stable >= 25 or peak > 4 * limit then break end
        ludx.sleep(20)
      end
      assert(peak <= limit + 2 * 64064, "a slow reader holds " .. peak .. " bytes")
      for _, c in ipairs(readers) do c:close() end
      s:close({ fast = true })
    end, 60000))
  end)
end)
