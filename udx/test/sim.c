#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/wire.h"
#include "sim.h"
#include "test.h"

typedef struct sim_event_s {
  uint64_t at;
  uint64_t order;
  int to;
  size_t len;
  uint8_t *buf;
} sim_event_t;

typedef struct sim_port_s {
  sim_t *sim;
  int from;
} sim_port_t;

static sim_port_t sim_ports[64][2];
static int sim_nports;

// --- event heap ordered by (at, order)

static bool
ev_less (const sim_event_t *a, const sim_event_t *b) {
  return a->at < b->at || (a->at == b->at && a->order < b->order);
}

static void
heap_push (sim_t *sim, sim_event_t ev) {
  if (sim->heap_len == sim->heap_cap) {
    sim->heap_cap = sim->heap_cap ? sim->heap_cap * 2 : 1024;
    sim->heap = realloc(sim->heap, sim->heap_cap * sizeof(sim_event_t));
  }
  ev.order = sim->heap_order++;
  uint32_t i = sim->heap_len++;
  sim->heap[i] = ev;
  while (i > 0) {
    uint32_t p = (i - 1) / 2;
    if (!ev_less(&sim->heap[i], &sim->heap[p]))
      break;
    sim_event_t t = sim->heap[i];
    sim->heap[i] = sim->heap[p];
    sim->heap[p] = t;
    i = p;
  }
}

static sim_event_t
heap_pop (sim_t *sim) {
  sim_event_t top = sim->heap[0];
  sim->heap[0] = sim->heap[--sim->heap_len];
  uint32_t i = 0;
  for (;;) {
    uint32_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < sim->heap_len && ev_less(&sim->heap[l], &sim->heap[m]))
      m = l;
    if (r < sim->heap_len && ev_less(&sim->heap[r], &sim->heap[m]))
      m = r;
    if (m == i)
      break;
    sim_event_t t = sim->heap[i];
    sim->heap[i] = sim->heap[m];
    sim->heap[m] = t;
    i = m;
  }
  return top;
}

// --- host callbacks

typedef struct sim_pending_s {
  udx_stream_t *s;
  int from;
  uint8_t hdr[UDX_HEADER_SIZE];
  struct iovec iov[8];
  int iovcnt;
  size_t len;
} sim_pending_t;

static void
sim_link_send (sim_t *sim, int from, uint8_t *buf, size_t len) {
  sim_link_t *link = &sim->link[from];

  if (sim->tap)
    sim->tap(sim->tap_ctx, from, buf, len);

  link->sent++;
  link->bytes += len;

  uint64_t now = sim->now;
  bool drop = false;
  if (now >= link->blackout_start && now < link->blackout_end)
    drop = true;
  if (!drop && link->loss > 0 && udx__rand_unit(&sim->rng) < link->loss)
    drop = true;
  if (!drop && link->filter && link->filter(link->filter_ctx, buf, len))
    drop = true;
  if (!drop && link->rewrite)
    len = link->rewrite(link->filter_ctx, buf, len);

  uint64_t depart = now;
  if (!drop && link->rate) {
    uint64_t start = link->busy_until > now ? link->busy_until : now;
    uint64_t backlog = (start - now) * link->rate / UDX_US_PER_S;
    uint64_t wire = len + link->overhead;
    if (link->queue_bytes && backlog + wire > link->queue_bytes) {
      drop = true;
    } else {
      link->busy_until = start + (wire * UDX_US_PER_S + link->rate - 1) / link->rate;
      depart = link->busy_until;
    }
  }

  if (drop) {
    link->dropped++;
    free(buf);
    return;
  }

  uint64_t at = depart + link->delay_us;
  if (link->reorder > 0 && udx__rand_unit(&sim->rng) < link->reorder)
    at += link->reorder_us;
  if (link->batch_us)
    at = (at + link->batch_us - 1) / link->batch_us * link->batch_us;
  if (link->corrupt > 0 && len > 0 && udx__rand_unit(&sim->rng) < link->corrupt) {
    buf[udx__rand_next(&sim->rng) % len] ^= (uint8_t) (1 + udx__rand_next(&sim->rng) % 255);
  }

  if (link->dup > 0 && udx__rand_unit(&sim->rng) < link->dup) {
    uint8_t *copy = malloc(len ? len : 1);
    memcpy(copy, buf, len);
    heap_push(sim, (sim_event_t){.at = at + 1, .to = 1 - from, .len = len, .buf = copy});
  }
  heap_push(sim, (sim_event_t){.at = at, .to = 1 - from, .len = len, .buf = buf});
}

static void
sim_host_send (udx_stream_t *s, const udx_remote_t *to, const struct iovec *iov, int iovcnt, size_t len, bool queued) {
  sim_port_t *port = to->socket;
  sim_t *sim = port->sim;

  if (sim->zero_copy && queued && iovcnt <= 8 && iov[0].iov_len <= UDX_HEADER_SIZE) {
    if (sim->npending == sim->pending_cap) {
      sim->pending_cap = sim->pending_cap ? sim->pending_cap * 2 : 256;
      sim->pending = realloc(sim->pending, sim->pending_cap * sizeof(sim_pending_t));
    }
    if (sim->npending == 0)
      sim->pending_since = sim->now;
    sim_pending_t *p = &sim->pending[sim->npending++];
    p->s = s;
    p->from = port->from;
    memcpy(p->hdr, iov[0].iov_base, iov[0].iov_len);
    p->iov[0].iov_base = p->hdr;
    p->iov[0].iov_len = iov[0].iov_len;
    for (int i = 1; i < iovcnt; i++)
      p->iov[i] = iov[i];
    p->iovcnt = iovcnt;
    p->len = len;
    s->tx_pins++;
    return;
  }

  uint8_t *buf = malloc(len ? len : 1);
  size_t off = 0;
  for (int i = 0; i < iovcnt; i++) {
    memcpy(buf + off, iov[i].iov_base, iov[i].iov_len);
    off += iov[i].iov_len;
  }
  sim_link_send(sim, port->from, buf, len);
}

// A kept payload must still be in the stream's send queue when it is read.
static bool
sim_iov_held (const udx_stream_t *s, const struct iovec *v) {
  const udx_bufq_t *q = &s->sndq;
  const uint8_t *b = v->iov_base;
  for (uint32_t i = 0; i < q->n; i++) {
    const uint8_t *c = q->chunks[(q->first + i) & (q->cap - 1)];
    if (b >= c && b + v->iov_len <= c + UDX_CHUNK_SIZE)
      return true;
  }
  return false;
}

// The end of a step: pinned datagrams are read now, then let go.
static void
sim_flush_pending (sim_t *sim) {
  // held a while (a full socket), but never while nothing else moves
  if (sim->npending && sim->now < sim->pending_since + sim->zero_copy_hold_us && sim->heap_len > 0)
    return;
  for (uint32_t i = 0; i < sim->npending; i++) {
    sim_pending_t *p = &sim->pending[i];
    for (int k = 1; k < p->iovcnt; k++) {
      const uint8_t *b = p->iov[k].iov_base;
      bool zeros = b[0] == 0 && p->hdr[3] != 0 && k == 1; // MTU probe padding
      if (!zeros && !sim_iov_held(p->s, &p->iov[k])) {
        fprintf(stderr, "sim: a kept payload left the send queue before it was sent\n");
        exit(1);
      }
    }
    uint8_t *buf = malloc(p->len ? p->len : 1);
    size_t off = 0;
    for (int k = 0; k < p->iovcnt; k++) {
      memcpy(buf + off, p->iov[k].iov_base, p->iov[k].iov_len);
      off += p->iov[k].iov_len;
    }
    udx__stream_unpin(p->s);
    sim_link_send(sim, p->from, buf, p->len);
  }
  sim->npending = 0;
}

static void
sim_host_closed (udx_stream_t *s) {
  sim_app(s)->closing = true;
}

static void
sim_host_wake (udx_stream_t *s) {
  sim_app(s)->dirty = true;
}

static void
sim_host_remote_changed (udx_stream_t *s) {
  sim_app(s)->remote_changed_owed = true;
}

static const udx_host_t sim_host = {
    .send = sim_host_send,
    .closed = sim_host_closed,
    .wake = sim_host_wake,
    .remote_changed = sim_host_remote_changed,
};

// --- app callbacks

void
sim_app_drain_reader (udx_stream_t *s) {
  sim_app_t *a = sim_app(s);
  uint8_t buf[65536];
  for (;;) {
    ssize_t n = udx__stream_read(s, buf, sizeof(buf), a->sim->now);
    if (n > 0) {
      for (ssize_t i = 0; i < n; i++) {
        if (buf[i] != test_byte(a->read_seed, a->read + i)) {
          fprintf(stderr, "stream %u: byte %llu differs\n", s->local_id, (unsigned long long) (a->read + i));
          exit(1);
        }
      }
      a->hash = test_hash(a->hash, buf, (size_t) n);
      a->read += (uint64_t) n;
      continue;
    }
    if (n == UDX_ERR_EOF)
      a->eof = true;
    break;
  }
}

static void
on_readable (udx_stream_t *s) {
  sim_app_t *a = sim_app(s);
  a->readable_events++;
  if (a->reading)
    sim_app_drain_reader(s);
}

static int
sim_app_fill (void *ctx, uint8_t *buf, size_t len) {
  sim_app_t *a = ctx;
  for (size_t i = 0; i < len; i++)
    buf[i] = test_byte(a->seed, a->written + i);
  return 0;
}

// Sizes of in-place writes: within a chunk, across one, and blocks of
// their own that start at every kind of offset.
static const size_t sim_fill_sizes[] = {3, 70000, 16384, 1 << 20, 1, 300001, 16383, (2 << 20) + 5, 40000};

void
sim_app_pump (udx_stream_t *s) {
  sim_app_t *a = sim_app(s);
  static uint8_t buf[65536];
  while (a->fill && a->written < a->to_write) {
    uint64_t left = a->to_write - a->written;
    size_t want = sim_fill_sizes[a->fills++ % (sizeof(sim_fill_sizes) / sizeof(sim_fill_sizes[0]))];
    size_t n = left < want ? (size_t) left : want;
    int r = udx__stream_write_fill(s, n, sim_app_fill, a, a->sim->now);
    CHECK(r >= 0);
    a->written += n;
    if (r == 0)
      return;
  }
  while (a->written < a->to_write) {
    uint64_t left = a->to_write - a->written;
    size_t n = left < a->chunk ? (size_t) left : a->chunk;
    for (size_t i = 0; i < n; i++)
      buf[i] = test_byte(a->seed, a->written + i);
    bool last = a->written + n == a->to_write;
    int r = udx__stream_write(s, buf, n, last && a->end_after, a->sim->now);
    CHECK(r >= 0);
    a->written += n;
    if (last && a->end_after)
      a->ended = true;
    if (r == 0)
      return;
  }
  if (a->end_after && !a->ended) {
    CHECK(udx__stream_write(s, NULL, 0, true, a->sim->now) >= 0);
    a->ended = true;
  }
}

static void
on_drain (udx_stream_t *s) {
  sim_app(s)->drains++;
  sim_app_pump(s);
}

static void
on_finish (udx_stream_t *s) {
  sim_app(s)->finishes++;
}

static void
on_flush (udx_stream_t *s) {
  sim_app(s)->flushes++;
}

static void
on_message (udx_stream_t *s, const uint8_t *buf, size_t len) {
  UDX_UNUSED(buf);
  sim_app(s)->messages++;
  sim_app(s)->message_bytes += len;
}

static void
on_close (udx_stream_t *s, int status) {
  sim_app(s)->closed++;
  sim_app(s)->close_status = status;
}

static void
on_finalize (udx_stream_t *s) {
  sim_app(s)->finalized++;
}

static void
on_remote_changed (udx_stream_t *s) {
  sim_app(s)->remote_changed++;
}

// --- sim

void
sim_init (sim_t *sim, uint64_t seed) {
  memset(sim, 0, sizeof(*sim));
  sim->rng = seed;
  sim->now = 1000000; // start at t = 1 s
  udx__pool_init(&sim->pool);
  for (int i = 0; i < 2; i++) {
    sim->link[i].delay_us = 10000;
    udx__path_init(&sim->path[i]);
  }
}

void
sim_destroy (sim_t *sim) {
  for (int n = 0; n < 2; n++) {
    for (int i = 0; i < sim->nstreams[n]; i++) {
      udx_stream_t *s = sim->streams[n][i];
      udx__stream_engine_free(s);
      free(s->data);
      free(s);
    }
  }
  while (sim->heap_len)
    free(heap_pop(sim).buf);
  free(sim->heap);
  free(sim->pending);
  udx__pool_destroy(&sim->pool);
}

static sim_port_t *
sim_port (sim_t *sim, int from) {
  for (int i = 0; i < sim_nports; i++) {
    if (sim_ports[i][from].sim == sim)
      return &sim_ports[i][from];
  }
  int i = sim_nports++;
  sim_ports[i][0] = (sim_port_t){sim, 0};
  sim_ports[i][1] = (sim_port_t){sim, 1};
  return &sim_ports[i][from];
}

udx_stream_t *
sim_stream (sim_t *sim, int node, uint32_t local_id) {
  udx_stream_t *s = calloc(1, sizeof(*s));
  udx__stream_engine_init(s, local_id, &sim_host, &sim->pool, sim->now);
  s->cb = (udx_stream_callbacks_t){
      .on_readable = on_readable,
      .on_drain = on_drain,
      .on_flush = on_flush,
      .on_finish = on_finish,
      .on_message = on_message,
      .on_close = on_close,
      .on_finalize = on_finalize,
      .on_remote_changed = on_remote_changed,
  };
  sim_app_t *a = calloc(1, sizeof(*a));
  a->sim = sim;
  a->node = node;
  a->reading = true;
  a->chunk = 65536;
  s->data = a;
  CHECK(sim->nstreams[node] < SIM_MAX_STREAMS);
  sim->streams[node][sim->nstreams[node]++] = s;
  return s;
}

void
sim_connect_ex (sim_t *sim, udx_stream_t *s, uint32_t remote_id, int link_mtu, bool ipv6) {
  int node = sim_app(s)->node;
  udx_remote_t to = {.socket = sim_port(sim, node), .id = remote_id, .ipv6 = ipv6};
  if (!sim->no_path)
    udx__path_set(s, &sim->path[node]);
  udx__stream_engine_connect(s, &to, link_mtu, sim->now);
}

void
sim_connect (sim_t *sim, udx_stream_t *s, uint32_t remote_id) {
  sim_connect_ex(sim, s, remote_id, 1500, false);
}

void
sim_change_remote (sim_t *sim, udx_stream_t *s, uint32_t remote_id) {
  int node = sim_app(s)->node;
  udx_remote_t to = {.socket = sim_port(sim, node), .id = remote_id, .ipv6 = false};
  udx__stream_engine_change_remote(s, &to, 1500, sim->now);
}

static udx_stream_t *
sim_lookup (sim_t *sim, int node, uint32_t id) {
  for (int i = 0; i < sim->nstreams[node]; i++) {
    udx_stream_t *s = sim->streams[node][i];
    if (s->local_id == id && !udx__stream_dead(s))
      return s;
  }
  return NULL;
}

void
sim_inject (sim_t *sim, int node, const uint8_t *buf, size_t len) {
  uint32_t id;
  if (!udx__wire_peek(buf, len, &id)) {
    sim->raw[node]++;
    return;
  }
  udx_stream_t *s = sim_lookup(sim, node, id);
  if (s == NULL) {
    sim->raw[node]++;
    return;
  }
  udx__stream_recv(s, buf, len, sim->now);
}

// After every event: deferred closes, flushes of woken streams, held bytes.
static void
sim_settle (sim_t *sim) {
  for (int n = 0; n < 2; n++) {
    for (int i = 0; i < sim->nstreams[n]; i++) {
      udx_stream_t *s = sim->streams[n][i];
      sim_app_t *a = sim_app(s);
      if (a->dirty) {
        a->dirty = false;
        udx__stream_flush(s, sim->now);
      }
      if (a->remote_changed_owed && !udx__stream_dead(s)) {
        a->remote_changed_owed = false;
        if (s->cb.on_remote_changed)
          s->cb.on_remote_changed(s);
      }
      if (a->closing && !a->finalizing) {
        a->finalizing = true;
        if (s->cb.on_close)
          s->cb.on_close(s, s->close_status);
        if (s->cb.on_finalize)
          s->cb.on_finalize(s);
      }
      size_t held = (size_t) (udx__bufq_len(&s->rdq) + s->ooo_bytes);
      if (held > a->max_held)
        a->max_held = held;
    }
  }
  sim_flush_pending(sim);
}

static uint64_t
sim_next_deadline (sim_t *sim) {
  uint64_t t = UDX_NEVER;
  for (int n = 0; n < 2; n++) {
    for (int i = 0; i < sim->nstreams[n]; i++) {
      uint64_t d = udx__stream_deadline(sim->streams[n][i]);
      if (d < t)
        t = d;
    }
  }
  return t;
}

bool
sim_run (sim_t *sim, bool (*done)(sim_t *, void *), void *ctx, uint64_t max_us) {
  uint64_t end = sim->now + max_us;
  for (;;) {
    sim_settle(sim);
    if (done && done(sim, ctx))
      return true;

    uint64_t next = sim_next_deadline(sim);
    if (sim->heap_len && sim->heap[0].at < next)
      next = sim->heap[0].at;
    if (next == UDX_NEVER || next > end) {
      if (end > sim->now)
        sim->now = end;
      sim_settle(sim);
      return done ? done(sim, ctx) : false;
    }
    if (next > sim->now)
      sim->now = next;

    if (sim->heap_len && sim->heap[0].at <= sim->now) {
      // Datagrams arriving at the same instant form one receive batch.
      int nb = 0;
      while (sim->heap_len && sim->heap[0].at <= sim->now) {
        nb++;
        sim_event_t ev = heap_pop(sim);
        sim->link[1 - ev.to].delivered++;
        sim_inject(sim, ev.to, ev.buf, ev.len);
        free(ev.buf);
      }
      if (getenv("SIM_DEBUG_BATCH"))
        fprintf(stderr, "t=%llu batch %d\n", (unsigned long long) sim->now, nb);
      continue;
    }

    for (int n = 0; n < 2; n++) {
      for (int i = 0; i < sim->nstreams[n]; i++) {
        udx_stream_t *s = sim->streams[n][i];
        if (udx__stream_deadline(s) <= sim->now)
          udx__stream_timer(s, sim->now);
      }
    }
  }
}

void
sim_advance (sim_t *sim, uint64_t us) {
  sim_run(sim, NULL, NULL, us);
}

void
sim_app_write (udx_stream_t *s, uint64_t seed, uint64_t total, bool end) {
  sim_app_t *a = sim_app(s);
  a->seed = seed;
  a->to_write = total;
  a->written = 0;
  a->end_after = end;
  sim_app_pump(s);
}

void
sim_app_expect (udx_stream_t *s, uint64_t seed, uint64_t total) {
  sim_app_t *a = sim_app(s);
  a->read_seed = seed;
  a->expect_hash = test_expect_hash(seed, total);
}

bool
sim_done_eof (sim_t *sim, void *ctx) {
  UDX_UNUSED(sim);
  udx_stream_t *s = ctx;
  return sim_app(s)->eof;
}

bool
sim_done_closed (sim_t *sim, void *ctx) {
  UDX_UNUSED(sim);
  udx_stream_t *s = ctx;
  return sim_app(s)->closed > 0;
}

sim_pair_t
sim_pair (sim_t *sim) {
  sim_pair_t p = {sim_stream(sim, 0, 1), sim_stream(sim, 1, 2)};
  sim_connect(sim, p.a, 2);
  sim_connect(sim, p.b, 1);
  return p;
}

bool
sim_done_b_eof (sim_t *sim, void *ctx) {
  UDX_UNUSED(sim);
  return sim_app(((sim_pair_t *) ctx)->b)->eof;
}

bool
sim_done_both_closed (sim_t *sim, void *ctx) {
  UDX_UNUSED(sim);
  sim_pair_t *p = ctx;
  return sim_app(p->a)->closed && sim_app(p->b)->closed;
}
