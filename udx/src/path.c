// The shared path window (see path.h).

#include "path.h"

#define UDX_PATH_INIT_CWND    32 // packets: the first flight all members share
#define UDX_PATH_MIN_CWND     8
#define UDX_PATH_MAX_CWND     (1u << 20)
#define UDX_PATH_QUANTUM      4 // packets a woken stream may send in its turn
#define UDX_PATH_BETA_NUM     7 // RFC 9438 4.6: cwnd * 0.7 on loss
#define UDX_PATH_BETA_DEN     10
#define UDX_PATH_MIN_ROUND_US 1000 // a round trip, at least, between decreases
#define UDX_PATH_BW_ROUNDS    10   // the delivery rate: max over this many rounds
#define UDX_PATH_RTT_WIN_US   (10 * UDX_US_PER_S)
#define UDX_PATH_GAIN_NUM     9     // the target: the measured BDP * 9/8, a queue of
#define UDX_PATH_GAIN_DEN     8     // an eighth of it at most, and room to grow 12.5%/round
#define UDX_PATH_STAND_NUM    17    // a queue no round drains: a sixteenth of the
#define UDX_PATH_STAND_DEN    16    // BDP at most (the round's smallest RTT)
#define UDX_PATH_QUEUE_RTT_US 20000 // min RTT from which the window drains (path_long)

void
udx__path_init (udx_path_t *p) {
  p->cwnd = UDX_PATH_INIT_CWND;
  p->ssthresh = UINT32_MAX;
  udx__winfilter_reset(&p->bw, 0, 0);
  udx__winfilter_reset(&p->min_rtt, 0, (double) UINT32_MAX); // unknown
  p->round_min_rtt = UINT32_MAX;
}

// A path whose min RTT is short against the hosts' own latency: a window
// brought down towards the model there takes the rate with it, not the
// queue (the RTT is the hosts', the delivery rate follows the window, the
// model follows the rate). 100 streams over loopback on a loaded 2-core
// machine: min RTT in microseconds, median 5-6 ms; brought down, they went
// 600 -> 270-500 MB/s at Jain 0.8-0.9. Such a path's window only grows to
// the model, and falls on loss.
static bool
path_long (const udx_path_t *p) {
  return udx__winfilter_get(&p->min_rtt) >= UDX_PATH_QUEUE_RTT_US;
}

static void
path_dequeue (udx_path_t *p, udx_stream_t *s) {
  udx_stream_t **at = &p->wait_head;
  udx_stream_t *prev = NULL;
  while (*at && *at != s) {
    prev = *at;
    at = &(*at)->path_next;
  }
  if (*at == NULL)
    return;
  *at = s->path_next;
  if (p->wait_tail == s)
    p->wait_tail = prev;
  s->path_next = NULL;
}

static void
path_wait (udx_path_t *p, udx_stream_t *s) {
  if (s->path_state == UDX_PATH_WAITING)
    return;
  s->path_state = UDX_PATH_WAITING;
  s->path_next = NULL;
  if (p->wait_tail)
    p->wait_tail->path_next = s;
  else
    p->wait_head = s;
  p->wait_tail = s;
  p->waits++;
}

// Room opened (or the path stopped being shared): wake the next streams in
// line, each for a turn of up to a few packets that are kept for it (a turn
// of 4 on one free packet let the first woken take the room of the next
// three, who went back to the end of the line: with ACKs in bursts, 16
// streams ended at Jain 0.48).
static void
path_kick (udx_path_t *p) {
  // A turn starts once a whole one is free: turns of one packet cost a
  // wake-up per packet (100 streams over loopback: 20% slower).
  uint32_t turn = p->cwnd < UDX_PATH_QUANTUM ? 1 : UDX_PATH_QUANTUM;
  while (p->wait_head && (!udx__path_shared(p) || (uint64_t) p->inflight + p->granted + turn <= p->cwnd)) {
    udx_stream_t *s = p->wait_head;
    p->wait_head = s->path_next;
    if (p->wait_head == NULL)
      p->wait_tail = NULL;
    s->path_next = NULL;
    s->path_state = UDX_PATH_GRANTED;
    uint32_t room = udx__path_shared(p) ? p->cwnd - p->inflight - p->granted : UDX_PATH_QUANTUM;
    s->path_quota = room < UDX_PATH_QUANTUM ? room : UDX_PATH_QUANTUM;
    p->granted += s->path_quota;
    udx__stream_wake(s);
  }
}

static void
path_leave (udx_stream_t *s) {
  udx_path_t *p = s->path;
  if (p == NULL)
    return;
  if (s->path_state == UDX_PATH_WAITING)
    path_dequeue(p, s);
  else if (s->path_state == UDX_PATH_GRANTED)
    p->granted -= s->path_quota;
  s->path_state = UDX_PATH_FREE;
  s->path_quota = 0;
  p->inflight -= s->inflight;
  p->refs--;
  s->path = NULL;
  if (p->refs == 0) {
    if (p->release)
      p->release(p);
    return;
  }
  path_kick(p);
}

void
udx__path_set (udx_stream_t *s, udx_path_t *p) {
  if (s->path == p)
    return;
  path_leave(s);
  if (p == NULL)
    return;
  s->path = p;
  p->refs++;
  p->inflight += s->inflight;
  // A window that starts limiting now starts at what is already out (a
  // stream running alone kept no account of its own).
  if (p->refs == 2 && p->cwnd < p->inflight)
    p->cwnd = p->inflight;
}

bool
udx__path_check (udx_stream_t *s) {
  udx_path_t *p = s->path;
  if (!udx__path_shared(p))
    return true;
  if (s->path_state == UDX_PATH_GRANTED) {
    if (s->path_quota > 0 && p->inflight < p->cwnd)
      return true;
    s->path_blocked = true; // queued again when the turn ends
    return false;
  }
  // Others are waiting for their turn: queue behind them.
  if (p->inflight + p->granted < p->cwnd && p->wait_head == NULL)
    return true;
  path_wait(p, s);
  return false;
}

void
udx__path_on_send (udx_stream_t *s) {
  if (s->path_state == UDX_PATH_GRANTED && s->path_quota > 0) {
    s->path_quota--;
    s->path->granted--;
  }
}

void
udx__path_after_send (udx_stream_t *s) {
  udx_path_t *p = s->path;
  if (p == NULL)
    return;
  if (s->path_state == UDX_PATH_GRANTED) {
    // The turn ends. Back in line only if the path window is what stopped
    // it: a stream waiting for pacing or the peer's window comes back by
    // itself, and waking it again here would spin.
    s->path_state = UDX_PATH_FREE;
    p->granted -= s->path_quota;
    s->path_quota = 0;
    if (s->path_blocked && udx__path_shared(p))
      path_wait(p, s);
  }
  s->path_blocked = false;
  path_kick(p);
}

// The aggregate's model, on every ACK: packets delivered per round of one
// min RTT (the members' smallest) give the path's delivery rate; their
// product times 9/8 is the window that fills the link and leaves at most an
// eighth of it queued. A loss-driven window alone (AIMD over a queue a
// quarter of the BDP) grows one packet per round trip after each decrease
// and left 14% of a 100 Mbit/s, 40 ms link unused with 16 streams.
static void
path_model (udx_path_t *p, udx_stream_t *s, uint32_t delivered, int64_t rtt_us) {
  if (s->bbr.min_rtt_us != UINT32_MAX)
    udx__winfilter_min(&p->min_rtt, UDX_PATH_RTT_WIN_US, s->now, (double) s->bbr.min_rtt_us);
  double rtt = udx__winfilter_get(&p->min_rtt);
  if (rtt >= (double) UINT32_MAX)
    return;
  if (p->round_start == 0) {
    p->round_start = s->now;
    p->round_delivered = 0;
    return;
  }
  p->round_delivered += delivered;
  if (rtt_us >= 0 && (uint64_t) rtt_us < p->round_min_rtt)
    p->round_min_rtt = (uint32_t) rtt_us;
  uint64_t span = s->now - p->round_start;
  uint64_t round = rtt > UDX_PATH_MIN_ROUND_US ? (uint64_t) rtt : UDX_PATH_MIN_ROUND_US;
  if (span < round)
    return;
  double bw = (double) p->round_delivered / (double) span;
  udx__winfilter_max(&p->bw, UDX_PATH_BW_ROUNDS, ++p->rounds, bw);
  p->round_start = s->now;
  p->round_delivered = 0;
  double target = udx__winfilter_get(&p->bw) * rtt * UDX_PATH_GAIN_NUM / UDX_PATH_GAIN_DEN;
  // Even the round's smallest RTT had more than a sixteenth of the BDP
  // queued: that queue never drains, and the rate is overestimated (ACK
  // batches and host jitter: rounds up to 11% over the link with 16 streams
  // through ludx-pathemu, which the max kept for 10 rounds, a full queue).
  // The window that leaves a sixteenth is the current one scaled by the
  // RTTs' ratio; not below the estimated BDP, so a queue others keep (other
  // flows) cannot squeeze the aggregate out.
  uint32_t round_min = p->round_min_rtt;
  p->round_min_rtt = UINT32_MAX;
  if (path_long(p) && round_min != UINT32_MAX && (double) round_min * UDX_PATH_STAND_DEN > rtt * UDX_PATH_STAND_NUM) {
    double fit = (double) p->cwnd * rtt * UDX_PATH_STAND_NUM / UDX_PATH_STAND_DEN / (double) round_min;
    double floor = udx__winfilter_get(&p->bw) * rtt;
    if (fit < floor)
      fit = floor;
    if (fit < target)
      target = fit;
  }
  if (target > UDX_PATH_MAX_CWND)
    target = UDX_PATH_MAX_CWND;
  p->target = target < UDX_PATH_MIN_CWND ? UDX_PATH_MIN_CWND : (uint32_t) target;
}

void
udx__path_on_ack (udx_stream_t *s, uint32_t delivered, int64_t rtt_us) {
  udx_path_t *p = s->path;
  if (p == NULL)
    return;
  path_model(p, s, delivered, rtt_us);
  if (s->now < p->recover_until)
    return;
  // Past the first loss the window follows the model down as well as up: a
  // window left above it (the rate estimate fell, or a noisy max set it)
  // keeps a standing queue. 16 streams through 84 datagrams of ~2 KB,
  // ludx -> ludx: the window stayed at 315 over a model of 273-303 (BDP
  // 243), median RTT 50.8 ms over 40.
  if (p->target && p->ssthresh != UINT32_MAX && p->cwnd > p->target && path_long(p)) {
    uint32_t over = p->cwnd - p->target;
    p->cwnd -= delivered < over ? delivered : over;
    p->ssthresh = p->cwnd;
    return;
  }
  // Grow only while the window is what limits (RFC 7661): a window that
  // was never filled says nothing about the path.
  if (p->wait_head == NULL && (uint64_t) p->inflight + delivered < p->cwnd / 2)
    return;
  if (p->cwnd < p->ssthresh) {
    p->cwnd += delivered; // RFC 5681 3.1 slow start, until the first loss
  } else if (p->target) {
    // After a loss: back to the model's window within a round, no further
    // (the model itself grows 12.5% a round while the rate does).
    if (p->cwnd < p->target)
      p->cwnd = udx__min_u32(p->cwnd + delivered, p->target);
  } else {
    p->acked += delivered; // one packet per window acked
    if (p->acked >= p->cwnd) {
      p->acked -= p->cwnd;
      p->cwnd++;
    }
  }
  if (p->cwnd > UDX_PATH_MAX_CWND)
    p->cwnd = UDX_PATH_MAX_CWND;
}

void
udx__path_on_loss (udx_stream_t *s) {
  udx_path_t *p = s->path;
  if (p == NULL || s->now < p->recover_until)
    return;
  uint64_t cwnd = (uint64_t) p->cwnd * UDX_PATH_BETA_NUM / UDX_PATH_BETA_DEN;
  // Not below the measured BDP (BBR's rule): that much in flight fills the
  // link and no queue, so a loss that comes with it is not this window's
  // (random loss, a burst, a late emulator). 16 streams, shallow queue, 1%
  // random loss (sim): the window cut every round fell to 12 packets and
  // 3.5% of the link; with the floor, 96.5%.
  uint64_t bdp = (uint64_t) p->target * UDX_PATH_GAIN_DEN / UDX_PATH_GAIN_NUM;
  if (cwnd < bdp)
    cwnd = bdp;
  p->cwnd = cwnd < UDX_PATH_MIN_CWND ? UDX_PATH_MIN_CWND : (uint32_t) cwnd;
  p->ssthresh = p->cwnd;
  p->acked = 0;
  uint32_t round = s->srtt > UDX_PATH_MIN_ROUND_US ? s->srtt : UDX_PATH_MIN_ROUND_US;
  p->recover_until = s->now + round;
  p->decreases++;
}
