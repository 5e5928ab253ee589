// UDP sockets: one fd under uv_poll. This file holds a socket's life (init,
// bind, options, close), its destinations and shared paths, and send errors:
// transient ones drop one datagram, are counted and logged at a low rate,
// and never stop the socket. rx.c reads and dispatches datagrams in batches
// (recvmmsg); tx.c queues and sends them in batches (sendmmsg).

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io.h"
#include "linger.h"
#include "path.h"
#include "wire.h"

void
udx__addr_unmap (struct sockaddr_storage *addr) {
  if (addr->ss_family != AF_INET6)
    return;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *) addr;
  if (!IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr))
    return;
  struct sockaddr_in a4;
  memset(&a4, 0, sizeof(a4));
  a4.sin_family = AF_INET;
  a4.sin_port = a6->sin6_port;
  memcpy(&a4.sin_addr, &a6->sin6_addr.s6_addr[12], 4);
  memcpy(addr, &a4, sizeof(a4));
}

socklen_t
udx__socket_dest (udx_socket_t *sock, const struct sockaddr *to, struct sockaddr_storage *out) {
  memset(out, 0, sizeof(*out));
  if (to->sa_family == AF_INET6) {
    memcpy(out, to, sizeof(struct sockaddr_in6));
    return sizeof(struct sockaddr_in6);
  }
  if (sock->family == AF_INET6) {
    // IPv4 destination on an IPv6 socket: ::ffff:a.b.c.d
    const struct sockaddr_in *a4 = (const struct sockaddr_in *) to;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *) out;
    a6->sin6_family = AF_INET6;
    a6->sin6_port = a4->sin_port;
    a6->sin6_addr.s6_addr[10] = 0xff;
    a6->sin6_addr.s6_addr[11] = 0xff;
    memcpy(&a6->sin6_addr.s6_addr[12], &a4->sin_addr, 4);
    return sizeof(struct sockaddr_in6);
  }
  memcpy(out, to, sizeof(struct sockaddr_in));
  return sizeof(struct sockaddr_in);
}

bool
udx__same_dest (const struct sockaddr_storage *a, const struct sockaddr_storage *b) {
  if (a->ss_family != b->ss_family)
    return false;
  if (a->ss_family == AF_INET6) {
    const struct sockaddr_in6 *x = (const struct sockaddr_in6 *) a, *y = (const struct sockaddr_in6 *) b;
    return x->sin6_port == y->sin6_port && memcmp(&x->sin6_addr, &y->sin6_addr, sizeof(x->sin6_addr)) == 0;
  }
  const struct sockaddr_in *x = (const struct sockaddr_in *) a, *y = (const struct sockaddr_in *) b;
  return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
}

static void
udx__socket_path_release (udx_path_t *p) {
  udx_socket_t *sock = p->owner;
  if (sock) {
    udx_path_t **at = &sock->paths;
    while (*at && *at != p)
      at = &(*at)->next;
    if (*at)
      *at = p->next;
  }
  free(p);
}

udx_path_t *
udx__socket_path (udx_socket_t *sock, const struct sockaddr_storage *dest) {
  for (udx_path_t *p = sock->paths; p; p = p->next) {
    if (udx__same_dest(&p->addr, dest))
      return p;
  }
  udx_path_t *p = calloc(1, sizeof(*p));
  if (p == NULL)
    return NULL;
  udx__path_init(p);
  p->owner = sock;
  p->addr = *dest;
  p->release = udx__socket_path_release;
  p->next = sock->paths;
  sock->paths = p;
  return p;
}

void
udx__socket_send_error (udx_socket_t *sock, int err) {
  udx_socket_stats_t *st = &sock->stats;
  const char *kind;
  switch (err) {
    case UV_ENETUNREACH:
      st->send_err_netunreach++;
      kind = "ENETUNREACH";
      break;
    case UV_EHOSTUNREACH:
      st->send_err_hostunreach++;
      kind = "EHOSTUNREACH";
      break;
    case UV_ECONNREFUSED:
      st->send_err_connrefused++;
      kind = "ECONNREFUSED";
      break;
    case UV_EPERM:
    case UV_EACCES:
      st->send_err_perm++;
      kind = "EPERM";
      break;
    case UV_EMSGSIZE:
      st->send_err_msgsize++;
      kind = "EMSGSIZE";
      break;
    case UV_ENOBUFS:
      st->send_err_nobufs++;
      kind = "ENOBUFS";
      break;
    default:
      st->send_err_other++;
      kind = uv_err_name(err);
      break;
  }
  udx__log(sock->udx, "send failed (%s), datagram dropped", kind);
}

// --- public socket API

int
udx_socket_init (udx_t *udx, udx_socket_t **out, udx_socket_close_cb on_close, void *data) {
  if (udx == NULL || out == NULL)
    return UV_EINVAL;
  if (udx->closing)
    return UV_EINVAL;
  udx_socket_t *sock = calloc(1, sizeof(*sock));
  if (sock == NULL)
    return UV_ENOMEM;
  sock->udx = udx;
  sock->fd = -1;
  sock->on_close = on_close;
  sock->data = data;
  sock->ttl = 64;
  sock->stats.version = UDX_SOCKET_STATS_VERSION;
  sock->linger_max = UDX_LINGER_MAX_DEFAULT;
  sock->linger_ms = UDX_LINGER_MS_DEFAULT;
  sock->ack_pause_us = UDX_ACK_PAUSE_US;
  sock->pause_fd = -1;
  uv_timer_init(udx->loop, &sock->held_timer);
  sock->held_timer.data = sock;
  sock->held_timer_init = true;

  sock->next = udx->sockets;
  if (udx->sockets)
    udx->sockets->prev = sock;
  udx->sockets = sock;
  udx->nsockets++;
  *out = sock;
  return 0;
}

void
udx_socket_set_data (udx_socket_t *sock, void *data) {
  sock->data = data;
}

void *
udx_socket_get_data (udx_socket_t *sock) {
  return sock->data;
}

int
udx_socket_bind (udx_socket_t *sock, const struct sockaddr *addr, unsigned flags) {
  if (sock->bound || sock->closing || addr == NULL)
    return UV_EINVAL;
  int family = addr->sa_family;
  socklen_t alen;
  if (family == AF_INET) {
    alen = sizeof(struct sockaddr_in);
  } else if (family == AF_INET6) {
    alen = sizeof(struct sockaddr_in6);
  } else {
    return UV_EINVAL;
  }

  int fd = udx__sys_socket(family, flags & UDX_SOCKET_IPV6ONLY, flags & UDX_SOCKET_REUSEADDR);
  if (fd < 0)
    return fd;
  if (bind(fd, addr, alen) < 0) {
    int err = uv_translate_sys_error(errno);
    close(fd);
    return err;
  }
  udx__sys_set_buffers(fd);
  udx__sys_set_ttl(fd, family, sock->ttl);
  udx__sys_set_dontfrag(fd, family);
  sock->gso = udx__sys_enable_gso(fd);
  sock->gro = udx__sys_enable_gro(fd);

  int err = uv_poll_init_socket(sock->udx->loop, &sock->poll, fd);
  if (err < 0) {
    close(fd);
    return err;
  }
  sock->poll.data = sock;
  sock->fd = fd;
  sock->family = family;
  sock->ipv6only = (flags & UDX_SOCKET_IPV6ONLY) != 0;
  sock->bound = true;
  sock->polling = true;
  udx__socket_poll_update(sock);
  return 0;
}

int
udx_socket_getsockname (udx_socket_t *sock, struct sockaddr_storage *out) {
  if (!sock->bound)
    return UV_EBADF;
  socklen_t len = sizeof(*out);
  if (getsockname(sock->fd, (struct sockaddr *) out, &len) < 0)
    return uv_translate_sys_error(errno);
  return 0;
}

int
udx_socket_recv_start (udx_socket_t *sock, udx_socket_recv_cb cb) {
  if (sock->closing)
    return UV_EINVAL;
  sock->on_recv = cb;
  return 0;
}

int
udx_socket_recv_stop (udx_socket_t *sock) {
  sock->on_recv = NULL;
  return 0;
}

int
udx_socket_send (udx_socket_t *sock, const void *buf, size_t len, const struct sockaddr *to, int ttl) {
  if (!sock->bound || sock->closing || to == NULL || (buf == NULL && len > 0))
    return UV_EINVAL;
  if (ttl < 0 || ttl > 255)
    return UV_EINVAL;
  if (to->sa_family != AF_INET && to->sa_family != AF_INET6)
    return UV_EINVAL;
  if (to->sa_family == AF_INET6 && sock->family == AF_INET)
    return UV_EINVAL;

  if (ttl == 0 && len <= UDX_TX_SLOT_SIZE) {
    struct iovec iov = {.iov_base = (void *) buf, .iov_len = len};
    udx__socket_queue(sock, to, &iov, 1, len, NULL, NULL);
    udx__socket_flush(sock);
    return 0;
  }

  // A specific TTL (or a large datagram): send now, in order after the queue.
  udx__socket_flush(sock);
  struct sockaddr_storage dest;
  socklen_t dlen = udx__socket_dest(sock, to, &dest);
  if (ttl)
    udx__sys_set_ttl(sock->fd, sock->family, ttl);
  ssize_t r;
  do {
    r = sendto(sock->fd, buf, len, 0, (struct sockaddr *) &dest, dlen);
  } while (r < 0 && errno == EINTR);
  int err = r < 0 ? uv_translate_sys_error(errno) : 0;
  if (ttl)
    udx__sys_set_ttl(sock->fd, sock->family, sock->ttl);
  if (err == 0) {
    sock->stats.packets_tx++;
    sock->stats.bytes_tx += len;
  } else if (err == UV_EAGAIN) {
    sock->stats.send_eagain++;
  } else {
    udx__socket_send_error(sock, err);
  }
  return 0;
}

int
udx_socket_set_ttl (udx_socket_t *sock, int ttl) {
  if (ttl < 1 || ttl > 255)
    return UV_EINVAL;
  sock->ttl = ttl;
  if (!sock->bound)
    return 0;
  return udx__sys_set_ttl(sock->fd, sock->family, ttl);
}

int
udx_socket_get_ttl (udx_socket_t *sock, int *ttl) {
  if (!sock->bound) {
    *ttl = sock->ttl;
    return 0;
  }
  return udx__sys_get_ttl(sock->fd, sock->family, ttl);
}

static int
udx__sockopt_int (udx_socket_t *sock, int opt, int *value, bool set) {
  if (!sock->bound)
    return UV_EBADF;
  socklen_t len = sizeof(*value);
  int r = set ? setsockopt(sock->fd, SOL_SOCKET, opt, value, len) : getsockopt(sock->fd, SOL_SOCKET, opt, value, &len);
  return r < 0 ? uv_translate_sys_error(errno) : 0;
}

int
udx_socket_get_send_buffer_size (udx_socket_t *sock, int *size) {
  return udx__sockopt_int(sock, SO_SNDBUF, size, false);
}

int
udx_socket_set_send_buffer_size (udx_socket_t *sock, int size) {
  return udx__sockopt_int(sock, SO_SNDBUF, &size, true);
}

int
udx_socket_get_recv_buffer_size (udx_socket_t *sock, int *size) {
  return udx__sockopt_int(sock, SO_RCVBUF, size, false);
}

int
udx_socket_set_recv_buffer_size (udx_socket_t *sock, int size) {
  return udx__sockopt_int(sock, SO_RCVBUF, &size, true);
}

static void
udx__on_socket_handle_closed (uv_handle_t *h) {
  udx_socket_t *sock = h->data;
  if (--sock->nhandles > 0)
    return;
  if (sock->fd >= 0)
    close(sock->fd);
  if (sock->pause_fd >= 0)
    close(sock->pause_fd);
  udx_t *udx = sock->udx;
  if (sock->prev)
    sock->prev->next = sock->next;
  if (sock->next)
    sock->next->prev = sock->prev;
  if (udx->sockets == sock)
    udx->sockets = sock->next;
  udx->nsockets--;
  if (sock->on_close)
    sock->on_close(sock);
  // Paths outlive the socket while a closed stream still holds one.
  for (udx_path_t *p = sock->paths; p; p = p->next)
    p->owner = NULL;
  sock->paths = NULL;
  free(sock->tx);
  free(sock->arena);
  free(sock->tx_iov);
  free(sock->tx_msgs);
  free(sock->tx_cmsg);
  free(sock->fault);
  udx__linger_clear(sock);
  free(sock);
}

// A live stream connected through sock (by either of its remotes).
static bool
udx__stream_uses (const udx_stream_t *s, const udx_socket_t *sock) {
  if (s == NULL || udx__stream_dead(s) || !(s->status & UDX_S_CONNECTED))
    return false;
  for (int r = 0; r < 2; r++) {
    if (s->remote[r].valid && s->remote[r].socket == sock)
      return true;
  }
  return false;
}

int
udx_socket_close (udx_socket_t *sock) {
  if (sock->closing)
    return UV_EINVAL;
  udx_t *udx = sock->udx;
  bool lingering = false;
  for (uint32_t i = 0; i < udx->ids.cap; i++) {
    udx_stream_t *s = udx->ids.slots[i];
    if (!udx__stream_uses(s, sock))
      continue;
    if (!(s->status & UDX_S_CLOSING))
      return UV_EBUSY;
    lingering = true;
  }
  // Streams that only linger after a graceful close do not hold the
  // socket (its port): they end now, as their deadline would end them.
  for (uint32_t i = 0; lingering && i < udx->ids.cap; i++) {
    udx_stream_t *s = udx->ids.slots[i];
    if (udx__stream_uses(s, sock))
      udx__stream_cut(s, udx__now());
  }

  if (sock->bound)
    udx__socket_flush(sock);
  for (uint32_t i = 0; i < sock->nheld; i++)
    free(sock->held[i].buf);
  sock->closing = true;
  if (sock->tx_listed) {
    // unlink from the pending list
    udx_socket_t **p = &udx->tx_pending;
    while (*p && *p != sock)
      p = &(*p)->next_tx;
    if (*p)
      *p = sock->next_tx;
    sock->tx_listed = false;
  }
  udx__socket_tx_clear(sock);
  udx__linger_clear(sock);

  sock->nheld = 0;
  sock->nhandles = 1;
  uv_timer_stop(&sock->held_timer);
  uv_close((uv_handle_t *) &sock->held_timer, udx__on_socket_handle_closed);
  if (sock->polling) {
    sock->nhandles++;
    uv_poll_stop(&sock->poll);
    uv_close((uv_handle_t *) &sock->poll, udx__on_socket_handle_closed);
  }
  if (sock->pause_fd >= 0) {
    sock->nhandles++;
    sock->rx_paused = false;
    uv_poll_stop(&sock->pause_poll);
    uv_close((uv_handle_t *) &sock->pause_poll, udx__on_socket_handle_closed);
  }
  return 0;
}

int
udx_socket_set_ack_pause (udx_socket_t *sock, uint32_t us) {
  if (sock == NULL || sock->closing || us > UDX_ACK_PAUSE_MAX_US)
    return UV_EINVAL;
  sock->ack_pause_us = us;
  return 0;
}

int
udx_socket_set_linger (udx_socket_t *sock, uint32_t max, uint32_t min_ms) {
  if (sock == NULL || sock->closing || max > UDX_LINGER_MAX_LIMIT)
    return UV_EINVAL;
  udx__linger_clear(sock);
  sock->linger_max = max;
  sock->linger_ms = min_ms;
  return 0;
}

const udx_socket_stats_t *
udx_socket_stats (udx_socket_t *sock) {
  return &sock->stats;
}

int
udx_socket_set_fault (udx_socket_t *sock, const udx_fault_t *fault) {
  free(sock->fault);
  sock->fault = NULL;
  if (fault == NULL)
    return 0;
  sock->fault = udx__fault_new(fault, udx__now());
  return sock->fault ? 0 : UV_ENOMEM;
}
