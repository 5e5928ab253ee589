-- The ludx demo: tasks over the libuv loop. Run it with `make run`.
local ludx = require "ludx"

ludx.run(function()
  print(string.format("ludx %s on LuaJIT %s, libuv %s, libsodium %s",
    ludx.version().ludx, ludx.version().luajit, ludx.version().libuv, ludx.version().libsodium))

  -- three named tasks, each sleeping on its own timer
  local results = ludx.queue()
  for i, delay in ipairs({ 30, 10, 20 }) do
    ludx.spawn("worker-" .. i, function()
      local t0 = ludx.now()
      ludx.sleep(delay)
      results:put(string.format("worker-%d slept %d ms (measured %.2f ms)", i, delay, ludx.now() - t0))
    end)
  end
  for _ = 1, 3 do print(results:get(1000)) end

  -- a wait with a timeout
  print("queue get with a 5 ms timeout:", results:get(5))
  print("done")
end)
