-- The ludx command line: scripts, -e, -v, the REPL, and subcommands.
local ludx = require "ludx"

local M = {}

local usage = [=[
usage: ludx [options] [script [args...]]
       ludx <command> [args...]

Runs a Lua script (or - for stdin) as a task on the ludx loop; with no script
it opens the REPL.

options:
  -e code     run code (may be repeated)
  -i          open the REPL after the script or -e code
  -v          print the versions of ludx, LuaJIT, libuv and libsodium
  -h, --help  print this help
  --          stop handling options

commands:
  bench       scripted benchmark suites (ludx bench --help)
  share       share a file or directory by key
  fetch       download what a key shares
  beam        an encrypted pipe keyed by a passphrase (hyperbeam's)
  keygen      make a key pair
  dht         DHT tools: lookup, announce, testnet
  attach      a REPL into a running ludx process (ludx attach --help)
]=]

-- Subcommands are modules ludx.cmd.<name>, found when they exist.
local function find_command(name)
  if type(name) ~= "string" or not name:match("^[%a][%w_-]*$") then return nil end
  local ok, mod = pcall(require, "ludx.cmd." .. name:gsub("-", "_"))
  if ok and type(mod) == "table" and mod.main then return mod end
  if not ok and not tostring(mod):find("module 'ludx.cmd." .. name:gsub("-", "_") .. "' not found", 1, true) then
    error(mod, 0)
  end
  return nil
end

local function versions()
  local v = ludx.version()
  return string.format("ludx %s\nLuaJIT %s\nlibuv %s\nlibsodium %s\nudx %s", v.ludx, v.luajit:gsub("^LuaJIT ", ""), v.libuv, v.libsodium, v.udx)
end

local function report_error(msg, tb)
  io.stderr:write("ludx: ", tostring(msg), "\n")
  if tb then io.stderr:write(tb, "\n") end
  io.stderr:flush()
end

-- Runs a chunk as the main task; 0 on success, 1 on error. A script whose
-- main chunk raises has failed: the error is reported at once and the tasks
-- it started are cancelled, rather than waited for.
local function run_chunk(chunk, ...)
  local failed = false
  local ok, msg, tb = ludx.run(function(...)
    local r = { xpcall(chunk, function(err)
      if ludx.is_cancelled(err) then return err end
      return { err = err, tb = debug.traceback("", 2):gsub("^\n", "") }
    end, ...) }
    if not r[1] then
      failed = true
      local e = r[2]
      if type(e) == "table" and e.err ~= nil then report_error(e.err, e.tb) else report_error(e) end
      for _, t in ipairs(ludx.tasks()) do
        if t.name ~= "main" then ludx.cancel(t.id, "the script failed") end
      end
    end
    return true
  end, ...)
  if ok == nil then
    report_error(msg, tb)
    return 1
  end
  return failed and 1 or 0
end

function M.main(argv)
  -- a pipe or a file (a supervisor, a log) sees each line as it is printed,
  -- and a killed process keeps what it printed; a terminal is line-buffered
  -- already
  io.stdout:setvbuf("line")
  local i = 1
  local exprs = {}
  local interactive = false
  while argv[i] do
    local a = argv[i]
    if a == "-e" then
      if not argv[i + 1] then
        io.stderr:write("ludx: '-e' needs an argument\n", usage)
        return 1
      end
      exprs[#exprs + 1] = argv[i + 1]
      i = i + 2
    elseif a == "-v" or a == "--version" then
      print(versions())
      if not argv[i + 1] and #exprs == 0 then return 0 end
      i = i + 1
    elseif a == "-i" then
      interactive = true
      i = i + 1
    elseif a == "-h" or a == "--help" then
      io.stdout:write(usage)
      return 0
    elseif a == "--" then
      i = i + 1
      break
    elseif a:sub(1, 1) == "-" and a ~= "-" then
      io.stderr:write("ludx: unknown option '", a, "'\n", usage)
      return 1
    else
      break
    end
  end

  -- the standard `arg` table, as luajit sets it
  local script = argv[i]
  local arg = { [-1] = argv[0] }
  if script then
    arg[0] = script
    for j = i + 1, #argv do arg[j - i] = argv[j] end
  else
    arg[0] = argv[0]
  end
  rawset(_G, "arg", arg)
  -- -e code and scripts find `ludx` loaded, as in the REPL (where print also
  -- shows values; here print stays Lua's own)
  rawset(_G, "ludx", ludx)

  for _, code in ipairs(exprs) do
    local chunk, err = loadstring(code, "=(command line)")
    if not chunk then
      report_error(err)
      return 1
    end
    local status = run_chunk(chunk)
    if status ~= 0 then return status end
  end

  if script then
    -- a command name wins over a file of that name (run ./name for the file)
    local cmd = not script:find("[/.]") and find_command(script)
    if cmd then
      local args = {}
      for j = i + 1, #argv do args[#args + 1] = argv[j] end
      local ok, status = pcall(cmd.main, args)
      if not ok then
        report_error(status)
        return 1
      end
      return tonumber(status) or 0
    end
    local chunk, err
    if script == "-" then
      chunk, err = loadstring(io.stdin:read("*a"), "=stdin")
    else
      chunk, err = loadfile(script)
    end
    if not chunk then
      report_error(err)
      return 1
    end
    -- -i: the script and the REPL share one loop and its globals
    if interactive then return require("ludx.repl").main({ chunk = chunk, args = { unpack(arg, 1, #arg) } }) end
    return run_chunk(chunk, unpack(arg, 1, #arg))
  elseif #exprs > 0 and not interactive then
    return 0
  end
  return require("ludx.repl").main()
end

return M
