-- Starting the Node peers of spec/interop from specs and benches.
local ludx = require "ludx"
local process = require "ludx.process"
local json = require "ludx.json"

local M = {}

M.dir = (os.getenv("LUDX_ROOT") or ".") .. "/spec/interop"

local Peer = {}
Peer.__index = Peer

--- Starts peers/<script> with options (a table, passed as one JSON argument)
-- and waits for its "ready" line.
function M.start(script, opts, timeout)
  local p, msg, code = process.spawn("node", { M.dir .. "/peers/" .. script, json.encode(opts or {}) })
  if not p then return nil, msg, code end
  local self = setmetatable({ p = p, script = script, lines = {} }, Peer)
  local ready, err = self:expect("ready", timeout or 20000)
  if not ready then
    local stderr = p:stderr()
    p:close()
    return nil, script .. " did not start: " .. tostring(err) .. "\n" .. stderr
  end
  self.ready = ready
  return self
end

--- The next JSON line whose event is `event` (other lines are kept).
function Peer:expect(event, timeout)
  local deadline = ludx.now() + (timeout or 30000)
  while true do
    local left = math.max(0, deadline - ludx.now())
    local line, msg, code = self.p:read_json(left)
    if not line then
      return nil, (msg or "peer exited") .. " waiting for '" .. event .. "'; stderr: " .. self.p:stderr(), code
    end
    self.lines[#self.lines + 1] = line
    if line.event == event then return line end
    if line.event == "error" and event ~= "error" and not line.expected then
      return nil, "peer error " .. tostring(line.code) .. ": " .. tostring(line.message), line.code
    end
  end
end

function Peer:send(obj)
  return self.p:write(json.encode(obj) .. "\n")
end

function Peer:wait(timeout)
  return self.p:wait(timeout or 30000)
end

function Peer:stderr()
  return self.p:stderr()
end

function Peer:close()
  self.p:close()
end

return M
