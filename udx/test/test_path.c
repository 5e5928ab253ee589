// Whole transfers over a simulated bottleneck like the bench path suite:
// 100 Mbit/s (IPv4 + UDP headers counted, as the bench runs ludx-pathemu),
// 40 ms RTT, a 1000-datagram queue, 0/1/5% random loss, 50 MB. What a
// sender achieves there, in simulated time: goodput (share of the link's
// payload rate, as `ludx bench path` counts it) and the median RTT it
// measures while transferring (the queue it builds), which must stay under
// 1.25x the idle RTT.
//
// Goodput has a ceiling below 100%: from an initial window of 10 packets
// doubling each round trip, Startup needs 6 round trips to fill the pipe
// (about 160 ms of link time lost), plus the first byte's one-way delay: at
// most ~96% for 50 MB. The thresholds are regression guards near what the
// engine reaches, with the random loss's own cost (5% of the link) below.
//
// `udx_test_path sweep` prints means over several seeds (PATH_SEEDS);
// PATH_VERBOSE=1 traces every 10 ms; PATH_QUEUE (packets), PATH_BATCH
// (arrival batches, us), PATH_ACKLOSS and PATH_SACK_CAP (ranges a receiver
// reports) vary the path.

#include <math.h>

#include "sim.h"
#include "test.h"

typedef struct {
  udx_stream_t *a;
  udx_stream_t *b;
} pair_t;

static bool
eof_b (sim_t *sim, void *ctx) {
  UDX_UNUSED(sim);
  return sim_app(((pair_t *) ctx)->b)->eof;
}

#define MAX_SAMPLES 20000

typedef struct {
  uint32_t rtt[MAX_SAMPLES];
  uint32_t n;
  sim_t *sim;
  bool verbose;
  uint64_t t0;
} trace_t;

static trace_t tr;

static void
on_trace (udx_stream_t *s, uint64_t now, const udx_stream_stats_t *st) {
  UDX_UNUSED(s);
  if (st->rtt_us && tr.n < MAX_SAMPLES)
    tr.rtt[tr.n++] = st->rtt_us;
  if (tr.verbose) {
    sim_link_t *l = &tr.sim->link[0];
    uint64_t q = l->busy_until > now ? (l->busy_until - now) * l->rate / UDX_US_PER_S : 0;
    q = q * 1472 / 1500;
    fprintf(stderr, "deficit=%5.1fms ", ((double) (now - tr.t0) / 1e6 - (double) s->bytes_acked / 12.1e6) * 1e3);
    fprintf(stderr, "t=%6.3f st=%u srtt=%6.2f minrtt=%6.2f bw=%6.2fMB/s pace=%6.2fMB/s cwnd=%5u infl=%5u q=%4llu pkts rtx=%llu mtu=%u\n", (now - tr.t0) / 1e6, st->bbr_state, st->rtt_us / 1e3, st->min_rtt_us / 1e3, st->bbr_bw / 1e6, st->pacing_rate / 1e6, st->cwnd, st->inflight, (unsigned long long) (q / 1472), (unsigned long long) st->retransmits, st->mtu);
  }
}

static int
cmp_u32 (const void *a, const void *b) {
  uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
  return x < y ? -1 : x > y;
}

typedef struct {
  double goodput_pct; // of 100 Mbit/s * 1452/1500, as the bench counts
  double rtt_med_ms;
  uint64_t retransmits;
} path_result_t;

// A receiver that reports only the first few SACK ranges (libudx reports
// 50): the others are reported late, once the holes below them fill.
static uint32_t sack_cap;

static size_t
cap_sacks (void *ctx, uint8_t *buf, size_t len) {
  UDX_UNUSED(ctx);
  if (len > UDX_HEADER_SIZE && (buf[2] & UDX_HEADER_SACK) && buf[3] == 0 && (len - UDX_HEADER_SIZE) / 8 > sack_cap)
    return UDX_HEADER_SIZE + 8 * sack_cap;
  return len;
}

static path_result_t
run_path (double loss, uint64_t seed, uint64_t total) {
  sim_t sim;
  sim_init(&sim, seed);
  // 100 Mbit/s counting IPv4 and UDP headers (as the bench runs
  // ludx-pathemu), 20 ms each way, 1000 full datagrams of queue.
  sim.link[0].rate = 12500000;
  sim.link[0].overhead = 28;
  sim.link[0].queue_bytes = (getenv("PATH_QUEUE") ? (uint64_t) atoi(getenv("PATH_QUEUE")) : 1000) * 1500;
  sim.link[0].delay_us = 20000;
  sim.link[1].delay_us = 20000;
  sim.link[0].loss = loss;
  if (getenv("PATH_ACKLOSS"))
    sim.link[1].loss = atof(getenv("PATH_ACKLOSS"));
  if (getenv("PATH_SACK_CAP")) {
    sack_cap = (uint32_t) atoi(getenv("PATH_SACK_CAP"));
    sim.link[1].rewrite = cap_sacks;
  }
  if (getenv("PATH_BATCH"))
    sim.link[0].batch_us = (uint64_t) atoi(getenv("PATH_BATCH"));
  pair_t p = {sim_stream(&sim, 0, 1), sim_stream(&sim, 1, 2)};
  sim_connect(&sim, p.a, 2);
  sim_connect(&sim, p.b, 1);
  memset(&tr, 0, sizeof(tr));
  tr.sim = &sim;
  tr.verbose = getenv("PATH_VERBOSE") != NULL;
  tr.t0 = sim.now;
  p.a->trace_cb = on_trace;
  p.a->trace_ms = 10;
  p.a->trace_at = sim.now;
  uint64_t t0 = sim.now;
  sim_app_expect(p.b, 1, total);
  sim_app_write(p.a, 1, total, true);
  CHECK(sim_run(&sim, eof_b, &p, 120 * UDX_US_PER_S));
  CHECK(sim_app(p.b)->hash == sim_app(p.b)->expect_hash);
  double secs = (double) (sim.now - t0) / 1e6;
  path_result_t r;
  r.goodput_pct = 100.0 * (double) total / secs / (100e6 / 8 * 1452 / 1500);
  qsort(tr.rtt, tr.n, sizeof(tr.rtt[0]), cmp_u32);
  r.rtt_med_ms = tr.n ? tr.rtt[(tr.n + 1) / 2 - 1] / 1e3 : 0;
  r.retransmits = p.a->stats.retransmits;
  fprintf(stderr, "startup exit %u, rto %llu tlp %llu fast recoveries %llu\n", p.a->bbr.startup_exit, (unsigned long long) p.a->stats.rto_count, (unsigned long long) p.a->stats.tlp_count, (unsigned long long) p.a->stats.fast_recoveries);
  fprintf(stderr, "loss %.0f%%: goodput %.1f%%, median RTT %.1f ms, %llu retransmits, %.2f s\n", loss * 100, r.goodput_pct, r.rtt_med_ms, (unsigned long long) r.retransmits, secs);
  sim_destroy(&sim);
  return r;
}

#define TOTAL (50ull << 20)

static void
test_clean (void) {
  path_result_t r = run_path(0, 1, TOTAL);
  CHECK(r.goodput_pct >= 94);
  CHECK(r.rtt_med_ms <= 50);
}

static void
test_loss_1pct (void) {
  path_result_t r = run_path(0.01, 2, TOTAL);
  CHECK(r.goodput_pct >= 92);
  CHECK(r.rtt_med_ms <= 50);
}

static void
test_loss_5pct (void) {
  path_result_t r = run_path(0.05, 3, TOTAL);
  CHECK(r.goodput_pct >= 86);
  CHECK(r.rtt_med_ms <= 50);
}

// Not in cases[] (not in ctest): goodput and RTT over several seeds (PATH_SEEDS, default 6).
static void
test_sweep (void) {
  int seeds = getenv("PATH_SEEDS") ? atoi(getenv("PATH_SEEDS")) : 6;
  double losses[3] = {0, 0.01, 0.05};
  for (int l = 0; l < 3; l++) {
    double sum = 0, min = 1e9, rtt = 0;
    for (int i = 0; i < seeds; i++) {
      path_result_t r = run_path(losses[l], 100 + (uint64_t) i, TOTAL);
      sum += r.goodput_pct;
      rtt += r.rtt_med_ms;
      if (r.goodput_pct < min)
        min = r.goodput_pct;
    }
    printf("loss %.0f%%: goodput mean %.1f%% min %.1f%%, median RTT mean %.1f ms\n", losses[l] * 100, sum / seeds, min, rtt / seeds);
  }
}

static const test_case_t cases[] = {
    {"clean", test_clean},
    {"loss_1pct", test_loss_1pct},
    {"loss_5pct", test_loss_5pct},
    {NULL, NULL},
};

int
main (int argc, char **argv) {
  // the sweep is run by hand, not listed for ctest
  if (argc > 1 && strcmp(argv[1], "sweep") == 0) {
    test_sweep();
    return 0;
  }
  return test_main(argc, argv, cases);
}
