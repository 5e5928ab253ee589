local ludx = require "ludx"
local tcp = require "ludx.tcp"
local H = require "helper"
local run = H.run

describe("tcp", function()
  it("connects, moves bytes both ways and ends each half", run(function()
    local server = assert(tcp.listen("127.0.0.1", 0))
    local _, port = server:address()
    local echo = ludx.spawn("echo", function()
      local c = assert(server:accept(5000))
      while true do
        local data = c:read(nil, 5000)
        if not data then break end
        assert(c:write(data))
      end
      assert(c:finish(5000))
      c:close()
    end)
    local c = assert(tcp.connect("127.0.0.1", port, 5000))
    local gen = ludx.core.datagen(3)
    local payload = gen:next(3 * 1024 * 1024)
    ludx.spawn("writer", function()
      assert(c:write(payload))
      assert(c:finish(5000))
    end)
    local parts = {}
    while true do
      local data, msg, code = c:read(nil, 10000)
      if not data then
        assert.is_nil(code, msg)
        break
      end
      parts[#parts + 1] = data
    end
    assert.is_true(table.concat(parts) == payload)
    echo:join(5000)
    c:close()
    server:close()
  end))

  it("reports a refused connection and a read timeout", run(function()
    local server = assert(tcp.listen("127.0.0.1", 0))
    local _, port = server:address()
    server:close()
    ludx.sleep(10)
    local c, _, code = tcp.connect("127.0.0.1", port, 5000)
    assert.is_nil(c)
    assert.are.equal("ECONNREFUSED", code)
    local s2 = assert(tcp.listen("127.0.0.1", 0))
    local _, p2 = s2:address()
    local c2 = assert(tcp.connect("localhost", p2, 5000))
    assert.are.same({ nil, "timed out", "ETIMEDOUT" }, { c2:read(nil, 10) })
    local _, err = pcall(c2.write, c2, 42)
    assert.matches("bad argument 'data' to 'write'", err)
    c2:close()
    s2:close()
  end))
end)
