// Child processes: spawn with pipes or a pseudo-terminal, pull their output.
#include <stdlib.h>
#include <string.h>

#include "../runtime/process.h"
#include "bind.h"

#define LUDX_PROC_MT "ludx.process"

int
ludx_signal_number (lua_State *L, int idx);

// Reads t[1..n] (strings) into a NULL-terminated array; frees on error paths
// are the caller's (free_strings).
static char **
string_list (lua_State *L, int idx, const char *name) {
  size_t n = lua_objlen(L, idx);
  char **list = calloc(n + 1, sizeof(char *));
  if (list == NULL)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    lua_rawgeti(L, idx, (int) i + 1);
    if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER) {
      for (size_t j = 0; j < i; j++)
        free(list[j]);
      free(list);
      luaL_error(L, "bad option '%s' to 'spawn' (item %d is a %s, string expected)", name, (int) i + 1, luaL_typename(L, -1));
    }
    list[i] = strdup(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  return list;
}

static void
free_strings (char **list) {
  if (list == NULL)
    return;
  for (char **p = list; *p; p++)
    free(*p);
  free(list);
}

// core.spawn{file=, args={...}, env={"K=V",...}, cwd=, pty=, rows=, cols=, stderr="pipe"|"inherit", ref=}
static int
l_spawn (lua_State *L) {
  ludx_check_table(L, 1, "options");
  ludx_proc_opts_t o;
  memset(&o, 0, sizeof(o));
  o.file = ludx_field_string(L, 1, "file", NULL);
  if (o.file == NULL)
    return luaL_error(L, "bad option 'file' to 'spawn' (string expected, got nil)");
  o.cwd = ludx_field_string(L, 1, "cwd", NULL);
  o.pty = ludx_field_boolean(L, 1, "pty", 0);
  o.rows = (int) ludx_field_integer(L, 1, "rows", 24);
  o.cols = (int) ludx_field_integer(L, 1, "cols", 80);
  const char *se = ludx_field_string(L, 1, "stderr", "pipe");
  if (strcmp(se, "inherit") == 0)
    o.stderr_mode = LUDX_PROC_STDERR_INHERIT;
  else if (strcmp(se, "pipe") == 0)
    o.stderr_mode = LUDX_PROC_STDERR_PIPE;
  else
    return luaL_error(L, "bad option 'stderr' to 'spawn' ('pipe' or 'inherit' expected, got '%s')", se);
  uint32_t ref = (uint32_t) ludx_field_integer(L, 1, "ref", 0);

  char **args = NULL, **env = NULL;
  lua_getfield(L, 1, "args");
  if (lua_istable(L, -1))
    args = string_list(L, lua_gettop(L), "args");
  lua_pop(L, 1);
  if (args == NULL || args[0] == NULL) {
    free_strings(args);
    args = calloc(2, sizeof(char *));
    if (args == NULL)
      return ludx_push_uv_error(L, UV_ENOMEM);
    args[0] = strdup(o.file);
  }
  lua_getfield(L, 1, "env");
  if (lua_istable(L, -1))
    env = string_list(L, lua_gettop(L), "env");
  lua_pop(L, 1);
  o.args = args;
  o.env = env;

  ludx_proc_t *p;
  int err = ludx_proc_spawn(ludx_bind_rt(L), &o, ref, &p);
  free_strings(args);
  free_strings(env);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  ludx_new_object(L, LUDX_PROC_MT, p);
  return 1;
}

static ludx_proc_t *
check_proc (lua_State *L) {
  return ludx_check_open(L, 1, LUDX_PROC_MT, "process");
}

static int
l_write (lua_State *L) {
  ludx_proc_t *p = check_proc(L);
  size_t len;
  const char *s = ludx_check_lstring(L, 2, "data", &len);
  int err = ludx_proc_write(p, s, len);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

static int
l_close_stdin (lua_State *L) {
  int err = ludx_proc_close_stdin(check_proc(L));
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

// proc:take(which) -> all buffered output of stdout (1) or stderr (2), eof
static int
l_take (lua_State *L) {
  ludx_proc_t *p = check_proc(L);
  int which = (int) ludx_opt_integer(L, 2, "which", 1, 1, 2);
  size_t len;
  int eof;
  const char *data = ludx_proc_output(p, which, &len, &eof);
  lua_pushlstring(L, len ? data : "", len);
  ludx_proc_consume(p, which, len);
  lua_pushboolean(L, eof);
  return 2;
}

static int
l_kill (lua_State *L) {
  ludx_proc_t *p = check_proc(L);
  int sig = lua_isnoneornil(L, 2) ? 15 : ludx_signal_number(L, 2);
  int err = ludx_proc_kill(p, sig);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

static int
l_pid (lua_State *L) {
  lua_pushinteger(L, ludx_proc_pid(check_proc(L)));
  return 1;
}

// proc:status() -> exit status, terminating signal; nil while running
static int
l_status (lua_State *L) {
  int64_t status;
  int sig;
  if (!ludx_proc_exited(check_proc(L), &status, &sig))
    return 0;
  lua_pushinteger(L, (lua_Integer) status);
  lua_pushinteger(L, sig);
  return 2;
}

static int
l_resize (lua_State *L) {
  ludx_proc_t *p = check_proc(L);
  int rows = (int) ludx_check_integer(L, 2, "rows", 1, 10000);
  int cols = (int) ludx_check_integer(L, 3, "cols", 1, 10000);
  int err = ludx_proc_resize(p, rows, cols);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

static int
l_release (lua_State *L) {
  void **ud = luaL_checkudata(L, 1, LUDX_PROC_MT);
  if (*ud)
    ludx_proc_release(*ud);
  *ud = NULL;
  return 0;
}

extern char **environ;

// core.environ() -> {name = value, ...}
static int
l_environ (lua_State *L) {
  lua_newtable(L);
  for (char **e = environ; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    if (eq == NULL)
      continue;
    lua_pushlstring(L, *e, eq - *e);
    lua_pushstring(L, eq + 1);
    lua_rawset(L, -3);
  }
  return 1;
}

void
ludx_bind_process (lua_State *L) {
  static const luaL_Reg methods[] = {
      {"write", l_write},
      {"close_stdin", l_close_stdin},
      {"take", l_take},
      {"kill", l_kill},
      {"pid", l_pid},
      {"status", l_status},
      {"resize", l_resize},
      {"release", l_release},
      {"__gc", l_release},
      {NULL, NULL}};
  ludx_new_class(L, LUDX_PROC_MT, methods);
  static const luaL_Reg funcs[] = {{"spawn", l_spawn}, {"environ", l_environ}, {NULL, NULL}};
  ludx_set_funcs(L, funcs);
}
