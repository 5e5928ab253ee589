// Public stream API: thin wrappers that pass the current time to the engine
// and let the instance flush, send and re-arm timers at the end of the turn.

#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"
#include "path.h"
#include "policy.h"

int
udx_stream_init (udx_t *udx, udx_stream_t **out, uint32_t local_id, const udx_stream_callbacks_t *callbacks, void *data) {
  if (udx == NULL || out == NULL || udx->closing)
    return UV_EINVAL;
  udx_stream_t *old = udx__idmap_get(&udx->ids, local_id);
  if (old)
    return UV_EADDRINUSE;

  udx_io_stream_t *io = calloc(1, sizeof(*io));
  if (io == NULL)
    return UV_ENOMEM;
  udx_stream_t *s = &io->s;
  io->udx = udx;
  udx__stream_engine_init(s, local_id, &udx__io_host, &udx->pool, udx__now());
  if (callbacks)
    s->cb = *callbacks;
  s->data = data;
  io->timer_at = UDX_NEVER;

  int err = udx__idmap_put(&udx->ids, s);
  if (err < 0) {
    udx__stream_engine_free(s);
    free(io);
    return err;
  }
  uv_timer_init(udx->loop, &io->timer);
  io->timer.data = s;
  udx->nstreams++;
  *out = s;
  return 0;
}

void
udx_stream_set_data (udx_stream_t *s, void *data) {
  s->data = data;
}

void *
udx_stream_get_data (udx_stream_t *s) {
  return s->data;
}

uint32_t
udx_stream_get_id (udx_stream_t *s) {
  return s->local_id;
}

uint32_t
udx_stream_get_remote_id (udx_stream_t *s) {
  return s->remote[s->cur_remote].id;
}

static int
udx__check_addr (udx_socket_t *sock, const struct sockaddr *addr) {
  if (addr == NULL)
    return UV_EINVAL;
  if (addr->sa_family == AF_INET) {
    if (((const struct sockaddr_in *) addr)->sin_port == 0)
      return UV_EINVAL;
    if (sock->family == AF_INET6 && sock->ipv6only)
      return UV_EINVAL;
  } else if (addr->sa_family == AF_INET6) {
    if (((const struct sockaddr_in6 *) addr)->sin6_port == 0)
      return UV_EINVAL;
    if (sock->family != AF_INET6)
      return UV_EINVAL;
  } else {
    return UV_EINVAL;
  }
  return 0;
}

static void
udx__fill_remote (udx_remote_t *r, udx_socket_t *sock, uint32_t remote_id, const struct sockaddr *addr) {
  memset(r, 0, sizeof(*r));
  r->socket = sock;
  r->id = remote_id;
  udx__socket_dest(sock, addr, &r->addr);
  // An IPv4 peer on an IPv6 socket is v4-mapped: payload counts IPv6 overhead (as libudx).
  r->ipv6 = r->addr.ss_family == AF_INET6;
}

int
udx_stream_connect (udx_stream_t *s, udx_socket_t *sock, uint32_t remote_id, const struct sockaddr *addr) {
  udx_t *udx = udx__io(s)->udx;
  if (udx__stream_dead(s) || udx->closing)
    return UV_EINVAL;
  if (s->status & UDX_S_CONNECTED)
    return UV_EISCONN;
  if (sock == NULL || sock->udx != udx || !sock->bound || sock->closing)
    return UV_EINVAL;
  int err = udx__check_addr(sock, addr);
  if (err < 0)
    return err; // validated before anything changes (libudx sets CONNECTED first)

  udx_remote_t to;
  udx__fill_remote(&to, sock, remote_id, addr);
  udx__path_set(s, udx__socket_path(sock, &to.addr));
  int mtu = udx__sys_link_mtu(addr);
  udx__stream_engine_connect(s, &to, mtu, udx__now());
  udx__mark_dirty(s);
  return 0;
}

int
udx_stream_getpeername (udx_stream_t *s, struct sockaddr_storage *out) {
  if (!(s->status & UDX_S_CONNECTED))
    return UV_ENOTCONN;
  *out = s->remote[s->cur_remote].addr;
  udx__addr_unmap(out);
  return 0;
}

int
udx_stream_write (udx_stream_t *s, const void *buf, size_t len) {
  if (buf == NULL && len > 0)
    return UV_EINVAL;
  return udx__uv_err(udx__stream_write(s, buf, len, false, udx__now()));
}

typedef struct {
  udx_stream_fill_cb fill;
  void *ctx;
  int err; // fill's own code, returned as it is
} udx_fill_call_t;

static int
udx__fill_call (void *ctx, uint8_t *buf, size_t len) {
  udx_fill_call_t *c = ctx;
  c->err = c->fill(c->ctx, buf, len);
  return c->err < 0 ? UDX_ERR_CANCELED : 0;
}

int
udx_stream_write_fill (udx_stream_t *s, size_t len, udx_stream_fill_cb fill, void *ctx) {
  if (fill == NULL)
    return UV_EINVAL;
  udx_fill_call_t c = {.fill = fill, .ctx = ctx, .err = 0};
  int r = udx__stream_write_fill(s, len, udx__fill_call, &c, udx__now());
  return c.err < 0 ? c.err : udx__uv_err(r);
}

int
udx_stream_write_begin (udx_stream_t *s, size_t len, udx_stream_run_t **run, uint8_t **buf) {
  if (run == NULL || buf == NULL || len == 0)
    return UV_EINVAL;
  return udx__uv_err(udx__stream_write_begin(s, len, run, buf, udx__now()));
}

int
udx_stream_write_commit (udx_stream_run_t *run, int keep) {
  if (run == NULL)
    return UV_EINVAL;
  return udx__uv_err(udx__stream_write_commit(run, keep != 0, udx__now()));
}

int
udx_stream_write_end (udx_stream_t *s, const void *buf, size_t len) {
  if (buf == NULL && len > 0)
    return UV_EINVAL;
  return udx__uv_err(udx__stream_write(s, buf, len, true, udx__now()));
}

int
udx_stream_flush (udx_stream_t *s) {
  return udx__uv_err(udx__stream_flush_request(s));
}

ssize_t
udx_stream_read (udx_stream_t *s, void *buf, size_t max) {
  if (buf == NULL && max > 0)
    return UV_EINVAL;
  // Reading needs no fresh clock (nothing it does is timed): the engine's
  // last time saves a clock read per call (per packet for a reader that
  // drains on every on_readable).
  return udx__uv_err((int) udx__stream_read(s, buf, max, s->now));
}

int
udx_stream_read_peek (udx_stream_t *s, const uint8_t **p, size_t *len) {
  if (p == NULL || len == NULL)
    return UV_EINVAL;
  return udx__uv_err(udx__stream_peek(s, p, len));
}

void
udx_stream_read_consume (udx_stream_t *s, size_t n) {
  udx__stream_consume(s, n, s->now);
}

size_t
udx_stream_readable_bytes (udx_stream_t *s) {
  return (size_t) udx__bufq_len(&s->rdq);
}

int
udx_stream_send (udx_stream_t *s, const void *buf, size_t len) {
  if (buf == NULL && len > 0)
    return UV_EINVAL;
  return udx__uv_err(udx__stream_send_message(s, buf, len, udx__now()));
}

int
udx_stream_destroy (udx_stream_t *s) {
  return udx__uv_err(udx__stream_destroy(s, udx__now()));
}

int
udx_stream_close (udx_stream_t *s, uint32_t timeout_ms) {
  return udx__uv_err(udx__stream_shutdown(s, timeout_ms, udx__now()));
}

int
udx_stream_set_seq (udx_stream_t *s, uint32_t seq) {
  return udx__uv_err(udx__stream_set_seq(s, seq));
}

uint32_t
udx_stream_get_seq (udx_stream_t *s) {
  return s->snd_nxt;
}

int
udx_stream_set_ack (udx_stream_t *s, uint32_t ack) {
  return udx__uv_err(udx__stream_set_ack(s, ack));
}

uint32_t
udx_stream_get_ack (udx_stream_t *s) {
  return s->rcv_nxt;
}

int
udx_stream_set_read_buffer_limit (udx_stream_t *s, size_t bytes) {
  udx__stream_set_read_limit(s, bytes);
  return 0;
}

int
udx_stream_set_read_backlog (udx_stream_t *s, size_t bytes) {
  udx__stream_set_read_backlog(s, bytes);
  return 0;
}

int
udx_stream_set_rwnd_max (udx_stream_t *s, uint32_t bytes) {
  udx__stream_set_rwnd_max(s, bytes);
  return 0;
}

uint32_t
udx_stream_get_rwnd_max (udx_stream_t *s) {
  return s->recv_rwnd_max;
}

int
udx_stream_set_keepalive (udx_stream_t *s, uint32_t ms) {
  udx__stream_set_keepalive(s, ms);
  udx__mark_dirty(s);
  return 0;
}

int
udx_stream_set_resume (udx_stream_t *s, uint64_t rate, uint32_t rtt_us) {
  if (s->delivered > 0 || s->snd_nxt != s->snd_una || s->bbr.full_bw_reached)
    return UV_EBUSY;
  udx__bbr_resume(s, rate, rtt_us);
  return 0;
}

int
udx_stream_set_timeout (udx_stream_t *s, uint32_t ms) {
  udx__stream_set_timeout(s, ms);
  return 0;
}

int
udx_stream_relay_to (udx_stream_t *s, udx_stream_t *dst) {
  if (dst == NULL || udx__io(s)->udx != udx__io(dst)->udx)
    return UV_EINVAL;
  return udx__uv_err(udx__stream_relay_to(s, dst));
}

int
udx_stream_set_migration (udx_stream_t *s, int allow) {
  udx__io(s)->migration = allow != 0;
  return 0;
}

int
udx_stream_change_remote (udx_stream_t *s, udx_socket_t *sock, uint32_t remote_id, const struct sockaddr *addr) {
  if (udx__stream_dead(s) || !(s->status & UDX_S_CONNECTED))
    return UV_EINVAL;
  if (sock == NULL || sock->udx != udx__io(s)->udx || !sock->bound || sock->closing)
    return UV_EINVAL;
  int err = udx__check_addr(sock, addr);
  if (err < 0)
    return err;

  udx_remote_t to;
  udx__fill_remote(&to, sock, remote_id, addr);
  udx__path_set(s, udx__socket_path(sock, &to.addr));
  udx__stream_engine_change_remote(s, &to, udx__sys_link_mtu(addr), udx__now());
  udx__mark_dirty(s);
  return 0;
}

const udx_stream_stats_t *
udx_stream_stats (udx_stream_t *s) {
  udx__stream_refresh_stats(s);
  return &s->stats;
}

int
udx_stream_set_trace (udx_stream_t *s, uint32_t interval_ms, udx_stream_trace_cb cb) {
  udx__stream_set_trace(s, interval_ms, cb, udx__now());
  udx__mark_dirty(s);
  return 0;
}

int
udx_stream_set_fault (udx_stream_t *s, const udx_fault_t *fault) {
  udx_io_stream_t *io = udx__io(s);
  free(io->fault);
  io->fault = NULL;
  if (fault == NULL)
    return 0;
  io->fault = udx__fault_new(fault, udx__now());
  return io->fault ? 0 : UV_ENOMEM;
}

int
udx_stream_set_ack_policy (udx_stream_t *s, int policy) {
  return udx__uv_err(udx__stream_set_ack_policy(s, policy));
}

// --- limiters (policy.c), with udx.h's error codes

int
udx_limiter_init (udx_limiter_t **out, uint64_t rate, uint64_t burst) {
  return udx__uv_err(udx__limiter_init(out, rate, burst));
}

int
udx_limiter_set_rate (udx_limiter_t *limiter, uint64_t rate, uint64_t burst) {
  return udx__uv_err(udx__limiter_set_rate(limiter, rate, burst));
}

int
udx_limiter_add (udx_limiter_t *limiter, udx_stream_t *stream, uint32_t weight) {
  return udx__uv_err(udx__limiter_add(limiter, stream, weight));
}

int
udx_limiter_remove (udx_limiter_t *limiter, udx_stream_t *stream) {
  return udx__uv_err(udx__limiter_remove(limiter, stream));
}
