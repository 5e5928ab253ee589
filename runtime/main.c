// The ludx executable: LuaJIT with ludx.core preloaded. Everything past
// finding the Lua modules happens in lua/ludx/cli.lua.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <uv.h>

int
luaopen_ludx_core (lua_State *L);

static int
file_exists (const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

// Prepends <dir>/?.lua;<dir>/?/init.lua to package.path.
static void
add_lua_dir (lua_State *L, const char *dir) {
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "path");
  lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
  lua_setfield(L, -3, "path");
  lua_pop(L, 2);
}

// The modules: $LUDX_LUA_DIR, else next to an installed binary
// (<prefix>/share/lua/5.1), else the source tree this binary was built from.
static void
find_modules (lua_State *L) {
  char path[4096];
  const char *env = getenv("LUDX_LUA_DIR");
  if (env && *env) {
    add_lua_dir(L, env);
    return;
  }
  size_t size = sizeof(path);
  if (uv_exepath(path, &size) == 0) {
    char *slash = strrchr(path, '/');
    if (slash) {
      *slash = 0;
      char candidate[4200];
      snprintf(candidate, sizeof(candidate), "%s/../share/lua/5.1/ludx/init.lua", path);
      if (file_exists(candidate)) {
        snprintf(candidate, sizeof(candidate), "%s/../share/lua/5.1", path);
        add_lua_dir(L, candidate);
        return;
      }
    }
  }
  add_lua_dir(L, LUDX_SOURCE_LUA_DIR);
}

static int
traceback (lua_State *L) {
  const char *msg = lua_tostring(L, 1);
  luaL_traceback(L, L, msg ? msg : "(error object is not a string)", 1);
  return 1;
}

static int
run_cli (lua_State *L) {
  int argc = (int) lua_tointeger(L, 1);
  char **argv = lua_touserdata(L, 2);
  lua_settop(L, 0);
  luaL_openlibs(L);
  lua_getglobal(L, "package");
  lua_getfield(L, -1, "preload");
  lua_pushcfunction(L, luaopen_ludx_core);
  lua_setfield(L, -2, "ludx.core");
  lua_pop(L, 2);
  find_modules(L);

  lua_getglobal(L, "require");
  lua_pushliteral(L, "ludx.cli");
  lua_call(L, 1, 1);
  lua_getfield(L, -1, "main");
  lua_createtable(L, argc, 1);
  for (int i = 0; i < argc; i++) {
    lua_pushstring(L, argv[i]);
    lua_rawseti(L, -2, i);
  }
  lua_call(L, 1, 1);
  return 1;
}

int
main (int argc, char **argv) {
  lua_State *L = luaL_newstate();
  if (L == NULL) {
    fprintf(stderr, "ludx: cannot create a Lua state\n");
    return 1;
  }
  lua_pushcfunction(L, traceback);
  lua_pushcfunction(L, run_cli);
  lua_pushinteger(L, argc);
  lua_pushlightuserdata(L, argv);
  int status = 1;
  if (lua_pcall(L, 2, 1, 1) != 0) {
    fprintf(stderr, "ludx: %s\n", lua_tostring(L, -1));
  } else {
    status = (int) luaL_optinteger(L, -1, 0);
  }
  lua_close(L);
  return status;
}
