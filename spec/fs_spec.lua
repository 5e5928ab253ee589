local fs = require "ludx.fs"

describe("fs", function()
  local root
  before_each(function()
    root = os.tmpname()
    os.remove(root)
  end)
  after_each(function()
    os.execute("rm -rf '" .. root .. "'")
  end)

  it("creates directories with their parents and walks files in order", function()
    assert(fs.mkdirp(root .. "/a/b/c"))
    assert(fs.mkdirp(root .. "/a/b/c"))
    for _, p in ipairs({ "a/b/c/x.bin", "a/z.txt", "a/b/y.txt" }) do
      local f = assert(io.open(root .. "/" .. p, "wb"))
      f:write(string.rep("q", #p))
      f:close()
    end
    local files = assert(fs.walk(root))
    local paths = {}
    for i, f in ipairs(files) do paths[i] = f.path .. ":" .. f.size end
    assert.are.same({ "a/b/c/x.bin:11", "a/b/y.txt:9", "a/z.txt:7" }, paths)
    local st = assert(fs.stat(root .. "/a/z.txt"))
    assert.are.equal("file", st.type)
    assert.are.equal(7, st.size)
    local single = assert(fs.walk(root .. "/a/z.txt"))
    assert.are.equal("z.txt", single[1].path)
  end)

  it("reports errors as nil, msg, code", function()
    local st, msg, code = fs.stat(root .. "/missing")
    assert.is_nil(st)
    assert.is_string(msg)
    assert.are.equal("ENOENT", code)
    local f = assert(io.open(root .. "-file", "w"))
    f:close()
    local ok, _, c2 = fs.mkdirp(root .. "-file/sub")
    assert.is_nil(ok)
    assert.are.equal("ENOTDIR", c2)
    os.remove(root .. "-file")
  end)
end)
