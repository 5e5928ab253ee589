// The transmit ring of a socket. A stream's DATA datagram is queued as a
// header (copied into its slot) plus iovecs pointing into the stream's send
// queue, so its payload is copied once, by the kernel. Other datagrams (ACKs,
// messages, raw sends, relayed or fault-injected ones) are copied into an
// arena that is reset whenever the ring empties. A flush cuts the ring into
// sendmmsg messages, each a single datagram or a run of equal-size datagrams
// to one address sent as one UDP_SEGMENT (GSO) message.

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io.h"

static void
udx__tx_list (udx_socket_t *sock) {
  if (sock->tx_listed)
    return;
  sock->tx_listed = true;
  sock->next_tx = sock->udx->tx_pending;
  sock->udx->tx_pending = sock;
}

static bool
udx__tx_alloc (udx_socket_t *sock) {
  if (sock->tx)
    return true;
  sock->tx = malloc(UDX_TX_SLOTS * sizeof(*sock->tx));
  sock->arena = malloc(UDX_TX_ARENA);
  sock->tx_iov = malloc(UDX_TX_SLOTS * UDX_TX_IOV * sizeof(*sock->tx_iov));
  sock->tx_msgs = malloc(UDX_TX_SLOTS * sizeof(*sock->tx_msgs));
  sock->tx_cmsg = malloc(UDX_TX_SLOTS * sizeof(*sock->tx_cmsg));
  if (sock->tx && sock->arena && sock->tx_iov && sock->tx_msgs && sock->tx_cmsg)
    return true;
  free(sock->tx);
  free(sock->arena);
  free(sock->tx_iov);
  free(sock->tx_msgs);
  free(sock->tx_cmsg);
  sock->tx = NULL;
  sock->arena = NULL;
  sock->tx_iov = NULL;
  sock->tx_msgs = NULL;
  sock->tx_cmsg = NULL;
  return false;
}

// A free slot (and `copy` bytes of arena), flushing first if the ring is full.
static udx_tx_slot_t *
udx__tx_reserve (udx_socket_t *sock, size_t copy) {
  if (!udx__tx_alloc(sock))
    return NULL;
  if (sock->tx_len == UDX_TX_SLOTS || sock->arena_used + copy > UDX_TX_ARENA)
    udx__socket_flush(sock);
  if (sock->tx_len == UDX_TX_SLOTS || sock->arena_used + copy > UDX_TX_ARENA)
    return NULL;
  return &sock->tx[(sock->tx_head + sock->tx_len) % UDX_TX_SLOTS];
}

static void
udx__tx_commit (udx_socket_t *sock) {
  sock->tx_len++;
  udx__tx_list(sock);
}

static void
udx__tx_unpin (udx_tx_slot_t *slot) {
  udx_stream_t *s = slot->pin;
  if (s) {
    slot->pin = NULL;
    udx__stream_unpin(s);
  }
}

static uint32_t
udx__tx_dest (udx_socket_t *sock, const struct sockaddr *to, udx_addr_t *out) {
  if (to->sa_family == AF_INET6) {
    memcpy(&out->v6, to, sizeof(out->v6));
    return sizeof(out->v6);
  }
  if (sock->family == AF_INET6) {
    struct sockaddr_storage mapped;
    udx__socket_dest(sock, to, &mapped);
    memcpy(&out->v6, &mapped, sizeof(out->v6));
    return sizeof(out->v6);
  }
  memcpy(&out->v4, to, sizeof(out->v4));
  return sizeof(out->v4);
}

// Copies a datagram into the ring.
static void
udx__tx_queue_copy (udx_socket_t *sock, const udx_addr_t *to, uint32_t to_len, const struct iovec *iov, int iovcnt, size_t len) {
  udx_tx_slot_t *slot = udx__tx_reserve(sock, len);
  if (slot == NULL) {
    sock->stats.send_eagain++; // the socket stayed full: drop, the stream resends
    return;
  }
  uint8_t *dst = sock->arena + sock->arena_used;
  size_t off = 0;
  for (int i = 0; i < iovcnt; i++) {
    memcpy(dst + off, iov[i].iov_base, iov[i].iov_len);
    off += iov[i].iov_len;
  }
  sock->arena_used += (uint32_t) len;
  slot->to = *to;
  slot->to_len = to_len;
  slot->len = (uint32_t) len;
  slot->pin = NULL;
  slot->niov = 1;
  slot->iov[0].iov_base = dst;
  slot->iov[0].iov_len = len;
  udx__tx_commit(sock);
}

void
udx__held_commit_tx (udx_socket_t *sock, const uint8_t *buf, size_t len, const struct sockaddr_storage *to) {
  if (len > UDX_TX_SLOT_SIZE)
    return;
  udx_addr_t dest;
  uint32_t dlen = udx__tx_dest(sock, (const struct sockaddr *) to, &dest);
  struct iovec iov = {.iov_base = (void *) buf, .iov_len = len};
  udx__tx_queue_copy(sock, &dest, dlen, &iov, 1, len);
}

// Fault injection decides on a flat copy (it may corrupt it): not a fast path.
static void
udx__tx_queue_faulty (udx_socket_t *sock, const udx_addr_t *to, uint32_t to_len, const struct iovec *iov, int iovcnt, size_t len, udx_fault_state_t *stream_fault) {
  uint8_t flat[UDX_TX_SLOT_SIZE];
  size_t off = 0;
  for (int i = 0; i < iovcnt; i++) {
    memcpy(flat + off, iov[i].iov_base, iov[i].iov_len);
    off += iov[i].iov_len;
  }
  struct iovec one = {.iov_base = flat, .iov_len = len};

  bool dup = false;
  udx_fault_state_t *faults[3] = {sock->udx->fault, sock->fault, stream_fault};
  for (int i = 0; i < 3; i++) {
    if (faults[i] == NULL)
      continue;
    int err = 0;
    uint64_t now = udx__now();
    switch (udx__fault_decide(faults[i], UDX_FAULT_TX, now, flat, len, &err)) {
      case UDX_FAULT_DROP:
        sock->stats.fault_dropped++;
        return;
      case UDX_FAULT_ERROR:
        udx__socket_send_error(sock, err);
        return;
      case UDX_FAULT_HOLD: {
        struct sockaddr_storage addr;
        memset(&addr, 0, sizeof(addr));
        memcpy(&addr, to, to_len);
        if (udx__hold(sock, faults[i], false, flat, len, &addr, now))
          return;
        break;
      }
      case UDX_FAULT_DUP:
        dup = true;
        break;
      default:
        break;
    }
  }
  udx__tx_queue_copy(sock, to, to_len, &one, 1, len);
  if (dup)
    udx__tx_queue_copy(sock, to, to_len, &one, 1, len);
}

void
udx__socket_queue (udx_socket_t *sock, const struct sockaddr *to, const struct iovec *iov, int iovcnt, size_t len, udx_fault_state_t *stream_fault, udx_stream_t *pin) {
  if (len > UDX_TX_SLOT_SIZE) {
    sock->stats.send_err_msgsize++;
    return;
  }
  udx_addr_t dest;
  uint32_t dlen = udx__tx_dest(sock, to, &dest);

  if (sock->udx->fault || sock->fault || stream_fault) {
    udx__tx_queue_faulty(sock, &dest, dlen, iov, iovcnt, len, stream_fault);
  } else if (pin == NULL || iovcnt < 1 || iovcnt > UDX_TX_IOV || iov[0].iov_len > UDX_HEADER_SIZE) {
    udx__tx_queue_copy(sock, &dest, dlen, iov, iovcnt, len);
  } else {
    udx_tx_slot_t *slot = udx__tx_reserve(sock, 0);
    if (slot == NULL) {
      sock->stats.send_eagain++;
      return;
    }
    memcpy(slot->hdr, iov[0].iov_base, iov[0].iov_len);
    slot->iov[0].iov_base = slot->hdr;
    slot->iov[0].iov_len = iov[0].iov_len;
    for (int i = 1; i < iovcnt; i++)
      slot->iov[i] = iov[i];
    slot->niov = (uint8_t) iovcnt;
    slot->to = dest;
    slot->to_len = dlen;
    slot->len = (uint32_t) len;
    slot->pin = pin;
    udx__stream_pin(pin);
    udx__tx_commit(sock);
  }
  if (sock->nheld)
    udx__held_release(sock, true);
}

int
udx__tx_plan (const udx_tx_slot_t *slots, int n, bool gso, uint16_t *segs) {
  int nm = 0;
  int i = 0;
  while (i < n) {
    const udx_tx_slot_t *a = &slots[i];
    int k = 1;
    size_t bytes = a->len;
    while (gso && a->niov > 0 && i + k < n && k < UDX_GSO_SEGS) {
      const udx_tx_slot_t *b = &slots[i + k];
      if (b->niov == 0 || b->len > a->len || bytes + b->len > UDX_GSO_BYTES)
        break;
      if (b->to_len != a->to_len || memcmp(&b->to, &a->to, a->to_len) != 0)
        break;
      bytes += b->len;
      k++;
      if (b->len < a->len)
        break; // only the last segment may be shorter
    }
    segs[nm++] = (uint16_t) k;
    i += k;
  }
  return nm;
}

// The first n slots at the head leave the ring (sent or dropped).
static void
udx__tx_advance (udx_socket_t *sock, int n, bool sent) {
  for (int i = 0; i < n; i++) {
    udx_tx_slot_t *slot = &sock->tx[sock->tx_head];
    if (sent) {
      sock->stats.packets_tx++;
      sock->stats.bytes_tx += slot->len;
    }
    udx__tx_unpin(slot);
    sock->tx_head = (sock->tx_head + 1) % UDX_TX_SLOTS;
    sock->tx_len--;
    if (sock->tx_plain)
      sock->tx_plain--;
  }
  if (sock->tx_len == 0) {
    sock->tx_head = 0;
    sock->arena_used = 0;
  }
}

static bool
udx__gso_unsupported (int err) {
  return err == UV_EIO || err == UV_EINVAL || err == UV_ENOTSUP || err == UV_ENOPROTOOPT;
}

void
udx__socket_flush (udx_socket_t *sock) {
  if (sock->fd < 0) {
    udx__socket_tx_clear(sock);
    return;
  }
  uint16_t segs[UDX_TX_SLOTS];
  while (sock->tx_len > 0) {
    udx_tx_slot_t *slots = &sock->tx[sock->tx_head];
    if (slots[0].niov == 0) {
      udx__tx_advance(sock, 1, false); // its stream went away
      continue;
    }
    // a contiguous stretch of live slots (the ring wraps; dropped slots cut)
    int n = 0;
    int max = (int) udx__min_u32(sock->tx_len, UDX_TX_SLOTS - sock->tx_head);
    if (sock->tx_plain)
      max = (int) udx__min_u32((uint32_t) max, sock->tx_plain);
    while (n < max && slots[n].niov > 0)
      n++;

    int nm = udx__tx_plan(slots, n, sock->gso && sock->tx_plain == 0, segs);
    struct iovec *iov = sock->tx_iov;
    int k = 0;
    for (int m = 0; m < nm; m++) {
      struct msghdr *h = &sock->tx_msgs[m].msg_hdr;
      memset(h, 0, sizeof(*h));
      h->msg_name = &slots[k].to;
      h->msg_namelen = slots[k].to_len;
      h->msg_iov = iov;
      for (int j = 0; j < segs[m]; j++, k++) {
        memcpy(iov, slots[k].iov, slots[k].niov * sizeof(*iov));
        iov += slots[k].niov;
      }
      h->msg_iovlen = (size_t) (iov - h->msg_iov);
      if (segs[m] > 1)
        udx__sys_gso_cmsg(h, &sock->tx_cmsg[m], (uint16_t) slots[k - segs[m]].len);
    }

    int r = udx__sys_send_msgs(sock->fd, sock->tx_msgs, nm);
    if (r > 0) {
      sock->stats.send_batches++;
      int done = 0;
      for (int m = 0; m < r; m++) {
        done += segs[m];
        if (segs[m] > 1)
          sock->stats.tx_segmented += segs[m];
      }
      udx__tx_advance(sock, done, true);
      continue;
    }
    if (r == UV_EAGAIN) {
      // Socket buffer full: resume when writable.
      sock->stats.send_eagain++;
      if (!sock->want_writable) {
        sock->want_writable = true;
        udx__socket_poll_update(sock);
      }
      return;
    }
    if (segs[0] > 1) {
      // A UDP_SEGMENT message failed: send its datagrams one by one, so an
      // error belongs to one datagram; stop using GSO if it is unsupported.
      if (udx__gso_unsupported(r)) {
        sock->gso = false;
        udx__log(sock->udx, "UDP_SEGMENT send failed (%s), sending datagrams one by one", uv_err_name(r));
      }
      sock->tx_plain = segs[0];
      continue;
    }
    // A transient (or other) error for the first datagram: drop it only.
    udx__socket_send_error(sock, r);
    udx__tx_advance(sock, 1, false);
  }
  if (sock->want_writable) {
    sock->want_writable = false;
    udx__socket_poll_update(sock);
  }
}

void
udx__socket_tx_clear (udx_socket_t *sock) {
  while (sock->tx_len > 0)
    udx__tx_advance(sock, 1, false);
  sock->tx_plain = 0;
}

void
udx__tx_forget_stream (udx_t *udx, udx_stream_t *s) {
  for (udx_socket_t *sock = udx->sockets; sock && s->tx_pins > 0; sock = sock->next) {
    for (uint32_t i = 0; i < sock->tx_len; i++) {
      udx_tx_slot_t *slot = &sock->tx[(sock->tx_head + i) % UDX_TX_SLOTS];
      if (slot->pin == s) {
        slot->pin = NULL;
        slot->niov = 0;
        udx__stream_unpin(s);
      }
    }
  }
}
