-- ludx.bench internals: finding, loading and running suites.
-- Its functions are fields of ludx.bench (docs/bench.md); it loads through
-- require "ludx.bench" only.
local ludx = require "ludx"
local json = require "ludx.json"
local M = require "ludx.bench"

local format = string.format

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

return true
