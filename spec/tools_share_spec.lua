-- ludx.share in one process over a loopback testnet: manifests, hostile
-- paths and messages, whole fetches, resume from partial files, orders.
local dht = require "ludx.dht"
local share = require "ludx.share"
local manifest = require "ludx.share.manifest"
local paths = require "ludx.share.paths"
local wire = require "ludx.share.wire"
local store = require "ludx.share.store"
local fs = require "ludx.fs"
local H = require "helper"
local run = H.run

local tmpdir = H.tmpdir

local write, read = H.write_file, H.read_file

-- deterministic bytes
local function bytes(n, seed)
  return require("ludx.core").crypto.randombytes(n, string.rep(string.char(seed), 32))
end

local dirs = {}
local function newdir()
  local d = tmpdir()
  dirs[#dirs + 1] = d
  return d
end

describe("ludx.share", function()
  teardown(function()
    for _, d in ipairs(dirs) do os.execute("rm -rf '" .. d .. "'") end
  end)

  describe("paths", function()
    it("accepts relative paths of plain names", function()
      for _, p in ipairs({ "a", "a/b.txt", "dir/sub/file with spaces", "ünïcode/名前", ".hidden", "a..b" }) do
        assert.are.equal(p, (paths.check(p)))
      end
    end)

    it("rejects absolute, dotted, empty and odd paths", function()
      local bad = { "", "/etc/passwd", "../x", "a/../../x", "a/./b", "a//b", "a/", ".", "..", "a\0b", "a\nb", "a\\b",
        "C:/x", "c:", ".ludx-partial/x", string.rep("a", 256), string.rep("a/", 2100) .. "a" }
      for _, p in ipairs(bad) do
        local ok, why = paths.check(p)
        assert(ok == nil and type(why) == "string", "accepted " .. p:sub(1, 40))
      end
      assert.is_nil(paths.check(42))
    end)

    it("rejects a set with duplicates or a file inside a file", function()
      assert.is_true(paths.check_set({ "a/b", "a/c", "b" }))
      assert.is_nil(paths.check_set({ "a", "a" }))
      assert.is_nil(paths.check_set({ "a", "a/b" }))
      assert.is_nil(paths.check_set({ "a/b", "a" }))
    end)
  end)

  describe("manifest", function()
    it("hashes files as b2sum does and round-trips", function()
      local d = newdir()
      write(d .. "/x/one.bin", bytes(40000, 1))
      write(d .. "/two.txt", "two")
      write(d .. "/empty", "")
      local totals, hashed = {}, 0
      local m = assert(manifest.build(d, {
        chunk_size = 16384,
        on_total = function(n) totals[#totals + 1] = { n, hashed } end,
        on_bytes = function(n) hashed = hashed + n end,
      }))
      -- the total is told once, before any byte is hashed, from the same walk
      assert.are.same({ { 40003, 0 } }, totals)
      assert.are.equal(40003, hashed)
      assert.has_error(function() manifest.build(d, { on_total = 5 }) end,
        "bad argument 'opts.on_total' to 'manifest.build' (function expected, got number)")
      assert.are.equal("dir", m.kind)
      assert.are.equal(3, #m.files)
      assert.are.same({ "empty", "two.txt", "x/one.bin" }, { m.files[1].path, m.files[2].path, m.files[3].path })
      assert.are.equal(40003, m.total)
      assert.are.equal(0, m.files[1].nchunks)
      assert.are.equal(3, m.files[3].nchunks)
      local b2 = require("ludx.core").crypto.blake2b
      assert.are.equal(b2("two", 64), m.files[2].hash)
      assert.are.equal(b2(bytes(40000, 1):sub(16385, 32768), 32), m.files[3].chunks[2])
      local back = assert(manifest.decode(m.encoded))
      assert.are.equal(m.id, back.id)
      for i, f in ipairs(m.files) do
        assert.are.equal(f.path, back.files[i].path)
        assert.are.equal(f.hash, manifest.hash(back, back.files[i]))
        assert.are.equal(f.nchunks, back.files[i].nchunks)
        for j = 1, f.nchunks do assert.are.equal(f.chunks[j], manifest.chunk(back, back.files[i], j)) end
      end
      local one = assert(manifest.build(d .. "/two.txt"))
      assert.are.equal("file", one.kind)
      assert.are.equal("two.txt", one.name)
    end)

    it("leaves out files a fetcher would refuse, and partial downloads", function()
      local d = newdir()
      write(d .. "/ok.txt", "ok")
      write(d .. "/back\\slash", "b")
      write(d .. "/.ludx-partial/abc.part", "partial")
      local m = assert(manifest.build(d))
      assert.are.equal(1, #m.files)
      assert.are.equal("ok.txt", m.files[1].path)
      assert.are.equal(1, #m.skipped)
      assert.are.equal("back\\slash", m.skipped[1].path)
    end)

    it("refuses hostile manifests without raising", function()
      local compact = require "ludx.compact"
      local function enc(files, o)
        o = o or {}
        local w = compact.writer()
        w:uint(o.version or 1):string(o.name or "n"):uint8(o.kind or 2):uint(o.chunk or 65536):uint(o.count or #files)
        for _, f in ipairs(files) do
          w:string(f.path):uint(f.size):fixed64(string.rep("h", 64))
          for _ = 1, f.chunks or math.ceil(f.size / 65536) do w:fixed32(string.rep("c", 32)) end
        end
        return w:finish()
      end
      assert(manifest.decode(enc({ { path = "ok", size = 10 } })))
      local cases = {
        enc({ { path = "../evil", size = 1 } }),
        enc({ { path = "/etc/passwd", size = 1 } }),
        enc({ { path = "a\0b", size = 1 } }),
        enc({ { path = "a", size = 1 }, { path = "a", size = 1 } }),
        enc({ { path = "a", size = 1 }, { path = "a/b", size = 1 } }),
        enc({ { path = "big", size = 2 ^ 60, chunks = 0 } }),
        enc({ { path = "short", size = 200000, chunks = 1 } }),
        enc({}, { count = 5 }),
        enc({}, { version = 9 }),
        enc({}, { kind = 7 }),
        enc({}, { chunk = 10 }),
        enc({}, { name = ".." }),
        enc({ { path = "a", size = 1 }, { path = "b", size = 1 } }, { kind = 1 }),
        enc({ { path = "ok", size = 10 } }) .. "x",
        "", "\255", string.rep("\255", 40),
      }
      for i, s in ipairs(cases) do
        local ok, m, why = pcall(manifest.decode, s)
        assert(ok, "case " .. i .. " raised: " .. tostring(m))
        assert(m == nil and type(why) == "string", "case " .. i .. " was accepted")
      end
    end)
  end)

  describe("commands", function()
    it("refuse bad values for the caps", function()
      local share_cmd, fetch_cmd = require "ludx.cmd.share", require "ludx.cmd.fetch"
      local stderr = io.stderr
      io.stderr = { write = function() end } -- luacheck: ignore
      local codes = {
        share_cmd.main({ "--max-connections", "0", "." }),
        share_cmd.main({ "--max-per-peer", "x", "." }),
        share_cmd.main({ "--write-limit", "-1", "." }),
        share_cmd.main({ "--write-timeout", "1.5", "." }),
        fetch_cmd.main({ "--max-files", "0", string.rep("a", 64) }),
        fetch_cmd.main({ "--max-manifest", "12Q", string.rep("a", 64) }),
      }
      io.stderr = stderr -- luacheck: ignore 122
      assert.are.same({ 1, 1, 1, 1, 1, 1 }, codes)
    end)
  end)

  describe("wire", function()
    it("decodes truncated and unknown messages to errors", function()
      local get = wire.get(1, 2, 3, 4)
      local body = get:sub(5)
      local m = assert(wire.decode(body:byte(1), body))
      assert.are.same({ 1, 2, 3, 4 }, { m.id, m.file, m.offset, m.length })
      for cut = 1, #body - 1 do
        assert.is_nil((wire.decode(body:byte(1), body:sub(1, cut))))
      end
      assert.is_nil((wire.decode(99, "\99")))
    end)

    it("reads messages across chunk boundaries and refuses oversized ones", run(function()
      local chunks = {}
      local all = wire.hello() .. wire.get(7, 0, 0, 100) .. wire.data(7, 0, 0, string.rep("d", 100)) .. wire.error(1, "bye")
      for i = 1, #all, 3 do chunks[#chunks + 1] = all:sub(i, i + 2) end
      local src = { read = function() return table.remove(chunks, 1) end }
      local rd = wire.reader(src, 1000)
      local kinds = {}
      while true do
        local kind, b = rd:next()
        if not kind then break end
        kinds[#kinds + 1] = wire.decode(kind, b).kind
      end
      assert.are.same({ wire.HELLO, wire.GET, wire.DATA, wire.ERROR }, kinds)
      local big = { wire.frame(wire.DATA, string.rep("x", 2000)) }
      local r2 = wire.reader({ read = function() return table.remove(big, 1) end }, 1000)
      local k, msg, code = r2:next()
      assert.is_nil(k)
      assert.are.equal("EPROTO", code)
      assert.is_string(msg)
      local cut = { wire.get(1, 1, 1, 1):sub(1, 6) }
      local r3 = wire.reader({ read = function() return table.remove(cut, 1) end }, 1000)
      k, msg, code = r3:next()
      assert.is_nil(k)
      assert.are.equal("EPROTO", code)
      assert.is_string(msg)
    end))
  end)

  describe("serve and fetch", function()
    local tn, a, b

    local function net()
      tn = assert(dht.testnet(3, { timeout = 20000 }))
      a = assert(tn:create_node())
      b = assert(tn:create_node())
    end

    it("a wrong option raises at the caller's line, naming share.serve and opts.x, before any hashing", function()
      local src = newdir()
      write(src .. "/a", "a")
      local hashed = 0
      local function on_bytes(n) hashed = hashed + n end
      local line = debug.getinfo(1, "l").currentline + 1
      local ok, err = pcall(share.serve, {}, src, { max_queued = 0, on_bytes = on_bytes })
      assert.is_false(ok)
      assert.is_truthy(err:find("tools_share_spec.lua:" .. line .. ": bad argument 'opts.max_queued' to 'share.serve' " ..
        "(number >= 1 expected, got number 0)", 1, true), err)
      line = debug.getinfo(1, "l").currentline + 1
      ok, err = pcall(share.serve, {}, src, { chunk_size = 1000, on_bytes = on_bytes })
      assert.is_false(ok)
      assert.is_truthy(err:find("tools_share_spec.lua:" .. line .. ": bad argument 'opts.chunk_size' to 'share.serve' " ..
        "(integer 16384..16777216 expected, got number 1000)", 1, true), err)
      assert.are.equal(0, hashed)
      assert.has_error(function() manifest.build(src, { max_entries = 0 }) end,
        "bad argument 'opts.max_entries' to 'manifest.build' (integer >= 1 expected, got number 0)")
    end)

    it("fetches a directory, checks every file, and then finds it complete", run(function()
      net()
      local src, dst = newdir(), newdir() .. "/copy"
      write(src .. "/a.bin", bytes(300000, 2))
      write(src .. "/d/e/b.txt", "bee")
      write(src .. "/empty", "")
      local s = assert(share.serve(a, src, { chunk_size = 65536 }))
      local done = {}
      local r = assert(share.fetch(b, s.key, dst, { on_file = function(p) done[#done + 1] = p end }))
      assert.are.equal(3, r.files)
      assert.are.equal(300003, r.received)
      assert.are.equal(bytes(300000, 2), read(dst .. "/a.bin"))
      assert.are.equal("bee", read(dst .. "/d/e/b.txt"))
      assert.are.equal("", read(dst .. "/empty"))
      assert.is_nil(fs.stat(dst .. "/.ludx-partial"))
      assert.are.equal(3, #done)
      -- everything is there already: nothing moves
      local again = assert(share.fetch(b, s.key, dst))
      assert.are.equal(0, again.received)
      assert.are.equal(3, again.skipped)
      s:close({ fast = true })
      tn:destroy()
    end, 60000))

    it("continues from verified chunks of a partial file, and drops bad ones", run(function()
      net()
      local src = newdir()
      local data = bytes(10 * 65536 + 123, 3)
      write(src .. "/big.bin", data)
      local s = assert(share.serve(a, src .. "/big.bin", { chunk_size = 65536 }))
      local dst = newdir()
      local L = store.layout(s.manifest, dst)
      -- 4 good chunks, then garbage where chunk 5 starts
      assert(store.prepare(L))
      write(L.files[1].part, data:sub(1, 4 * 65536) .. string.rep("\0", 70000))
      local r = assert(share.fetch(b, s.key, dst))
      assert.are.equal(#data - 4 * 65536, r.received)
      assert.are.equal(data, read(dst .. "/big.bin"))
      -- a final file that does not match is replaced only when told to
      write(dst .. "/big.bin", string.rep("z", #data))
      local no, _, code = share.fetch(b, s.key, dst)
      assert.is_nil(no)
      assert.are.equal("EEXIST", code)
      r = assert(share.fetch(b, s.key, dst, { force = true }))
      assert.are.equal(#data, r.received)
      assert.are.equal(data, read(dst .. "/big.bin"))
      s:close({ fast = true })
      tn:destroy()
    end, 60000))

    it("stops at a chunk that does not match and keeps only verified bytes", run(function()
      net()
      local src = newdir()
      local data = bytes(6 * 65536, 4)
      write(src .. "/f.bin", data)
      local m = assert(manifest.build(src .. "/f.bin", { chunk_size = 65536 }))
      -- the file changes after it was hashed: chunk 3 no longer matches
      write(src .. "/f.bin", data:sub(1, 2 * 65536) .. string.rep("!", 65536) .. data:sub(3 * 65536 + 1))
      local s = assert(share.serve(a, m))
      local dst = newdir()
      local r, msg, code = share.fetch(b, s.key, dst, { window = 1 })
      assert.is_nil(r)
      -- the server checks a changed file's chunks before it sends them
      assert.are.equal("EREMOTE", code)
      assert.matches("changed", msg)
      local L = store.layout(m, dst)
      assert.are.equal(2 * 65536, fs.stat(L.files[1].part).size)
      assert.is_nil(fs.stat(dst .. "/f.bin"))
      s:close({ fast = true })
      tn:destroy()
    end, 60000))

    it("a file share lands at DEST, or inside DEST when it is a directory", run(function()
      net()
      local src = newdir()
      write(src .. "/one.txt", "one")
      local s = assert(share.serve(a, src .. "/one.txt"))
      local d = newdir()
      local r = assert(share.fetch(b, s.key, d))
      assert.are.equal(d .. "/one.txt", r.target)
      assert(share.fetch(b, s.key, d .. "/renamed.txt"))
      assert.are.equal("one", read(d .. "/renamed.txt"))
      s:close({ fast = true })
      tn:destroy()
    end, 60000))

    it("a server answers junk with an error and goes on serving", run(function()
      net()
      local src = newdir()
      write(src .. "/x", "xyz")
      local events = {}
      local s = assert(share.serve(a, src, { on_event = function(ev, info) events[#events + 1] = ev .. ":" .. tostring(info.error) end }))
      -- a GET before HELLO, and a GET out of range
      for _, first in ipairs({ wire.get(1, 0, 0, 1), wire.hello() .. wire.get(1, 5, 0, 1), wire.hello() .. wire.get(1, 0, 2, 10) }) do
        local conn = assert(b:connect(s.key))
        conn:write(first)
        local rd = wire.reader(conn, wire.SERVER_MESSAGE_MAX)
        local kinds = {}
        while true do
          local kind = rd:next(5000)
          if not kind then break end
          kinds[#kinds + 1] = kind
        end
        assert.are.equal(wire.ERROR, kinds[#kinds])
        conn:close()
      end
      local r = assert(share.fetch(b, s.key, newdir()))
      assert.are.equal(3, r.received)
      s:close({ fast = true })
      tn:destroy()
    end, 60000))
  end)
end)
