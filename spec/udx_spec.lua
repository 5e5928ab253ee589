-- The UDX Lua API over real loopback sockets.
local ludx = require "ludx"
local udx = require "ludx.udx"
local H = require "helper"
local run = H.run

-- Deterministic data: blocks of pseudo-random bytes, each tagged with its
-- index, so loss, duplication or reordering of whole packets shows.
local function make_data(size, seed)
  local rng = seed or 1
  local block = {}
  for i = 1, 4096 do
    rng = (rng * 1103515245 + 12345) % 2147483648
    block[i] = string.char(rng % 256)
  end
  block = table.concat(block)
  local parts = {}
  local n = 0
  local i = 0
  while n < size do
    local tag = string.format("%08x", i)
    local piece = (tag .. block):sub(1, math.min(4096 + 8, size - n))
    parts[#parts + 1] = piece
    n = n + #piece
    i = i + 1
  end
  return table.concat(parts)
end

local function pair(opts1, opts2)
  local a = assert(udx.bind("127.0.0.1", 0))
  local b = assert(udx.bind("127.0.0.1", 0))
  local _, pa = a:address()
  local _, pb = b:address()
  local s1 = assert(udx.stream(opts1 and opts1.id or 1, opts1))
  local s2 = assert(udx.stream(opts2 and opts2.id or 2, opts2))
  assert(s1:connect(a, s2.id, pb, "127.0.0.1"))
  assert(s2:connect(b, s1.id, pa, "127.0.0.1"))
  return s1, s2, a, b
end

-- Waits (up to 20 s) until task t waits for what: a writer queueing a large
-- write in pieces yields between them, so a fixed pause can catch it still
-- queueing on a loaded machine.
local function wait_for_wait(t, what)
  for _ = 1, 20000 do
    if t.waiting == what or t.state == "dead" then break end
    ludx.sleep(1)
  end
  return t.waiting
end

local function read_all(s, timeout)
  local parts = {}
  while true do
    local chunk, msg, code = s:read(nil, timeout or 10000)
    if not chunk then
      if msg then return nil, msg, code, table.concat(parts) end
      return table.concat(parts)
    end
    parts[#parts + 1] = chunk
  end
end

describe("udx sockets", function()
  it("bind IPv4, IPv6 and dual stack on port 0 and report their address", run(function()
    local a = assert(udx.bind("127.0.0.1", 0))
    local host, port, family = a:address()
    assert.are.equal("127.0.0.1", host)
    assert.is_true(port > 0)
    assert.are.equal("IPv4", family)
    local b = assert(udx.bind("::1", 0))
    host, port, family = b:address()
    assert.are.equal("::1", host)
    assert.is_true(port > 0)
    assert.are.equal("IPv6", family)
    local c = assert(udx.bind("::", 0))
    -- dual stack: an IPv4 sender reaches it
    local _, pc = c:address()
    assert(a:send("over v4", pc, "127.0.0.1"))
    local data, from_host = c:recv(2000)
    assert.are.equal("over v4", data)
    assert.are.equal("127.0.0.1", from_host)
    a:close()
    b:close()
    c:close()
  end))

  it("sends and receives raw datagrams, with a timeout on recv", run(function()
    local a = assert(udx.bind("127.0.0.1", 0))
    local b = assert(udx.bind("127.0.0.1", 0))
    local _, pa = a:address()
    local _, pb = b:address()
    assert(a:send("ping", pb, "127.0.0.1"))
    local data, host, port = b:recv(2000)
    assert.are.equal("ping", data)
    assert.are.equal("127.0.0.1", host)
    assert.are.equal(pa, port)
    assert(b:send("pong", port, host))
    assert.are.equal("pong", (a:recv(2000)))
    assert.are.same({ nil, "timed out", "ETIMEDOUT" }, { a:recv(10) })
    -- a datagram that looks like UDX but names no stream is still raw
    local fake = "\255\1\0\0" .. string.rep("\0", 16)
    assert(a:send(fake, pb, "127.0.0.1"))
    assert.are.equal(fake, (b:recv(2000)))
    a:close()
    b:close()
  end))

  it("a datagram larger than UDP or the path allows is EMSGSIZE, not sent", run(function()
    local a = assert(udx.bind("127.0.0.1", 0))
    local b = assert(udx.bind("127.0.0.1", 0))
    local _, pb = b:address()
    -- the largest IPv4 UDP payload leaves through loopback (MTU 64 KiB;
    -- udx's receive side drops it as truncated, which is not tested here)
    assert.is_true(a:send(string.rep("x", 65507), pb, "127.0.0.1"))
    local ok, msg, code = a:send(string.rep("x", 65508), pb, "127.0.0.1")
    assert.is_nil(ok)
    assert.are.equal("EMSGSIZE", code, tostring(msg))
    -- the kernel's refusal (a path MTU below the datagram), injected
    assert(a:set_fault({ send_error = 1, send_errno = "EMSGSIZE", direction = "tx" }))
    ok, msg, code = a:send("small but refused", pb, "127.0.0.1")
    assert.is_nil(ok)
    assert.are.equal("EMSGSIZE", code, tostring(msg))
    -- other send errors stay transient: counted, dropped, true
    assert(a:set_fault({ send_error = 1, send_errno = "ENETUNREACH", direction = "tx" }))
    assert.is_true(a:send("dropped", pb, "127.0.0.1"))
    assert(a:set_fault(nil))
    assert(a:send("after", pb, "127.0.0.1"))
    assert.are.equal("after", (b:recv(2000)))
    assert.is_true(a:stats().send_err_msgsize >= 1)
    a:close()
    b:close()
  end))

  it("asks for libudx's buffer sizes", run(function()
    local a = assert(udx.bind("127.0.0.1", 0))
    local snd, rcv = a:buffer_sizes()
    -- the kernel reports twice what was set, capped by its limits
    assert.is_true(snd >= 212992)
    assert.is_true(rcv >= 212992)
    a:close()
  end))

  it("names wrong arguments", run(function()
    local _, err = pcall(udx.bind, 42, 0)
    assert.matches("bad argument 'host' to 'bind'", err)
    _, err = pcall(udx.bind, "127.0.0.1", 70000)
    assert.matches("bad argument 'port' to 'bind'", err)
    local a = assert(udx.bind("127.0.0.1", 0))
    _, err = pcall(a.send, a, {}, 1, "127.0.0.1")
    assert.matches("bad argument 'data' to 'send'", err)
    local ok
    ok, err = pcall(a.send, a, "x", 1, "not an address")
    assert.is_false(ok)
    assert.matches("host", err)
    _, err = pcall(a.set_ack_pause, a, 1001)
    assert.matches("bad argument 'us' to 'set_ack_pause'", err)
    _, err = pcall(a.set_ack_pause, a, "100")
    assert.matches("bad argument 'us' to 'set_ack_pause'", err)
    assert.is_true(a:set_ack_pause(0))
    a:close()
    local _, _, closed = a:set_ack_pause(100)
    assert.are.equal("EBADF", closed)
    _, err = pcall(udx.bind, "127.0.0.1", 0, { ack_pause_us = -1 })
    assert.matches("bad argument 'ack_pause_us' to 'bind'", err)
    local c = assert(udx.bind("127.0.0.1", 0, { ack_pause_us = 0 }))
    c:close()
    local s, _, code = udx.bind("203.0.113.77", 0)
    assert.is_nil(s)
    assert.are.equal("EADDRNOTAVAIL", code)
  end))
end)

describe("udx streams", function()
  it("move 5 MB in order, and END is seen on both sides", run(function()
    local s1, s2, a, b = pair()
    local data = make_data(5 * 1024 * 1024, 7)
    ludx.spawn("writer", function()
      local off = 1
      while off <= #data do
        assert(s1:write(data:sub(off, off + 65535)))
        off = off + 65536
      end
      assert(s1:finish(10000))
    end)
    local got = assert(read_all(s2))
    assert.are.equal(#data, #got)
    assert.is_true(got == data)
    assert(s2:finish(10000))
    assert.is_nil(s1:read(nil, 5000)) -- EOF the other way too
    s1:close()
    s2:close()
    a:close()
    b:close()
  end))

  it("read hands over all available bytes, up to max", run(function()
    local s1, s2, a, b = pair()
    assert(s1:write(string.rep("a", 3000)))
    assert(s1:flush(5000))
    ludx.sleep(20)
    local chunk = assert(s2:read(1000))
    assert.are.equal(1000, #chunk)
    chunk = assert(s2:read())
    assert.are.equal(2000, #chunk)
    s1:close()
    s2:close()
    a:close()
    b:close()
  end))

  -- LuaJIT pays for a 64 KiB string 1 KiB per later allocation: a reader
  -- that drops what it reads would let dead strings pile up to tens of MB.
  -- Reads pay for their strings once a collection is due.
  it("reading 256 MB in 64 KB strings keeps the Lua heap near its live size", run(function()
    local s1, s2, a, b = pair()
    -- one block written again and again (the writer makes no garbage); its
    -- odd size shifts what each 64 KB read holds, so the reads are distinct
    -- strings (equal ones would be interned, not allocated)
    local block = ludx.core.datagen(9):next(1024 * 1024 + 7)
    local n = 256
    local writer = ludx.spawn("writer", function()
      for _ = 1, n do assert(s1:write(block)) end
      assert(s1:finish())
    end)
    collectgarbage()
    collectgarbage()
    local live = collectgarbage("count") -- KiB
    local peak, got = 0, 0
    while true do
      local chunk = s2:read(nil, 20000)
      if not chunk then break end
      got = got + #chunk
      peak = math.max(peak, collectgarbage("count"))
    end
    writer:join(20000)
    assert.are.equal(n * #block, got)
    -- a collection is due at twice the heap a cycle left (2.4 x live
    -- seen; 5 x before reads paid for their strings)
    assert.is_true(peak < 3 * live + 1024, string.format("peak %.0f KiB, live %.0f KiB", peak, live))
    s1:close()
    s2:close()
    a:close()
    b:close()
  end))

  it("write waits only above the high-water mark", run(function()
    local s1, s2, a, b = pair()
    -- below the mark: returns at once, no wait
    local t = ludx.spawn("small", function() return s1:write(string.rep("x", 1000)) end)
    ludx.yield()
    assert.are.equal("dead", t.state)
    -- a writer far above it waits until the reader drains
    local big = string.rep("y", 8 * 1024 * 1024)
    local writer = ludx.spawn("big", function() return s1:write(big) end)
    assert.are.equal("write drain", wait_for_wait(writer, "write drain"))
    assert.are.equal("waiting", writer.state)
    local n = 0
    while n < 1000 + #big do
      local chunk = assert(s2:read(nil, 10000))
      n = n + #chunk
    end
    assert.is_true(writer:join(10000))
    s1:close()
    s2:close()
    a:close()
    b:close()
  end))

  it("a large write is queued in pieces as the queue drains; a timeout still takes it all", run(function()
    local s1, s2, a, b = pair()
    local big = make_data(8 * 1024 * 1024, 3)
    local writer = ludx.spawn("big", function() return s1:write(big) end)
    assert.are.equal("write drain", wait_for_wait(writer, "write drain"))
    -- the queue holds about the high-water mark plus a piece, not the 8 MB
    assert.is_true(s1:stats().write_queued < 2 * 1024 * 1024)
    local got = {}
    local n = 0
    while n < #big do
      local chunk = assert(s2:read(nil, 10000))
      got[#got + 1] = chunk
      n = n + #chunk
    end
    assert.is_true(writer:join(10000))
    assert.is_true(table.concat(got) == big)
    -- nobody reads: the write times out, yet every byte is queued
    assert.are.same({ nil, "timed out", "ETIMEDOUT" }, { s1:write(big, 50) })
    got, n = {}, 0
    while n < #big do
      local chunk = assert(s2:read(nil, 10000))
      got[#got + 1] = chunk
      n = n + #chunk
    end
    assert.is_true(table.concat(got) == big)
    assert(s1:flush(10000))
    s1:close()
    s2:close()
    a:close()
    b:close()
  end))

  it("destroy sends DESTROY: the remote sees ECONNRESET", run(function()
    local s1, s2, a, b = pair()
    assert(s1:write("hello"))
    assert(s1:flush(5000))
    s1:destroy()
    local got, msg, code = read_all(s2, 5000)
    if got then
      -- everything arrived before the reset was noticed: the next read errs
      got, msg, code = s2:read(nil, 5000)
    end
    assert.is_nil(got)
    assert.are.equal("ECONNRESET", code)
    assert.is_string(msg)
    -- writes on a reset stream fail with the same error
    local ok, _, wcode = s2:write("x")
    assert.is_nil(ok)
    assert.are.equal("ECONNRESET", wcode)
    -- and so does its close, every time: what it wrote may be lost
    for _ = 1, 2 do
      local c, cmsg, ccode = s2:close()
      assert.is_nil(c)
      assert.are.equal("ECONNRESET", ccode)
      assert.is_string(cmsg)
    end
    -- our own destroy is no failure to report: a close after it is true
    assert.is_true(s1:close())
    a:close()
    b:close()
  end))

  it("close is graceful: every byte written arrives, the remote sees EOF, both ends close", run(function()
    local s1, s2, a, b = pair()
    local data = make_data(3 * 1024 * 1024, 7)
    -- a write in pieces under way in another task goes out whole before the END
    local writer = ludx.spawn(function() return s1:write(data, 20000) end)
    ludx.yield()
    local closer = ludx.spawn(function() return s1:close(20000) end)
    local got, msg, code = read_all(s2, 20000)
    assert.is_nil(msg, tostring(code))
    assert.are.equal(#data, #got)
    assert.is_true(got == data)
    assert.are.same({ true }, { writer:join() }) -- its bytes were all queued
    -- close returns once the peer has acked every byte and the END
    assert.are.same({ true }, { closer:join() })
    assert.is_false(s1:is_closed()) -- it lingers until the peer's END
    -- the caller's side is closed from the start of close: ECANCELED
    assert.are.same({ nil, "stream is closed", "ECANCELED" }, { s1:write("x") })
    assert.are.same({ nil, "stream is closed", "ECANCELED" }, { s1:read() })
    -- the remote ends too: then both ends close, without an error
    assert.is_true(s2:close(10000))
    assert.is_true(s1:wait_closed(10000))
    assert.is_true(s2:wait_closed(10000))
    assert.is_nil(s1:error())
    assert.is_nil(s2:error())
    -- idempotent
    assert.is_true(s1:close())
    assert.is_true(s1:destroy())
    a:close()
    b:close()
  end))

  it("close drops what the peer still sends (acked, so its finish completes) and wakes a waiting reader", run(function()
    local s1, s2, a, b = pair()
    assert(s2:write("unread"))
    assert(s1:wait_readable(5000))
    local reader = ludx.spawn(function()
      assert(s1:read(nil, 5000)) -- the buffered bytes
      return s1:read(nil, 20000)
    end)
    ludx.yield()
    assert.is_true(s1:close(20000))
    assert.are.same({ nil, "stream is closed", "ECANCELED" }, { reader:join() })
    -- the peer writes on, then ends: its bytes are acked and dropped
    assert(s2:write(string.rep("z", 2 * 1024 * 1024), 10000))
    assert.is_true(s2:finish(20000))
    assert.are.equal(0, s1:stats().read_buffered) -- nothing held for nobody
    assert.is_nil(s2:read(nil, 10000)) -- EOF: s1's END
    assert.is_true(s1:wait_closed(10000))
    assert.is_true(s2:wait_closed(10000))
    assert.is_nil(s1:error())
    assert.is_nil(s2:error())
    a:close()
    b:close()
  end))

  it("close gives up after its timeout: the stream is reset (ETIMEDOUT here, ECONNRESET there)", run(function()
    local s1, s2, a, b = pair()
    assert(s1:write("last words"))
    -- s2 acks the END but never ends its half: s1 lingers, then resets
    assert.is_true(s1:close(300))
    assert.is_true(s1:wait_closed(10000))
    assert.are.equal("ETIMEDOUT", select(2, s1:error()))
    assert.are.equal("last words", s2:read(nil, 5000))
    assert.is_nil(s2:read(nil, 5000)) -- our END came before the reset
    assert.is_true(s2:wait_closed(10000))
    assert.are.equal("ECONNRESET", select(2, s2:error()))
    -- a peer that is gone never acks the END: close says so
    local s3 = assert(udx.stream(3))
    local c = assert(udx.bind("127.0.0.1", 0))
    local _, pc = c:address()
    assert(s3:connect(a, 4, pc, "127.0.0.1"))
    c:close()
    assert(s3:write("into the void"))
    local ok, _, code = s3:close(300)
    assert.is_nil(ok)
    assert.are.equal("ETIMEDOUT", code)
    assert.is_true(s3:is_closed())
    a:close()
    b:close()
  end))

  it("destroy cuts a graceful close short; close outside a task starts it and returns", run(function()
    local s1, s2, a, b = pair()
    b:close() -- nobody acks: the close waits
    local closer = ludx.spawn(function() return s1:close(60000) end)
    ludx.yield()
    assert.is_true(s1:destroy())
    assert.are.same({ nil, "stream is closed", "ECANCELED" }, { closer:join() })
    -- outside a task: the close starts and the call returns at once
    local s3, s4, c, d = pair({ id = 3 }, { id = 4 })
    local fired = ludx.waiters()
    ludx.after(0, function() fired:wake_all(s3:close(10000)) end)
    assert.is_true(fired:wait("timer", 10000))
    assert.is_nil(s4:read(nil, 5000)) -- EOF, not a reset
    assert.is_true(s4:close(10000))
    assert.is_true(s3:wait_closed(10000))
    assert.is_nil(s3:error())
    for _, x in ipairs({ s2, a, c, d }) do x:destroy() end
  end))

  it("closing a stream that never connected says its written bytes were not delivered (ENOTCONN)", run(function()
    local notconn = { nil, "stream never connected: written bytes not delivered", "ENOTCONN" }
    -- idle: nothing lost
    local idle = assert(udx.stream(40))
    assert.is_true(idle:close(10000))
    assert.is_true(idle:close())
    assert.is_nil(idle:error())
    -- written, never connect()ed: every close says so, and error()
    local s = assert(udx.stream(41))
    assert.is_true(s:write("hello"))
    assert.are.same(notconn, { s:close(10000) })
    assert.is_true(s:wait_closed(10000))
    assert.are.same(notconn, { s:close() })
    assert.are.same({ notconn[2], notconn[3] }, { s:error() })
    -- a connect that failed; a writer waiting for room and a finish
    -- waiting for the END's ack hear it too; so does a close outside a task
    local sock = assert(udx.bind("127.0.0.1", 0))
    local f = assert(udx.stream(42))
    assert.are.equal("EINVAL", select(3, f:connect(sock, 43, 1, "::1")))
    local writer = ludx.spawn(function() return f:write(string.rep("w", 4 * 1024 * 1024), 60000) end)
    assert.are.equal("write drain", wait_for_wait(writer, "write drain"))
    local g = assert(udx.stream(44))
    assert.is_true(g:write("x"))
    local finisher = ludx.spawn(function() return g:finish(60000) end)
    assert.are.equal("finish", wait_for_wait(finisher, "finish"))
    assert.are.same(notconn, { f:close(10000) })
    assert.are.same(notconn, { writer:join() })
    local fired = ludx.waiters()
    ludx.after(0, function() fired:wake_all(g:close(10000)) end)
    assert.are.same(notconn, { fired:wait("timer", 10000) })
    assert.are.same(notconn, { finisher:join() })
    -- after a destroy there is nothing to report (the user dropped them)
    local d = assert(udx.stream(45))
    assert.is_true(d:write("x"))
    assert.is_true(d:destroy())
    assert.is_true(d:close())
    sock:close()
  end))

  it("a closed stream takes no more messages; a second, shorter close wins", run(function()
    local s1, s2, a, b = pair()
    assert(s2:send("before"))
    assert(s1:wait_readable(10) or true)
    local fired = ludx.waiters()
    ludx.after(0, function() fired:wake_all(s1:close(60000)) end)
    assert.is_true(fired:wait("timer", 10000))
    assert.are.same({ nil, "stream is closed", "ECANCELED" }, { s1:recv(100) })
    for _ = 1, 200 do assert(s2:send(string.rep("m", 1000))) end
    assert.is_falsy(s1.h:take_message()) -- nothing queued for nobody
    -- s2 never ends: the second close's 200 ms end the linger, not 60 s
    assert.is_true(s1:close(200))
    assert.is_true(s1:wait_closed(10000))
    assert.are.equal("ETIMEDOUT", select(2, s1:error()))
    s2:destroy()
    a:close()
    b:close()
  end))

  it("lingering streams are capped (the oldest done sending is reset first), and a socket's close ends them", run(function()
    -- what earlier cases left lingering ends within their close timeouts
    for _ = 1, 300 do
      if udx.lingering() == 0 then break end
      ludx.sleep(50)
    end
    assert.are.equal(0, udx.lingering())
    local a = assert(udx.bind("127.0.0.1", 0))
    local b = assert(udx.bind("127.0.0.1", 0))
    local _, pa = a:address()
    local _, pb = b:address()
    -- the oldest: still sending (nobody acks its END)
    local gone = assert(udx.bind("127.0.0.1", 0))
    local _, pg = gone:address()
    gone:close()
    local stuck = assert(udx.stream(99))
    assert(stuck:connect(a, 98, pg, "127.0.0.1"))
    assert(stuck:write("never acked"))
    local closer = ludx.spawn("closer", function() return stuck:close(10000) end)
    ludx.yield()
    assert.are.equal(1, udx.lingering())
    local saved = udx.MAX_LINGERING
    udx.MAX_LINGERING = 4
    local mine, theirs = {}, {}
    for i = 1, 6 do
      local s1 = assert(udx.stream(100 + i))
      local s2 = assert(udx.stream(200 + i))
      assert(s1:connect(a, 200 + i, pb, "127.0.0.1"))
      assert(s2:connect(b, 100 + i, pa, "127.0.0.1"))
      assert(s1:close(10000)) -- acked; the peer never ends: it lingers
      mine[i], theirs[i] = s1, s2
    end
    udx.MAX_LINGERING = saved
    for i = 1, 3 do
      assert.is_true(mine[i]:wait_closed(5000))
      assert.are.equal("ECANCELED", select(2, mine[i]:error()))
    end
    for i = 4, 6 do assert.is_false(mine[i]:is_closed()) end
    assert.is_false(stuck:is_closed()) -- still delivering: not pushed out
    assert.are.equal(4, udx.lingering())
    -- the socket's close resets the rest at once and frees its port
    a:close()
    for i = 4, 6 do
      assert.is_true(mine[i]:wait_closed(5000))
      assert.is_nil(mine[i]:error()) -- their END was acked: nothing lost
    end
    assert.is_true(stuck:wait_closed(5000))
    -- its END was never acked: its close says the bytes may be lost
    local ok, _, code = closer:join(5000)
    assert.is_nil(ok)
    assert.are.equal("ECANCELED", code)
    local again = assert(udx.bind("127.0.0.1", pa))
    again:close()
    for i = 1, 6 do theirs[i]:destroy() end
    b:close()
  end))

  it("a stream the lingering cap resets before its END was acked says so to every close", run(function()
    local s1, s2, a, b = pair()
    assert(s1:write("bytes"))
    local saved = udx.MAX_LINGERING
    udx.MAX_LINGERING = 0 -- the close's own stream is pushed out at once
    local ok, _, code = s1:close(10000)
    udx.MAX_LINGERING = saved
    assert.is_nil(ok)
    assert.are.equal("ECANCELED", code)
    ok, _, code = s1:close()
    assert.is_nil(ok)
    assert.are.equal("ECANCELED", code)
    s2:destroy()
    a:close()
    b:close()
  end))

  it("wait_readable, wait_drain, error and handle: the methods layers above use", run(function()
    local s1, s2, a, b = pair()
    assert.are.equal("userdata", type(s1:handle()))
    assert.is_nil(s1:error())
    -- nothing buffered: waits, and times out
    assert.are.same({ nil, "timed out", "ETIMEDOUT" }, { s2:wait_readable(10) })
    assert(s1:write("abc"))
    assert.is_true(s2:wait_readable(5000))
    assert.are.equal("abc", s2:read())
    -- a write above the high-water mark, then its drain
    local r = s1:handle():write(string.rep("d", 4 * 1024 * 1024))
    if r == 0 then assert.is_true(s1:wait_drain(10000)) end
    assert(s1:finish(10000))
    -- the end is next: no wait
    local got = 0
    while got < 4 * 1024 * 1024 do got = got + #assert(s2:read(nil, 10000)) end
    assert.is_true(s2:wait_readable(5000))
    assert.is_nil(s2:read(nil, 5000))
    assert.is_true(s2:wait_readable())
    -- after a graceful close: no error; waits end at once, with ECANCELED
    assert.is_true(s2:close(10000))
    assert.is_nil(s2:error())
    assert.are.same({ nil, "stream is closed", "ECANCELED" }, { s2:wait_readable(5000) })
    assert.is_nil(s1:read(nil, 5000)) -- s2's END: now s1 has ended both ways
    assert.is_true(s1:wait_closed(10000))
    assert.is_nil(s1:error())
    a:close()
    b:close()
  end))

  it("carries MESSAGE datagrams both ways", run(function()
    local s1, s2, a, b = pair()
    assert(s1:send("one"))
    assert.are.equal("one", s2:recv(2000))
    assert(s2:send("two"))
    assert.are.equal("two", s1:recv(2000))
    assert.are.same({ nil, "timed out", "ETIMEDOUT" }, { s1:recv(10) })
    local ok, _, code = s1:send(string.rep("m", 5000))
    assert.is_nil(ok)
    assert.are.equal("EMSGSIZE", code)
    s1:close()
    s2:close()
    a:close()
    b:close()
  end))

  it("a read-buffer limit bounds what a stream holds for a slow reader", run(function()
    local limit = 64 * 1024
    local s1, s2, a, b = pair(nil, { read_buffer_limit = limit })
    local data = make_data(2 * 1024 * 1024, 3)
    ludx.spawn("writer", function()
      assert(s1:write(data))
      assert(s1:finish(20000))
    end)
    ludx.sleep(200)
    local st = s2:stats()
    assert.is_true(st.read_buffered <= limit + 1500, "held " .. st.read_buffered)
    assert.is_true(st.recv_rwnd <= limit)
    local got = assert(read_all(s2, 20000))
    assert.is_true(got == data)
    s1:close()
    s2:close()
    a:close()
    b:close()
  end))

  it("stats have the documented fields", run(function()
    local s1, s2, a, b = pair()
    assert(s1:write(string.rep("z", 100000)))
    assert(s1:flush(5000))
    local st = s1:stats()
    for _, k in ipairs({ "rtt_ms", "cwnd", "inflight", "bytes_sent", "bytes_received", "packets_sent",
      "packets_received", "retransmits", "rto_count", "fast_recoveries", "mtu", "pacing_rate", "bbr_state" }) do
      assert.is_not_nil(st[k], k)
    end
    assert.is_true(st.bytes_sent >= 100000)
    assert.is_true(st.packets_sent >= 69)
    assert.is_true(st.rtt_ms > 0)
    assert.is_string(st.bbr_state)
    assert.is_true(s2:stats().packets_received >= 69)
    s1:close()
    s2:close()
    a:close()
    b:close()
  end))

  it("reads, writes and finish take timeouts; a second reader gets EBUSY", run(function()
    local s1, s2, a, b = pair()
    assert.are.same({ nil, "timed out", "ETIMEDOUT" }, { s2:read(nil, 10) })
    assert.are.same({ nil, "timed out", "ETIMEDOUT" }, { s2:read({ timeout = 10 }) })
    local r1 = ludx.spawn("reader1", function() return s2:read(nil, 1000) end)
    ludx.yield()
    assert.are.same({ nil, "busy reading", "EBUSY" }, { s2:read(nil, 10) })
    assert(s1:write("data"))
    assert.are.equal("data", r1:join())
    s1:close()
    s2:close()
    a:close()
    b:close()
  end))

  it("gives up with ETIMEDOUT when the peer never answers", run(function()
    local a = assert(udx.bind("127.0.0.1", 0))
    local dead = assert(udx.bind("127.0.0.1", 0))
    local _, port = dead:address()
    dead:close()
    local s = assert(udx.stream(11, { timeout = 1500 }))
    assert(s:connect(a, 12, port, "127.0.0.1"))
    assert(s:write("anyone there?"))
    local ok, msg, code = s:finish(20000)
    assert.is_nil(ok)
    assert.are.equal("ETIMEDOUT", code)
    assert.is_string(msg)
    a:close()
  end))

  it("completes a transfer through 2% seeded loss", run(function()
    local s1, s2, a, b = pair()
    a:set_fault({ seed = 42, loss = 0.02, direction = "tx" })
    b:set_fault({ seed = 43, loss = 0.02, direction = "tx" })
    local data = make_data(2 * 1024 * 1024, 9)
    ludx.spawn("writer", function()
      assert(s1:write(data))
      assert(s1:finish(20000))
    end)
    local got = assert(read_all(s2, 20000))
    assert.is_true(got == data)
    assert.is_true(s1:stats().retransmits > 0)
    s1:close()
    s2:close()
    a:close()
    b:close()
  end))

  it("starts just below 2^32 and wraps", run(function()
    local seq = 0xFFFFFFFF - 5
    local s1, s2, a, b = pair({ id = 1, seq = seq }, { id = 2, seq = seq })
    -- the other side expects our first seq: set acks before traffic
    s1.h:set_ack(seq)
    s2.h:set_ack(seq)
    local data = make_data(300000, 5)
    ludx.spawn("writer", function()
      assert(s1:write(data))
      assert(s1:finish(10000))
    end)
    local got = assert(read_all(s2, 10000))
    assert.is_true(got == data)
    s1:close()
    s2:close()
    a:close()
    b:close()
  end))

  it("firewall 'connect' connects an unconnected stream to its first source", run(function()
    local a = assert(udx.bind("127.0.0.1", 0))
    local b = assert(udx.bind("127.0.0.1", 0))
    local _, pb = b:address()
    local server = assert(udx.stream(21))
    assert(server:firewall("connect", 22))
    local client = assert(udx.stream(22))
    assert(client:connect(a, 21, pb, "127.0.0.1"))
    assert(client:write("first packet"))
    assert(server:wait_connected(5000))
    local _, rport = server:remote_address()
    local _, pa = a:address()
    assert.are.equal(pa, rport)
    assert.are.equal("first packet", server:read(nil, 5000))
    assert(server:write("reply"))
    assert.are.equal("reply", client:read(nil, 5000))
    -- closed gracefully while the client never ends: it lingers, and counts
    -- toward udx.MAX_LINGERING though no socket object knows it (what
    -- earlier cases left lingering ends first, within their close timeouts)
    for _ = 1, 300 do
      if udx.lingering() == 0 then break end
      ludx.sleep(50)
    end
    local n0 = udx.lingering()
    assert.is_true(server:close(10000))
    assert.are.equal(n0 + 1, udx.lingering())
    -- closing the socket it came in on ends it at once
    b:close()
    assert.is_true(server:wait_closed(5000))
    assert.are.equal(n0, udx.lingering())
    client:destroy()
    a:close()
  end))

  it("reports a duplicate local id and names wrong arguments", run(function()
    local s = assert(udx.stream(31))
    local dup, _, code = udx.stream(31)
    assert.is_nil(dup)
    assert.are.equal("EADDRINUSE", code)
    local _, err = pcall(udx.stream, -1)
    assert.matches("bad argument 'id' to 'stream'", err)
    _, err = pcall(s.write, s, 42)
    assert.matches("bad argument 'data' to 'write'", err)
    _, err = pcall(s.connect, s, "not a socket", 1, 1, "127.0.0.1")
    assert.matches("bad argument 'sock' to 'connect'", err)
    _, err = pcall(s.read, s, -5)
    assert.matches("bad argument 'max' to 'read'", err)
    s:close()
  end))
end)
