-- ludx beam [PASSPHRASE]: a 1-1 encrypted pipe between two machines, stdin
-- to stdout, that the npm `hyperbeam` 3.x command line meets (either side
-- may be either program).
--
-- The facts it agrees on with hyperbeam: the passphrase is 32 random bytes
-- in RFC 4648 base32 (lower case, no padding: 52 characters); decoded, it is
-- the seed of one Ed25519 key pair that both sides hold. The side that made
-- the passphrase (or was given -r) listens on the DHT under that key pair
-- and lets in only clients that prove the same key; the other side connects
-- to the public key with the same key pair. When the remote side ends its
-- half, this side ends its own too (what stdin has not sent yet stays
-- unsent) and exits once both halves are done.
local common = require "ludx.cmd.common"

local M = {}

local usage = [[
usage: ludx beam [options] [PASSPHRASE]

A 1-1 end-to-end encrypted pipe: stdin goes to the other side's stdout and
back. Without PASSPHRASE it makes a new one, prints it on stderr and waits
for the other side (`ludx beam PASSPHRASE` or `hyperbeam PASSPHRASE`, the
npm tool, which meets it both ways). With PASSPHRASE it connects to the side
that made it. The phrase is 52 base32 characters (32 random bytes, the seed
of the key pair both sides hold); only its holders can join, and the
listening side stops listening once its peer is in (it unannounces while
the pipe runs, and waits for that before it exits).

The pipe ends when both sides have ended: stdin's end ends this side's
half; the other side's end ends ours too (as hyperbeam does). Ctrl-C before
the pipe is up quits (the listening side unannounces first; a second Ctrl-C
quits at once); after, it ends this side's half, and a second Ctrl-C
quits at once.

options:
  -r, --reuse          listen under PASSPHRASE instead of connecting (to
                       restart the listening side with the same phrase)
  --bootstrap H:P,...  DHT bootstrap nodes (default: the public HyperDHT
                       network; `ludx dht testnet` prints a local one)
  --timeout MS         give up joining the DHT or connecting after MS
                       (default 30000 to join, the DHT's own to connect)
  -h, --help           this help
]]

local ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"
local VALUE = {}
for i = 1, 32 do
  VALUE[ALPHABET:sub(i, i)] = i - 1
  VALUE[ALPHABET:sub(i, i):upper()] = i - 1
end

local SEED_CHARS = 52 -- 256 bits in 5-bit characters
local CHUNK = 65536 -- bytes per stdin read (one encrypted frame)

--- bytes -> base32, lower case, without padding.
function M.encode(bytes)
  if type(bytes) ~= "string" then error("bad argument 'bytes' to 'encode' (string expected, got " .. type(bytes) .. ")", 2) end
  local out, acc, nbits = {}, 0, 0
  for i = 1, #bytes do
    acc = acc * 256 + bytes:byte(i)
    nbits = nbits + 8
    while nbits >= 5 do
      nbits = nbits - 5
      local v = math.floor(acc / 2 ^ nbits)
      acc = acc - v * 2 ^ nbits
      out[#out + 1] = ALPHABET:sub(v + 1, v + 1)
    end
  end
  if nbits > 0 then
    local v = acc * 2 ^ (5 - nbits)
    out[#out + 1] = ALPHABET:sub(v + 1, v + 1)
  end
  return table.concat(out)
end

--- A passphrase -> its 32-byte seed; nil, msg when it is not one. Any case;
-- "=" padding is ignored and so are the spare low bits of the last
-- character, as hyperbeam decodes.
function M.decode(phrase)
  if type(phrase) ~= "string" then error("bad argument 'phrase' to 'decode' (string expected, got " .. type(phrase) .. ")", 2) end
  if not phrase:match("^[A-Za-z2-7=]+$") then return nil, "the passphrase has characters other than a-z, 2-7" end
  local s = phrase:gsub("=", "")
  if #s ~= SEED_CHARS then
    return nil, "the passphrase has " .. #s .. " characters, " .. SEED_CHARS .. " expected"
  end
  local out, acc, nbits = {}, 0, 0
  for i = 1, #s do
    acc = acc * 32 + VALUE[s:sub(i, i)]
    nbits = nbits + 5
    if nbits >= 8 then
      nbits = nbits - 8
      local b = math.floor(acc / 2 ^ nbits)
      acc = acc - b * 2 ^ nbits
      out[#out + 1] = string.char(b)
    end
  end
  return table.concat(out)
end

-- stdin and stdout as byte streams: a pipe, socket or terminal through the
-- loop (bounded buffers, see ludx.tcp.stdio), a regular file directly.
local function stdio()
  local tcp = require "ludx.tcp"
  local inp, msg = tcp.stdio(0)
  if inp == nil then return nil, "stdin: " .. tostring(msg) end
  local outp
  outp, msg = tcp.stdio(1)
  if outp == nil then
    if inp then inp:close() end
    return nil, "stdout: " .. tostring(msg)
  end
  if not outp then io.stdout:setvbuf("full") end
  local io_ = {}
  function io_.read()
    if inp then return inp:read(CHUNK) end
    return io.stdin:read(CHUNK)
  end
  function io_.write(d)
    if outp then return outp:write(d) end
    local ok, err = io.stdout:write(d)
    if ok then ok, err = io.stdout:flush() end -- a reader of the file sees each chunk
    if not ok then return nil, err end
    return true
  end
  -- every byte written reaches stdout (a pipe's queue drains)
  function io_.flush()
    if outp then
      local ok, err, code = outp:finish()
      if not ok and code ~= "ENOTSOCK" then return nil, err end
      return true
    end
    local ok, err = io.stdout:flush()
    if not ok then return nil, err end
    return true
  end
  function io_.close()
    if inp then inp:close() end
    if outp then outp:close() end
  end
  return io_
end

local function main(opts, phrase)
  local ludx = require "ludx"
  local dht = require "ludx.dht"
  local function say(fmt, ...)
    io.stderr:write("[ludx beam] " .. string.format(fmt, ...) .. "\n") -- one write: whole lines
    io.stderr:flush()
  end

  local announce = opts.reuse and true or false
  local seed, msg
  if phrase then
    seed, msg = M.decode(phrase)
    if not seed then return nil, msg .. " (to make a new pipe, give no passphrase)" end
  else
    seed = ludx.core.crypto.randombytes(32)
    phrase = M.encode(seed)
    announce = true
  end
  local kp = dht.keypair(seed)

  if announce then
    say("Run ludx beam %s to connect", phrase)
    say("(hyperbeam %s connects too)", phrase)
    say("To restart this side of the pipe with the same key add -r to the above")
  else
    say("Connecting pipe...")
  end

  local node
  node, msg = common.node(opts)
  if not node then return nil, msg end

  local function joined()
    local host, port = node:remote_address()
    if host then say("Joined the DHT - remote address is %s:%d", host, port) else say("Could not detect remote address") end
  end

  -- Ctrl-C / SIGTERM: before the pipe is up, quit; after, end our half
  local state = { ev = ludx.waiters() }
  local function wake() state.ev:wake_all(true) end
  local signals = ludx.spawn("beam signals", function()
    while true do
      ludx.signal({ "SIGINT", "SIGTERM" })
      state.signals = (state.signals or 0) + 1
      wake()
    end
  end)

  local conn
  local timeout = tonumber(opts.timeout)
  local unannouncing -- the task that unannounces while the pipe runs
  local function shutdown(status, err)
    -- a finished pipe ends gracefully (both ENDs are through by now); an
    -- error or a signal resets it
    if conn then
      if status == 0 then conn:close(5000) else conn:destroy() end
    end
    -- the announcement must not outlive the pipe: wait for the unannounce
    -- (bounded by its timeout); a signal during the wait, or the second
    -- Ctrl-C that ended the pipe, cuts it short
    if unannouncing then
      local seen = state.signals
      if not state.unannounced and err ~= "interrupted" then say("Unannouncing... (Ctrl-C quits at once)") end
      while not state.unannounced and state.signals == seen and err ~= "interrupted" do
        state.ev:wait("beam: unannouncing")
      end
      unannouncing.server:destroy() -- ends a close still waiting (idempotent)
      unannouncing.task:join()
    end
    signals:cancel("beam over")
    node:destroy()
    if err then say("Error: %s", err) end
    return status
  end

  if announce then
    local server = node:server(function(c)
      -- the first client is the other end (hyperbeam's listening side
      -- writes to its first connection only); one that raced in before the
      -- server closed is turned away
      if conn or state.quit then
        c:destroy()
        return
      end
      conn = c
      wake()
    end, { firewall = function(remote_public_key) return remote_public_key ~= kp.public_key end })
    local ok, err = server:listen(kp, timeout)
    if not ok then return shutdown(1, "could not announce: " .. tostring(err)) end
    joined()
    while not conn and not state.signals do state.ev:wait("beam: a peer") end
    if not conn then
      say("Shutting down beam...")
      state.quit = true
      -- unannounce, so no stale record of the key stays on the DHT (issue
      -- 14); a second Ctrl-C cuts the wait short
      local seen = state.signals
      local cutter = ludx.spawn("beam unannounce", function()
        while state.signals == seen do state.ev:wait("beam: unannouncing") end
        server:destroy()
      end)
      server:close({ timeout = timeout })
      cutter:cancel("unannounced")
      return shutdown(130)
    end
    -- stop listening at once (no one else gets in) and unannounce in the
    -- background, so the record does not outlive the pipe on the DHT and
    -- the pipe does not wait for it
    unannouncing = {
      server = server,
      task = ludx.spawn("beam unannounce", function()
        pcall(server.close, server, { timeout = timeout }) -- at most timeout (the DHT's 10 s by default)
        state.unannounced = true
        wake()
      end),
    }
    local ok2, err2 = conn:ready(timeout)
    if not ok2 then return shutdown(1, err2) end
  else
    local connecting = ludx.spawn("beam connect", function()
      local c, err = node:connect(kp.public_key, { keypair = kp, timeout = timeout })
      state.connected = true
      if c and state.signals then
        c:destroy()
        return
      end
      conn, state.connect_error = c, err
      wake()
    end)
    while not state.connected and not state.signals do state.ev:wait("beam: connecting") end
    if not state.connected then
      say("Shutting down beam...")
      connecting:cancel("interrupted")
      return shutdown(130)
    end
    if not conn then return shutdown(1, tostring(state.connect_error)) end
    joined()
  end
  say("Success! Encrypted tunnel established to remote peer")

  local std, err = stdio()
  if not std then return shutdown(1, err) end

  -- stdin -> the pipe; ends our half at stdin's end, or when asked to
  -- (the remote's end, Ctrl-C): in a read, at once; in a write, after it
  local up_state = "reading"
  local up = ludx.spawn("beam stdin", function()
    while not state.stop_up do
      up_state = "reading"
      local d, m = std.read()
      if d == nil then
        if m then state.error = state.error or ("stdin: " .. tostring(m)) end
        break
      end
      up_state = "writing"
      local ok, m2 = conn:write(d)
      if not ok then
        state.error = state.error or tostring(m2)
        break
      end
    end
    up_state = "done"
    state.up_done = true
    wake()
  end)
  local function stop_up()
    if state.up_done or state.stop_up then return end
    state.stop_up = true
    if up_state == "reading" then
      up:cancel("beam: stdin no longer sent")
      state.up_done = true
      wake()
    end
  end

  -- the pipe -> stdout
  local down = ludx.spawn("beam stdout", function()
    while true do
      local d, m = conn:read()
      if d == nil then
        if m then state.error = state.error or tostring(m) end
        break
      end
      local ok, m2 = std.write(d)
      if not ok then
        state.error = state.error or ("stdout: " .. tostring(m2))
        break
      end
    end
    if not state.error then
      local ok, m = std.flush()
      if not ok then state.error = "stdout: " .. tostring(m) end
    end
    state.down_done = true
    wake()
  end)

  local seen_signals = state.signals or 0
  local finished = false
  while not state.error do
    if (state.signals or 0) > seen_signals then
      seen_signals = state.signals
      if seen_signals > 1 then
        state.error = "interrupted"
        break
      end
      stop_up()
    end
    if state.down_done then stop_up() end
    if state.up_done and not finished then
      finished = true
      local ok, m = conn:finish()
      if not ok then state.error = state.error or tostring(m) end
    end
    if state.up_done and state.down_done and finished then break end
    state.ev:wait("beam: the pipe")
  end
  if state.error then
    up:cancel("beam failed")
    down:cancel("beam failed")
  end
  std.close()
  if state.error then return shutdown(1, state.error) end
  return shutdown(0)
end

function M.main(args)
  local opts, pos = common.parse(args, { help = "flag", reuse = "flag", bootstrap = "value", timeout = "value" },
    { h = "help", r = "reuse" })
  if not opts then return common.fail("beam", pos, usage) end
  if opts.help then
    io.stdout:write(usage)
    return 0
  end
  if #pos > 1 then return common.fail("beam", "one PASSPHRASE at most", usage) end
  if opts.reuse and not pos[1] then return common.fail("beam", "-r needs the PASSPHRASE to listen under", usage) end
  if opts.timeout and not (tonumber(opts.timeout) and tonumber(opts.timeout) > 0) then
    return common.fail("beam", "bad --timeout")
  end
  return common.run("beam", main, opts, pos[1])
end

return M
