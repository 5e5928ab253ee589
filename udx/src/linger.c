// Linger records of gracefully closed streams (linger.h).

#include <stdlib.h>
#include <string.h>

#include "linger.h"
#include "stream.h"
#include "wire.h"

static udx_linger_t *
udx__linger_at (udx_socket_t *sock, uint32_t i) {
  return &sock->linger[(sock->linger_head + i) % sock->linger_max];
}

// Drops expired and forgotten records at the head (the oldest).
static void
udx__linger_trim (udx_socket_t *sock, uint64_t now) {
  while (sock->linger_len > 0) {
    udx_linger_t *r = udx__linger_at(sock, 0);
    if (r->until > now)
      break;
    r->until = 0;
    sock->linger_head = (sock->linger_head + 1) % sock->linger_max;
    sock->linger_len--;
  }
}

void
udx__linger_add (udx_stream_t *s, uint64_t now) {
  uint32_t both = UDX_S_ENDED | UDX_S_ENDED_REMOTE;
  if (s->close_status != 0 || (s->status & both) != both || (s->status & UDX_S_RELAYED))
    return;
  const udx_remote_t *to = &s->remote[s->cur_remote];
  udx_socket_t *sock = to->socket;
  if (!to->valid || sock == NULL || sock->closing || sock->linger_max == 0)
    return;
  if (sock->linger == NULL) {
    sock->linger = calloc(sock->linger_max, sizeof(*sock->linger));
    if (sock->linger == NULL)
      return; // no record: the peer may retransmit its END in vain, as before
    sock->linger_head = sock->linger_len = 0;
  }
  udx__linger_trim(sock, now);
  if (sock->linger_len == sock->linger_max) {
    // full: the oldest goes (a peer cannot make a socket hold more)
    udx__linger_at(sock, 0)->until = 0;
    sock->linger_head = (sock->linger_head + 1) % sock->linger_max;
    sock->linger_len--;
    sock->stats.linger_evicted++;
  }
  uint64_t life = 4 * (uint64_t) s->rto;
  if (life < (uint64_t) sock->linger_ms * UDX_US_PER_MS)
    life = (uint64_t) sock->linger_ms * UDX_US_PER_MS;
  udx_linger_t *r = udx__linger_at(sock, sock->linger_len++);
  r->addr = to->addr;
  r->until = now + life;
  r->local_id = s->local_id;
  r->remote_id = to->id;
  r->seq = s->snd_nxt;
  r->ack = s->rcv_nxt;
  r->rwnd = udx__recv_rwnd(s);
  r->acks_left = UDX_LINGER_ACKS;
  sock->stats.linger_records++;
}

bool
udx__linger_recv (udx_socket_t *sock, uint32_t id, const uint8_t *buf, size_t len, const struct sockaddr_storage *from, uint64_t now) {
  if (sock->linger_len == 0)
    return false;
  udx__linger_trim(sock, now);
  for (uint32_t i = 0; i < sock->linger_len; i++) {
    udx_linger_t *r = udx__linger_at(sock, i);
    if (r->until <= now || r->local_id != id || !udx__same_dest(&r->addr, from))
      continue;
    udx_wire_pkt_t pkt;
    if (udx__wire_decode(buf, len, &pkt) != UDX_WIRE_OK) {
      sock->stats.malformed++;
      return true;
    }
    if (pkt.type & UDX_HEADER_DESTROY) {
      r->until = 0; // the peer is gone too
      return true;
    }
    if ((pkt.type & (UDX_HEADER_DATA | UDX_HEADER_END)) == 0 || r->acks_left == 0)
      return true; // for the closed stream: nothing to answer
    // the ACK it would have sent: everything up to and past the peer's END
    uint8_t hdr[UDX_HEADER_SIZE];
    udx__wire_header(hdr, 0, 0, r->remote_id, r->rwnd, r->seq, r->ack);
    struct iovec iov = {.iov_base = hdr, .iov_len = sizeof(hdr)};
    udx__socket_queue(sock, (const struct sockaddr *) &r->addr, &iov, 1, sizeof(hdr), NULL, NULL);
    sock->stats.linger_acks++;
    if (--r->acks_left == 0)
      r->until = 0;
    return true;
  }
  return false;
}

void
udx__linger_clear (udx_socket_t *sock) {
  free(sock->linger);
  sock->linger = NULL;
  sock->linger_head = sock->linger_len = 0;
}
