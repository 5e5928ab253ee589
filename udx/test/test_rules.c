// Stream rules in simulated time, one case per rule: ACK policy, SACK ranges,
// write high-water mark, late packetisation, END half-close, DESTROY,
// MESSAGE, pre-connect data, keepalive, change_remote, seq/ack setup.

#include "sim.h"
#include "tap.h"
#include "test.h"

// libudx: one ACK for every DATA/END packet.
static void
test_ack_each (void) {
  sim_t sim;
  sim_init(&sim, 1);
  tap_t tap;
  tap_attach(&sim, &tap);
  sim_pair_t p = sim_pair(&sim);
  p.b->ack_policy = UDX_ACK_EACH;
  sim_app_expect(p.b, 3, 100000);
  sim_app_write(p.a, 3, 100000, true);
  CHECK(sim_run(&sim, sim_done_b_eof, &p, 5 * UDX_US_PER_S));
  sim_advance(&sim, 100000);
  int data_or_end = tap.data[0] + (tap.ends[0] - (tap.last_data_type[0] == 3 ? 1 : 0));
  CHECK(data_or_end > 50);
  CHECK_EQ(tap.acks[1], data_or_end);
  sim_destroy(&sim);
}

// UDX_ACK_BATCH (the default): one ACK per receive batch for in-order data.
static void
test_ack_batch (void) {
  sim_t sim;
  sim_init(&sim, 2);
  tap_t tap;
  tap_attach(&sim, &tap);
  sim.link[0].batch_us = 1000; // arrivals come in bursts (like GRO / recvmmsg)
  sim_pair_t p = sim_pair(&sim);
  CHECK_EQ(p.b->ack_policy, UDX_ACK_BATCH);
  sim_app_expect(p.b, 3, 1 << 20);
  sim_app_write(p.a, 3, 1 << 20, true);
  sim_app_write(p.b, 0, 0, true);
  CHECK(sim_run(&sim, sim_done_both_closed, &p, 10 * UDX_US_PER_S));
  CHECK(sim_app(p.b)->hash == sim_app(p.b)->expect_hash);
  CHECK(tap.acks[1] * 2 < tap.data[0]);
  sim_destroy(&sim);
}

// Coalesced ACKs, rule by rule (datagrams injected within one step, so
// only the rules, not the end of the batch, send an ACK):
static void
test_ack_coalescing_rules (void) {
  sim_t sim;
  sim_init(&sim, 5);
  tap_t tap;
  tap_attach(&sim, &tap);
  udx_stream_t *b = sim_stream(&sim, 1, 2);
  udx_stream_t *a = sim_stream(&sim, 0, 1);
  sim_connect(&sim, b, 1);
  sim_connect(&sim, a, 2);
  sim_app(b)->reading = false;
  uint8_t pkt[64];
  uint8_t byte = 7;
#define INJECT(type, seq)                                             \
  do {                                                                \
    size_t n_ = mk_pkt(pkt, (type), 0, 2, 65536, (seq), 0, &byte, 1); \
    sim_inject(&sim, 1, pkt, n_);                                     \
  } while (0)

  // in-order data waits for the end of the batch ...
  for (uint32_t seq = 0; seq < 10; seq++)
    INJECT(UDX_HEADER_DATA, seq);
  CHECK_EQ(tap.acks[1], 0);
  sim_advance(&sim, 1); // the end of the step
  CHECK_EQ(tap.acks[1], 1);
  // ... or for 32 packets
  for (uint32_t seq = 10; seq < 10 + 32; seq++)
    INJECT(UDX_HEADER_DATA, seq);
  CHECK_EQ(tap.acks[1], 2);
  // a duplicate: at once
  INJECT(UDX_HEADER_DATA, 5);
  CHECK_EQ(tap.acks[1], 3);
  // a gap (seq 43 with 42 missing): at once, with SACK
  INJECT(UDX_HEADER_DATA, 43);
  CHECK_EQ(tap.acks[1], 4);
  CHECK_EQ(tap.sack_acks[1], 1);
  INJECT(UDX_HEADER_DATA, 45);
  CHECK_EQ(tap.acks[1], 5);
  // filling a gap: at once (42 fills the first, 44 the second)
  INJECT(UDX_HEADER_DATA, 42);
  CHECK_EQ(tap.acks[1], 6);
  INJECT(UDX_HEADER_DATA, 44);
  CHECK_EQ(tap.acks[1], 7);
  CHECK_EQ(b->rcv_nxt, 46);
  CHECK_EQ(b->nranges, 0);
  // in order again: coalesced
  INJECT(UDX_HEADER_DATA, 46);
  CHECK_EQ(tap.acks[1], 7);
  // END: at once
  INJECT(UDX_HEADER_END, 47);
  CHECK_EQ(tap.acks[1], 8);
  CHECK_EQ(b->rcv_nxt, 48);
  sim_advance(&sim, 1);
  CHECK_EQ(tap.acks[1], 8); // nothing was owed any more
#undef INJECT
  sim_destroy(&sim);
}

// As many SACK ranges as fit a base-MTU packet, in the whole-payload form.
static void
test_sack_ranges (void) {
  sim_t sim;
  sim_init(&sim, 3);
  tap_t tap;
  tap_attach(&sim, &tap);
  udx_stream_t *b = sim_stream(&sim, 1, 2);
  udx_stream_t *a = sim_stream(&sim, 0, 1);
  sim_connect(&sim, b, 1);
  sim_connect(&sim, a, 2);
  sim_app(b)->reading = false;
  uint8_t pkt[64];
  uint8_t byte = 7;
  for (uint32_t seq = 1; seq < 400; seq += 2) {
    size_t n = mk_pkt(pkt, UDX_HEADER_DATA, 0, 2, 65536, seq, 0, &byte, 1);
    sim_inject(&sim, 1, pkt, n);
  }
  CHECK_EQ(tap.max_sacks[1], UDX_WIRE_MAX_SACKS);
  CHECK(tap.max_sacks[1] > 50);
  CHECK(tap.max_len[1] + 48 <= UDX_MTU_BASE);
  CHECK_EQ(tap.sack_data_offset_nonzero[1], 0);
  for (uint32_t seq = 0; seq < 400; seq += 2) {
    size_t n = mk_pkt(pkt, UDX_HEADER_DATA, 0, 2, 65536, seq, 0, &byte, 1);
    sim_inject(&sim, 1, pkt, n);
  }
  CHECK_EQ(b->rcv_nxt, 400);
  CHECK_EQ(b->nranges, 0);
  CHECK_EQ(sim_app(b)->read, 0); // content differs from the test pattern: not read
  sim_destroy(&sim);
}

// write() returns 0 above 262144 + min(cwnd * max_payload, send_rwnd), and
// on_drain fires once the queue falls below it.
static void
test_high_water_mark (void) {
  sim_t sim;
  sim_init(&sim, 4);
  sim_pair_t p = sim_pair(&sim);
  static uint8_t buf[300000];
  uint64_t hwm = 262144 + 10 * 1152;
  CHECK_EQ(udx__stream_write(p.a, buf, hwm, false, sim.now), 1);
  CHECK_EQ(udx__stream_write(p.a, buf, 1, false, sim.now), 0);
  CHECK_EQ(sim_app(p.a)->drains, 0);
  sim_app(p.b)->reading = true;
  sim_app(p.b)->read_seed = 0;
  p.b->cb.on_readable = NULL; // not checking content here
  sim_advance(&sim, 2 * UDX_US_PER_S);
  CHECK_EQ(sim_app(p.a)->drains, 1);
  CHECK_EQ(udx__bufq_len(&p.b->rdq), hwm + 1);
  sim_destroy(&sim);
}

// Packets are cut from the queue when sent: many small writes in one turn
// become full packets.
static void
test_late_packetization (void) {
  sim_t sim;
  sim_init(&sim, 5);
  tap_t tap;
  tap_attach(&sim, &tap);
  sim_pair_t p = sim_pair(&sim);
  sim_app_expect(p.b, 9, 10000);
  uint8_t buf[100];
  for (int i = 0; i < 100; i++) {
    for (int j = 0; j < 100; j++)
      buf[j] = test_byte(9, (uint64_t) i * 100 + j);
    CHECK_EQ(udx__stream_write(p.a, buf, 100, false, sim.now), 1);
  }
  sim_advance(&sim, UDX_US_PER_S);
  CHECK_EQ(sim_app(p.b)->read, 10000);
  CHECK_EQ(tap.data[0], 9); // ceil(10000 / 1152)
  sim_destroy(&sim);
}

// END with pending bytes in the same turn is DATA|END (0x03).
static void
test_end_flag_combined (void) {
  sim_t sim;
  sim_init(&sim, 6);
  tap_t tap;
  tap_attach(&sim, &tap);
  sim_pair_t p = sim_pair(&sim);
  sim_app_expect(p.b, 1, 100);
  sim_app_write(p.a, 1, 100, false);
  CHECK(udx__stream_write(p.a, NULL, 0, true, sim.now) >= 0);
  CHECK(udx__stream_write(p.a, "x", 1, false, sim.now) == UDX_ERR_PIPE);
  CHECK(sim_run(&sim, sim_done_b_eof, &p, UDX_US_PER_S));
  CHECK_EQ(tap.data[0], 1);
  CHECK_EQ(tap.ends[0], 1);
  CHECK_EQ(tap.last_data_type[0], UDX_HEADER_DATA | UDX_HEADER_END);
  sim_destroy(&sim);
}

// Half close: a ENDs first and keeps reading; on_finish once acked; the
// stream closes when both ENDs are done and EOF was read.
static void
test_half_close (void) {
  sim_t sim;
  sim_init(&sim, 7);
  sim_pair_t p = sim_pair(&sim);
  sim_app_expect(p.b, 1, 1000);
  sim_app_write(p.a, 1, 1000, true);
  CHECK(sim_run(&sim, sim_done_b_eof, &p, UDX_US_PER_S));
  sim_advance(&sim, 200000);
  CHECK_EQ(sim_app(p.a)->finishes, 1);
  CHECK_EQ(sim_app(p.a)->closed, 0);
  CHECK_EQ(sim_app(p.b)->closed, 0);
  // b still writes to a
  sim_app_expect(p.a, 2, 300000);
  sim_app_write(p.b, 2, 300000, true);
  CHECK(sim_run(&sim, sim_done_both_closed, &p, 5 * UDX_US_PER_S));
  CHECK(sim_app(p.a)->hash == sim_app(p.a)->expect_hash);
  CHECK_EQ(sim_app(p.a)->close_status, 0);
  CHECK_EQ(sim_app(p.b)->close_status, 0);
  CHECK_EQ(sim_app(p.b)->finishes, 1);
  sim_destroy(&sim);
}

// A paused reader keeps the stream open after both ENDs until EOF is read.
static void
test_close_waits_for_reader (void) {
  sim_t sim;
  sim_init(&sim, 8);
  sim_pair_t p = sim_pair(&sim);
  sim_app(p.b)->reading = false;
  sim_app_expect(p.b, 1, 5000);
  sim_app_write(p.a, 1, 5000, true);
  sim_app_write(p.b, 0, 0, true);
  sim_advance(&sim, UDX_US_PER_S);
  CHECK_EQ(sim_app(p.a)->finishes, 1);
  CHECK_EQ(sim_app(p.b)->closed, 0);
  CHECK_EQ(sim_app(p.b)->readable_events, 1);
  sim_app(p.b)->reading = true;
  sim_app_drain_reader(p.b);
  CHECK(sim_app(p.b)->eof);
  CHECK(sim_run(&sim, sim_done_both_closed, &p, UDX_US_PER_S));
  CHECK_EQ(sim_app(p.b)->read, 5000);
  sim_destroy(&sim);
}

// DESTROY: the remote closes with ECONNRESET, we close with 0.
static void
test_destroy (void) {
  sim_t sim;
  sim_init(&sim, 9);
  tap_t tap;
  tap_attach(&sim, &tap);
  sim_pair_t p = sim_pair(&sim);
  sim_app_expect(p.b, 1, 50000);
  sim_app_write(p.a, 1, 50000, false);
  sim_advance(&sim, 100000);
  CHECK_EQ(udx__stream_destroy(p.a, sim.now), 1);
  CHECK_EQ(udx__stream_destroy(p.a, sim.now), 0);
  CHECK(sim_run(&sim, sim_done_both_closed, &p, UDX_US_PER_S));
  CHECK_EQ(sim_app(p.a)->close_status, 0);
  CHECK_EQ(sim_app(p.b)->close_status, UDX_ERR_CONNRESET);
  CHECK_EQ(tap.destroys[0], 1);
  CHECK(udx__stream_write(p.a, "x", 1, false, sim.now) == UDX_ERR_NOTCONN);
  // unconnected: closes without a packet
  udx_stream_t *c = sim_stream(&sim, 0, 5);
  CHECK_EQ(udx__stream_destroy(c, sim.now), 0);
  sim_advance(&sim, 1000);
  CHECK_EQ(sim_app(c)->closed, 1);
  CHECK_EQ(tap.destroys[0], 1);
  sim_destroy(&sim);
}

static bool
drop_pure_acks (void *ctx, const uint8_t *buf, size_t len) {
  UDX_UNUSED(ctx);
  return len >= 3 && (buf[2] & ~UDX_HEADER_SACK) == 0;
}

// MESSAGE datagrams; an empty one updates the window like an ACK.
static void
test_message (void) {
  sim_t sim;
  sim_init(&sim, 10);
  tap_t tap;
  tap_attach(&sim, &tap);
  sim_pair_t p = sim_pair(&sim);
  static uint8_t big[3000];
  CHECK_EQ(udx__stream_send_message(p.a, "hello", 5, sim.now), 0);
  CHECK_EQ(udx__stream_send_message(p.a, big, UDX_MESSAGE_MAX + 1, sim.now), UDX_ERR_MSGSIZE);
  CHECK_EQ(udx__stream_send_message(p.a, big, UDX_MESSAGE_MAX, sim.now), 0);
  sim_advance(&sim, 100000);
  CHECK_EQ(sim_app(p.b)->messages, 2);
  CHECK_EQ(sim_app(p.b)->message_bytes, 5 + UDX_MESSAGE_MAX);
  udx_stream_t *c = sim_stream(&sim, 0, 5);
  CHECK_EQ(udx__stream_send_message(c, "x", 1, sim.now), UDX_ERR_NOTCONN);

  // a believes b's window is closed; b's empty MESSAGE opens it (b's ACKs,
  // e.g. the answer to the zero-window probe, are lost).
  sim.link[1].filter = drop_pure_acks;
  p.a->send_rwnd = 0;
  sim_app_expect(p.b, 4, 20000);
  sim_app_write(p.a, 4, 20000, false);
  sim_advance(&sim, 50000);
  CHECK_EQ(sim_app(p.b)->read, 0);
  CHECK_EQ(udx__stream_send_message(p.b, NULL, 0, sim.now), 0);
  sim.link[1].filter = NULL;
  sim_advance(&sim, 100000); // well before any zero-window probe (rto)
  CHECK_EQ(sim_app(p.b)->read, 20000);
  sim_destroy(&sim);
}

// Data before connect is delivered; its ACK waits for connect.
static void
test_preconnect (void) {
  sim_t sim;
  sim_init(&sim, 11);
  tap_t tap;
  tap_attach(&sim, &tap);
  udx_stream_t *a = sim_stream(&sim, 0, 1);
  udx_stream_t *b = sim_stream(&sim, 1, 2);
  sim_app_write(a, 5, 3000, false); // written before connect too
  sim_connect(&sim, a, 2);
  sim_app_expect(b, 5, 3000);
  sim_advance(&sim, 30000);
  CHECK_EQ(sim_app(b)->read, 3000);
  CHECK_EQ(tap.acks[1] + tap.sack_acks[1], 0);
  sim_connect(&sim, b, 1);
  sim_advance(&sim, 30000);
  CHECK(tap.acks[1] >= 1);
  CHECK_EQ(a->snd_una, a->snd_nxt);
  sim_destroy(&sim);
}

// Keepalive heartbeats while idle; once the peer has answered one, silence
// past the timeout closes with ETIMEDOUT.
static void
test_keepalive (void) {
  sim_t sim;
  sim_init(&sim, 12);
  tap_t tap;
  tap_attach(&sim, &tap);
  sim_pair_t p = sim_pair(&sim);
  p.a->keepalive_ms = 100;
  p.a->timeout_ms = 2000;
  udx__stream_flush(p.a, sim.now);
  sim_advance(&sim, 1050000);
  CHECK(tap.heartbeats[0] >= 9 && tap.heartbeats[0] <= 11);
  CHECK(tap.acks[1] >= 9);
  CHECK_EQ(sim_app(p.a)->closed, 0);
  uint64_t t0 = sim.now;
  sim.link[0].blackout_start = sim.link[1].blackout_start = sim.now;
  sim.link[0].blackout_end = sim.link[1].blackout_end = UDX_NEVER;
  CHECK(sim_run(&sim, sim_done_closed, p.a, 10 * UDX_US_PER_S));
  CHECK_EQ(sim_app(p.a)->close_status, UDX_ERR_TIMEDOUT);
  CHECK(sim.now - t0 <= 2200000);
  sim_destroy(&sim);
}

// A peer that never answers heartbeats (older libudx) is not timed out.
static void
test_keepalive_silent_peer (void) {
  sim_t sim;
  sim_init(&sim, 13);
  udx_stream_t *a = sim_stream(&sim, 0, 1);
  sim_stream(&sim, 1, 2); // never connected: defers its ACKs
  sim_connect(&sim, a, 2);
  a->keepalive_ms = 100;
  a->timeout_ms = 1000;
  udx__stream_flush(a, sim.now);
  sim_advance(&sim, 20 * UDX_US_PER_S);
  CHECK_EQ(sim_app(a)->closed, 0);
  sim_destroy(&sim);
}

// change_remote: new packets use the new remote at once; on_remote_changed
// fires once everything sent before is acked; the MTU search restarts.
static void
test_change_remote (void) {
  sim_t sim;
  sim_init(&sim, 14);
  sim_pair_t p = sim_pair(&sim);
  sim_app_expect(p.b, 8, 2 << 20);
  sim_app_write(p.a, 8, 2 << 20, true);
  sim_advance(&sim, 100000);
  CHECK(p.a->snd_una != p.a->snd_nxt);
  sim_change_remote(&sim, p.a, 2);
  CHECK_EQ(p.a->mtu, UDX_MTU_BASE);
  CHECK(p.a->status & UDX_S_CHANGING);
  CHECK_EQ(sim_app(p.a)->remote_changed, 0);
  CHECK(sim_run(&sim, sim_done_b_eof, &p, 10 * UDX_US_PER_S));
  CHECK_EQ(sim_app(p.a)->remote_changed, 1);
  CHECK(sim_app(p.b)->hash == sim_app(p.b)->expect_hash);
  // when nothing is in flight it completes at once (delivered later, once)
  sim_advance(&sim, 100000);
  sim_change_remote(&sim, p.a, 2);
  sim_advance(&sim, 1000);
  CHECK_EQ(sim_app(p.a)->remote_changed, 2);
  sim_destroy(&sim);
}

// Both sides agree on starting seq/ack.
static void
test_seq_ack_setup (void) {
  sim_t sim;
  sim_init(&sim, 15);
  udx_stream_t *a = sim_stream(&sim, 0, 1);
  udx_stream_t *b = sim_stream(&sim, 1, 2);
  a->snd_una = a->snd_nxt = a->snd_wl2 = a->rack_fack = a->rack_end_seq = a->high_seq = 1000;
  b->rcv_nxt = b->snd_wl1 = 1000;
  sim_connect(&sim, a, 2);
  sim_connect(&sim, b, 1);
  sim_pair_t p = {a, b};
  sim_app_expect(b, 2, 50000);
  sim_app_write(a, 2, 50000, true);
  CHECK(sim_run(&sim, sim_done_b_eof, &p, UDX_US_PER_S));
  CHECK(b->rcv_nxt > 1000);
  sim_destroy(&sim);
}

// Graceful close: a's END goes after its bytes, what a had not read and
// what b still sends is acked and dropped; both close with 0 once b ends.
static void
test_graceful_close (void) {
  sim_t sim;
  sim_init(&sim, 12);
  sim_pair_t p = sim_pair(&sim);
  sim_app(p.a)->reading = false;
  sim_app_expect(p.b, 1, 60000);
  sim_app_write(p.a, 1, 60000, false);
  sim_app_write(p.b, 2, 20000, false);
  sim_advance(&sim, 200000);
  CHECK(udx__bufq_len(&p.a->rdq) > 0);
  CHECK_EQ(udx__stream_shutdown(p.a, 5000, sim.now), 0);
  CHECK_EQ(udx__bufq_len(&p.a->rdq), 0);
  CHECK(udx__stream_write(p.a, "x", 1, false, sim.now) == UDX_ERR_PIPE);
  // b writes on (more than a's window: it must be acked to get through)
  sim_app_write(p.b, 3, 4000000, true);
  CHECK(sim_run(&sim, sim_done_both_closed, &p, 10 * UDX_US_PER_S));
  CHECK(sim_app(p.b)->eof);
  CHECK(sim_app(p.b)->hash == sim_app(p.b)->expect_hash);
  CHECK_EQ(sim_app(p.a)->close_status, 0);
  CHECK_EQ(sim_app(p.b)->close_status, 0);
  CHECK_EQ(sim_app(p.b)->finishes, 1);
  CHECK_EQ(sim_app(p.a)->read, 0);
  CHECK(p.a->close_at == UDX_NEVER);
  sim_destroy(&sim);
}

// A peer that never ends: the graceful close gives up at its deadline
// (DESTROY: the peer sees ECONNRESET after it had every byte and the END).
static void
test_graceful_close_timeout (void) {
  sim_t sim;
  sim_init(&sim, 13);
  sim_pair_t p = sim_pair(&sim);
  sim_app_expect(p.b, 1, 5000);
  sim_app_write(p.a, 1, 5000, false);
  uint64_t t0 = sim.now;
  CHECK_EQ(udx__stream_shutdown(p.a, 300, sim.now), 0);
  CHECK_EQ(udx__stream_shutdown(p.a, 60000, sim.now), 0); // a later, longer one does not extend it
  CHECK(sim_run(&sim, sim_done_both_closed, &p, 2 * UDX_US_PER_S));
  CHECK(sim_app(p.b)->eof);
  CHECK_EQ(sim_app(p.b)->read, 5000);
  CHECK_EQ(sim_app(p.a)->finishes, 1);
  CHECK_EQ(sim_app(p.a)->close_status, UDX_ERR_TIMEDOUT);
  CHECK_EQ(sim_app(p.b)->close_status, UDX_ERR_CONNRESET);
  CHECK(sim.now - t0 >= 300000 && sim.now - t0 <= 400000);
  // unconnected: closes at once
  udx_stream_t *c = sim_stream(&sim, 0, 5);
  CHECK_EQ(udx__stream_shutdown(c, 1000, sim.now), 0);
  sim_advance(&sim, 1000);
  CHECK_EQ(sim_app(c)->closed, 1);
  CHECK_EQ(sim_app(c)->close_status, 0);
  sim_destroy(&sim);
}

static const test_case_t cases[] = {
    {"ack_each", test_ack_each},
    {"ack_batch", test_ack_batch},
    {"ack_coalescing_rules", test_ack_coalescing_rules},
    {"sack_ranges", test_sack_ranges},
    {"high_water_mark", test_high_water_mark},
    {"late_packetization", test_late_packetization},
    {"end_flag_combined", test_end_flag_combined},
    {"half_close", test_half_close},
    {"close_waits_for_reader", test_close_waits_for_reader},
    {"destroy", test_destroy},
    {"graceful_close", test_graceful_close},
    {"graceful_close_timeout", test_graceful_close_timeout},
    {"message", test_message},
    {"preconnect", test_preconnect},
    {"keepalive", test_keepalive},
    {"keepalive_silent_peer", test_keepalive_silent_peer},
    {"change_remote", test_change_remote},
    {"seq_ack_setup", test_seq_ack_setup},
    {NULL, NULL},
};

int
main (int argc, char **argv) {
  return test_main(argc, argv, cases);
}
