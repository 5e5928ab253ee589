// Delivery-rate estimation (draft-cheng-iccrg-delivery-rate-estimation, as
// Linux tcp_rate.c and libudx's udx_rate.c), in microseconds and packets.

#include "stream.h"

// Stamp a packet with the delivery state at send time.
void
udx__rate_on_send (udx_stream_t *s, udx_pkt_t *p) {
  if (s->snd_una == s->snd_nxt) {
    // Nothing in flight: this flight's intervals start now.
    s->first_sent_ts = s->now;
    s->delivered_ts = s->now;
  }
  p->first_sent_ts = s->first_sent_ts;
  p->delivered_ts = s->delivered_ts;
  p->delivered = s->delivered;
  p->delivered_bytes = s->delivered_bytes;
  if (s->app_limited) {
    p->flags |= UDX_PKT_APP_LIMITED;
  } else {
    p->flags &= ~UDX_PKT_APP_LIMITED;
  }
}

// The most recently sent of the packets an ACK delivers supplies the sample.
void
udx__rate_on_delivered (udx_stream_t *s, udx_pkt_t *p, udx_rate_sample_t *rs) {
  if (!rs->has_prior || p->tx_order > rs->prior_tx_order) {
    rs->has_prior = true;
    rs->prior_delivered = p->delivered;
    rs->prior_delivered_bytes = p->delivered_bytes;
    rs->prior_ts = p->delivered_ts;
    rs->prior_tx_order = p->tx_order;
    rs->is_app_limited = (p->flags & UDX_PKT_APP_LIMITED) != 0;
    rs->is_retrans = (p->flags & UDX_PKT_RETRANSMITTED) != 0;
    s->first_sent_ts = p->time_sent;
    rs->interval_us = (int64_t) (p->time_sent - p->first_sent_ts);
  }
  // Late reports: a packet sent before one that an earlier ACK already
  // delivered was delivered then too, but reported only now (a receiver
  // that reports few SACK ranges, a lost ACK) -- or overtaken. Counted now
  // it would inflate the rate of every sample whose interval starts after
  // its real delivery, so the byte count that the bandwidth estimate uses
  // leaves it out.
  if (p->time_sent >= s->rate_ref_ts)
    s->delivered_bytes += UDX_HEADER_SIZE + p->padding + p->len;
  if (p->time_sent > s->delivered_max_ts)
    s->delivered_max_ts = p->time_sent;
}

void
udx__rate_generate (udx_stream_t *s, uint32_t delivered, uint32_t lost, udx_rate_sample_t *rs) {
  // The app-limited bubble is gone once it was delivered.
  // (the initial mark, UINT64_MAX, is gone at the first ACK, as Linux's ~0U)
  if (s->app_limited && (s->app_limited == UINT64_MAX || s->delivered > s->app_limited))
    s->app_limited = 0;

  if (delivered)
    s->delivered_ts = s->now;

  rs->acked_sacked = delivered;
  rs->losses = lost;

  if (!rs->has_prior) {
    rs->delivered = -1;
    rs->delivered_bytes = -1;
    rs->interval_us = -1;
    return;
  }

  rs->delivered = (int64_t) (s->delivered - rs->prior_delivered);
  rs->delivered_bytes = (int64_t) (s->delivered_bytes - rs->prior_delivered_bytes);

  if (rs->delivered_bytes <= 0) {
    rs->delivered = -1;
    rs->delivered_bytes = -1;
    rs->interval_us = -1;
    return;
  }

  int64_t snd_us = rs->interval_us;
  int64_t ack_us = s->now > rs->prior_ts ? (int64_t) (s->now - rs->prior_ts) : 0;
  rs->interval_us = snd_us > ack_us ? snd_us : ack_us;

  // An interval shorter than the minimum RTT cannot be right (ACK compression).
  if ((double) rs->interval_us < udx__winfilter_get(&s->rtt_min)) {
    rs->interval_us = -1;
  }
}

// Linux tcp_rate_check_app_limited: little unsent data, window not full, no
// retransmissions pending.
void
udx__rate_check_app_limited (udx_stream_t *s) {
  uint64_t unsent = s->sndq.end - s->snd_pkt_off;
  if (unsent < udx__max_payload(s) && s->inflight < s->cwnd && s->lost_pending == 0) {
    uint64_t mark = s->delivered + s->inflight;
    s->app_limited = mark ? mark : 1;
  }
}

// Token bucket: refilled from the elapsed time at the pacing rate, capped at
// a burst (libudx has no cap, so after idle only cwnd bounded the burst).
void
udx__pacing_refill (udx_stream_t *s) {
  if (s->now <= s->tokens_at)
    return;
  uint64_t elapsed = s->now - s->tokens_at;
  s->tokens_at = s->now;

  double add = (double) elapsed * (double) s->pacing_rate / (double) UDX_US_PER_S;
  int64_t burst = (int64_t) ((double) s->pacing_rate * s->pacing_burst_us / (double) UDX_US_PER_S);
  int64_t min_burst = 4 * (int64_t) (udx__max_payload(s) + UDX_HEADER_SIZE);
  if (burst < min_burst)
    burst = min_burst;

  double t = (double) s->tokens + add;
  s->tokens = t > (double) burst ? burst : (int64_t) t;
}

void
udx__pacing_on_send (udx_stream_t *s, size_t bytes) {
  s->tokens -= (int64_t) bytes;
}
