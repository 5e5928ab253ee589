// The udx instance and UDX sockets for Lua (streams are udx_stream.c, which
// builds on this file; nothing here knows streams). Callbacks from the udx
// library only post records to the event ring (and queue datagrams); Lua
// pulls datagrams when it wants them.
#include <stdlib.h>
#include <string.h>

#include "bind.h"
#include "udx.h"
#include "udx_bind.h"

#define SOCKET_MT "ludx.udx.socket"

static udx_t *instance = NULL;
static ludx_closer_t instance_closer;

static void
instance_shutdown (ludx_closer_t *c) {
  (void) c;
  if (instance && udx_close(instance, NULL) == 0)
    instance = NULL;
}

udx_t *
ludx_udx_instance (lua_State *L) {
  if (instance)
    return instance;
  ludx_rt_t *rt = ludx_bind_rt(L);
  int err = udx_init(&rt->loop, &instance);
  if (err < 0)
    luaL_error(L, "udx: cannot start: %s", uv_strerror(err));
  // after every socket and stream: the closer list runs newest first
  ludx_rt_track(rt, &instance_closer, instance_shutdown);
  return instance;
}

// ---------------------------------------------------------------------------
// Fault injection options: {seed=, loss=, duplicate=, reorder=, reorder_us=,
// corrupt=, send_error=, send_errno="ENETUNREACH", blackout_start_ms=,
// blackout_ms=, direction="tx"|"rx"|"both"}

static double
field_number (lua_State *L, int idx, const char *name, double def) {
  lua_getfield(L, idx, name);
  double v = def;
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TNUMBER)
      luaL_error(L, "bad option '%s' (number expected, got %s)", name, luaL_typename(L, -1));
    v = lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  return v;
}

static int
errno_by_name (const char *name) {
  static const struct {
    const char *name;
    int err;
  } names[] = {{"ENETUNREACH", UV_ENETUNREACH}, {"EHOSTUNREACH", UV_EHOSTUNREACH}, {"ECONNREFUSED", UV_ECONNREFUSED}, {"EPERM", UV_EPERM}, {"EMSGSIZE", UV_EMSGSIZE}, {"ENOBUFS", UV_ENOBUFS}, {"EACCES", UV_EACCES}, {NULL, 0}};
  for (int i = 0; names[i].name; i++) {
    if (strcmp(names[i].name, name) == 0)
      return names[i].err;
  }
  return 0;
}

int
ludx_check_fault (lua_State *L, int idx, udx_fault_t *f) {
  if (lua_isnoneornil(L, idx))
    return 0;
  ludx_check_table(L, idx, "fault");
  memset(f, 0, sizeof(*f));
  f->seed = (uint64_t) field_number(L, idx, "seed", 1);
  f->loss = field_number(L, idx, "loss", 0);
  f->duplicate = field_number(L, idx, "duplicate", 0);
  f->reorder = field_number(L, idx, "reorder", 0);
  f->reorder_us = (uint32_t) field_number(L, idx, "reorder_us", 0);
  f->corrupt = field_number(L, idx, "corrupt", 0);
  f->send_error = field_number(L, idx, "send_error", 0);
  f->blackout_start_ms = (uint64_t) field_number(L, idx, "blackout_start_ms", 0);
  f->blackout_ms = (uint64_t) field_number(L, idx, "blackout_ms", 0);
  const char *e = ludx_field_string(L, idx, "send_errno", "ENETUNREACH");
  f->send_errno = errno_by_name(e);
  if (f->send_errno == 0)
    luaL_error(L, "bad option 'send_errno' (unknown error name '%s')", e);
  const char *dir = ludx_field_string(L, idx, "direction", "both");
  if (strcmp(dir, "tx") == 0)
    f->direction = UDX_FAULT_TX;
  else if (strcmp(dir, "rx") == 0)
    f->direction = UDX_FAULT_RX;
  else if (strcmp(dir, "both") == 0)
    f->direction = UDX_FAULT_TX | UDX_FAULT_RX;
  else
    luaL_error(L, "bad option 'direction' ('tx', 'rx' or 'both' expected, got '%s')", dir);
  double probs[] = {f->loss, f->duplicate, f->reorder, f->corrupt, f->send_error};
  for (size_t i = 0; i < sizeof(probs) / sizeof(probs[0]); i++) {
    if (!(probs[i] >= 0 && probs[i] <= 1))
      luaL_error(L, "bad option in 'fault' (probabilities are 0..1)");
  }
  return 1;
}

static int
l_set_fault (lua_State *L) {
  udx_fault_t f;
  int has = ludx_check_fault(L, 1, &f);
  int err = udx_set_fault(ludx_udx_instance(L), has ? &f : NULL);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

static int
l_mapped_blocks (lua_State *L) {
  lua_pushnumber(L, (lua_Number) udx_mapped_blocks());
  return 1;
}

// ---------------------------------------------------------------------------
// Sockets

// Event kinds, registered when the module loads.
static uint32_t ev_socket_recv, ev_socket_close;

#define SOCKET_QUEUE_MAX_BYTES (8 * 1024 * 1024)

struct lsock_s {
  ludx_closer_t closer;
  ludx_rt_t *rt;
  udx_socket_t *sock;
  uint32_t ref;
  ludx_life_t life; // closed: the udx socket is gone
  int closing;
  int close_wanted;       // close once the streams on it are gone
  int streams;            // streams connected to it
  ludx_fifo_t queue;      // raw datagrams, each with its source address as head
  uint64_t queue_dropped; // datagrams dropped because Lua did not take them
};

static void
on_socket_close (udx_socket_t *sock) {
  lsock_t *s = udx_socket_get_data(sock);
  s->sock = NULL;
  ludx_rt_untrack(&s->closer);
  ludx_rt_post(s->rt, ev_socket_close, s->ref, 0, 0);
  ludx_fifo_clear(&s->queue);
  if (ludx_life_close(&s->life))
    free(s);
}

static void
on_socket_recv (udx_socket_t *sock, const uint8_t *buf, size_t len, const struct sockaddr *from) {
  lsock_t *s = udx_socket_get_data(sock);
  if (s->queue.bytes + len > SOCKET_QUEUE_MAX_BYTES) {
    s->queue_dropped++;
    return;
  }
  size_t from_len = from->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
  int r = ludx_fifo_push(&s->queue, from, from_len, buf, len);
  if (r < 0)
    s->queue_dropped++; // UDP is lossy: a datagram we cannot hold is dropped and counted
  else if (r == 1)
    ludx_rt_post(s->rt, ev_socket_recv, s->ref, 0, 0);
}

static int
lsock_close (lsock_t *s) {
  if (s->closing || s->life.closed)
    return 0;
  int err = udx_socket_close(s->sock);
  if (err == 0)
    s->closing = 1;
  else if (err == UV_EBUSY)
    s->close_wanted = 1;
  return err;
}

void
ludx_socket_attach (lsock_t *s) {
  s->streams++;
}

// A stream on the socket is gone: a close that had to wait happens now.
void
ludx_socket_detach (lsock_t *s) {
  if (s->streams > 0)
    s->streams--;
  if (s->close_wanted && !s->closing && !s->life.closed)
    lsock_close(s);
}

static void
socket_shutdown (ludx_closer_t *c) {
  lsock_t *s = (lsock_t *) c;
  ludx_rt_untrack(c);
  lsock_close(s);
}

// core.udx_bind(host, port, ref [, ipv6only]) -> socket
static int
l_bind (lua_State *L) {
  struct sockaddr_storage addr;
  ludx_check_addr(L, 1, 2, &addr);
  uint32_t ref = ludx_check_ref(L, 3);
  unsigned flags = lua_toboolean(L, 4) ? UDX_SOCKET_IPV6ONLY : 0;
  udx_t *u = ludx_udx_instance(L);
  lsock_t *s = calloc(1, sizeof(*s));
  if (s == NULL)
    return ludx_push_uv_error(L, UV_ENOMEM);
  s->rt = ludx_bind_rt(L);
  s->ref = ref;
  int err = udx_socket_init(u, &s->sock, on_socket_close, s);
  if (err < 0) {
    free(s);
    return ludx_push_uv_error(L, err);
  }
  err = udx_socket_bind(s->sock, (struct sockaddr *) &addr, flags);
  if (err == 0)
    err = udx_socket_recv_start(s->sock, on_socket_recv);
  if (err < 0) {
    // the socket closes and frees itself; nobody holds it
    s->life.released = 1;
    s->closing = 1;
    udx_socket_close(s->sock);
    return ludx_push_uv_error(L, err);
  }
  ludx_rt_track(s->rt, &s->closer, socket_shutdown);
  ludx_new_object(L, SOCKET_MT, s);
  return 1;
}

static lsock_t *
check_socket (lua_State *L, int idx) {
  lsock_t *s = ludx_check_open(L, idx, SOCKET_MT, "socket");
  if (s->life.closed || s->closing || s->close_wanted)
    luaL_error(L, "socket is closed");
  return s;
}

lsock_t *
ludx_check_lsock (lua_State *L, int idx) {
  return check_socket(L, idx);
}

udx_socket_t *
ludx_lsock_socket (lsock_t *s) {
  return s->sock;
}

static int
l_socket_address (lua_State *L) {
  lsock_t *s = check_socket(L, 1);
  struct sockaddr_storage addr;
  int err = udx_socket_getsockname(s->sock, &addr);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  return ludx_push_addr(L, (struct sockaddr *) &addr);
}

// The largest UDP payload towards an address: 65535 minus the IPv4 (20) and
// UDP (8) headers; for IPv6 the payload length excludes its own header.
#define UDP_MAX_PAYLOAD_V4 65507
#define UDP_MAX_PAYLOAD_V6 65527

// sock:send(data, port, host [, ttl]) -> true | nil, msg, "EMSGSIZE" when
// the datagram is larger than UDP or the path (don't-fragment) allows.
static int
l_socket_send (lua_State *L) {
  lsock_t *s = check_socket(L, 1);
  size_t len;
  const char *data = ludx_check_lstring(L, 2, "data", &len);
  struct sockaddr_storage addr;
  ludx_check_addr(L, 4, 3, &addr);
  int ttl = (int) ludx_opt_integer(L, 5, "ttl", 0, 0, 255);
  size_t max = addr.ss_family == AF_INET6 ? UDP_MAX_PAYLOAD_V6 : UDP_MAX_PAYLOAD_V4;
  if (len > max)
    return ludx_push_uv_error(L, UV_EMSGSIZE);
  // udx sends now and only counts a failed datagram; EMSGSIZE is not a
  // passing condition of the path but the caller's datagram (too large for
  // the path MTU), so it is reported (issue 14).
  uint64_t before = udx_socket_stats(s->sock)->send_err_msgsize;
  int err = udx_socket_send(s->sock, data, len, (struct sockaddr *) &addr, ttl);
  if (err == 0 && udx_socket_stats(s->sock)->send_err_msgsize != before)
    err = UV_EMSGSIZE;
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

// sock:take() -> data, host, port, family | false (nothing queued)
static int
l_socket_take (lua_State *L) {
  lsock_t *s = ludx_check_open(L, 1, SOCKET_MT, "socket");
  ludx_fifo_item_t *d = ludx_fifo_shift(&s->queue);
  if (d == NULL) {
    lua_pushboolean(L, 0);
    return 1;
  }
  struct sockaddr_storage from;
  memcpy(&from, d->data, d->head_len);
  lua_pushlstring(L, (const char *) d->data + d->head_len, d->len);
  ludx_push_addr(L, (struct sockaddr *) &from);
  free(d);
  return 4;
}

// sock:close() -> true: closes now, or as soon as the streams using it are
// gone ("pending" is then the second result).
static int
l_socket_close (lua_State *L) {
  lsock_t *s = ludx_check_open(L, 1, SOCKET_MT, "socket");
  if (s->life.closed || s->closing) {
    lua_pushboolean(L, 1);
    return 1;
  }
  int err = lsock_close(s);
  if (err < 0 && err != UV_EBUSY)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  if (err == UV_EBUSY) {
    lua_pushliteral(L, "pending");
    return 2;
  }
  return 1;
}

static int
l_socket_gc (lua_State *L) {
  void **ud = luaL_checkudata(L, 1, SOCKET_MT);
  lsock_t *s = *ud;
  *ud = NULL;
  if (s == NULL)
    return 0;
  if (ludx_life_release(&s->life))
    free(s);
  else
    lsock_close(s); // now, or once its streams are gone
  return 0;
}

static void
push_u64 (lua_State *L, const char *name, uint64_t v) {
  lua_pushnumber(L, (lua_Number) v);
  lua_setfield(L, -2, name);
}

static int
l_socket_stats (lua_State *L) {
  lsock_t *s = check_socket(L, 1);
  const udx_socket_stats_t *st = udx_socket_stats(s->sock);
  lua_createtable(L, 0, 28);
  push_u64(L, "bytes_rx", st->bytes_rx);
  push_u64(L, "bytes_tx", st->bytes_tx);
  push_u64(L, "packets_rx", st->packets_rx);
  push_u64(L, "packets_tx", st->packets_tx);
  push_u64(L, "malformed", st->malformed);
  push_u64(L, "raw_rx", st->raw_rx);
  push_u64(L, "raw_dropped", st->raw_dropped + s->queue_dropped);
  push_u64(L, "truncated", st->truncated);
  push_u64(L, "send_batches", st->send_batches);
  push_u64(L, "recv_batches", st->recv_batches);
  push_u64(L, "send_eagain", st->send_eagain);
  push_u64(L, "send_err_netunreach", st->send_err_netunreach);
  push_u64(L, "send_err_hostunreach", st->send_err_hostunreach);
  push_u64(L, "send_err_connrefused", st->send_err_connrefused);
  push_u64(L, "send_err_perm", st->send_err_perm);
  push_u64(L, "send_err_msgsize", st->send_err_msgsize);
  push_u64(L, "send_err_nobufs", st->send_err_nobufs);
  push_u64(L, "send_err_other", st->send_err_other);
  push_u64(L, "fault_dropped", st->fault_dropped);
  push_u64(L, "wrong_source", st->wrong_source);
  push_u64(L, "linger_records", st->linger_records);
  push_u64(L, "linger_acks", st->linger_acks);
  push_u64(L, "linger_evicted", st->linger_evicted);
  push_u64(L, "ack_pauses", st->ack_pauses);
  return 1;
}

// sock:set_linger(max, min_ms): records of gracefully closed streams that
// ACK a retransmitted END (udx_socket_set_linger); max 0 turns it off.
static int
l_socket_set_linger (lua_State *L) {
  lsock_t *s = check_socket(L, 1);
  uint32_t max = (uint32_t) ludx_check_integer(L, 2, "max", 0, 4096);
  uint32_t ms = (uint32_t) ludx_check_integer(L, 3, "min_ms", 0, 600000);
  int err = udx_socket_set_linger(s->sock, max, ms);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

// sock:set_ack_pause(us): how long reading stops after a read of only ACKs
// from a peer that acks every packet (udx_socket_set_ack_pause); 0 = never.
static int
l_socket_set_ack_pause (lua_State *L) {
  lsock_t *s = check_socket(L, 1);
  uint32_t us = (uint32_t) ludx_check_integer(L, 2, "us", 0, 1000);
  int err = udx_socket_set_ack_pause(s->sock, us);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

static int
l_socket_set_fault (lua_State *L) {
  lsock_t *s = check_socket(L, 1);
  udx_fault_t f;
  int has = ludx_check_fault(L, 2, &f);
  int err = udx_socket_set_fault(s->sock, has ? &f : NULL);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  lua_pushboolean(L, 1);
  return 1;
}

static int
l_socket_buffers (lua_State *L) {
  lsock_t *s = check_socket(L, 1);
  int snd = 0, rcv = 0;
  udx_socket_get_send_buffer_size(s->sock, &snd);
  udx_socket_get_recv_buffer_size(s->sock, &rcv);
  lua_pushinteger(L, snd);
  lua_pushinteger(L, rcv);
  return 2;
}

void
ludx_bind_udx (lua_State *L) {
  ev_socket_recv = ludx_rt_kind("UDX_SOCKET_RECV");
  ev_socket_close = ludx_rt_kind("UDX_SOCKET_CLOSE");
  static const luaL_Reg socket_methods[] = {
      {"address", l_socket_address},
      {"send", l_socket_send},
      {"take", l_socket_take},
      {"close", l_socket_close},
      {"stats", l_socket_stats},
      {"set_fault", l_socket_set_fault},
      {"set_linger", l_socket_set_linger},
      {"set_ack_pause", l_socket_set_ack_pause},
      {"buffer_sizes", l_socket_buffers},
      {"__gc", l_socket_gc},
      {NULL, NULL}};
  ludx_new_class(L, SOCKET_MT, socket_methods);
  static const luaL_Reg funcs[] = {
      {"udx_bind", l_bind},
      {"udx_set_fault", l_set_fault},
      {"udx_mapped_blocks", l_mapped_blocks},
      {NULL, NULL}};
  ludx_set_funcs(L, funcs);
}
