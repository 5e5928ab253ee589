-- The fetching side of a share: connect by key, take the manifest, look at
-- what is on disk, ask for the missing chunks (pipelined, in the order a
-- ludx.policy.schedule picks), check each chunk and each file as it lands.
local ludx = require "ludx"
local core = ludx.core
local wire = require "ludx.share.wire"
local manifest = require "ludx.share.manifest"
local store = require "ludx.share.store"
local schedule = require "ludx.policy.schedule"

local hasher = core.hasher -- incremental BLAKE2b: update(data), hex()
local hex = require("ludx.crypto").hex

local M = {}

M.WINDOW = 8 -- chunks asked for ahead
M.MAX_WINDOW = 64 -- a ludx server takes 64 GETs waiting (share.server MAX_QUEUED)
M.READ_TIMEOUT = 30000
M.YIELD_MS = 2

local function fail(state, msg, code)
  state.err = { msg = msg, code = code or "EPROTO" }
  return nil, msg, state.err.code
end

-- Finishes file i: checks the whole-file hash and moves it into place.
local function finish_file(st, i)
  local f, t, fs_state = st.m.files[i], st.layout.files[i], st.states[i]
  if st.handles[i] then
    st.handles[i]:close()
    st.handles[i] = nil
  end
  if fs_state.hasher:hex() ~= hex(manifest.hash(st.m, f)) then
    return fail(st, f.path .. ": the file does not match its BLAKE2b-512 hash", "EVERIFY")
  end
  local ok, msg, code = store.commit(st.layout, t, st.force)
  if not ok then return fail(st, msg, code) end
  fs_state.done = true
  st.files_done = st.files_done + 1
  if st.on_file then pcall(st.on_file, f.path, t.final) end
  return true
end

-- Each DATA payload is written and hashed as it comes (the loop runs in
-- between, so acks keep flowing); a chunk counts once its hash checks. A
-- chunk that fails ends the fetch, and its bytes are cut off the partial
-- file so that only verified chunks stay on disk.
local function on_data(st, msg)
  local req = st.inflight[st.ihead]
  if not req or msg.id ~= req.id or msg.file ~= req.file - 1 or msg.offset ~= req.offset + req.got then
    return fail(st, "DATA out of order")
  end
  local payload = msg.payload
  local n = #payload
  if n == 0 or req.got + n > req.length then return fail(st, "DATA longer than asked for") end
  local t = st.layout.files[req.file]
  local h = st.handles[req.file]
  if not h then
    local msg2, code
    h, msg2, code = store.open_part(st.layout, t, req.offset)
    if not h then return fail(st, msg2, code) end
    st.handles[req.file] = h
  end
  local ok, werr = h:write(payload)
  if not ok then return fail(st, t.part .. ": " .. tostring(werr), "EIO") end
  req.hasher:update(payload)
  local fstate = st.states[req.file]
  fstate.hasher:update(payload)
  req.got = req.got + n
  st.received = st.received + n
  if st.progress then st.progress:update(n) end
  if req.got < req.length then return true end

  st.inflight[st.ihead] = nil
  st.ihead = st.ihead + 1
  local f = st.m.files[req.file]
  if req.hasher:hex() ~= hex(manifest.chunk(st.m, f, req.chunk)) then
    h:close()
    st.handles[req.file] = nil
    store.cut(st.layout, t, req.offset)
    return fail(st, f.path .. ": chunk " .. req.chunk .. " does not match its hash", "EVERIFY")
  end
  fstate.have = fstate.have + req.length
  if req.chunk == f.nchunks then return finish_file(st, req.file) end
  return true
end

local function ask(st)
  while st.itail - st.ihead + 1 < st.window do
    local file, chunk = st.sched:next()
    if not file then return true end
    local f = st.m.files[file]
    local offset = (chunk - 1) * st.m.chunk_size
    local length = math.min(st.m.chunk_size, f.size - offset)
    st.next_id = st.next_id + 1
    local req = { id = st.next_id, file = file, chunk = chunk, offset = offset, length = length, got = 0, hasher = hasher(32) }
    st.itail = st.itail + 1
    st.inflight[st.itail] = req
    local ok, msg, code = st.conn:write(wire.get(req.id, file - 1, offset, length))
    if not ok then return fail(st, msg, code) end
  end
  return true
end

--- Fetches the share with public key `key` (32 bytes) through node into
-- dest (see ludx.share.store for where files land). opts:
--   order     chunk order: "sequential" (default), "smallest", "largest",
--             "interleave" (ludx.policy.schedule)
--   spread    files at once for "interleave" (default 4)
--   window    chunks asked for ahead (default 8, at most 64)
--   force     replace files in DEST that differ from the share (default:
--             such a file is an error, EEXIST; ludx replaces only files it made)
--   max_manifest, max_files, max_depth  caps on the manifest taken: bytes
--             (default 32 MiB), files (262144), components per path (128)
--   timeout   ms to connect; reads time out after 30 s of silence
--   progress  an object with :start(total, have) and :update(bytes)
--             (ludx.progress), or nil
--   on_manifest(m, layout)  called before anything is written; return
--             false to stop
--   on_file(path, final_path)  after each file checks and is in place
--   on_check(n)  n more bytes on disk were checked (before the transfer)
-- Returns {files=, bytes=, received=, skipped=, seconds=, root=, target=,
-- manifest=, stats= (the connection's stats)}
-- or nil, msg, code. An interrupted fetch leaves verified partial files;
-- fetching again continues from them.
function M.fetch(node, key, dest, opts)
  opts = opts or {}
  local t0 = ludx.now()
  local conn, msg, code = node:connect(key, { timeout = opts.timeout or 30000 })
  if not conn then return nil, msg, code end
  local ok
  ok, msg, code = conn:write(wire.hello())
  if not ok then
    conn:destroy()
    return nil, msg, code
  end
  -- the manifest is refused from its length on when it is over the cap
  local max_manifest = opts.max_manifest or manifest.MAX_BYTES
  local rd = wire.reader(conn, math.min(max_manifest + 1, wire.SERVER_MESSAGE_MAX))
  local kind, bytes
  kind, bytes, code = rd:next(M.READ_TIMEOUT)
  if kind ~= wire.MANIFEST then
    if kind == wire.ERROR then
      conn:close(2000)
      local e = wire.decode(kind, bytes)
      return nil, "the share refused: " .. (e and e.message or "?"), "EREFUSED"
    end
    if code == "EPROTO" then
      conn:write(wire.error(wire.E_PROTOCOL, tostring(bytes)))
      conn:close(2000) -- the error goes out before the END
    else
      conn:destroy() -- a timeout or a reset: nothing to say
    end
    return nil, kind and "expected the manifest" or ("manifest: " .. tostring(bytes or "the share closed the connection")), code or "EPROTO"
  end
  local m, why = manifest.decode(wire.decode(kind, bytes).encoded,
    { max_manifest = max_manifest, max_files = opts.max_files, max_depth = opts.max_depth })
  if not m then
    conn:write(wire.error(wire.E_PROTOCOL, why))
    conn:close(2000)
    return nil, "bad manifest: " .. why, "EPROTO"
  end
  -- from here on only DATA and ERROR come: nothing longer than one DATA
  rd.max = wire.DATA_MESSAGE_MAX
  -- where every file lands, checked against the disk before anything is
  -- written: no link on the way, no file replaced that ludx did not make
  local layout = store.layout(m, dest)
  local function stop(...)
    store.close(layout)
    conn:close(2000) -- an error message written before goes out first
    return ...
  end
  ok, msg, code = store.check(layout)
  if not ok then return stop(nil, msg, code) end
  if opts.on_manifest and opts.on_manifest(m, layout) == false then
    return stop(nil, "stopped", "ECANCELED")
  end
  local states
  states, msg, code = store.scan(m, layout, opts.on_check, opts.force)
  if not states then return stop(nil, msg, code) end
  ok, msg, code = store.prepare(layout)
  if not ok then return stop(nil, msg, code) end

  local st = {
    m = m, layout = layout, states = states, conn = conn, handles = {},
    inflight = {}, ihead = 1, itail = 0, next_id = 0,
    window = math.min(opts.window or M.WINDOW, M.MAX_WINDOW), received = 0, force = opts.force, yielded = ludx.now(), files_done = 0,
    progress = opts.progress, on_file = opts.on_file,
  }
  local items, have, skipped = {}, 0, 0
  for i, f in ipairs(m.files) do
    local s = states[i]
    have = have + s.have
    if s.done then
      skipped = skipped + 1
      st.files_done = st.files_done + 1
    elseif s.first > f.nchunks then
      -- every chunk is there already (or the file is empty): check, move
      if f.size == 0 then
        local h = store.open_part(layout, layout.files[i], 0)
        if h then h:close() end
      end
      if not finish_file(st, i) then break end
    else
      items[#items + 1] = { file = i, first = s.first, count = f.nchunks - s.first + 1, size = f.size }
    end
  end
  if st.progress then st.progress:start(m.total, have) end
  st.sched = schedule.new(opts.order, items, { spread = opts.spread })

  while not st.err do
    if not ask(st) then break end
    if st.ihead > st.itail then break end
    kind, bytes, code = rd:next(M.READ_TIMEOUT)
    if not kind then
      fail(st, bytes or "the share closed the connection", code or "EPIPE")
      break
    end
    local message
    message, why = wire.decode(kind, bytes)
    if not message then
      fail(st, why)
    elseif kind == wire.DATA then
      on_data(st, message)
      -- let the loop read the socket (and ack) every couple of ms
      local now = ludx.now()
      if now - st.yielded > M.YIELD_MS then
        st.yielded = now
        ludx.yield()
      end
    elseif kind == wire.ERROR then
      fail(st, "the share: " .. message.message, "EREMOTE")
    else
      fail(st, "unexpected " .. (wire.NAMES[kind] or "?") .. " message")
    end
  end
  for _, h in pairs(st.handles) do h:close() end
  if st.err then
    if st.err.code == "EPROTO" or st.err.code == "EVERIFY" then conn:write(wire.error(wire.E_PROTOCOL, st.err.msg)) end
    if st.progress then st.progress:stop() end
    return stop(nil, st.err.msg, st.err.code)
  end
  local stats = conn:stats()
  conn:finish(5000)
  conn:close(5000)
  store.cleanup(layout)
  store.close(layout)
  if st.progress then st.progress:finish() end
  return {
    files = #m.files, bytes = m.total, received = st.received, skipped = skipped,
    seconds = (ludx.now() - t0) / 1000, root = layout.root, manifest = m,
    target = m.kind == "file" and layout.files[1].final or layout.root, stats = stats,
  }
end

return M
