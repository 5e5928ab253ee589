// core.limiter: the transfer policies of udx (udx/src/policy.c) for Lua.
//
//   local l = core.limiter(rate, burst)   -- bytes/s (0 = unlimited), bytes (0 = 20 ms)
//   l:set(rate, burst)
//   l:add(stream_id, weight)              -- a udx stream by its local id
//   l:remove(stream_id)
//   l:stats() -> {rate, burst, members, active, bytes, waits}
//
// Lua sets the numbers once; the send path in C applies them per packet.
#include "udx_bind.h"

#define LIMITER_MT "ludx.limiter"

static udx_limiter_t *
check_limiter (lua_State *L) {
  return ludx_check_open(L, 1, LIMITER_MT, "limiter");
}

static uint64_t
check_rate (lua_State *L, int idx, const char *name) {
  lua_Number n = lua_isnoneornil(L, idx) ? 0 : ludx_check_number(L, idx, name);
  if (n < 0 || n != n || n > 1e15)
    luaL_error(L, "bad argument '%s' (0..1e15 bytes expected)", name);
  return (uint64_t) n;
}

static int
l_limiter (lua_State *L) {
  uint64_t rate = check_rate(L, 1, "rate");
  uint64_t burst = check_rate(L, 2, "burst");
  udx_limiter_t *l;
  int err = udx_limiter_init(&l, rate, burst);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  ludx_new_object(L, LIMITER_MT, l);
  return 1;
}

static int
l_set (lua_State *L) {
  udx_limiter_t *l = check_limiter(L);
  int err = udx_limiter_set_rate(l, check_rate(L, 2, "rate"), check_rate(L, 3, "burst"));
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

static int
find_stream (lua_State *L, int idx, udx_stream_t **out) {
  uint32_t id = (uint32_t) ludx_check_integer(L, idx, "stream_id", 0, UINT32_MAX);
  return udx_stream_lookup(ludx_udx_instance(L), id, out);
}

static int
l_add (lua_State *L) {
  udx_limiter_t *l = check_limiter(L);
  uint32_t weight = (uint32_t) ludx_opt_integer(L, 3, "weight", 1, 1, 1000000);
  udx_stream_t *s;
  int err = find_stream(L, 2, &s);
  if (err == 0)
    err = udx_limiter_add(l, s, weight);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

static int
l_remove (lua_State *L) {
  udx_limiter_t *l = check_limiter(L);
  udx_stream_t *s;
  int err = find_stream(L, 2, &s);
  if (err == 0)
    err = udx_limiter_remove(l, s);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

static int
l_stats (lua_State *L) {
  udx_limiter_stats_t st;
  udx_limiter_get_stats(check_limiter(L), &st);
  lua_createtable(L, 0, 6);
  lua_pushnumber(L, (lua_Number) st.rate);
  lua_setfield(L, -2, "rate");
  lua_pushnumber(L, (lua_Number) st.burst);
  lua_setfield(L, -2, "burst");
  lua_pushinteger(L, st.members);
  lua_setfield(L, -2, "members");
  lua_pushinteger(L, st.active);
  lua_setfield(L, -2, "active");
  lua_pushnumber(L, (lua_Number) st.bytes);
  lua_setfield(L, -2, "bytes");
  lua_pushnumber(L, (lua_Number) st.waits);
  lua_setfield(L, -2, "waits");
  return 1;
}

static int
l_gc (lua_State *L) {
  void **ud = luaL_checkudata(L, 1, LIMITER_MT);
  if (*ud)
    udx_limiter_release(*ud);
  *ud = NULL;
  return 0;
}

void
ludx_bind_policy (lua_State *L) {
  static const luaL_Reg methods[] = {
      {"set", l_set},
      {"add", l_add},
      {"remove", l_remove},
      {"stats", l_stats},
      {"__gc", l_gc},
      {NULL, NULL},
  };
  static const luaL_Reg funcs[] = {
      {"limiter", l_limiter},
      {NULL, NULL},
  };
  ludx_new_class(L, LIMITER_MT, methods);
  ludx_set_funcs(L, funcs);
}
