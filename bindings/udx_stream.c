// UDX streams for Lua: callbacks post events; Lua pulls in-order bytes (all
// that is available, one copy into a Lua string), messages and trace samples.
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "udx_bind.h"

#define STREAM_MT "ludx.udx.stream"

enum {
  FIREWALL_ACCEPT = 0,  // packets from anywhere are taken (libudx's default)
  FIREWALL_DROP = 1,    // unknown sources are dropped
  FIREWALL_CONNECT = 2, // the first source connects the stream (hyperdht)
};

// Event kinds, registered when the module loads.
static uint32_t ev_readable, ev_drain, ev_flush, ev_finish, ev_message, ev_close, ev_finalize, ev_firewall, ev_remote_changed, ev_trace;

#define MESSAGE_QUEUE_MAX 1024

typedef struct trace_s {
  double t_ms;
  udx_stream_stats_t stats;
} trace_t;

#define TRACE_QUEUE_MAX 65536

typedef struct lstream_s {
  ludx_closer_t closer;
  ludx_rt_t *rt;
  udx_stream_t *st; // NULL once finalized
  lsock_t *sock;    // the socket it is connected to
  uint32_t ref;
  int closed, close_status;
  ludx_life_t life; // closed: finalized (the C stream is gone)
  int firewall_mode;
  uint32_t firewall_remote_id;
  int firewall_seen;
  struct sockaddr_in6 firewall_from; // or a sockaddr_in: no storage-sized copy per stream
  ludx_fifo_t messages;
  uint64_t messages_dropped;
  char *scratch;
  size_t scratch_cap;
  trace_t *trace;
  size_t trace_n, trace_cap;
  // Lua reads the stats through this pointer: live while the stream exists,
  // then the copy taken when it finalized (allocated then: an open stream
  // does not carry a second stats block; issue 18, <= 4 KiB per idle stream)
  const udx_stream_stats_t *stats;
  udx_stream_stats_t *final_stats;
} lstream_t;

// What a finalized stream reads if its copy could not be allocated.
static const udx_stream_stats_t no_final_stats = {.version = UDX_STREAM_STATS_VERSION};

static void
lstream_free (lstream_t *s) {
  ludx_fifo_clear(&s->messages);
  free(s->scratch);
  free(s->trace);
  free(s->final_stats);
  free(s);
}

static lstream_t *
data_of (udx_stream_t *st) {
  return udx_stream_get_data(st);
}

static void
on_readable (udx_stream_t *st) {
  lstream_t *s = data_of(st);
  ludx_rt_post(s->rt, ev_readable, s->ref, 0, 0);
}

static void
on_drain (udx_stream_t *st) {
  lstream_t *s = data_of(st);
  ludx_rt_post(s->rt, ev_drain, s->ref, 0, 0);
}

static void
on_flush (udx_stream_t *st) {
  lstream_t *s = data_of(st);
  ludx_rt_post(s->rt, ev_flush, s->ref, 0, 0);
}

static void
on_finish (udx_stream_t *st) {
  lstream_t *s = data_of(st);
  ludx_rt_post(s->rt, ev_finish, s->ref, 0, 0);
}

static void
on_message (udx_stream_t *st, const uint8_t *buf, size_t len) {
  lstream_t *s = data_of(st);
  if (s->messages.count >= MESSAGE_QUEUE_MAX) {
    s->messages_dropped++; // unreliable by contract: a slow reader loses some
    return;
  }
  int r = ludx_fifo_push(&s->messages, NULL, 0, buf, len);
  if (r < 0)
    s->messages_dropped++; // as above: dropped and counted, never half-queued
  else if (r == 1)
    ludx_rt_post(s->rt, ev_message, s->ref, 0, 0);
}

static void
on_close (udx_stream_t *st, int status) {
  lstream_t *s = data_of(st);
  s->closed = 1;
  s->close_status = status;
  ludx_rt_post(s->rt, ev_close, s->ref, status, 0);
}

static void
on_finalize (udx_stream_t *st) {
  lstream_t *s = data_of(st);
  s->final_stats = malloc(sizeof(*s->final_stats));
  if (s->final_stats)
    *s->final_stats = *udx_stream_stats(st);
  s->stats = s->final_stats ? s->final_stats : &no_final_stats;
  s->st = NULL;
  ludx_rt_untrack(&s->closer);
  if (s->sock)
    ludx_socket_detach(s->sock);
  s->sock = NULL;
  ludx_rt_post(s->rt, ev_finalize, s->ref, 0, 0);
  if (ludx_life_close(&s->life))
    lstream_free(s);
}

static int
on_firewall (udx_stream_t *st, udx_socket_t *sock, const struct sockaddr *from) {
  lstream_t *s = data_of(st);
  if (s->firewall_mode == FIREWALL_DROP) {
    ludx_rt_post(s->rt, ev_firewall, s->ref, 0, 0);
    return 1;
  }
  if (!s->firewall_seen) {
    s->firewall_seen = 1;
    memset(&s->firewall_from, 0, sizeof(s->firewall_from));
    memcpy(&s->firewall_from, from, from->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
  }
  if (s->firewall_mode == FIREWALL_CONNECT && s->sock == NULL) {
    lsock_t *ls = udx_socket_get_data(sock);
    if (udx_stream_connect(st, sock, s->firewall_remote_id, from) == 0) {
      s->sock = ls;
      ludx_socket_attach(ls);
    }
  }
  ludx_rt_post(s->rt, ev_firewall, s->ref, 1, 0);
  return 0;
}

static void
on_remote_changed (udx_stream_t *st) {
  lstream_t *s = data_of(st);
  ludx_rt_post(s->rt, ev_remote_changed, s->ref, 0, 0);
}

static void
on_trace (udx_stream_t *st, uint64_t now_us, const udx_stream_stats_t *stats) {
  lstream_t *s = data_of(st);
  if (s->trace_n >= TRACE_QUEUE_MAX)
    return;
  if (s->trace_n == s->trace_cap) {
    size_t cap = s->trace_cap ? s->trace_cap * 2 : 256;
    trace_t *t = realloc(s->trace, cap * sizeof(trace_t));
    if (t == NULL)
      return;
    s->trace = t;
    s->trace_cap = cap;
  }
  s->trace[s->trace_n].t_ms = (double) now_us / 1000.0;
  s->trace[s->trace_n].stats = *stats;
  if (s->trace_n++ == 0)
    ludx_rt_post(s->rt, ev_trace, s->ref, 0, 0);
}

static const udx_stream_callbacks_t callbacks = {
    .on_readable = on_readable,
    .on_drain = on_drain,
    .on_flush = on_flush,
    .on_finish = on_finish,
    .on_message = on_message,
    .on_close = on_close,
    .on_finalize = on_finalize,
    .on_firewall = on_firewall,
    .on_remote_changed = on_remote_changed,
};

static void
stream_shutdown (ludx_closer_t *c) {
  lstream_t *s = (lstream_t *) c;
  ludx_rt_untrack(c);
  if (s->st)
    udx_stream_destroy(s->st);
}

// core.udx_stream(id, ref) -> stream
static int
l_stream (lua_State *L) {
  uint32_t id = (uint32_t) ludx_check_integer(L, 1, "id", 0, UINT32_MAX);
  uint32_t ref = ludx_check_ref(L, 2);
  lstream_t *s = calloc(1, sizeof(*s));
  if (s == NULL)
    return ludx_push_uv_error(L, UV_ENOMEM);
  s->rt = ludx_bind_rt(L);
  s->ref = ref;
  int err = udx_stream_init(ludx_udx_instance(L), &s->st, id, &callbacks, s);
  if (err < 0) {
    free(s);
    return ludx_push_uv_error(L, err);
  }
  s->stats = udx_stream_stats(s->st);
  ludx_rt_track(s->rt, &s->closer, stream_shutdown);
  ludx_new_object(L, STREAM_MT, s);
  return 1;
}

static lstream_t *
check_stream (lua_State *L, int idx) {
  return ludx_check_open(L, idx, STREAM_MT, "stream");
}

udx_stream_t *
ludx_udx_stream_of (lua_State *L, int idx, int *closed) {
  lstream_t *s = check_stream(L, idx);
  *closed = s->closed;
  return s->st;
}

// The stream's C object, or an error result pushed (returns NULL).
static udx_stream_t *
live (lua_State *L, lstream_t *s, int *nret) {
  if (s->st == NULL || s->closed) {
    int status = s->close_status < 0 ? s->close_status : UV_EPIPE;
    *nret = ludx_push_uv_error(L, status);
    return NULL;
  }
  return s->st;
}

#define LIVE(L, s)                       \
  int nret_;                             \
  udx_stream_t *st = live(L, s, &nret_); \
  if (st == NULL)                        \
    return nret_;

static int
push_result (lua_State *L, int r) {
  if (r < 0)
    return ludx_push_uv_error(L, r);
  lua_pushinteger(L, r);
  return 1;
}

// The (socket, remote_id, port, host) arguments of connect and change_remote,
// from index 2.
static lsock_t *
check_remote (lua_State *L, const char *fname, uint32_t *remote_id, struct sockaddr_storage *addr) {
  lsock_t *sock = ludx_check_lsock(L, 2);
  *remote_id = (uint32_t) ludx_check_integer(L, 3, "remote_id", 0, UINT32_MAX);
  int port = (int) ludx_check_integer(L, 4, "port", 1, 65535);
  const char *host = ludx_check_lstring(L, 5, "host", NULL);
  if (ludx_parse_addr(host, port, addr) < 0)
    luaL_error(L, "bad argument 'host' to '%s' (an IPv4 or IPv6 address expected, got '%s')", fname, host);
  return sock;
}

// s:connect(socket, remote_id, port, host)
static int
l_connect (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  uint32_t remote_id;
  struct sockaddr_storage addr;
  lsock_t *sock = check_remote(L, "connect", &remote_id, &addr);
  LIVE(L, s);
  int err = udx_stream_connect(st, ludx_lsock_socket(sock), remote_id, (struct sockaddr *) &addr);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  s->sock = sock;
  ludx_socket_attach(sock);
  lua_pushboolean(L, 1);
  return 1;
}

// s:write(data[, off, n]) -> 1 below the high-water mark, 0 above it
// (queued anyway). off/n (0-based) queue a slice of data: a large write goes
// in pieces as the queue drains, with no Lua substring per piece.
static int
l_write (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  size_t len;
  const char *data = ludx_check_lstring(L, 2, "data", &len);
  size_t off = (size_t) ludx_opt_integer(L, 3, "off", 0, 0, (lua_Integer) len);
  size_t n = (size_t) ludx_opt_integer(L, 4, "n", (lua_Integer) (len - off), 0, (lua_Integer) (len - off));
  LIVE(L, s);
  return push_result(L, udx_stream_write(st, data + off, n));
}

static int
l_write_end (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  size_t len = 0;
  const char *data = ludx_opt_lstring(L, 2, "data", NULL, &len);
  LIVE(L, s);
  return push_result(L, udx_stream_write_end(st, data ? data : "", len));
}

static int
l_flush (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  LIVE(L, s);
  return push_result(L, udx_stream_flush(st));
}

// s:take([max]) -> bytes | false (nothing now) | nil (EOF)
static int
l_take (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  lua_Integer max = ludx_opt_integer(L, 2, "max", 0, 0, (lua_Integer) 1 << 40);
  if (s->st == NULL) {
    lua_pushnil(L);
    return 1;
  }
  size_t avail = udx_stream_readable_bytes(s->st);
  const uint8_t *p;
  size_t len;
  if (avail == 0) {
    int r = udx_stream_read_peek(s->st, &p, &len);
    if (r == UV_EOF)
      lua_pushnil(L);
    else
      lua_pushboolean(L, 0);
    return 1;
  }
  size_t n = (max > 0 && (size_t) max < avail) ? (size_t) max : avail;
  if (udx_stream_read_peek(s->st, &p, &len) == 0 && len >= n) {
    lua_pushlstring(L, (const char *) p, n);
    udx_stream_read_consume(s->st, n);
    ludx_gc_pay(L, n);
    return 1;
  }
  if (s->scratch_cap < n) {
    char *b = realloc(s->scratch, n);
    if (b == NULL)
      return ludx_push_uv_error(L, UV_ENOMEM);
    s->scratch = b;
    s->scratch_cap = n;
  }
  ssize_t got = udx_stream_read(s->st, s->scratch, n);
  if (got < 0) {
    lua_pushnil(L);
    return 1;
  }
  ludx_push_bytes(L, s->scratch, (size_t) got);
  return 1;
}

// s:readable() -> bytes buffered in order, and true when the end (EOF) is
// next (or the C stream is gone)
static int
l_readable (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  size_t n = s->st ? udx_stream_readable_bytes(s->st) : 0;
  int eof = s->st == NULL;
  if (n == 0 && s->st) {
    const uint8_t *p;
    size_t len;
    eof = udx_stream_read_peek(s->st, &p, &len) == UV_EOF;
  }
  lua_pushnumber(L, (lua_Number) n);
  lua_pushboolean(L, eof);
  return 2;
}

static int
l_send (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  size_t len;
  const char *data = ludx_check_lstring(L, 2, "message", &len);
  LIVE(L, s);
  int err = udx_stream_send(st, data, len);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

// s:take_message() -> message | false
static int
l_take_message (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  ludx_fifo_item_t *m = ludx_fifo_shift(&s->messages);
  if (m == NULL) {
    lua_pushboolean(L, 0);
    return 1;
  }
  lua_pushlstring(L, (const char *) m->data, m->len);
  free(m);
  return 1;
}

static int
l_destroy (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  if (s->st == NULL) {
    lua_pushinteger(L, 0);
    return 1;
  }
  return push_result(L, udx_stream_destroy(s->st));
}

// h:close(timeout_ms): graceful close (udx_stream_close).
static int
l_close (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  uint32_t ms = (uint32_t) ludx_check_integer(L, 2, "timeout", 0, UINT32_MAX);
  if (s->st == NULL) {
    lua_pushinteger(L, 0);
    return 1;
  }
  ludx_fifo_clear(&s->messages); // the reader is gone: what was queued goes too
  return push_result(L, udx_stream_close(s->st, ms));
}

// Setters that take one unsigned number.
#define SETTER(fname, call, argname, max)                      \
  static int                                                   \
  fname(lua_State *L) {                                        \
    lstream_t *s = check_stream(L, 1);                         \
    lua_Integer v = ludx_check_integer(L, 2, argname, 0, max); \
    LIVE(L, s);                                                \
    int err = call(st, v);                                     \
    if (err < 0)                                               \
      return ludx_push_uv_error(L, err);                       \
    lua_pushboolean(L, 1);                                     \
    return 1;                                                  \
  }

SETTER(l_set_seq, udx_stream_set_seq, "seq", UINT32_MAX)
SETTER(l_set_ack, udx_stream_set_ack, "ack", UINT32_MAX)
SETTER(l_set_read_buffer_limit, udx_stream_set_read_buffer_limit, "bytes", (lua_Integer) 1 << 40)
SETTER(l_set_rwnd_max, udx_stream_set_rwnd_max, "bytes", UINT32_MAX)
SETTER(l_set_keepalive, udx_stream_set_keepalive, "ms", UINT32_MAX)
SETTER(l_set_timeout, udx_stream_set_timeout, "ms", UINT32_MAX)
SETTER(l_set_ack_policy, udx_stream_set_ack_policy, "policy", 1)
SETTER(l_set_migration, udx_stream_set_migration, "allow", 1)

// s:set_resume(rate, rtt_us): careful resume from a remembered rate
// (payload bytes/s) and min RTT (us); see udx_stream_set_resume.
static int
l_set_resume (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  lua_Integer rate = ludx_check_integer(L, 2, "rate", 0, (lua_Integer) 1 << 50);
  lua_Integer rtt = ludx_check_integer(L, 3, "rtt_us", 0, UINT32_MAX);
  LIVE(L, s);
  int err = udx_stream_set_resume(st, (uint64_t) rate, (uint32_t) rtt);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

static int
l_seq_ack (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  LIVE(L, s);
  lua_pushnumber(L, udx_stream_get_seq(st));
  lua_pushnumber(L, udx_stream_get_ack(st));
  return 2;
}

static int
l_relay_to (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  lstream_t *d = check_stream(L, 2);
  LIVE(L, s);
  if (d->st == NULL)
    return ludx_push_uv_error(L, UV_EINVAL);
  int err = udx_stream_relay_to(st, d->st);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

// s:change_remote(socket, remote_id, port, host)
static int
l_change_remote (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  uint32_t remote_id;
  struct sockaddr_storage addr;
  lsock_t *sock = check_remote(L, "change_remote", &remote_id, &addr);
  LIVE(L, s);
  int err = udx_stream_change_remote(st, ludx_lsock_socket(sock), remote_id, (struct sockaddr *) &addr);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  if (sock != s->sock) {
    ludx_socket_attach(sock);
    if (s->sock)
      ludx_socket_detach(s->sock);
    s->sock = sock;
  }
  lua_pushboolean(L, 1);
  return 1;
}

// s:firewall(mode [, remote_id]): "accept", "drop", or "connect" (the first
// unknown source connects the stream to remote_id there)
static int
l_firewall (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  const char *mode = ludx_check_lstring(L, 2, "mode", NULL);
  if (strcmp(mode, "accept") == 0)
    s->firewall_mode = FIREWALL_ACCEPT;
  else if (strcmp(mode, "drop") == 0)
    s->firewall_mode = FIREWALL_DROP;
  else if (strcmp(mode, "connect") == 0) {
    s->firewall_mode = FIREWALL_CONNECT;
    s->firewall_remote_id = (uint32_t) ludx_check_integer(L, 3, "remote_id", 0, UINT32_MAX);
  } else
    return luaL_error(L, "bad argument 'mode' to 'firewall' ('accept', 'drop' or 'connect' expected, got '%s')", mode);
  lua_pushboolean(L, 1);
  return 1;
}

static int
l_firewall_source (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  if (!s->firewall_seen)
    return 0;
  return ludx_push_addr(L, (struct sockaddr *) &s->firewall_from);
}

static int
l_remote_address (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  if (s->st == NULL)
    return 0;
  struct sockaddr_storage addr;
  if (udx_stream_getpeername(s->st, &addr) < 0)
    return 0;
  return ludx_push_addr(L, (struct sockaddr *) &addr);
}

static int
l_ids (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  if (s->st == NULL)
    return 0;
  lua_pushnumber(L, udx_stream_get_id(s->st));
  lua_pushnumber(L, udx_stream_get_remote_id(s->st));
  return 2;
}

// s:state() -> closed, status, finalized
static int
l_state (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  lua_pushboolean(L, s->closed);
  lua_pushinteger(L, s->close_status);
  lua_pushboolean(L, s->life.closed);
  return 3;
}

// s:stats_ref() -> pointer to the stats pointer (for the FFI)
static int
l_stats_ref (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  lua_pushlightuserdata(L, (void *) &s->stats);
  return 1;
}

static int
l_set_fault (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  udx_fault_t f;
  int has = ludx_check_fault(L, 2, &f);
  LIVE(L, s);
  int err = udx_stream_set_fault(st, has ? &f : NULL);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

static int
l_trace (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  uint32_t ms = (uint32_t) ludx_check_integer(L, 2, "interval_ms", 0, 60000);
  LIVE(L, s);
  int err = udx_stream_set_trace(st, ms, ms ? on_trace : NULL);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

// s:trace_take() -> { {t_ms=, rtt_ms=, cwnd=, ...}, ... }
static int
l_trace_take (lua_State *L) {
  lstream_t *s = check_stream(L, 1);
  lua_createtable(L, (int) s->trace_n, 0);
  for (size_t i = 0; i < s->trace_n; i++) {
    const trace_t *t = &s->trace[i];
    lua_createtable(L, 0, 12);
#define F(name, expr) (lua_pushnumber(L, (lua_Number) (expr)), lua_setfield(L, -2, name))
    F("t_ms", t->t_ms);
    F("rtt_ms", t->stats.rtt_us / 1000.0);
    F("min_rtt_ms", t->stats.min_rtt_us / 1000.0);
    F("cwnd", t->stats.cwnd);
    F("inflight", t->stats.inflight);
    F("pacing_rate", t->stats.pacing_rate);
    F("bbr_bw", t->stats.bbr_bw);
    F("bbr_state", t->stats.bbr_state);
    F("bytes_sent", t->stats.bytes_sent);
    F("bytes_received", t->stats.bytes_received);
    F("delivered", t->stats.delivered);
    F("retransmits", t->stats.retransmits);
    F("mtu", t->stats.mtu);
    F("max_payload", t->stats.max_payload);
    F("lost", t->stats.lost);
#undef F
    lua_rawseti(L, -2, (int) i + 1);
  }
  s->trace_n = 0;
  return 1;
}

static int
l_gc (lua_State *L) {
  void **ud = luaL_checkudata(L, 1, STREAM_MT);
  lstream_t *s = *ud;
  *ud = NULL;
  if (s == NULL)
    return 0;
  if (ludx_life_release(&s->life))
    lstream_free(s);
  else if (s->st)
    udx_stream_destroy(s->st);
  return 0;
}

// The stats struct for the FFI, with the offsets to check it against.
#define STATS_FIELDS(X)         \
  X(uint32_t, version)          \
  X(uint32_t, mtu)              \
  X(uint32_t, max_payload)      \
  X(uint32_t, bbr_state)        \
  X(uint32_t, rtt_us)           \
  X(uint32_t, rttvar_us)        \
  X(uint32_t, rto_us)           \
  X(uint32_t, min_rtt_us)       \
  X(uint32_t, cwnd)             \
  X(uint32_t, inflight)         \
  X(uint32_t, send_rwnd)        \
  X(uint32_t, recv_rwnd)        \
  X(uint64_t, pacing_rate)      \
  X(uint64_t, bbr_bw)           \
  X(uint64_t, bytes_sent)       \
  X(uint64_t, bytes_received)   \
  X(uint64_t, packets_sent)     \
  X(uint64_t, packets_received) \
  X(uint64_t, retransmits)      \
  X(uint64_t, rto_count)        \
  X(uint64_t, fast_recoveries)  \
  X(uint64_t, tlp_count)        \
  X(uint64_t, dropped_sacks)    \
  X(uint64_t, malformed)        \
  X(uint64_t, dropped_rwnd)     \
  X(uint64_t, write_queued)     \
  X(uint64_t, read_buffered)    \
  X(uint64_t, delivered)        \
  X(uint64_t, lost)             \
  X(uint64_t, zwp_count)

static void
push_stats_layout (lua_State *L) {
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "typedef struct udx_stream_stats_s {");
#define CDEF(type, name) luaL_addstring(&b, " " #type " " #name ";");
  STATS_FIELDS(CDEF)
#undef CDEF
  luaL_addstring(&b, " } udx_stream_stats_t;");
  luaL_pushresult(&b);
  lua_setfield(L, -2, "UDX_STATS_CDEF");
  lua_newtable(L);
#define OFF(type, name) (lua_pushinteger(L, offsetof(udx_stream_stats_t, name)), lua_setfield(L, -2, #name));
  STATS_FIELDS(OFF)
#undef OFF
  lua_pushinteger(L, sizeof(udx_stream_stats_t));
  lua_setfield(L, -2, "__size");
  lua_setfield(L, -2, "UDX_STATS_OFFSETS");
}

void
ludx_bind_udx_stream (lua_State *L) {
  ev_readable = ludx_rt_kind("UDX_READABLE");
  ev_drain = ludx_rt_kind("UDX_DRAIN");
  ev_flush = ludx_rt_kind("UDX_FLUSH");
  ev_finish = ludx_rt_kind("UDX_FINISH");
  ev_message = ludx_rt_kind("UDX_MESSAGE");
  ev_close = ludx_rt_kind("UDX_CLOSE");
  ev_finalize = ludx_rt_kind("UDX_FINALIZE");
  ev_firewall = ludx_rt_kind("UDX_FIREWALL");
  ev_remote_changed = ludx_rt_kind("UDX_REMOTE_CHANGED");
  ev_trace = ludx_rt_kind("UDX_TRACE");
  static const luaL_Reg methods[] = {
      {"connect", l_connect},
      {"write", l_write},
      {"write_end", l_write_end},
      {"flush", l_flush},
      {"take", l_take},
      {"readable", l_readable},
      {"send", l_send},
      {"take_message", l_take_message},
      {"destroy", l_destroy},
      {"close", l_close},
      {"set_seq", l_set_seq},
      {"set_ack", l_set_ack},
      {"seq_ack", l_seq_ack},
      {"set_read_buffer_limit", l_set_read_buffer_limit},
      {"set_rwnd_max", l_set_rwnd_max},
      {"set_keepalive", l_set_keepalive},
      {"set_resume", l_set_resume},
      {"set_timeout", l_set_timeout},
      {"set_ack_policy", l_set_ack_policy},
      {"set_migration", l_set_migration},
      {"relay_to", l_relay_to},
      {"change_remote", l_change_remote},
      {"firewall", l_firewall},
      {"firewall_source", l_firewall_source},
      {"remote_address", l_remote_address},
      {"ids", l_ids},
      {"state", l_state},
      {"stats_ref", l_stats_ref},
      {"set_fault", l_set_fault},
      {"trace", l_trace},
      {"trace_take", l_trace_take},
      {"__gc", l_gc},
      {NULL, NULL}};
  ludx_new_class(L, STREAM_MT, methods);
  static const luaL_Reg funcs[] = {{"udx_stream", l_stream}, {NULL, NULL}};
  ludx_set_funcs(L, funcs);
  push_stats_layout(L);
}
