-- ludx bench: runs benchmark suites, renders, compares and reports results.
local ludx = require "ludx"
local bench = require "ludx.bench"

local M = {}

local usage = [[
usage: ludx bench [SUITE...] [options]
       ludx bench --render FILE [--report DIR/index.html]
       ludx bench --compare OLD.jsonl NEW.jsonl

Runs benchmark suites and prints a table per case: for transfers, median,
min and max MB/s, CPU seconds per GB at each end, retransmits and RTOs, and
the ratio to the baseline measured in the same run. Every transfer is
verified by hash before its time counts.

A SUITE is a name (bench/suites/NAME.lua, or a --suite-path directory) or a
path to a suite file of your own (./mysuite.lua). How to write one, and the
helpers a suite can use: docs/bench.md (example: examples/bench/latency.lua).

options:
  --runs N            measured runs per system (default 3)
  --warmups N         warm-up runs per system (default 1)
  --json FILE         append raw samples as JSON lines (default bench/results/<time>.jsonl)
  --plot DIR          write SVG charts (throughput, cwnd and pacing, RTT) per case
  --report FILE       write one HTML page: tables and charts, no external assets
  --quick             one short run per system, fewer cases (a smoke test)
  --suite-path DIR    look for suites by name in DIR too (may be repeated)
  --list              list the suites (with --suite-path directories)
  --render FILE       print the tables of the suites recorded in FILE
  --compare OLD NEW   compare two recorded runs case by case
  -h, --help          this help

With no SUITE, the default suites run: loopback path. Systems whose peers are
not installed (Node: tools/install-node-deps) are skipped.
]]

local DEFAULT = { "loopback", "path" }

local function fail(msg)
  io.stderr:write("ludx bench: ", msg, "\n")
  return 1
end

local function write_file(path, text)
  local dir = path:match("^(.*)/[^/]*$")
  if dir and dir ~= "" then
    local ok, err = require("ludx.fs").mkdirp(dir)
    if not ok then return nil, err end
  end
  local f, err = io.open(path, "w")
  if not f then return nil, err end
  f:write(text)
  f:close()
  return true
end

local function render_file(opts)
  local results, err = bench.read_results(opts.render)
  if not results then return fail(tostring(err)) end
  if #results.samples == 0 then return fail(opts.render .. ": no samples in this file") end
  local cases = bench.recorded_cases(results, opts.suite_path)
  if results.environment then print(bench.format_environment(results.environment)) end
  if results.quick then print("(--quick run: short transfers, one run per system)") end
  print(bench.render(results.samples, cases))
  if opts.report then
    local ok, werr = write_file(opts.report, bench.html_report(results.environment, results.samples, cases, {}))
    if not ok then return fail(tostring(werr)) end
    print("\nreport: " .. opts.report)
  end
  return 0
end

local function compare_files(a, b)
  local old, err = bench.read_results(a)
  if not old then return fail(tostring(err)) end
  local new, err2 = bench.read_results(b)
  if not new then return fail(tostring(err2)) end
  local rows = bench.compare(old, new)
  if #rows == 0 then return fail("no cases in common or no samples") end
  print(bench.format_compare(rows, old, new))
  return 0
end

function M.main(args)
  local opts = { runs = 3, warmups = 1, suite_path = {} }
  local names = {}
  local i = 1
  while args[i] do
    local a = args[i]
    if a == "-h" or a == "--help" then
      io.stdout:write(usage)
      return 0
    elseif a == "--runs" or a == "--warmups" then
      local n = tonumber(args[i + 1])
      if not n or n < 0 or n % 1 ~= 0 then return fail(a .. " needs a whole number") end
      opts[a:sub(3)] = n
      i = i + 2
    elseif a == "--json" or a == "--plot" or a == "--render" or a == "--report" then
      if not args[i + 1] then return fail(a .. " needs a path") end
      opts[a:sub(3)] = args[i + 1]
      i = i + 2
    elseif a == "--suite-path" then
      if not args[i + 1] then return fail(a .. " needs a directory") end
      table.insert(opts.suite_path, args[i + 1])
      i = i + 2
    elseif a == "--compare" then
      if not args[i + 1] or not args[i + 2] then return fail("--compare needs two files: OLD NEW") end
      opts.compare = { args[i + 1], args[i + 2] }
      i = i + 3
    elseif a == "--quick" then
      opts.quick = true
      i = i + 1
    elseif a == "--list" then
      opts.list = true
      i = i + 1
    elseif a:sub(1, 1) == "-" then
      io.stderr:write("ludx bench: unknown option '", a, "'\n", usage)
      return 1
    else
      names[#names + 1] = a
      i = i + 1
    end
  end

  if opts.list then
    for _, s in ipairs(bench.list_suites(opts.suite_path)) do
      print(string.format("%-12s %s\n             %s", s.name, s.description, s.path))
    end
    return 0
  end
  if opts.compare then return compare_files(opts.compare[1], opts.compare[2]) end
  if opts.render then return render_file(opts) end

  if #names == 0 then names = DEFAULT end
  local suites = {}
  for _, n in ipairs(names) do
    local s, err = bench.load_suite(n, opts.suite_path)
    if not s then return fail("suite '" .. n .. "': " .. tostring(err)) end
    suites[#suites + 1] = s
  end

  if not opts.json then
    require("ludx.fs").mkdirp(bench.root() .. "/bench/results")
    opts.json = bench.root() .. "/bench/results/" .. os.date("!%Y%m%dT%H%M%SZ") .. ".jsonl"
  end
  opts.charts = opts.report ~= nil
  local env = bench.environment()
  opts.environment = env
  local failed = false
  local ok, err = ludx.run(function()
    local samples, cases, info = bench.run(suites, opts)
    print(bench.format_environment(env))
    if opts.quick then print("(--quick: short transfers, one run per system; the headers give the sizes)") end
    for _, why in ipairs(info.skipped) do print("skipped: systems with " .. why) end
    print(bench.render(samples, cases))
    print("\nraw samples: " .. opts.json)
    if opts.plot then
      if info.plots_written > 0 then print("plots: " .. opts.plot) end
      for _, e in ipairs(info.plot_errors) do print("plot failed: " .. e) end
      if info.plots_written == 0 and #info.plot_errors == 0 then print("no plots: no case of these suites plots") end
    elseif #info.plot_errors > 0 then
      for _, e in ipairs(info.plot_errors) do print("plot failed: " .. e) end
    end
    if opts.report then
      local wok, werr = write_file(opts.report, bench.html_report(env, samples, cases, info))
      if wok then print("report: " .. opts.report) else print("report not written: " .. tostring(werr)); failed = true end
    end
    for _, s in ipairs(samples) do
      if not s.ok then failed = true end
    end
    return true
  end)
  if not ok then return fail(tostring(err)) end
  return failed and 1 or 0
end

return M
