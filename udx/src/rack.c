// Loss detection: RACK-TLP (RFC 8985) and the retransmission timer (RFC 6298)
// with exponential backoff and a give-up time.

#include "path.h"
#include "stream.h"

#define UDX_TLP_EXTRA_US    (2 * UDX_US_PER_MS) // RFC 8985 7.2 (no delayed ACKs: 2 ms as libudx)
#define UDX_RTO_BACKOFF_MAX 6
#define UDX_RTO_CAP_US      (60 * UDX_US_PER_S)
#define UDX_RTO_ATTEMPTS    6 // retransmissions a packet gets within the give-up time

// RFC 8985 6.2.4 (without DSACK adaptation).
static uint32_t
udx__rack_reo_wnd (const udx_stream_t *s) {
  if (!s->reordering_seen) {
    if (s->ca_state != UDX_CA_OPEN)
      return 0;
    if (s->sacked >= 3)
      return 0;
  }
  double min_rtt = udx__winfilter_get(&s->rtt_min);
  uint32_t r = min_rtt >= (double) UINT32_MAX ? s->srtt : (uint32_t) (min_rtt / 4);
  return r < s->srtt ? r : s->srtt;
}

static void
udx__mark_lost (udx_stream_t *s, udx_pkt_t *p) {
  udx__tx_list_remove(s, p);
  p->flags |= UDX_PKT_LOST;
  s->lost_pending++;
  s->lost++;
  s->stats.lost++;
  udx__retransmit_queue_push(s, p);
}

static void
udx__enter_recovery (udx_stream_t *s) {
  udx__bbr_save_cwnd(s);
  s->ca_state = UDX_CA_RECOVERY;
  s->high_seq = s->snd_nxt;
  s->stats.fast_recoveries++;
  s->tlp_in_flight = false; // RFC 8985 7.1 TLP_init
  s->tlp_is_retrans = false;
}

// RFC 8985 6.2 step 5: walk packets in transmission order; those sent before
// the most recently delivered one and older than rack_rtt + reo_wnd are lost.
// Returns the wait until the next packet could be declared lost (0: none).
uint64_t
udx__rack_detect_loss (udx_stream_t *s) {
  uint32_t reo_wnd = udx__rack_reo_wnd(s);
  uint64_t timeout = 0;
  uint32_t lost = 0;
  uint32_t probes = 0;

  uint32_t n = s->inflight;
  uint32_t seq = s->tx_head;
  while (n-- > 0) {
    udx_pkt_t *p = udx__pkt(s, seq);
    if (p == NULL)
      break;
    uint32_t next = p->tx_next;

    // sent after the reference: stop (the list is in transmission order)
    if (p->tx_order >= s->rack_xmit_order)
      break;

    int64_t remaining = (int64_t) (p->time_sent + s->rack_rtt + reo_wnd) - (int64_t) s->now;
    if (remaining <= 0) {
      if (p->flags & UDX_PKT_PROBE)
        probes++;
      udx__mark_lost(s, p);
      udx__mtu_on_probe_lost(s, p);
      lost++;
    } else if ((uint64_t) remaining > timeout) {
      timeout = (uint64_t) remaining;
    }
    seq = next;
  }

  // A lost MTU probe alone says nothing about congestion.
  if (lost > probes && s->ca_state == UDX_CA_OPEN)
    udx__enter_recovery(s);
  if (lost > probes && s->path)
    udx__path_on_loss(s);

  return timeout;
}

// RFC 6298 5.5: exponential backoff, capped. With a give-up time the
// backed-off interval is also capped at a sixth of it (never below the RTO
// itself), so a packet still gets about six retransmissions before the
// stream gives up, as with libudx's 6 RTO timeouts: backoff alone (1, 3,
// 7 s, then the 13 s give-up) left three, and at 20 % loss one tail loss in
// several hundred ended the stream.
static uint64_t
udx__rto_interval (const udx_stream_t *s) {
  uint64_t rto = (uint64_t) s->rto << (s->rto_backoff < UDX_RTO_BACKOFF_MAX ? s->rto_backoff : UDX_RTO_BACKOFF_MAX);
  uint64_t cap = UDX_RTO_CAP_US;
  if (s->timeout_ms) {
    cap = udx__min_u64(cap, (uint64_t) s->timeout_ms * UDX_US_PER_MS / UDX_RTO_ATTEMPTS);
    cap = udx__max_u64(cap, s->rto);
  }
  return rto > cap ? cap : rto;
}

// Arms the RTO from now (backed off), never later than the give-up time.
void
udx__rearm_rto (udx_stream_t *s) {
  if (s->snd_una == s->snd_nxt) {
    s->rto_at = UDX_NEVER;
    return;
  }
  uint64_t at = s->now + udx__rto_interval(s);
  uint64_t give_up = s->progress_at + (uint64_t) s->timeout_ms * UDX_US_PER_MS;
  if (s->timeout_ms && give_up > s->now && at > give_up)
    at = give_up;
  s->rto_at = at;
}

static bool
udx__tlp_arm (udx_stream_t *s) {
  uint64_t pto = s->srtt ? 2ull * s->srtt + UDX_TLP_EXTRA_US : UDX_US_PER_S;
  uint64_t at = s->now + pto;
  if (s->rto_at != UDX_NEVER && at > s->rto_at)
    at = s->rto_at;
  s->tlp_at = at;
  return true;
}

// RFC 8985 7.2: PTO = 2 srtt (+2 ms), at most the time left on the RTO.
bool
udx__schedule_tlp (udx_stream_t *s) {
  if (s->snd_una == s->snd_nxt || s->ca_state != UDX_CA_OPEN || s->sacked)
    return false;
  return udx__tlp_arm(s);
}

// In recovery (or with SACKed packets) RACK finds a lost retransmission or
// a lost tail only once something sent after it is delivered. When the
// sender is stalled (nothing new may go, nothing waits for retransmission,
// no RACK timer) a probe makes that happen in 2 srtt instead of an RTO of
// at least 1 s (QUIC's PTO runs in any state: RFC 9002 6.2).
void
udx__schedule_tlp_stalled (udx_stream_t *s) {
  if (s->tlp_at != UDX_NEVER || s->reo_at != UDX_NEVER || s->lost_pending || s->tlp_in_flight)
    return;
  if (s->snd_una == s->snd_nxt || (s->ca_state == UDX_CA_OPEN && s->sacked == 0))
    return; // the ordinary TLP covers an open connection
  // PTO as RFC 9002 6.2.1 (srtt + 4 rttvar; peers ACK at once, there is no
  // delayed-ACK allowance to add), at least srtt/4 more than srtt.
  uint64_t var = udx__max_u64(4ull * s->rttvar, udx__max_u64(s->srtt / 4, UDX_TLP_EXTRA_US));
  uint64_t at = s->now + (s->srtt ? s->srtt + var : UDX_US_PER_S);
  if (s->rto_at != UDX_NEVER && at > s->rto_at)
    at = s->rto_at;
  s->tlp_at = at;
}

void
udx__on_tlp (udx_stream_t *s) {
  s->tlp_at = UDX_NEVER;
  if (s->snd_una == s->snd_nxt)
    return;

  // One probe per episode, and only after a new RTT sample; else the RTO.
  if (s->tlp_in_flight || !s->tlp_permitted)
    return;

  if (udx__tlp_send(s)) {
    s->stats.tlp_count++;
    s->rto_at = UDX_NEVER;
    udx__rearm_rto(s);
  }
}

// RFC 6298 5.5-5.7 with RFC 8985 6.3: the first outstanding packet and those
// past their RACK deadline are lost; back off; give up after the timeout.
void
udx__on_rto (udx_stream_t *s) {
  s->rto_at = UDX_NEVER;
  if (s->snd_una == s->snd_nxt)
    return;

  if (s->timeout_ms && s->now >= s->progress_at + (uint64_t) s->timeout_ms * UDX_US_PER_MS) {
    udx__stream_close(s, UDX_ERR_TIMEDOUT);
    return;
  }

  udx__bbr_save_cwnd(s);
  s->high_seq = s->snd_nxt;
  s->stats.rto_count++;
  s->ca_state = UDX_CA_LOSS;
  s->tlp_in_flight = false;
  s->tlp_is_retrans = false;
  s->tlp_at = UDX_NEVER;
  s->reo_at = UDX_NEVER;

  if (s->rto_backoff < UDX_RTO_BACKOFF_MAX)
    s->rto_backoff++;
  udx__rearm_rto(s);

  uint32_t reo_wnd = udx__rack_reo_wnd(s);

  // Rebuild the retransmission queue in sequence order.
  for (uint32_t i = 0; i < s->rtxq_len; i++) {
    udx_pkt_t *p = udx__pkt(s, s->rtxq[(s->rtxq_head + i) & (s->rtxq_cap - 1)]);
    if (p)
      p->flags &= ~UDX_PKT_IN_RTXQ;
  }
  s->rtxq_len = 0;
  s->rtxq_head = 0;

  for (uint32_t seq = s->snd_una; seq != s->snd_nxt; seq++) {
    udx_pkt_t *p = udx__pkt(s, seq);
    if (p == NULL || (p->flags & UDX_PKT_SACKED))
      continue;

    if (p->flags & UDX_PKT_LOST) {
      udx__retransmit_queue_push(s, p);
      continue;
    }

    int64_t remaining = (int64_t) (p->time_sent + s->rack_rtt + reo_wnd) - (int64_t) s->now;
    if (seq == s->snd_una || remaining < 0) {
      if (p->rto_timeouts < 255)
        p->rto_timeouts++;
      udx__mark_lost(s, p);
      udx__mtu_on_probe_lost(s, p);
    }
  }

  udx__bbr_on_rto(s);
  if (s->path)
    udx__path_on_loss(s);
  udx__send_packets(s);
}
