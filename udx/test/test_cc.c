// Congestion control, pacing and MTU search in simulated time.

#include "sim.h"
#include "tap.h"
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

static pair_t
pair_ex (sim_t *sim, int link_mtu, bool ipv6) {
  pair_t p = {sim_stream(sim, 0, 1), sim_stream(sim, 1, 2)};
  sim_connect_ex(sim, p.a, 2, link_mtu, ipv6);
  sim_connect_ex(sim, p.b, 1, link_mtu, ipv6);
  return p;
}

// --- BBR walks STARTUP -> DRAIN -> PROBE_BW, and PROBE_RTT after 10 s.

typedef struct {
  int seen[4];
  int first;
  int order[16];
  int norder;
  uint32_t last;
} states_t;

static states_t states;

static void
on_trace (udx_stream_t *s, uint64_t now, const udx_stream_stats_t *st) {
  UDX_UNUSED(s);
  UDX_UNUSED(now);
  uint32_t b = st->bbr_state;
  states.seen[b]++;
  if (states.norder == 0 || states.last != b) {
    if (states.norder < 16)
      states.order[states.norder++] = (int) b;
    states.last = b;
  }
}

static void
test_bbr_states (void) {
  sim_t sim;
  sim_init(&sim, 1);
  sim.link[0].rate = 1250000; // 10 Mbit/s
  sim.link[0].queue_bytes = 100000;
  sim.link[0].delay_us = 20000;
  sim.link[1].delay_us = 20000;
  pair_t p = pair_ex(&sim, 1500, false);
  memset(&states, 0, sizeof(states));
  p.a->trace_cb = on_trace;
  p.a->trace_ms = 10;
  p.a->trace_at = sim.now;
  uint64_t total = 16 << 20; // ~13 s at 10 Mbit/s
  sim_app_expect(p.b, 1, total);
  sim_app_write(p.a, 1, total, true);
  CHECK(sim_run(&sim, eof_b, &p, 60 * UDX_US_PER_S));
  CHECK(sim_app(p.b)->hash == sim_app(p.b)->expect_hash);
  CHECK_EQ(states.order[0], UDX_BBR_STATE_STARTUP);
  CHECK_EQ(states.order[1], UDX_BBR_STATE_DRAIN);
  CHECK_EQ(states.order[2], UDX_BBR_STATE_PROBE_BW);
  CHECK(states.seen[UDX_BBR_STATE_PROBE_RTT] > 0);
  // the estimate is near the bottleneck (payload bytes/s)
  uint64_t bw = p.a->stats.bbr_bw;
  CHECK(bw > 1000000 && bw < 1400000);
  // and the queue did not overflow much once past STARTUP
  CHECK(p.a->stats.retransmits < total / 1452 / 20);
  sim_destroy(&sim);
}

// --- Pacing: after a long idle period the burst is capped (libudx: tokens
// grow without bound, so only cwnd limits the first burst).

typedef struct {
  uint64_t from;
  uint64_t until;
  int count;
} burst_t;

static burst_t burst;
static sim_t *burst_sim;

static void
burst_tap (void *ctx, int from, const uint8_t *buf, size_t len) {
  UDX_UNUSED(ctx);
  udx_wire_pkt_t p;
  if (from != 0 || udx__wire_decode(buf, len, &p) != UDX_WIRE_OK)
    return;
  if ((p.type & UDX_HEADER_DATA) && burst_sim->now >= burst.from && burst_sim->now < burst.until)
    burst.count++;
}

static void
test_pacing_burst_cap (void) {
  sim_t sim;
  sim_init(&sim, 2);
  burst_sim = &sim;
  sim.tap = burst_tap;
  pair_t p = pair_ex(&sim, 1500, false);
  p.b->cb.on_readable = NULL;
  p.b->read_limit = 0;
  static uint8_t buf[1 << 20];
  CHECK(udx__stream_write(p.a, buf, sizeof(buf), false, sim.now) >= 0);
  sim_advance(&sim, 2 * UDX_US_PER_S);
  CHECK_EQ(p.a->snd_una, p.a->snd_nxt);
  uint32_t cwnd = p.a->cwnd;
  uint64_t rate = p.a->pacing_rate;
  sim_advance(&sim, 5 * UDX_US_PER_S); // idle
  burst.from = sim.now;
  burst.until = sim.now + 1; // what goes out at once
  burst.count = 0;
  CHECK(udx__stream_write(p.a, buf, sizeof(buf), false, sim.now) >= 0);
  sim_advance(&sim, 100);
  uint64_t cap_bytes = rate * p.a->pacing_burst_us / UDX_US_PER_S;
  int cap_pkts = (int) (cap_bytes / 1200) + 5;
  CHECK((uint32_t) cap_pkts < cwnd); // the cap is what limits here
  CHECK(burst.count > 0);
  CHECK(burst.count <= cap_pkts);
  sim_destroy(&sim);
}

// --- MTU search: 1200 -> 1424 -> 1500 with padded probes (a jump of 224,
// the most a 255-byte padding covers, then the rest).

static void
test_mtu_search (void) {
  sim_t sim;
  sim_init(&sim, 3);
  sim.link[0].rate = 5000000;
  tap_t tap;
  tap_attach(&sim, &tap);
  pair_t p = pair_ex(&sim, 1500, false);
  sim_app_expect(p.b, 1, 4 << 20);
  sim_app_write(p.a, 1, 4 << 20, true);
  CHECK(sim_run(&sim, eof_b, &p, 30 * UDX_US_PER_S));
  CHECK_EQ(p.a->mtu, 1500);
  CHECK_EQ(p.a->mtu_state, UDX_MTU_STATE_COMPLETE);
  CHECK_EQ(p.a->stats.max_payload, 1452);
  CHECK_EQ(tap.probes[0], 2); // 1424, 1500
  CHECK(!p.a->mtu_stepping);
  CHECK_EQ(tap.max_len[0], 1500 - 28);
  sim_destroy(&sim);
}

static void
test_mtu_ipv6 (void) {
  sim_t sim;
  sim_init(&sim, 4);
  sim.link[0].rate = 5000000;
  tap_t tap;
  tap_attach(&sim, &tap);
  pair_t p = pair_ex(&sim, 1500, true);
  CHECK_EQ(udx__max_payload(p.a), 1132);
  sim_app_expect(p.b, 1, 4 << 20);
  sim_app_write(p.a, 1, 4 << 20, true);
  CHECK(sim_run(&sim, eof_b, &p, 30 * UDX_US_PER_S));
  CHECK_EQ(p.a->mtu, 1500);
  CHECK_EQ(udx__max_payload(p.a), 1432);
  CHECK_EQ(tap.max_len[0], 1500 - 48);
  sim_destroy(&sim);
}

// Probes that never arrive: 3 failures end the search at 1200.
static bool
drop_big (void *ctx, const uint8_t *buf, size_t len) {
  UDX_UNUSED(ctx);
  UDX_UNUSED(buf);
  return len + 28 > 1200;
}

static void
test_mtu_probes_lost (void) {
  sim_t sim;
  sim_init(&sim, 5);
  sim.link[0].filter = drop_big;
  pair_t p = pair_ex(&sim, 1500, false);
  sim_app_expect(p.b, 1, 2 << 20);
  sim_app_write(p.a, 1, 2 << 20, true);
  CHECK(sim_run(&sim, eof_b, &p, 30 * UDX_US_PER_S));
  CHECK_EQ(p.a->mtu, 1200);
  CHECK_EQ(p.a->mtu_state, UDX_MTU_STATE_COMPLETE);
  CHECK_EQ(p.a->mtu_probe_count, 3);
  CHECK_EQ(p.a->stats.fast_recoveries, 0); // a lost probe is not congestion
  sim_destroy(&sim);
}

// A path MTU the jump overshoots (1400): the lost jump falls back to steps
// of 32 from 1200; 1424 is then lost 3 times and the search ends at 1392.
static bool
drop_over_1400 (void *ctx, const uint8_t *buf, size_t len) {
  UDX_UNUSED(ctx);
  UDX_UNUSED(buf);
  return len + 28 > 1400;
}

static void
test_mtu_jump_fallback (void) {
  sim_t sim;
  sim_init(&sim, 9);
  sim.link[0].rate = 5000000;
  sim.link[0].filter = drop_over_1400;
  pair_t p = pair_ex(&sim, 1500, false);
  sim_app_expect(p.b, 1, 4 << 20);
  sim_app_write(p.a, 1, 4 << 20, true);
  CHECK(sim_run(&sim, eof_b, &p, 30 * UDX_US_PER_S));
  CHECK(p.a->mtu_stepping);
  CHECK_EQ(p.a->mtu, 1392);
  CHECK_EQ(p.a->mtu_state, UDX_MTU_STATE_COMPLETE);
  CHECK_EQ(p.a->stats.fast_recoveries, 0); // lost probes are not congestion
  sim_destroy(&sim);
}

// The link MTU caps the search; a link at or below 1200 disables it.
static void
test_mtu_link_cap (void) {
  sim_t sim;
  sim_init(&sim, 6);
  sim.link[0].rate = 5000000;
  pair_t p = pair_ex(&sim, 1300, false);
  sim_app_expect(p.b, 1, 2 << 20);
  sim_app_write(p.a, 1, 2 << 20, true);
  CHECK(sim_run(&sim, eof_b, &p, 30 * UDX_US_PER_S));
  CHECK_EQ(p.a->mtu, 1300);
  sim_destroy(&sim);

  sim_init(&sim, 7);
  p = pair_ex(&sim, 1100, false);
  CHECK_EQ(p.a->mtu_state, UDX_MTU_STATE_COMPLETE);
  sim_app_expect(p.b, 1, 1 << 20);
  sim_app_write(p.a, 1, 1 << 20, true);
  CHECK(sim_run(&sim, eof_b, &p, 30 * UDX_US_PER_S));
  CHECK_EQ(p.a->mtu, 1200);
  sim_destroy(&sim);
}

// A peer that acks every packet (libudx, which reads datagrams into 2048
// bytes) is searched past 1500 where the link allows it (loopback): up to a
// 2048-byte UDP payload, then 2048 - 20 bytes of data per packet. A peer that
// coalesces ACKs, or a 1500-byte link, keeps the 1500 cap.
static void
mtu_peer_case (int link_mtu, bool ipv6, int ack_policy, uint64_t batch_us, uint32_t want_mtu, size_t want_len) {
  sim_t sim;
  sim_init(&sim, 31);
  sim.link[0].rate = 20000000;
  sim.link[0].batch_us = batch_us;
  tap_t tap;
  tap_attach(&sim, &tap);
  pair_t p = pair_ex(&sim, link_mtu, ipv6);
  CHECK_EQ(udx__stream_set_ack_policy(p.b, ack_policy), 0);
  sim_app_expect(p.b, 1, 8 << 20);
  sim_app_write(p.a, 1, 8 << 20, true);
  CHECK(sim_run(&sim, eof_b, &p, 30 * UDX_US_PER_S));
  CHECK(sim_app(p.b)->hash == sim_app(p.b)->expect_hash);
  CHECK_EQ(p.a->mtu, want_mtu);
  CHECK_EQ(p.a->mtu_state, UDX_MTU_STATE_COMPLETE);
  CHECK_EQ(tap.max_len[0], want_len);
  CHECK_EQ(p.a->stats.retransmits, 0);
  sim_destroy(&sim);
}

static void
test_mtu_peer_acks_each (void) {
  mtu_peer_case(65536, false, UDX_ACK_EACH, 0, 2048 + 28, 2048);
  mtu_peer_case(65536, true, UDX_ACK_EACH, 0, 2048 + 48, 2048);
  mtu_peer_case(1500, false, UDX_ACK_EACH, 0, 1500, 1500 - 28);
  // coalesced ACKs (receive batches of 1 ms): the cap stays
  mtu_peer_case(65536, false, UDX_ACK_BATCH, 1000, 1500, 1500 - 28);
}

// udx-native's probes: padding skipped through data_offset.
static void
test_accept_probe (void) {
  sim_t sim;
  sim_init(&sim, 8);
  pair_t p = pair_ex(&sim, 1500, false);
  sim_app_expect(p.b, 3, 1100);
  uint8_t pkt[20 + 200 + 1100];
  memset(pkt, 0, sizeof(pkt));
  udx__wire_header(pkt, UDX_HEADER_DATA | UDX_HEADER_END, 200, 2, 1 << 20, 0, 0);
  for (int i = 0; i < 1100; i++)
    pkt[220 + i] = test_byte(3, (uint64_t) i);
  sim_inject(&sim, 1, pkt, sizeof(pkt));
  CHECK(sim_app(p.b)->eof);
  CHECK_EQ(sim_app(p.b)->read, 1100);
  sim_destroy(&sim);
}

static const test_case_t cases[] = {
    {"bbr_states", test_bbr_states},
    {"pacing_burst_cap", test_pacing_burst_cap},
    {"mtu_search", test_mtu_search},
    {"mtu_ipv6", test_mtu_ipv6},
    {"mtu_probes_lost", test_mtu_probes_lost},
    {"mtu_jump_fallback", test_mtu_jump_fallback},
    {"mtu_link_cap", test_mtu_link_cap},
    {"accept_probe", test_accept_probe},
    {"mtu_peer_acks_each", test_mtu_peer_acks_each},
    {NULL, NULL},
};

int
main (int argc, char **argv) {
  return test_main(argc, argv, cases);
}
