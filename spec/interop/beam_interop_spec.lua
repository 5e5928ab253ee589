-- `ludx beam` against the real npm hyperbeam 3.1.0 command line (its own
-- bin.js, preloaded with peers/hyperbeam-testnet.js so that it joins a local
-- DHT), and against itself: a few MB each way with hashes checked, the
-- passphrase format, a wrong passphrase, the same-key firewall.
local ludx = require "ludx"
local dht = require "ludx.dht"
local crypto = require "ludx.crypto"
local process = require "ludx.process"
local interop = require "interop.node"
local beam = require "ludx.cmd.beam"
local H = require "helper"
local run = H.run

local SIZE = 3 * 1024 * 1024

local dir = os.tmpname()
os.remove(dir)
assert(require("ludx.fs").mkdirp(dir))

local function q(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local function write_file(path, data)
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

local function read_file(path)
  local f = assert(io.open(path, "rb"))
  local d = f:read("*a")
  f:close()
  return d
end

-- deterministic content: a seeded stream of random bytes
local function content(n, tag)
  return ludx.core.crypto.randombytes(n, dht.hash(tag))
end

local seq = 0

--- Starts one side: kind "ludx" or "node"; args after the command; opts.input
-- (a file for stdin; without it stdin is a pipe the test holds open),
-- opts.output (a file for stdout). Returns a process handle with .out.
local function side(kind, bootstrap, args, opts)
  opts = opts or {}
  seq = seq + 1
  local out = opts.output or (dir .. "/out" .. seq)
  local argv
  if kind == "ludx" then
    argv = { H.ludx_bin, "beam", "--bootstrap", bootstrap }
  else
    argv = { "node", "-r", interop.dir .. "/peers/hyperbeam-testnet.js", interop.dir .. "/node_modules/hyperbeam/bin.js" }
  end
  for _, a in ipairs(args) do argv[#argv + 1] = a end
  local cmd = { "exec" }
  for _, a in ipairs(argv) do cmd[#cmd + 1] = q(a) end
  if opts.input then cmd[#cmd + 1] = "<" .. q(opts.input) end
  cmd[#cmd + 1] = ">" .. q(out)
  local p = assert(process.spawn("/bin/sh", { "-c", table.concat(cmd, " ") },
    { env = { LUDX_BEAM_BOOTSTRAP = bootstrap }, stderr = "pipe" }))
  p.out, p.err = out, ""
  return p
end

-- waits (bounded) for a pattern on the side's stderr; the captures
local function expect_err(p, pattern, timeout)
  local deadline = ludx.now() + (timeout or 30000)
  while true do
    p.err = p.err .. p:stderr()
    local m = { p.err:match(pattern) }
    if m[1] then return unpack(m) end
    if p.exit_status ~= nil then
      p.err = p.err .. p:stderr()
      m = { p.err:match(pattern) }
      if m[1] then return unpack(m) end
      error("the side exited (" .. tostring(p.exit_status) .. ") before '" .. pattern .. "':\n" .. p.err)
    end
    assert(ludx.now() < deadline, "no '" .. pattern .. "' on stderr:\n" .. p.err)
    ludx.sleep(50)
  end
end

local function finish(p, timeout)
  local status = p:wait(timeout or 40000)
  p.err = p.err .. p:stderr()
  if status == nil then p.err = p.err .. "\n(did not exit)" end
  p:close()
  return status
end

local function testnet()
  local tn = assert(dht.testnet(3))
  return tn, tn.bootstrap[1]
end

-- the maker (no passphrase) sends SIZE bytes from a file; the joiner's
-- stdin stays open (hyperbeam ends its half when the remote ends it)
local function maker_sends(maker, joiner)
  local tn, bs = testnet()
  local data = content(SIZE, maker .. joiner)
  local input = dir .. "/in-" .. maker .. "-" .. joiner
  write_file(input, data)
  local a = side(maker, bs, {}, { input = input })
  local phrase = expect_err(a, "Run [%a ]*beam (%w+) to connect")
  expect_err(a, "Joined the DHT") -- announced: a joiner that looks now finds it
  local b = side(joiner, bs, { phrase })
  assert.are.equal(0, finish(b), b.err)
  assert.are.equal(0, finish(a), a.err)
  assert.matches("Success! Encrypted tunnel established", a.err)
  assert.matches("Success! Encrypted tunnel established", b.err)
  local got = read_file(b.out)
  assert.are.equal(#data, #got)
  assert.are.equal(crypto.hex(dht.hash(data)), crypto.hex(dht.hash(got)))
  assert.are.equal(0, #read_file(a.out))
  tn:destroy()
end

-- the joiner sends; the maker's stdin stays open
local function joiner_sends(maker, joiner)
  local tn, bs = testnet()
  local data = content(SIZE, joiner .. maker)
  local input = dir .. "/in2-" .. maker .. "-" .. joiner
  write_file(input, data)
  local a = side(maker, bs, {})
  local phrase = expect_err(a, "Run [%a ]*beam (%w+) to connect")
  expect_err(a, "Joined the DHT") -- announced: a joiner that looks now finds it
  local b = side(joiner, bs, { phrase }, { input = input })
  assert.are.equal(0, finish(b), b.err)
  assert.are.equal(0, finish(a), a.err)
  local got = read_file(a.out)
  assert.are.equal(#data, #got)
  assert.are.equal(crypto.hex(dht.hash(data)), crypto.hex(dht.hash(got)))
  tn:destroy()
end

describe("ludx beam", function()
  teardown(function() os.execute("rm -rf " .. q(dir)) end)

  it("passphrases are hyperbeam's: base32 of the key pair's seed", function()
    local seed = {}
    for i = 0, 31 do seed[#seed + 1] = string.char(i) end
    seed = table.concat(seed)
    -- from hi-base32 0.5.1 and hyperdht 6.34 (DHT.keyPair(fromBase32(phrase)))
    local phrase = "aaaqeayeaudaocajbifqydiob4ibceqtcqkrmfyydenbwha5dypq"
    assert.are.equal(phrase, beam.encode(seed))
    assert.are.equal(seed, beam.decode(phrase))
    assert.are.equal(seed, beam.decode(phrase:upper()))
    assert.are.equal(seed, beam.decode(phrase .. "===="))
    assert.are.equal(seed, beam.decode(phrase:sub(1, 51) .. "r")) -- spare low bits ignored
    assert.are.equal("03a107bff3ce10be1d70dd18e74bc09967e4d6309ba50d5f1ddc8664125531b8",
      crypto.hex(dht.keypair(beam.decode(phrase)).public_key))
    for _ = 1, 20 do
      local s = ludx.core.crypto.randombytes(32)
      assert.are.equal(s, beam.decode(beam.encode(s)))
      assert.are.equal(52, #beam.encode(s))
    end
    assert.is_nil(beam.decode(phrase:sub(1, 51)))
    assert.is_nil(beam.decode(phrase .. "a"))
    assert.is_nil(beam.decode(phrase:sub(1, 51) .. "1"))
    assert.is_nil(beam.decode(""))
  end)

  it("refuses a bad passphrase before joining the DHT", run(function()
    local out, err, status = H.ludx({ "beam", "--bootstrap", "127.0.0.1:1", "not-a-phrase" })
    assert.are.equal(1, status)
    assert.are.equal("", out)
    assert.matches("passphrase", err)
  end))

  it("ludx -> hyperbeam: the maker sends 3 MB", run(function() maker_sends("ludx", "node") end, 60000))
  it("hyperbeam -> ludx: the maker sends 3 MB", run(function() maker_sends("node", "ludx") end, 60000))
  it("hyperbeam -> ludx: the joiner sends 3 MB", run(function() joiner_sends("ludx", "node") end, 60000))
  it("ludx -> hyperbeam: the joiner sends 3 MB", run(function() joiner_sends("node", "ludx") end, 60000))

  it("ludx <-> ludx: 3 MB both ways at once, the listener restarted with -r", run(function()
    local tn, bs = testnet()
    local phrase = beam.encode(ludx.core.crypto.randombytes(32))
    local da, db = content(SIZE, "a"), content(SIZE + 1000, "b")
    -- -r: listen under a given phrase; both stdins are pipes held open
    -- until each side has all the other's bytes, then closed
    local a = side("ludx", bs, { phrase, "-r" })
    expect_err(a, "Joined the DHT")
    local b = side("ludx", bs, { phrase })
    expect_err(b, "Success!")
    assert(a:write(da))
    assert(b:write(db))
    local function size(path)
      local st = require("ludx.fs").stat(path)
      return st and st.size or 0
    end
    local deadline = ludx.now() + 45000
    while size(a.out) < #db or size(b.out) < #da do
      assert(ludx.now() < deadline, "transfer stalled: " .. size(a.out) .. ", " .. size(b.out))
      ludx.sleep(50)
    end
    a:close_stdin()
    b:close_stdin()
    assert.are.equal(0, finish(a), a.err)
    assert.are.equal(0, finish(b), b.err)
    assert.are.equal(crypto.hex(dht.hash(db)), crypto.hex(dht.hash(read_file(a.out))))
    assert.are.equal(crypto.hex(dht.hash(da)), crypto.hex(dht.hash(read_file(b.out))))
    tn:destroy()
  end, 60000))

  it("ludx <-> ludx: once the pipe is done, no record of the maker's key stays on the DHT", run(function()
    local tn, bs = testnet()
    local input = dir .. "/unannounce"
    write_file(input, "one line\n")
    local a = side("ludx", bs, {}, { input = input })
    local phrase = expect_err(a, "Run [%a ]*beam (%w+) to connect")
    expect_err(a, "Joined the DHT")
    local key = dht.keypair(beam.decode(phrase)).public_key
    local n = assert(tn:create_node())
    local function records() return H.peer_records(n, key) end
    assert.is_true(records() > 0) -- the lookup sees the announcement
    local b = side("ludx", bs, { phrase }, { input = input })
    assert.are.equal(0, finish(b), b.err)
    assert.are.equal(0, finish(a), a.err)
    assert.are.equal("one line\n", read_file(b.out))
    assert.are.equal("one line\n", read_file(a.out))
    -- the maker unannounced while the pipe ran (or before it exited)
    assert.are.equal(0, records(), "the finished pipe's key is still announced")
    tn:destroy()
  end, 60000))

  it("relays that never answer the unannounce: the maker's exit wait for it is bounded; Ctrl-C during it keeps status 0", run(function()
    local tn, bs = testnet()
    local C = require("ludx.dht.constants").COMMANDS
    for _, node in ipairs(tn.nodes) do
      local h = node.h
      local handle = h.handler
      h.handler = function(req)
        if req.command == C.UNANNOUNCE then return true end -- dropped: no reply
        return handle(req)
      end
    end
    local input = dir .. "/unanswered"
    write_file(input, "one line\n")
    local function pipe(args)
      local a = side("ludx", bs, args, { input = input })
      local phrase = expect_err(a, "Run [%a ]*beam (%w+) to connect")
      expect_err(a, "Joined the DHT")
      local b = side("ludx", bs, { phrase }, { input = input })
      assert.are.equal(0, finish(b), b.err)
      expect_err(a, "Unannouncing") -- the pipe is done; the unannounce is not
      return a
    end
    -- left alone, it gives up once its requests time out (the close's own
    -- bound, 10 s by default or --timeout, is the backstop)
    local a = pipe({})
    local t0 = ludx.now()
    assert.are.equal(0, finish(a, 60000), a.err)
    print(string.format("\n  beam exit wait on relays that never answer the unannounce: %d ms", ludx.now() - t0))
    assert.are.equal("one line\n", read_file(a.out))
    -- Ctrl-C during that wait ends it: the pipe's own status stands
    a = pipe({})
    assert(a:kill("SIGINT"))
    assert.are.equal(0, finish(a), a.err)
    assert.are.equal("one line\n", read_file(a.out))
    tn:destroy()
  end, 90000))

  it("a stdout nobody reads stops the sender: memory stays bounded", run(function()
    local tn, bs = testnet()
    local total = 48 * 1024 * 1024
    local input = dir .. "/big"
    local f = assert(io.open(input, "wb"))
    local piece = content(1024 * 1024, "big")
    for _ = 1, total / #piece do f:write(piece) end
    f:close()
    local a = side("ludx", bs, {}, { input = input, output = "/dev/null" })
    local phrase = expect_err(a, "Run [%a ]*beam (%w+) to connect")
    expect_err(a, "Joined the DHT")
    -- the receiver's stdout: a FIFO it holds open (read-write), that
    -- nobody reads until the sender has stalled
    local fifo = dir .. "/fifo"
    assert(os.execute("mkfifo " .. q(fifo)) == 0)
    seq = seq + 1
    local b = assert(process.spawn("/bin/sh", { "-c", "exec " .. q(H.ludx_bin) .. " beam --bootstrap " .. q(bs) .. " " ..
      phrase .. " 1<>" .. q(fifo) }, { stderr = "pipe" }))
    b.err = ""
    expect_err(b, "Success!")
    local function field(path, name)
      local fh = io.open(path, "rb")
      if not fh then return nil end
      local text = fh:read("*a")
      fh:close()
      return tonumber(text:match(name .. ":%s*(%d+)"))
    end
    -- stalled: the sender's stdin offset has not moved for 20 polls
    local pos, still = -1, 0
    local deadline = ludx.now() + 40000
    while still < 20 do
      local p = field("/proc/" .. a.pid .. "/fdinfo/0", "pos") or pos
      if p == pos then still = still + 1 else pos, still = p, 0 end
      assert(pos < total, "the sender read all its stdin while nobody read the receiver's stdout")
      assert(ludx.now() < deadline, "no stall seen; sender at " .. pos)
      ludx.sleep(100)
    end
    local rss = field("/proc/" .. b.pid .. "/status", "VmRSS") -- kB
    print(string.format("\n  beam backpressure: sender stalled after %.1f MB of %d MB; receiver RSS %.1f MB",
      pos / 1048576, total / 1048576, rss / 1024))
    assert.is_true(pos <= 32 * 1024 * 1024)
    assert.is_true(rss < 40 * 1024)
    -- now read: every byte arrives
    local out = dir .. "/big.out"
    local cat = assert(process.spawn("/bin/sh", { "-c", "exec cat < " .. q(fifo) .. " > " .. q(out) }))
    assert.are.equal(0, finish(b, 60000), b.err)
    assert.are.equal(0, cat:wait(20000))
    cat:close()
    assert.are.equal(0, finish(a), a.err)
    local got = read_file(out)
    assert.are.equal(total, #got)
    assert.is_true(got == read_file(input))
    tn:destroy()
  end, 90000))

  it("Ctrl-C: before the pipe is up it quits; after, it ends this side's half", run(function()
    local tn, bs = testnet()
    local a = side("ludx", bs, {})
    local phrase = expect_err(a, "Run [%a ]*beam (%w+) to connect")
    expect_err(a, "Joined the DHT")
    assert(a:kill("SIGINT"))
    assert.are.equal(130, finish(a), a.err)
    assert.matches("Shutting down beam", a.err)
    -- -r: listen again under the same phrase; both stdins stay open
    a = side("ludx", bs, { phrase, "-r" })
    expect_err(a, "Joined the DHT")
    local b = side("node", bs, { phrase })
    expect_err(b, "Success!")
    expect_err(a, "Success!")
    assert(a:write("from ludx\n"))
    local deadline = ludx.now() + 30000
    while #read_file(b.out) < 10 do
      assert(ludx.now() < deadline, "nothing arrived")
      ludx.sleep(50)
    end
    assert(a:kill("SIGINT")) -- ends our half
    assert.are.equal(0, finish(b), b.err) -- hyperbeam ends its half in turn
    assert.are.equal(0, finish(a), a.err)
    assert.are.equal("from ludx\n", read_file(b.out))
    tn:destroy()
  end, 60000))

  it("on a terminal: stdin and stdout are the tty", run(function()
    local tn, bs = testnet()
    -- the maker runs on a pseudo-terminal (stdin, stdout and stderr)
    local a = assert(process.spawn(H.ludx_bin, { "beam", "--bootstrap", bs }, { pty = true }))
    local _, phrase = assert(a:expect("Run ludx beam (%w+) to connect", 30000))
    assert(a:expect("Joined the DHT", 30000, true))
    local b = side("ludx", bs, { phrase })
    assert(a:expect("Success!", 30000, true))
    b.err = ""
    expect_err(b, "Success!")
    assert(b:write("to the tty\n"))
    assert(a:expect("to the tty", 30000, true))
    assert(a:write("typed\n"))
    local deadline = ludx.now() + 30000
    while not read_file(b.out):find("typed\n", 1, true) do
      assert(ludx.now() < deadline, "typed line did not arrive")
      ludx.sleep(50)
    end
    b:close_stdin() -- the joiner's half ends, so the maker's does too
    assert.are.equal(0, finish(b), b.err)
    assert.are.equal(0, a:wait(30000))
    a:close()
    tn:destroy()
  end, 60000))

  it("the maker takes one peer: a second holder of the phrase does not get in", run(function()
    local tn, bs = testnet()
    local a = side("ludx", bs, {})
    local phrase = expect_err(a, "Run [%a ]*beam (%w+) to connect")
    expect_err(a, "Joined the DHT")
    local b = side("ludx", bs, { phrase })
    expect_err(a, "Success!")
    local input = dir .. "/intruder"
    write_file(input, string.rep("intruder\n", 1000))
    local c = side("node", bs, { phrase }, { input = input })
    finish(c)
    assert.matches("Error", c.err) -- the maker stopped listening once its peer came
    assert(b:write("first\n"))
    b:close_stdin()
    assert.are.equal(0, finish(b), b.err)
    assert.are.equal(0, finish(a), a.err)
    assert.are.equal("first\n", read_file(a.out))
    tn:destroy()
  end, 60000))

  it("a wrong passphrase does not connect; another key pair is refused", run(function()
    local tn, bs = testnet()
    local a = side("node", bs, {})
    local phrase = expect_err(a, "Run [%a ]*beam (%w+) to connect")
    expect_err(a, "Joined the DHT")
    -- a valid phrase that is not the maker's: nobody listens under it
    local wrong = beam.encode(ludx.core.crypto.randombytes(32))
    local b = side("ludx", bs, { wrong })
    assert.are.equal(1, finish(b), b.err)
    assert.matches("Error: ", b.err)
    assert.not_matches("Success", b.err)
    -- the maker's public key with another key pair: its firewall refuses it
    local kp = dht.keypair(beam.decode(phrase))
    local n = assert(tn:create_node())
    local conn, err = n:connect(kp.public_key, { keypair = dht.keypair() })
    assert.is_nil(conn)
    assert.is_string(err)
    a.err = a.err .. a:stderr()
    assert.not_matches("Success", a.err)
    a:close()
    tn:destroy()
  end, 60000))
end)
