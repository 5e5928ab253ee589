// luaopen_ludx_core: `require "ludx.core"` from a stock LuaJIT, and preloaded
// in the ludx executable. Each area adds its functions to one table.
#include "bind.h"

// Module tables alive: a reload (busted unloads modules between spec files)
// makes a second one, and the first one's sentinel must not shut down the
// runtime the second one is using: the last one does.
static int live_modules = 0;

static int
l_sentinel_gc (lua_State *L) {
  (void) L;
  if (--live_modules > 0)
    return 0;
  ludx_rt_t *rt = ludx_rt_default();
  if (rt)
    ludx_rt_shutdown(rt);
  return 0;
}

LUALIB_API int
luaopen_ludx_core (lua_State *L) {
  ludx_bind_rt(L);
  lua_newtable(L);
  ludx_bind_loop(L);
  ludx_bind_signal(L);
  ludx_bind_process(L);
  ludx_bind_line(L);
  ludx_bind_dns(L);
  ludx_bind_udx(L);
  ludx_bind_udx_stream(L);
  ludx_bind_testdata(L);
  ludx_bind_crypto(L);
  lua_getfield(L, -1, "crypto");
  ludx_bind_framer(L);
  lua_pop(L, 1);
  ludx_bind_tcp(L);
  ludx_bind_fs(L);
  ludx_bind_policy(L);
  ludx_bind_event_kinds(L); // last: every area has registered its kinds
  // When the state closes, every handle still open is closed and the loop
  // runs until they are gone.
  live_modules++;
  lua_newuserdata(L, 1);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, l_sentinel_gc);
  lua_setfield(L, -2, "__gc");
  lua_setmetatable(L, -2);
  lua_setfield(L, -2, "_sentinel");
  return 1;
}
