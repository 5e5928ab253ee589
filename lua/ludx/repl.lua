-- The REPL. Each line runs as a task, so the loop keeps running under the
-- prompt: tasks started at the prompt go on printing while you type.
-- Expressions print their values (tables pretty-printed); an incomplete chunk
-- continues on the next line; Ctrl-C cancels the line or the running task;
-- Ctrl-D exits. On a terminal, lines are edited in place and the history
-- is kept in ~/.ludx_history; otherwise lines are read without prompts.
local ludx = require "ludx"
local pretty = require "ludx.pretty"

local core = ludx.core
local EV = core.EV

local M = {}

local PROMPT, CONTINUE = "> ", ">> "

local pack = require("ludx.check").pack

-- Output that keeps the prompt and the line being typed intact.
local function write(s)
  core.line_write(s)
end

local function print_values(...)
  local n = select("#", ...)
  local parts = {}
  for i = 1, n do
    parts[i] = tostring((select(i, ...)))
  end
  write(table.concat(parts, "\t") .. "\n")
end

local function show_results(r, first)
  if r.n < first then return end
  local parts = {}
  for i = first, r.n do
    parts[#parts + 1] = pretty.format(r[i])
  end
  write(table.concat(parts, "\t") .. "\n")
end

-- Compiles the buffered chunk. Returns fn, or nil and "incomplete", or nil
-- and the syntax error.
local function compile(src, env)
  local fn = loadstring("return " .. src, "=stdin")
  if not fn then
    local err
    fn, err = loadstring(src, "=stdin")
    if not fn then
      if err:find("'<eof>'$") then return nil, "incomplete" end
      return nil, err
    end
  end
  setfenv(fn, env)
  -- code typed at the prompt runs interpreted, so that Ctrl-C can stop a
  -- loop in it (JIT-compiled loops do not see the interrupt hook)
  jit.off(fn, true)
  return fn
end

local function history_path()
  local home = os.getenv("HOME")
  if home and home ~= "" then return home .. "/.ludx_history" end
  return nil
end

--- Runs the REPL loop in the current task until EOF.
function M.loop()
  local lines = ludx.waiters()
  local reader = {}
  local ref = ludx.ref(reader)
  ludx.on_event(EV.LINE, function() lines:wake_all(true) end)
  local tty, msg = core.line_start(ref, history_path())
  if tty == nil then
    ludx.unref(ref)
    return nil, msg
  end

  local env = setmetatable({ print = print_values, ludx = ludx }, { __index = _G })
  local saved_print = _G.print
  _G.print = print_values

  local running = nil -- the task of the line being run
  local buffer = ""

  core.interrupts(true)
  ludx.on_interrupt(function()
    if running and running.state ~= "dead" then
      running:cancel("interrupted")
    else
      buffer = ""
      core.line_cancel()
    end
  end)

  if tty then
    local v = ludx.version()
    write(string.format("ludx %s (LuaJIT %s, libuv %s) - Ctrl-D exits\n", v.ludx, v.luajit:gsub("^LuaJIT ", ""), v.libuv))
  end

  while true do
    if tty then core.line_prompt(buffer == "" and PROMPT or CONTINUE) end
    local line = core.line_take()
    while line == false do
      lines:wait("input", nil, "repl")
      line = core.line_take()
    end
    if line == nil then break end
    if tty then core.line_pause() end
    if line == true then
      -- Ctrl-C at the prompt: the chunk being continued is dropped too
      buffer = ""
      goto continue
    end

    local src = buffer == "" and line or (buffer .. "\n" .. line)
    if src:match("^%s*$") then
      buffer = ""
    else
      local fn, err = compile(src, env)
      if not fn and err == "incomplete" then
        buffer = src
      else
        buffer = ""
        core.line_history(src)
        if not fn then
          write(err .. "\n")
        else
          running = ludx.spawn("repl", fn)
          running.quiet = true
          local r = pack(running:join())
          local task = running
          running = nil
          if task.error ~= nil then
            if ludx.is_cancelled(task.error) or tostring(task.error):match("interrupted$") then
              write("interrupted\n")
            else
              write(tostring(task.error) .. "\n")
              if task.traceback then write(task.traceback .. "\n") end
            end
          else
            show_results(r, 1)
          end
        end
      end
    end
    ::continue::
  end

  core.interrupts(false)
  ludx.on_interrupt(nil)
  core.line_stop()
  _G.print = saved_print
  ludx.unref(ref)
  return true
end

--- The `ludx` command with no script: runs the REPL until Ctrl-D (or the end
-- of stdin). Tasks still running then are cancelled.
function M.main()
  local ok, msg = ludx.run(function()
    local r, err = M.loop()
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

return M
