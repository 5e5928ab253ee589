#ifndef UDX_TEST_SIM_H
#define UDX_TEST_SIM_H

// A deterministic simulated network for the sans-IO engine: two nodes, one
// link each way (delay, rate with a bounded queue, loss, reorder, duplication,
// corruption, blackout), a virtual clock in microseconds and a seeded PRNG.

#include <stdbool.h>
#include <stdint.h>

#include "../src/path.h"
#include "../src/stream.h"

#define SIM_MAX_STREAMS 16

typedef struct sim_s sim_t;

typedef struct sim_link_s {
  uint64_t delay_us;
  uint64_t rate;        // bytes/s, 0 = unlimited
  uint64_t queue_bytes; // bottleneck buffer, 0 = unlimited
  uint32_t overhead;    // bytes added to each datagram for rate and queue (28: IPv4 + UDP)
  double loss;
  double dup;
  double reorder;
  uint64_t reorder_us;
  double corrupt;
  uint64_t blackout_start; // absolute us
  uint64_t blackout_end;
  uint64_t busy_until;
  uint64_t batch_us; // arrivals rounded up to a multiple: receive batches
  // optional: return true to drop this datagram
  bool (*filter)(void *ctx, const uint8_t *buf, size_t len);
  // optional: rewrites a datagram in place (returns its new length)
  size_t (*rewrite)(void *ctx, uint8_t *buf, size_t len);
  void *filter_ctx;
  // counters
  uint64_t sent;
  uint64_t dropped;
  uint64_t delivered;
  uint64_t bytes;
} sim_link_t;

// App-level helpers attached to a stream (s->data).
typedef struct sim_app_s {
  sim_t *sim;
  int node;
  // writer
  uint64_t seed;
  uint64_t to_write;
  uint64_t written;
  bool end_after;
  bool ended;
  size_t chunk;
  bool fill;      // writes made in place (udx__stream_write_fill), of mixed sizes
  uint32_t fills; // how many
  // reader
  uint64_t read_seed;
  uint64_t read;
  uint64_t hash;
  uint64_t expect_hash;
  bool eof;
  bool reading;       // false = paused reader
  uint64_t read_rate; // bytes per second when paced by sim_app_read_tick (0 = eager)
  uint64_t read_credit_at;
  size_t max_held; // largest read_buffered + ooo bytes seen
  // events
  int readable_events;
  int drains;
  int finishes;
  int flushes;
  int messages;
  uint64_t message_bytes;
  int closed;
  int close_status;
  int finalized;
  int remote_changed;
  // host state (what the io layer keeps in udx_io_stream_t)
  bool dirty;
  bool closing;
  bool finalizing;
  bool remote_changed_owed;
} sim_app_t;

struct sim_s {
  uint64_t now;
  uint64_t rng;
  udx_pool_t pool;
  sim_link_t link[2]; // link[0]: node 0 -> node 1, link[1]: node 1 -> node 0
  udx_stream_t *streams[2][SIM_MAX_STREAMS];
  int nstreams[2];
  struct sim_event_s *heap;
  uint32_t heap_len;
  uint32_t heap_cap;
  uint64_t heap_order;
  uint64_t raw[2]; // datagrams for unknown ids
  // Zero copy, as the io layer: DATA payloads stay in the send queue (the
  // stream's tx_pins held) and are read only at the end of the step.
  bool zero_copy;
  uint64_t zero_copy_hold_us; // and held this long (a full socket)
  uint64_t pending_since;
  struct sim_pending_s *pending;
  uint32_t npending;
  uint32_t pending_cap;
  // The shared window of each node's streams towards the other (as the io
  // layer keys one per socket and address); no_path leaves streams without.
  udx_path_t path[2];
  bool no_path;
  // optional tap: sees every datagram sent (before link effects)
  void (*tap)(void *ctx, int from, const uint8_t *buf, size_t len);
  void *tap_ctx;
};

void
sim_init (sim_t *sim, uint64_t seed);

void
sim_destroy (sim_t *sim);

// Creates a stream on node `node` with a sim_app_t in s->data.
udx_stream_t *
sim_stream (sim_t *sim, int node, uint32_t local_id);

// Connects s (on its node) to remote_id on the other node.
void
sim_connect (sim_t *sim, udx_stream_t *s, uint32_t remote_id);

void
sim_connect_ex (sim_t *sim, udx_stream_t *s, uint32_t remote_id, int link_mtu, bool ipv6);

void
sim_change_remote (sim_t *sim, udx_stream_t *s, uint32_t remote_id);

// Injects a raw datagram as if it arrived at node (now).
void
sim_inject (sim_t *sim, int node, const uint8_t *buf, size_t len);

// Runs until done(ctx) is true, nothing is pending, or max_us of sim time.
// Returns true if done() became true.
bool
sim_run (sim_t *sim, bool (*done)(sim_t *, void *), void *ctx, uint64_t max_us);

// Runs for a fixed span of simulated time.
void
sim_advance (sim_t *sim, uint64_t us);

// Writer: queue `total` bytes of test content (seeded), optionally END.
void
sim_app_write (udx_stream_t *s, uint64_t seed, uint64_t total, bool end);

// Reader: expect `total` bytes of test content from seed.
void
sim_app_expect (udx_stream_t *s, uint64_t seed, uint64_t total);

void
sim_app_pump (udx_stream_t *s);

void
sim_app_drain_reader (udx_stream_t *s);

static inline sim_app_t *
sim_app (udx_stream_t *s) {
  return (sim_app_t *) s->data;
}

// A transfer is complete when the reader saw EOF with the right hash.
bool
sim_done_eof (sim_t *sim, void *ctx);

bool
sim_done_closed (sim_t *sim, void *ctx);

// Two connected streams: a on node 0 (id 1), b on node 1 (id 2).
typedef struct {
  udx_stream_t *a;
  udx_stream_t *b;
} sim_pair_t;

sim_pair_t
sim_pair (sim_t *sim);

// Done tests for a pair (ctx: sim_pair_t *): b saw EOF; both closed.
bool
sim_done_b_eof (sim_t *sim, void *ctx);

bool
sim_done_both_closed (sim_t *sim, void *ctx);

#endif
