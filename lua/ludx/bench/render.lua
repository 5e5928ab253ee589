-- ludx.bench internals: the tables of cases, as text and HTML, and the report page.
-- Its functions are fields of ludx.bench (docs/bench.md); it loads through
-- require "ludx.bench" only.
local M = require "ludx.bench"

local format = string.format

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
-- The HTML report

local esc = require("ludx.bench.svg").esc

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

-- for bench/results.lua
return { text_table = text_table }
