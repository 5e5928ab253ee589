-- Lines from stdin, for programs driven by another process (bench ends,
-- test peers): the parent sends commands as lines, and a closed stdin means
-- the parent is gone. (The REPL reads stdin its own way; use one or the
-- other.)
local ludx = require "ludx"

local core = ludx.core

local M = {}

local lines = nil

--- Starts a task that calls on_line(line) for each line and on_eof() when
-- stdin closes (default: exit the process with status 3).
function M.watch(on_line, on_eof)
  if lines then error("ludx.stdin.watch: stdin is already watched", 2) end
  lines = ludx.waiters()
  ludx.on_event(core.EV.LINE, function() lines:wake_all(true) end)
  local ok, msg = core.line_start(ludx.ref({}))
  if ok == nil then error("ludx.stdin.watch: " .. tostring(msg), 2) end
  return ludx.spawn("stdin", function()
    while true do
      local line = core.line_take()
      while line == false do
        lines:wait("stdin")
        line = core.line_take()
      end
      if line == nil then
        if on_eof then return on_eof() end
        io.stderr:write("stdin closed, exiting\n")
        os.exit(3)
      end
      if line ~= true then on_line(line) end
    end
  end)
end

return M
