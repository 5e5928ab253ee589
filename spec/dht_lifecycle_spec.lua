-- Clean shutdown and honest errors (issue 14): node:destroy() ends every
-- connection made through the node and the tasks behind them; keys that
-- cannot be reached fail at once with EINVAL; argument errors name the
-- function, the argument and the caller's line.
local ludx = require "ludx"
local dht = require "ludx.dht"
local udx = require "ludx.udx"
local tcp = require "ludx.tcp"
local H = require "helper"
local run = H.run

local function seed(n)
  return string.rep(string.char(n), 32)
end

local function ss_tasks()
  local n = 0
  for _, t in ipairs(ludx.tasks()) do
    if t.name:match("^secretstream") or t.name == "dht connection" then n = n + 1 end
  end
  return n
end

-- This file and the line after the one that calls it.
local function here()
  local info = debug.getinfo(2, "Sl")
  return info.short_src:match("[^/]*$") .. ":" .. (info.currentline + 1) .. ":"
end

describe("dht lifecycle", function()
  it("ludx.run returns after testnet:destroy() though a connection was never finished", function()
    -- not H.run: its cleanup cancels every task, which would hide the bug
    local timed_out, left = false, nil
    local wd
    local ok, msg = ludx.run(function()
      wd = ludx.after(120000, function()
        timed_out = true
        left = {}
        for _, t in ipairs(ludx.tasks()) do
          left[#left + 1] = t.name
          ludx.cancel(t.id, "watchdog")
        end
      end)
      local tn = assert(dht.testnet(3, { timeout = 30000 }))
      local snode = assert(tn:create_node())
      local cnode = assert(tn:create_node())
      local kp = dht.keypair(seed(40))
      local server = snode:server(function(conn)
        conn:write("bye")
        conn:finish(10000)
      end)
      assert(server:listen(kp, 30000))
      -- three clients whose peer ended; none of them calls finish or close
      for _ = 1, 3 do
        local conn = assert(cnode:connect(kp.public_key, { timeout = 30000 }))
        assert.are.equal("bye", conn:read(nil, 30000))
        assert.is_nil(conn:read(nil, 30000))
      end
      assert.is_true(ss_tasks() >= 6)
      tn:destroy()
      return true
    end)
    wd:cancel()
    assert.is_false(timed_out, "tasks left running: " .. table.concat(left or {}, ", "))
    assert.is_true(ok, msg)
  end)

  it("a read on a destroyed node's connection fails at once with a code", run(function()
    local tn = assert(dht.testnet(3, { timeout = 30000 }))
    local snode = assert(tn:create_node())
    local cnode = assert(tn:create_node())
    local kp = dht.keypair(seed(41))
    local server_read = ludx.queue()
    local server = snode:server(function(conn)
      conn:write("hi")
      server_read:put({ conn:read(nil, 600000) })
    end)
    assert(server:listen(kp, 30000))
    local conn = assert(cnode:connect(kp.public_key, { timeout = 30000 }))
    assert.are.equal("hi", conn:read(nil, 30000))
    local reader = ludx.spawn("reader", function() return conn:read(nil, 600000) end)
    ludx.yield()
    cnode:destroy()
    -- a timed-out wait would say ETIMEDOUT after 600 s; this is an error now
    local data, msg, code = reader:join()
    assert.is_nil(data)
    assert.is_string(msg)
    assert.is_string(code)
    assert.are_not.equal("ETIMEDOUT", code)
    data, msg, code = conn:read(nil, 600000)
    assert.is_nil(data)
    assert.is_string(msg)
    assert.are_not.equal("ETIMEDOUT", code)
    assert.is_string(code)
    -- the server side: its node's destroy wakes the handler's read
    snode:destroy()
    local r = server_read:get(600000)
    assert.is_nil(r[1])
    assert.is_string(r[3])
    assert.are_not.equal("ETIMEDOUT", r[3])
    for _ = 1, 50 do
      if ss_tasks() == 0 then break end
      ludx.sleep(10)
    end
    assert.are.equal(0, ss_tasks())
    tn:destroy()
  end, 120000))

  it("destroy ends a connect in flight with NODE_DESTROYED", run(function()
    local tn = assert(dht.testnet(3, { timeout = 30000 }))
    local cnode = assert(tn:create_node())
    -- nobody listens on this key: the connect goes on until told otherwise
    local t = ludx.spawn("connect", function() return cnode:connect(dht.keypair(seed(42)).public_key) end)
    ludx.yield()
    cnode:destroy()
    local conn, msg, code = t:join()
    assert.is_nil(conn, msg)
    assert.are.equal("NODE_DESTROYED", code)
    tn:destroy()
  end, 120000))

  it("destroy wakes every call waiting on the node with NODE_DESTROYED", run(function()
    local tn = assert(dht.testnet(3, { timeout = 30000 }))
    local node = assert(tn:create_node())
    local server = node:server(function() end)
    local calls = {
      listen = function() return server:listen(dht.keypair(seed(47)), 600000) end,
      immutable_get = function() return node:immutable_get(dht.hash("x"), 600000) end,
      mutable_put = function() return node:mutable_put(dht.keypair(seed(48)), "v", 600000) end,
      ping = function() return node:ping("127.0.0.1", 9, 600000) end,
      lookup = function()
        local q = assert(node:lookup(dht.hash("x"), 600000))
        for _ in q do end
        return nil, q:error()
      end,
    }
    local tasks = {}
    for name, f in pairs(calls) do tasks[name] = ludx.spawn(name, f) end
    ludx.yield()
    node:destroy()
    for name, t in pairs(tasks) do
      local r, msg, code = t:join()
      assert.is_nil(r, name)
      assert.are.same({ name, "node destroyed", "NODE_DESTROYED" }, { name, msg, code })
    end
    tn:destroy()
  end, 120000))

  it("close and destroy are idempotent and wake waiters with a code", run(function()
    local tn = assert(dht.testnet(3, { timeout = 30000 }))
    local node = assert(tn:create_node())
    local server = node:server(function() end)
    assert(server:listen(dht.keypair(seed(43)), 30000))
    assert.is_true(server:destroy())
    assert.is_true(server:destroy())
    assert.is_true(server:close())
    assert.is_true(node:close(30000))
    assert.is_true(node:destroy())
    assert.is_true(node:close())
    local ok, msg, code = node:ready(1000)
    assert.is_nil(ok, msg)
    assert.are.equal("NODE_DESTROYED", code)
    local q
    q, msg, code = node:lookup(dht.hash("topic"))
    assert.is_nil(q, msg)
    assert.are.equal("NODE_DESTROYED", code)
    local conn
    conn, msg, code = node:connect(dht.keypair(seed(44)).public_key, 1000)
    assert.is_nil(conn, msg)
    assert.are.equal("NODE_DESTROYED", code)
    assert.is_true(tn:destroy())
    assert.is_true(tn:destroy())
    local sock = assert(udx.bind("127.0.0.1", 0))
    assert(sock:destroy())
    assert(sock:close())
    local st = assert(udx.stream(7))
    assert(st:destroy())
    assert(st:close())
  end, 120000))

  it("a listen in flight wakes with SERVER_CLOSED on close and on destroy; a closed server stays closed", run(function()
    -- a bootstrap that never answers: the first announce round takes long
    local silent = assert(udx.bind("127.0.0.1", 0))
    local _, sport = silent:address()
    for _, how in ipairs({ "close", "destroy" }) do
      local node = assert(dht.new({ bootstrap = "127.0.0.1:" .. sport, host = "127.0.0.1", port = 0 }))
      local server = node:server(function() end)
      local listen = ludx.spawn("listen", function() return server:listen(dht.keypair(), 60000) end)
      ludx.yield()
      assert.is_true(server[how](server))
      assert.are.same({ nil, "server closed", "SERVER_CLOSED" }, { listen:join(60000) })
      assert.are.same({ nil, "server closed", "SERVER_CLOSED" }, { server:listen(dht.keypair(), 1000) })
      assert.is_true(server[how](server))
      node:destroy()
    end
    silent:close()
  end, 120000))

  it("a second close returns once the first one has destroyed the node", run(function()
    local tn = assert(dht.testnet(3, { timeout = 30000 }))
    local node = assert(tn:create_node())
    local server = node:server(function() end)
    assert(server:listen(dht.keypair(seed(46)), 30000))
    local first = ludx.spawn("first close", function() return node:close(30000) end)
    ludx.yield()
    assert.is_true(node.closing)
    assert.is_true(node:close(30000))
    assert.is_true(node.destroyed)
    assert.is_true(first:join(30000))
    tn:destroy()
  end, 120000))

  it("node:close() unannounces its servers before it destroys", run(function()
    local tn = assert(dht.testnet(4, { timeout = 30000 }))
    local snode = assert(tn:create_node())
    local kp = dht.keypair(seed(45))
    local server = snode:server(function() end)
    assert(server:listen(kp, 30000))
    local found = 0
    for r in assert(tn.nodes[2]:find_peer(kp.public_key, 30000)) do
      if r.peer then found = found + 1 end
    end
    assert.is_true(found > 0)
    assert.is_true(snode:close(30000))
    assert.is_true(server.closed)
    found = 0
    for r in assert(tn.nodes[2]:find_peer(kp.public_key, 30000)) do
      if r.peer then found = found + 1 end
    end
    assert.are.equal(0, found)
    tn:destroy()
  end, 120000))
end)

describe("dht keys", function()
  it("a public key that is not 32 bytes or not a point fails at once with EINVAL", run(function()
    local tn = assert(dht.testnet(3, { timeout = 30000 }))
    local node = assert(tn:create_node())
    local short = string.rep("k", 31)
    local conn, msg, code = node:connect(short, { timeout = 5000 })
    assert.is_nil(conn)
    assert.are.same({ "invalid public key", "EINVAL" }, { msg, code })
    -- 32 bytes, but y = 2^255 - 1 is no curve point
    local bad = string.rep("\255", 32)
    conn, msg, code = node:connect(bad, { timeout = 600000 })
    assert.is_nil(conn)
    assert.are.same({ "invalid public key", "EINVAL" }, { msg, code })
    -- the identity point: small order, no usable key either
    conn, msg, code = node:connect("\1" .. string.rep("\0", 31), { timeout = 600000 })
    assert.is_nil(conn)
    assert.are.same({ "invalid public key", "EINVAL" }, { msg, code })
    local q
    q, msg, code = node:find_peer(bad)
    assert.is_nil(q)
    assert.are.same({ "invalid public key", "EINVAL" }, { msg, code })
    local v
    v, msg, code = node:mutable_get(short)
    assert.is_nil(v)
    assert.are.same({ "invalid public key", "EINVAL" }, { msg, code })
    q, msg, code = node:lookup(short)
    assert.is_nil(q)
    assert.are.same({ "invalid topic", "EINVAL" }, { msg, code })
    v, msg, code = node:announce(short, dht.keypair())
    assert.is_nil(v)
    assert.are.same({ "invalid topic", "EINVAL" }, { msg, code })
    -- not a string at all is a programming error
    assert.has_error(function() node:connect(42) end, "bad argument 'public_key' to 'connect' (string expected, got number)")
    tn:destroy()
  end, 120000))
end)

describe("argument errors", function()
  local function err_of(f)
    local ok, e = pcall(f)
    assert.is_false(ok)
    return e
  end

  it("name the function and argument, at the caller's line", run(function()
    local at, e
    at = here()
    e = err_of(function() dht.new({ bootstrap = 5, port = 0 }) end)
    assert.are.equal(at .. " bad argument 'opts.bootstrap' to 'dht.new' (\"host:port\" or a list of them expected, got number)", e:match("[^/]*$"))
    at = here()
    e = err_of(function() dht.new({ port = "x" }) end)
    assert.are.equal(at .. " bad argument 'opts.port' to 'dht.new' (port number 0..65535 expected, got string)", e:match("[^/]*$"))
    at = here()
    e = err_of(function() dht.bootstrapper("x") end)
    assert.are.equal(at .. " bad argument 'port' to 'dht.bootstrapper' (port number 0..65535 expected, got string)", e:match("[^/]*$"))
    local node = assert(dht.new({ bootstrap = {}, host = "127.0.0.1", port = 0 }))
    local server = node:server(function() end)
    at = here()
    e = err_of(function() server:listen("x") end)
    assert.matches(at .. " bad argument 'keypair' to 'listen'", e:match("[^/]*$"), 1, true)
    at = here()
    e = err_of(function() node:ping("127.0.0.1", "x") end)
    assert.are.equal(at .. " bad argument 'port' to 'ping' (port number 1..65535 expected, got string)", e:match("[^/]*$"))
    at = here()
    e = err_of(function() node:lookup(dht.hash("t"), { timeout = -1 }) end)
    assert.are.equal(at .. " bad argument 'opts.timeout' to 'lookup' (non-negative number of ms expected, got -1)", e:match("[^/]*$"))
    node:destroy()
    at = here()
    e = err_of(function() tcp.connect("127.0.0.1", 0) end)
    assert.are.equal(at .. " bad argument 'port' to 'connect' (port number 1..65535 expected, got 0)", e:match("[^/]*$"))
    local sock = assert(udx.bind("127.0.0.1", 0))
    local st = assert(udx.stream(9))
    at = here()
    e = err_of(function() st:connect(sock, 10, 0) end)
    assert.are.equal(at .. " bad argument 'port' to 'connect' (port number 1..65535 expected, got 0)", e:match("[^/]*$"))
    at = here()
    e = err_of(function() sock:send("x", 0) end)
    assert.are.equal(at .. " bad argument 'port' to 'send' (port number 1..65535 expected, got 0)", e:match("[^/]*$"))
    st:close()
    sock:close()
  end))

  it("accept a single \"host:port\" string as bootstrap", run(function()
    local tn = assert(dht.testnet(3, { timeout = 30000 }))
    local node = assert(dht.new({ bootstrap = tn.bootstrap[1], host = "127.0.0.1", port = 0 }))
    assert(node:ready(30000))
    assert.is_true(#node:nodes() > 0)
    node:destroy()
    tn:destroy()
  end, 120000))
end)

describe("key files", function()
  local fs = require "ludx.fs"
  local crypto = require "ludx.crypto"

  local function tmpdir()
    local p = os.tmpname()
    os.remove(p)
    assert(fs.mkdirp(p))
    return p
  end

  it("ludx keygen -o FILE writes what dht.keypair_from_file reads, mode 0600", run(function()
    local d = tmpdir()
    local out, err, status = H.ludx({ "keygen", "-o", d .. "/key" })
    assert.are.equal(0, status, err)
    local kp = assert(dht.keypair_from_file(d .. "/key"))
    assert.are.equal(out:match("^(%x+)\n$"), crypto.hex(kp.public_key))
    assert.are.equal(64, #kp.secret_key)
    assert.are.equal(tonumber("600", 8), fs.stat(d .. "/key").mode % 512)
    -- and back: a key pair written by the library reads back the same
    local kp2 = dht.keypair(seed(46))
    assert(dht.keypair_to_file(d .. "/key2", kp2))
    assert.are.equal(tonumber("600", 8), fs.stat(d .. "/key2").mode % 512)
    assert.are.same(kp2, dht.keypair_from_file(d .. "/key2"))
    local ok, msg, code = dht.keypair_to_file(d .. "/key2", dht.keypair())
    assert.is_nil(ok)
    assert.are.equal("EEXIST", code, msg)
    assert.are.same(kp2, dht.keypair_from_file(d .. "/key2"))
    -- what `ludx keygen` prints without -o reads back too
    out = H.ludx({ "keygen" })
    local f = assert(io.open(d .. "/printed", "wb"))
    f:write(out)
    f:close()
    assert.are.equal(out:match("^public (%x+)"), crypto.hex(assert(dht.keypair_from_file(d .. "/printed")).public_key))
    f = assert(io.open(d .. "/junk", "wb"))
    f:write("not a key\n")
    f:close()
    ok, msg, code = dht.keypair_from_file(d .. "/junk")
    assert.is_nil(ok)
    assert.are.equal("EINVAL", code, msg)
    ok, msg, code = dht.keypair_from_file(d .. "/missing")
    assert.is_nil(ok)
    assert.are.equal("ENOENT", code, msg)
    assert.has_error(function() dht.keypair_from_file(42) end, "bad argument 'path' to 'keypair_from_file' (string expected, got number)")
    os.execute("rm -rf '" .. d .. "'")
  end, 60000))
end)
