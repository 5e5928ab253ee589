// Line input for the REPL (an editor on a terminal, plain lines otherwise).
#include <stdlib.h>

#include "../runtime/lineedit.h"
#include "bind.h"

static int
l_start (lua_State *L) {
  uint32_t ref = ludx_check_ref(L, 1);
  const char *history = ludx_opt_lstring(L, 2, "history", NULL, NULL);
  int r = ludx_line_start(ludx_bind_rt(L), ref, history);
  if (r < 0)
    return ludx_push_uv_error(L, r);
  lua_pushboolean(L, r == 1);
  return 1;
}

static int
l_prompt (lua_State *L) {
  ludx_line_prompt(ludx_check_lstring(L, 1, "prompt", NULL));
  return 0;
}

static int
l_pause (lua_State *L) {
  (void) L;
  ludx_line_pause();
  return 0;
}

// core.line_take() -> line | false (none yet) | true (Ctrl-C) | nil (EOF)
static int
l_take (lua_State *L) {
  char *line;
  size_t len;
  int r = ludx_line_take(&line, &len);
  if (r == 1) {
    lua_pushlstring(L, line, len);
    free(line);
  } else if (r == 0 || r == 2) {
    lua_pushboolean(L, r == 2);
  } else {
    lua_pushnil(L);
  }
  return 1;
}

static int
l_write (lua_State *L) {
  size_t len;
  const char *s = ludx_check_lstring(L, 1, "text", &len);
  ludx_line_write(s, len);
  return 0;
}

static int
l_cancel (lua_State *L) {
  (void) L;
  ludx_line_cancel();
  return 0;
}

static int
l_history (lua_State *L) {
  ludx_line_add_history(ludx_check_lstring(L, 1, "line", NULL));
  return 0;
}

static int
l_stop (lua_State *L) {
  (void) L;
  ludx_line_stop();
  return 0;
}

void
ludx_bind_line (lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"line_start", l_start},
      {"line_prompt", l_prompt},
      {"line_pause", l_pause},
      {"line_take", l_take},
      {"line_write", l_write},
      {"line_cancel", l_cancel},
      {"line_history", l_history},
      {"line_stop", l_stop},
      {NULL, NULL}};
  ludx_set_funcs(L, funcs);
}
