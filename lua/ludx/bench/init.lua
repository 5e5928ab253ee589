-- The benchmark harness behind `ludx bench`, and the helpers a suite uses.
--
-- A suite is a Lua file returning {name=, cases={...}} (docs/bench.md). A
-- case is {name, description, systems, baseline, run(ctx, system) ->
-- sample, setup, teardown, render, plot, available, metric}. Each case runs
-- its warm-ups, then N measured runs, rotating the systems within every run
-- so all of them meet the same state of the machine. Samples are written as
-- JSON lines with a record of each suite and case, so a file renders,
-- compares and reports on its own.
local ludx = require "ludx"
local json = require "ludx.json"

local M = {}

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

---------------------------------------------------------------------------
-- Tables

local median = M.median

local function num(v, fmt)
  if type(v) ~= "number" or v ~= v then return "-" end
  return format(fmt or "%.1f", v)
end

--- The metric a case is judged by: {field, unit, better = "higher"|"lower"}.
function M.metric(case)
  local m = case and case.metric
  if type(m) == "table" and m.field then return { field = m.field, unit = m.unit or "", better = m.better or "higher" } end
  return { field = "mb_s", unit = "MB/s", better = "higher" }
end

-- The transfer table: rows of {system, cells...}.
local function transfer_rows(case_name, samples, systems, baseline)
  local by = {}
  for _, s in ipairs(samples) do
    if s.case == case_name and s.ok then
      by[s.system] = by[s.system] or {}
      table.insert(by[s.system], s)
    end
  end
  local base
  if by[baseline] then
    local t = {}
    for _, s in ipairs(by[baseline]) do t[#t + 1] = s.mb_s end
    base = median(t)
  end
  local head = { "system", "MB/s med", "min", "max", "CPU s/GB send", "CPU s/GB recv", "rtx (med)", "RTO", "vs base", "extra" }
  local rows = {}
  for _, system in ipairs(systems) do
    local list = by[system]
    if list then
      local mb, cs, cr, rtx, rto, extras = {}, {}, {}, {}, {}, {}
      for _, s in ipairs(list) do
        mb[#mb + 1] = s.mb_s or 0
        cs[#cs + 1] = s.cpu_send_s_per_gb
        cr[#cr + 1] = s.cpu_recv_s_per_gb
        rtx[#rtx + 1] = s.retransmits or 0
        rto[#rto + 1] = s.rtos or 0
        for k, v in pairs(s.extra or {}) do
          if type(v) == "number" then
            extras[k] = extras[k] or {}
            table.insert(extras[k], v)
          end
        end
      end
      local mn, mx = math.huge, -math.huge
      for _, v in ipairs(mb) do mn, mx = math.min(mn, v), math.max(mx, v) end
      local med = median(mb)
      local ex, keys = {}, {}
      for k in pairs(extras) do keys[#keys + 1] = k end
      table.sort(keys)
      for _, k in ipairs(keys) do ex[#ex + 1] = format("%s %s", k, num(median(extras[k]), "%.2f")) end
      rows[#rows + 1] = { system, num(med), num(mn), num(mx), num(median(cs), "%.2f"), num(median(cr), "%.2f"),
        num(median(rtx), "%d"), num(median(rto), "%d"), base and base > 0 and format("%.2fx", med / base) or "-",
        table.concat(ex, ", ") }
    end
  end
  return head, rows
end

-- The table of a case that is not a transfer: each numeric field's median.
local function generic_rows(case_name, samples, systems)
  local by, fields, seen = {}, {}, {}
  for _, s in ipairs(samples) do
    if s.case == case_name and s.ok then
      by[s.system] = by[s.system] or {}
      table.insert(by[s.system], s)
      for k, v in pairs(s) do
        if type(v) == "number" and k ~= "run" and not seen[k] then
          seen[k] = true
          fields[#fields + 1] = k
        end
      end
    end
  end
  table.sort(fields)
  local head = { "system", "runs" }
  for _, f in ipairs(fields) do head[#head + 1] = f .. " (med)" end
  local rows = {}
  for _, system in ipairs(systems) do
    local list = by[system]
    if list then
      local row = { system, tostring(#list) }
      for _, f in ipairs(fields) do
        local t = {}
        for _, s in ipairs(list) do
          if type(s[f]) == "number" then t[#t + 1] = s[f] end
        end
        row[#row + 1] = num(median(t), "%.3g")
      end
      rows[#rows + 1] = row
    end
  end
  return head, rows
end

--- The header row and rows of one case's table (for text and HTML).
function M.case_table(case, samples)
  local id = case.id or (case.suite .. "/" .. case.name)
  local systems = case.systems or {}
  if case.kind == "transfer" then return transfer_rows(id, samples, systems, case.baseline) end
  return generic_rows(id, samples, systems)
end

local function text_table(head, rows)
  local w = {}
  for i, h in ipairs(head) do w[i] = #h end
  for _, r in ipairs(rows) do
    for i, c in ipairs(r) do w[i] = math.max(w[i] or 0, #c) end
  end
  local out = {}
  local function line(r)
    local cells = {}
    for i, c in ipairs(r) do cells[i] = i == #r and c or i == 1 and c .. (" "):rep(w[i] - #c) or (" "):rep(w[i] - #c) .. c end -- (no %Ns: LuaJIT takes widths < 100)
    out[#out + 1] = ("  " .. table.concat(cells, "  ")):gsub("%s+$", "")
  end
  line(head)
  for _, r in ipairs(rows) do line(r) end
  return table.concat(out, "\n")
end

local function failures(id, samples)
  local out = {}
  for _, s in ipairs(samples) do
    if s.case == id and not s.ok then
      out[#out + 1] = format("  %-34s FAILED run %d: %s", tostring(s.system), s.run or 0, tostring(s.error))
    end
  end
  return out
end

--- Renders the table of one transfer case from its samples.
function M.render_case(case_name, samples, systems, baseline)
  local head, rows = transfer_rows(case_name, samples, systems, baseline)
  local out = { text_table(head, rows) }
  for _, l in ipairs(failures(case_name, samples)) do out[#out + 1] = l end
  return table.concat(out, "\n")
end

--- The header of a case: suite / name (description, real sizes).
function M.case_header(c)
  return format("%s / %s  (%s)", c.suite, c.name, c.header or c.description or "")
end

--- Renders every case found in the samples (text).
function M.render(samples, cases)
  local out = {}
  for _, c in ipairs(cases) do
    local id = c.id or (c.suite .. "/" .. c.name)
    out[#out + 1] = "\n" .. M.case_header(c)
    for _, note in ipairs(c.notes or {}) do out[#out + 1] = "  " .. note end
    if c.render then
      out[#out + 1] = c.render(samples, id)
    else
      local head, rows = M.case_table(c, samples)
      out[#out + 1] = text_table(head, rows)
      for _, l in ipairs(failures(id, samples)) do out[#out + 1] = l end
    end
  end
  return table.concat(out, "\n")
end

---------------------------------------------------------------------------
-- Suites

M.DEFAULT_PATH = {}

local function is_file(path)
  local f = io.open(path)
  if not f then return false end
  local ok = f:read(0) ~= nil or f:seek("end") ~= nil
  f:close()
  return ok
end

local function load_path(path, name)
  local chunk, err = loadfile(path)
  if not chunk then return nil, err end
  local ok, suite = pcall(chunk)
  if not ok then return nil, path .. ": " .. tostring(suite) end
  if type(suite) ~= "table" or type(suite.cases) ~= "table" then
    return nil, path .. ": a suite returns {name = ..., cases = {...}} (see docs/bench.md)"
  end
  suite.name = suite.name or name
  suite.path = path
  return suite
end

--- The directories searched for suites by name: dirs, then bench/suites.
function M.suite_dirs(dirs)
  local out = {}
  for _, d in ipairs(dirs or {}) do out[#out + 1] = d end
  out[#out + 1] = M.root() .. "/bench/suites"
  return out
end

--- Loads a suite by file path (contains "/" or ends in .lua) or by name
-- (dirs, then bench/suites; "-" and "_" are the same in names).
function M.load_suite(name, dirs)
  if type(name) ~= "string" or name == "" then return nil, "a suite name or path is needed" end
  if name:find("/", 1, true) or name:match("%.lua$") then
    if not is_file(name) then return nil, "no such file: " .. name end
    local base = name:match("([^/]+)%.lua$") or name:match("([^/]+)$")
    return load_path(name, (base:gsub("_", "-")))
  end
  if not name:match("^[%w_%-]+$") then return nil, "a suite name is letters, digits, - and _" end
  local file = name:gsub("-", "_") .. ".lua"
  local tried = {}
  for _, d in ipairs(M.suite_dirs(dirs)) do
    local path = d .. "/" .. file
    if is_file(path) then return load_path(path, name) end
    tried[#tried + 1] = d
  end
  return nil, "not found in " .. table.concat(tried, ", ") .. " (ludx bench --list shows the suites)"
end

-- The first sentence of the comment a suite file starts with.
local function suite_description(path)
  local f = io.open(path)
  if not f then return "" end
  local parts = {}
  for line in f:lines() do
    local text = line:match("^%-%-%s?(.*)$")
    if not text or text:match("^%s*$") then break end
    parts[#parts + 1] = text
    if #parts >= 4 then break end
  end
  f:close()
  local d = table.concat(parts, " "):gsub("%s+", " ")
  d = d:match("^(.-%.)%s") or d
  if #d > 100 then d = d:sub(1, 97) .. "..." end
  return d
end

--- Every suite in dirs and bench/suites: {name, path, description}.
function M.list_suites(dirs)
  local out, seen = {}, {}
  for _, d in ipairs(M.suite_dirs(dirs)) do
    local entries = ludx.core.fs_scandir(d)
    if entries then
      local names = {}
      for _, e in ipairs(entries) do
        local n = e.name:match("^(.-)%.lua$")
        if n then names[#names + 1] = n end
      end
      table.sort(names)
      for _, n in ipairs(names) do
        local name = n:gsub("_", "-")
        if not seen[name] then
          seen[name] = true
          local path = d .. "/" .. n .. ".lua"
          out[#out + 1] = { name = name, path = path, description = suite_description(path) }
        end
      end
    end
  end
  return out
end

---------------------------------------------------------------------------
-- Running

local function case_record(c)
  local m = M.metric(c)
  return {
    kind = "case", id = c.id, suite = c.suite, name = c.name, description = c.description, header = c.header,
    systems = c.systems, baseline = c.baseline, case_kind = c.kind, bytes = c.bytes_used, metric = m,
    notes = c.notes,
  }
end

--- Runs the suites. opts: runs, warmups, quick, json (file), plot (dir),
-- charts (collect SVG charts in memory), log (function for progress lines).
-- Returns samples, cases, info {skipped = {reason...}, plots_written, plot_errors}.
function M.run(suites, opts)
  local log = opts.log or function(s) io.stderr:write(s, "\n") end
  local samples, cases = {}, {}
  local info = { skipped = {}, plots_written = 0, plot_errors = {} }
  local skipped_seen = {}
  local jsonf
  local function record(v)
    if jsonf then
      jsonf:write(json.encode(v), "\n")
      jsonf:flush()
    end
  end
  if opts.json then
    jsonf = assert(io.open(opts.json, "a"))
    record({ kind = "environment", environment = opts.environment or M.environment(), quick = opts.quick or nil })
  end
  for _, suite in ipairs(suites) do
    record({ kind = "suite", name = suite.name, path = suite.path })
    for _, case in ipairs(suite.cases) do
      if not (opts.quick and case.skip_quick) then
        case.suite = suite.name
        case.id = suite.name .. "/" .. case.name
        cases[#cases + 1] = case
        local id = case.id
        local ctx = { quick = opts.quick, plot = opts.plot, root = M.root(), case = case, log = log, samples = {},
          charts = {} }
        function ctx.add_chart(title, svg_text) ctx.charts[#ctx.charts + 1] = { title = title, svg = svg_text } end
        case.header = case.describe and case.describe(ctx) or case.description
        -- systems whose peers are missing are skipped, with one line per reason
        local systems, skipped_here = {}, {}
        for _, system in ipairs(case.systems or {}) do
          local ok, why = true, nil
          if case.available then ok, why = case.available(system) end
          if ok then
            systems[#systems + 1] = system
          else
            why = tostring(why)
            if not skipped_seen[why] then
              skipped_seen[why] = true
              info.skipped[#info.skipped + 1] = why
              log("skipped: systems with " .. why)
            end
            skipped_here[#skipped_here + 1] = system
          end
        end
        if #skipped_here > 0 then
          case.notes = { "skipped (peers not installed): " .. table.concat(skipped_here, ", ") }
        end
        local ok, err = true, nil
        if #systems > 0 and case.setup then ok, err = pcall(case.setup, ctx) end
        case.header = case.describe and case.describe(ctx) or case.description
        case.bytes_used = ctx.bytes
        record(case_record(case))
        if not ok then
          log(format("%s: setup failed: %s", id, tostring(err)))
          for _, system in ipairs(systems) do
            local s = { kind = "sample", case = id, system = system, ok = false, error = "setup: " .. tostring(err) }
            samples[#samples + 1] = s
            record(s)
          end
        elseif #systems > 0 then
          local runs = case.runs or opts.runs or 3
          local warmups = case.warmups or opts.warmups or 1
          if opts.quick then runs, warmups = 1, 0 end
          local metric = M.metric(case)
          for r = 1 - warmups, runs do
            -- rotate the order each run: every system goes first in turn
            local n = #systems
            for k = 0, n - 1 do
              local system = systems[(k + r - 1 + 10 * n) % n + 1]
              local ok2, sample = pcall(case.run, ctx, system, { run = r, warmup = r < 1 })
              if not ok2 then sample = { ok = false, error = tostring(sample) } end
              if type(sample) ~= "table" then sample = { ok = false, error = "run returned " .. type(sample) } end
              sample.kind = "sample"
              sample.case = id
              sample.system = system
              sample.run = r
              sample.warmup = r < 1 or nil
              if r >= 1 then
                samples[#samples + 1] = sample
                ctx.samples[#ctx.samples + 1] = sample
                record(sample)
              end
              local v = sample[metric.field]
              log(format("%s  %-34s %s  %s", r < 1 and "warm-up" or ("run " .. r), system, id,
                sample.ok and (type(v) == "number" and format("%.3g %s", v, metric.unit) or "ok")
                or ("FAILED: " .. tostring(sample.error))))
            end
          end
          if (opts.plot or opts.charts) and case.plot then
            local pok, perr = pcall(case.plot, ctx, opts.plot)
            if not pok then
              info.plot_errors[#info.plot_errors + 1] = format("%s: %s", id, tostring(perr))
              log(format("%s: plot failed: %s", id, tostring(perr)))
            else
              case.charts = ctx.charts
              info.plots_written = info.plots_written + #ctx.charts
            end
          end
        end
        if #systems > 0 and case.teardown then pcall(case.teardown, ctx) end
      end
    end
  end
  if jsonf then jsonf:close() end
  return samples, cases, info
end

---------------------------------------------------------------------------
-- Reading a recorded run

--- Reads a JSON-lines file: {environment, quick, suites = {{name, path}},
-- cases = {case records}, samples = {...}}. nil, msg when unreadable.
function M.read_results(path)
  local f, err = io.open(path)
  if not f then return nil, err end
  local r = { suites = {}, cases = {}, samples = {} }
  local by_id = {}
  local n = 0
  for line in f:lines() do
    n = n + 1
    local ok, v = pcall(json.decode, line)
    if ok and type(v) == "table" then
      if v.kind == "environment" then
        r.environment, r.quick = v.environment, v.quick
      elseif v.kind == "suite" then
        r.suites[#r.suites + 1] = v
      elseif v.kind == "case" and v.id then
        if not by_id[v.id] then r.cases[#r.cases + 1] = v end
        by_id[v.id] = v
      elseif v.kind == "sample" then
        r.samples[#r.samples + 1] = v
      end
    end
  end
  f:close()
  -- files of older runs have no case records: one per case id seen
  for _, s in ipairs(r.samples) do
    if s.case and not by_id[s.case] then
      local suite, name = tostring(s.case):match("^(.-)/(.*)$")
      local c = { kind = "case", id = s.case, suite = suite or s.case, name = name or "", systems = {},
        case_kind = s.mb_s and "transfer" or nil }
      by_id[s.case] = c
      r.cases[#r.cases + 1] = c
    end
    local c = by_id[s.case]
    if c and s.system then
      local have = false
      for _, x in ipairs(c.systems or {}) do have = have or x == s.system end
      if not have then
        c.systems = c.systems or {}
        c.systems[#c.systems + 1] = s.system
      end
    end
  end
  for _, c in ipairs(r.cases) do
    c.kind = c.case_kind
    c.header = c.header or c.description
    if c.systems == json.null then c.systems = {} end
    if c.notes == json.null then c.notes = nil end
  end
  return r
end

--- The cases of a recorded run as renderable cases: a suite that still
-- loads lends its own render function.
function M.recorded_cases(results, dirs)
  local loaded = {}
  for _, s in ipairs(results.suites) do
    local suite = s.path and M.load_suite(s.path, dirs) or M.load_suite(s.name, dirs)
    if suite then loaded[s.name] = suite end
  end
  local out = {}
  for _, c in ipairs(results.cases) do
    local suite = loaded[c.suite]
    if suite then
      for _, sc in ipairs(suite.cases) do
        if sc.name == c.name and sc.render then c.render = sc.render end
      end
    end
    out[#out + 1] = c
  end
  return out
end

---------------------------------------------------------------------------
-- Comparing two runs

local function spread(list)
  local mn, mx = math.huge, -math.huge
  for _, v in ipairs(list) do mn, mx = math.min(mn, v), math.max(mx, v) end
  return mn, mx
end

--- Compares two recorded runs case by case, system by system, on each
-- case's metric. Returns rows {case, system, unit, old = {median, min, max,
-- n}, new = {...}, change (fraction), verdict}.
function M.compare(old, new)
  local function values(r)
    local t = {}
    for _, s in ipairs(r.samples) do
      if s.ok and s.case and s.system then
        t[s.case] = t[s.case] or {}
        t[s.case][s.system] = t[s.case][s.system] or {}
        table.insert(t[s.case][s.system], s)
      end
    end
    return t
  end
  local ov, nv = values(old), values(new)
  local meta = {}
  for _, c in ipairs(old.cases) do meta[c.id] = c end
  for _, c in ipairs(new.cases) do meta[c.id] = c end
  local order, seen = {}, {}
  for _, r in ipairs({ new, old }) do
    for _, c in ipairs(r.cases) do
      if not seen[c.id] then
        seen[c.id] = true
        order[#order + 1] = c.id
      end
    end
  end
  local rows = {}
  for _, id in ipairs(order) do
    local metric = M.metric(meta[id])
    local systems, sseen = {}, {}
    for _, src in ipairs({ meta[id].systems or {}, (function()
      local t = {}
      for k in pairs(ov[id] or {}) do t[#t + 1] = k end
      for k in pairs(nv[id] or {}) do t[#t + 1] = k end
      table.sort(t)
      return t
    end)() }) do
      for _, s in ipairs(src) do
        if not sseen[s] then
          sseen[s] = true
          systems[#systems + 1] = s
        end
      end
    end
    for _, system in ipairs(systems) do
      local function stat(t)
        local list = {}
        for _, s in ipairs((t[id] or {})[system] or {}) do
          if type(s[metric.field]) == "number" then list[#list + 1] = s[metric.field] end
        end
        if #list == 0 then return nil end
        local mn, mx = spread(list)
        return { median = median(list), min = mn, max = mx, n = #list }
      end
      local o, n = stat(ov), stat(nv)
      local row = { case = id, system = system, unit = metric.unit, field = metric.field, old = o, new = n }
      if o and n then
        row.change = o.median ~= 0 and (n.median - o.median) / math.abs(o.median) or nil
        local better_is_higher = metric.better ~= "lower"
        if n.min > o.max or n.max < o.min then
          local up = n.median > o.median
          row.verdict = (up == better_is_higher) and "better (beyond spread)" or "WORSE (beyond spread)"
          row.beyond = true
        else
          row.verdict = "within spread"
        end
        if o.n < 2 or n.n < 2 then row.verdict = row.verdict .. ", few runs" end
      elseif o then
        row.verdict = "only in old"
      else
        row.verdict = "only in new"
      end
      rows[#rows + 1] = row
    end
  end
  return rows
end

--- Text of a comparison.
function M.format_compare(rows, old, new)
  local out = {}
  if old.environment then out[#out + 1] = "old: " .. M.format_environment(old.environment):gsub("\n", "\n     ") end
  if new.environment then out[#out + 1] = "new: " .. M.format_environment(new.environment):gsub("\n", "\n     ") end
  local function cell(s)
    if not s then return "-" end
    if s.n == 1 then return format("%.4g", s.median) end
    return format("%.4g [%.4g-%.4g]", s.median, s.min, s.max)
  end
  local last
  local head = { "system", "old med [min-max]", "new med [min-max]", "change", "verdict" }
  local rows_t = {}
  local function flush()
    if last and #rows_t > 0 then out[#out + 1] = text_table(head, rows_t) end
    rows_t = {}
  end
  for _, r in ipairs(rows) do
    if r.case ~= last then
      flush()
      out[#out + 1] = format("\n%s  (%s, %s)", r.case, r.field, r.unit ~= "" and r.unit or "")
      last = r.case
    end
    rows_t[#rows_t + 1] = { r.system, cell(r.old), cell(r.new), r.change and format("%+.1f%%", 100 * r.change) or "-",
      r.verdict }
  end
  flush()
  return table.concat(out, "\n")
end

---------------------------------------------------------------------------
-- The HTML report

local function esc(s)
  return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"):gsub('"', "&quot;"))
end

--- One self-contained HTML page: the environment, each case's table and
-- its charts as inline SVG. No scripts, no external assets.
function M.html_report(env, samples, cases, info)
  local o = {}
  local function add(s) o[#o + 1] = s end
  add('<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>ludx bench report</title>')
  add("<style>body{font-family:sans-serif;margin:2em;max-width:1000px}table{border-collapse:collapse;margin:0.5em 0}" ..
    "th,td{border:1px solid #ccc;padding:2px 8px;text-align:right}th:first-child,td:first-child{text-align:left}" ..
    "pre{background:#f6f6f6;padding:0.5em}.note{color:#a40}</style>\n</head>\n<body>")
  add("<h1>ludx bench report</h1>")
  if env then add("<pre>" .. esc(M.format_environment(env)) .. "</pre>") end
  for _, why in ipairs(info and info.skipped or {}) do add('<p class="note">skipped: systems with ' .. esc(why) .. "</p>") end
  for _, c in ipairs(cases) do
    local id = c.id or (c.suite .. "/" .. c.name)
    add('<section id="' .. esc(id:gsub("[^%w%-_]", "-")) .. '">')
    add("<h2>" .. esc(c.suite .. " / " .. c.name) .. "</h2>")
    if c.header or c.description then add("<p>" .. esc(c.header or c.description) .. "</p>") end
    for _, note in ipairs(c.notes or {}) do add('<p class="note">' .. esc(note) .. "</p>") end
    if c.render then
      add("<pre>" .. esc(c.render(samples, id)) .. "</pre>")
    else
      local head, rows = M.case_table(c, samples)
      add("<table>\n<tr>")
      for _, h in ipairs(head) do add("<th>" .. esc(h) .. "</th>") end
      add("</tr>")
      for _, r in ipairs(rows) do
        add("<tr>")
        for _, cell in ipairs(r) do add("<td>" .. esc(cell) .. "</td>") end
        add("</tr>")
      end
      add("</table>")
      local fails = failures(id, samples)
      if #fails > 0 then add("<pre>" .. esc(table.concat(fails, "\n")) .. "</pre>") end
    end
    for _, chart in ipairs(c.charts or {}) do
      add('<figure class="chart">')
      -- an SVG document is also valid inline in HTML
      add((chart.svg:gsub("^<%?xml[^>]*>%s*", "")))
      add("<figcaption>" .. esc(chart.title or "") .. "</figcaption></figure>")
    end
    add("</section>")
  end
  for _, e in ipairs(info and info.plot_errors or {}) do add('<p class="note">plot failed: ' .. esc(e) .. "</p>") end
  add("</body>\n</html>\n")
  return table.concat(o, "\n")
end

return M
