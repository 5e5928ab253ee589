#ifndef LUDX_RT_H
#define LUDX_RT_H

#include <stdint.h>
#include <uv.h>

#include "ring.h"

// The runtime owns the libuv loop. Lua drives it one turn at a time with
// ludx_rt_step() and then reads the turn's events from the ring: C callbacks
// only ever append records, they never call into Lua.
typedef struct ludx_rt_s ludx_rt_t;

typedef void (*ludx_rt_interrupt_fn)(void *data);

// Every object that owns libuv handles embeds a closer, so that shutdown can
// close what Lua left open, each with its own close path.
typedef struct ludx_closer_s ludx_closer_t;
struct ludx_closer_s {
  ludx_closer_t *prev, *next;
  void (*close)(ludx_closer_t *c);
};

struct ludx_rt_s {
  uv_loop_t loop;
  ludx_ring_t ring;
  uv_timer_t wake;                   // ends a blocking turn at the Lua timer heap's deadline
  uv_async_t intr;                   // SIGINT seen by the raw handler, delivered on the loop
  uint64_t t0;                       // uv_hrtime() at start, for ludx_rt_now_ms()
  int interrupts;                    // raw SIGINT handler installed
  ludx_rt_interrupt_fn on_interrupt; // called from the signal handler
  void *on_interrupt_data;
  int closing;
  ludx_closer_t live; // list head of open objects
};

// The process-wide runtime (one loop per process), created on first use.
ludx_rt_t *
ludx_rt_default (void);

// Runs one loop turn. timeout_ms < 0 blocks until something happens, 0 polls,
// > 0 blocks at most that long. Never blocks when events are already pending.
// Returns the number of events waiting in the ring; *alive tells whether the
// loop still has active handles or requests.
size_t
ludx_rt_step (ludx_rt_t *rt, double timeout_ms, int *alive);

// Milliseconds since the runtime started, with sub-millisecond resolution.
double
ludx_rt_now_ms (ludx_rt_t *rt);

// Event kinds. The runtime's own are fixed here; every other layer (the
// bindings) registers its kinds by name when it loads (ludx_rt_kind), so the
// ring and the runtime know nothing of them. Lua finds each kind by name.
enum {
  LUDX_EV_SIGNAL = 1,      // a = signal number
  LUDX_EV_INTERRUPT = 2,   // SIGINT while Lua was running (REPL)
  LUDX_EV_PROC_OUTPUT = 3, // a = 1 stdout, 2 stderr: output became available
  LUDX_EV_PROC_EXIT = 4,   // a = exit status, b = terminating signal
  LUDX_EV_LINE = 5,        // the line reader has lines (or EOF) to take
  LUDX_EV_RUNTIME_KINDS,   // registered kinds are numbered from here
  LUDX_EV_KINDS_MAX = 128
};

// The kind registered under name (the same number for the same name); a new
// name gets the next free number. Names are static strings. Running out of
// kinds is a programming error: the process aborts with a message.
uint32_t
ludx_rt_kind (const char *name);

// The name of a kind, or NULL. Kinds are 1 .. ludx_rt_kinds_end() - 1.
const char *
ludx_rt_kind_name (uint32_t kind);

uint32_t
ludx_rt_kinds_end (void);

// Appends an event for Lua. It never fails silently: several kinds are
// posted only on an empty -> non-empty edge, so one lost event would leave a
// task waiting forever. When the ring cannot grow (out of memory) the process
// aborts with a message naming the event; otherwise it returns 0.
//
// Fault injection: LUDX_FAULT_RING_CAP=N in the environment (read when the
// runtime starts) makes the ring's growth past N records fail.
int
ludx_rt_post (ludx_rt_t *rt, uint32_t kind, uint32_t ref, int64_t a, int64_t b);

// Installs a raw SIGINT handler (for the REPL): it posts LUDX_EV_INTERRUPT and
// calls fn from the signal handler, so a busy Lua loop can be stopped too.
int
ludx_rt_interrupt_install (ludx_rt_t *rt, ludx_rt_interrupt_fn fn, void *data);

void
ludx_rt_interrupt_remove (ludx_rt_t *rt);

// A watcher for a signal, reported as LUDX_EV_SIGNAL with the given ref.
typedef struct ludx_signal_s ludx_signal_t;

int
ludx_signal_start (ludx_rt_t *rt, int signum, uint32_t ref, ludx_signal_t **out);

void
ludx_signal_stop (ludx_signal_t *s);

// The owner lets go; the memory goes once the handle is closed.
void
ludx_signal_release (ludx_signal_t *s);

void
ludx_rt_track (ludx_rt_t *rt, ludx_closer_t *c, void (*close)(ludx_closer_t *c));

void
ludx_rt_untrack (ludx_closer_t *c);

// Closes every handle still open and runs the loop until they are gone.
void
ludx_rt_shutdown (ludx_rt_t *rt);

#endif
