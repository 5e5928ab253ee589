-- The REPL. Each line runs as a task, so the loop keeps running under the
-- prompt: tasks started at the prompt go on printing while you type.
-- Expressions print their values (tables pretty-printed, objects as one-line
-- summaries); an incomplete chunk continues on the next line; `local x = 5`
-- at the prompt keeps x for the lines after it; Ctrl-C cancels the line or
-- the running task; Ctrl-D exits. On a terminal, lines are edited in place
-- (Tab completes globals, fields and methods; Ctrl-R searches the history)
-- and the history is kept in ~/.ludx_history; otherwise lines are read
-- without prompts.
--
-- A running program can open a REPL to itself: repl.serve(path) listens on a
-- Unix socket (mode 0600) that `ludx attach path` connects to.
local ludx = require "ludx"
local pretty = require "ludx.pretty"

local core = ludx.core
local EV = core.EV

local M = {}

local PROMPT, CONTINUE = "> ", ">> "

local pack = require("ludx.check").pack

---------------------------------------------------------------------------
-- Source rewriting: top-level locals persist

-- Lua tokens with their byte positions: {type, text, s, e}; types "name",
-- "string", "number", "op". Comments are skipped. Long brackets and
-- escapes are handled well enough for the chunks people type.
local function tokens(src)
  local out = {}
  local i, n = 1, #src
  while i <= n do
    local c = src:sub(i, i)
    if c:match("%s") then
      i = i + 1
    elseif src:sub(i, i + 1) == "--" then
      local lvl = src:match("^%-%-%[(=*)%[", i)
      if lvl then
        local _, e = src:find("]" .. lvl .. "]", i, true)
        i = (e or n) + 1
      else
        local e = src:find("\n", i, true)
        i = (e or n) + 1
      end
    elseif c == "[" and src:match("^%[=*%[", i) then
      local lvl = src:match("^%[(=*)%[", i)
      local _, e = src:find("]" .. lvl .. "]", i, true)
      out[#out + 1] = { "string", "", i, e or n }
      i = (e or n) + 1
    elseif c == '"' or c == "'" then
      local j = i + 1
      while j <= n do
        local d = src:sub(j, j)
        if d == "\\" then
          j = j + 2
        elseif d == c or d == "\n" then
          break
        else
          j = j + 1
        end
      end
      out[#out + 1] = { "string", "", i, j }
      i = j + 1
    elseif c:match("[%a_]") then
      local s, e = src:find("^[%w_]+", i)
      out[#out + 1] = { "name", src:sub(s, e), s, e }
      i = e + 1
    elseif c:match("%d") or (c == "." and src:sub(i + 1, i + 1):match("%d")) then
      local s, e = src:find("^[%w%.]+", i)
      -- exponents with a sign: 1e-5
      while src:sub(e, e):match("[eEpP]") and src:sub(e + 1, e + 1):match("[%+%-]") do
        local _, e2 = src:find("^[%w%.]+", e + 2)
        e = e2 or e + 1
      end
      out[#out + 1] = { "number", src:sub(s, e), s, e }
      i = e + 1
    else
      local op = src:match("^%.%.%.", i) or src:match("^[=~<>]=", i) or src:match("^%.%.", i) or src:match("^::", i) or c
      out[#out + 1] = { "op", op, i, i + #op - 1 }
      i = i + #op
    end
  end
  return out
end

local OPEN = { ["function"] = true, ["if"] = true, ["do"] = true, ["repeat"] = true }
local CLOSE = { ["end"] = true, ["until"] = true }

--- Rewrites the top-level `local` statements of a chunk into assignments,
-- so what they declare outlives the line (it lands in the REPL's
-- environment). Line structure is kept, so error positions stay right.
function M.persist_locals(src)
  local toks = tokens(src)
  local edits = {}
  local depth = 0
  for k, t in ipairs(toks) do
    if t[1] == "name" then
      local w = t[2]
      if OPEN[w] then
        depth = depth + 1
      elseif CLOSE[w] then
        depth = depth - 1
      elseif w == "local" and depth == 0 then
        local nxt = toks[k + 1]
        if nxt and nxt[1] == "name" and nxt[2] == "function" then
          edits[#edits + 1] = { t[3], t[4], "" } -- local function f -> function f
        elseif nxt and nxt[1] == "name" then
          -- local a, b [= ...]: the names, then "=" or not
          local j = k + 1
          while toks[j] and toks[j][1] == "name" and toks[j + 1] and toks[j + 1][2] == "," do j = j + 2 end
          local last = toks[j]
          local after = toks[j + 1]
          if after and after[1] == "op" and after[2] == "=" then
            edits[#edits + 1] = { t[3], t[4], "" }
          elseif last then
            edits[#edits + 1] = { t[3], t[4], "" }
            edits[#edits + 1] = { last[4] + 1, last[4], " = nil" }
          end
        end
      end
    end
  end
  for i = #edits, 1, -1 do
    local e = edits[i]
    src = src:sub(1, e[1] - 1) .. e[3] .. src:sub(e[2] + 1)
  end
  return src
end

---------------------------------------------------------------------------
-- Compiling and running a chunk

-- Compiles the buffered chunk. Returns fn and whether it returns its values
-- packed, or nil and "incomplete", or nil and the syntax error.
local function compile(src, env)
  -- an expression: its values packed by the first vararg, so that an error
  -- in it is not a tail call and keeps its position (stdin:1: boom)
  local fn = loadstring("return (...)(" .. src .. "\n)", "=stdin")
  local packed = fn ~= nil
  if not fn then fn = loadstring("return " .. src, "=stdin") end
  if not fn then
    local err
    fn, err = loadstring(src, "=stdin")
    if not fn then
      if err:find("'<eof>'$") then return nil, "incomplete" end
      return nil, err
    end
    -- it compiles: run it with its top-level locals made persistent
    fn = loadstring(M.persist_locals(src), "=stdin") or fn
  end
  setfenv(fn, env)
  -- code typed at the prompt runs interpreted, so that Ctrl-C can stop a
  -- loop in it (JIT-compiled loops do not see the interrupt hook)
  jit.off(fn, true)
  return fn, packed
end

local here = debug.getinfo(1, "S").source:match("^@(.*)$") or "\0"
local init_file = (here:match("^(.*/)[^/]*$") or "") .. "init.lua"

--- A traceback without the REPL's own frames and [builtin#N] lines; nil
-- when what is left says no more than the error's position.
function M.clean_traceback(tb)
  if type(tb) ~= "string" then return nil end
  local out, useful = {}, false
  local function ours(line)
    return line:find("[builtin#", 1, true) or line:find(here, 1, true) or line:find(init_file, 1, true)
      or line:find("lua/ludx/repl.lua", 1, true) or line:find("lua/ludx/init.lua", 1, true)
      or line:match("^%s*%[C%]: in function 'xpcall'") or line:match("^%s*%[C%]: in function 'error'")
      or line:match("^%s*%(tail call%)")
  end
  for line in tb:gmatch("[^\n]+") do
    if not ours(line) then
      out[#out + 1] = line
      local top = line:match("^%s*stdin:%d+: in main chunk") or line:match("^%s*stdin:%d+: in function <stdin:%d+>")
      if not top and not line:match("^stack traceback:") then useful = true end
    end
  end
  if not useful then return nil end
  return table.concat(out, "\n")
end

---------------------------------------------------------------------------
-- Completion

local KEYWORDS = { "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if", "in",
  "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while" }

-- The keys of a value a name can follow with "." (fields) or ":" (methods),
-- through __index tables (metatables of objects, string methods).
local function keys_of(v, methods)
  local out, seen = {}, {}
  local function add(k, val)
    if type(k) == "string" and k:match("^[%a_][%w_]*$") and not seen[k] then
      if not methods or type(val) == "function" then
        seen[k] = true
        out[#out + 1] = k
      end
    end
  end
  local guard = 0
  local t = v
  while t ~= nil and guard < 8 do
    guard = guard + 1
    if type(t) == "table" then
      for k, val in pairs(t) do add(k, val) end
    end
    local mt = (type(t) == "table" or type(t) == "string" or type(t) == "userdata") and getmetatable(t) or nil
    if type(mt) ~= "table" then break end
    local idx = rawget(mt, "__index")
    if type(idx) ~= "table" then break end
    t = idx
  end
  return out
end

--- Completions for the text before the cursor: the byte offset (0-based)
-- where the completed word starts, and the sorted candidates.
function M.complete(text, env)
  local expr = text:match("[%w_%.:]*$") or ""
  local path, sep, word = expr:match("^(.*)([%.:])([%w_]*)$")
  local start = #text - #(word or expr)
  local candidates
  if not path then
    word = expr
    if word:match("^%d") then return start, {} end
    candidates = keys_of(env, false)
    for _, k in ipairs(keys_of(_G, false)) do candidates[#candidates + 1] = k end
    for _, k in ipairs(KEYWORDS) do candidates[#candidates + 1] = k end
  else
    if path == "" or path:find("::", 1, true) or path:match("[%.:]$") or path:find(":", 1, true) then return start, {} end
    -- walk a.b.c without calling anything but __index
    local v = env
    for part in path:gmatch("[^%.]+") do
      if not part:match("^[%a_][%w_]*$") then return start, {} end
      local ok, nv = pcall(function() return v[part] end)
      if not ok or nv == nil then return start, {} end
      v = nv
    end
    candidates = keys_of(v, sep == ":")
  end
  local out, seen = {}, {}
  for _, k in ipairs(candidates) do
    if k:sub(1, #word) == word and not seen[k] then
      seen[k] = true
      out[#out + 1] = k
    end
  end
  table.sort(out)
  return start, out
end

---------------------------------------------------------------------------
-- A session: an environment, the chunk being continued, the running line

local Session = {}
Session.__index = Session

--- A session whose output goes to write(text). env: the table the lines
-- run in (default: a fresh one over _G).
function M.session(write, env)
  local self = setmetatable({ write = write, buffer = "" }, Session)
  self.env = env or setmetatable({ ludx = ludx }, { __index = _G })
  rawset(self.env, "print", function(...) self:print(...) end)
  return self
end

function Session:print(...)
  local n = select("#", ...)
  local parts = {}
  for i = 1, n do parts[i] = tostring((select(i, ...))) end
  self.write(table.concat(parts, "\t") .. "\n")
end

function Session:show(r)
  if r.n < 1 then return end
  local parts = {}
  for i = 1, r.n do parts[#parts + 1] = pretty.format(r[i]) end
  self.write(table.concat(parts, "\t") .. "\n")
end

function Session:prompt()
  return self.buffer == "" and PROMPT or CONTINUE
end

--- Ctrl-C: stops the running line, or drops the chunk being continued.
-- (A Ctrl-C for a line taken but not started yet sets session.pending
-- instead: feed then drops that line.)
function Session:interrupt()
  if self.running and self.running.state ~= "dead" then
    self.running:cancel("interrupted")
    return true
  end
  self.buffer = ""
  return false
end

--- Takes one line: continues the chunk, or runs it (in a task; waits for
-- it). Returns the source it ran (for the history) or nil.
function Session:feed(line)
  local src = self.buffer == "" and line or (self.buffer .. "\n" .. line)
  if self.pending then
    -- Ctrl-C came after the line was entered, before it ran
    self.pending = false
    self.buffer = ""
    self.write("interrupted\n")
    return src
  end
  if src:match("^%s*$") then
    self.buffer = ""
    return nil
  end
  local fn, how = compile(src, self.env)
  if not fn and how == "incomplete" then
    self.buffer = src
    return nil
  end
  self.buffer = ""
  if not fn then
    self.write(how .. "\n")
    return src
  end
  local task = ludx.spawn("repl", fn, how and pack or nil)
  task.quiet = true
  self.running = task
  local r = pack(task:join())
  self.running = nil
  if task.error ~= nil then
    if ludx.is_cancelled(task.error) or tostring(task.error):match("interrupted$") then
      self.write("interrupted\n")
    else
      -- an error value that is not a string shows what it holds
      local e = task.error
      self.write((type(e) == "string" and e or "error: " .. pretty.format(e)) .. "\n")
      local tb = M.clean_traceback(task.traceback)
      if tb then self.write(tb .. "\n") end
    end
  elseif how then
    self:show(r[1])
  else
    self:show(r)
  end
  return src
end

---------------------------------------------------------------------------
-- The terminal REPL

local function history_path()
  local home = os.getenv("HOME")
  if home and home ~= "" then return home .. "/.ludx_history" end
  return nil
end

--- Runs the REPL loop in the current task until EOF. opts.env: the
-- environment (default a fresh one over _G).
function M.loop(opts)
  opts = opts or {}
  local lines = ludx.waiters()
  local reader = {}
  local ref = ludx.ref(reader)
  ludx.on_event(EV.LINE, function() lines:wake_all(true) end)
  local tty, msg = core.line_start(ref, history_path())
  if tty == nil then
    ludx.unref(ref)
    return nil, msg
  end

  -- output that keeps the prompt and the line being typed intact
  local session = M.session(core.line_write, opts.env)
  local saved_print = _G.print
  _G.print = function(...) session:print(...) end

  core.interrupts(true)
  -- Ctrl-C's hook stops a busy task, never this one (it reports the interrupt)
  local me = coroutine.running()
  core.interrupt_spare(me)
  ludx.on_interrupt(function()
    if session:interrupt() then return end
    -- no prompt shows and no line runs: one was entered and is about to run
    if not core.line_cancel() and tty then session.pending = true end
  end)

  if tty then
    local v = ludx.version()
    core.line_write(string.format("ludx %s (LuaJIT %s, libuv %s) - Ctrl-D exits\n", v.ludx, v.luajit:gsub("^LuaJIT ", ""), v.libuv))
  end

  while true do
    if tty then
      session.pending = false -- a Ctrl-C from before this prompt
      core.line_prompt(session:prompt())
    end
    local line = core.line_take()
    while line == false do
      lines:wait("input", nil, "repl")
      local req = core.line_completion()
      if req then
        local ok, start, list = pcall(M.complete, req, session.env)
        if ok then core.line_complete(start, list) else core.line_complete(0, {}) end
      end
      line = core.line_take()
    end
    if line == nil then break end
    if tty then core.line_pause() end
    if line == true then
      -- Ctrl-C at the prompt: the chunk being continued is dropped too
      session.buffer = ""
    else
      local ran = session:feed(line)
      if ran then core.line_history(ran) end
    end
  end

  core.interrupts(false)
  core.interrupt_spare(me, false)
  ludx.on_interrupt(nil)
  core.line_stop()
  _G.print = saved_print
  ludx.unref(ref)
  return true
end

--- The `ludx` command with no script: runs the REPL until Ctrl-D (or the end
-- of stdin). Tasks still running then are cancelled. opts.chunk: a script
-- to run first (ludx -i script.lua), with opts.args; the REPL then opens
-- over the same globals, and the tasks the script started keep running.
function M.main(opts)
  opts = opts or {}
  local ok, msg = ludx.run(function()
    if opts.chunk then
      local r = pack(xpcall(opts.chunk, function(err)
        if ludx.is_cancelled(err) then return err end
        return { err = err, tb = debug.traceback("", 2):gsub("^\n", "") }
      end, unpack(opts.args or {}, 1, opts.args and #opts.args or 0)))
      if not r[1] then
        local e = r[2]
        io.stderr:write("ludx: ", tostring(type(e) == "table" and e.err or e), "\n")
        local tb = type(e) == "table" and M.clean_traceback(e.tb)
        if tb then io.stderr:write(tb, "\n") end
      end
    end
    local r, err = M.loop(opts)
    for _, t in ipairs(ludx.tasks()) do
      if t.name ~= "main" then ludx.cancel(t.id) end
    end
    if r == nil then error(err, 0) end
    return true
  end)
  if ok == nil then
    io.stderr:write("ludx: ", tostring(msg), "\n")
    return 1
  end
  return 0
end

---------------------------------------------------------------------------
-- A REPL into a running process: serve(path) and `ludx attach path`
--
-- One JSON object per line each way. Client: {"t":"line","s":...},
-- {"t":"complete","s":text before the cursor}, {"t":"interrupt"}. Server:
-- {"t":"out","s":...}, {"t":"prompt","s":"> "}, {"t":"complete","start":n,
-- "list":[...]}.

M.SERVE_MAX_LINE = 64 * 1024
M.SERVE_MAX_CLIENTS = 4
M.SERVE_MAX_QUEUED = 64 -- lines a client sent ahead of the running one

local function serve_client(conn, opts, srv)
  local json = require "ludx.json"
  local function send(obj)
    return conn:write(json.encode(obj) .. "\n")
  end
  local env = setmetatable({ ludx = ludx }, { __index = _G })
  for k, v in pairs(opts.env or {}) do env[k] = v end
  local session = M.session(function(text) send({ t = "out", s = text }) end, env)
  local v = ludx.version()
  send({ t = "out", s = string.format("ludx %s attached to pid %d - Ctrl-D detaches\n", v.ludx, core.getpid()) })
  send({ t = "prompt", s = session:prompt() })
  -- lines wait here while one runs; past the cap the reader stops reading
  local lines = ludx.queue(M.SERVE_MAX_QUEUED)
  local unrun = 0 -- lines received whose run has not ended
  -- the reader: lines to the runner, interrupts and completions at once
  local reader = ludx.spawn("repl attach reader", function()
    local buf = ""
    while true do
      local data = conn:read(65536)
      if not data then break end
      buf = buf .. data
      while true do
        local nl = buf:find("\n", 1, true)
        if not nl then break end
        local raw = buf:sub(1, nl - 1)
        buf = buf:sub(nl + 1)
        local ok, m = pcall(json.decode, raw)
        if ok and type(m) == "table" then
          if m.t == "line" and type(m.s) == "string" then
            unrun = unrun + 1
            lines:put(m.s)
          elseif m.t == "interrupt" then
            -- a line sent just before may not have started yet: it is the
            -- one to stop
            if session.running == nil and unrun > 0 then
              session.pending = true
            else
              session:interrupt()
            end
          elseif m.t == "complete" and type(m.s) == "string" then
            local cok, start, list = pcall(M.complete, m.s, session.env)
            if not cok then start, list = 0, {} end
            send({ t = "complete", start = start, list = json.array(list) })
          end
        end
      end
      -- a line without its end is bounded: past the cap the client goes
      if #buf > (opts.max_line or M.SERVE_MAX_LINE) then
        send({ t = "out", s = "ludx: line longer than " .. (opts.max_line or M.SERVE_MAX_LINE) .. " bytes, detaching\n" })
        break
      end
    end
    lines:put(false)
  end)
  reader.quiet = true
  while true do
    local line = lines:get()
    if not line then break end
    session:feed(line)
    unrun = unrun - 1
    if not send({ t = "prompt", s = session:prompt() }) then break end
  end
  session:interrupt()
  reader:cancel()
  conn:close()
  srv.clients = srv.clients - 1
end

--- Opens a REPL into this process for `ludx attach path`: listens on a Unix
-- socket at path (made with mode 0600: only this user can connect). Each
-- client gets its own environment over _G (and over opts.env, a table of
-- things to show it). opts: env, max_line (bytes of one input line,
-- default 64 KiB), max_clients (default 4). Returns a server with
-- :close(); it also closes (and the file goes) when the loop ends.
function M.serve(path, opts)
  if type(path) ~= "string" then error("bad argument 'path' to 'serve' (string expected, got " .. type(path) .. ")", 2) end
  if opts ~= nil and type(opts) ~= "table" then error("bad argument 'opts' to 'serve' (table expected, got " .. type(opts) .. ")", 2) end
  opts = opts or {}
  local tcp = require "ludx.tcp"
  local server, msg, code = tcp.listen_unix(path)
  if not server then return nil, msg, code end
  local srv = { server = server, clients = 0, path = path }
  function srv.close()
    server:close()
    if srv.task then srv.task:cancel() end
    return true
  end
  srv.task = ludx.spawn("repl serve", function()
    while true do
      local conn = server:accept()
      if not conn then break end
      if srv.clients >= (opts.max_clients or M.SERVE_MAX_CLIENTS) then
        conn:write('{"t":"out","s":"ludx: too many REPL clients\\n"}\n')
        conn:close()
      else
        srv.clients = srv.clients + 1
        local t = ludx.spawn("repl client", serve_client, conn, opts, srv)
        t.quiet = true
      end
    end
  end)
  srv.task.quiet = true
  return setmetatable(srv, { __tostring = function() return "<repl server " .. path .. ", " .. srv.clients .. " clients>" end })
end

--- The client: a terminal REPL whose lines run in the process at path.
function M.attach(path)
  local json = require "ludx.json"
  local tcp = require "ludx.tcp"
  local conn, msg, code = tcp.connect_unix(path, 10000)
  if not conn then return nil, msg, code end
  local lines = ludx.waiters()
  local ref = ludx.ref({})
  ludx.on_event(EV.LINE, function() lines:wake_all(true) end)
  local tty, err = core.line_start(ref, history_path())
  if tty == nil then
    conn:close()
    return nil, err
  end
  local prompts = ludx.queue()
  local gone = false
  -- one writer keeps messages in order; Ctrl-C's handler (on the scheduler,
  -- not a task) only queues
  local outbox = ludx.queue()
  local function send(obj)
    outbox:put(json.encode(obj) .. "\n")
  end
  local writer = ludx.spawn("attach writer", function()
    while true do
      local out = outbox:get()
      if not out or not conn:write(out) then break end
    end
  end)
  writer.quiet = true
  local reader = ludx.spawn("attach reader", function()
    local buf = ""
    while true do
      local data = conn:read(65536)
      if not data then break end
      buf = buf .. data
      while true do
        local nl = buf:find("\n", 1, true)
        if not nl then break end
        local ok, m = pcall(json.decode, buf:sub(1, nl - 1))
        buf = buf:sub(nl + 1)
        if ok and type(m) == "table" then
          if m.t == "out" and type(m.s) == "string" then
            core.line_write(m.s)
          elseif m.t == "prompt" then
            prompts:put(type(m.s) == "string" and m.s or PROMPT)
          elseif m.t == "complete" and type(m.list) == "table" then
            core.line_complete(tonumber(m.start) or 0, m.list)
          end
        end
      end
      if #buf > 1024 * 1024 then break end
    end
    gone = true
    prompts:put(false)
    lines:wake_all(true)
  end)
  reader.quiet = true
  core.interrupts(true)
  -- nothing runs here for Ctrl-C's hook to stop: these tasks report it
  local me = coroutine.running()
  for _, co in ipairs({ me, reader.co, writer.co }) do core.interrupt_spare(co) end
  local waiting = false -- a line runs over there
  local pending -- Ctrl-C for the line entered but not sent yet
  ludx.on_interrupt(function()
    if waiting then
      send({ t = "interrupt" })
    elseif not core.line_cancel() and tty then
      pending = true
    end
  end)
  while true do
    waiting = true
    local p = prompts:get()
    waiting = false
    if not p then break end
    pending = false
    if tty then core.line_prompt(p) end
    local line = core.line_take()
    while line == false and not gone do
      lines:wait("input", nil, "attach")
      local req = core.line_completion()
      if req then send({ t = "complete", s = req }) end
      line = core.line_take()
    end
    if gone or line == nil then break end
    if tty then core.line_pause() end
    if line == true then
      send({ t = "interrupt" })
      send({ t = "line", s = "" })
    else
      if line ~= "" then core.line_history(line) end
      waiting = true
      send({ t = "line", s = line })
      if pending then send({ t = "interrupt" }) end
    end
  end
  core.interrupts(false)
  for _, co in ipairs({ me, reader.co, writer.co }) do core.interrupt_spare(co, false) end
  ludx.on_interrupt(nil)
  core.line_stop()
  ludx.unref(ref)
  conn:close()
  reader:cancel()
  writer:cancel() -- nothing it holds matters once we leave (Ctrl-D sends nothing)
  if gone then io.stdout:write("\nludx: the process closed the connection\n") end
  return true
end

return M
