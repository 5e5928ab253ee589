// The receive path of a socket: datagrams read in batches (recvmmsg, GRO),
// held back by fault injection, dispatched to their streams by id (or to
// the socket's raw callback), and the ACK pause that takes a libudx peer's
// ACKs in batches. socket.c owns the socket's life; tx.c its send path.

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io.h"
#include "linger.h"
#include "path.h"
#include "wire.h"

// --- held datagrams (fault injection: reordering)

static void
udx__socket_dispatch (udx_socket_t *sock, uint8_t *buf, size_t len, struct sockaddr_storage *from, uint64_t now);

static void
udx__held_arm (udx_socket_t *sock, uint64_t now);

void
udx__held_release (udx_socket_t *sock, bool only_next) {
  uint64_t now = udx__now();
  uint32_t keep = 0;
  for (uint32_t i = 0; i < sock->nheld; i++) {
    udx_held_t h = sock->held[i];
    bool due = only_next ? h.release_at == 0 : (h.release_at != 0 && h.release_at <= now);
    if (!due || sock->closing) {
      sock->held[keep++] = h;
      continue;
    }
    if (h.rx) {
      udx__socket_dispatch(sock, h.buf, h.len, &h.addr, now);
    } else {
      udx__held_commit_tx(sock, h.buf, h.len, &h.addr);
    }
    free(h.buf);
  }
  sock->nheld = keep;
  udx__held_arm(sock, now);
}

static void
udx__on_held_timer (uv_timer_t *t) {
  udx_socket_t *sock = t->data;
  udx__held_release(sock, false);
  udx__settle(sock->udx);
}

static void
udx__held_arm (udx_socket_t *sock, uint64_t now) {
  uint64_t at = UDX_NEVER;
  for (uint32_t i = 0; i < sock->nheld; i++) {
    if (sock->held[i].release_at && sock->held[i].release_at < at)
      at = sock->held[i].release_at;
  }
  if (at == UDX_NEVER || sock->closing) {
    uv_timer_stop(&sock->held_timer);
    return;
  }
  uint64_t ms = at > now ? (at - now + 999) / 1000 : 0;
  uv_timer_start(&sock->held_timer, udx__on_held_timer, ms, 0);
}

bool
udx__hold (udx_socket_t *sock, udx_fault_state_t *f, bool rx, const uint8_t *buf, size_t len, const struct sockaddr_storage *addr, uint64_t now) {
  if (sock->nheld >= UDX_HELD_MAX)
    return false;
  uint8_t *copy = malloc(len ? len : 1);
  if (copy == NULL)
    return false;
  memcpy(copy, buf, len);
  udx_held_t *h = &sock->held[sock->nheld++];
  h->buf = copy;
  h->len = len;
  h->rx = rx;
  h->addr = *addr;
  h->release_at = f->cfg.reorder_us ? now + f->cfg.reorder_us : 0;
  udx__held_arm(sock, now);
  return true;
}

// --- receive path

static void
udx__relay (udx_stream_t *s, uint8_t *buf, size_t len) {
  udx_stream_t *dst = s->relay_to;
  if (!udx__stream_relay_recv(s, buf, len))
    return;
  if (dst && !udx__stream_dead(dst) && (dst->status & UDX_S_CONNECTED)) {
    const udx_remote_t *to = &dst->remote[dst->cur_remote];
    udx__write_u32(buf + 4, to->id); // only the id changes
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    if (to->socket)
      udx__socket_queue(to->socket, (const struct sockaddr *) &to->addr, &iov, 1, len, udx__io(dst)->fault, NULL);
  }
}

// A connected stream's packets come from its remote: the current one, or the
// one before change_remote (retransmissions along the old path, a relay
// handing over). Anything else is an off-path sender (issue 13).
static bool
udx__from_remote (const udx_stream_t *s, const udx_socket_t *sock, const struct sockaddr_storage *from) {
  for (int r = 0; r < 2; r++) {
    if (s->remote[r].socket == sock && udx__same_dest(&s->remote[r].addr, from))
      return true;
  }
  return false;
}

// Returns true for a bare ACK the ACK pause may follow (see below).
static bool
udx__socket_dispatch_one (udx_socket_t *sock, uint8_t *buf, size_t len, struct sockaddr_storage *from, uint64_t now) {
  uint32_t id;
  if (udx__wire_peek(buf, len, &id)) {
    udx_stream_t *s = udx__idmap_get(&sock->udx->ids, id);
    if (s && !udx__stream_dead(s)) {
      if ((s->status & UDX_S_CONNECTED) && !udx__io(s)->migration && !udx__from_remote(s, sock, from)) {
        sock->stats.wrong_source++;
        return false;
      }
      // Packets from anywhere but the stream's own socket pass the firewall.
      void *own = (s->status & UDX_S_CONNECTED) ? s->remote[s->cur_remote].socket : NULL;
      if (own != sock && s->cb.on_firewall) {
        struct sockaddr_storage addr = *from;
        udx__addr_unmap(&addr);
        if (udx__stream_firewall(s, sock, (struct sockaddr *) &addr))
          return false;
      }
      if (s->relay_to || (s->status & UDX_S_RELAYED)) {
        udx__relay(s, buf, len);
        udx__mark_dirty(s);
        return false;
      }
      udx_fault_state_t *fault = udx__io(s)->fault;
      if (fault) {
        int err;
        int act = udx__fault_decide(fault, UDX_FAULT_RX, now, buf, len, &err);
        if (act == UDX_FAULT_DROP) {
          sock->stats.fault_dropped++;
          return false;
        }
        if (act == UDX_FAULT_DUP)
          udx__stream_recv(s, buf, len, now);
      }
      uint64_t malformed = s->stats.malformed;
      udx__stream_recv(s, buf, len, now);
      udx__mark_dirty(s);
      if (s->stats.malformed != malformed) {
        sock->stats.malformed++;
        return false;
      }
      return udx__stream_ack_pausable(s, buf[UDX_WIRE_TYPE_OFFSET]);
    }
    // a stream that closed gracefully may still owe an ACK (linger.h)
    if (udx__linger_recv(sock, id, buf, len, from, now))
      return false;
  }

  if (sock->on_recv) {
    udx__addr_unmap(from);
    sock->stats.raw_rx++;
    sock->on_recv(sock, buf, len, (struct sockaddr *) from);
  } else {
    sock->stats.raw_dropped++;
  }
  return false;
}

// Every datagram but a pausable ACK, however it comes (a read, a release of
// fault injection's held datagrams), means no pause after the read under way.
static void
udx__socket_dispatch (udx_socket_t *sock, uint8_t *buf, size_t len, struct sockaddr_storage *from, uint64_t now) {
  if (!udx__socket_dispatch_one(sock, buf, len, from, now))
    sock->rx_acks_only = false;
}

static void
udx__socket_rx (udx_socket_t *sock, uint8_t *buf, size_t len, struct sockaddr_storage *from, uint64_t now) {
  udx_fault_state_t *faults[2] = {sock->udx->fault, sock->fault};
  bool dup = false;
  for (int i = 0; i < 2; i++) {
    if (faults[i] == NULL)
      continue;
    int err;
    switch (udx__fault_decide(faults[i], UDX_FAULT_RX, now, buf, len, &err)) {
      case UDX_FAULT_DROP:
        sock->stats.fault_dropped++;
        return;
      case UDX_FAULT_HOLD:
        if (udx__hold(sock, faults[i], true, buf, len, from, now))
          return;
        break;
      case UDX_FAULT_DUP:
        dup = true;
        break;
      default:
        break;
    }
  }
  if (dup) {
    // the instance's own copy buffer: two instances may run in two threads
    uint8_t *copy = sock->udx->rx_dup;
    struct sockaddr_storage addr = *from;
    memcpy(copy, buf, len);
    udx__socket_dispatch(sock, copy, len, &addr, now);
    if (sock->closing)
      return;
  }
  udx__socket_dispatch(sock, buf, len, from, now);
}

void
udx__socket_read (udx_socket_t *sock) {
  udx_t *udx = sock->udx;
  udx_rx_msg_t msgs[UDX_RX_BATCH];
  int budget = UDX_RX_BUDGET;
  size_t size = sock->gro ? UDX_RX_GRO_SIZE : UDX_RX_BUFFER_SIZE;
  int batch = (int) (UDX_RX_AREA / size);
  if (batch > UDX_RX_BATCH)
    batch = UDX_RX_BATCH;

  // A bounded amount of work per readable event, so timers and acks of other
  // streams are never starved by a flood. Each datagram is processed right
  // after its batch is read, in this same callback.
  sock->rx_acks_only = true;
  while (budget > 0 && !sock->closing) {
    int want = budget < batch ? budget : batch;
    int n = udx__sys_recv_batch(sock->fd, udx->rx_bufs, size, udx->rx_addrs, msgs, want);
    if (n <= 0) {
      if (n < 0 && n != UV_EAGAIN)
        udx__log(udx, "recv failed (%s)", uv_err_name(n));
      break;
    }
    sock->stats.recv_batches++;
    for (int i = 0; i < n && !sock->closing; i++) {
      uint64_t now = udx__now();
      uint8_t *buf = udx->rx_bufs + (size_t) i * size;
      // GRO: several datagrams of one flow, `seg` bytes each (the last may be shorter).
      size_t seg = msgs[i].seg ? msgs[i].seg : msgs[i].len;
      size_t off = 0;
      if (msgs[i].seg)
        sock->stats.rx_coalesced += (msgs[i].len + seg - 1) / seg;
      do {
        size_t len = msgs[i].len - off < seg ? msgs[i].len - off : seg;
        sock->stats.packets_rx++;
        sock->stats.bytes_rx += len;
        budget--;
        if (msgs[i].truncated || len > UDX_RX_BUFFER_SIZE) {
          sock->stats.truncated++; // a cut datagram would corrupt data: drop it
          sock->rx_acks_only = false;
        } else {
          udx__socket_rx(sock, buf + off, len, &udx->rx_addrs[i], now);
        }
        off += len;
      } while (off < msgs[i].len && !sock->closing);
    }
    if (n < want)
      break;
  }
  // stopped by the budget: more may wait, and they are read at once, not
  // after a pause (a flood of ACKs must not hold the datagrams behind it)
  if (budget <= 0)
    sock->rx_acks_only = false;
}

// --- ACK pause
//
// A peer that acks every packet (the libudx family) sends an ACK per
// datagram, and a sender waiting on them in epoll is woken for each: a
// wake-up costs both ends (on loopback the peer pays for ours in its
// sendmsg), more than the ACK itself. After a readable event that brought
// only such ACKs, reading stops for ack_pause_us and the next read takes
// what came meanwhile in one batch, like a NIC's interrupt moderation
// (ethtool rx-usecs). BBR sees the batches as ACK aggregation and keeps
// enough in flight to cover the pause. Any other datagram (data, a
// message, a raw datagram, a stream that is not waiting) ends pausing for
// that read, so receivers and request traffic are never held. A pause that
// caught fewer than two datagrams saved no wake-up (ACKs further apart
// than the pause, as on a long path at a modest rate) and cost syscalls:
// the next 1, 2, 4 ... 64 chances to pause are skipped, until one catches
// a batch again.

static void
udx__on_poll (uv_poll_t *h, int status, int events);

static void
udx__on_pause_end (uv_poll_t *h, int status, int events) {
  (void) events;
  udx_socket_t *sock = h->data;
  if (status < 0) { // libuv stopped watching the timer: no more pauses
    udx__log(sock->udx, "ack pause off: timer poll failed (%s)", uv_err_name(status));
    sock->ack_pause_us = 0;
  }
  udx__sys_timer_drain(sock->pause_fd);
  if (!sock->rx_paused)
    return;
  sock->rx_paused = false;
  uv_unref((uv_handle_t *) &sock->pause_poll);
  if (sock->closing)
    return;
  udx__socket_poll_update(sock);
  sock->rx_after_pause = true;
  udx__on_poll(&sock->poll, 0, UV_READABLE); // what came meanwhile, now
}

void
udx__socket_pause (udx_socket_t *sock) {
  if (sock->ack_pause_us == 0 || sock->rx_paused || sock->closing)
    return;
  if (sock->pause_fd < 0) {
    int fd = udx__sys_timer_fd();
    int err = fd < 0 ? fd : uv_poll_init(sock->udx->loop, &sock->pause_poll, fd);
    if (err < 0) {
      if (fd >= 0)
        close(fd);
      udx__log(sock->udx, "ack pause off: no timer (%s)", uv_err_name(err));
      sock->ack_pause_us = 0; // reads are never paused on this socket
      return;
    }
    sock->pause_fd = fd; // from here the socket's close closes the handle
    sock->pause_poll.data = sock;
    err = uv_poll_start(&sock->pause_poll, UV_READABLE, udx__on_pause_end);
    uv_unref((uv_handle_t *) &sock->pause_poll); // referenced only while armed
    if (err < 0) {
      udx__log(sock->udx, "ack pause off: timer poll failed (%s)", uv_err_name(err));
      sock->ack_pause_us = 0;
      return;
    }
  }
  if (udx__sys_timer_arm(sock->pause_fd, sock->ack_pause_us) < 0)
    return;
  sock->rx_paused = true;
  sock->stats.ack_pauses++;
  uv_ref((uv_handle_t *) &sock->pause_poll);
  udx__socket_poll_update(sock);
}

static void
udx__on_poll (uv_poll_t *h, int status, int events) {
  udx_socket_t *sock = h->data;
  if (status < 0) {
    udx__log(sock->udx, "poll failed (%s)", uv_err_name(status));
    return;
  }
  if (events & UV_WRITABLE)
    udx__socket_flush(sock);
  uint64_t seen = sock->stats.packets_rx;
  bool read = (events & UV_READABLE) && !sock->closing;
  if (read)
    udx__socket_read(sock);
  udx__settle(sock->udx);
  uint64_t got = sock->stats.packets_rx - seen;
  if (sock->rx_after_pause) {
    sock->rx_after_pause = false;
    if (got >= 2) {
      sock->pause_backoff = 0;
    } else {
      sock->pause_backoff = sock->pause_backoff ? (uint8_t) udx__min_u32(2u * sock->pause_backoff, UDX_ACK_PAUSE_BACKOFF) : 1;
      sock->pause_skip = sock->pause_backoff;
    }
  }
  if (read && sock->rx_acks_only && got > 0) {
    if (sock->pause_skip > 0)
      sock->pause_skip--;
    else
      udx__socket_pause(sock);
  }
}

void
udx__socket_poll_update (udx_socket_t *sock) {
  if (!sock->polling || sock->closing)
    return;
  int events = (sock->rx_paused ? 0 : UV_READABLE) | (sock->want_writable ? UV_WRITABLE : 0);
  if (events)
    uv_poll_start(&sock->poll, events, udx__on_poll);
  else
    uv_poll_stop(&sock->poll);
}
