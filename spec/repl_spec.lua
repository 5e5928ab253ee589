-- The REPL, driven through a real pseudo-terminal (and through a pipe).
local ludx = require "ludx"
local process = require "ludx.process"
local H = require "helper"
local run = H.run

local function start_repl()
  local home = os.tmpname()
  os.remove(home)
  os.execute("mkdir -p " .. home)
  local p = assert(process.spawn(H.ludx_bin, {}, { pty = true, env = { HOME = home, TERM = "xterm" } }))
  assert(p:expect("> ", 20000, true))
  return p, home
end

local function expect(p, text)
  local got, err = p:expect(text, 20000, true)
  assert(got, err)
  return got
end

describe("the REPL in a terminal", function()
  it("prints the value of an expression, tables pretty-printed", run(function()
    local p, home = start_repl()
    p:write("1 + 1\r")
    expect(p, "\n2\r\n")
    p:write("{ name = 'x', list = { 1, 2 } }\r")
    expect(p, "{ list = { 1, 2 }, name = \"x\" }")
    p:write("'a', nil, 3\r")
    expect(p, "\"a\"\tnil\t3")
    p:write("\4")
    assert.are.equal(0, p:wait(20000))
    p:close()
    os.execute("rm -rf " .. home)
  end))

  it("continues an incomplete chunk on the next line", run(function()
    local p, home = start_repl()
    p:write("function twice(x)\r")
    expect(p, ">> ")
    p:write("  return x * 2\r")
    expect(p, ">> ")
    p:write("end\r")
    expect(p, "> ")
    p:write("twice(21)\r")
    expect(p, "42")
    p:write("\4")
    assert.are.equal(0, p:wait(20000))
    p:close()
    os.execute("rm -rf " .. home)
  end))

  it("keeps the loop running under the prompt: a background task prints while you type", run(function()
    local p, home = start_repl()
    -- each tick waits for its file: the test, not a clock, sets the pace
    -- (a loaded machine may stall either side for longer than any interval)
    local function tick(i) H.write_file(home .. "/go" .. i, "") end
    p:write("ludx.spawn('bg', function() for i = 1, 3 do " ..
      "while not require('ludx.fs').stat(os.getenv('HOME') .. '/go' .. i) do ludx.sleep(5) end " ..
      "print('tick ' .. i) end end)\r")
    expect(p, "\n\r> ")
    tick(1)
    expect(p, "tick 1")
    p:write("abc") -- a half-typed line
    expect(p, "abc")
    tick(2)
    expect(p, "tick 2")
    -- the prompt and the half-typed line are drawn again under the output
    expect(p, "> abc")
    tick(3)
    expect(p, "tick 3")
    p:write("\3")
    p:write("40 + 2\r")
    local out = expect(p, "42")
    assert.is_nil(out:find("abc40", 1, true))
    p:write("\4")
    assert.are.equal(0, p:wait(20000))
    p:close()
    os.execute("rm -rf " .. home)
  end))

  it("Ctrl-C cancels the running task and keeps the REPL", run(function()
    local p, home = start_repl()
    p:write("ludx.sleep(60000)\r")
    ludx.sleep(50)
    p:write("\3")
    expect(p, "interrupted")
    expect(p, "> ")
    p:write("local n = 0 while true do n = n + 1 end\r")
    ludx.sleep(50)
    p:write("\3")
    expect(p, "interrupted")
    expect(p, "> ")
    p:write("'still here'\r")
    -- one Ctrl-C, one stop: it does not also cancel the next prompt or line
    local out = expect(p, "\"still here\"")
    assert.is_nil(out:find("^C", 1, true))
    assert.is_nil(out:find("interrupted", 1, true))
    p:write("\4")
    assert.are.equal(0, p:wait(20000))
    p:close()
    os.execute("rm -rf " .. home)
  end))

  it("Ctrl-C typed right after Enter stops that line", run(function()
    local p, home = start_repl()
    -- one write: the editor reads the line and the ^C together, while ISIG
    -- is still off; the ^C is for the line, not a key for the next prompt
    p:write("ludx.sleep(600000)\r\3")
    expect(p, "interrupted")
    expect(p, "> ")
    p:write("'still here'\r")
    expect(p, "still here")
    p:write("\4")
    assert.are.equal(0, p:wait(20000))
    p:close()
    os.execute("rm -rf " .. home)
  end))

  it("a Ctrl-C signal while the REPL itself runs Lua cancels the line being typed, not the REPL", run(function()
    local p, home = start_repl()
    -- Tab completion walks fields through __index, in the REPL's own task:
    -- this one stays busy (no yield) until the test has sent SIGINT
    p:write("slow = setmetatable({}, { __index = function() print('busy') " ..
      "while true do local f = io.open(os.getenv('HOME') .. '/done') if f then f:close() break end end end })\r")
    expect(p, "\n\r> ")
    p:write("slow.x.y\t")
    expect(p, "busy")
    assert(p:kill("SIGINT"))
    H.write_file(home .. "/done", "")
    expect(p, "^C")
    expect(p, "> ")
    p:write("1 + 1\r")
    expect(p, "\n2\r\n")
    p:write("\4")
    assert.are.equal(0, p:wait(20000))
    p:close()
    os.execute("rm -rf " .. home)
  end))

  it("Ctrl-C drops a half-typed multi-line chunk", run(function()
    local p, home = start_repl()
    p:write("for i = 1, 3 do\r")
    expect(p, ">> ")
    p:write("\3")
    expect(p, "> ")
    p:write("7 * 6\r")
    expect(p, "42")
    p:write("\4")
    assert.are.equal(0, p:wait(20000))
    p:close()
    os.execute("rm -rf " .. home)
  end))

  it("keeps history in the home directory and recalls it with the up arrow", run(function()
    local p, home = start_repl()
    p:write("'first entry'\r")
    expect(p, "first entry")
    p:write("\4")
    assert.are.equal(0, p:wait(20000))
    p:close()
    local f = assert(io.open(home .. "/.ludx_history"))
    assert.matches("'first entry'", f:read("*a"))
    f:close()
    -- a new session recalls it
    local p2 = assert(process.spawn(H.ludx_bin, {}, { pty = true, env = { HOME = home, TERM = "xterm" } }))
    assert(p2:expect("> ", 20000, true))
    p2:write("\27[A\r")
    expect(p2, "\"first entry\"")
    p2:write("\4")
    assert.are.equal(0, p2:wait(20000))
    p2:close()
    os.execute("rm -rf " .. home)
  end))

  it("Ctrl-D exits with status 0", run(function()
    local p, home = start_repl()
    p:write("\4")
    assert.are.equal(0, p:wait(20000))
    p:close()
    os.execute("rm -rf " .. home)
  end))
end)

describe("the REPL without a terminal", function()
  it("reads and runs lines without prompt noise", run(function()
    local p = assert(process.spawn(H.ludx_bin, {}))
    p:write("x = 6 * 7\nx\nfunction f()\n  return 'multi'\nend\nf()\n")
    p:close_stdin()
    local out = {}
    while true do
      local chunk = p:read(20000)
      if not chunk then break end
      out[#out + 1] = chunk
    end
    assert.are.equal(0, p:wait(20000))
    assert.are.equal("42\n\"multi\"\n", table.concat(out))
    p:close()
  end))
end)

local function bye(p, home)
  p:write("\4")
  assert.are.equal(0, p:wait(20000))
  p:close()
  if home then os.execute("rm -rf " .. home) end
end

-- Types a line and returns what came before the next prompt.
local function line(p, input)
  p:write(input .. "\r")
  return expect(p, "\n\r> ")
end

describe("the REPL shows objects and errors briefly", function()
  it("prints sockets and streams as one-line summaries", run(function()
    local p, home = start_repl()
    p:write("udx = require 'ludx.udx'\r")
    expect(p, "\n\r> ")
    p:write("s = udx.bind('127.0.0.1', 0)\r")
    expect(p, "\n\r> ")
    p:write("s\r")
    local out = expect(p, "open>")
    assert.matches("<udx socket 127%.0%.0%.1:%d+ open>", out)
    p:write("st = udx.stream(7)\r")
    expect(p, "\n\r> ")
    p:write("st:connect(s, 8, 9, '127.0.0.1')\r")
    expect(p, "true")
    p:write("{ st }\r")
    out = expect(p, "rtt")
    assert.matches("<udx stream 7 %-> 8 at 127%.0%.0%.1:9 connected", out)
    assert.is_nil(out:find("waiters", 1, true))
    bye(p, home)
  end, 60000))

  it("prints every public object kind in one line, binary strings as hex", run(function()
    local p, home = start_repl()
    -- what an expression prints: the one line between its echo and the prompt
    local function value(input)
      local out = line(p, input)
      local v = out:match("\r\n([^\r\n]*)\r\n\r> $")
      assert(v, "not one line: " .. out)
      return v
    end
    line(p, "udx = require 'ludx.udx'; tcp = require 'ludx.tcp'; dht = require 'ludx.dht'")
    line(p, "q = ludx.queue(4); q:put(1)")
    assert.matches("^<queue 1 items, limit 4, 0 getting, 0 putting>$", value("q"))
    assert.matches("^task %d+ 'idle' %(waiting%)$", value("ludx.spawn('idle', function() ludx.sleep(1e6) end)"))
    assert.matches("^<timer due in %d+ ms>$", value("ludx.after(1e6, function() end)"))
    line(p, "pr = require('ludx.process').spawn('/bin/cat', {})")
    assert.matches("^<process %d+ /bin/cat running>$", value("pr"))
    line(p, "pr:close()")
    line(p, "srv = tcp.listen('127.0.0.1', 0)")
    assert.matches("^<tcp server 127%.0%.0%.1:%d+ listening>$", value("srv"))
    assert.matches("^<tcp connection .*>$", value("tcp.connect('127.0.0.1', (select(2, srv:address())))"))
    -- keys are binary: hex, never raw bytes
    local kp = line(p, "require('ludx.secretstream').keypair(string.rep('k', 32))")
    assert.matches("public_key = <32 bytes %x+>", kp)
    assert.matches("secret_key = <64 bytes %x+%.%.%.>", kp)
    assert.is_nil(kp:find("[\128-\255]"), kp)
    line(p, "tn = dht.testnet(2)")
    assert.matches("^<dht node 127%.0%.0%.1:%d+ id %x+%.%.%., key %x+%.%.%., persistent, ready, %d+ nodes>$",
      value("tn.nodes[1]"))
    line(p, "n = dht.new({ bootstrap = tn.bootstrap }); n:ready()")
    line(p, "ds = n:server(function(c) c:write('hi'); c:read() end); ds:listen()")
    assert.matches("^<dht server key %x+%.%.%., listening, %d+ connections>$", value("ds"))
    line(p, "c = n:connect(ds:address().public_key)")
    assert.matches("^<secretstream initiator ready, key %x+%.%.%., remote %x+%.%.%., over <udx stream %d+ %-> %d+ at .*>>$",
      value("c"))
    assert.matches("^<protomux .*>$", value("require('ludx.protomux').from(c)"))
    line(p, "sw = require('ludx.swarm').new({ bootstrap = tn.bootstrap })")
    assert.matches("^<swarm key %x+%.%.%., open, 0 connections, 0 peers>$",
      value("sw"))
    -- an object without a __tostring of its own: its public fields, one line
    assert.matches("^<object { .* }>$", value("n:lookup(string.rep('a', 32))"))
    -- a long string is cut
    assert.matches('^"x+"%.%.%. %(5000 bytes%)$', value("string.rep('x', 5000)"))
    line(p, "sw:destroy(); c:destroy(); n:destroy(); tn:destroy()")
    bye(p, home)
  end, 120000))

  it("errors keep their position; tracebacks drop the REPL's frames", run(function()
    local p, home = start_repl()
    p:write("error('boom')\r")
    expect(p, "stdin:1: boom")
    -- an error that is a table shows its fields
    p:write("error({ code = 'EX' })\r")
    expect(p, 'error: { code = "EX" }')
    p:write("function deep() error('deeper') end\r")
    expect(p, "\n\r> ")
    p:write("deep()\r")
    local out = expect(p, "in main chunk")
    assert.matches("stdin:1: deeper", out)
    assert.matches("in function 'deep'", out)
    out = out .. expect(p, "\n\r> ")
    assert.is_nil(out:find("[builtin#", 1, true), out)
    assert.is_nil(out:find("repl.lua", 1, true), out)
    assert.is_nil(out:find("init.lua", 1, true), out)
    -- a task started at the prompt that fails: its report has no [builtin#N] either
    p:write("ludx.spawn('bad', function() ludx.sleep(1); error('task boom') end)\r")
    out = expect(p, "task boom")
    out = out .. expect(p, "in function <stdin:1>")
    p:write("ludx.sleep(20)\r")
    out = out .. expect(p, "\n\r> ")
    assert.is_nil(out:find("[builtin#", 1, true), out)
    bye(p, home)
  end, 60000))

  it("keeps a top-level local for the lines after it", run(function()
    local p, home = start_repl()
    p:write("local x = 5\r")
    expect(p, "\n\r> ")
    p:write("local function twice(n) return 2 * n end\r")
    expect(p, "\n\r> ")
    p:write("twice(x) + 1\r")
    expect(p, "\n11\r\n")
    -- a local inside a block stays local to it
    p:write("do local hidden = 1 end\r")
    expect(p, "\n\r> ")
    p:write("hidden == nil\r")
    expect(p, "true")
    bye(p, home)
  end, 60000))
end)

describe("the REPL line editor", function()
  it("completes globals, fields and methods with Tab", run(function()
    local p, home = start_repl()
    line(p, "zz_unique_name = 41")
    p:write("zz_uni\t")
    expect(p, "zz_unique_name")
    assert.matches("\n42\r\n", line(p, " + 1"))
    p:write("string.rev\t")
    expect(p, "string.reverse")
    assert.matches('"cba"', line(p, "('abc')"))
    line(p, "s = require('ludx.udx').bind('127.0.0.1', 0)")
    p:write("s:addr\t")
    expect(p, "s:address")
    assert.matches('"127%.0%.0%.1"', line(p, "()"))
    -- two candidates: Tab lists them, the line stays
    line(p, "zz_ab1, zz_ab2 = 1, 2")
    p:write("zz_a\t")
    expect(p, "zz_ab")
    p:write("\t")
    local out = expect(p, "zz_ab2")
    assert.matches("zz_ab1  ", out)
    expect(p, "> zz_ab")
    assert.matches("\n2\r\n", line(p, "2"))
    bye(p, home)
  end, 60000))

  it("Ctrl-R searches the history backwards", run(function()
    local p, home = start_repl()
    p:write("'needle one'\r")
    expect(p, "\"needle one\"")
    p:write("'other'\r")
    expect(p, "\"other\"")
    p:write("\18needle")
    expect(p, "(reverse-i-search)`needle': 'needle one'")
    p:write("\r")
    expect(p, "\"needle one\"")
    -- Ctrl-G leaves the search with the line as it was
    p:write("1 + \18zzz\7")
    expect(p, "1 + ")
    p:write("1\r")
    expect(p, "\n2\r\n")
    bye(p, home)
  end, 60000))

  it("has word moves, kill and yank", run(function()
    local p, home = start_repl()
    -- Ctrl-U kills the line, Ctrl-Y yanks it back elsewhere
    p:write("2 + 3\21")
    p:write("10 * \25\r")
    expect(p, "\n23\r\n")
    -- Alt-b: back a word
    p:write("1 + 20\27b3\r")
    expect(p, "\n321\r\n")
    -- Ctrl-Left twice: to the start
    p:write("5 + 60\27[1;5D\27[1;5D1\r")
    expect(p, "\n75\r\n")
    -- Alt-f after Ctrl-A: past two words; Alt-d kills to the end of the next
    p:write("7 + 8 + 100\1\27f\27f\27d9\r")
    expect(p, "\n96\r\n")
    bye(p, home)
  end, 60000))
end)

describe("ludx -i and ludx attach", function()
  local function tmpdir()
    local d = os.tmpname()
    os.remove(d)
    os.execute("mkdir -p " .. d)
    return d
  end

  it("ludx -i runs the script, then opens the REPL over its globals and tasks", run(function()
    local dir = tmpdir()
    local f = assert(io.open(dir .. "/svc.lua", "w"))
    -- a service that keeps running: the REPL must open beside it
    f:write("answer = 40 + #arg\nlocal ludx = require 'ludx'\ninbox, outbox = ludx.queue(), ludx.queue()\n" ..
      "ludx.spawn('svc', function() while true do outbox:put(inbox:get() .. '!') end end)\n")
    f:close()
    local p = assert(process.spawn(H.ludx_bin, { "-i", dir .. "/svc.lua", "a", "b" },
      { pty = true, env = { HOME = dir, TERM = "xterm" } }))
    assert(p:expect("> ", 20000, true))
    p:write("answer\r")
    expect(p, "\n42\r\n")
    p:write("inbox:put('ping')\r")
    expect(p, "\n\r> ")
    p:write("outbox:get()\r")
    expect(p, "\"ping!\"")
    bye(p, dir)
  end, 60000))

  it("ludx attach opens a REPL into a running process through its socket", run(function()
    local dir = tmpdir()
    local sock = dir .. "/repl.sock"
    local f = assert(io.open(dir .. "/svc.lua", "w"))
    f:write([[
local ludx = require "ludx"
secret = 41
local srv = assert(require("ludx.repl").serve(arg[1], { env = { svc = "the service" }, max_line = 4096,
  max_clients = 2 }))
print("serving")
io.stdout:flush()
require("ludx.stdin").watch(function() end, function() srv.close() end)
]])
    f:close()
    local svc = assert(process.spawn(H.ludx_bin, { dir .. "/svc.lua", sock }))
    assert(svc:expect("serving", 20000, true))
    local st = assert(require("ludx.fs").stat(sock))
    assert.are.equal(tonumber("600", 8), st.mode)

    local p = assert(process.spawn(H.ludx_bin, { "attach", sock }, { pty = true, env = { HOME = dir, TERM = "xterm" } }))
    expect(p, "attached to pid")
    expect(p, "\n\r> ")
    p:write("secret + 1\r")
    expect(p, "\n42\r\n")
    p:write("svc\r")
    expect(p, "\"the service\"")
    p:write("secr\t")
    expect(p, "secret")
    p:write("\r")
    expect(p, "\n41\r\n")
    p:write("error('boom')\r")
    expect(p, "stdin:1: boom")
    -- an error that is a table shows its fields
    p:write("error({ code = 'EX' })\r")
    expect(p, 'error: { code = "EX" }')
    -- Ctrl-C stops a line running over there
    p:write("print('sleeping') ludx.sleep(600000)\r")
    expect(p, "\nsleeping")
    p:write("\3")
    expect(p, "interrupted")
    expect(p, "\n\r> ")
    -- Ctrl-C while the client is busy printing (its reader is blocked
    -- writing to the terminal): the client's own tasks must live through it
    p:write("print('big' .. string.rep('x', 300000)) ludx.sleep(600000)\r")
    expect(p, "bigxxx")
    p:write("\3")
    local seen, why = p:expect("interrupted", 20000, true)
    assert(seen, why and why:sub(1, 60) .. " ... " .. why:sub(-200)) -- not all the x's
    expect(p, "\n\r> ")
    -- Ctrl-C typed with the Enter, before the line was even sent
    p:write("ludx.sleep(600000)\r\3")
    expect(p, "interrupted")
    expect(p, "\n\r> ")
    p:write("secret\r")
    expect(p, "\n41\r\n")
    p:write("\4")
    assert.are.equal(0, p:wait(20000))
    p:close()

    -- a client that left frees its slot once the process has seen it go:
    -- connect until there is one
    local tcp = require "ludx.tcp"
    local function attach_raw()
      for _ = 1, 1000 do
        local c = assert(tcp.connect_unix(sock, 20000))
        local got = ""
        while not got:find("\n", 1, true) do
          local d = c:read(65536, 20000)
          if not d then break end
          got = got .. d
        end
        if got:find("attached", 1, true) then return c end
        c:close()
        ludx.sleep(10)
      end
      error("no free REPL slot")
    end
    -- clients are bounded: past max_clients one is told and closed
    local a, b = attach_raw(), attach_raw()
    local extra = assert(tcp.connect_unix(sock, 20000))
    local said = {}
    while true do
      local data = extra:read(65536, 20000)
      if not data then break end
      said[#said + 1] = data
    end
    extra:close()
    assert.matches("too many REPL clients", table.concat(said))
    a:close()

    -- a line without an end is bounded: the client is dropped, the process goes on
    local c = attach_raw()
    c:write(string.rep("x", 10000))
    local got = {}
    while true do
      local data = c:read(65536, 20000)
      if not data then break end
      got[#got + 1] = data
    end
    c:close()
    assert.matches("line longer than 4096 bytes", table.concat(got))
    local still = attach_raw()
    still:write('{"t":"line","s":"secret"}\n')
    local reply = ""
    while not reply:find("41", 1, true) do reply = reply .. assert(still:read(65536, 20000)) end
    still:close()
    b:close()

    -- the socket file goes with the process
    svc:close_stdin()
    assert.are.equal(0, svc:wait(20000))
    svc:close()
    assert.is_nil(require("ludx.fs").stat(sock))
    -- nothing to attach to: a clear error
    local _, err, status = H.ludx({ "attach", sock })
    assert.are.equal(1, status)
    assert.matches("ludx attach: .*repl%.sock", err)
    os.execute("rm -rf " .. dir)
  end, 90000))

  it("ludx attach's server: an interrupt right behind its line stops that line", run(function()
    local dir = tmpdir()
    local sock = dir .. "/repl.sock"
    local f = assert(io.open(dir .. "/svc.lua", "w"))
    f:write([[
local srv = assert(require("ludx.repl").serve(arg[1]))
print("serving")
io.stdout:flush()
require("ludx.stdin").watch(function() end, function() srv.close() end)
]])
    f:close()
    local svc = assert(process.spawn(H.ludx_bin, { dir .. "/svc.lua", sock }))
    assert(svc:expect("serving", 20000, true))
    local c = assert(require("ludx.tcp").connect_unix(sock, 20000))
    -- one write: the server reads both before its runner takes the line
    assert(c:write('{"t":"line","s":"ludx.sleep(600000)"}\n{"t":"interrupt"}\n'))
    local heard = ""
    while not heard:find("interrupted", 1, true) do heard = heard .. assert(c:read(65536, 20000)) end
    -- and the session goes on
    assert(c:write('{"t":"line","s":"6 * 7"}\n'))
    while not heard:find("42", 1, true) do heard = heard .. assert(c:read(65536, 20000)) end
    c:close()
    svc:close_stdin()
    assert.are.equal(0, svc:wait(20000))
    svc:close()
    os.execute("rm -rf " .. dir)
  end, 60000))
end)
