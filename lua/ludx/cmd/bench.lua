-- ludx bench [SUITE...] [--runs N] [--warmups N] [--json FILE] [--plot DIR] [--quick] [--list]
local ludx = require "ludx"
local bench = require "ludx.bench"

local M = {}

local usage = [[
usage: ludx bench [SUITE...] [options]

Runs benchmark suites (bench/suites/*.lua) and prints a table per case:
median, min and max MB/s, CPU seconds per GB at each end, retransmits and
RTOs, and the ratio to the baseline measured in the same run. Every
transfer is verified by hash before its time counts.

options:
  --runs N      measured runs per system (default 3)
  --warmups N   warm-up runs per system (default 1)
  --json FILE   append raw samples as JSON lines (default bench/results/<time>.jsonl)
  --plot DIR    write SVG charts (throughput, cwnd and pacing, RTT) per case
  --quick       one short run per system, fewer cases (a smoke test)
  --list        list the suites
  --render FILE print the tables from a JSON-lines file of an earlier run
  -h, --help    this help

With no SUITE, the default suites run: loopback path.
]]

local DEFAULT = { "loopback", "path" }

function M.main(args)
  local opts = { runs = 3, warmups = 1 }
  local names = {}
  local i = 1
  while args[i] do
    local a = args[i]
    if a == "-h" or a == "--help" then
      io.stdout:write(usage)
      return 0
    elseif a == "--runs" or a == "--warmups" then
      local n = tonumber(args[i + 1])
      if not n or n < 0 or n % 1 ~= 0 then
        io.stderr:write("ludx bench: ", a, " needs a whole number\n")
        return 1
      end
      opts[a:sub(3)] = n
      i = i + 2
    elseif a == "--json" or a == "--plot" or a == "--render" then
      if not args[i + 1] then
        io.stderr:write("ludx bench: ", a, " needs a path\n")
        return 1
      end
      opts[a:sub(3)] = args[i + 1]
      i = i + 2
    elseif a == "--quick" then
      opts.quick = true
      i = i + 1
    elseif a == "--list" then
      for _, n in ipairs(bench.list_suites()) do print(n) end
      return 0
    elseif a:sub(1, 1) == "-" then
      io.stderr:write("ludx bench: unknown option '", a, "'\n", usage)
      return 1
    else
      names[#names + 1] = a
      i = i + 1
    end
  end
  if #names == 0 then names = DEFAULT end
  local suites = {}
  for _, n in ipairs(names) do
    local s, err = bench.load_suite(n)
    if not s then
      io.stderr:write("ludx bench: suite '", n, "': ", tostring(err), "\n")
      return 1
    end
    suites[#suites + 1] = s
  end

  if opts.render then
    local json = require "ludx.json"
    local samples = {}
    for line in io.lines(opts.render) do
      local v = json.decode(line)
      if v and v.kind == "sample" then samples[#samples + 1] = v end
      if v and v.kind == "environment" then print(bench.format_environment(v.environment)) end
    end
    local cases = {}
    for _, s in ipairs(suites) do
      for _, c in ipairs(s.cases) do
        c.suite = s.name
        cases[#cases + 1] = c
      end
    end
    print(bench.render(samples, cases))
    return 0
  end

  if not opts.json then
    os.execute("mkdir -p '" .. bench.root() .. "/bench/results'")
    opts.json = bench.root() .. "/bench/results/" .. os.date("!%Y%m%dT%H%M%SZ") .. ".jsonl"
  end
  local env = bench.environment()
  opts.environment = env
  local failed = false
  local ok, err = ludx.run(function()
    local samples, cases = bench.run(suites, opts)
    print(bench.format_environment(env))
    print(bench.render(samples, cases))
    print("\nraw samples: " .. opts.json)
    if opts.plot then print("plots: " .. opts.plot) end
    for _, s in ipairs(samples) do
      if not s.ok then failed = true end
    end
    return true
  end)
  if not ok then
    io.stderr:write("ludx bench: ", tostring(err), "\n")
    return 1
  end
  return failed and 1 or 0
end

return M
