-- `require "ludx.core"` from a stock luajit after the offline luarocks build.
local H = require "helper"
local process = require "ludx.process"
local run = H.run

local function sh(cmd, args, env)
  local p = assert(process.spawn(cmd, args, { env = env }))
  local out = {}
  while true do
    local chunk = p:read(600000)
    if not chunk then break end
    out[#out + 1] = chunk
  end
  local status = p:wait(600000)
  local err = p:stderr()
  p:close()
  return table.concat(out), err, status
end

describe("the rockspec", function()
  it("builds with `luarocks --lua-version=5.1 make` offline, and luajit can require ludx.core", run(function()
    local tree = os.tmpname()
    os.remove(tree)
    -- no network: an unreachable proxy makes any download fail loudly
    local offline = { http_proxy = "http://127.0.0.1:9", https_proxy = "http://127.0.0.1:9" }
    local out, err, status = sh("luarocks", { "--lua-version=5.1", "--tree=" .. tree, "make", "ludx-scm-1.rockspec" }, offline)
    assert.are.equal(0, status, out .. err)
    local check = "local core = require 'ludx.core'; local ludx = require 'ludx'; " ..
      "print(package.searchpath('ludx.core', package.cpath)); print(ludx.run(function() ludx.sleep(1) return 'ok' end))"
    out, err, status = sh("luajit", { "-e", check }, {
      LUA_CPATH = tree .. "/lib/lua/5.1/?.so",
      LUA_PATH = tree .. "/share/lua/5.1/?.lua;" .. tree .. "/share/lua/5.1/?/init.lua",
    })
    os.execute("rm -rf '" .. tree .. "' build.luarocks")
    assert.are.equal(0, status, err)
    assert.matches(tree .. "/lib/lua/5.1/ludx/core.so", out, 1, true)
    assert.matches("ok", out)
  end, 600000))
end)
