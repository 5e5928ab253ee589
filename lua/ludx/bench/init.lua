-- The benchmark harness behind `ludx bench`.
--
-- A suite is a Lua file in bench/suites/ returning {name=, cases={...}}. A
-- case is {name, setup(ctx), run(ctx, system) -> sample, teardown(ctx),
-- bytes, systems = {...}, baseline = system}. Each case runs its warm-ups,
-- then N measured runs, rotating the systems within every run so all of
-- them meet the same state of the machine. A sample is kept only when its
-- transfer was verified (hash); the table is rendered from the samples,
-- which are also written as JSON lines.
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

--- What the run ran on: commit, versions, kernel, CPU.
function M.environment()
  local root = M.root()
  local v = ludx.version()
  local udxn = read_file(root .. "/bench/peers/node_modules/udx-native/package.json")
  local ss = read_file(root .. "/bench/peers/node_modules/@hyperswarm/secret-stream/package.json")
  local cpu = (read_file("/proc/cpuinfo") or ""):match("model name%s*:%s*([^\n]+)")
  local ncpu = 0
  for _ in (read_file("/proc/cpuinfo") or ""):gmatch("\nprocessor%s*:") do ncpu = ncpu + 1 end
  return {
    commit = read_cmd("git -C '" .. root .. "' rev-parse --short HEAD") or "unknown",
    dirty = read_cmd("git -C '" .. root .. "' status --porcelain --untracked-files=no") ~= nil,
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
      "kernel %s  |  CPU %s (%d)  |  %s",
    env.commit, env.dirty and " (modified)" or "", env.ludx, env.luajit, env.libuv, env.libsodium,
    env.udx_native, env.secret_stream, env.node, env.kernel, env.cpu, env.cpus, env.date
  )
end

local function median(t)
  if #t == 0 then return nil end
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  local n = #s
  if n % 2 == 1 then return s[(n + 1) / 2] end
  return (s[n / 2] + s[n / 2 + 1]) / 2
end
M.median = median

local function num(v, fmt)
  if v == nil or v ~= v then return "-" end
  return format(fmt or "%.1f", v)
end

--- Renders the table of one case from its samples (JSON-line records).
function M.render_case(case_name, samples, systems, baseline)
  local by = {}
  for _, s in ipairs(samples) do
    if s.case == case_name and s.ok then
      by[s.system] = by[s.system] or {}
      table.insert(by[s.system], s)
    end
  end
  local failed = {}
  for _, s in ipairs(samples) do
    if s.case == case_name and not s.ok then failed[#failed + 1] = s end
  end
  local rows = {}
  local base = by[baseline] and median((function()
    local t = {}
    for _, s in ipairs(by[baseline]) do t[#t + 1] = s.mb_s end
    return t
  end)())
  local out = {}
  out[#out + 1] = format("  %-34s %8s %8s %8s  %9s %9s  %7s %5s  %8s  %s", "system", "MB/s med", "min", "max",
    "CPU s/GB", "CPU s/GB", "rtx", "RTO", "vs base", "extra")
  out[#out + 1] = format("  %-34s %8s %8s %8s  %9s %9s  %7s %5s  %8s", "", "", "", "", "sender", "receiver", "(med)", "", "")
  for _, system in ipairs(systems) do
    local list = by[system]
    if list then
      local mb, cs, cr, rtx, rto = {}, {}, {}, {}, {}
      local extras = {}
      for _, s in ipairs(list) do
        mb[#mb + 1] = s.mb_s
        cs[#cs + 1] = s.cpu_send_s_per_gb
        cr[#cr + 1] = s.cpu_recv_s_per_gb
        rtx[#rtx + 1] = s.retransmits or 0
        rto[#rto + 1] = s.rtos or 0
        for k, v in pairs(s.extra or {}) do
          extras[k] = extras[k] or {}
          table.insert(extras[k], v)
        end
      end
      local mn, mx = math.huge, -math.huge
      for _, v in ipairs(mb) do mn, mx = math.min(mn, v), math.max(mx, v) end
      local med = median(mb)
      local ex = {}
      local keys = {}
      for k in pairs(extras) do keys[#keys + 1] = k end
      table.sort(keys)
      for _, k in ipairs(keys) do ex[#ex + 1] = format("%s %s", k, num(median(extras[k]), "%.2f")) end
      rows[#rows + 1] = format("  %-34s %8.1f %8.1f %8.1f  %9s %9s  %7s %5s  %8s  %s", system, med, mn, mx,
        num(median(cs), "%.2f"), num(median(cr), "%.2f"), num(median(rtx), "%d"), num(median(rto), "%d"),
        base and format("%.2fx", med / base) or "-", table.concat(ex, ", "))
    end
  end
  for _, r in ipairs(rows) do out[#out + 1] = r end
  for _, s in ipairs(failed) do
    out[#out + 1] = format("  %-34s FAILED run %d: %s", s.system, s.run or 0, tostring(s.error))
  end
  return table.concat(out, "\n")
end

--- Renders every case of every suite found in the samples.
function M.render(samples, cases)
  local out = {}
  for _, c in ipairs(cases) do
    local id = c.suite .. "/" .. c.name
    out[#out + 1] = format("\n%s / %s  (%s)", c.suite, c.name, c.description or "")
    if c.render then
      out[#out + 1] = c.render(samples, id)
    else
      out[#out + 1] = M.render_case(id, samples, c.systems, c.baseline)
    end
  end
  return table.concat(out, "\n")
end

--- Loads bench/suites/<name>.lua.
function M.load_suite(name)
  local path = M.root() .. "/bench/suites/" .. name:gsub("-", "_") .. ".lua"
  local chunk, err = loadfile(path)
  if not chunk then return nil, err end
  local ok, suite = pcall(chunk)
  if not ok then return nil, suite end
  if type(suite) ~= "table" or type(suite.cases) ~= "table" then return nil, path .. ": a suite returns {name=, cases={...}}" end
  suite.name = suite.name or name
  return suite
end

function M.list_suites()
  local out = {}
  local f = io.popen("ls '" .. M.root() .. "/bench/suites' 2>/dev/null")
  if f then
    for line in f:lines() do
      local n = line:match("^(.-)%.lua$")
      if n then out[#out + 1] = n:gsub("_", "-") end
    end
    f:close()
  end
  table.sort(out)
  return out
end

--- Runs the suites. opts: runs, warmups, quick, json (file), plot (dir),
-- log (function for progress lines). Returns samples, cases.
function M.run(suites, opts)
  local log = opts.log or function(s) io.stderr:write(s, "\n") end
  local samples, cases = {}, {}
  local jsonf
  if opts.json then
    jsonf = assert(io.open(opts.json, "a"))
    jsonf:write(json.encode({ kind = "environment", environment = opts.environment or M.environment() }), "\n")
  end
  for _, suite in ipairs(suites) do
    for _, case in ipairs(suite.cases) do
      if not (opts.quick and case.skip_quick) then
        case.suite = suite.name
        cases[#cases + 1] = case
        local id = suite.name .. "/" .. case.name
        local ctx = { quick = opts.quick, plot = opts.plot, root = M.root(), case = case, log = log }
        local ok, err = true, nil
        if case.setup then ok, err = pcall(case.setup, ctx) end
        if not ok then
          log(format("%s: setup failed: %s", id, tostring(err)))
          for _, system in ipairs(case.systems) do
            samples[#samples + 1] = { kind = "sample", case = id, system = system, ok = false, error = "setup: " .. tostring(err) }
          end
        else
          local runs = case.runs or opts.runs or 3
          local warmups = case.warmups or opts.warmups or 1
          if opts.quick then runs, warmups = 1, 0 end
          for r = 1 - warmups, runs do
            -- rotate the order each run: every system goes first in turn
            local n = #case.systems
            for k = 0, n - 1 do
              local system = case.systems[(k + r - 1 + 10 * n) % n + 1]
              local ok2, sample = pcall(case.run, ctx, system, { run = r, warmup = r < 1 })
              if not ok2 then sample = { ok = false, error = tostring(sample) } end
              sample.kind = "sample"
              sample.case = id
              sample.system = system
              sample.run = r
              sample.warmup = r < 1 or nil
              if r >= 1 then
                samples[#samples + 1] = sample
                if jsonf then
                  jsonf:write(json.encode(sample), "\n")
                  jsonf:flush()
                end
              end
              log(format("%s  %-34s %s  %s", r < 1 and "warm-up" or ("run " .. r), system, id,
                sample.ok and format("%.1f MB/s", sample.mb_s or 0) or ("FAILED: " .. tostring(sample.error))))
            end
          end
          if opts.plot and case.plot then
            local pok, perr = pcall(case.plot, ctx, opts.plot)
            if not pok then log(format("%s: plot failed: %s", id, tostring(perr))) end
          end
        end
        if case.teardown then pcall(case.teardown, ctx) end
      end
    end
  end
  if jsonf then jsonf:close() end
  return samples, cases
end

return M
