// Signal waits for ludx.signal. Unlike core.signal (a background watcher),
// a wait keeps the loop alive: a task waiting for SIGTERM is not a deadlock.
// The Lua side starts one only while a task waits, and stops it after; when
// the last libuv watcher of a signal stops, libuv puts back the default
// disposition, so the signal kills the process again.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "bind.h"

#define SIGWAIT_MT "ludx.sigwait"

int
ludx_signal_number (lua_State *L, int idx); // loop.c

typedef struct {
  ludx_closer_t closer; // first: the closer is the object
  uv_signal_t handle;
  ludx_rt_t *rt;
  uint32_t ref;
  int signum;
  int closed, released;
} sigwait_t;

static void
on_signal (uv_signal_t *h, int signum) {
  sigwait_t *s = h->data;
  // a lost post would leave the task waiting and the signal swallowed
  if (ludx_rt_post(s->rt, LUDX_EV_SIGNAL, s->ref, signum, 0) < 0) {
    fprintf(stderr, "ludx: out of memory delivering signal %d\n", signum);
    abort();
  }
}

static void
on_closed (uv_handle_t *h) {
  sigwait_t *s = h->data;
  if (s->released)
    free(s);
  else
    s->closed = 2; // the userdata frees it
}

static void
sigwait_stop (sigwait_t *s) {
  if (s->closed)
    return;
  s->closed = 1;
  ludx_rt_untrack(&s->closer);
  uv_close((uv_handle_t *) &s->handle, on_closed); // stops the watcher now
  // the REPL's own Ctrl-C handler comes back once no task waits for SIGINT
  if (s->signum == SIGINT && s->rt->interrupts)
    ludx_rt_interrupt_install(s->rt, s->rt->on_interrupt, s->rt->on_interrupt_data);
}

static void
sigwait_shutdown (ludx_closer_t *c) {
  sigwait_stop((sigwait_t *) c);
}

// core.signal_wait(signal, ref) -> watcher; posts LUDX_EV_SIGNAL with ref
static int
l_signal_wait (lua_State *L) {
  int signum = ludx_signal_number(L, 1);
  uint32_t ref = ludx_check_ref(L, 2);
  if (signum == SIGKILL || signum == SIGSTOP)
    return ludx_push_error(L, "this signal cannot be caught", "EINVAL");
  ludx_rt_t *rt = ludx_bind_rt(L);
  sigwait_t *s = calloc(1, sizeof(*s));
  if (s == NULL)
    return ludx_push_uv_error(L, UV_ENOMEM);
  s->rt = rt;
  s->ref = ref;
  s->signum = signum;
  uv_signal_init(&rt->loop, &s->handle);
  s->handle.data = s;
  int err = uv_signal_start(&s->handle, on_signal, signum);
  if (err < 0) {
    uv_close((uv_handle_t *) &s->handle, (uv_close_cb) free);
    return ludx_push_uv_error(L, err);
  }
  ludx_rt_track(rt, &s->closer, sigwait_shutdown);
  ludx_new_object(L, SIGWAIT_MT, s);
  return 1;
}

static int
l_sigwait_stop (lua_State *L) {
  void **ud = luaL_checkudata(L, 1, SIGWAIT_MT);
  if (*ud)
    sigwait_stop(*ud);
  return 0;
}

static int
l_sigwait_gc (lua_State *L) {
  void **ud = luaL_checkudata(L, 1, SIGWAIT_MT);
  sigwait_t *s = *ud;
  *ud = NULL;
  if (s == NULL)
    return 0;
  s->released = 1;
  if (s->closed == 2)
    free(s);
  else
    sigwait_stop(s);
  return 0;
}

void
ludx_bind_signal (lua_State *L) {
  static const luaL_Reg funcs[] = {{"signal_wait", l_signal_wait}, {NULL, NULL}};
  static const luaL_Reg methods[] = {{"stop", l_sigwait_stop}, {"__gc", l_sigwait_gc}, {NULL, NULL}};
  ludx_new_class(L, SIGWAIT_MT, methods);
  ludx_set_funcs(L, funcs);
}
