// TCP servers and connections (for tunnels and local services). Bytes read
// are buffered in C (reading stops above a high-water mark) and announced
// with one event per empty-to-non-empty change; Lua pulls them.
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bind.h"

#define SERVER_MT "ludx.tcp.server"
#define CONN_MT   "ludx.tcp.conn"

// Event kinds, registered when the module loads.
static uint32_t ev_connection, ev_connect, ev_readable, ev_drain, ev_shutdown, ev_close;

#define READ_HIGH_WATER  (1024 * 1024)
#define WRITE_HIGH_WATER (1024 * 1024)

typedef struct tcp_conn_s {
  ludx_closer_t closer;
  ludx_rt_t *rt;
  union { // a Unix-domain connection is the same stream over a pipe
    uv_tcp_t handle;
    uv_pipe_t pipe;
    uv_tty_t tty; // stdin/stdout on a terminal (core.stdio_open)
  };
  int is_pipe;
  uv_connect_t connect_req;
  uv_shutdown_t shutdown_req;
  uint32_t ref;
  ludx_life_t life; // closed: the handle is closed
  int connected, eof, read_error, closing;
  int posted, shutting_down;
  char *buf;
  size_t len, cap;
  size_t write_queued; // bytes in uv_write requests not yet done
  int drain_wanted;
} tcp_conn_t;

typedef struct tcp_server_s {
  ludx_closer_t closer;
  ludx_rt_t *rt;
  union {
    uv_tcp_t handle;
    uv_pipe_t pipe;
  };
  int is_pipe;
  char *path; // a Unix socket's file, removed when the server closes
  uint32_t ref;
  int pending; // connections waiting for accept
  ludx_life_t life;
  int closing;
} tcp_server_t;

// --- connections -------------------------------------------------------

static void
conn_free (tcp_conn_t *c) {
  free(c->buf);
  free(c);
}

static void
on_conn_closed (uv_handle_t *h) {
  tcp_conn_t *c = h->data;
  ludx_rt_post(c->rt, ev_close, c->ref, 0, 0);
  if (ludx_life_close(&c->life))
    conn_free(c);
}

static void
conn_close (tcp_conn_t *c) {
  if (c->closing)
    return;
  c->closing = 1;
  ludx_rt_untrack(&c->closer);
  uv_close((uv_handle_t *) &c->handle, on_conn_closed);
}

static void
conn_shutdown_closer (ludx_closer_t *cl) {
  conn_close((tcp_conn_t *) cl);
}

static tcp_conn_t *
conn_new (ludx_rt_t *rt, uint32_t ref, int is_pipe) {
  tcp_conn_t *c = calloc(1, sizeof(*c));
  if (c == NULL)
    return NULL;
  c->rt = rt;
  c->ref = ref;
  c->is_pipe = is_pipe;
  if (is_pipe)
    uv_pipe_init(&rt->loop, &c->pipe, 0);
  else
    uv_tcp_init(&rt->loop, &c->handle);
  c->handle.data = c;
  c->connect_req.data = c;
  c->shutdown_req.data = c;
  ludx_rt_track(rt, &c->closer, conn_shutdown_closer);
  return c;
}

static void
notify (tcp_conn_t *c) {
  if (c->posted)
    return;
  c->posted = 1;
  ludx_rt_post(c->rt, ev_readable, c->ref, 0, 0);
}

static void
on_alloc (uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  tcp_conn_t *c = h->data;
  if (suggested < 65536)
    suggested = 65536;
  if (c->cap - c->len < suggested) {
    size_t cap = c->cap ? c->cap : 65536;
    while (cap - c->len < suggested)
      cap *= 2;
    char *n = realloc(c->buf, cap);
    if (n == NULL) {
      b->base = NULL;
      b->len = 0;
      return;
    }
    c->buf = n;
    c->cap = cap;
  }
  b->base = c->buf + c->len;
  b->len = c->cap - c->len;
}

static void
on_read (uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  tcp_conn_t *c = s->data;
  (void) b;
  if (n > 0) {
    c->len += n;
    if (c->len >= READ_HIGH_WATER)
      uv_read_stop(s);
    notify(c);
  } else if (n < 0) {
    uv_read_stop(s);
    if (n == UV_EOF)
      c->eof = 1;
    else
      c->read_error = (int) n;
    notify(c);
  }
}

static void
start_reading (tcp_conn_t *c) {
  if (!c->eof && !c->read_error && !c->closing && c->len < READ_HIGH_WATER) {
    uv_read_start((uv_stream_t *) &c->handle, on_alloc, on_read);
  }
}

static void
on_connect (uv_connect_t *req, int status) {
  tcp_conn_t *c = req->data;
  if (status == 0) {
    c->connected = 1;
    start_reading(c);
  }
  ludx_rt_post(c->rt, ev_connect, c->ref, status, 0);
}

// core.tcp_connect(host, port, ref) -> conn (the connect completes later)
static int
l_connect (lua_State *L) {
  const char *host = ludx_check_lstring(L, 1, "host", NULL);
  int port = (int) ludx_check_integer(L, 2, "port", 1, 65535);
  uint32_t ref = ludx_check_ref(L, 3);
  struct sockaddr_storage addr;
  if (ludx_parse_addr(host, port, &addr) < 0)
    return luaL_error(L, "bad argument 'host' to 'connect' (an IP address expected, got '%s')", host);
  tcp_conn_t *c = conn_new(ludx_bind_rt(L), ref, 0);
  if (c == NULL)
    return ludx_push_uv_error(L, UV_ENOMEM);
  int err = uv_tcp_connect(&c->connect_req, &c->handle, (struct sockaddr *) &addr, on_connect);
  if (err < 0) {
    c->life.released = 1;
    conn_close(c);
    return ludx_push_uv_error(L, err);
  }
  uv_tcp_nodelay(&c->handle, 1);
  ludx_new_object(L, CONN_MT, c);
  return 1;
}

static tcp_conn_t *
check_conn (lua_State *L) {
  return ludx_check_open(L, 1, CONN_MT, "connection");
}

// conn:take([max]) -> bytes | false (none now) | nil (EOF) | nil, msg, code
static int
l_take (lua_State *L) {
  tcp_conn_t *c = check_conn(L);
  size_t max = (size_t) ludx_opt_integer(L, 2, "max", 65536, 1, (lua_Integer) 1 << 30);
  if (c->len == 0) {
    c->posted = 0;
    if (c->read_error)
      return ludx_push_uv_error(L, c->read_error);
    if (c->eof)
      lua_pushnil(L);
    else
      lua_pushboolean(L, 0);
    return 1;
  }
  size_t n = c->len < max ? c->len : max;
  lua_pushlstring(L, c->buf, n);
  memmove(c->buf, c->buf + n, c->len - n);
  c->len -= n;
  if (c->len == 0)
    c->posted = 0;
  start_reading(c);
  ludx_gc_pay(L, n);
  return 1;
}

typedef struct {
  uv_write_t req;
  tcp_conn_t *conn;
  size_t len;
  char data[];
} wreq_t;

static void
on_written (uv_write_t *req, int status) {
  wreq_t *w = (wreq_t *) req;
  tcp_conn_t *c = w->conn;
  c->write_queued -= w->len;
  if (status < 0 && !c->read_error)
    c->read_error = status;
  if (c->drain_wanted && c->write_queued < WRITE_HIGH_WATER) {
    c->drain_wanted = 0;
    ludx_rt_post(c->rt, ev_drain, c->ref, status, 0);
  }
  free(w);
}

// conn:write(data) -> 1 below the high-water mark, 0 above it (queued anyway)
static int
l_write (lua_State *L) {
  tcp_conn_t *c = check_conn(L);
  size_t len;
  const char *data = ludx_check_lstring(L, 2, "data", &len);
  if (c->closing || c->shutting_down)
    return ludx_push_uv_error(L, UV_EPIPE);
  if (!c->connected)
    return ludx_push_uv_error(L, UV_ENOTCONN);
  if (len == 0) {
    lua_pushinteger(L, 1);
    return 1;
  }
  uv_buf_t b = uv_buf_init((char *) data, len);
  int r = uv_try_write((uv_stream_t *) &c->handle, &b, 1);
  size_t done = r > 0 ? (size_t) r : 0;
  if (r < 0 && r != UV_EAGAIN)
    return ludx_push_uv_error(L, r);
  if (done < len) {
    size_t rest = len - done;
    wreq_t *w = malloc(sizeof(*w) + rest);
    if (w == NULL)
      return ludx_push_uv_error(L, UV_ENOMEM);
    memcpy(w->data, data + done, rest);
    w->conn = c;
    w->len = rest;
    b = uv_buf_init(w->data, rest);
    int err = uv_write(&w->req, (uv_stream_t *) &c->handle, &b, 1, on_written);
    if (err < 0) {
      free(w);
      return ludx_push_uv_error(L, err);
    }
    c->write_queued += rest;
  }
  if (c->write_queued >= WRITE_HIGH_WATER) {
    c->drain_wanted = 1;
    lua_pushinteger(L, 0);
  } else {
    lua_pushinteger(L, 1);
  }
  return 1;
}

static void
on_shutdown (uv_shutdown_t *req, int status) {
  tcp_conn_t *c = req->data;
  ludx_rt_post(c->rt, ev_shutdown, c->ref, status, 0);
}

// conn:shutdown(): our half ends after the queued bytes (TCP FIN)
static int
l_shutdown (lua_State *L) {
  tcp_conn_t *c = check_conn(L);
  if (c->shutting_down) {
    lua_pushboolean(L, 1);
    return 1;
  }
  if (c->closing || !c->connected)
    return ludx_push_uv_error(L, UV_ENOTCONN);
  int err = uv_shutdown(&c->shutdown_req, (uv_stream_t *) &c->handle, on_shutdown);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  c->shutting_down = 1;
  lua_pushboolean(L, 1);
  return 1;
}

static int
l_conn_close (lua_State *L) {
  tcp_conn_t *c = check_conn(L);
  conn_close(c);
  lua_pushboolean(L, 1);
  return 1;
}

static int
l_conn_gc (lua_State *L) {
  void **ud = luaL_checkudata(L, 1, CONN_MT);
  tcp_conn_t *c = *ud;
  *ud = NULL;
  if (c == NULL)
    return 0;
  if (ludx_life_release(&c->life))
    conn_free(c);
  else
    conn_close(c);
  return 0;
}

static int
push_name (lua_State *L, tcp_conn_t *c, int peer) {
  if (c->is_pipe) {
    char path[512];
    size_t n = sizeof(path);
    int err = peer ? uv_pipe_getpeername(&c->pipe, path, &n) : uv_pipe_getsockname(&c->pipe, path, &n);
    if (err < 0)
      return ludx_push_uv_error(L, err);
    lua_pushlstring(L, path, n);
    return 1;
  }
  struct sockaddr_storage addr;
  int len = sizeof(addr);
  int err = peer ? uv_tcp_getpeername(&c->handle, (struct sockaddr *) &addr, &len) : uv_tcp_getsockname(&c->handle, (struct sockaddr *) &addr, &len);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  return ludx_push_addr(L, (struct sockaddr *) &addr);
}

static int
l_conn_address (lua_State *L) {
  return push_name(L, check_conn(L), 0);
}

static int
l_conn_peer (lua_State *L) {
  return push_name(L, check_conn(L), 1);
}

// --- servers -----------------------------------------------------------

static void
server_free (tcp_server_t *s) {
  free(s->path);
  free(s);
}

static void
on_server_closed (uv_handle_t *h) {
  tcp_server_t *s = h->data;
  if (ludx_life_close(&s->life))
    server_free(s);
}

static void
server_close (tcp_server_t *s) {
  if (s->closing)
    return;
  s->closing = 1;
  ludx_rt_untrack(&s->closer);
  if (s->path)
    unlink(s->path); // nobody can connect to a closed server's file
  uv_close((uv_handle_t *) &s->handle, on_server_closed);
}

static void
server_shutdown_closer (ludx_closer_t *cl) {
  server_close((tcp_server_t *) cl);
}

static void
on_connection (uv_stream_t *h, int status) {
  tcp_server_t *s = h->data;
  if (status < 0)
    return; // e.g. EMFILE: the client is refused, the server goes on
  s->pending++;
  ludx_rt_post(s->rt, ev_connection, s->ref, s->pending, 0);
}

// The new server as a Lua object, or (err < 0) the server closed and the error.
static int
push_server (lua_State *L, tcp_server_t *s, int err) {
  if (err < 0) {
    s->life.released = 1;
    server_close(s);
    return ludx_push_uv_error(L, err);
  }
  ludx_new_object(L, SERVER_MT, s);
  return 1;
}

// core.tcp_listen(host, port, ref [, backlog]) -> server
static int
l_listen (lua_State *L) {
  const char *host = ludx_check_lstring(L, 1, "host", NULL);
  int port = (int) ludx_check_integer(L, 2, "port", 0, 65535);
  uint32_t ref = ludx_check_ref(L, 3);
  int backlog = (int) ludx_opt_integer(L, 4, "backlog", 128, 1, 65535);
  struct sockaddr_storage addr;
  if (ludx_parse_addr(host, port, &addr) < 0)
    return luaL_error(L, "bad argument 'host' to 'listen' (an IP address expected, got '%s')", host);
  ludx_rt_t *rt = ludx_bind_rt(L);
  tcp_server_t *s = calloc(1, sizeof(*s));
  if (s == NULL)
    return ludx_push_uv_error(L, UV_ENOMEM);
  s->rt = rt;
  s->ref = ref;
  uv_tcp_init(&rt->loop, &s->handle);
  s->handle.data = s;
  ludx_rt_track(rt, &s->closer, server_shutdown_closer);
  int err = uv_tcp_bind(&s->handle, (struct sockaddr *) &addr, 0);
  if (err == 0)
    err = uv_listen((uv_stream_t *) &s->handle, backlog, on_connection);
  return push_server(L, s, err);
}

static tcp_server_t *
check_server (lua_State *L) {
  return ludx_check_open(L, 1, SERVER_MT, "server");
}

// server:accept(ref) -> conn | false (none pending)
static int
l_accept (lua_State *L) {
  tcp_server_t *s = check_server(L);
  uint32_t ref = ludx_check_ref(L, 2);
  if (s->pending == 0 || s->closing) {
    lua_pushboolean(L, 0);
    return 1;
  }
  tcp_conn_t *c = conn_new(s->rt, ref, s->is_pipe);
  if (c == NULL)
    return ludx_push_uv_error(L, UV_ENOMEM);
  int err = uv_accept((uv_stream_t *) &s->handle, (uv_stream_t *) &c->handle);
  s->pending--;
  if (err < 0) {
    c->life.released = 1;
    conn_close(c);
    return ludx_push_uv_error(L, err);
  }
  c->connected = 1;
  if (!s->is_pipe)
    uv_tcp_nodelay(&c->handle, 1);
  start_reading(c);
  ludx_new_object(L, CONN_MT, c);
  return 1;
}

static int
l_server_address (lua_State *L) {
  tcp_server_t *s = check_server(L);
  if (s->is_pipe) {
    lua_pushstring(L, s->path);
    return 1;
  }
  struct sockaddr_storage addr;
  int len = sizeof(addr);
  int err = uv_tcp_getsockname(&s->handle, (struct sockaddr *) &addr, &len);
  if (err < 0)
    return ludx_push_uv_error(L, err);
  return ludx_push_addr(L, (struct sockaddr *) &addr);
}

static int
l_server_close (lua_State *L) {
  server_close(check_server(L));
  lua_pushboolean(L, 1);
  return 1;
}

static int
l_server_gc (lua_State *L) {
  void **ud = luaL_checkudata(L, 1, SERVER_MT);
  tcp_server_t *s = *ud;
  *ud = NULL;
  if (s == NULL)
    return 0;
  if (ludx_life_release(&s->life))
    server_free(s);
  else
    server_close(s);
  return 0;
}

// --- Unix-domain sockets ------------------------------------------------

// core.unix_listen(path, ref [, backlog]) -> server. The socket file is made
// with mode 0600 (only this user may connect) and removed when it closes.
static int
l_unix_listen (lua_State *L) {
  size_t plen;
  const char *path = ludx_check_lstring(L, 1, "path", &plen);
  uint32_t ref = ludx_check_ref(L, 2);
  int backlog = (int) ludx_opt_integer(L, 3, "backlog", 16, 1, 65535);
  if (plen == 0 || plen >= 100 || strlen(path) != plen)
    return luaL_error(L, "bad argument 'path' to 'unix_listen' (1..99 bytes, no NUL expected)");
  ludx_rt_t *rt = ludx_bind_rt(L);
  tcp_server_t *s = calloc(1, sizeof(*s));
  if (s == NULL)
    return ludx_push_uv_error(L, UV_ENOMEM);
  s->rt = rt;
  s->ref = ref;
  s->is_pipe = 1;
  uv_pipe_init(&rt->loop, &s->pipe, 0);
  s->handle.data = s;
  ludx_rt_track(rt, &s->closer, server_shutdown_closer);
  // the file is born 0600: no window where others could connect
  mode_t old = umask(0177);
  int err = uv_pipe_bind(&s->pipe, path);
  umask(old);
  if (err == 0) {
    s->path = strdup(path);
    if (s->path == NULL)
      err = UV_ENOMEM;
  }
  if (err == 0 && chmod(path, 0600) != 0)
    err = UV_EPERM;
  if (err == 0)
    err = uv_listen((uv_stream_t *) &s->pipe, backlog, on_connection);
  return push_server(L, s, err);
}

// core.unix_connect(path, ref) -> conn (the connect completes later)
static int
l_unix_connect (lua_State *L) {
  size_t plen;
  const char *path = ludx_check_lstring(L, 1, "path", &plen);
  uint32_t ref = ludx_check_ref(L, 2);
  if (plen == 0 || plen >= 100 || strlen(path) != plen)
    return luaL_error(L, "bad argument 'path' to 'unix_connect' (1..99 bytes, no NUL expected)");
  tcp_conn_t *c = conn_new(ludx_bind_rt(L), ref, 1);
  if (c == NULL)
    return ludx_push_uv_error(L, UV_ENOMEM);
  uv_pipe_connect(&c->connect_req, &c->pipe, path, on_connect);
  ludx_new_object(L, CONN_MT, c);
  return 1;
}

// --- standard input and output ----------------------------------------

// core.stdio_open(fd, ref) -> conn | false | nil, msg, code. A pipe, socket
// or terminal on fd becomes a connection (reads buffered and bounded as a
// TCP connection's, writes with the same high-water mark); false for a
// regular file or anything else the loop cannot poll (read it blocking).
static int
l_stdio_open (lua_State *L) {
  int fd = (int) ludx_check_integer(L, 1, "fd", 0, 2);
  uint32_t ref = ludx_check_ref(L, 2);
  uv_handle_type t = uv_guess_handle(fd);
  if (t != UV_NAMED_PIPE && t != UV_TCP && t != UV_TTY) {
    lua_pushboolean(L, 0);
    return 1;
  }
  ludx_rt_t *rt = ludx_bind_rt(L);
  tcp_conn_t *c = calloc(1, sizeof(*c));
  if (c == NULL)
    return ludx_push_uv_error(L, UV_ENOMEM);
  c->rt = rt;
  c->ref = ref;
  c->is_pipe = 1;
  int err = t == UV_TTY ? uv_tty_init(&rt->loop, &c->tty, fd, 0) : uv_pipe_init(&rt->loop, &c->pipe, 0);
  if (err == 0 && t != UV_TTY)
    err = uv_pipe_open(&c->pipe, fd);
  if (err < 0 && t == UV_TTY) {
    free(c); // uv_tty_init failed: no handle to close
    return ludx_push_uv_error(L, err);
  }
  c->handle.data = c;
  c->shutdown_req.data = c;
  ludx_rt_track(rt, &c->closer, conn_shutdown_closer);
  if (err < 0) {
    c->life.released = 1;
    conn_close(c);
    return ludx_push_uv_error(L, err);
  }
  c->connected = 1;
  if (fd == 0)
    start_reading(c);
  ludx_new_object(L, CONN_MT, c);
  return 1;
}

void
ludx_bind_tcp (lua_State *L) {
  ev_connection = ludx_rt_kind("TCP_CONNECTION");
  ev_connect = ludx_rt_kind("TCP_CONNECT");
  ev_readable = ludx_rt_kind("TCP_READABLE");
  ev_drain = ludx_rt_kind("TCP_DRAIN");
  ev_shutdown = ludx_rt_kind("TCP_SHUTDOWN");
  ev_close = ludx_rt_kind("TCP_CLOSE");
  static const luaL_Reg conn_methods[] = {
      {"take", l_take},
      {"write", l_write},
      {"shutdown", l_shutdown},
      {"close", l_conn_close},
      {"address", l_conn_address},
      {"peer", l_conn_peer},
      {"__gc", l_conn_gc},
      {NULL, NULL}};
  ludx_new_class(L, CONN_MT, conn_methods);
  static const luaL_Reg server_methods[] = {
      {"accept", l_accept},
      {"address", l_server_address},
      {"close", l_server_close},
      {"__gc", l_server_gc},
      {NULL, NULL}};
  ludx_new_class(L, SERVER_MT, server_methods);
  static const luaL_Reg funcs[] = {{"tcp_listen", l_listen}, {"tcp_connect", l_connect}, {"unix_listen", l_unix_listen}, {"unix_connect", l_unix_connect}, {"stdio_open", l_stdio_open}, {NULL, NULL}};
  ludx_set_funcs(L, funcs);
}
