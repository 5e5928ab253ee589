// Whole transfers through the simulated network, checked byte by byte and by
// hash: clean path, loss, reorder, duplication, corruption, blackout, a rate
// bottleneck, and sequence numbers that wrap.

#include "sim.h"
#include "test.h"
#include <unistd.h>

// a -> b: total bytes; b ends too so both close gracefully.
static void
transfer (sim_t *sim, sim_pair_t *p, uint64_t total, uint64_t max_us) {
  sim_app_expect(p->b, 77, total);
  sim_app_write(p->a, 77, total, true);
  sim_app_write(p->b, 0, 0, true);
  uint64_t t0 = sim->now;
  bool ok = sim_run(sim, sim_done_both_closed, p, max_us);
  if (getenv("UDX_TEST_VERBOSE") || !ok) {
    udx_stream_stats_t *st = &p->a->stats;
    fprintf(stderr, "t=%.3fs sent=%llu rtx=%llu rto=%llu tlp=%llu fr=%llu lost=%llu bbr=%u cwnd=%u pace=%llu bw=%llu srtt=%u minrtt=%u mtu=%u read=%llu\n", (sim->now - t0) / 1e6, (unsigned long long) st->packets_sent, (unsigned long long) st->retransmits, (unsigned long long) st->rto_count, (unsigned long long) st->tlp_count, (unsigned long long) st->fast_recoveries, (unsigned long long) st->lost, st->bbr_state, st->cwnd, (unsigned long long) st->pacing_rate, (unsigned long long) st->bbr_bw, st->rtt_us, st->min_rtt_us, st->mtu, (unsigned long long) sim_app(p->b)->read);
  }
  CHECK(ok);
  sim_app_t *rb = sim_app(p->b);
  CHECK(rb->eof);
  CHECK_EQ(rb->read, total);
  CHECK(rb->hash == rb->expect_hash);
  CHECK_EQ(sim_app(p->a)->close_status, 0);
  CHECK_EQ(rb->close_status, 0);
  CHECK_EQ(sim_app(p->a)->finishes, 1);
  CHECK_EQ(rb->finishes, 1);
  CHECK_EQ(sim_app(p->a)->finalized, 1);
}

static void
test_small (void) {
  sim_t sim;
  sim_init(&sim, 1);
  sim_pair_t p = sim_pair(&sim);
  transfer(&sim, &p, 5, 5 * UDX_US_PER_S);
  CHECK_EQ(p.a->stats.dropped_sacks, 0);
  sim_destroy(&sim);
}

static void
test_clean_1mb (void) {
  sim_t sim;
  sim_init(&sim, 2);
  sim_pair_t p = sim_pair(&sim);
  transfer(&sim, &p, 1 << 20, 30 * UDX_US_PER_S);
  CHECK_EQ(p.a->stats.retransmits, 0);
  sim_destroy(&sim);
}

static void
test_loss (void) {
  sim_t sim;
  sim_init(&sim, 3);
  sim.link[0].loss = 0.05;
  sim.link[1].loss = 0.05;
  sim_pair_t p = sim_pair(&sim);
  transfer(&sim, &p, 2 << 20, 120 * UDX_US_PER_S);
  CHECK(p.a->stats.retransmits > 0);
  sim_destroy(&sim);
}

// Payloads read from the send queue at the end of the step (as the socket
// ring does): acked bytes stay until the last datagram pointing at them left.
static void
test_zero_copy (void) {
  sim_t sim;
  sim_init(&sim, 12);
  sim.zero_copy = true;
  sim.zero_copy_hold_us = 20000;
  sim.link[0].loss = 0.03;
  sim.link[1].loss = 0.03;
  sim.link[0].reorder = 0.2;
  sim.link[0].reorder_us = 15000;
  sim.link[1].reorder = 0.2;
  sim.link[1].reorder_us = 15000;
  sim.link[1].batch_us = 2000;
  sim.link[1].dup = 0.05;
  sim_pair_t p = sim_pair(&sim);
  transfer(&sim, &p, 4 << 20, 120 * UDX_US_PER_S);
  sim_advance(&sim, UDX_US_PER_S); // what was still held goes out
  CHECK(p.a->stats.retransmits > 0);
  CHECK_EQ(p.a->tx_pins, 0);
  CHECK_EQ(p.b->tx_pins, 0);
  sim_destroy(&sim);
}

static void
test_reorder_dup (void) {
  sim_t sim;
  sim_init(&sim, 4);
  sim.link[0].reorder = 0.1;
  sim.link[0].reorder_us = 3000;
  sim.link[0].dup = 0.05;
  sim.link[1].dup = 0.05;
  sim_pair_t p = sim_pair(&sim);
  transfer(&sim, &p, 2 << 20, 60 * UDX_US_PER_S);
  sim_destroy(&sim);
}

static void
test_bottleneck (void) {
  sim_t sim;
  sim_init(&sim, 5);
  sim.link[0].rate = 1250000; // 10 Mbit/s
  sim.link[0].queue_bytes = 64 * 1024;
  sim.link[0].delay_us = 20000;
  sim.link[1].delay_us = 20000;
  sim_pair_t p = sim_pair(&sim);
  transfer(&sim, &p, 4 << 20, 60 * UDX_US_PER_S);
  CHECK(p.a->bbr.state == UDX_BBR_STATE_PROBE_BW || p.a->bbr.state == UDX_BBR_STATE_PROBE_RTT);
  sim_destroy(&sim);
}

static void
test_blackout (void) {
  sim_t sim;
  sim_init(&sim, 6);
  sim.link[0].blackout_start = sim.now + 200000;
  sim.link[0].blackout_end = sim.now + 3200000; // 3 s outage
  sim.link[1].blackout_start = sim.now + 200000;
  sim.link[1].blackout_end = sim.now + 3200000;
  sim.link[0].rate = 2500000;
  sim_pair_t p = sim_pair(&sim);
  transfer(&sim, &p, 2 << 20, 60 * UDX_US_PER_S);
  CHECK(p.a->stats.rto_count > 0);
  sim_destroy(&sim);
}

static void
test_corruption (void) {
  // Corrupted header bytes make packets unknown or malformed; corrupted
  // payload cannot be detected by UDX (no checksum: UDP's does it on real
  // networks), so only headers are corrupted here via a filter.
  sim_t sim;
  sim_init(&sim, 7);
  sim.link[0].loss = 0.02;
  sim_pair_t p = sim_pair(&sim);
  transfer(&sim, &p, 1 << 20, 60 * UDX_US_PER_S);
  sim_destroy(&sim);
}

static void
test_seq_wrap (void) {
  // Both directions start a few packets below 2^32, through loss and reordering.
  sim_t sim;
  sim_init(&sim, 8);
  sim.link[0].loss = 0.03;
  sim.link[0].reorder = 0.05;
  sim.link[0].reorder_us = 5000;
  sim.link[1].loss = 0.03;
  udx_stream_t *a = sim_stream(&sim, 0, 1);
  udx_stream_t *b = sim_stream(&sim, 1, 2);
  uint32_t start = 0xfffffffbu;
  a->snd_una = a->snd_nxt = a->snd_wl2 = start;
  b->rcv_nxt = start;
  a->rack_fack = a->rack_end_seq = a->high_seq = start;
  b->snd_una = b->snd_nxt = b->snd_wl2 = start - 100;
  a->rcv_nxt = start - 100;
  sim_connect(&sim, a, 2);
  sim_connect(&sim, b, 1);
  sim_pair_t p = {a, b};
  transfer(&sim, &p, 1 << 20, 60 * UDX_US_PER_S);
  CHECK(udx__seq_lt(a->snd_nxt, 0x10000000u)); // it did wrap
  CHECK(a->snd_nxt < start);
  sim_destroy(&sim);
}

// No allocation per packet: chunks and out-of-order slots come from pools.
// A second transfer through the same pools (loss, so out-of-order buffers
// are used too) allocates next to nothing per packet.
static void
test_no_alloc_per_packet (void) {
  sim_t sim;
  sim_init(&sim, 9);
  sim.link[0].rate = 12500000;
  sim.link[0].queue_bytes = 200000;
  sim.link[0].loss = 0.01;
  uint64_t chunks = 0, slots = 0;
  for (int round = 0; round < 2; round++) {
    udx_stream_t *a = sim_stream(&sim, 0, 10 + 2 * round);
    udx_stream_t *b = sim_stream(&sim, 1, 11 + 2 * round);
    sim_connect(&sim, a, 11 + 2 * round);
    sim_connect(&sim, b, 10 + 2 * round);
    sim_pair_t p = {a, b};
    chunks = sim.pool.chunks.allocs;
    slots = sim.pool.slots.allocs;
    sim_app_expect(b, 5, 16 << 20);
    sim_app_write(a, 5, 16 << 20, true);
    sim_app_write(b, 0, 0, true);
    CHECK(sim_run(&sim, sim_done_both_closed, &p, 120 * UDX_US_PER_S));
    CHECK(sim_app(b)->hash == sim_app(b)->expect_hash);
    CHECK(a->stats.retransmits > 50);
    if (round == 1) {
      uint64_t allocs = (sim.pool.chunks.allocs - chunks) + (sim.pool.slots.allocs - slots);
      CHECK(allocs * 100 < a->stats.packets_sent); // < 1 per 100 packets
    }
  }
  sim_destroy(&sim);
}

// Writes made in place (udx_stream_write_fill) of every size, through loss:
// blocks of their own reach the peer whole, as the peer acks them they are
// unmapped, and the queue ends with none.
static void
test_write_fill (void) {
  sim_t sim;
  sim_init(&sim, 10);
  sim.link[0].rate = 12500000;
  sim.link[0].queue_bytes = 200000;
  sim.link[0].loss = 0.02;
  sim.link[1].loss = 0.02;
  sim_pair_t p = sim_pair(&sim);
  sim_app(p.a)->fill = true;
  uint64_t total = 24 << 20;
  sim_app_expect(p.b, 78, total);
  sim_app_write(p.a, 78, total, false);
  CHECK(p.a->sndq.ext != NULL);
  // a block's released strides are unmapped before the block ends
  bool trimmed = false;
  for (int i = 0; i < 4000 && sim_app(p.b)->read < total; i++) {
    sim_advance(&sim, 5000);
    for (udx_bufq_ext_t *e = p.a->sndq.ext; e; e = e->next)
      trimmed = trimmed || e->unmapped > (size_t) (e->strides - e->map);
  }
  CHECK(trimmed);
  CHECK_EQ(sim_app(p.b)->read, total);
  CHECK(sim_app(p.b)->hash == sim_app(p.b)->expect_hash);
  CHECK(p.a->stats.retransmits > 50);
  sim_app_write(p.a, 0, 0, true);
  sim_app_write(p.b, 0, 0, true);
  CHECK(sim_run(&sim, sim_done_both_closed, &p, 30 * UDX_US_PER_S));
  CHECK(p.a->sndq.ext == NULL);
  CHECK_EQ(sim.pool.blocks, 0);
  sim_destroy(&sim);
}

// A stream destroyed with blocks queued and unacked (a peer that reads
// nothing: its window closes) unmaps them all.
static void
test_write_fill_destroyed (void) {
  sim_t sim;
  sim_init(&sim, 11);
  sim_pair_t p = sim_pair(&sim);
  sim_app(p.b)->reading = false;
  sim_app(p.a)->fill = true;
  sim_app_write(p.a, 79, 24 << 20, false);
  sim_advance(&sim, 2 * UDX_US_PER_S);
  CHECK(sim.pool.blocks > 0);
  CHECK(udx__stream_destroy(p.a, sim.now) == 1);
  sim_advance(&sim, UDX_US_PER_S);
  udx__stream_engine_free(p.a); // what the host does at finalize (again at sim_destroy: a no-op)
  CHECK_EQ(sim.pool.blocks, 0);
  sim_destroy(&sim);
}

static int
fill_fails (void *ctx, uint8_t *buf, size_t len) {
  UDX_UNUSED(ctx);
  UDX_UNUSED(buf);
  UDX_UNUSED(len);
  return -1;
}

typedef struct {
  udx_stream_t *s;
  uint64_t seed, at;
  int nested;  // what a write from inside fill got
  bool end;    // ... an end instead
  bool cancel; // ... a destroy instead
} fill_ctx_t;

static int
fill_seeded (void *ctx, uint8_t *buf, size_t len) {
  fill_ctx_t *f = ctx;
  for (size_t i = 0; i < len; i++)
    buf[i] = test_byte(f->seed, f->at + i);
  f->at += len;
  return 0;
}

static int
fill_reenters (void *ctx, uint8_t *buf, size_t len) {
  fill_ctx_t *f = ctx;
  if (f->cancel) {
    f->nested = udx__stream_destroy(f->s, 0);
  } else {
    uint8_t x[100] = {0};
    f->nested = udx__stream_write(f->s, x, sizeof(x), f->end, 0);
  }
  memset(buf, 7, len);
  return 0;
}

static bool
sndq_drained (sim_t *sim, void *ctx) {
  UDX_UNUSED(sim);
  udx_stream_t *s = ctx;
  return s->sndq.start == s->sndq.end;
}

// A short reservation given back leaves its chunks as room; a block that
// fits that room must not be made (it would have no strides: the queue's
// later blocks went to the chunk pool). Then sizes no queue takes.
static void
test_write_fill_after_failed (void) {
  sim_t sim;
  sim_init(&sim, 12);
  sim_pair_t p = sim_pair(&sim);
  uint64_t total = 256 * 1024 + 6 * (1 << 20);
  sim_app_expect(p.b, 4, total);
  fill_ctx_t f = {.seed = 4};
  CHECK_EQ(udx__stream_write_fill(p.a, 256 * 1024 - 1, fill_fails, NULL, sim.now), -1);
  CHECK(udx__stream_write_fill(p.a, 256 * 1024, fill_seeded, &f, sim.now) >= 0);
  for (int i = 0; i < 6; i++)
    CHECK(udx__stream_write_fill(p.a, 1 << 20, fill_seeded, &f, sim.now) >= 0);
  CHECK(sim_run(&sim, sndq_drained, p.a, 60 * UDX_US_PER_S));
  CHECK_EQ(sim_app(p.b)->read, total);
  CHECK(sim_app(p.b)->hash == sim_app(p.b)->expect_hash);
  CHECK(p.a->sndq.ext == NULL);
  CHECK_EQ(sim.pool.blocks, 0);
  CHECK_EQ(udx__stream_write_fill(p.a, SIZE_MAX - 100, fill_seeded, &f, sim.now), UDX_ERR_NOMEM);
  CHECK_EQ(udx__stream_write_fill(p.a, ((size_t) 1 << 40) + 1, fill_seeded, &f, sim.now), UDX_ERR_NOMEM);
  CHECK_EQ(f.at, total);
  sim_destroy(&sim);
}

// fill must not call into the stream: a write or an end from it is EBUSY
// and the run lands whole; a destroy from it queues nothing (ENOTCONN).
static void
test_write_fill_reentry (void) {
  sim_t sim;
  sim_init(&sim, 13);
  sim_pair_t p = sim_pair(&sim);
  p.b->cb.on_readable = NULL; // the bytes are 7s: not read here
  size_t sizes[] = {100, 20000, 300000};
  for (int end = 0; end < 2; end++) {
    for (int i = 0; i < 3; i++) {
      uint64_t before = p.a->sndq.end;
      fill_ctx_t f = {.s = p.a, .end = end};
      CHECK(udx__stream_write_fill(p.a, sizes[i], fill_reenters, &f, sim.now) >= 0);
      CHECK_EQ(f.nested, UDX_ERR_BUSY);
      CHECK_EQ(p.a->sndq.end, before + sizes[i]);
    }
  }
  CHECK(!(p.a->status & UDX_S_ENDING));
  CHECK(sim_run(&sim, sndq_drained, p.a, 30 * UDX_US_PER_S));
  uint64_t before = p.a->sndq.end;
  fill_ctx_t f = {.s = p.a, .cancel = true};
  CHECK_EQ(udx__stream_write_fill(p.a, 300000, fill_reenters, &f, sim.now), UDX_ERR_NOTCONN);
  CHECK_EQ(p.a->sndq.end, before);
  CHECK_EQ(sim.pool.blocks, 0);
  sim_destroy(&sim);
}

// The queue alone: a reserved run spans the last chunk's rest and a block;
// unreserve and destroy give everything back.
static void
test_bufq_reserve (void) {
  udx_pool_t pool;
  udx__pool_init(&pool);
  udx_bufq_t q;
  udx__bufq_init(&q, 1000);
  uint8_t small[5000];
  for (size_t i = 0; i < sizeof(small); i++)
    small[i] = test_byte(3, i);
  CHECK_EQ(udx__bufq_append(&q, &pool, small, sizeof(small)), 0);
  uint8_t *p;
  // fits the last chunk: in place
  CHECK_EQ(udx__bufq_reserve(&q, &pool, 100, &p), 0);
  CHECK(q.resv == NULL);
  for (size_t i = 0; i < 100; i++)
    p[i] = test_byte(3, 5000 + i);
  udx__bufq_commit(&q, &pool, 100);
  // across chunks, short: a buffer, copied
  CHECK_EQ(udx__bufq_reserve(&q, &pool, 20000, &p), 0);
  CHECK(q.resv != NULL && q.resv->map == NULL);
  for (size_t i = 0; i < 20000; i++)
    p[i] = test_byte(3, 5100 + i);
  udx__bufq_commit(&q, &pool, 20000);
  CHECK(q.resv == NULL && q.ext == NULL);
  // a block: 300000 bytes from stream offset 26100, 6668 of them in the
  // last chunk
  size_t big = 300000;
  CHECK_EQ(udx__bufq_reserve(&q, &pool, big, &p), 0);
  CHECK(q.resv != NULL && q.resv->map != NULL);
  for (size_t i = 0; i < big; i++)
    p[i] = test_byte(3, 25100 + i);
  udx__bufq_commit(&q, &pool, big);
  CHECK(q.resv == NULL && q.ext != NULL);
  CHECK_EQ(pool.blocks, 1);
  CHECK_EQ(udx__bufq_len(&q), 325100);
  // appends after it go on in the block's last stride
  CHECK_EQ(udx__bufq_append(&q, &pool, small, 10), 0);
  // every byte where it belongs
  uint64_t h = 0, want = 0;
  for (uint64_t off = q.start; off < q.end;) {
    struct iovec iov[4];
    int n = udx__bufq_iov(&q, off, (size_t) (q.end - off), iov, 4);
    for (int k = 0; k < n; k++) {
      h = test_hash(h, iov[k].iov_base, iov[k].iov_len);
      off += iov[k].iov_len;
    }
  }
  uint8_t b;
  for (size_t i = 0; i < 325100; i++) {
    b = test_byte(3, i);
    want = test_hash(want, &b, 1);
  }
  want = test_hash(want, small, 10);
  CHECK(h == want);
  // a reservation given back leaves nothing
  CHECK_EQ(udx__bufq_reserve(&q, &pool, 1 << 20, &p), 0);
  CHECK_EQ(pool.blocks, 2);
  udx__bufq_unreserve(&q, &pool);
  CHECK(q.resv == NULL);
  CHECK_EQ(pool.blocks, 1);
  CHECK_EQ(udx__bufq_len(&q), 325110);
  // released in part, then all: the block goes with its last stride
  udx__bufq_release(&q, &pool, 1000 + 50000);
  CHECK(q.ext != NULL);
  udx__bufq_release(&q, &pool, q.end);
  CHECK(q.ext == NULL);
  CHECK_EQ(pool.blocks, 0);
  CHECK_EQ(q.n, 0);
  CHECK_EQ(udx__bufq_append(&q, &pool, small, sizeof(small)), 0);
  CHECK_EQ(udx__bufq_reserve(&q, &pool, 400000, &p), 0);
  memset(p, 7, 400000);
  udx__bufq_commit(&q, &pool, 400000);
  CHECK(q.ext != NULL);
  CHECK_EQ(pool.blocks, 1);
  udx__bufq_destroy(&q, &pool);
  CHECK(q.ext == NULL && q.n == 0);
  CHECK_EQ(pool.blocks, 0);
  udx__pool_destroy(&pool);
}

// Every byte held is test_byte(seed, its offset from base).
static bool
bufq_holds (const udx_bufq_t *q, uint64_t seed, uint64_t base) {
  for (uint64_t off = q->start; off < q->end;) {
    struct iovec iov[8];
    int n = udx__bufq_iov(q, off, (size_t) (q->end - off), iov, 8);
    for (int k = 0; k < n; k++) {
      const uint8_t *b = iov[k].iov_base;
      for (size_t i = 0; i < iov[k].iov_len; i++)
        if (b[i] != test_byte(seed, off - base + i))
          return false;
      off += iov[k].iov_len;
    }
  }
  return true;
}

// A queue from stream offset base with 100 bytes of seed in it (the next
// block's lead is the rest of their chunk); returns the bytes held.
static uint64_t
bufq_start (udx_bufq_t *q, udx_pool_t *pool, uint64_t base, uint64_t seed) {
  udx__bufq_init(q, base);
  uint8_t head[100];
  for (size_t i = 0; i < sizeof(head); i++)
    head[i] = test_byte(seed, i);
  CHECK_EQ(udx__bufq_append(q, pool, head, sizeof(head)), 0);
  return sizeof(head);
}

// A block of len bytes of seed, from at, reserved (ext, whose checks are
// the caller's, before) and committed.
static void
bufq_fill_block (udx_bufq_t *q, udx_pool_t *pool, size_t len, uint64_t seed, uint64_t at, udx_bufq_ext_t **ext) {
  uint8_t *p;
  CHECK_EQ(udx__bufq_reserve_block(q, pool, len, ext, &p), 0);
  for (size_t i = 0; i < len; i++)
    p[i] = test_byte(seed, at + i);
  udx__bufq_commit_block(q, pool, *ext, len);
}

// Released strides' pages are kept (moved, not faulted in again) for the
// next block, which takes them at its reservation; a queue that empties,
// or is destroyed, lets them go.
static void
test_bufq_spare (void) {
  udx_pool_t pool;
  udx__pool_init(&pool);
  udx_bufq_t q;
  uint64_t at = bufq_start(&q, &pool, 7, 5);
  for (int round = 0; round < 3; round++) {
    size_t len = 3 * 1000 * 1000 + (size_t) round * 77777;
    udx_bufq_ext_t *e;
    bufq_fill_block(&q, &pool, len, 5, at, &e);
    CHECK(q.spare == NULL); // taken by the block
    at += len;
    CHECK(bufq_holds(&q, 5, 7));
    // the first 2 MB acked: their pages wait for the next block
    udx__bufq_release(&q, &pool, q.end - len + 2 * 1000 * 1000);
    CHECK(q.spare != NULL);
    CHECK(bufq_holds(&q, 5, 7));
  }
  // emptied: nothing kept
  udx__bufq_release(&q, &pool, q.end);
  CHECK(q.spare == NULL);
  CHECK_EQ(pool.blocks, 0);
  // destroyed with pages kept
  udx_bufq_ext_t *e;
  uint8_t *p;
  CHECK_EQ(udx__bufq_reserve_block(&q, &pool, 3 * 1000 * 1000, &e, &p), 0);
  memset(p, 1, 3 * 1000 * 1000);
  udx__bufq_commit_block(&q, &pool, e, 3 * 1000 * 1000);
  udx__bufq_release(&q, &pool, q.start + 2 * 1000 * 1000);
  CHECK(q.spare != NULL);
  udx__bufq_destroy(&q, &pool);
  CHECK(q.spare == NULL);
  CHECK_EQ(pool.blocks, 0);
  udx__pool_destroy(&pool);
}

// With huge pages (pool.huge), a block's strides start on a huge-page
// boundary, released strides go back in whole huge pages only (a part
// would split one), and no pages are kept as spares: base pages moved into
// a block would split its huge pages.
static void
test_bufq_huge (void) {
  const size_t huge = 2 * 1024 * 1024;
  udx_pool_t pool;
  udx__pool_init(&pool);
  pool.huge = huge;
  udx_bufq_t q;
  uint64_t at = bufq_start(&q, &pool, 11, 6);
  for (int round = 0; round < 2; round++) {
    size_t len = 5 * 1000 * 1000 + (size_t) round * 55555;
    udx_bufq_ext_t *e;
    bufq_fill_block(&q, &pool, len, 6, at, &e);
    CHECK_EQ(e->unit, huge);
    CHECK_EQ((uintptr_t) e->strides % huge, 0);
    at += len;
    CHECK(bufq_holds(&q, 6, 11));
    size_t kept = (size_t) (e->strides - e->map); // the pad and lead went at commit
    CHECK_EQ(e->unmapped, kept);
    // acked up to 1.5 MB into the strides: no whole huge page yet
    uint64_t strides_at = e->off;
    udx__bufq_release(&q, &pool, strides_at + 1500 * 1000);
    CHECK_EQ(e->unmapped, kept);
    // past 2 MiB: that huge page goes, and nothing is kept as spare
    udx__bufq_release(&q, &pool, strides_at + huge + 300 * 1000);
    CHECK_EQ(e->unmapped, kept + huge);
    CHECK(q.spare == NULL);
    CHECK(bufq_holds(&q, 6, 11));
  }
  udx__bufq_release(&q, &pool, q.end);
  CHECK(q.spare == NULL);
  CHECK_EQ(pool.blocks, 0);
  // a reservation given back, and one destroyed with the queue
  uint8_t *p;
  CHECK_EQ(udx__bufq_reserve(&q, &pool, 3 * 1000 * 1000, &p), 0);
  CHECK_EQ((uintptr_t) q.resv->strides % huge, 0);
  udx__bufq_unreserve(&q, &pool);
  CHECK_EQ(pool.blocks, 0);
  CHECK_EQ(udx__bufq_reserve(&q, &pool, 3 * 1000 * 1000, &p), 0);
  memset(p, 3, 3 * 1000 * 1000);
  udx__bufq_commit(&q, &pool, 3 * 1000 * 1000);
  CHECK_EQ(pool.blocks, 1);
  udx__bufq_destroy(&q, &pool);
  CHECK_EQ(pool.blocks, 0);
  // a size that is not a power of two means base pages
  pool.huge = 3 * 1024 * 1024;
  udx_bufq_ext_t *e;
  CHECK_EQ(udx__bufq_reserve_block(&q, &pool, 1000 * 1000, &e, &p), 0);
  CHECK_EQ(e->unit, (size_t) sysconf(_SC_PAGESIZE));
  udx__bufq_commit_block(&q, &pool, e, 1000 * 1000);
  udx__bufq_destroy(&q, &pool);
  CHECK_EQ(pool.blocks, 0);
  udx__pool_destroy(&pool);
}

static const test_case_t cases[] = {
    {"bufq_reserve", test_bufq_reserve},
    {"bufq_spare", test_bufq_spare},
    {"bufq_huge", test_bufq_huge},
    {"write_fill", test_write_fill},
    {"write_fill_destroyed", test_write_fill_destroyed},
    {"write_fill_after_failed", test_write_fill_after_failed},
    {"write_fill_reentry", test_write_fill_reentry},
    {"no_alloc_per_packet", test_no_alloc_per_packet},
    {"small", test_small},
    {"clean_1mb", test_clean_1mb},
    {"loss", test_loss},
    {"reorder_dup", test_reorder_dup},
    {"zero_copy", test_zero_copy},
    {"bottleneck", test_bottleneck},
    {"blackout", test_blackout},
    {"corruption", test_corruption},
    {"seq_wrap", test_seq_wrap},
    {NULL, NULL},
};

int
main (int argc, char **argv) {
  return test_main(argc, argv, cases);
}
