-- ludx.bench internals: reading a recorded run, and comparing two.
-- Its functions are fields of ludx.bench (docs/bench.md); it loads through
-- require "ludx.bench" only.
local json = require "ludx.json"
local M = require "ludx.bench"
local text_table = require("ludx.bench.render").text_table

local format = string.format
local median = M.median

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
        if o.n < 2 or n.n < 2 then
          -- one run has no spread: the change alone says nothing yet
          local up = n.median > o.median
          row.verdict = n.median == o.median and "same, too few runs to judge"
            or ((up == better_is_higher) and "better" or "worse") .. ", too few runs to judge (--runs 5)"
        elseif n.min > o.max or n.max < o.min then
          local up = n.median > o.median
          row.verdict = (up == better_is_higher) and "better (beyond spread)" or "WORSE (beyond spread)"
          row.beyond = true
        else
          row.verdict = "within spread"
        end
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

return true
