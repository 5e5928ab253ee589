#ifndef UDX_TEST_TAP_H
#define UDX_TEST_TAP_H

// Counts what crosses the simulated wire, per direction (0: node 0 -> 1).

#include <string.h>

#include "../src/wire.h"
#include "sim.h"

typedef struct tap_s {
  int data[2];
  int acks[2]; // no DATA/END/MESSAGE/DESTROY/HEARTBEAT
  int sack_acks[2];
  int heartbeats[2];
  int destroys[2];
  int messages[2];
  int ends[2];
  int probes[2]; // DATA with data_offset > 0 and no SACK
  uint32_t max_sacks[2];
  size_t max_len[2];
  uint8_t last_data_type[2];
  uint32_t last_data_seq[2];
  int sack_data_offset_nonzero[2];
  // optional: record the ack field of node 0's DATA packets with a given seq
  uint32_t watch_seq;
  int watch_count;
  uint32_t watch_acks[8];
  uint32_t watch_rwnd[8];
} tap_t;

static inline void
tap_fn (void *ctx, int from, const uint8_t *buf, size_t len) {
  tap_t *t = ctx;
  udx_wire_pkt_t p;
  if (udx__wire_decode(buf, len, &p) != UDX_WIRE_OK)
    return;
  if (len > t->max_len[from])
    t->max_len[from] = len;
  if (p.type & UDX_HEADER_DATA) {
    t->data[from]++;
    t->last_data_type[from] = p.type;
    t->last_data_seq[from] = p.seq;
    if (p.data_offset && !(p.type & UDX_HEADER_SACK))
      t->probes[from]++;
    if (from == 0 && p.seq == t->watch_seq && t->watch_count < 8) {
      t->watch_acks[t->watch_count] = p.ack;
      t->watch_rwnd[t->watch_count] = p.rwnd;
      t->watch_count++;
    }
  }
  if (p.type & UDX_HEADER_END) {
    t->ends[from]++;
    t->last_data_type[from] = p.type;
  }
  if (p.type & UDX_HEADER_HEARTBEAT)
    t->heartbeats[from]++;
  if (p.type & UDX_HEADER_DESTROY)
    t->destroys[from]++;
  if (p.type & UDX_HEADER_MESSAGE)
    t->messages[from]++;
  if (!(p.type & (UDX_FLAGS_DATA_OR_END | UDX_HEADER_MESSAGE | UDX_HEADER_DESTROY | UDX_HEADER_HEARTBEAT))) {
    t->acks[from]++;
    if (p.type & UDX_HEADER_SACK) {
      t->sack_acks[from]++;
      if (p.nsacks > t->max_sacks[from])
        t->max_sacks[from] = p.nsacks;
      if (p.data_offset)
        t->sack_data_offset_nonzero[from]++;
    }
  }
}

static inline void
tap_attach (sim_t *sim, tap_t *t) {
  memset(t, 0, sizeof(*t));
  t->watch_seq = UINT32_MAX;
  sim->tap = tap_fn;
  sim->tap_ctx = t;
}

// Builds a datagram for injection.
static inline size_t
mk_pkt (uint8_t *out, uint8_t type, uint8_t data_offset, uint32_t id, uint32_t rwnd, uint32_t seq, uint32_t ack, const void *payload, size_t len) {
  udx__wire_header(out, type, data_offset, id, rwnd, seq, ack);
  if (len)
    memcpy(out + UDX_HEADER_SIZE, payload, len);
  return UDX_HEADER_SIZE + len;
}

#endif
