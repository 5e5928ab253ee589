// Hostile input: nothing a peer (or anyone who can send it a datagram) does
// may crash, assert, stall the engine or make it hold unbounded memory.

#include "sim.h"
#include "tap.h"
#include "test.h"

// Internal consistency of a stream's send state.
static void
check_invariants (udx_stream_t *s) {
  uint32_t outstanding = s->snd_nxt - s->snd_una;
  CHECK(outstanding <= s->pkts_cap || outstanding == 0);
  uint32_t inflight = 0, lost = 0, sacked = 0;
  for (uint32_t seq = s->snd_una; seq != s->snd_nxt; seq++) {
    udx_pkt_t *p = udx__pkt(s, seq);
    if (p == NULL)
      continue;
    if (p->flags & UDX_PKT_INFLIGHT)
      inflight++;
    if (p->flags & UDX_PKT_LOST)
      lost++;
    if (p->flags & UDX_PKT_SACKED)
      sacked++;
    CHECK(!((p->flags & UDX_PKT_INFLIGHT) && (p->flags & (UDX_PKT_LOST | UDX_PKT_SACKED))));
  }
  CHECK_EQ(inflight, s->inflight);
  CHECK_EQ(lost, s->lost_pending);
  CHECK_EQ(sacked, s->sacked);
  CHECK(s->ooo_count <= (1u << 16));
  CHECK(s->sndq.start <= s->snd_pkt_off && s->snd_pkt_off <= s->sndq.end);
}

// A SACK range that crosses 2^32 is valid when the window does.
static void
test_sack_across_wrap (void) {
  sim_t sim;
  sim_init(&sim, 1);
  sim.link[0].loss = 1.0;
  udx_stream_t *a = sim_stream(&sim, 0, 1);
  sim_stream(&sim, 1, 2);
  uint32_t start = 0xfffffffau;
  a->snd_una = a->snd_nxt = a->snd_wl2 = a->rack_fack = a->high_seq = start;
  sim_connect(&sim, a, 2);
  sim_app_write(a, 1, 20000, false);
  sim_advance(&sim, 1000);
  CHECK_EQ(a->snd_nxt, start + 10); // 0x4: the window crosses the wrap
  uint8_t pkt[20 + 2 * 8];
  udx__wire_header(pkt, UDX_HEADER_SACK, 0, 1, 1 << 20, 0, start);
  udx__wire_put_sack(pkt + 20, 0, 0xfffffffcu, 0x2);  // 6 packets over the wrap
  udx__wire_put_sack(pkt + 20, 1, 0xfffffff0u, 0x10); // wider than what is in flight
  sim_inject(&sim, 0, pkt, sizeof(pkt));
  CHECK_EQ(a->sacked, 6);
  CHECK_EQ(a->stats.dropped_sacks, 1);
  check_invariants(a);
  sim_destroy(&sim);
}

// DATA at seq 0xffffffff: old when rcv_nxt is 0, in window when just below.
static void
test_data_seq_ffffffff (void) {
  sim_t sim;
  sim_init(&sim, 2);
  tap_t tap;
  tap_attach(&sim, &tap);
  sim_pair_t p = sim_pair(&sim);
  sim_app(p.b)->reading = false;
  uint8_t pkt[64];
  size_t n = mk_pkt(pkt, UDX_HEADER_DATA, 0, 2, 1 << 20, 0xffffffffu, 0, "x", 1);
  sim_inject(&sim, 1, pkt, n);
  CHECK_EQ(p.b->rcv_nxt, 0);
  CHECK_EQ(p.b->ooo_count, 0);
  CHECK_EQ(tap.acks[1], 1); // a duplicate is acked again

  p.b->rcv_nxt = 0xfffffff0u;
  sim_inject(&sim, 1, pkt, n);
  CHECK_EQ(p.b->ooo_count, 1);
  for (uint32_t seq = 0xfffffff0u; seq != 0xffffffffu; seq++) {
    n = mk_pkt(pkt, UDX_HEADER_DATA, 0, 2, 1 << 20, seq, 0, "y", 1);
    sim_inject(&sim, 1, pkt, n);
  }
  CHECK_EQ(p.b->rcv_nxt, 0);
  CHECK_EQ(udx__bufq_len(&p.b->rdq), 16);
  CHECK_EQ(p.b->ooo_count, 0);
  sim_destroy(&sim);
}

// Malformed: data_offset past the end, truncated headers, wrong magic or
// version. Counted and dropped.
static void
test_malformed (void) {
  sim_t sim;
  sim_init(&sim, 3);
  sim_pair_t p = sim_pair(&sim);
  uint8_t pkt[64];
  size_t n = mk_pkt(pkt, UDX_HEADER_DATA, 40, 2, 1 << 20, 0, 0, "abc", 3);
  udx__stream_recv(p.b, pkt, n, sim.now);
  CHECK_EQ(p.b->stats.malformed, 1);
  CHECK_EQ(p.b->rcv_nxt, 0);
  for (size_t len = 0; len < UDX_HEADER_SIZE; len++) {
    udx__stream_recv(p.b, pkt, len, sim.now);
  }
  CHECK_EQ(p.b->stats.malformed, 1 + UDX_HEADER_SIZE);
  // through the demultiplexer these are not UDX at all: raw datagrams
  uint64_t raw = sim.raw[1];
  sim_inject(&sim, 1, pkt, 19);
  pkt[0] = 0xfe;
  sim_inject(&sim, 1, pkt, 23);
  pkt[0] = 0xff;
  pkt[1] = 2;
  sim_inject(&sim, 1, pkt, 23);
  CHECK_EQ(sim.raw[1], raw + 3);
  CHECK_EQ(p.b->rcv_nxt, 0);
  sim_destroy(&sim);
}

// DESTROY below rcv_nxt is stale and ignored.
static void
test_destroy_old_seq (void) {
  sim_t sim;
  sim_init(&sim, 4);
  sim_pair_t p = sim_pair(&sim);
  sim_app_expect(p.b, 1, 20000);
  sim_app_write(p.a, 1, 20000, false);
  sim_advance(&sim, 200000);
  uint32_t nxt = p.b->rcv_nxt;
  CHECK(nxt > 5);
  uint8_t pkt[20];
  udx__wire_header(pkt, UDX_HEADER_DESTROY, 0, 2, 0, nxt - 3, 0);
  sim_inject(&sim, 1, pkt, 20);
  sim_advance(&sim, 1000);
  CHECK_EQ(sim_app(p.b)->closed, 0);
  udx__wire_header(pkt, UDX_HEADER_DESTROY, 0, 2, 0, nxt, 0);
  sim_inject(&sim, 1, pkt, 20);
  sim_advance(&sim, 1000);
  CHECK_EQ(sim_app(p.b)->close_status, UDX_ERR_CONNRESET);
  sim_destroy(&sim);
}

// A flood of duplicates: delivered once, acked each time, nothing grows.
static void
test_duplicate_flood (void) {
  sim_t sim;
  sim_init(&sim, 5);
  tap_t tap;
  tap_attach(&sim, &tap);
  sim_pair_t p = sim_pair(&sim);
  sim_app(p.b)->reading = false;
  uint8_t pkt[1200];
  static const uint8_t zeros[1000];
  size_t n = mk_pkt(pkt, UDX_HEADER_DATA, 0, 2, 1 << 20, 3, 0, zeros, 1000);
  for (int i = 0; i < 10000; i++)
    sim_inject(&sim, 1, pkt, n);
  CHECK_EQ(p.b->ooo_count, 1);
  CHECK_EQ(p.b->ooo_bytes, 1000);
  CHECK_EQ(tap.sack_acks[1], 10000);
  n = mk_pkt(pkt, UDX_HEADER_DATA, 0, 2, 1 << 20, 0, 0, zeros, 1000);
  for (int i = 0; i < 10000; i++)
    sim_inject(&sim, 1, pkt, n);
  CHECK_EQ(udx__bufq_len(&p.b->rdq), 1000);
  CHECK_EQ(p.b->rcv_nxt, 1);
  sim_destroy(&sim);
}

// Tiny out-of-order packets to a stream that closed gracefully: it keeps
// their places (to ack and reach the END) but no buffer for their bytes,
// which it would drop anyway; the slots it held at close go back too.
static void
test_closing_ooo_tiny (void) {
  sim_t sim;
  sim_init(&sim, 13);
  sim_pair_t p = sim_pair(&sim);
  sim_app(p.b)->reading = false;
  uint8_t pkt[64];
  static const uint8_t bytes[20];
  // open: one out-of-order packet above a gap takes a slot buffer
  size_t n = mk_pkt(pkt, UDX_HEADER_DATA, 0, 2, 1 << 20, 1, 0, bytes, 20);
  sim_inject(&sim, 1, pkt, n);
  CHECK_EQ(p.b->ooo_count, 1);
  CHECK_EQ(p.b->ooo_bytes, 20);
  uint64_t allocs = p.b->pool->slots.allocs;
  uint32_t nfree = p.b->pool->slots.nfree;
  CHECK_EQ(udx__stream_shutdown(p.b, 60000, sim.now), 0);
  CHECK_EQ(p.b->ooo_bytes, 0);
  CHECK_EQ(p.b->pool->slots.nfree, nfree + 1); // its buffer went back
  for (uint32_t seq = 2; seq < 4000; seq++) {
    n = mk_pkt(pkt, UDX_HEADER_DATA, 0, 2, 1 << 20, seq, 0, bytes, 20);
    sim_inject(&sim, 1, pkt, n);
  }
  CHECK_EQ(p.b->ooo_count, 3999);
  CHECK_EQ(p.b->ooo_bytes, 0);
  CHECK_EQ(p.b->pool->slots.allocs, allocs); // no buffer for any of them
  CHECK_EQ(p.b->pool->slots.nfree, nfree + 1);
  // the gap fills: all 4000 are delivered (and dropped) in order
  n = mk_pkt(pkt, UDX_HEADER_DATA, 0, 2, 1 << 20, 0, 0, bytes, 20);
  sim_inject(&sim, 1, pkt, n);
  CHECK_EQ(p.b->rcv_nxt, 4000);
  CHECK_EQ(p.b->ooo_count, 0);
  CHECK_EQ(udx__bufq_len(&p.b->rdq), 0);
  check_invariants(p.b);
  sim_destroy(&sim);
}

// Sequence numbers far ahead are dropped, not buffered.
static void
test_far_ahead (void) {
  sim_t sim;
  sim_init(&sim, 6);
  sim_pair_t p = sim_pair(&sim);
  sim_app(p.b)->reading = false;
  uint8_t pkt[64];
  uint32_t seqs[] = {5000, 1000000, 0x7fffffffu, 0x80000000u, 0xfffff000u};
  for (size_t i = 0; i < sizeof(seqs) / sizeof(seqs[0]); i++) {
    size_t n = mk_pkt(pkt, UDX_HEADER_DATA, 0, 2, 1 << 20, seqs[i], 0, "zz", 2);
    sim_inject(&sim, 1, pkt, n);
  }
  CHECK_EQ(p.b->ooo_count, 0);
  CHECK(p.b->ooo_cap <= 64);
  CHECK_EQ(p.b->nranges, 0);
  sim_destroy(&sim);
}

// An ACK for data never sent is ignored.
static void
test_ack_beyond_snd_nxt (void) {
  sim_t sim;
  sim_init(&sim, 7);
  sim.link[0].loss = 1.0;
  sim_pair_t p = sim_pair(&sim);
  sim_app_write(p.a, 1, 5000, false);
  sim_advance(&sim, 1000);
  uint32_t nxt = p.a->snd_nxt;
  uint8_t pkt[20];
  udx__wire_header(pkt, 0, 0, 1, 1 << 20, 0, nxt + 1000);
  sim_inject(&sim, 0, pkt, 20);
  CHECK_EQ(p.a->snd_una, 0);
  CHECK_EQ(p.a->stats.malformed, 1);
  check_invariants(p.a);
  sim_destroy(&sim);
}

// 255 overlapping SACK ranges over a large window: bounded work, each
// packet counted once.
static void
test_sack_overlap_flood (void) {
  sim_t sim;
  sim_init(&sim, 8);
  sim.link[0].loss = 1.0;
  sim_pair_t p = sim_pair(&sim);
  p.a->cwnd = 2000;
  p.a->pacing_rate = 1000000000;
  p.a->tokens = 1 << 30;
  static uint8_t data[2 << 20];
  CHECK(udx__stream_write(p.a, data, sizeof(data), false, sim.now) >= 0);
  sim_advance(&sim, 1000);
  uint32_t n = p.a->snd_nxt - p.a->snd_una;
  CHECK(n > 1000);
  static uint8_t pkt[20 + 255 * 8];
  udx__wire_header(pkt, UDX_HEADER_SACK, 0, 1, 1 << 20, 0, 0);
  for (int i = 0; i < 255; i++)
    udx__wire_put_sack(pkt + 20, (uint32_t) i, 1, p.a->snd_nxt);
  sim_inject(&sim, 0, pkt, sizeof(pkt));
  CHECK_EQ(p.a->sacked, n - 1);
  CHECK_EQ(p.a->stats.delivered, n - 1);
  check_invariants(p.a);
  sim_destroy(&sim);
}

// Everything, END included, SACKed from snd_una, then acked cumulatively:
// nothing is newly delivered by the ACK, yet our END and the flush point are
// acked then (finish and flush complete; before, they waited forever).
static void
test_sack_then_cumulative_ack (void) {
  sim_t sim;
  sim_init(&sim, 12);
  sim.link[0].loss = 1.0;
  sim_pair_t p = sim_pair(&sim);
  sim_app_write(p.a, 1, 5000, true);
  sim_advance(&sim, 1000);
  CHECK(udx__stream_flush_request(p.a) == 0);
  uint32_t una = p.a->snd_una, nxt = p.a->snd_nxt;
  CHECK(p.a->status & UDX_S_END_SENT);
  CHECK(nxt - una >= 2);
  uint8_t pkt[20 + 8];
  udx__wire_header(pkt, UDX_HEADER_SACK, 0, 1, 1 << 20, 0, una);
  udx__wire_put_sack(pkt + 20, 0, una, nxt);
  sim_inject(&sim, 0, pkt, sizeof(pkt));
  CHECK_EQ(p.a->sacked, nxt - una);
  sim_app_t *app = p.a->data;
  CHECK_EQ(app->finishes, 0);
  udx__wire_header(pkt, 0, 0, 1, 1 << 20, 0, nxt);
  sim_inject(&sim, 0, pkt, 20);
  CHECK_EQ(p.a->snd_una, nxt);
  CHECK_EQ(app->finishes, 1);
  CHECK_EQ(app->flushes, 1);
  CHECK(p.a->status & UDX_S_ENDED);
  CHECK_EQ(p.a->rto_at, UDX_NEVER);
  check_invariants(p.a);
  sim_destroy(&sim);
}

// END fixes the end: data past it and a second END elsewhere are ignored.
static void
test_end_conflicts (void) {
  sim_t sim;
  sim_init(&sim, 9);
  sim_pair_t p = sim_pair(&sim);
  sim_app(p.b)->reading = false;
  uint8_t pkt[64];
  size_t n = mk_pkt(pkt, UDX_HEADER_END, 0, 2, 1 << 20, 5, 0, NULL, 0);
  sim_inject(&sim, 1, pkt, n);
  n = mk_pkt(pkt, UDX_HEADER_DATA, 0, 2, 1 << 20, 7, 0, "q", 1);
  sim_inject(&sim, 1, pkt, n);
  n = mk_pkt(pkt, UDX_HEADER_END, 0, 2, 1 << 20, 3, 0, NULL, 0);
  sim_inject(&sim, 1, pkt, n);
  CHECK_EQ(p.b->ooo_count, 1);
  CHECK_EQ(p.b->remote_end_seq, 5);
  for (uint32_t seq = 0; seq < 5; seq++) {
    n = mk_pkt(pkt, UDX_HEADER_DATA, 0, 2, 1 << 20, seq, 0, "d", 1);
    sim_inject(&sim, 1, pkt, n);
  }
  CHECK(p.b->status & UDX_S_ENDED_REMOTE);
  CHECK_EQ(udx__bufq_len(&p.b->rdq), 5);
  n = mk_pkt(pkt, UDX_HEADER_DATA, 0, 2, 1 << 20, 6, 0, "q", 1);
  sim_inject(&sim, 1, pkt, n);
  CHECK_EQ(udx__bufq_len(&p.b->rdq), 5);
  sim_destroy(&sim);
}

// HEARTBEAT floods are answered one for one and change nothing else.
static void
test_heartbeat_flood (void) {
  sim_t sim;
  sim_init(&sim, 10);
  tap_t tap;
  tap_attach(&sim, &tap);
  sim_pair_t p = sim_pair(&sim);
  uint8_t pkt[20];
  udx__wire_header(pkt, UDX_HEADER_HEARTBEAT, 0, 2, 0, 12345, 999999);
  for (int i = 0; i < 5000; i++)
    sim_inject(&sim, 1, pkt, 20);
  CHECK_EQ(tap.acks[1], 5000);
  CHECK_EQ(p.b->send_rwnd, UDX_DEFAULT_RWND_MAX); // its rwnd (0) was not used
  sim_destroy(&sim);
}

// Garbage that is not for a stream does not disturb a transfer.
static void
test_garbage_during_transfer (void) {
  sim_t sim;
  sim_init(&sim, 11);
  sim.link[0].loss = 0.01;
  sim_pair_t p = sim_pair(&sim);
  sim_app_expect(p.b, 4, 1 << 20);
  sim_app_write(p.a, 4, 1 << 20, true);
  uint64_t rng = 99;
  uint8_t pkt[1500];
  while (!sim_app(p.b)->eof && sim.now < 30 * UDX_US_PER_S) {
    sim_advance(&sim, 1000);
    for (int i = 0; i < 5; i++) {
      size_t len = udx__rand_next(&rng) % sizeof(pkt);
      for (size_t j = 0; j < len; j++)
        pkt[j] = (uint8_t) udx__rand_next(&rng);
      if (len >= 8 && (i & 1)) {
        pkt[0] = 0xff;
        pkt[1] = 1;
        udx__write_u32(pkt + 4, 77 + i); // UDX-looking, unknown id
      }
      sim_inject(&sim, (int) (udx__rand_next(&rng) & 1), pkt, len);
    }
  }
  CHECK(sim_app(p.b)->eof);
  CHECK(sim_app(p.b)->hash == sim_app(p.b)->expect_hash);
  sim_destroy(&sim);
}

static void
discard_reader (udx_stream_t *s) {
  uint8_t buf[65536];
  while (udx__stream_read(s, buf, sizeof(buf), sim_app(s)->sim->now) > 0) {
  }
}

// Random mutations of live packets (with the right ids) at both ends: no
// crash, no inconsistency, bounded memory. (Forged packets may end or
// confuse a stream: UDX has no authentication.)
static void
test_fuzz_mutations (void) {
  for (uint64_t seed = 1; seed <= 20; seed++) {
    sim_t sim;
    sim_init(&sim, seed);
    sim.link[0].loss = 0.02;
    sim.link[1].loss = 0.02;
    sim_pair_t p = sim_pair(&sim);
    p.a->cb.on_readable = discard_reader;
    p.b->cb.on_readable = discard_reader;
    sim_app_write(p.a, 4, 200000, true);
    sim_app_write(p.b, 0, 0, true);
    uint64_t rng = seed * 7919;
    uint8_t pkt[1500];
    for (int step = 0; step < 300 && !(sim_app(p.a)->closed && sim_app(p.b)->closed); step++) {
      sim_advance(&sim, 2000);
      int node = (int) (udx__rand_next(&rng) & 1);
      size_t len = 20 + udx__rand_next(&rng) % 200;
      udx__wire_header(pkt, (uint8_t) (udx__rand_next(&rng) & 0x3f), (uint8_t) udx__rand_next(&rng), node ? 2 : 1, (uint32_t) udx__rand_next(&rng), node ? p.b->rcv_nxt + (uint32_t) (udx__rand_next(&rng) % 64) - 8 : (uint32_t) udx__rand_next(&rng), node ? (uint32_t) udx__rand_next(&rng) : p.a->snd_una + (uint32_t) (udx__rand_next(&rng) % 32));
      pkt[2] &= (uint8_t) ~UDX_HEADER_DESTROY;
      for (size_t j = 20; j < len; j++)
        pkt[j] = (uint8_t) udx__rand_next(&rng);
      sim_inject(&sim, node, pkt, len);
      if (!udx__stream_dead(p.a))
        check_invariants(p.a);
      if (!udx__stream_dead(p.b))
        check_invariants(p.b);
      CHECK(udx__bufq_len(&p.b->rdq) + p.b->ooo_bytes < (8u << 20));
    }
    sim_destroy(&sim);
  }
}

// Without a read limit the maximum window still bounds what an unread
// stream holds against a sender that ignores the window.
static void
test_unread_default_bound (void) {
  sim_t sim;
  sim_init(&sim, 12);
  sim_pair_t p = sim_pair(&sim);
  sim_app(p.b)->reading = false;
  static uint8_t pkt[20 + 1000];
  static const uint8_t payload[1000];
  for (uint32_t seq = 0; seq < 6000; seq++) {
    size_t n = mk_pkt(pkt, UDX_HEADER_DATA, 0, 2, 1 << 20, seq, 0, payload, 1000);
    sim_inject(&sim, 1, pkt, n);
  }
  CHECK(udx__bufq_len(&p.b->rdq) <= UDX_DEFAULT_RWND_MAX + 1000);
  CHECK(udx__bufq_len(&p.b->rdq) >= UDX_DEFAULT_RWND_MAX);
  CHECK_EQ(udx__bufq_len(&p.b->rdq), (uint64_t) p.b->rcv_nxt * 1000);
  CHECK_EQ(udx__recv_rwnd(p.b), 0);
  sim_destroy(&sim);
}

static const test_case_t cases[] = {
    {"unread_default_bound", test_unread_default_bound},
    {"sack_across_wrap", test_sack_across_wrap},
    {"data_seq_ffffffff", test_data_seq_ffffffff},
    {"malformed", test_malformed},
    {"destroy_old_seq", test_destroy_old_seq},
    {"duplicate_flood", test_duplicate_flood},
    {"far_ahead", test_far_ahead},
    {"closing_ooo_tiny", test_closing_ooo_tiny},
    {"ack_beyond_snd_nxt", test_ack_beyond_snd_nxt},
    {"sack_overlap_flood", test_sack_overlap_flood},
    {"sack_then_cumulative_ack", test_sack_then_cumulative_ack},
    {"end_conflicts", test_end_conflicts},
    {"heartbeat_flood", test_heartbeat_flood},
    {"garbage_during_transfer", test_garbage_during_transfer},
    {"fuzz_mutations", test_fuzz_mutations},
    {NULL, NULL},
};

int
main (int argc, char **argv) {
  return test_main(argc, argv, cases);
}
