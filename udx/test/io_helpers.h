#ifndef UDX_TEST_IO_HELPERS_H
#define UDX_TEST_IO_HELPERS_H

// Helpers for tests over real loopback sockets (port 0 everywhere).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <uv.h>

#include "../include/udx.h"
#include "test.h"

typedef struct io_app_s {
  uv_loop_t *loop;
  // writer
  uint64_t seed;
  uint64_t to_write;
  uint64_t written;
  bool end_after;
  bool ended;
  // reader
  uint64_t read_seed;
  uint64_t read;
  uint64_t hash;
  bool eof;
  bool paused;
  // events
  int drains;
  int finishes;
  int flushes;
  int messages;
  int closed;
  int close_status;
  int finalized;
  uint32_t tx_pins_at_finalize; // datagrams still pinning the send queue
  int remote_changed;
  int firewall_calls;
  int firewall_drop;
  struct sockaddr_storage firewall_from;
  // completion
  int *done_counter;
} io_app_t;

static inline void
io_addr (const char *ip, int port, struct sockaddr_storage *out) {
  memset(out, 0, sizeof(*out));
  if (strchr(ip, ':')) {
    CHECK(uv_ip6_addr(ip, port, (struct sockaddr_in6 *) out) == 0);
  } else {
    CHECK(uv_ip4_addr(ip, port, (struct sockaddr_in *) out) == 0);
  }
}

static inline int
io_port (udx_socket_t *sock) {
  struct sockaddr_storage a;
  CHECK(udx_socket_getsockname(sock, &a) == 0);
  if (a.ss_family == AF_INET)
    return ntohs(((struct sockaddr_in *) &a)->sin_port);
  return ntohs(((struct sockaddr_in6 *) &a)->sin6_port);
}

static inline udx_socket_t *
io_bind (udx_t *udx, const char *ip, unsigned flags) {
  udx_socket_t *sock;
  CHECK(udx_socket_init(udx, &sock, NULL, NULL) == 0);
  struct sockaddr_storage a;
  io_addr(ip, 0, &a);
  CHECK(udx_socket_bind(sock, (struct sockaddr *) &a, flags) == 0);
  return sock;
}

static inline void
io_drain_reader (udx_stream_t *s) {
  io_app_t *a = udx_stream_get_data(s);
  if (a->paused)
    return;
  uint8_t buf[65536];
  for (;;) {
    ssize_t n = udx_stream_read(s, buf, sizeof(buf));
    if (n > 0) {
      for (ssize_t i = 0; i < n; i++) {
        if (buf[i] != test_byte(a->read_seed, a->read + i)) {
          fprintf(stderr, "byte %llu differs\n", (unsigned long long) (a->read + i));
          exit(1);
        }
      }
      a->hash = test_hash(a->hash, buf, (size_t) n);
      a->read += (uint64_t) n;
      continue;
    }
    if (n == UV_EOF)
      a->eof = true;
    break;
  }
}

static inline void
io_pump (udx_stream_t *s) {
  io_app_t *a = udx_stream_get_data(s);
  static uint8_t buf[65536];
  while (a->written < a->to_write) {
    uint64_t left = a->to_write - a->written;
    size_t n = left < sizeof(buf) ? (size_t) left : sizeof(buf);
    for (size_t i = 0; i < n; i++)
      buf[i] = test_byte(a->seed, a->written + i);
    bool last = a->written + n == a->to_write;
    int r = last && a->end_after ? udx_stream_write_end(s, buf, n) : udx_stream_write(s, buf, n);
    CHECK(r >= 0);
    a->written += n;
    if (last && a->end_after)
      a->ended = true;
    if (r == 0)
      return;
  }
  if (a->end_after && !a->ended) {
    CHECK(udx_stream_write_end(s, NULL, 0) >= 0);
    a->ended = true;
  }
}

static inline void
io_on_readable (udx_stream_t *s) {
  io_drain_reader(s);
}

static inline void
io_on_drain (udx_stream_t *s) {
  ((io_app_t *) udx_stream_get_data(s))->drains++;
  io_pump(s);
}

static inline void
io_on_finish (udx_stream_t *s) {
  ((io_app_t *) udx_stream_get_data(s))->finishes++;
}

static inline void
io_on_flush (udx_stream_t *s) {
  ((io_app_t *) udx_stream_get_data(s))->flushes++;
}

static inline void
io_on_message (udx_stream_t *s, const uint8_t *buf, size_t len) {
  (void) buf;
  (void) len;
  ((io_app_t *) udx_stream_get_data(s))->messages++;
}

static inline void
io_on_close (udx_stream_t *s, int status) {
  io_app_t *a = udx_stream_get_data(s);
  a->closed++;
  a->close_status = status;
}

static inline void
io_on_finalize (udx_stream_t *s) {
  io_app_t *a = udx_stream_get_data(s);
  a->finalized++;
  a->tx_pins_at_finalize = s->tx_pins; // s is freed right after this call
  if (a->done_counter)
    (*a->done_counter)++;
}

static inline void
io_on_remote_changed (udx_stream_t *s) {
  ((io_app_t *) udx_stream_get_data(s))->remote_changed++;
}

static inline int
io_on_firewall (udx_stream_t *s, udx_socket_t *sock, const struct sockaddr *from) {
  (void) sock;
  io_app_t *a = udx_stream_get_data(s);
  a->firewall_calls++;
  memcpy(&a->firewall_from, from, from->sa_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
  return a->firewall_drop;
}

static const udx_stream_callbacks_t io_callbacks = {
    .on_readable = io_on_readable,
    .on_drain = io_on_drain,
    .on_flush = io_on_flush,
    .on_finish = io_on_finish,
    .on_message = io_on_message,
    .on_close = io_on_close,
    .on_finalize = io_on_finalize,
    .on_firewall = NULL,
    .on_remote_changed = io_on_remote_changed,
};

static inline udx_stream_t *
io_stream (udx_t *udx, uint32_t id, io_app_t *app) {
  udx_stream_t *s;
  CHECK(udx_stream_init(udx, &s, id, &io_callbacks, app) == 0);
  return s;
}

static inline void
io_connect (udx_stream_t *s, udx_socket_t *sock, uint32_t remote_id, udx_socket_t *peer, const char *ip) {
  struct sockaddr_storage a;
  io_addr(ip, io_port(peer), &a);
  CHECK(udx_stream_connect(s, sock, remote_id, (struct sockaddr *) &a) == 0);
}

// Connects a (on sa) and b (on sb) to each other, a through sb's port at
// ip_to_b and b through sa's at ip_to_a, and starts both pumps. Whatever
// must be set before a connect (ACK policy, seq) is set before this.
static inline void
io_link (udx_stream_t *a, udx_socket_t *sa, const char *ip_to_b, udx_stream_t *b, udx_socket_t *sb, const char *ip_to_a) {
  io_connect(a, sa, udx_stream_get_id(b), sb, ip_to_b);
  io_connect(b, sb, udx_stream_get_id(a), sa, ip_to_a);
  io_pump(a);
  io_pump(b);
}

// Runs the loop until *counter reaches target or timeout_ms passes.
typedef struct {
  int *counter;
  int target;
  bool timed_out;
  uv_timer_t timer;
  uv_idle_t idle;
} io_wait_t;

static inline void
io_wait_timeout (uv_timer_t *t) {
  io_wait_t *w = t->data;
  w->timed_out = true;
  uv_stop(t->loop);
}

static inline void
io_wait_check (uv_idle_t *h) {
  io_wait_t *w = h->data;
  if (*w->counter >= w->target)
    uv_stop(h->loop);
}

static inline bool
io_run_until (uv_loop_t *loop, int *counter, int target, uint64_t timeout_ms) {
  io_wait_t w = {.counter = counter, .target = target};
  uv_timer_init(loop, &w.timer);
  w.timer.data = &w;
  uv_timer_start(&w.timer, io_wait_timeout, timeout_ms, 0);
  uv_idle_init(loop, &w.idle);
  w.idle.data = &w;
  uv_idle_start(&w.idle, io_wait_check);
  while (*counter < target && !w.timed_out) {
    uv_run(loop, UV_RUN_ONCE);
  }
  uv_close((uv_handle_t *) &w.timer, NULL);
  uv_close((uv_handle_t *) &w.idle, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
  return *counter >= target;
}

static inline void
io_close_all (uv_loop_t *loop, udx_t *udx, udx_socket_t **socks, int n) {
  for (int i = 0; i < n; i++)
    CHECK(udx_socket_close(socks[i]) == 0);
  uv_run(loop, UV_RUN_NOWAIT);
  CHECK(udx_close(udx, NULL) == 0);
  uv_run(loop, UV_RUN_DEFAULT);
  CHECK(uv_loop_close(loop) == 0);
}

// A loop, an instance and its sockets: io_env_open binds the sockets
// (ip, flags), io_env_close closes them all, the instance and the loop.
typedef struct {
  uv_loop_t loop;
  udx_t *udx;
  udx_socket_t *socks[4];
  int nsocks;
} io_env_t;

static inline void
io_env_init (io_env_t *e) {
  CHECK(uv_loop_init(&e->loop) == 0);
  CHECK(udx_init(&e->loop, &e->udx) == 0);
  e->nsocks = 0;
}

static inline udx_socket_t *
io_env_bind (io_env_t *e, const char *ip, unsigned flags) {
  CHECK(e->nsocks < 4);
  udx_socket_t *s = io_bind(e->udx, ip, flags);
  e->socks[e->nsocks++] = s;
  return s;
}

// An env with nsocks sockets on 127.0.0.1.
static inline void
io_env_open (io_env_t *e, int nsocks) {
  io_env_init(e);
  for (int i = 0; i < nsocks; i++)
    io_env_bind(e, "127.0.0.1", 0);
}

static inline void
io_env_close (io_env_t *e) {
  io_close_all(&e->loop, e->udx, e->socks, e->nsocks);
}

#endif
