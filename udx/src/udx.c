// The udx instance: stream table, the flush step that ends every io callback
// (flush streams, deliver closes, send batched datagrams, re-arm timers), and
// the engine's host interface on top of sockets.

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "linger.h"

// Mappings of send-queue memory alive in this process, over every instance
// (udx_mapped_blocks): each instance's pool counts into it, and a run's
// block goes on counting there after its stream and instance are gone.
static uint64_t udx__mapped;

uint64_t
udx_mapped_blocks (void) {
  return __atomic_load_n(&udx__mapped, __ATOMIC_RELAXED);
}

uint64_t
udx__now (void) {
  return uv_hrtime() / 1000;
}

void
udx__log (udx_t *udx, const char *fmt, ...) {
  static int enabled = -1;
  if (enabled < 0) {
    const char *e = getenv("UDX_LOG");
    enabled = !(e && strcmp(e, "0") == 0);
  }
  if (!enabled)
    return;
  uint64_t now = udx__now();
  if (udx->log_at && now - udx->log_at < UDX_US_PER_S) {
    udx->log_suppressed++;
    return;
  }
  udx->log_at = now;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "udx: ");
  vfprintf(stderr, fmt, ap);
  if (udx->log_suppressed)
    fprintf(stderr, " (%llu more suppressed)", (unsigned long long) udx->log_suppressed);
  fprintf(stderr, "\n");
  va_end(ap);
  udx->log_suppressed = 0;
}

// --- id table: open addressing, linear probing, backward-shift deletion

static inline uint32_t
udx__idhash (uint32_t id, uint32_t mask) {
  return (id * 2654435761u) & mask;
}

udx_stream_t *
udx__idmap_get (const udx_idmap_t *m, uint32_t id) {
  if (m->cap == 0)
    return NULL;
  uint32_t mask = m->cap - 1;
  for (uint32_t i = udx__idhash(id, mask);; i = (i + 1) & mask) {
    udx_stream_t *s = m->slots[i];
    if (s == NULL)
      return NULL;
    if (s->local_id == id)
      return s;
  }
}

static int
udx__idmap_grow (udx_idmap_t *m) {
  uint32_t cap = m->cap ? m->cap * 2 : 64;
  udx_stream_t **slots = calloc(cap, sizeof(*slots));
  if (slots == NULL)
    return UV_ENOMEM;
  for (uint32_t i = 0; i < m->cap; i++) {
    udx_stream_t *s = m->slots[i];
    if (s == NULL)
      continue;
    uint32_t j = udx__idhash(s->local_id, cap - 1);
    while (slots[j])
      j = (j + 1) & (cap - 1);
    slots[j] = s;
  }
  free(m->slots);
  m->slots = slots;
  m->cap = cap;
  return 0;
}

int
udx__idmap_put (udx_idmap_t *m, udx_stream_t *s) {
  if ((m->len + 1) * 2 > m->cap) {
    int err = udx__idmap_grow(m);
    if (err < 0)
      return err;
  }
  uint32_t mask = m->cap - 1;
  uint32_t i = udx__idhash(s->local_id, mask);
  while (m->slots[i]) {
    if (m->slots[i]->local_id == s->local_id)
      return UV_EADDRINUSE;
    i = (i + 1) & mask;
  }
  m->slots[i] = s;
  m->len++;
  return 0;
}

void
udx__idmap_del (udx_idmap_t *m, uint32_t id) {
  if (m->cap == 0)
    return;
  uint32_t mask = m->cap - 1;
  uint32_t i = udx__idhash(id, mask);
  while (m->slots[i] && m->slots[i]->local_id != id)
    i = (i + 1) & mask;
  if (m->slots[i] == NULL)
    return;
  m->slots[i] = NULL;
  m->len--;
  // shift back the following entries of the cluster
  for (uint32_t j = (i + 1) & mask; m->slots[j]; j = (j + 1) & mask) {
    udx_stream_t *s = m->slots[j];
    uint32_t home = udx__idhash(s->local_id, mask);
    // move s into the hole if its home is not in (i, j]
    bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!between) {
      m->slots[i] = s;
      m->slots[j] = NULL;
      i = j;
    }
  }
}

// --- engine error codes as udx.h's UV_E* codes

int
udx__uv_err (int err) {
  switch (err) {
    case UDX_ERR_INVAL:
      return UV_EINVAL;
    case UDX_ERR_NOMEM:
      return UV_ENOMEM;
    case UDX_ERR_NOTCONN:
      return UV_ENOTCONN;
    case UDX_ERR_PIPE:
      return UV_EPIPE;
    case UDX_ERR_MSGSIZE:
      return UV_EMSGSIZE;
    case UDX_ERR_EOF:
      return UV_EOF;
    case UDX_ERR_TIMEDOUT:
      return UV_ETIMEDOUT;
    case UDX_ERR_CONNRESET:
      return UV_ECONNRESET;
    case UDX_ERR_NOSPC:
      return UV_ENOSPC;
    case UDX_ERR_NOENT:
      return UV_ENOENT;
    case UDX_ERR_BUSY:
      return UV_EBUSY;
    case UDX_ERR_CANCELED:
      return UV_ECANCELED;
    default:
      return err;
  }
}

// --- host interface for the engine

static void
udx__host_send (udx_stream_t *s, const udx_remote_t *to, const struct iovec *iov, int iovcnt, size_t len, bool queued) {
  udx_socket_t *sock = to->socket;
  if (sock == NULL || sock->closing || !sock->bound)
    return;
  udx__socket_queue(sock, (const struct sockaddr *) &to->addr, iov, iovcnt, len, udx__io(s)->fault, queued ? s : NULL);
}

static void
udx__host_closed (udx_stream_t *s) {
  udx_io_stream_t *io = udx__io(s);
  if (io->closing)
    return;
  udx__linger_add(s, s->now); // after a graceful close only
  io->closing = true;
  io->next_closing = io->udx->closing_streams;
  io->udx->closing_streams = s;
}

static void
udx__host_wake (udx_stream_t *s) {
  udx__mark_dirty(s);
}

static void
udx__host_remote_changed (udx_stream_t *s) {
  udx__io(s)->remote_changed_owed = true;
  udx__mark_dirty(s);
}

const udx_host_t udx__io_host = {
    .send = udx__host_send,
    .closed = udx__host_closed,
    .wake = udx__host_wake,
    .remote_changed = udx__host_remote_changed,
};

void
udx__mark_dirty (udx_stream_t *s) {
  udx_io_stream_t *io = udx__io(s);
  if (io->dirty)
    return;
  io->dirty = true;
  io->next_dirty = io->udx->dirty;
  io->udx->dirty = s;
}

// --- timers

static void
udx__stream_rearm (udx_stream_t *s, uint64_t now);

static void
udx__on_stream_timer (uv_timer_t *t) {
  udx_stream_t *s = t->data;
  udx__io(s)->timer_at = UDX_NEVER;
  udx__stream_timer(s, udx__now());
  udx__mark_dirty(s);
  udx__settle(udx__io(s)->udx);
}

static void
udx__stream_rearm (udx_stream_t *s, uint64_t now) {
  udx_io_stream_t *io = udx__io(s);
  uint64_t at = udx__stream_deadline(s);
  if (at == io->timer_at)
    return;
  io->timer_at = at;
  if (at == UDX_NEVER) {
    uv_timer_stop(&io->timer);
    return;
  }
  // libuv timers have millisecond resolution: round up (the engine copes
  // with firing late; pacing accrues tokens for the time passed).
  uint64_t ms = at > now ? (at - now + UDX_US_PER_MS - 1) / UDX_US_PER_MS : 0;
  uv_timer_start(&io->timer, udx__on_stream_timer, ms, 0);
}

// --- closing streams

static void
udx__on_stream_timer_closed (uv_handle_t *h) {
  udx_stream_t *s = h->data;
  udx_io_stream_t *io = udx__io(s);
  udx_t *udx = io->udx;
  if (io->dirty) {
    udx_stream_t **p = &udx->dirty;
    while (*p && *p != s)
      p = &udx__io(*p)->next_dirty;
    if (*p)
      *p = io->next_dirty;
    io->dirty = false;
  }
  if (s->cb.on_finalize)
    s->cb.on_finalize(s);
  udx__tx_forget_stream(udx, s);
  udx__stream_engine_free(s);
  free(io->fault);
  free(io);
  udx->nstreams--;
}

static void
udx__deliver_close (udx_stream_t *s) {
  udx_io_stream_t *io = udx__io(s);
  udx_t *udx = io->udx;
  if (udx__idmap_get(&udx->ids, s->local_id) == s)
    udx__idmap_del(&udx->ids, s->local_id);

  // Streams relaying into this one go too (its list: no table scan).
  udx__stream_end_relays(s);

  uv_timer_stop(&io->timer);
  if (s->cb.on_close)
    s->cb.on_close(s, udx__uv_err(s->close_status));
  uv_close((uv_handle_t *) &io->timer, udx__on_stream_timer_closed);
}

// --- settle: the end of every io callback

void
udx__settle (udx_t *udx) {
  if (udx->settling)
    return;
  udx->settling = 1;
  uint64_t now = udx__now();

  for (int round = 0; round < 16 && (udx->dirty || udx->closing_streams); round++) {
    while (udx->dirty) {
      udx_stream_t *s = udx->dirty;
      udx_io_stream_t *io = udx__io(s);
      udx->dirty = io->next_dirty;
      io->dirty = false;
      if (udx__stream_dead(s))
        continue;
      udx__stream_flush(s, now);
      if (io->remote_changed_owed && !udx__stream_dead(s)) {
        io->remote_changed_owed = false;
        if (s->cb.on_remote_changed)
          s->cb.on_remote_changed(s);
      }
      if (!udx__stream_dead(s))
        udx__stream_rearm(s, now);
    }
    while (udx->closing_streams) {
      udx_stream_t *s = udx->closing_streams;
      udx->closing_streams = udx__io(s)->next_closing;
      udx__deliver_close(s);
    }
  }

  while (udx->tx_pending) {
    udx_socket_t *sock = udx->tx_pending;
    udx->tx_pending = sock->next_tx;
    sock->tx_listed = false;
    udx__socket_flush(sock);
  }

  udx->settling = 0;
}

static bool
udx__has_work (udx_t *udx) {
  return udx->dirty || udx->closing_streams || udx->tx_pending;
}

static void
udx__on_prepare (uv_prepare_t *h) {
  udx_t *udx = h->data;
  if (udx__has_work(udx))
    udx__settle(udx);
}

static void
udx__on_check (uv_check_t *h) {
  udx_t *udx = h->data;
  if (udx__has_work(udx))
    udx__settle(udx);
}

// --- public instance API

int
udx_init (uv_loop_t *loop, udx_t **out) {
  if (loop == NULL || out == NULL)
    return UV_EINVAL;
  udx_t *udx = calloc(1, sizeof(*udx));
  if (udx == NULL)
    return UV_ENOMEM;
  udx->rx_bufs = malloc(UDX_RX_AREA);
  if (udx->rx_bufs == NULL) {
    free(udx);
    return UV_ENOMEM;
  }
  udx->loop = loop;
  udx__pool_init(&udx->pool);
  udx->pool.mapped = &udx__mapped;
  udx->pool.huge = udx__sys_huge_page_size(); // read once per instance: no state shared

  uv_prepare_init(loop, &udx->prepare);
  udx->prepare.data = udx;
  uv_prepare_start(&udx->prepare, udx__on_prepare);
  uv_unref((uv_handle_t *) &udx->prepare);

  uv_check_init(loop, &udx->check);
  udx->check.data = udx;
  uv_check_start(&udx->check, udx__on_check);
  uv_unref((uv_handle_t *) &udx->check);
  udx->nhandles = 2;

  *out = udx;
  return 0;
}

void
udx_set_data (udx_t *udx, void *data) {
  udx->data = data;
}

void *
udx_get_data (udx_t *udx) {
  return udx->data;
}

uv_loop_t *
udx_get_loop (udx_t *udx) {
  return udx->loop;
}

static void
udx__on_handle_closed (uv_handle_t *h) {
  udx_t *udx = h->data;
  if (--udx->nhandles > 0)
    return;
  if (udx->on_close)
    udx->on_close(udx);
  udx__pool_destroy(&udx->pool);
  free(udx->ids.slots);
  free(udx->rx_bufs);
  free(udx->fault);
  free(udx);
}

int
udx_close (udx_t *udx, udx_close_cb cb) {
  if (udx->closing)
    return UV_EINVAL;
  if (udx->nstreams || udx->nsockets)
    return UV_EBUSY;
  udx->closing = true;
  udx->on_close = cb;
  uv_close((uv_handle_t *) &udx->prepare, udx__on_handle_closed);
  uv_close((uv_handle_t *) &udx->check, udx__on_handle_closed);
  return 0;
}

int
udx_set_fault (udx_t *udx, const udx_fault_t *fault) {
  free(udx->fault);
  udx->fault = NULL;
  if (fault == NULL)
    return 0;
  udx->fault = udx__fault_new(fault, udx__now());
  return udx->fault ? 0 : UV_ENOMEM;
}

int
udx_stream_lookup (udx_t *udx, uint32_t local_id, udx_stream_t **out) {
  if (udx == NULL || out == NULL)
    return UV_EINVAL;
  udx_stream_t *s = udx__idmap_get(&udx->ids, local_id);
  if (s == NULL || udx__stream_dead(s))
    return UV_ENOENT;
  *out = s;
  return 0;
}

const char *
udx_version_string (void) {
  return "0.1.0";
}
