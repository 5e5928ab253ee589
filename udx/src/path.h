#ifndef UDX_PATH_H
#define UDX_PATH_H

// A congestion window shared by the streams of one socket that send to the
// same address (RFC 3124's congestion manager, reduced to one window).
//
// Each stream keeps its own BBR; the path window is a bound over their sum.
// It matters when many streams start or run at once towards one receiver:
// their separate windows add up to more than the receiving socket can hold,
// every stream loses its tail at the same moment, and all of them wait for
// the retransmission timer together (100 streams into a udx-native receiver
// with the kernel's default buffer: 420 RTOs, 7 MB/s). The path window grows
// like slow start (RFC 5681) until the first loss and shrinks once per round
// trip on loss (RFC 9438 4.6, beta 0.7); after that it returns to a model of
// the aggregate (its delivery rate times the members' min RTT, times 9/8),
// not one packet per round trip. Held-back streams queue and take turns a
// few packets at a time.
//
// A path with a single stream never limits it: the stream's BBR alone
// decides, as before. ACKs, TLP and zero-window probes are never held back.

#include "stream.h"
#include "winfilter.h"

typedef struct udx_path_s udx_path_t;

struct udx_path_s {
  uint32_t refs;     // member streams
  uint32_t inflight; // packets in flight over all members
  uint32_t cwnd;     // packets; enforced while there are two or more members
  uint32_t ssthresh;
  uint32_t acked;          // congestion avoidance: packets acked toward the next increment
  uint32_t granted;        // packets kept for streams woken for a turn
  uint64_t recover_until;  // us: one decrease per round trip
  udx_stream_t *wait_head; // streams held back, in order
  udx_stream_t *wait_tail;
  uint64_t decreases;
  uint64_t waits;
  // The aggregate's model (path.c): delivery rate over rounds of one min
  // RTT (packets/us, windowed max) and the members' min RTT (us).
  udx_winfilter_t bw;
  udx_winfilter_t min_rtt;
  uint64_t round_start; // us; 0: no round yet
  uint64_t rounds;
  uint32_t round_delivered;
  uint32_t round_min_rtt; // us: the smallest RTT sample of the round
  uint32_t target;        // packets: bw * min_rtt * gain, 0 while unknown

  // Host fields: the io layer keys paths by socket and address. release is
  // called when the last member leaves (NULL: the host owns the memory).
  void *owner;
  struct sockaddr_storage addr;
  udx_path_t *next;
  void (*release)(udx_path_t *p);
};

// Stream states towards its path (s->path_state).
enum { UDX_PATH_FREE = 0,
       UDX_PATH_WAITING = 1,
       UDX_PATH_GRANTED = 2 };

void
udx__path_init (udx_path_t *p);

// Joins p (leaving any other path first); NULL leaves.
void
udx__path_set (udx_stream_t *s, udx_path_t *p);

// May s put one more packet on the network now? If not, s is queued and
// woken when its turn comes.
bool
udx__path_check (udx_stream_t *s);

// A packet (new or retransmitted) went out under the path window.
void
udx__path_on_send (udx_stream_t *s);

// delivered packets were acked (cumulatively or selectively); rtt_us: the
// ACK's RTT sample (-1: none).
void
udx__path_on_ack (udx_stream_t *s, uint32_t delivered, int64_t rtt_us);

// A loss was detected (RACK, RTO); not for lost MTU probes.
void
udx__path_on_loss (udx_stream_t *s);

// End of a send round: a granted turn ends; the next in line are woken.
void
udx__path_after_send (udx_stream_t *s);

// More than one stream uses the path: its window is shared.
static inline bool
udx__path_shared (const udx_path_t *p) {
  return p->refs >= 2;
}

static inline bool
udx__path_allows (udx_stream_t *s) {
  return s->path == NULL || udx__path_check(s);
}

static inline void
udx__path_inflight_add (udx_stream_t *s, int32_t n) {
  if (s->path)
    s->path->inflight += (uint32_t) n;
}

#endif
