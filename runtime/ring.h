#ifndef LUDX_RING_H
#define LUDX_RING_H

#include <stddef.h>
#include <stdint.h>

// One record per C event. Lua reads a whole batch once per loop turn (through
// the FFI) and never gets a call per event. The ring does not know what a
// kind means: the runtime and the bindings register their kinds (rt.h).
typedef struct ludx_event_s {
  uint32_t kind;
  uint32_t ref; // the Lua side's handle number
  int64_t a;
  int64_t b;
} ludx_event_t;

// Two buffers: C appends to the back one while Lua walks the front one, so a
// callback fired during a Lua call never moves memory Lua is reading.
typedef struct ludx_ring_s {
  ludx_event_t *buf[2];
  size_t len[2];
  size_t cap[2];
  int back;
  size_t fail_above; // fault injection: growth past this many records fails (0: off)
} ludx_ring_t;

int
ludx_ring_init (ludx_ring_t *r);

void
ludx_ring_free (ludx_ring_t *r);

// Appends to the back buffer; grows it (never drops). 0 or UV_ENOMEM (the
// growth failed, or would pass fail_above).
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
