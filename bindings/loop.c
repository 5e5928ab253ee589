// The loop, the event ring, time, signals and interrupts.
#include <signal.h>
#include <string.h>
#include <sys/resource.h>

#include <luajit.h>
#include <sodium.h>

#include "bind.h"
#include "udx.h"

#define LUDX_SIGNAL_MT "ludx.signal"

static lua_State *interrupt_L = NULL;
static volatile int in_step = 0;
static volatile sig_atomic_t hook_pending = 0;
static int hook_fired = 0; // the hook stopped a task since the last clear

// core.step(timeout_ms) -> pending_events, alive
static int
l_step (lua_State *L) {
  double timeout = luaL_optnumber(L, 1, -1);
  ludx_rt_t *rt = ludx_bind_rt(L);
  int alive = 0;
  in_step = 1;
  size_t n = ludx_rt_step(rt, timeout, &alive);
  in_step = 0;
  lua_pushinteger(L, (lua_Integer) n);
  lua_pushboolean(L, alive);
  return 2;
}

// core.events() -> pointer to ludx_event_t[n], n: the batch of this turn.
static int
l_events (lua_State *L) {
  ludx_rt_t *rt = ludx_bind_rt(L);
  size_t n;
  const ludx_event_t *ev = ludx_ring_swap(&rt->ring, &n);
  lua_pushlightuserdata(L, (void *) ev);
  lua_pushinteger(L, (lua_Integer) n);
  return 2;
}

static int
l_now (lua_State *L) {
  lua_pushnumber(L, ludx_rt_now_ms(ludx_bind_rt(L)));
  return 1;
}

static int
l_getpid (lua_State *L) {
  lua_pushinteger(L, uv_os_getpid());
  return 1;
}

// core.exepath() -> the running executable's path
static int
l_exepath (lua_State *L) {
  char buf[4096];
  size_t size = sizeof(buf);
  if (uv_exepath(buf, &size) != 0)
    return 0;
  lua_pushlstring(L, buf, size);
  return 1;
}

// core.wallclock() -> milliseconds since the epoch (sub-millisecond)
static int
l_wallclock (lua_State *L) {
  uv_timeval64_t tv;
  if (uv_gettimeofday(&tv) != 0)
    return luaL_error(L, "gettimeofday failed");
  lua_pushnumber(L, (lua_Number) tv.tv_sec * 1000.0 + (lua_Number) tv.tv_usec / 1000.0);
  return 1;
}

static int
l_hrtime (lua_State *L) {
  lua_pushnumber(L, (lua_Number) uv_hrtime());
  return 1;
}

static int
l_version (lua_State *L) {
  lua_createtable(L, 0, 5);
  lua_pushstring(L, LUDX_VERSION);
  lua_setfield(L, -2, "ludx");
  lua_pushstring(L, LUAJIT_VERSION + sizeof("LuaJIT ") - 1);
  lua_setfield(L, -2, "luajit");
  lua_pushstring(L, uv_version_string());
  lua_setfield(L, -2, "libuv");
  lua_pushstring(L, sodium_version_string());
  lua_setfield(L, -2, "libsodium");
  lua_pushstring(L, udx_version_string());
  lua_setfield(L, -2, "udx");
  return 1;
}

static int
l_rusage (lua_State *L) {
  struct rusage ru;
  int who = lua_toboolean(L, 1) ? RUSAGE_CHILDREN : RUSAGE_SELF;
  if (getrusage(who, &ru) != 0)
    return ludx_push_uv_error(L, uv_translate_sys_error(errno));
  lua_createtable(L, 0, 3);
  lua_pushnumber(L, ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6);
  lua_setfield(L, -2, "utime");
  lua_pushnumber(L, ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
  lua_setfield(L, -2, "stime");
  lua_pushnumber(L, (lua_Number) ru.ru_maxrss * 1024);
  lua_setfield(L, -2, "maxrss");
  return 1;
}

static const struct {
  const char *name;
  int num;
} signal_names[] = {
    {"SIGINT", SIGINT}, {"SIGTERM", SIGTERM}, {"SIGHUP", SIGHUP}, {"SIGKILL", SIGKILL}, {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {"SIGWINCH", SIGWINCH}, {"SIGQUIT", SIGQUIT}, {"SIGSTOP", SIGSTOP}, {"SIGCONT", SIGCONT}, {NULL, 0}};

int
ludx_signal_number (lua_State *L, int idx) {
  if (lua_type(L, idx) == LUA_TNUMBER)
    return (int) ludx_check_integer(L, idx, "signal", 1, 64);
  const char *s = ludx_check_lstring(L, idx, "signal", NULL);
  for (int i = 0; signal_names[i].name; i++) {
    if (strcmp(s, signal_names[i].name) == 0 || strcmp(s, signal_names[i].name + 3) == 0)
      return signal_names[i].num;
  }
  return luaL_error(L, "unknown signal '%s'", s);
}

// core.signal(signal, ref) -> watcher (not keeping the loop alive)
static int
l_signal (lua_State *L) {
  int signum = ludx_signal_number(L, 1);
  uint32_t ref = ludx_check_ref(L, 2);
  ludx_signal_t *s;
  int err = ludx_signal_start(ludx_bind_rt(L), signum, ref, &s);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  ludx_new_object(L, LUDX_SIGNAL_MT, s);
  return 1;
}

static int
l_signal_stop (lua_State *L) {
  void **ud = luaL_checkudata(L, 1, LUDX_SIGNAL_MT);
  if (*ud)
    ludx_signal_stop(*ud);
  return 0;
}

static int
l_signal_gc (lua_State *L) {
  void **ud = luaL_checkudata(L, 1, LUDX_SIGNAL_MT);
  if (*ud)
    ludx_signal_release(*ud);
  *ud = NULL;
  return 0;
}

// The registry key of the weak set of tasks Ctrl-C must not stop.
static char spare_key;

// 1 when the running thread is the main one or a spared task: the REPL's
// own tasks (the loop reading lines, the attach client's reader) must live
// through Ctrl-C to report it.
static int
spared (lua_State *L) {
  if (lua_pushthread(L)) {
    lua_pop(L, 1);
    return 1;
  }
  lua_pushlightuserdata(L, &spare_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  int found = 0;
  if (lua_istable(L, -1)) {
    lua_pushvalue(L, -2);
    lua_rawget(L, -2);
    found = lua_toboolean(L, -1);
    lua_pop(L, 1);
  }
  lua_pop(L, 2);
  return found;
}

static void
interrupt_hook (lua_State *L, lua_Debug *ar) {
  (void) ar;
  // only a task (a coroutine) is stopped, and not a spared one; the
  // scheduler keeps going and will see the interrupt event
  if (spared(L))
    return;
  lua_sethook(L, NULL, 0, 0);
  hook_pending = 0;
  hook_fired = 1;
  luaL_error(L, "interrupted");
}

static void
on_interrupt (void *data) {
  lua_State *L = data;
  if (in_step)
    return; // the loop is idle: the INTERRUPT event is enough
  if (hook_pending) {
    // the first Ctrl-C did not get through: JIT-compiled code does not run
    // hooks. A second one ends the process, as it would without a REPL.
    signal(SIGINT, SIG_DFL);
    raise(SIGINT);
    return;
  }
  hook_pending = 1;
  lua_sethook(L, interrupt_hook, LUA_MASKCALL | LUA_MASKRET | LUA_MASKCOUNT, 1);
}

// core.interrupts(on): Ctrl-C stops a running task instead of the process.
static int
l_interrupts (lua_State *L) {
  ludx_rt_t *rt = ludx_bind_rt(L);
  if (lua_toboolean(L, 1)) {
    interrupt_L = L;
    int err = ludx_rt_interrupt_install(rt, on_interrupt, L);
    if (err < 0)
      return ludx_push_uv_error(L, err);
  } else {
    ludx_rt_interrupt_remove(rt);
    interrupt_L = NULL;
  }
  lua_pushboolean(L, 1);
  return 1;
}

// core.interrupt_spare(co, on): Ctrl-C's hook leaves the coroutine co alone
// (on false: no longer). Held weakly.
static int
l_interrupt_spare (lua_State *L) {
  luaL_checktype(L, 1, LUA_TTHREAD);
  int on = lua_isnone(L, 2) || lua_toboolean(L, 2);
  lua_pushlightuserdata(L, &spare_key);
  lua_rawget(L, LUA_REGISTRYINDEX);
  if (!lua_istable(L, -1)) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_newtable(L);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushlightuserdata(L, &spare_key);
    lua_pushvalue(L, -2);
    lua_rawset(L, LUA_REGISTRYINDEX);
  }
  lua_pushvalue(L, 1);
  if (on)
    lua_pushboolean(L, 1);
  else
    lua_pushnil(L);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  return 0;
}

// core.interrupt_clear() -> fired: the interrupt was handled; no hook is
// left behind. fired: the hook already stopped a task for it (one Ctrl-C,
// one stop: the REPL must not also cancel its next prompt).
static int
l_interrupt_clear (lua_State *L) {
  lua_sethook(L, NULL, 0, 0);
  hook_pending = 0;
  lua_pushboolean(L, hook_fired);
  hook_fired = 0;
  return 1;
}

// core.strerror(code) -> message, name for a negative UV_E* number
static int
l_strerror (lua_State *L) {
  int err = (int) luaL_checkinteger(L, 1);
  lua_pushstring(L, uv_strerror(err));
  lua_pushstring(L, uv_err_name(err));
  return 2;
}

static int
l_shutdown (lua_State *L) {
  (void) L;
  ludx_rt_t *rt = ludx_rt_default();
  if (rt)
    ludx_rt_shutdown(rt);
  return 0;
}

static const char event_cdef[] =
    "typedef struct ludx_event_s { uint32_t kind; uint32_t ref; int64_t a; int64_t b; } ludx_event_t;";

void
ludx_bind_loop (lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"step", l_step},
      {"events", l_events},
      {"now", l_now},
      {"hrtime", l_hrtime},
      {"wallclock", l_wallclock},
      {"exepath", l_exepath},
      {"getpid", l_getpid},
      {"version", l_version},
      {"rusage", l_rusage},
      {"signal", l_signal},
      {"interrupts", l_interrupts},
      {"interrupt_clear", l_interrupt_clear},
      {"interrupt_spare", l_interrupt_spare},
      {"strerror", l_strerror},
      {"shutdown", l_shutdown},
      {NULL, NULL}};
  static const luaL_Reg signal_methods[] = {{"stop", l_signal_stop}, {"__gc", l_signal_gc}, {NULL, NULL}};
  ludx_new_class(L, LUDX_SIGNAL_MT, signal_methods);
  ludx_set_funcs(L, funcs);
  lua_pushstring(L, event_cdef);
  lua_setfield(L, -2, "EVENT_CDEF");
}

// core.EV: name -> number of every event kind, once every area has
// registered its kinds (core.c calls this last).
void
ludx_bind_event_kinds (lua_State *L) {
  lua_createtable(L, 0, 32);
  for (uint32_t k = 1; k < ludx_rt_kinds_end(); k++) {
    const char *name = ludx_rt_kind_name(k);
    if (name == NULL)
      continue;
    lua_pushinteger(L, k);
    lua_setfield(L, -2, name);
  }
  lua_setfield(L, -2, "EV");
}
