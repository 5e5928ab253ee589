// The UDX stream engine (sans-IO): two connected streams A and B exchange
// datagrams through queues the fuzz input controls (deliver, drop, duplicate,
// reorder, delay), while the input also drives writes, reads, END, time and,
// in hostile mode, forged and corrupted datagrams.
//
// Checked after every step: the send-state bookkeeping (inflight, lost and
// SACKed counts, the send queue offsets), the receive bound (held bytes <=
// limit + one packet), timers that move forward, and, without forged input,
// that every byte read is the byte written at that offset. Without forged
// input a final lossless phase must end both streams cleanly with all bytes
// delivered, or with ETIMEDOUT (the give-up time) — never a hang.
//
// Input: byte 0 = mode bits, then one op per byte with operands after it.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../udx/src/stream.h"
#include "../udx/src/wire.h"

#define REQUIRE(c)                                                              \
  do {                                                                          \
    if (!(c)) {                                                                 \
      fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #c); \
      abort();                                                                  \
    }                                                                           \
  } while (0)

#define MODE_HOSTILE   0x01 // forged / corrupted datagrams allowed
#define MODE_READLIMIT 0x02 // B has a read-buffer limit
#define MODE_BATCH     0x04 // B acks once per batch
#define MODE_WRAP      0x08 // sequence numbers start just below 2^32
#define MODE_PAUSED    0x10 // B starts with a paused reader
#define MODE_IPV6      0x20
#define MODE_SMALLRWND 0x40 // B's maximum window is small

#define QCAP      512
#define MAX_WRITE (1024 * 1024) // per side: keeps one input fast, lets a fill take a block
#define HEAL_US   (300 * UDX_US_PER_S)

typedef struct {
  uint8_t *buf;
  size_t len;
} dgram_t;

typedef struct {
  dgram_t q[QCAP];
  uint32_t head;
  uint32_t len;
} queue_t;

typedef struct {
  int node; // 0: A, 1: B
} port_t;

typedef struct app_s {
  int node;
  uint64_t seed;
  uint64_t written;
  bool ended;
  uint64_t read;
  bool reading;
  bool eof;
  bool closed;
  int close_status;
  bool dirty;
  bool destroyed;
} app_t;

static struct {
  uint64_t now;
  udx_pool_t pool;
  udx_stream_t s[2];
  app_t app[2];
  queue_t q[2]; // q[0]: A -> B, q[1]: B -> A
  port_t ports[2][2];
  bool hostile;
  bool forged; // forged or corrupted input was delivered
} w;

static const uint8_t *in;
static size_t in_len;

static uint8_t
take (void) {
  if (in_len == 0)
    return 0;
  in_len--;
  return *in++;
}

static uint8_t
pattern (uint64_t seed, uint64_t off) {
  uint64_t z = (seed + 1) * 0x9e3779b97f4a7c15ull + (off >> 3) * 0xbf58476d1ce4e5b9ull;
  z ^= z >> 31;
  z *= 0x94d049bb133111ebull;
  z ^= z >> 29;
  return (uint8_t) (z >> (8 * (off & 7)));
}

// --- the queues

static void
q_push (queue_t *q, const uint8_t *buf, size_t len) {
  if (q->len == QCAP) { // full: the oldest is lost
    free(q->q[q->head].buf);
    q->head = (q->head + 1) % QCAP;
    q->len--;
  }
  dgram_t *d = &q->q[(q->head + q->len) % QCAP];
  d->buf = malloc(len ? len : 1);
  REQUIRE(d->buf != NULL);
  memcpy(d->buf, buf, len);
  d->len = len;
  q->len++;
}

static bool
q_pop (queue_t *q, dgram_t *out) {
  if (q->len == 0)
    return false;
  *out = q->q[q->head];
  q->head = (q->head + 1) % QCAP;
  q->len--;
  return true;
}

static void
q_clear (queue_t *q) {
  dgram_t d;
  while (q_pop(q, &d))
    free(d.buf);
}

// --- host

// Copies every datagram at once, so it never pins the send queue.
static void
host_send (udx_stream_t *s, const udx_remote_t *to, const struct iovec *iov, int iovcnt, size_t len, bool queued) {
  (void) s;
  (void) queued;
  const port_t *port = to->socket;
  uint8_t buf[4096];
  REQUIRE(len <= sizeof(buf));
  size_t off = 0;
  for (int i = 0; i < iovcnt; i++) {
    REQUIRE(off + iov[i].iov_len <= len);
    memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
    off += iov[i].iov_len;
  }
  REQUIRE(off == len);
  // What the engine sends always decodes.
  udx_wire_pkt_t p;
  REQUIRE(udx__wire_decode(buf, len, &p) == UDX_WIRE_OK);
  REQUIRE(len <= UDX_MTU_MAX);
  q_push(&w.q[port->node], buf, len);
}

static void
host_closed (udx_stream_t *s) {
  app_t *a = s->data;
  a->closed = true;
  a->close_status = s->close_status;
}

static void
host_wake (udx_stream_t *s) {
  ((app_t *) s->data)->dirty = true;
}

static void
host_remote_changed (udx_stream_t *s) {
  (void) s;
}

static const udx_host_t host = {
    .send = host_send,
    .closed = host_closed,
    .wake = host_wake,
    .remote_changed = host_remote_changed,
};

// --- the application on each side

static void
drain_reader (udx_stream_t *s) {
  app_t *a = s->data;
  uint8_t buf[16384];
  for (;;) {
    ssize_t n = udx__stream_read(s, buf, sizeof(buf), w.now);
    if (n > 0) {
      if (!w.forged) {
        for (ssize_t i = 0; i < n; i++)
          REQUIRE(buf[i] == pattern(1 - a->node, a->read + (uint64_t) i));
      }
      a->read += (uint64_t) n;
      continue;
    }
    if (n == UDX_ERR_EOF)
      a->eof = true;
    REQUIRE(n == 0 || n == UDX_ERR_EOF || udx__stream_dead(s));
    break;
  }
}

static void
on_readable (udx_stream_t *s) {
  if (((app_t *) s->data)->reading)
    drain_reader(s);
}

static void
app_write (udx_stream_t *s, size_t n, bool end) {
  app_t *a = s->data;
  if (a->ended || a->closed)
    return;
  if (a->written + n > MAX_WRITE)
    n = (size_t) (MAX_WRITE - a->written);
  static uint8_t buf[65536];
  if (n > sizeof(buf))
    n = sizeof(buf);
  for (size_t i = 0; i < n; i++)
    buf[i] = pattern(a->node, a->written + i);
  int r = udx__stream_write(s, buf, n, end, w.now);
  REQUIRE(r == 0 || r == 1);
  a->written += n;
  if (end)
    a->ended = true;
}

static int
fill_pattern (void *ctx, uint8_t *buf, size_t len) {
  app_t *a = ctx;
  for (size_t i = 0; i < len; i++)
    buf[i] = pattern(a->node, a->written + i);
  return 0;
}

static int
fill_fails (void *ctx, uint8_t *buf, size_t len) {
  (void) ctx;
  memset(buf, 0xee, len); // never sent: nothing is queued
  return -1;
}

// A write made in place (udx__stream_write_fill): short, across chunks, or a
// block of its own; or a fill that fails and queues nothing.
static void
app_fill (udx_stream_t *s, size_t n, bool block, bool fails) {
  app_t *a = s->data;
  if (a->ended || a->closed)
    return;
  if (block)
    n += UDX_BUFQ_BLOCK_MIN;
  if (a->written + n > MAX_WRITE)
    n = (size_t) (MAX_WRITE - a->written);
  uint64_t end = s->sndq.end;
  int r = udx__stream_write_fill(s, n, fails ? fill_fails : fill_pattern, a, w.now);
  if (fails && n > 0) {
    REQUIRE(r == -1 && s->sndq.end == end);
    return;
  }
  REQUIRE(r == 0 || r == 1);
  REQUIRE(s->sndq.end == end + n);
  a->written += n;
}

// --- invariants

static void
check_stream (udx_stream_t *s) {
  if (udx__stream_dead(s))
    return;
  uint32_t outstanding = s->snd_nxt - s->snd_una;
  REQUIRE(outstanding == 0 || outstanding <= s->pkts_cap);
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
    REQUIRE(!((p->flags & UDX_PKT_INFLIGHT) && (p->flags & (UDX_PKT_LOST | UDX_PKT_SACKED))));
    REQUIRE(p->off + p->len <= s->sndq.end);
  }
  REQUIRE(inflight == s->inflight);
  REQUIRE(lost == s->lost_pending);
  REQUIRE(sacked == s->sacked);
  REQUIRE(s->sndq.start <= s->snd_pkt_off && s->snd_pkt_off <= s->sndq.end);
  REQUIRE(s->rtxq_len <= s->rtxq_cap);
  REQUIRE(s->ooo_count <= (1u << 17));
  REQUIRE(s->nranges <= s->ooo_count);

  // The receive bound: limit (or the maximum window) plus one packet.
  uint64_t limit = s->read_limit ? s->read_limit : s->recv_rwnd_max;
  uint64_t held = udx__bufq_len(&s->rdq) + s->ooo_bytes;
  REQUIRE(held <= limit + UDX_SLOT_SIZE);
}

static void
settle (void) {
  for (int i = 0; i < 2; i++) {
    udx_stream_t *s = &w.s[i];
    app_t *a = &w.app[i];
    if (a->dirty && !udx__stream_dead(s)) {
      a->dirty = false;
      udx__stream_flush(s, w.now);
    }
  }
  for (int i = 0; i < 2; i++)
    check_stream(&w.s[i]);
}

// Runs every timer due up to `until`, in time order.
static void
advance (uint64_t until) {
  for (int guard = 0;; guard++) {
    REQUIRE(guard < 100000); // timers must move forward
    uint64_t t = UDX_NEVER;
    for (int i = 0; i < 2; i++)
      t = udx__min_u64(t, udx__stream_deadline(&w.s[i]));
    if (t > until)
      break;
    if (t > w.now)
      w.now = t;
    for (int i = 0; i < 2; i++) {
      udx_stream_t *s = &w.s[i];
      if (udx__stream_deadline(s) <= w.now) {
        udx__stream_timer(s, w.now);
        // a timer that fired re-armed itself later (or not at all)
        REQUIRE(udx__stream_deadline(s) > w.now || w.app[i].dirty);
      }
    }
    settle();
  }
  if (until > w.now)
    w.now = until;
}

static void
deliver (int dir, const uint8_t *buf, size_t len) {
  udx_stream_t *to = &w.s[1 - dir];
  uint32_t id;
  if (!udx__wire_peek(buf, len, &id) || id != to->local_id || udx__stream_dead(to))
    return;
  // the engine may keep pointers only for the duration of the call
  uint8_t copy[4096];
  REQUIRE(len <= sizeof(copy));
  memcpy(copy, buf, len);
  udx__stream_recv(to, copy, len, w.now);
  memset(copy, 0xee, len);
  settle();
}

static void
deliver_next (int dir, bool keep) {
  dgram_t d;
  if (!q_pop(&w.q[dir], &d))
    return;
  deliver(dir, d.buf, d.len);
  if (keep)
    q_push(&w.q[dir], d.buf, d.len); // a duplicate, later
  free(d.buf);
}

// A forged datagram for node `to`, its fields near that stream's state.
static void
forge (int to) {
  udx_stream_t *s = &w.s[to];
  uint8_t pkt[UDX_HEADER_SIZE + 8 * 32 + 1500];
  uint8_t type = take() & 0x3f;
  if (!(take() & 0x80))
    type &= (uint8_t) ~UDX_HEADER_DESTROY;
  uint32_t seq = s->rcv_nxt + (uint32_t) (int32_t) (int8_t) take();
  uint32_t ack = s->snd_una + (uint32_t) (int32_t) (int8_t) take();
  uint8_t rw = take();
  uint32_t rwnd = rw == 0xff ? (uint32_t) -1 : (uint32_t) rw << 12;
  size_t nsacks = (type & UDX_HEADER_SACK) ? take() % 33 : 0;
  size_t payload = take();
  if (payload & 0x80)
    payload = (payload & 0x7f) * 16; // up to 2032
  if (payload > 1400)
    payload = 1400;
  uint8_t data_offset = (uint8_t) (nsacks * 8);
  if (take() == 0x5a)
    data_offset = take(); // arbitrary (maybe inconsistent)
  size_t off = UDX_HEADER_SIZE;
  for (size_t i = 0; i < nsacks; i++) {
    uint32_t start = s->snd_una + (uint32_t) (int32_t) (int8_t) take();
    uint32_t end = start + take();
    udx__wire_put_sack(pkt + off, 0, start, end);
    off += 8;
  }
  for (size_t i = 0; i < payload; i++)
    pkt[off++] = take();
  udx__wire_header(pkt, type, data_offset, s->local_id, rwnd, seq, ack);
  w.forged = true;
  deliver(1 - to, pkt, off);
}

static void
corrupt_next (int dir) {
  dgram_t d;
  if (!q_pop(&w.q[dir], &d))
    return;
  if (d.len) {
    size_t at = take() % d.len;
    d.buf[at] ^= (uint8_t) (take() | 1);
  }
  if (take() & 1)
    d.len -= d.len ? take() % (d.len + 1) : 0; // truncated too
  w.forged = true;
  deliver(dir, d.buf, d.len);
  free(d.buf);
}

static void
swap_next (int dir) {
  queue_t *q = &w.q[dir];
  if (q->len < 2)
    return;
  uint32_t j = 1 + take() % (q->len - 1);
  dgram_t *a = &q->q[q->head], *b = &q->q[(q->head + j) % QCAP];
  dgram_t t = *a;
  *a = *b;
  *b = t;
}

static bool
both_done (void) {
  for (int i = 0; i < 2; i++) {
    if (!w.app[i].closed)
      return false;
  }
  return true;
}

// Lossless delivery until both streams closed (or the time is up).
static void
heal (void) {
  for (int i = 0; i < 2; i++) {
    w.app[i].reading = true;
    if (!udx__stream_dead(&w.s[i])) {
      drain_reader(&w.s[i]);
      app_write(&w.s[i], 0, true);
    }
  }
  settle();
  uint64_t end = w.now + HEAL_US;
  while (!both_done() && w.now < end) {
    if (w.q[0].len || w.q[1].len) {
      // a little one-way delay, so time moves on as on a real path
      w.now += 100;
      while (w.q[0].len || w.q[1].len) {
        deliver_next(0, false);
        deliver_next(1, false);
      }
      advance(w.now);
      continue;
    }
    uint64_t t = UDX_NEVER;
    for (int i = 0; i < 2; i++)
      t = udx__min_u64(t, udx__stream_deadline(&w.s[i]));
    if (t == UDX_NEVER)
      break;
    advance(t > end ? end : t);
  }
  bool timed_out = false;
  for (int i = 0; i < 2; i++) {
    if (w.app[i].closed && w.app[i].close_status == UDX_ERR_TIMEDOUT)
      timed_out = true;
  }
  if (timed_out)
    return; // the give-up time ended it: a clear error, not a hang
  if (!both_done()) {
    fprintf(stderr, "hang: A closed %d status %d, B closed %d status %d; read %llu/%llu and %llu/%llu\n", w.app[0].closed, w.app[0].close_status, w.app[1].closed, w.app[1].close_status, (unsigned long long) w.app[1].read, (unsigned long long) w.app[0].written, (unsigned long long) w.app[0].read, (unsigned long long) w.app[1].written);
    for (int i = 0; i < 2; i++) {
      udx_stream_t *s = &w.s[i];
      fprintf(stderr, "  %c: pacing_rate %llu B/s bbr state %u bw %g pkt/us min_rtt %u srtt %u tokens %lld\n", "AB"[i], (unsigned long long) s -> pacing_rate, s -> bbr.state, udx__bbr_bw(s), s->bbr.min_rtt_us, s->srtt, (long long) s->tokens);
      fprintf(stderr, "  %c: status %#x snd_una %u snd_nxt %u inflight %u lost %u sacked %u rtxq %u cwnd %u send_rwnd %u sndq %llu..%llu pkt_off %llu | rcv_nxt %u rdq %llu ooo %u recv_rwnd %u read_limit %llu reading %d | deadline %lld rto_at %lld tlp_at %lld zwp_at %lld pace_at %lld now %llu\n", "AB"[i], s -> status, s -> snd_una, s -> snd_nxt, s -> inflight, s -> lost_pending, s -> sacked, s -> rtxq_len, s -> cwnd, s -> send_rwnd, (unsigned long long) s -> sndq.start, (unsigned long long) s->sndq.end, (unsigned long long) s->snd_pkt_off, s->rcv_nxt, (unsigned long long) udx__bufq_len(&s->rdq), s->ooo_count, udx__recv_rwnd(s), (unsigned long long) s->read_limit, w.app[i].reading, (long long) udx__stream_deadline(s), (long long) s->rto_at, (long long) s->tlp_at, (long long) s->zwp_at, (long long) s->pace_at, (unsigned long long) w.now);
    }
    abort();
  }
  for (int i = 0; i < 2; i++) {
    REQUIRE(w.app[i].close_status == 0);
    REQUIRE(w.app[i].eof);
    REQUIRE(w.app[i].read == w.app[1 - i].written);
  }
}

static void
setup (uint8_t mode) {
  memset(&w, 0, sizeof(w));
  w.now = 1000000;
  w.hostile = mode & MODE_HOSTILE;
  udx__pool_init(&w.pool);
  for (int i = 0; i < 2; i++) {
    udx_stream_t *s = &w.s[i];
    app_t *a = &w.app[i];
    a->node = i;
    a->reading = true;
    w.ports[i][0].node = i;
    w.ports[i][1].node = i;
    udx__stream_engine_init(s, (uint32_t) (i + 1), &host, &w.pool, w.now);
    s->cb.on_readable = on_readable;
    s->data = a;
  }
  udx_stream_t *b = &w.s[1];
  if (mode & MODE_READLIMIT)
    b->read_limit = 16384;
  if (mode & MODE_SMALLRWND)
    b->recv_rwnd_max = 32768;
  if (mode & MODE_BATCH)
    b->ack_policy = UDX_ACK_BATCH;
  if (mode & MODE_PAUSED)
    w.app[1].reading = false;
  if (mode & MODE_WRAP) {
    uint32_t start = 0xfffffff0u;
    for (int i = 0; i < 2; i++) {
      udx_stream_t *s = &w.s[i];
      s->snd_una = s->snd_nxt = s->snd_wl2 = start;
      s->high_seq = s->rack_end_seq = s->rack_fack = s->tlp_end_seq = start;
      s->rcv_nxt = s->snd_wl1 = start;
    }
  }
  for (int i = 0; i < 2; i++) {
    udx_stream_t *s = &w.s[i];
    udx_remote_t to = {.socket = &w.ports[i][0], .id = (uint32_t) (2 - i), .ipv6 = (mode & MODE_IPV6) != 0};
    udx__stream_engine_connect(s, &to, 1500, w.now);
  }
  settle();
}

static void
teardown (void) {
  for (int i = 0; i < 2; i++) {
    q_clear(&w.q[i]);
    udx__stream_engine_free(&w.s[i]);
  }
  udx__pool_destroy(&w.pool);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  in = data;
  in_len = size;
  uint8_t mode = take();
  setup(mode);
  app_write(&w.s[0], 4096, false);
  settle();

  int ops = 0;
  while (in_len > 0 && ops++ < 2000) {
    uint8_t op = take();
    int dir = op & 1;
    switch ((op >> 1) % 16) {
      case 0: { // deliver a few, in order
        int n = 1 + take() % 16;
        for (int i = 0; i < n; i++)
          deliver_next(dir, false);
        break;
      }
      case 1: { // drop
        dgram_t d;
        if (q_pop(&w.q[dir], &d))
          free(d.buf);
        break;
      }
      case 2: // duplicate
        deliver_next(dir, true);
        break;
      case 3: // reorder
        swap_next(dir);
        break;
      case 4: { // time passes
        uint32_t b = take();
        advance(w.now + (uint64_t) (b * b + 1) * 100);
        break;
      }
      case 5: { // write, copied or made in place
        uint32_t how = take();
        size_t n = (size_t) take() * 256 + take();
        if (how < 192)
          app_write(&w.s[dir], n, false);
        else
          app_fill(&w.s[dir], n, how & 1, (how & 6) == 6);
        break;
      }
      case 6: { // the reader reads, pauses or resumes
        app_t *a = &w.app[dir];
        uint8_t b = take();
        if (b & 1) {
          a->reading = !a->reading;
        }
        if (!udx__stream_dead(&w.s[dir]) && (b & 2)) {
          if (b & 4) { // a partial read
            uint8_t tmp[512];
            ssize_t n = udx__stream_read(&w.s[dir], tmp, 1 + b % sizeof(tmp), w.now);
            if (n > 0) {
              if (!w.forged) {
                for (ssize_t i = 0; i < n; i++)
                  REQUIRE(tmp[i] == pattern(1 - a->node, a->read + (uint64_t) i));
              }
              a->read += (uint64_t) n;
            } else if (n == UDX_ERR_EOF) {
              a->eof = true;
            }
          } else {
            drain_reader(&w.s[dir]);
          }
        }
        settle();
        break;
      }
      case 7: // END
        app_write(&w.s[dir], 0, true);
        settle();
        break;
      case 8: // everything queued both ways
        while (w.q[0].len || w.q[1].len) {
          deliver_next(0, false);
          deliver_next(1, false);
        }
        break;
      case 9: // flush (as the io layer does at the end of a batch)
        if (!udx__stream_dead(&w.s[dir]))
          udx__stream_flush(&w.s[dir], w.now);
        settle();
        break;
      case 10: // a MESSAGE
        if (!udx__stream_dead(&w.s[dir])) {
          uint8_t msg[64] = {0};
          udx__stream_send_message(&w.s[dir], msg, take() % sizeof(msg), w.now);
          settle();
        }
        break;
      case 11: // move to the other port of the same node
        if (!udx__stream_dead(&w.s[dir]) && !(w.s[dir].status & UDX_S_CHANGING)) {
          udx_stream_t *s = &w.s[dir];
          udx_remote_t to = {.socket = &w.ports[dir][(take() & 1)], .id = (uint32_t) (2 - dir), .ipv6 = (mode & MODE_IPV6) != 0};
          udx__stream_engine_change_remote(s, &to, 1500, w.now);
          settle();
        }
        break;
      case 12: // forged datagram
      case 13:
        if (w.hostile)
          forge(1 - dir);
        break;
      case 14:
        if (w.hostile)
          corrupt_next(dir);
        break;
      case 15: // abortive close (rarely)
        if (take() == 0xd5 && w.hostile) {
          udx__stream_destroy(&w.s[dir], w.now);
          w.app[dir].destroyed = true;
          settle();
        }
        break;
    }
  }

  if (!w.forged && !w.app[0].destroyed && !w.app[1].destroyed && !w.app[0].closed && !w.app[1].closed)
    heal();
  teardown();
  return 0;
}
