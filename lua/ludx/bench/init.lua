-- The benchmark harness behind `ludx bench`, and the helpers a suite uses.
--
-- A suite is a Lua file returning {name=, cases={...}} (docs/bench.md). A
-- case is {name, description, systems, baseline, run(ctx, system) ->
-- sample, setup, teardown, render, plot, available, metric}. Each case runs
-- its warm-ups, then N measured runs, rotating the systems within every run
-- so all of them meet the same state of the machine. Samples are written as
-- JSON lines with a record of each suite and case, so a file renders,
-- compares and reports on its own.
--
-- The files: this one (the helpers for suites, peers, the environment),
-- bench/suites.lua (finding, loading and running suites), bench/render.lua
-- (tables as text and HTML, the report page), bench/results.lua (reading
-- and comparing recorded runs). They add their functions to this module's
-- table, so they load through require "ludx.bench" only.
local ludx = require "ludx"
local json = require "ludx.json"

local M = {}
-- the parts below require this module back while it loads
package.loaded["ludx.bench"] = M

local format = string.format

--- The repository root (where bench/ lives), from where ludx's modules are.
function M.root()
  local env = os.getenv("LUDX_ROOT")
  if env and env ~= "" then return env end
  local init = package.searchpath("ludx", package.path) or "lua/ludx/init.lua"
  local root = init:gsub("/lua/ludx/init%.lua$", ""):gsub("^lua/ludx/init%.lua$", ".")
  if root == init then root = "." end
  return root
end

local function read_cmd(cmd)
  local f = io.popen(cmd .. " 2>/dev/null")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  s = s and s:gsub("%s+$", "")
  return s ~= "" and s or nil
end

local function read_file(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

local function shq(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

---------------------------------------------------------------------------
-- Helpers for suites (documented in docs/bench.md)

--- Milliseconds on the loop's clock (sub-millisecond resolution).
function M.now()
  return ludx.now()
end

--- Runs fn(...) and returns the milliseconds it took, then fn's results.
function M.time(fn, ...)
  local t0 = ludx.now()
  local r = { fn(...) }
  return ludx.now() - t0, unpack(r)
end

--- CPU seconds this process used so far (user + system).
function M.cpu_seconds()
  return os.clock()
end

local function sorted(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  return s
end

--- The median of a list of numbers (nil for an empty list).
function M.median(t)
  if #t == 0 then return nil end
  local s = sorted(t)
  local n = #s
  if n % 2 == 1 then return s[(n + 1) / 2] end
  return (s[n / 2] + s[n / 2 + 1]) / 2
end

--- The p-th percentile (p in 0..1, nearest rank) of a list of numbers.
function M.percentile(t, p)
  if type(t) ~= "table" then error("bad argument 't' to 'percentile' (table expected, got " .. type(t) .. ")", 2) end
  if type(p) ~= "number" or p < 0 or p > 1 then error("bad argument 'p' to 'percentile' (number 0..1 expected)", 2) end
  if #t == 0 then return nil end
  local s = sorted(t)
  return s[math.max(1, math.ceil(p * #s))]
end

--- A summary of a list of numbers: n, min, max, mean, median, p90, p99.
function M.summary(t)
  if #t == 0 then return { n = 0 } end
  local s = sorted(t)
  local sum = 0
  for _, v in ipairs(s) do sum = sum + v end
  local function pct(p) return s[math.max(1, math.ceil(p * #s))] end
  return { n = #s, min = s[1], max = s[#s], mean = sum / #s, median = M.median(s), p90 = pct(0.9), p99 = pct(0.99) }
end

--- The BLAKE2b-256 digest of data, as hex: to verify what a peer got.
function M.hash(data)
  if type(data) ~= "string" then error("bad argument 'data' to 'hash' (string expected, got " .. type(data) .. ")", 2) end
  return require("ludx.crypto").hex(ludx.core.crypto.blake2b(data))
end

--- Deterministic bytes (xorshift32 from seed): the same for the same seed.
function M.payload(n, seed)
  if type(n) ~= "number" or n < 0 or n % 1 ~= 0 then error("bad argument 'n' to 'payload' (whole number expected)", 2) end
  local bit = require "bit"
  local x = bit.tobit(seed or 1)
  if x == 0 then x = 1 end
  local out = {}
  for i = 1, n do
    x = bit.bxor(x, bit.lshift(x, 13))
    x = bit.bxor(x, bit.rshift(x, 17))
    x = bit.bxor(x, bit.lshift(x, 5))
    out[i] = bit.band(x, 255)
  end
  local parts = {}
  for i = 1, n, 4096 do parts[#parts + 1] = string.char(unpack(out, i, math.min(n, i + 4095))) end
  return table.concat(parts)
end

local Peer = {}
Peer.__index = Peer
Peer.__tostring = function(p) return format("<bench peer %s pid %s>", p.name, tostring(p.proc.pid)) end

--- Starts a peer process that speaks JSON lines on stdin/stdout and waits
-- for its first line with event = "ready". file: a program (a .lua file
-- runs on this ludx executable); args: list; opts: timeout (ms, default
-- 20000), env, wrap (a command prefix, e.g. {"ip","netns","exec",ns}).
-- Returns the peer (peer.ready is the ready line) or raises.
function M.peer(file, args, opts)
  if type(file) ~= "string" then error("bad argument 'file' to 'peer' (string expected, got " .. type(file) .. ")", 2) end
  opts = opts or {}
  local process = require "ludx.process"
  local all = {}
  if file:match("%.lua$") then
    all[1] = file
    file = ludx.core.exepath()
  end
  for _, a in ipairs(args or {}) do all[#all + 1] = a end
  if opts.wrap then
    local w = {}
    for i = 2, #opts.wrap do w[#w + 1] = opts.wrap[i] end
    w[#w + 1] = file
    for _, a in ipairs(all) do w[#w + 1] = a end
    file, all = opts.wrap[1], w
  end
  local p, msg = process.spawn(file, all, { env = opts.env })
  if not p then error((opts.name or file) .. " did not start: " .. tostring(msg), 0) end
  local self = setmetatable({ proc = p, name = opts.name or file }, Peer)
  self.ready = self:expect("ready", opts.timeout or 20000)
  return self
end

--- Waits for the peer's next line with this event (raises on an "error"
-- line, on exit or after timeout ms). Returns the decoded line.
function Peer:expect(event, timeout)
  local deadline = ludx.now() + (timeout or 20000)
  while true do
    local line, msg = self.proc:read_json(math.max(0, deadline - ludx.now()))
    if not line then
      error(format("%s: %s waiting for '%s'; stderr: %s", self.name, msg or "exited", event, self.proc:stderr():sub(1, 2000)), 0)
    end
    if type(line) == "table" then
      if line.event == event then return line end
      if line.event == "error" then error(format("%s: %s: %s", self.name, tostring(line.code), tostring(line.message)), 0) end
    end
  end
end

--- Sends one JSON line to the peer.
function Peer:send(obj)
  return self.proc:write(json.encode(obj) .. "\n")
end

--- Closes its stdin, waits up to timeout ms (default 5000) for it to exit,
-- then kills what is left. Returns its exit status.
function Peer:close(timeout)
  if self.closed then return self.status end
  self.closed = true
  self.proc:close_stdin()
  self.status = self.proc:wait(timeout or 5000)
  self.proc:close()
  return self.status
end

M.Peer = Peer

--- Whether node and the Node peers (bench/peers/node_modules/<module>) are
-- installed; false and how to install them when not.
function M.node_available(module)
  local root = M.root()
  local pkg = root .. "/bench/peers/node_modules/" .. (module or "udx-native") .. "/package.json"
  if not read_file(pkg) then
    return false, "the Node peers are not installed (run tools/install-node-deps)"
  end
  if not read_cmd("command -v node") then
    return false, "node is not on PATH (install Node.js, then run tools/install-node-deps)"
  end
  return true
end

---------------------------------------------------------------------------
-- Environment

--- What the run ran on: commit, versions, kernel, CPU.
function M.environment()
  local root = M.root()
  local v = ludx.version()
  local udxn = read_file(root .. "/bench/peers/node_modules/udx-native/package.json")
  local ss = read_file(root .. "/bench/peers/node_modules/@hyperswarm/secret-stream/package.json")
  local cpuinfo = read_file("/proc/cpuinfo") or ""
  local cpu = cpuinfo:match("model name%s*:%s*([^\n]+)")
  local ncpu = 0
  for _ in cpuinfo:gmatch("\nprocessor%s*:") do ncpu = ncpu + 1 end
  return {
    commit = read_cmd("git -C " .. shq(root) .. " rev-parse --short HEAD") or "unknown",
    dirty = read_cmd("git -C " .. shq(root) .. " status --porcelain --untracked-files=no") ~= nil,
    ludx = v.ludx,
    luajit = v.luajit,
    libuv = v.libuv,
    libsodium = v.libsodium,
    udx_native = udxn and json.decode(udxn).version or "not installed",
    secret_stream = ss and json.decode(ss).version or "not installed",
    node = read_cmd("node --version") or "not installed",
    kernel = read_cmd("uname -sr") or "unknown",
    cpu = cpu or "unknown",
    cpus = ncpu + 1,
    date = os.date("!%Y-%m-%dT%H:%M:%SZ"),
  }
end

function M.format_environment(env)
  return format(
    "commit %s%s  |  ludx %s, LuaJIT %s, libuv %s, libsodium %s  |  udx-native %s, secret-stream %s, node %s\n" ..
      "kernel %s  |  CPU %s (%s)  |  %s",
    tostring(env.commit), env.dirty and " (modified)" or "", tostring(env.ludx), tostring(env.luajit),
    tostring(env.libuv), tostring(env.libsodium), tostring(env.udx_native), tostring(env.secret_stream),
    tostring(env.node), tostring(env.kernel), tostring(env.cpu), tostring(env.cpus), tostring(env.date)
  )
end

require "ludx.bench.render"
require "ludx.bench.suites"
require "ludx.bench.results"

return M
