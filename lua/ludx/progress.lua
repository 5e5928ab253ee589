-- A progress display for transfers: bytes, rate, ETA.
--
--   local progress = require "ludx.progress"
--   local p = progress.new({ label = "fetch" })   -- writes to io.stdout
--   p:start(total_bytes, already_have)
--   p:update(n)                                   -- n more bytes arrived
--   p:finish()                                    -- the last line, with totals
--
-- On a terminal it redraws one bar in place at most 10 times a second;
-- otherwise (a pipe, a file, a test) it prints a plain line about once a
-- second. Sizes are decimal: 1 MB = 1,000,000 bytes.
local ludx = require "ludx"
local ffi = require "ffi"

pcall(ffi.cdef, "int isatty(int fd);")

local M = {}

--- True when the file descriptor (default 1, stdout) is a terminal.
function M.isatty(fd)
  local ok, r = pcall(function() return ffi.C.isatty(fd or 1) end)
  return ok and r == 1
end

--- "12.3 MB" style sizes.
function M.bytes(n)
  if n < 1e3 then return string.format("%d B", n) end
  if n < 1e6 then return string.format("%.1f kB", n / 1e3) end
  if n < 1e9 then return string.format("%.1f MB", n / 1e6) end
  return string.format("%.2f GB", n / 1e9)
end

--- "1:05" style durations (seconds in, rounded up).
function M.duration(s)
  if s ~= s or s == math.huge then return "?" end
  s = math.ceil(s)
  if s >= 3600 then return string.format("%d:%02d:%02d", s / 3600, (s % 3600) / 60, s % 60) end
  return string.format("%d:%02d", s / 60, s % 60)
end

local Progress = {}
Progress.__index = Progress

--- opts: label, out (a file, default io.stdout), tty (default: is out's
-- fd a terminal; only stdout and stderr are looked at), width (default
-- $COLUMNS or 80), interval (ms between plain lines, default 1000).
function M.new(opts)
  opts = opts or {}
  local out = opts.out or io.stdout
  local tty = opts.tty
  if tty == nil then
    tty = (out == io.stdout and M.isatty(1)) or (out == io.stderr and M.isatty(2)) or false
  end
  return setmetatable({
    label = opts.label, out = out, tty = tty,
    width = opts.width or tonumber(os.getenv("COLUMNS") or "") or 80,
    interval = opts.interval or (tty and 100 or 1000),
    total = 0, have = 0, done = 0, rate = 0,
  }, Progress)
end

--- Starts the clock: total bytes, and how many are already there (resumed).
function Progress:start(total, have)
  self.total, self.have, self.done = total or 0, have or 0, 0
  self.t0 = ludx.now()
  self.t_end = nil
  self.last_draw = -math.huge
  self.win_t, self.win_bytes = self.t0, 0
  self.rate = 0
  self:draw(true)
end

function Progress:update(n)
  self.done = self.done + n
  self.win_bytes = self.win_bytes + n
  local now = ludx.now()
  -- the rate: a moving average over windows of at least 250 ms
  local dt = now - self.win_t
  if dt >= 250 then
    local r = self.win_bytes / (dt / 1000)
    self.rate = self.rate == 0 and r or (0.7 * self.rate + 0.3 * r)
    self.win_t, self.win_bytes = now, 0
  end
  if now - self.last_draw >= self.interval then self:draw() end
end

--- The numbers: {bytes, total, rate (bytes/s over the whole run), eta, seconds}.
function Progress:state()
  local now = self.t_end or ludx.now()
  local secs = math.max(1e-3, (now - (self.t0 or now)) / 1000)
  local got = self.have + self.done
  local rate = self.rate > 0 and self.rate or self.done / secs
  local eta = rate > 0 and (self.total - got) / rate or math.huge
  return { bytes = got, total = self.total, rate = rate, average = self.done / secs, eta = eta, seconds = secs }
end

function Progress:line()
  local s = self:state()
  local pct = self.total > 0 and math.floor(100 * s.bytes / self.total) or 100
  local label = self.label and (self.label .. " ") or ""
  local nums = string.format("%3d%% %s / %s  %s/s  ETA %s", pct, M.bytes(s.bytes), M.bytes(self.total), M.bytes(s.rate), M.duration(s.eta))
  if not self.tty then return label .. nums end
  -- the bar keeps one width while the numbers change length
  local room = self.width - #label - 52
  if room < 10 then return label .. nums end
  nums = string.format("%-48s", nums)
  local fill = self.total > 0 and math.floor(room * s.bytes / self.total) or room
  return label .. "[" .. string.rep("#", fill) .. string.rep(".", room - fill) .. "] " .. nums
end

function Progress:draw(force)
  local now = ludx.now()
  if not force and now - self.last_draw < self.interval then return end
  self.last_draw = now
  if self.tty then
    self.out:write("\r", self:line(), "\027[K")
  else
    self.out:write(self:line(), "\n")
  end
  self.out:flush()
end

--- The closing line: totals, average rate and time (state() keeps them).
function Progress:finish()
  self.t_end = ludx.now()
  local s = self:state()
  if self.tty then self.out:write("\r\027[K") end
  local label = self.label and (self.label .. " ") or ""
  self.out:write(string.format("%sdone: %s in %.2f s, %s/s\n", label, M.bytes(self.done), s.seconds, M.bytes(s.average)))
  self.out:flush()
end

--- Ends the bar's line without a summary (on errors).
function Progress:stop()
  self.t_end = ludx.now()
  if self.tty then self.out:write("\n") end
  self.out:flush()
end

return M
