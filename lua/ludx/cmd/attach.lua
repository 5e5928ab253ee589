-- ludx attach PATH: a REPL into a running ludx process.
local ludx = require "ludx"

local M = {}

local usage = [[
usage: ludx attach PATH

Opens a REPL into a running ludx process that listens on the Unix socket
PATH. The process opts in with

  require("ludx.repl").serve(PATH [, {env = {name = value, ...}}])

(the socket file is made with mode 0600: only its user can attach). Lines
run as tasks in that process, next to its own: inspect ludx.tasks(), its
streams and servers. Tab completes names there; Ctrl-C stops the running
line; Ctrl-D detaches and leaves the process running.
]]

function M.main(args)
  local path = args[1]
  if path == "-h" or path == "--help" then
    io.stdout:write(usage)
    return 0
  end
  if not path or args[2] then
    io.stderr:write(usage)
    return 1
  end
  local failed
  local ok, msg = ludx.run(function()
    local r, err = require("ludx.repl").attach(path)
    if not r then failed = tostring(err) end
    for _, t in ipairs(ludx.tasks()) do
      if t.name ~= "main" then ludx.cancel(t.id) end
    end
    return true
  end)
  if ok == nil then failed = tostring(msg) end
  if failed then
    io.stderr:write("ludx attach: ", path, ": ", failed, "\n")
    return 1
  end
  return 0
end

return M
