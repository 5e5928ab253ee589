-- ludx.signal (issue 14): a task waits for a signal; while it waits, the
-- signal does not end the process; after, it does again.
local ludx = require "ludx"
local ffi = require "ffi"
local process = require "ludx.process"
local H = require "helper"
local run = H.run

pcall(ffi.cdef, "int kill(int pid, int sig);")

local function script(src)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(src)
  f:close()
  return path
end

-- A service as the docs show it: wait for SIGINT or SIGTERM, clean up, exit.
-- The waiting task is spawned first, so its watcher is in place before the
-- other task says "ready".
local SERVICE = [[
local ludx = require "ludx"
ludx.spawn("server", function()
  local sig = ludx.signal({ "SIGINT", "SIGTERM" })
  io.stdout:write("got ", sig, "\n")
  io.stdout:write("cleanup done\n")
  io.stdout:flush()
end)
ludx.spawn("ready", function()
  io.stdout:write("ready\n")
  io.stdout:flush()
end)
]]

local function run_service(sig)
  local path = script(SERVICE)
  local p = assert(process.spawn(H.ludx_bin, { path }))
  assert(p:expect("ready\n", 20000, true))
  assert(p:kill(sig))
  local out = {}
  while true do
    local chunk = p:read(20000)
    if not chunk then break end
    out[#out + 1] = chunk
  end
  local status, signal = p:wait(20000)
  local err = p:stderr()
  p:close()
  os.remove(path)
  return table.concat(out), status, signal, err
end

describe("ludx.signal", function()
  it("a script waiting for SIGINT exits cleanly with its cleanup output", run(function()
    local out, status, signal, err = run_service("SIGINT")
    assert.are.equal("got SIGINT\ncleanup done\n", out)
    assert.are.equal(0, status, err)
    assert.is_true(signal == nil or signal == 0)
  end))

  it("a script waiting for SIGTERM exits cleanly with its cleanup output", run(function()
    local out, status, _, err = run_service("SIGTERM")
    assert.are.equal("got SIGTERM\ncleanup done\n", out)
    assert.are.equal(0, status, err)
  end))

  it("once no task waits, the signal ends the process again (default disposition)", run(function()
    local path = script([[
      local ludx = require "ludx"
      print(ludx.signal("SIGTERM", 1))
      io.stdout:write("ready\n")
      io.stdout:flush()
      ludx.sleep(3600000)
    ]])
    local p = assert(process.spawn(H.ludx_bin, { path }))
    assert(p:expect("ready\n", 20000, true))
    assert(p:kill("SIGTERM"))
    local status, signal = p:wait(20000)
    p:close()
    os.remove(path)
    assert.are.equal(15, signal, "status " .. tostring(status))
  end))

  it("works in this process (busted): a task gets SIGUSR1 sent to itself", run(function()
    local t = ludx.spawn("waiter", function() return ludx.signal("SIGUSR1") end)
    ludx.yield() -- the waiter has started its watcher
    assert.are.equal(1, require("ludx.signal").waiting("SIGUSR1"))
    ffi.C.kill(ludx.core.getpid(), 10) -- SIGUSR1 on Linux
    assert.are.equal("SIGUSR1", t:join())
    assert.are.equal(0, require("ludx.signal").waiting("SIGUSR1"))
  end))

  it("times out with nil, 'timed out', 'ETIMEDOUT'", run(function()
    local a, msg, code = ludx.signal("SIGHUP", 1)
    assert.is_nil(a)
    assert.are.equal("timed out", msg)
    assert.are.equal("ETIMEDOUT", code)
    assert.are.equal(0, require("ludx.signal").waiting("SIGHUP"))
  end))

  it("a cancelled wait lets go of its watcher", run(function()
    local t = ludx.spawn("waiter", function() return ludx.signal({ "SIGUSR2", "SIGHUP" }) end)
    ludx.yield()
    assert.are.equal(1, require("ludx.signal").waiting("SIGUSR2"))
    t:cancel()
    ludx.yield()
    assert.are.equal(0, require("ludx.signal").waiting("SIGUSR2"))
    assert.are.equal(0, require("ludx.signal").waiting("SIGHUP"))
  end))

  it("a lone wait for a signal is not a deadlock", run(function()
    local t = ludx.spawn("waiter", function() return ludx.signal("SIGUSR1") end)
    ludx.spawn("sender", function()
      ludx.sleep(1)
      ffi.C.kill(ludx.core.getpid(), 10)
    end)
    assert.are.equal("SIGUSR1", t:join())
  end))

  it("examples/echo.lua and ludx share stop cleanly on SIGTERM: unannounce, close, exit 0", run(function()
    local tn = assert(process.spawn(H.ludx_bin, { "dht", "testnet" }))
    local bs = assert(tn:read_line(20000))
    local echo = assert(process.spawn(H.ludx_bin, { H.root .. "/examples/echo.lua", "--bootstrap", bs, "server" }))
    local echo_key = assert(echo:read_line(30000)) -- it listens, and waits for a signal
    local dir = os.tmpname()
    local f = assert(io.open(dir, "w"))
    f:write("shared\n")
    f:close()
    local share = assert(process.spawn(H.ludx_bin, { "share", "--bootstrap", bs, dir }))
    local share_key = assert(share:read_line(30000))
    -- a node of ours sees each key announced before the signal and gone after
    local dht = require "ludx.dht"
    local crypto = require "ludx.crypto"
    local node = assert(dht.new({ bootstrap = bs, host = "127.0.0.1", port = 0 }))
    assert(node:ready(30000))
    local function announced(hex)
      local n = 0
      for r in assert(node:find_peer(crypto.unhex(hex), 30000)) do
        if r.peer then n = n + 1 end
      end
      return n
    end
    local keys = { [echo] = echo_key, [share] = share_key:match("%x+") }
    for _, p in ipairs({ echo, share }) do
      assert.is_true(announced(keys[p]) > 0)
      assert(p:kill("SIGTERM"))
      while p:read(30000) do end -- to the end of its output
      local status, sig = p:wait(30000)
      local err = p:stderr()
      assert.are.equal(0, status, err)
      assert.is_true(sig == nil or sig == 0, "killed by signal " .. tostring(sig) .. ": " .. err)
      assert.matches("SIGTERM", err)
      assert.are.equal(0, announced(keys[p]), p == echo and "echo still announced" or "share still announced")
      p:close()
    end
    node:destroy()
    os.remove(dir)
    tn:kill("SIGINT")
    tn:wait(20000)
    tn:close()
  end, 90000))

  it("ludx beam unannounces on Ctrl-C before the pipe is up", run(function()
    local tn = assert(process.spawn(H.ludx_bin, { "dht", "testnet" }))
    local bs = assert(tn:read_line(20000))
    -- its messages go to stderr: read them as stdout
    local beam = assert(process.spawn("/bin/sh", { "-c", 'exec "$0" beam --bootstrap "$1" 2>&1', H.ludx_bin, bs }))
    local out = assert(beam:expect("Joined the DHT", 30000, true)) -- listening, waiting for a peer
    local phrase = assert(out:match("Run ludx beam (%w+) to connect"))
    local dht = require "ludx.dht"
    local seed = assert(require("ludx.cmd.beam").decode(phrase))
    local key = dht.keypair(seed).public_key
    local node = assert(dht.new({ bootstrap = bs, host = "127.0.0.1", port = 0 }))
    assert(node:ready(30000))
    local function announced() return H.peer_records(node, key) end
    assert.is_true(announced() > 0)
    assert(beam:kill("SIGINT"))
    while beam:read(30000) do end
    local status = beam:wait(30000)
    assert.are.equal(130, status)
    assert.are.equal(0, announced(), "beam still announced")
    beam:close()
    node:destroy()
    tn:kill("SIGINT")
    tn:wait(20000)
    tn:close()
  end, 90000))

  it("bad names raise, naming the function and argument", run(function()
    for _, bad in ipairs({ "SIGKILL", "SIGSTOP", "SIGNOPE", 42, {} }) do
      local ok, err = pcall(ludx.signal, bad)
      assert.is_false(ok)
      assert.matches("bad argument 'name' to 'signal'", err)
      assert.matches("signal_spec.lua", err)
    end
    local ok, err = pcall(ludx.signal, "SIGINT", -1)
    assert.is_false(ok)
    assert.matches("bad argument 'timeout' to 'signal'", err)
  end))
end)
