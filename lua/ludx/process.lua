-- Child processes as task-friendly objects: read output, lines, JSON lines,
-- wait for patterns (pseudo-terminals), wait for exit.
local ludx = require "ludx"
local json = require "ludx.json"

local core = ludx.core
local EV = core.EV

local M = {}

local Proc = {}
Proc.__index = Proc
-- One line for the REPL and logs: pid, program, state.
Proc.__tostring = function(p)
  local state = "running"
  if p.exit_signal and p.exit_signal ~= 0 then
    state = "killed by signal " .. tostring(p.exit_signal)
  elseif p.exit_status ~= nil then
    state = "exited " .. tostring(p.exit_status)
  end
  return string.format("<process %s %s %s>", tostring(p.pid), tostring(p.file), state)
end

local function on_output(p, which)
  if which == 2 then
    p.err_waiters:wake_all(true)
  else
    p.out_waiters:wake_all(true)
  end
end

local function on_exit(p, status, signal)
  p.exit_status, p.exit_signal = status, signal
  p.exit_waiters:wake_all(true)
  -- a reader waiting for more output learns the child is gone too
  p.out_waiters:wake_all(true)
  p.err_waiters:wake_all(true)
end

ludx.on_event(EV.PROC_OUTPUT, on_output)
ludx.on_event(EV.PROC_EXIT, on_exit)

--- Starts a program. args: list of arguments (without the program name).
-- opts: env (table name -> value, merged over ours unless clear_env), cwd,
-- pty (boolean), rows, cols, stderr ("pipe" or "inherit").
function M.spawn(file, args, opts)
  if type(file) ~= "string" then error("bad argument 'file' to 'spawn' (string expected, got " .. type(file) .. ")", 2) end
  if args ~= nil and type(args) ~= "table" then error("bad argument 'args' to 'spawn' (table expected, got " .. type(args) .. ")", 2) end
  if opts ~= nil and type(opts) ~= "table" then error("bad argument 'opts' to 'spawn' (table expected, got " .. type(opts) .. ")", 2) end
  opts = opts or {}
  local argv = { file }
  for i, a in ipairs(args or {}) do argv[i + 1] = tostring(a) end
  local env
  if opts.env then
    local merged = {}
    if not opts.clear_env then merged = core.environ() end
    for k, v in pairs(opts.env) do merged[k] = v ~= false and tostring(v) or nil end
    env = {}
    for k, v in pairs(merged) do env[#env + 1] = k .. "=" .. v end
  end
  local p = setmetatable({
    file = file,
    out_buf = "",
    err_buf = "",
    out_waiters = ludx.waiters(),
    err_waiters = ludx.waiters(),
    exit_waiters = ludx.waiters(),
  }, Proc)
  p.ref = ludx.ref(p)
  local h, msg, code = core.spawn({
    file = file, args = argv, env = env, cwd = opts.cwd, pty = opts.pty,
    rows = opts.rows, cols = opts.cols, stderr = opts.stderr, ref = p.ref,
  })
  if not h then
    ludx.unref(p.ref)
    return nil, file .. ": " .. msg, code
  end
  p.handle = h
  p.pid = h:pid()
  ludx.track(p)
  return p
end

local function pull(p, which)
  if not p.handle then return "", true end
  local data, eof = p.handle:take(which)
  return data, eof
end

local function fill(p)
  local data, eof = pull(p, 1)
  if #data > 0 then p.out_buf = p.out_buf .. data end
  p.out_eof = eof
  local edata = pull(p, 2)
  if #edata > 0 then p.err_buf = p.err_buf .. edata end
end

-- Waits for more stdout; false at EOF, or nil, msg, code on timeout.
local function wait_more(p, deadline, what)
  if p.out_eof then return false end
  local timeout
  if deadline then
    timeout = deadline - ludx.now()
    if timeout < 0 then timeout = 0 end
  end
  local ok, msg, code = p.out_waiters:wait(what, timeout, what)
  if ok == nil and code then return nil, msg, code end
  fill(p)
  return true
end

--- All stdout available now (waits for some); nil at EOF.
function Proc:read(timeout)
  ludx.check_timeout(timeout, "read")
  local deadline = timeout and ludx.now() + timeout
  fill(self)
  while #self.out_buf == 0 do
    local more, msg, code = wait_more(self, deadline, "read")
    if more == nil then return nil, msg, code end
    if more == false and #self.out_buf == 0 then return nil end
  end
  local s = self.out_buf
  self.out_buf = ""
  return s
end

--- The next line of stdout without its newline; nil at EOF.
function Proc:read_line(timeout)
  ludx.check_timeout(timeout, "read_line")
  local deadline = timeout and ludx.now() + timeout
  fill(self)
  while true do
    local i = self.out_buf:find("\n", 1, true)
    if i then
      local line = self.out_buf:sub(1, i - 1):gsub("\r$", "")
      self.out_buf = self.out_buf:sub(i + 1)
      return line
    end
    local more, msg, code = wait_more(self, deadline, "read_line")
    if more == nil then return nil, msg, code end
    if more == false then
      if #self.out_buf > 0 then
        local line = self.out_buf
        self.out_buf = ""
        return line
      end
      return nil
    end
  end
end

--- The next stdout line that is a JSON object; lines that are not JSON are
-- skipped (kept in self.noise). nil at EOF.
function Proc:read_json(timeout)
  ludx.check_timeout(timeout, "read_json")
  local deadline = timeout and ludx.now() + timeout
  while true do
    local left = deadline and math.max(0, deadline - ludx.now())
    local line, msg, code = self:read_line(left)
    if not line then return nil, msg, code end
    if line:sub(1, 1) == "{" then
      local v = json.decode(line)
      if type(v) == "table" then return v end
    end
    self.noise = (self.noise or "") .. line .. "\n"
  end
end

--- Waits until stdout contains the Lua pattern; returns the output up to and
-- including the match (which is consumed), plus the captures.
function Proc:expect(pattern, timeout, plain)
  ludx.check_timeout(timeout, "expect")
  local deadline = timeout and ludx.now() + timeout
  fill(self)
  while true do
    local r = { self.out_buf:find(pattern, 1, plain) }
    if r[1] then
      local text = self.out_buf:sub(1, r[2])
      self.out_buf = self.out_buf:sub(r[2] + 1)
      return text, unpack(r, 3)
    end
    local more, msg, code = wait_more(self, deadline, "expect " .. pattern)
    if more == nil then return nil, msg .. " waiting for " .. pattern .. "; got: " .. self.out_buf, code end
    if more == false then return nil, "end of output waiting for " .. pattern .. "; got: " .. self.out_buf, "EOF" end
  end
end

--- Everything the child wrote to stderr so far (it does not wait).
function Proc:stderr()
  fill(self)
  local s = self.err_buf
  self.err_buf = ""
  return s
end

function Proc:write(data)
  if type(data) ~= "string" then error("bad argument 'data' to 'write' (string expected, got " .. type(data) .. ")", 2) end
  if not self.handle then return nil, "process is closed", "EPIPE" end
  return self.handle:write(data)
end

function Proc:close_stdin()
  if not self.handle then return nil, "process is closed", "EPIPE" end
  return self.handle:close_stdin()
end

--- Waits for the exit; returns status, signal.
function Proc:wait(timeout)
  ludx.check_timeout(timeout, "wait")
  while self.exit_status == nil do
    local ok, msg, code = self.exit_waiters:wait("exit of " .. self.file, timeout, "wait")
    if ok == nil and code then return nil, msg, code end
  end
  return self.exit_status, self.exit_signal
end

function Proc:kill(sig)
  if not self.handle or self.exit_status ~= nil then return nil, "process has exited", "ESRCH" end
  return self.handle:kill(sig or "SIGTERM")
end

function Proc:resize(rows, cols)
  return self.handle:resize(rows, cols)
end

--- Kills the child if it still runs and lets go of it.
function Proc:close()
  if not self.handle then return end
  if self.exit_status == nil then self.handle:kill("SIGKILL") end
  self.handle:release()
  self.handle = nil
  ludx.untrack(self)
  ludx.unref(self.ref)
end

return M
