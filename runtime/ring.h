#ifndef LUDX_RING_H
#define LUDX_RING_H

#include <stddef.h>
#include <stdint.h>

// One record per C event. Lua reads a whole batch once per loop turn (through
// the FFI) and never gets a call per event. Kinds are grouped by layer.
typedef struct ludx_event_s {
  uint32_t kind;
  uint32_t ref; // the Lua side's handle number
  int64_t a;
  int64_t b;
} ludx_event_t;

enum {
  LUDX_EV_NONE = 0,
  // runtime
  LUDX_EV_SIGNAL = 1,      // a = signal number
  LUDX_EV_INTERRUPT = 2,   // SIGINT while Lua was running (REPL)
  LUDX_EV_PROC_OUTPUT = 3, // a = 1 stdout, 2 stderr: output became available
  LUDX_EV_PROC_EXIT = 4,   // a = exit status, b = terminating signal
  LUDX_EV_PROC_CLOSED = 5,
  LUDX_EV_LINE = 6, // the line reader has lines (or EOF) to take
  LUDX_EV_FS = 7,     // a = result
  LUDX_EV_LOOKUP = 8, // a = status: the lookup's addresses are ready
  LUDX_EV_TCP_CONNECTION = 9, // a server has connections to accept
  LUDX_EV_TCP_CONNECT = 10,   // a = status of a connect
  LUDX_EV_TCP_READABLE = 11,  // bytes, EOF or an error to take
  LUDX_EV_TCP_DRAIN = 12,     // below the write high-water mark again
  LUDX_EV_TCP_SHUTDOWN = 13,  // our FIN went out (a = status)
  LUDX_EV_TCP_CLOSE = 14,
  // 32..63: udx bindings
  LUDX_EV_UDX_BASE = 32,
  LUDX_EV_UDX_SOCKET_RECV = 32,  // datagrams queued (empty -> non-empty)
  LUDX_EV_UDX_SOCKET_CLOSE = 33, // the socket closed
  LUDX_EV_UDX_READABLE = 34,     // in-order bytes or EOF available
  LUDX_EV_UDX_DRAIN = 35,        // below the high-water mark again
  LUDX_EV_UDX_FLUSH = 36,        // everything written so far is acked
  LUDX_EV_UDX_FINISH = 37,       // our END was acked
  LUDX_EV_UDX_MESSAGE = 38,      // MESSAGE datagrams queued
  LUDX_EV_UDX_CLOSE = 39,        // a = status (0 or a negative UV_E*)
  LUDX_EV_UDX_FINALIZE = 40,     // the C stream is gone
  LUDX_EV_UDX_FIREWALL = 41,     // a = 1 accepted (connected), 0 dropped
  LUDX_EV_UDX_REMOTE_CHANGED = 42,
  LUDX_EV_UDX_TRACE = 43,        // trace samples queued
  LUDX_EV_UDX_LOOKUP = 44,       // a = status, b = count
  // 64..95: crypto / secretstream bindings
  LUDX_EV_CRYPTO_BASE = 64,
  LUDX_EV_MAX = 128
};

// Two buffers: C appends to the back one while Lua walks the front one, so a
// callback fired during a Lua call never moves memory Lua is reading.
typedef struct ludx_ring_s {
  ludx_event_t *buf[2];
  size_t len[2];
  size_t cap[2];
  int back;
} ludx_ring_t;

int
ludx_ring_init (ludx_ring_t *r);

void
ludx_ring_free (ludx_ring_t *r);

// Appends to the back buffer; grows it (never drops). 0 or UV_ENOMEM.
int
ludx_ring_push (ludx_ring_t *r, uint32_t kind, uint32_t ref, int64_t a, int64_t b);

// Makes the back buffer the front one and returns it; the old front is emptied.
const ludx_event_t *
ludx_ring_swap (ludx_ring_t *r, size_t *len);

static inline size_t
ludx_ring_pending (const ludx_ring_t *r) {
  return r->len[r->back];
}

#endif
