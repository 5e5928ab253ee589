-- Line charts as SVG, for benchmark traces: labelled axes with units, nice
-- ticks, a legend, and an optional second y axis on the right.
local M = {}

local format, floor, ceil, log10, max, min = string.format, math.floor, math.ceil, math.log10, math.max, math.min

local clip_n = 0

local PALETTE = { "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf" }

--- s (any value) escaped for XML and HTML text and attributes.
local function esc(s)
  return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"):gsub('"', "&quot;"))
end
M.esc = esc

-- Ticks at 1, 2 or 5 times a power of ten, about n of them over [lo, hi].
function M.ticks(lo, hi, n)
  n = n or 5
  if hi <= lo then hi = lo + 1 end
  local raw = (hi - lo) / n
  local mag = 10 ^ floor(log10(raw))
  local step = mag
  for _, m in ipairs({ 1, 2, 5, 10 }) do
    step = m * mag
    if raw <= step then break end
  end
  local first = ceil(lo / step - 1e-9) * step
  local out = {}
  local v = first
  while v <= hi + step * 1e-9 do
    out[#out + 1] = v
    v = v + step
  end
  return out, step
end

local function label(v, step)
  if step >= 1 then return format("%d", floor(v + 0.5)) end
  local digits = max(0, -floor(log10(step)))
  return format("%." .. digits .. "f", v)
end

local function extent(series, field)
  local lo, hi = math.huge, -math.huge
  for _, s in ipairs(series) do
    for _, p in ipairs(s.points) do
      local v = p[field]
      if v == v and v ~= math.huge and v ~= -math.huge then
        lo, hi = min(lo, v), max(hi, v)
      end
    end
  end
  if lo > hi then return 0, 1 end
  return lo, hi
end

--- Renders a chart. spec: {title, x_label, y_label, series = {{name, points =
-- {{x, y}, ...}, color}}, y2_label, series2 = {...} (right axis), width,
-- height, y_min (default 0)}. Returns the SVG text.
function M.chart(spec)
  local W, Hh = spec.width or 900, spec.height or 420
  local left, right, top, bottom = 80, spec.series2 and 80 or 30, 50, 60
  local pw, ph = W - left - right, Hh - top - bottom
  local all = {}
  for _, s in ipairs(spec.series) do all[#all + 1] = s end
  for _, s in ipairs(spec.series2 or {}) do all[#all + 1] = s end

  local xlo, xhi = extent(all, 1)
  local xt, xstep = M.ticks(xlo, xhi, 8)
  xlo, xhi = min(xlo, xt[1] or xlo), max(xhi, xt[#xt] or xhi)

  local function yaxis(series)
    local lo, hi = extent(series, 2)
    if spec.y_min ~= false then lo = min(0, lo) end
    if hi == lo then hi = lo + 1 end
    local t, step = M.ticks(lo, hi, 6)
    -- the axis always covers the data: one more tick past the top if needed
    while #t == 0 or t[#t] < hi do t[#t + 1] = (t[#t] or lo) + step end
    while t[1] > lo do table.insert(t, 1, t[1] - step) end
    return t[1], t[#t], t, step
  end
  local ylo, yhi, yt, ystep = yaxis(spec.series)
  local y2lo, y2hi, y2t, y2step
  if spec.series2 then y2lo, y2hi, y2t, y2step = yaxis(spec.series2) end

  local function px(x) return left + (x - xlo) / (xhi - xlo) * pw end
  local function py(y, lo, hi) return top + ph - (y - lo) / (hi - lo) * ph end

  local o = {}
  local function add(...) o[#o + 1] = format(...) end
  add('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">', W, Hh, W, Hh)
  add('<rect width="%d" height="%d" fill="white"/>', W, Hh)
  if spec.title then add('<text x="%d" y="24" font-size="16" text-anchor="middle">%s</text>', W / 2, esc(spec.title)) end
  -- grid and ticks
  for _, v in ipairs(xt) do
    local x = px(v)
    add('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e5e5e5"/>', x, top, x, top + ph)
    add('<text x="%.1f" y="%d" text-anchor="middle">%s</text>', x, top + ph + 16, label(v, xstep))
  end
  for _, v in ipairs(yt) do
    local y = py(v, ylo, yhi)
    add('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e5e5e5"/>', left, y, left + pw, y)
    add('<text x="%d" y="%.1f" text-anchor="end">%s</text>', left - 6, y + 4, label(v, ystep))
  end
  if y2t then
    for _, v in ipairs(y2t) do
      add('<text x="%d" y="%.1f" text-anchor="start">%s</text>', left + pw + 6, py(v, y2lo, y2hi) + 4, label(v, y2step))
    end
  end
  add('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#333"/>', left, top, pw, ph)
  -- axis labels
  add('<text x="%d" y="%d" text-anchor="middle">%s</text>', left + pw / 2, Hh - 18, esc(spec.x_label or ""))
  add('<text x="18" y="%d" text-anchor="middle" transform="rotate(-90 18 %d)">%s</text>', top + ph / 2, top + ph / 2, esc(spec.y_label or ""))
  if spec.series2 then
    add('<text x="%d" y="%d" text-anchor="middle" transform="rotate(90 %d %d)">%s</text>', W - 18, top + ph / 2, W - 18, top + ph / 2, esc(spec.y2_label or ""))
  end
  -- lines, clipped to the plot area
  -- ids unique per chart: many charts may share one HTML page
  clip_n = clip_n + 1
  local clip = "plot" .. clip_n
  add('<clipPath id="%s"><rect x="%d" y="%d" width="%d" height="%d"/></clipPath>', clip, left, top, pw, ph)
  local idx = 0
  local legend = {}
  local function draw(series, lo, hi, dashed)
    for _, s in ipairs(series) do
      idx = idx + 1
      local color = s.color or PALETTE[(idx - 1) % #PALETTE + 1]
      local pts = {}
      for _, p in ipairs(s.points) do
        if p[2] == p[2] then pts[#pts + 1] = format("%.1f,%.1f", px(p[1]), py(p[2], lo, hi)) end
      end
      if #pts > 0 then
        add('<polyline clip-path="url(#%s)" fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>', clip, color, dashed and ' stroke-dasharray="6 3"' or "", table.concat(pts, " "))
      end
      legend[#legend + 1] = { name = s.name .. (dashed and " (right axis)" or ""), color = color, dashed = dashed }
    end
  end
  draw(spec.series, ylo, yhi, false)
  if spec.series2 then draw(spec.series2, y2lo, y2hi, true) end
  -- legend, top left inside the plot
  local lx, ly = left + 10, top + 10
  add('<rect x="%d" y="%d" width="%d" height="%d" fill="white" fill-opacity="0.85" stroke="#999"/>', lx, ly, 240, 18 * #legend + 8)
  for i, l in ipairs(legend) do
    local y = ly + 4 + 18 * (i - 1) + 9
    add('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>', lx + 8, y, lx + 32, y, l.color, l.dashed and ' stroke-dasharray="6 3"' or "")
    add('<text x="%d" y="%d">%s</text>', lx + 40, y + 4, esc(l.name))
  end
  add("</svg>")
  return table.concat(o, "\n")
end

return M
