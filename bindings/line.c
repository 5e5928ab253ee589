// Line input for the REPL (an editor on a terminal, plain lines otherwise).
#include <stdlib.h>

#include "../runtime/lineedit.h"
#include "bind.h"

#define LINE_COMPLETE_MAX_START (1 << 20)

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

// core.line_cancel() -> true when it dropped the line at the prompt, false
// when no prompt shows
static int
l_cancel (lua_State *L) {
  lua_pushboolean(L, ludx_line_cancel());
  return 1;
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

// core.line_completion() -> the text before the cursor when Tab asked for
// completions, else nil
static int
l_completion (lua_State *L) {
  char *text;
  size_t len;
  int r = ludx_line_completion(&text, &len);
  if (r < 0)
    return ludx_push_uv_error(L, r);
  if (r == 0) {
    lua_pushnil(L);
    return 1;
  }
  lua_pushlstring(L, text, len);
  free(text);
  return 1;
}

#define COMPLETE_MAX 4096 // candidates passed to the editor at most

// core.line_complete(start, {candidate, ...}): start is the 0-based byte
// offset where the completed word begins
static int
l_complete (lua_State *L) {
  size_t start = (size_t) ludx_check_integer(L, 1, "start", 0, LINE_COMPLETE_MAX_START);
  luaL_checktype(L, 2, LUA_TTABLE);
  size_t n = lua_objlen(L, 2);
  if (n > COMPLETE_MAX)
    n = COMPLETE_MAX;
  const char **items = malloc((n ? n : 1) * sizeof(*items));
  size_t *lens = malloc((n ? n : 1) * sizeof(*lens));
  if (items == NULL || lens == NULL) {
    free(items);
    free(lens);
    return ludx_push_uv_error(L, UV_ENOMEM);
  }
  size_t k = 0;
  for (size_t i = 1; i <= n; i++) {
    lua_rawgeti(L, 2, (int) i);
    if (lua_type(L, -1) == LUA_TSTRING) {
      items[k] = lua_tolstring(L, -1, &lens[k]);
      k++;
    }
    lua_pop(L, 1); // the strings stay alive in the table
  }
  ludx_line_complete(start, items, lens, k);
  free(items);
  free(lens);
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
      {"line_completion", l_completion},
      {"line_complete", l_complete},
      {NULL, NULL}};
  ludx_set_funcs(L, funcs);
}
