#include "link.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

// splitmix64, to spread a small seed over the xorshift64* state
static uint64_t
splitmix64 (uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

double
pathemu_link_random (pathemu_link_t *link) {
  // xorshift64* (Vigna); the top 53 bits make the double
  uint64_t x = link->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  link->rng = x;
  return (double) ((x * 0x2545f4914f6cdd1dULL) >> 11) * 0x1.0p-53;
}

int
pathemu_link_init (pathemu_link_t *link, const pathemu_link_config_t *cfg, uint64_t seed) {
  memset(link, 0, sizeof(*link));
  link->cfg = *cfg;
  link->rng = splitmix64(seed);
  if (link->rng == 0)
    link->rng = 1;
  link->departs_cap = 1024;
  link->departs = malloc(link->departs_cap * sizeof(uint64_t));
  if (link->departs == NULL)
    return -ENOMEM;
  return 0;
}

void
pathemu_link_destroy (pathemu_link_t *link) {
  free(link->departs);
  link->departs = NULL;
}

void
pathemu_link_configure (pathemu_link_t *link, const pathemu_link_config_t *cfg) {
  link->cfg = *cfg;
}

static int
departs_push (pathemu_link_t *link, uint64_t t) {
  if (link->departs_len == link->departs_cap) {
    uint32_t cap = link->departs_cap * 2;
    uint64_t *d = malloc(cap * sizeof(uint64_t));
    if (d == NULL)
      return -ENOMEM;
    for (uint32_t i = 0; i < link->departs_len; i++) {
      d[i] = link->departs[(link->departs_head + i) % link->departs_cap];
    }
    free(link->departs);
    link->departs = d;
    link->departs_cap = cap;
    link->departs_head = 0;
  }
  link->departs[(link->departs_head + link->departs_len) % link->departs_cap] = t;
  link->departs_len++;
  return 0;
}

// One copy joins the bottleneck. Returns its delivery time, or 0 if the
// queue is full (tail drop).
static uint64_t
enqueue (pathemu_link_t *link, uint64_t now, size_t len) {
  const pathemu_link_config_t *c = &link->cfg;

  // datagrams whose serialization ended by now have left the queue
  while (link->departs_len > 0 && link->departs[link->departs_head] <= now) {
    link->departs_head = (link->departs_head + 1) % link->departs_cap;
    link->departs_len--;
  }

  uint64_t depart = now;
  if (c->rate_bps > 0) {
    if (c->queue_limit > 0 && link->departs_len >= c->queue_limit) {
      link->stats.dropped_queue++;
      return 0;
    }
    // serialization time in ns; the remainder of the division is carried
    // while the link stays busy, so back-to-back datagrams drift by nothing
    uint64_t bits = (uint64_t) (len + c->overhead) * 8;
    uint64_t start;
    if (link->link_free_ns > now) {
      start = link->link_free_ns;
    } else {
      start = now;
      link->rate_rem = 0;
    }
    uint64_t num = bits * 1000000000ULL + link->rate_rem;
    uint64_t tx_ns = num / c->rate_bps;
    link->rate_rem = num % c->rate_bps;
    depart = start + tx_ns;
    link->link_free_ns = depart;
    if (departs_push(link, depart) != 0) {
      link->stats.dropped_queue++;
      return 0;
    }
    if (link->departs_len > link->stats.max_queue)
      link->stats.max_queue = link->departs_len;
  }

  uint64_t deliver = depart + c->delay_ns;
  if (c->reorder > 0 && pathemu_link_random(link) < c->reorder) {
    deliver += c->reorder_delay_ns;
    link->stats.reordered++;
  }
  return deliver == 0 ? 1 : deliver;
}

int
pathemu_link_arrive (pathemu_link_t *link, uint64_t now_ns, size_t len, uint64_t deliver_ns[PATHEMU_MAX_COPIES]) {
  const pathemu_link_config_t *c = &link->cfg;
  link->stats.received++;

  if (c->loss > 0 && pathemu_link_random(link) < c->loss) {
    link->stats.dropped_loss++;
    return 0;
  }
  int copies = 1;
  if (c->dup > 0 && pathemu_link_random(link) < c->dup) {
    copies = 2;
    link->stats.duplicated++;
  }

  int n = 0;
  for (int i = 0; i < copies; i++) {
    uint64_t t = enqueue(link, now_ns, len);
    if (t != 0)
      deliver_ns[n++] = t;
  }
  return n;
}
