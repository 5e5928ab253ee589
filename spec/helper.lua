-- Shared by the specs: run a test body as a task on the ludx loop, with a
-- timeout that cancels everything it started.
local ludx = require "ludx"

local H = {}

H.root = os.getenv("LUDX_ROOT") or "."
H.build = os.getenv("LUDX_BUILD") or "build"
H.ludx_bin = H.build .. "/ludx"

-- Tasks that outlive their cancel would hold ludx.run, and so the spec
-- file, until its 600 s timeout, with nothing said: they are named here,
-- with the test body's stack; what the file opened is closed (children
-- killed, as at the end of ludx.run) and the process ends. The file's
-- later tests do not run: it fails as a whole, named by the body's place.
local function stuck(what, body, fn)
  local info = debug.getinfo(fn, "S")
  what = what .. " (test at " .. info.short_src .. ":" .. info.linedefined .. ")"
  local lines = { "spec/helper: " .. what .. "; live tasks:" }
  for _, t in ipairs(ludx.tasks()) do
    lines[#lines + 1] = "  " .. t.name .. " (" .. tostring(t.waiting or t.state) .. ")"
  end
  if body.co and body.state ~= "dead" then lines[#lines + 1] = debug.traceback(body.co, "the test body:") end
  io.stdout:write("not ok - ", what, "\n")
  io.stderr:write(table.concat(lines, "\n"), "\n")
  io.stdout:flush()
  io.stderr:flush()
  require("ludx.dispatch").close_tracked()
  os.exit(1)
end

--- Wraps a test body: it runs as the main task of ludx.run; after timeout ms
-- every task still running is cancelled and the test fails.
function H.run(fn, timeout)
  timeout = timeout or 20000
  return function()
    local timed_out = false
    local pending -- the next sweep's timer (see below)
    local ok, msg = ludx.run(function()
      local watchdog = ludx.after(timeout, function()
        timed_out = true
        -- main goes on: it sweeps what is left (below)
        for _, t in ipairs(ludx.tasks()) do
          if t.name ~= "main" then ludx.cancel(t.id, "test timed out after " .. timeout .. " ms") end
        end
      end)
      local body = ludx.spawn("test", fn)
      body.quiet = true
      local r = { body:join(timeout + 30000) }
      if body.state ~= "dead" then stuck("the test body did not end 30 s after its cancel at " .. timeout .. " ms", body, fn) end
      watchdog:cancel()
      -- whatever the body left running is stopped, and so is what starts
      -- later (a server's task for a late packet): swept every 200 ms while
      -- any is left, so the loop never sleeps on sockets with no timer; a
      -- task that survives 10 s of sweeps fails the test, named with its wait
      local sweeps = 0
      local function sweep()
        local left = {}
        for _, t in ipairs(ludx.tasks()) do
          if t.name ~= "main" then
            left[#left + 1] = t
            ludx.cancel(t.id, "test ended")
          end
        end
        if #left == 0 then return end
        sweeps = sweeps + 1
        if sweeps > 50 then
          local names = {}
          for _, t in ipairs(left) do names[#names + 1] = t.name .. " (" .. tostring(t.waiting or t.state) .. ")" end
          error("tasks still running 10 s after the test ended: " .. table.concat(names, ", "), 0)
        end
        pending = ludx.after(200, sweep)
      end
      sweep()
      if body.error ~= nil then
        if type(body.error) == "table" and not ludx.is_cancelled(body.error) then error(body.error, 0) end
        error(tostring(body.error) .. "\n" .. (body.traceback or ""), 0)
      end
      return unpack(r)
    end)
    -- the loop ended between two sweeps: the next run must not see it
    if pending then pending:cancel() end
    if timed_out then error("test timed out after " .. timeout .. " ms", 0) end
    if ok == nil and msg then error(msg, 0) end
  end
end

--- Runs the ludx executable with args; returns stdout, stderr, status.
function H.ludx(args, opts)
  local process = require "ludx.process"
  local p = assert(process.spawn(H.ludx_bin, args, opts))
  local out = {}
  while true do
    local chunk = p:read(opts and opts.timeout or 20000)
    if not chunk then break end
    out[#out + 1] = chunk
  end
  local status, sig = p:wait(20000)
  local err = p:stderr()
  p:close()
  return table.concat(out), err, status, sig
end

--- A new empty directory under the system's temporary folder.
function H.tmpdir()
  local fs = require "ludx.fs"
  local d = os.tmpname()
  os.remove(d)
  assert(fs.mkdirp(d))
  return d
end

--- Writes data to path, making its directories.
function H.write_file(path, data)
  local fs = require "ludx.fs"
  assert(fs.mkdirp(path:match("^(.*)/[^/]*$") or "."))
  local f = assert(io.open(path, "wb"))
  f:write(data)
  f:close()
end

--- The bytes of the file at path, or nil when there is none.
function H.read_file(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

--- How many peer records of key a DHT lookup from node finds (announced
-- and not yet removed).
function H.peer_records(node, key, timeout)
  local n = 0
  for r in assert(node:find_peer(key, timeout or 30000)) do
    if r.peer then n = n + 1 end
  end
  return n
end

return H
