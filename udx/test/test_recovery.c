// Reliability in simulated time: RTO give-up and backoff, RACK fast recovery,
// TLP for tail loss, zero-window probes, the read-buffer limit against a slow
// reader and against a sender that ignores the window, SACK validation,
// retransmissions with a fresh header, and the engine clock.

#include "sim.h"
#include "tap.h"
#include "test.h"

// Drops the first transmission of DATA packets whose seq is in [from, to).
typedef struct {
  uint32_t from;
  uint32_t to;
  uint8_t seen[4096];
  int dropped;
} drop_seq_t;

static bool
drop_seq_filter (void *ctx, const uint8_t *buf, size_t len) {
  drop_seq_t *d = ctx;
  udx_wire_pkt_t p;
  if (udx__wire_decode(buf, len, &p) != UDX_WIRE_OK)
    return false;
  if (!(p.type & UDX_FLAGS_DATA_OR_END))
    return false;
  if (p.seq < d->from || p.seq >= d->to || p.seq >= sizeof(d->seen))
    return false;
  if (d->seen[p.seq]++)
    return false;
  d->dropped++;
  return true;
}

// Sending into the void gives up after ~13 s (libudx: 13 RTO at the 1 s
// floor), or after the configured timeout.
static void
give_up (uint32_t timeout_ms, uint64_t lo, uint64_t hi) {
  sim_t sim;
  sim_init(&sim, 1);
  sim.link[0].loss = 1.0;
  sim_pair_t p = sim_pair(&sim);
  if (timeout_ms)
    p.a->timeout_ms = timeout_ms;
  uint64_t t0 = sim.now;
  sim_app_write(p.a, 1, 10, false);
  CHECK(sim_run(&sim, sim_done_closed, p.a, 60 * UDX_US_PER_S));
  CHECK_EQ(sim_app(p.a)->close_status, UDX_ERR_TIMEDOUT);
  uint64_t took = sim.now - t0;
  CHECK(took >= lo && took <= hi);
  sim_destroy(&sim);
}

static void
test_give_up_default (void) {
  give_up(0, 12900000, 13300000);
}

static void
test_give_up_custom (void) {
  give_up(3000, 2900000, 3300000);
}

// RFC 6298 5.5: the timer backs off exponentially: RTOs at 1, 3, 7 s (libudx
// re-arms at a fixed 2 x rto: 1, 3, 5, 7).
static void
test_rto_backoff (void) {
  sim_t sim;
  sim_init(&sim, 2);
  sim.link[0].loss = 1.0;
  sim_pair_t p = sim_pair(&sim);
  p.a->timeout_ms = 0; // never give up here
  sim_app_write(p.a, 1, 10, false);
  sim_advance(&sim, 7500000);
  CHECK_EQ(p.a->stats.rto_count, 3);
  sim_advance(&sim, 8000000);
  CHECK_EQ(p.a->stats.rto_count, 4); // 15 s
  sim.link[0].loss = 0;
  sim_app_expect(p.b, 1, 10);
  CHECK(sim_run(&sim, sim_done_b_eof, &p, 40 * UDX_US_PER_S) || sim_app(p.b)->read == 10);
  sim_destroy(&sim);
}

// A lost packet mid-stream is repaired by RACK within about an RTT: fast
// recovery, no RTO.
static void
test_rack_fast_recovery (void) {
  sim_t sim;
  sim_init(&sim, 3);
  drop_seq_t d = {.from = 40, .to = 41};
  sim.link[0].filter = drop_seq_filter;
  sim.link[0].filter_ctx = &d;
  sim_pair_t p = sim_pair(&sim);
  sim_app_expect(p.b, 2, 400000);
  sim_app_write(p.a, 2, 400000, true);
  CHECK(sim_run(&sim, sim_done_b_eof, &p, 5 * UDX_US_PER_S));
  CHECK_EQ(d.dropped, 1);
  CHECK_EQ(p.a->stats.rto_count, 0);
  CHECK(p.a->stats.fast_recoveries >= 1);
  CHECK(p.a->stats.retransmits >= 1 && p.a->stats.retransmits <= 3);
  CHECK(sim_app(p.b)->hash == sim_app(p.b)->expect_hash);
  sim_destroy(&sim);
}

// The last packet lost: a tail loss probe repairs it long before the RTO.
static void
test_tlp (void) {
  sim_t sim;
  sim_init(&sim, 4);
  drop_seq_t d = {.from = 9, .to = 10}; // 10000 bytes: packets 0..8, seq 8 is last
  d.from = 8;
  d.to = 9;
  sim.link[0].filter = drop_seq_filter;
  sim.link[0].filter_ctx = &d;
  sim_pair_t p = sim_pair(&sim);
  sim_app_expect(p.b, 3, 10000);
  uint64_t t0 = sim.now;
  sim_app_write(p.a, 3, 10000, true);
  CHECK(sim_run(&sim, sim_done_b_eof, &p, 5 * UDX_US_PER_S));
  CHECK_EQ(d.dropped, 1);
  CHECK(p.a->stats.tlp_count >= 1);
  CHECK_EQ(p.a->stats.rto_count, 0);
  CHECK(sim.now - t0 < 200000); // RTO would be 1 s
  sim_destroy(&sim);
}

// Drops the first `times` transmissions of one seq.
typedef struct {
  uint32_t seq;
  int times;
  int dropped;
} drop_n_t;

static bool
drop_n_filter (void *ctx, const uint8_t *buf, size_t len) {
  drop_n_t *d = ctx;
  udx_wire_pkt_t p;
  if (udx__wire_decode(buf, len, &p) != UDX_WIRE_OK || !(p.type & UDX_FLAGS_DATA_OR_END))
    return false;
  if (p.seq != d->seq || d->dropped >= d->times)
    return false;
  d->dropped++;
  return true;
}

// In recovery with nothing new to send, a lost retransmission is found by a
// probe after srtt + 4 rttvar (RFC 9002 6.2), not by the RTO (1 s): RACK
// alone cannot, nothing is sent after it. Packets 0..8; seq 3 and its first
// retransmission are lost.
static void
test_tlp_in_recovery (void) {
  sim_t sim;
  sim_init(&sim, 9);
  drop_n_t d = {.seq = 3, .times = 2};
  sim.link[0].filter = drop_n_filter;
  sim.link[0].filter_ctx = &d;
  sim_pair_t p = sim_pair(&sim);
  sim_app_expect(p.b, 3, 10000);
  uint64_t t0 = sim.now;
  sim_app_write(p.a, 3, 10000, true);
  CHECK(sim_run(&sim, sim_done_b_eof, &p, 5 * UDX_US_PER_S));
  CHECK_EQ(d.dropped, 2);
  CHECK(p.a->stats.fast_recoveries >= 1);
  CHECK(p.a->stats.tlp_count >= 1);
  CHECK_EQ(p.a->stats.rto_count, 0);
  CHECK(sim.now - t0 < 200000); // the RTO would be 1 s
  sim_destroy(&sim);
}

// With the give-up time, a packet still gets about six retransmissions
// (libudx's rule of 6 RTO timeouts): losing six copies of the last packet
// in a row (the original, probes, retransmissions) is survived. Exponential backoff alone (1, 3, 7 s, then the 13 s
// give-up) allowed three, so at 20 % loss about one tail loss in 600 killed
// the stream (seen in make soak).
static void
test_rto_attempts_before_give_up (void) {
  sim_t sim;
  sim_init(&sim, 16);
  drop_n_t d = {.seq = 6, .times = 6};
  sim.link[0].filter = drop_n_filter;
  sim.link[0].filter_ctx = &d;
  sim_pair_t p = sim_pair(&sim);
  sim_app_expect(p.b, 3, 10 * 1000);
  sim_app_write(p.a, 3, 10 * 1000, true); // 7 packets of 1452 bytes: seq 6 is the last
  CHECK(sim_run(&sim, sim_done_b_eof, &p, 30 * UDX_US_PER_S));
  CHECK_EQ(d.dropped, 6);
  CHECK_EQ(sim_app(p.a)->closed, 0);
  CHECK(sim_app(p.b)->hash == sim_app(p.b)->expect_hash);
  sim_destroy(&sim);
}

// Zero window: a paused reader with a read limit closes the window; the
// sender probes with HEARTBEATs (no data beyond the window) and does not time
// out; when the reader resumes, a window update restarts the transfer.
static void
test_zero_window (void) {
  sim_t sim;
  sim_init(&sim, 5);
  tap_t tap;
  tap_attach(&sim, &tap);
  sim_pair_t p = sim_pair(&sim);
  p.b->read_limit = 16384;
  sim_app(p.b)->reading = false;
  sim_app_expect(p.b, 4, 300000);
  sim_app_write(p.a, 4, 300000, true);
  sim_advance(&sim, 30 * UDX_US_PER_S);
  CHECK_EQ(sim_app(p.a)->closed, 0);
  CHECK_EQ(p.a->send_rwnd, 0);
  CHECK(p.a->stats.zwp_count >= 2);
  CHECK(tap.heartbeats[0] >= 2);
  CHECK(sim_app(p.b)->max_held <= 16384 + 1452);
  int data_before = tap.data[0];
  sim_advance(&sim, 10 * UDX_US_PER_S);
  CHECK(tap.data[0] - data_before <= 2); // nothing but probes while closed
  sim_app(p.b)->reading = true;
  sim_app_drain_reader(p.b);
  CHECK(sim_run(&sim, sim_done_b_eof, &p, 30 * UDX_US_PER_S));
  CHECK(sim_app(p.b)->hash == sim_app(p.b)->expect_hash);
  sim_destroy(&sim);
}

// A zero window whose peer goes silent: probes answered so far keep the
// stream open; once the peer stops answering, the give-up time closes it
// with ETIMEDOUT (before the fix, probing went on forever).
static void
test_zero_window_dead_peer (void) {
  sim_t sim;
  sim_init(&sim, 15);
  sim_pair_t p = sim_pair(&sim);
  p.b->read_limit = 16384;
  sim_app(p.b)->reading = false;
  sim_app_write(p.a, 4, 300000, true);
  sim_advance(&sim, 20 * UDX_US_PER_S); // longer than the give-up time
  CHECK_EQ(sim_app(p.a)->closed, 0);
  CHECK_EQ(p.a->send_rwnd, 0);
  CHECK(p.a->status & UDX_S_HB_ANSWERED);
  uint64_t dead_at = sim.now;
  for (int i = 0; i < 2; i++) {
    sim.link[i].blackout_start = dead_at;
    sim.link[i].blackout_end = UDX_NEVER;
  }
  CHECK(sim_run(&sim, sim_done_closed, p.a, 60 * UDX_US_PER_S));
  CHECK_EQ(sim_app(p.a)->close_status, UDX_ERR_TIMEDOUT);
  CHECK(sim.now - dead_at <= (uint64_t) (UDX_DEFAULT_TIMEOUT + 1000) * UDX_US_PER_MS);
  sim_destroy(&sim);
}

// A slow reader: the read limit bounds what is held (limit + one packet),
// the transfer completes intact.
static void
test_slow_reader (void) {
  sim_t sim;
  sim_init(&sim, 6);
  sim_pair_t p = sim_pair(&sim);
  p.b->read_limit = 65536;
  sim_app(p.b)->reading = false;
  sim_app_expect(p.b, 5, 2 << 20);
  sim_app_write(p.a, 5, 2 << 20, true);
  // the reader takes 64 KiB every 50 ms
  while (!sim_app(p.b)->eof && sim.now < 60 * UDX_US_PER_S) {
    sim_advance(&sim, 50000);
    uint8_t buf[65536];
    sim_app_t *rb = sim_app(p.b);
    ssize_t n = udx__stream_read(p.b, buf, sizeof(buf), sim.now);
    if (n > 0) {
      rb->hash = test_hash(rb->hash, buf, (size_t) n);
      rb->read += (uint64_t) n;
    } else if (n == UDX_ERR_EOF) {
      rb->eof = true;
    }
  }
  CHECK(sim_app(p.b)->eof);
  CHECK(sim_app(p.b)->hash == sim_app(p.b)->expect_hash);
  CHECK(sim_app(p.b)->max_held <= 65536 + 1452);
  CHECK_EQ(sim_app(p.a)->closed, 0);
  sim_destroy(&sim);
}

// A reader that takes bytes out of the buffer and holds them (a large
// frame it hands on in parts) tells the stream its backlog: the window
// counts it as unread, so the sender never puts more than the window in
// the reader's hands; as it drains, window updates reopen the stream.
static void
test_read_backlog (void) {
  sim_t sim;
  sim_init(&sim, 9);
  sim_pair_t p = sim_pair(&sim);
  const uint64_t window = 256 * 1024;
  udx__stream_set_rwnd_max(p.b, (uint32_t) window);
  sim_app(p.b)->reading = false;
  sim_app_expect(p.b, 8, 2 << 20);
  sim_app_write(p.a, 8, 2 << 20, true);
  sim_app_t *rb = sim_app(p.b);
  uint64_t backlog = 0, max_held = 0;
  // every 20 ms the reader hands on 64 KiB of what it holds, then takes
  // everything the stream has
  while (!rb->eof && sim.now < 60 * UDX_US_PER_S) {
    sim_advance(&sim, 20000);
    backlog -= backlog < 65536 ? backlog : 65536;
    udx__stream_set_read_backlog(p.b, backlog);
    uint8_t buf[65536];
    ssize_t n;
    while ((n = udx__stream_read(p.b, buf, sizeof(buf), sim.now)) > 0) {
      rb->hash = test_hash(rb->hash, buf, (size_t) n);
      rb->read += (uint64_t) n;
      backlog += (uint64_t) n;
    }
    if (n == UDX_ERR_EOF)
      rb->eof = true;
    udx__stream_set_read_backlog(p.b, backlog);
    uint64_t held = backlog + udx__bufq_len(&p.b->rdq) + p.b->ooo_bytes;
    if (held > max_held)
      max_held = held;
  }
  CHECK(rb->eof);
  CHECK(rb->hash == rb->expect_hash);
  CHECK(max_held <= window + 1452);
  CHECK_EQ(p.a->stats.rto_count, 0);
  CHECK_EQ(p.b->stats.dropped_rwnd, 0);
  sim_destroy(&sim);
}

// A reader that closes while it holds a backlog (a large frame half handed
// on): the close drops what comes unread, so the window reopens in full and
// the peer's END gets through; a backlog set after the close is ignored.
static void
test_read_backlog_close (void) {
  sim_t sim;
  sim_init(&sim, 10);
  sim_pair_t p = sim_pair(&sim);
  const uint64_t window = 256 * 1024;
  udx__stream_set_rwnd_max(p.b, (uint32_t) window);
  sim_app(p.b)->reading = false;
  sim_app_write(p.a, 8, 1 << 20, true);
  sim_advance(&sim, 50000);
  udx__stream_set_read_backlog(p.b, window); // it took everything, holds it
  uint8_t buf[65536];
  while (udx__stream_read(p.b, buf, sizeof(buf), sim.now) > 0) {
  }
  CHECK_EQ(udx__recv_rwnd(p.b), 0);
  CHECK_EQ(udx__stream_shutdown(p.b, 5000, sim.now), 0);
  CHECK_EQ(udx__recv_rwnd(p.b), window);
  udx__stream_set_read_backlog(p.b, window);
  CHECK_EQ(udx__recv_rwnd(p.b), window);
  // the writer's bytes and END go through, both close without an error
  CHECK(sim_run(&sim, sim_done_both_closed, &p, 5 * UDX_US_PER_S));
  CHECK_EQ(sim_app(p.a)->close_status, 0);
  CHECK_EQ(sim_app(p.b)->close_status, 0);
  sim_destroy(&sim);
}

// A sender that ignores the window: the stream holds at most limit + one
// packet, never acks what it dropped, and loses nothing it acked.
static void
test_read_limit_hostile_sender (void) {
  sim_t sim;
  sim_init(&sim, 7);
  udx_stream_t *b = sim_stream(&sim, 1, 2);
  udx_stream_t *a = sim_stream(&sim, 0, 1);
  sim_connect(&sim, b, 1);
  sim_connect(&sim, a, 2);
  a->cb.on_readable = NULL;
  b->read_limit = 10000;
  sim_app(b)->reading = false;
  uint8_t pkt[1100];
  uint8_t payload[1000];
  // 100 packets of 1000 bytes, in a shuffled order, twice
  for (int round = 0; round < 2; round++) {
    for (uint32_t i = 0; i < 100; i++) {
      uint32_t seq = (i * 37) % 100;
      for (int j = 0; j < 1000; j++)
        payload[j] = test_byte(6, (uint64_t) seq * 1000 + j);
      size_t n = mk_pkt(pkt, UDX_HEADER_DATA, 0, 2, 1 << 20, seq, 0, payload, 1000);
      sim_inject(&sim, 1, pkt, n);
      uint64_t held = udx__bufq_len(&b->rdq) + b->ooo_bytes;
      CHECK(held <= 10000 + 1000);
    }
  }
  // what is acked (rcv_nxt) is exactly what is held in order
  CHECK_EQ(udx__bufq_len(&b->rdq), (uint64_t) b->rcv_nxt * 1000);
  CHECK(b->stats.dropped_rwnd > 0);
  CHECK(udx__recv_rwnd(b) < 1000);
  sim_app(b)->read_seed = 6;
  sim_app(b)->reading = true;
  sim_app_drain_reader(b); // checks every byte
  CHECK_EQ(sim_app(b)->read, (uint64_t) b->rcv_nxt * 1000);
  sim_destroy(&sim);
}

// SACK ranges are checked against what is in flight; bad ones are counted
// and ignored, good ones in the same ACK still count.
static void
test_sack_validation (void) {
  sim_t sim;
  sim_init(&sim, 8);
  sim.link[0].loss = 1.0;
  sim_pair_t p = sim_pair(&sim);
  sim_app_write(p.a, 1, 20000, false);
  sim_advance(&sim, 1000);
  CHECK_EQ(p.a->snd_una, 0);
  CHECK_EQ(p.a->snd_nxt, 10); // initial cwnd
  uint8_t pkt[20 + 5 * 8];
  udx__wire_header(pkt, UDX_HEADER_SACK, 0, 1, 1 << 20, 0, 0);
  udx__wire_put_sack(pkt + 20, 0, 3, 5);                     // valid
  udx__wire_put_sack(pkt + 20, 1, 0xfffffff0u, 0x10);        // across the wrap
  udx__wire_put_sack(pkt + 20, 2, 8, 6);                     // reversed
  udx__wire_put_sack(pkt + 20, 3, 5, 50);                    // beyond snd_nxt
  udx__wire_put_sack(pkt + 20, 4, 0xffffff00u, 0xffffff10u); // below snd_una
  sim_inject(&sim, 0, pkt, sizeof(pkt));
  CHECK_EQ(p.a->stats.dropped_sacks, 4);
  CHECK_EQ(p.a->sacked, 2);
  CHECK(p.a->stats.delivered == 2);
  sim_destroy(&sim);
}

// A retransmission keeps seq and payload but carries the current ack.
static void
test_retransmit_fresh_header (void) {
  sim_t sim;
  sim_init(&sim, 9);
  tap_t tap;
  tap_attach(&sim, &tap);
  tap.watch_seq = 30;
  drop_seq_t d = {.from = 30, .to = 31};
  sim.link[0].filter = drop_seq_filter;
  sim.link[0].filter_ctx = &d;
  sim_pair_t p = sim_pair(&sim);
  sim_app_expect(p.b, 1, 300000);
  sim_app_expect(p.a, 2, 300000);
  sim_app_write(p.a, 1, 300000, true);
  sim_app_write(p.b, 2, 300000, true);
  CHECK(sim_run(&sim, sim_done_b_eof, &p, 5 * UDX_US_PER_S));
  CHECK(tap.watch_count >= 2);
  CHECK(udx__seq_gt(tap.watch_acks[1], tap.watch_acks[0]));
  sim_destroy(&sim);
}

// The engine clock only moves forward, whatever time a caller passes.
static void
test_clock_monotonic (void) {
  sim_t sim;
  sim_init(&sim, 10);
  sim_pair_t p = sim_pair(&sim);
  uint8_t buf[3000] = {0};
  CHECK(udx__stream_write(p.a, buf, sizeof(buf), false, sim.now + 500) >= 0);
  udx__stream_flush(p.a, sim.now); // older than the last call
  CHECK_EQ(p.a->now, sim.now + 500);
  udx_pkt_t *pk = udx__pkt(p.a, 0);
  CHECK(pk && pk->time_sent == sim.now + 500);
  sim_destroy(&sim);
}

// A reader that frees a little room in a full window reopens it at once
// with a window update: the sender does not wait for its next probe.
static void
test_window_update (void) {
  sim_t sim;
  sim_init(&sim, 12);
  tap_t tap;
  tap_attach(&sim, &tap);
  sim_pair_t p = sim_pair(&sim);
  sim_app(p.b)->reading = false;
  sim_app_expect(p.b, 4, 6 << 20);
  sim_app_write(p.a, 4, 6 << 20, false);
  sim_advance(&sim, 3 * UDX_US_PER_S);
  CHECK_EQ(p.a->send_rwnd, 0);
  uint64_t held = udx__bufq_len(&p.b->rdq);
  CHECK(held >= UDX_DEFAULT_RWND_MAX - 1452);
  int zwp = (int) p.a->stats.zwp_count;
  uint8_t buf[16384];
  CHECK(udx__stream_read(p.b, buf, sizeof(buf), sim.now) == sizeof(buf));
  sim_advance(&sim, 50000); // one RTT is 20 ms; a probe would take >= 1 s
  CHECK(udx__bufq_len(&p.b->rdq) > held - sizeof(buf));
  CHECK_EQ(p.a->stats.zwp_count, zwp);
  sim_destroy(&sim);
}

static const test_case_t cases[] = {
    {"window_update", test_window_update},
    {"give_up_default", test_give_up_default},
    {"give_up_custom", test_give_up_custom},
    {"rto_backoff", test_rto_backoff},
    {"rto_attempts_before_give_up", test_rto_attempts_before_give_up},
    {"rack_fast_recovery", test_rack_fast_recovery},
    {"tlp", test_tlp},
    {"tlp_in_recovery", test_tlp_in_recovery},
    {"zero_window", test_zero_window},
    {"zero_window_dead_peer", test_zero_window_dead_peer},
    {"slow_reader", test_slow_reader},
    {"read_backlog", test_read_backlog},
    {"read_backlog_close", test_read_backlog_close},
    {"read_limit_hostile_sender", test_read_limit_hostile_sender},
    {"sack_validation", test_sack_validation},
    {"retransmit_fresh_header", test_retransmit_fresh_header},
    {"clock_monotonic", test_clock_monotonic},
    {NULL, NULL},
};

int
main (int argc, char **argv) {
  return test_main(argc, argv, cases);
}
