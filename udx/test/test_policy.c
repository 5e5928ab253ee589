// Transfer policies (policy.c) in simulated time: a limiter holds a stream to
// its rate, weights split a shared rate, an idle member gives its share up,
// a stream obeys the tightest of its limiters, and limiters outlive nothing.

#include "../src/policy.h"
#include "sim.h"
#include "test.h"

#define MB 1000000ull

typedef struct {
  udx_stream_t *a[4]; // senders on node 0
  udx_stream_t *b[4]; // receivers on node 1
  int n;
} pairs_t;

static void
pairs (sim_t *sim, pairs_t *p, int n) {
  p->n = n;
  for (int i = 0; i < n; i++) {
    p->a[i] = sim_stream(sim, 0, 10 + i);
    p->b[i] = sim_stream(sim, 1, 20 + i);
    sim_connect(sim, p->a[i], 20 + i);
    sim_connect(sim, p->b[i], 10 + i);
  }
}

// Sends `total` bytes on pair i (the reader reads eagerly).
static void
send_bytes (pairs_t *p, int i, uint64_t total) {
  sim_app_expect(p->b[i], 100 + i, total);
  sim_app_write(p->a[i], 100 + i, total, false);
}

static uint64_t
got (pairs_t *p, int i) {
  return sim_app(p->b[i])->read;
}

// |x - want| <= want * tol
static void
check_near (const char *what, double x, double want, double tol) {
  double d = x > want ? x - want : want - x;
  if (getenv("UDX_TEST_VERBOSE"))
    fprintf(stderr, "%s: %.0f (expected %.0f)\n", what, x, want);
  if (d > want * tol) {
    fprintf(stderr, "%s: %.0f, expected %.0f +- %.0f%%\n", what, x, want, tol * 100);
    exit(1);
  }
}

static void
test_rate (void) {
  sim_t sim;
  sim_init(&sim, 1);
  pairs_t p;
  pairs(&sim, &p, 1);
  udx_limiter_t *l;
  CHECK_EQ(udx__limiter_init(&l, 1 * MB, 0), 0);
  CHECK_EQ(udx__limiter_add(l, p.a[0], 1), 0);
  send_bytes(&p, 0, 50 * MB);
  sim_advance(&sim, 4 * UDX_US_PER_S);
  // 4 s at 1 MB/s, plus the first burst
  check_near("bytes in 4 s at 1 MB/s", (double) got(&p, 0), 4.0 * MB, 0.1);
  udx_limiter_stats_t st;
  udx_limiter_get_stats(l, &st);
  CHECK_EQ(st.members, 1);
  CHECK_EQ(st.active, 1);
  CHECK(st.waits > 0);
  CHECK(st.bytes >= got(&p, 0));

  // a new rate takes effect at once
  uint64_t before = got(&p, 0);
  CHECK_EQ(udx__limiter_set_rate(l, 3 * MB, 0), 0);
  sim_advance(&sim, 2 * UDX_US_PER_S);
  check_near("bytes in 2 s at 3 MB/s", (double) (got(&p, 0) - before), 6.0 * MB, 0.1);

  // removed: no limit
  before = got(&p, 0);
  CHECK_EQ(udx__limiter_remove(l, p.a[0]), 0);
  CHECK_EQ(udx__limiter_remove(l, p.a[0]), UDX_ERR_NOENT);
  sim_advance(&sim, 1 * UDX_US_PER_S);
  CHECK(got(&p, 0) - before > 10 * MB);
  udx_limiter_release(l);
  sim_destroy(&sim);
}

static void
test_weights (void) {
  sim_t sim;
  sim_init(&sim, 2);
  pairs_t p;
  pairs(&sim, &p, 2);
  udx_limiter_t *l;
  CHECK_EQ(udx__limiter_init(&l, 4 * MB, 0), 0);
  CHECK_EQ(udx__limiter_add(l, p.a[0], 3), 0);
  CHECK_EQ(udx__limiter_add(l, p.a[1], 1), 0);
  send_bytes(&p, 0, 100 * MB);
  send_bytes(&p, 1, 100 * MB);
  sim_advance(&sim, 5 * UDX_US_PER_S);
  double g0 = (double) got(&p, 0), g1 = (double) got(&p, 1);
  check_near("total at 4 MB/s for 5 s", g0 + g1, 20.0 * MB, 0.1);
  check_near("share of weight 3 in 3:1", g0 / (g0 + g1), 0.75, 0.08);
  udx_limiter_release(l);
  sim_destroy(&sim);
}

// The member with little to send stops counting once it is done: the other
// gets the whole rate.
static void
test_idle_share (void) {
  sim_t sim;
  sim_init(&sim, 3);
  pairs_t p;
  pairs(&sim, &p, 2);
  udx_limiter_t *l;
  CHECK_EQ(udx__limiter_init(&l, 2 * MB, 0), 0);
  CHECK_EQ(udx__limiter_add(l, p.a[0], 1), 0);
  CHECK_EQ(udx__limiter_add(l, p.a[1], 1), 0);
  send_bytes(&p, 0, 1 * MB);
  send_bytes(&p, 1, 100 * MB);
  sim_advance(&sim, 6 * UDX_US_PER_S);
  CHECK_EQ(got(&p, 0), 1 * MB);
  // 1 s at half the rate each, then 5 s at all of it: 12 MB in 6 s
  check_near("bytes of the busy member", (double) (got(&p, 0) + got(&p, 1)), 12.0 * MB, 0.1);
  udx_limiter_stats_t st;
  udx_limiter_get_stats(l, &st);
  CHECK_EQ(st.active, 1);
  udx_limiter_release(l);
  sim_destroy(&sim);
}

// A stream in two limiters runs at the tighter one; the other member of the
// shared one takes the rest.
static void
test_nested (void) {
  sim_t sim;
  sim_init(&sim, 4);
  pairs_t p;
  pairs(&sim, &p, 2);
  udx_limiter_t *own, *shared;
  CHECK_EQ(udx__limiter_init(&own, 1 * MB, 0), 0);
  CHECK_EQ(udx__limiter_init(&shared, 4 * MB, 0), 0);
  CHECK_EQ(udx__limiter_add(own, p.a[0], 1), 0);
  CHECK_EQ(udx__limiter_add(shared, p.a[0], 1), 0);
  CHECK_EQ(udx__limiter_add(shared, p.a[1], 1), 0);
  send_bytes(&p, 0, 100 * MB);
  send_bytes(&p, 1, 100 * MB);
  sim_advance(&sim, 4 * UDX_US_PER_S);
  check_near("stream under its own 1 MB/s", (double) got(&p, 0), 4.0 * MB, 0.12);
  // the shared limiter splits 2:2 by weight; stream 1 cannot use stream 0's
  // unused share (shares follow weights, not use)
  check_near("stream at half of 4 MB/s", (double) got(&p, 1), 8.0 * MB, 0.12);
  udx_limiter_release(own);
  udx_limiter_release(shared);
  sim_destroy(&sim);
}

// Limiters hold references: a released limiter lives while streams use it,
// a finalized stream leaves it, and bad arguments are refused.
static void
test_lifetime (void) {
  sim_t sim;
  sim_init(&sim, 5);
  pairs_t p;
  pairs(&sim, &p, 1);
  udx_limiter_t *ls[UDX_LIMITS_MAX + 1];
  for (int i = 0; i <= UDX_LIMITS_MAX; i++)
    CHECK_EQ(udx__limiter_init(&ls[i], 1 * MB, 0), 0);
  for (int i = 0; i < UDX_LIMITS_MAX; i++)
    CHECK_EQ(udx__limiter_add(ls[i], p.a[0], 1), 0);
  CHECK_EQ(udx__limiter_add(ls[UDX_LIMITS_MAX], p.a[0], 1), UDX_ERR_NOSPC);
  CHECK_EQ(udx__limiter_add(ls[0], p.a[0], 0), UDX_ERR_INVAL);
  CHECK_EQ(udx__limiter_add(ls[0], p.a[0], 5), 0); // a new weight
  CHECK_EQ(udx__limiter_remove(ls[UDX_LIMITS_MAX], p.a[0]), UDX_ERR_NOENT);
  CHECK_EQ(udx__limiter_remove(ls[1], p.a[0]), 0); // from the middle
  for (int i = 0; i <= UDX_LIMITS_MAX; i++)
    udx_limiter_release(ls[i]);
  send_bytes(&p, 0, 2 * MB);
  sim_advance(&sim, 3 * UDX_US_PER_S);
  CHECK_EQ(got(&p, 0), 2 * MB);
  // the stream goes; its limiters go with it (ASan/valgrind see leaks)
  udx__stream_destroy(p.a[0], sim.now);
  sim_advance(&sim, 1 * UDX_US_PER_S);
  sim_destroy(&sim);
}

// A limiter that does not bind (the link is slower) stays out of the way: the
// stream is held back by its window, and no policy wake-up is left armed
// from an old debt.
static void
test_not_binding (void) {
  sim_t sim;
  sim_init(&sim, 6);
  sim.link[0].rate = 1 * MB;
  sim.link[0].queue_bytes = 64 * 1024;
  pairs_t p;
  pairs(&sim, &p, 1);
  udx_limiter_t *l;
  CHECK_EQ(udx__limiter_init(&l, 2 * MB, 0), 0);
  CHECK_EQ(udx__limiter_add(l, p.a[0], 1), 0);
  send_bytes(&p, 0, 100 * MB);
  int held = 0;
  for (int i = 0; i < 40; i++) {
    sim_advance(&sim, 100 * UDX_US_PER_MS);
    // the window holds the stream back, never the (idle) limiter
    if (p.a[0]->policy->blocked)
      held++;
  }
  CHECK_EQ(held, 0);
  check_near("bytes at the 1 MB/s link", (double) got(&p, 0), 4.0 * MB, 0.15);
  udx_limiter_release(l);
  sim_destroy(&sim);
}

static const test_case_t cases[] = {
    {"rate", test_rate},
    {"weights", test_weights},
    {"idle_share", test_idle_share},
    {"nested", test_nested},
    {"lifetime", test_lifetime},
    {"not_binding", test_not_binding},
    {NULL, NULL},
};

int
main (int argc, char **argv) {
  return test_main(argc, argv, cases);
}
