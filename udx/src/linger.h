#ifndef UDX_LINGER_H
#define UDX_LINGER_H

// Linger (TCP's TIME_WAIT, RFC 9293 3.6.1, made small): a stream that
// closed gracefully leaves a record on its socket for a short time, so a
// peer whose last END was acked by an ACK that got lost can still get its
// ACK when it retransmits that END. A record answers DATA/END with an ACK
// and swallows the rest for its id; a DESTROY, socket close or its time
// ends it. Records are bounded per socket (the oldest goes first) and each
// answers a bounded number of packets.

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "io.h"

// Records per socket, and how long one lives at least (udx_socket_set_linger).
#define UDX_LINGER_MAX_DEFAULT 64
#define UDX_LINGER_MAX_LIMIT   4096 // a datagram for no live stream is checked against each record
#define UDX_LINGER_MS_DEFAULT  2000
// A record lives 4 RTO (the peer resends its END after 1 and 3 RTO: two
// chances), or the socket's linger time if longer.
// ACKs one record sends before it is forgotten (a peer resends an END at
// most 7 times before it gives up).
#define UDX_LINGER_ACKS 8

typedef struct udx_linger_s {
  struct sockaddr_storage addr; // the peer: other sources get nothing
  uint64_t until;               // us; 0: free
  uint32_t local_id;
  uint32_t remote_id;
  uint32_t seq; // our next seq (snd.nxt)
  uint32_t ack; // rcv.nxt: past the peer's END
  uint32_t rwnd;
  uint8_t acks_left;
} udx_linger_t;

// s closes now: with both ENDs done (status 0), it leaves a record.
void
udx__linger_add (udx_stream_t *s, uint64_t now);

// A UDX datagram whose id maps to no live stream: true if a record took it.
bool
udx__linger_recv (udx_socket_t *sock, uint32_t id, const uint8_t *buf, size_t len, const struct sockaddr_storage *from, uint64_t now);

// Forgets every record of the socket (socket close, set_linger).
void
udx__linger_clear (udx_socket_t *sock);

#endif
