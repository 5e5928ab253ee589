// One direction of an emulated path: seeded loss, duplication, a
// rate-limited FIFO bottleneck with a packet limit, propagation delay and
// reordering. Pure arithmetic over nanosecond timestamps; no I/O, so the
// same code drives the relay and can be reasoned about (or tested) alone.
#ifndef LUDX_PATHEMU_LINK_H
#define LUDX_PATHEMU_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint64_t rate_bps;    // bottleneck rate in bits/s; 0 = no limit
  uint64_t delay_ns;    // one-way propagation delay
  uint32_t queue_limit; // packets the bottleneck holds (incl. the one in service); 0 = no limit
  uint32_t overhead;    // bytes added to each datagram's size for the rate (e.g. 28 for IPv4+UDP)
  double loss;          // probability a datagram is dropped on arrival
  double dup;           // probability a datagram is sent twice
  double reorder;       // probability a datagram gets reorder_delay_ns extra delay
  uint64_t reorder_delay_ns;
} pathemu_link_config_t;

typedef struct {
  uint64_t received;  // datagrams that arrived at this direction
  uint64_t forwarded; // datagrams handed to the far side (duplicates included)
  uint64_t bytes_forwarded;
  uint64_t dropped_loss;
  uint64_t dropped_queue;
  uint64_t duplicated;
  uint64_t reordered;
  uint64_t dropped_no_peer; // nowhere to send: the far end's address is not known yet
  uint64_t send_errors;     // sendmmsg refused the datagram (counted, dropped)
  uint32_t max_queue;       // most packets ever in the bottleneck
  uint64_t late_ns_sum;     // how much later than scheduled datagrams left (sum, max)
  uint64_t late_ns_max;
} pathemu_link_stats_t;

typedef struct {
  pathemu_link_config_t cfg;
  pathemu_link_stats_t stats;
  uint64_t rng;          // xorshift64* state
  uint64_t link_free_ns; // when the bottleneck finishes its last scheduled datagram
  uint64_t rate_rem;     // remainder (bit-ns) of the last serialization time
  // departure times of the datagrams still in the bottleneck, a FIFO ring
  uint64_t *departs;
  uint32_t departs_cap;
  uint32_t departs_head;
  uint32_t departs_len;
} pathemu_link_t;

#define PATHEMU_MAX_COPIES 2

// Initialises a link; seed 0 is allowed. Returns 0 or -ENOMEM.
int
pathemu_link_init (pathemu_link_t *link, const pathemu_link_config_t *cfg, uint64_t seed);

void
pathemu_link_destroy (pathemu_link_t *link);

// Changes the settings of a running link; datagrams already scheduled keep
// their times.
void
pathemu_link_configure (pathemu_link_t *link, const pathemu_link_config_t *cfg);

// A datagram of len bytes arrives at now_ns. Writes the delivery times of the
// copies to send (0, 1 or 2) to deliver_ns and returns how many.
// Order of the rules, as in netem: loss, duplication, then each copy joins
// the bottleneck queue (tail drop when full), is serialized at the rate,
// then travels delay (+ the reorder delay, for the chosen ones).
int
pathemu_link_arrive (pathemu_link_t *link, uint64_t now_ns, size_t len, uint64_t deliver_ns[PATHEMU_MAX_COPIES]);

// Uniform double in [0, 1) from the link's generator.
double
pathemu_link_random (pathemu_link_t *link);

#endif
