// Datagrams waiting to be delivered, ordered by delivery time (a binary
// min-heap; equal times leave in arrival order). Payloads live in 2 KiB
// slots from a free list; larger datagrams get their own allocation.
#ifndef LUDX_PATHEMU_SCHED_H
#define LUDX_PATHEMU_SCHED_H

#include <stddef.h>
#include <stdint.h>

#define PATHEMU_SLOT_SIZE 2048

typedef struct {
  uint64_t at_ns; // delivery time
  uint64_t seq;   // arrival order, breaks ties
  uint8_t *data;
  uint32_t len;
  uint8_t dir; // 0: A to B, 1: B to A
} pathemu_pkt_t;

typedef struct {
  pathemu_pkt_t *heap;
  size_t len;
  size_t cap;
  uint64_t next_seq;
  void **free_slots; // stack of free 2 KiB slots
  size_t free_len;
  size_t free_cap;
  void **chunks; // slab allocations, freed at the end
  size_t chunks_len;
} pathemu_sched_t;

void
pathemu_sched_init (pathemu_sched_t *s);

void
pathemu_sched_destroy (pathemu_sched_t *s);

// Copies len bytes and schedules them for at_ns. Returns 0 or -ENOMEM.
int
pathemu_sched_push (pathemu_sched_t *s, uint64_t at_ns, uint8_t dir, const void *data, size_t len);

// The earliest datagram, or NULL when empty.
const pathemu_pkt_t *
pathemu_sched_peek (const pathemu_sched_t *s);

// Removes the earliest datagram into *out. Its data stays valid until
// pathemu_sched_release(out).
void
pathemu_sched_pop (pathemu_sched_t *s, pathemu_pkt_t *out);

void
pathemu_sched_release (pathemu_sched_t *s, pathemu_pkt_t *pkt);

#endif
