#include "rt.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static ludx_rt_t *default_rt = NULL;

struct ludx_signal_s {
  ludx_closer_t closer; // first: the closer is the object
  uv_signal_t handle;
  ludx_rt_t *rt;
  uint32_t ref;
  int closed, released;
};

static void
on_wake (uv_timer_t *t) {
  (void) t; // its only job is to end the blocking poll
}

static void
on_intr (uv_async_t *a) {
  ludx_rt_t *rt = a->data;
  ludx_rt_post(rt, LUDX_EV_INTERRUPT, 0, SIGINT, 0);
}

ludx_rt_t *
ludx_rt_default (void) {
  if (default_rt != NULL)
    return default_rt;
  ludx_rt_t *rt = calloc(1, sizeof(*rt));
  if (rt == NULL)
    return NULL;
  if (uv_loop_init(&rt->loop) != 0)
    goto fail;
  if (ludx_ring_init(&rt->ring) != 0)
    goto fail_loop;
  const char *cap = getenv("LUDX_FAULT_RING_CAP");
  if (cap != NULL)
    rt->ring.fail_above = (size_t) strtoull(cap, NULL, 10);
  uv_timer_init(&rt->loop, &rt->wake);
  uv_unref((uv_handle_t *) &rt->wake);
  uv_async_init(&rt->loop, &rt->intr, on_intr);
  rt->intr.data = rt;
  uv_unref((uv_handle_t *) &rt->intr);
  rt->t0 = uv_hrtime();
  rt->live.prev = rt->live.next = &rt->live;
  // A peer that goes away must not kill us with SIGPIPE; writes report EPIPE.
  signal(SIGPIPE, SIG_IGN);
  default_rt = rt;
  return rt;

fail_loop:
  uv_loop_close(&rt->loop);
fail:
  free(rt);
  return NULL;
}

size_t
ludx_rt_step (ludx_rt_t *rt, double timeout_ms, int *alive) {
  uv_run_mode mode = UV_RUN_ONCE;
  int armed = 0;
  if (ludx_ring_pending(&rt->ring) > 0 || timeout_ms == 0) {
    mode = UV_RUN_NOWAIT;
  } else if (timeout_ms > 0) {
    uv_update_time(&rt->loop);
    uint64_t ms = (uint64_t) ceil(timeout_ms);
    uv_timer_start(&rt->wake, on_wake, ms, 0);
    uv_ref((uv_handle_t *) &rt->wake);
    armed = 1;
  }
  int more = uv_run(&rt->loop, mode);
  if (armed) {
    uv_timer_stop(&rt->wake);
    uv_unref((uv_handle_t *) &rt->wake);
    more = uv_loop_alive(&rt->loop);
  }
  if (alive)
    *alive = more;
  return ludx_ring_pending(&rt->ring);
}

double
ludx_rt_now_ms (ludx_rt_t *rt) {
  return (double) (uv_hrtime() - rt->t0) / 1e6;
}

static const char *kind_names[LUDX_EV_KINDS_MAX] = {
    [LUDX_EV_SIGNAL] = "SIGNAL",
    [LUDX_EV_INTERRUPT] = "INTERRUPT",
    [LUDX_EV_PROC_OUTPUT] = "PROC_OUTPUT",
    [LUDX_EV_PROC_EXIT] = "PROC_EXIT",
    [LUDX_EV_LINE] = "LINE",
};
static uint32_t kinds_end = LUDX_EV_RUNTIME_KINDS;

uint32_t
ludx_rt_kind (const char *name) {
  for (uint32_t k = 1; k < kinds_end; k++) {
    if (kind_names[k] && strcmp(kind_names[k], name) == 0)
      return k;
  }
  if (kinds_end >= LUDX_EV_KINDS_MAX) {
    fprintf(stderr, "ludx: too many event kinds (registering %s)\n", name);
    abort();
  }
  kind_names[kinds_end] = name;
  return kinds_end++;
}

const char *
ludx_rt_kind_name (uint32_t kind) {
  return kind < kinds_end ? kind_names[kind] : NULL;
}

uint32_t
ludx_rt_kinds_end (void) {
  return kinds_end;
}

int
ludx_rt_post (ludx_rt_t *rt, uint32_t kind, uint32_t ref, int64_t a, int64_t b) {
  int err = ludx_ring_push(&rt->ring, kind, ref, a, b);
  if (err < 0) {
    // A lost edge-triggered event is a task that waits forever: fail loudly.
    const char *name = ludx_rt_kind_name(kind);
    fprintf(stderr, "ludx: cannot post event %s (ref %u) with %zu events pending: %s; aborting\n", name ? name : "?", ref, ludx_ring_pending(&rt->ring), uv_strerror(err));
    abort();
  }
  return 0;
}

static void
on_sigint_raw (int sig) {
  ludx_rt_t *rt = default_rt;
  (void) sig;
  if (rt == NULL)
    return;
  uv_async_send(&rt->intr); // async-signal-safe
  if (rt->on_interrupt)
    rt->on_interrupt(rt->on_interrupt_data);
}

int
ludx_rt_interrupt_install (ludx_rt_t *rt, ludx_rt_interrupt_fn fn, void *data) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_sigint_raw;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  rt->on_interrupt = fn;
  rt->on_interrupt_data = data;
  if (sigaction(SIGINT, &sa, NULL) != 0)
    return uv_translate_sys_error(errno);
  rt->interrupts = 1;
  return 0;
}

void
ludx_rt_interrupt_remove (ludx_rt_t *rt) {
  if (!rt->interrupts)
    return;
  signal(SIGINT, SIG_DFL);
  rt->interrupts = 0;
  rt->on_interrupt = NULL;
}

static void
on_signal (uv_signal_t *h, int signum) {
  ludx_signal_t *s = h->data;
  ludx_rt_post(s->rt, LUDX_EV_SIGNAL, s->ref, signum, 0);
}

void
ludx_signal_stop (ludx_signal_t *s);

static void
signal_shutdown (ludx_closer_t *c) {
  ludx_signal_stop((ludx_signal_t *) c);
}

int
ludx_signal_start (ludx_rt_t *rt, int signum, uint32_t ref, ludx_signal_t **out) {
  ludx_signal_t *s = calloc(1, sizeof(*s));
  if (s == NULL)
    return UV_ENOMEM;
  s->rt = rt;
  s->ref = ref;
  uv_signal_init(&rt->loop, &s->handle);
  s->handle.data = s;
  int err = uv_signal_start(&s->handle, on_signal, signum);
  if (err < 0) {
    uv_close((uv_handle_t *) &s->handle, (uv_close_cb) free);
    return err;
  }
  // A signal watcher alone does not keep ludx.run going.
  uv_unref((uv_handle_t *) &s->handle);
  ludx_rt_track(rt, &s->closer, signal_shutdown);
  *out = s;
  return 0;
}

static void
on_signal_closed (uv_handle_t *h) {
  ludx_signal_t *s = h->data;
  if (s->released)
    free(s);
  else
    s->closed = 2; // the owner frees it
}

void
ludx_signal_stop (ludx_signal_t *s) {
  if (s->closed)
    return;
  s->closed = 1;
  ludx_rt_untrack(&s->closer);
  uv_close((uv_handle_t *) &s->handle, on_signal_closed);
}

void
ludx_signal_release (ludx_signal_t *s) {
  s->released = 1;
  if (s->closed == 2)
    free(s);
  else
    ludx_signal_stop(s);
}

void
ludx_rt_track (ludx_rt_t *rt, ludx_closer_t *c, void (*close)(ludx_closer_t *c)) {
  c->close = close;
  c->next = rt->live.next;
  c->prev = &rt->live;
  rt->live.next->prev = c;
  rt->live.next = c;
}

void
ludx_rt_untrack (ludx_closer_t *c) {
  if (c->next == NULL)
    return;
  c->prev->next = c->next;
  c->next->prev = c->prev;
  c->next = c->prev = NULL;
}

// How long the closes at shutdown may take: a close that waits on its
// peer ends by its own timeout well before this. LUDX_SHUTDOWN_MS
// (test-only) sets it.
#define SHUTDOWN_MS 60000

static uint64_t
shutdown_ms (void) {
  const char *v = getenv("LUDX_SHUTDOWN_MS");
  long n = v ? strtol(v, NULL, 10) : 0;
  return n > 0 ? (uint64_t) n : SHUTDOWN_MS;
}

static void
on_shutdown_late (uv_timer_t *t) {
  *(int *) t->data = 1;
  uv_stop(t->loop);
}

// arg: the bound's own timer, not reported
static void
report_left (uv_handle_t *h, void *arg) {
  if (h != arg && !uv_is_closing(h))
    fprintf(stderr, "ludx: at exit, a handle of type %s is still open%s\n", uv_handle_type_name(h->type), uv_is_active(h) ? " (active)" : "");
}

void
ludx_rt_shutdown (ludx_rt_t *rt) {
  if (rt->closing)
    return;
  rt->closing = 1;
  while (rt->live.next != &rt->live) {
    ludx_closer_t *c = rt->live.next;
    ludx_rt_untrack(c);
    c->close(c);
  }
  ludx_rt_interrupt_remove(rt);
  uv_close((uv_handle_t *) &rt->wake, NULL);
  uv_close((uv_handle_t *) &rt->intr, NULL);
  // Bounded: a handle nobody closes must not keep the process from
  // exiting (a hang with no CPU). Past the bound, what is left is named
  // and the process ends with status 1.
  int late = 0;
  uv_timer_t bound;
  uv_timer_init(&rt->loop, &bound);
  bound.data = &late;
  uint64_t bound_ms = shutdown_ms();
  uv_timer_start(&bound, on_shutdown_late, bound_ms, 0);
  uv_unref((uv_handle_t *) &bound); // does not keep the loop alive itself
  uv_run(&rt->loop, UV_RUN_DEFAULT);
  if (late) {
    uv_walk(&rt->loop, report_left, &bound);
    fprintf(stderr, "ludx: the loop did not close within %llu ms at exit\n", (unsigned long long) bound_ms);
    fflush(NULL);
    _exit(1);
  }
  uv_close((uv_handle_t *) &bound, NULL);
  uv_run(&rt->loop, UV_RUN_DEFAULT);
  uv_loop_close(&rt->loop);
  ludx_ring_free(&rt->ring);
  default_rt = NULL;
  free(rt);
}
