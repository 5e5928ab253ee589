-- Chunk scheduling for a share of many files (ludx.policy.schedule): every
-- chunk handed out once, in order within a file; the order decides which
-- files complete first in a real fetch.
local dht = require "ludx.dht"
local share = require "ludx.share"
local schedule = require "ludx.policy.schedule"
local fs = require "ludx.fs"
local H = require "helper"
local run = H.run

local dirs = {}
local function newdir()
  local d = os.tmpname()
  os.remove(d)
  assert(fs.mkdirp(d))
  dirs[#dirs + 1] = d
  return d
end

local function write(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

local function bytes(n, seed)
  return require("ludx.core").crypto.randombytes(n, string.rep(string.char(seed), 32))
end

describe("policy schedule", function()
  teardown(function()
    for _, d in ipairs(dirs) do os.execute("rm -rf '" .. d .. "'") end
  end)

  describe("orders", function()
    local items = {
      { file = 1, first = 1, count = 3, size = 300 },
      { file = 2, first = 1, count = 1, size = 100 },
      { file = 3, first = 2, count = 2, size = 900 },
    }
    local function all(order, opts)
      local s = schedule.new(order, items, opts)
      local out = {}
      while true do
        local f, c = s:next()
        if not f then break end
        out[#out + 1] = f .. ":" .. c
      end
      return out
    end
    it("hands out every chunk once, in file order within a file", function()
      assert.are.same({ "1:1", "1:2", "1:3", "2:1", "3:2", "3:3" }, all("sequential"))
      assert.are.same({ "2:1", "1:1", "1:2", "1:3", "3:2", "3:3" }, all("smallest"))
      assert.are.same({ "3:2", "3:3", "1:1", "1:2", "1:3", "2:1" }, all("largest"))
      assert.are.same({ "1:1", "2:1", "3:2", "1:2", "3:3", "1:3" }, all("interleave", { spread = 3 }))
      assert.has_error(function() schedule.new("random", items) end)
      local line = debug.getinfo(1, "l").currentline + 1
      local ok, err = pcall(schedule.new, "interleave", items, { spread = 0 })
      assert.is_false(ok)
      assert.is_truthy(err:find("policy_schedule_spec.lua:" .. line .. ": bad argument 'opts.spread' to 'schedule.new' " ..
        "(number >= 1 expected, got number 0)", 1, true), err)
    end)
  end)

  describe("in a fetch", function()
    local tn, a, b
    local function net()
      tn = assert(dht.testnet(3, { timeout = 20000 }))
      a = assert(tn:create_node())
      b = assert(tn:create_node())
    end

    it("fetches small files first with order 'smallest'", run(function()
      net()
      local src = newdir()
      write(src .. "/a-large", bytes(200000, 5))
      write(src .. "/b-small", "s")
      write(src .. "/c-medium", bytes(70000, 6))
      local s = assert(share.serve(a, src, { chunk_size = 65536 }))
      local order = {}
      assert(share.fetch(b, s.key, newdir(), { order = "smallest", on_file = function(p) order[#order + 1] = p end }))
      assert.are.same({ "b-small", "c-medium", "a-large" }, order)
      order = {}
      assert(share.fetch(b, s.key, newdir(), { order = "sequential", on_file = function(p) order[#order + 1] = p end }))
      assert.are.same({ "a-large", "b-small", "c-medium" }, order)
      s:close({ fast = true })
      tn:destroy()
    end, 60000))


    it("interleave keeps several files going at once", run(function()
      net()
      local src = newdir()
      write(src .. "/f1", bytes(4 * 16384, 1)) -- four chunks, then one each
      for i = 2, 4 do write(src .. "/f" .. i, bytes(16384, i)) end
      local s = assert(share.serve(a, src, { chunk_size = 16384 }))
      local function order_of(how)
        local order = {}
        assert(share.fetch(b, s.key, newdir(), { order = how, spread = 4, window = 1, on_file = function(p) order[#order + 1] = p end }))
        return order
      end
      assert.are.same({ "f1", "f2", "f3", "f4" }, order_of("sequential"))
      -- round robin: the one-chunk files finish in the first round
      assert.are.same({ "f2", "f3", "f4", "f1" }, order_of("interleave"))
      local seq = {}
      local sched = schedule.new("interleave", { { file = 1, first = 1, count = 2 }, { file = 2, first = 1, count = 2 } })
      for _ = 1, 4 do seq[#seq + 1] = table.concat({ sched:next() }, ":") end
      assert.are.same({ "1:1", "2:1", "1:2", "2:2" }, seq)
      s:close({ fast = true })
      tn:destroy()
    end, 60000))
  end)
end)
