// The sender's side of an incoming packet: window update, cumulative ACK,
// SACK ranges (validated), RTT samples, rate sample and BBR, RACK.

#include "path.h"
#include "stream.h"
#include "wire.h"

#define UDX_RTT_MAX_US    (30 * UDX_US_PER_S)
#define UDX_RTO_MIN_US    (1 * UDX_US_PER_S)
#define UDX_RTO_MAX_US    (30 * UDX_US_PER_S)
#define UDX_RTT_MIN_WIN   (300 * UDX_US_PER_S) // RACK min RTT window, as Linux
#define UDX_RTT_CLAMP_MIN (5 * UDX_US_PER_S)

// A SACK range must lie inside what is in flight: [snd_una, snd_nxt).
static bool
udx__sack_is_valid (const udx_stream_t *s, uint32_t start, uint32_t end) {
  if (udx__seq_diff(end, s->snd_nxt) > 0)
    return false;
  if (udx__seq_diff(start, end) >= 0)
    return false;
  if (udx__seq_diff(start, s->snd_nxt) >= 0)
    return false;
  if (udx__seq_diff(start, s->snd_una) < 0)
    return false;
  return true;
}

// Suspend/wake guard (as libudx): a sample far above srtt + 5 rttvar and
// above 5 s is clamped.
static uint32_t
udx__clamp_rtt (const udx_stream_t *s, uint64_t rtt) {
  if (s->srtt == 0)
    return (uint32_t) udx__min_u64(rtt, UDX_RTT_MAX_US);
  uint64_t outlier = (uint64_t) s->srtt + 5ull * s->rttvar;
  if (rtt > outlier && rtt > UDX_RTT_CLAMP_MIN)
    rtt = udx__min_u64(outlier, UDX_RTT_MAX_US);
  return (uint32_t) udx__min_u64(rtt, UDX_RTT_MAX_US);
}

// RFC 6298 2.2-2.4
static void
udx__rtt_sample (udx_stream_t *s, uint32_t rtt) {
  if (s->srtt == 0) {
    s->srtt = rtt ? rtt : 1;
    s->rttvar = rtt / 2;
  } else {
    uint32_t delta = rtt < s->srtt ? s->srtt - rtt : rtt - s->srtt;
    s->rttvar = (uint32_t) ((3ull * s->rttvar + delta) / 4);
    s->srtt = (uint32_t) ((7ull * s->srtt + rtt) / 8);
    if (s->srtt == 0)
      s->srtt = 1;
  }
  uint64_t rto = (uint64_t) s->srtt + 4ull * s->rttvar;
  if (rto < UDX_RTO_MIN_US)
    rto = UDX_RTO_MIN_US;
  if (rto > UDX_RTO_MAX_US)
    rto = UDX_RTO_MAX_US;
  s->rto = (uint32_t) rto;
  s->rto_backoff = 0; // RFC 6298 5.7: a fresh sample ends the backoff
}

// Marks seq delivered. Returns 1 if it was newly delivered.
static int
udx__ack_packet (udx_stream_t *s, uint32_t seq, bool sack, udx_rate_sample_t *rs) {
  udx_pkt_t *p = udx__pkt(s, seq);
  if (p == NULL)
    return 0;

  if (p->flags & UDX_PKT_SACKED) {
    if (!sack) {
      // cumulatively acked now; it was counted when SACKed
      s->sacked--;
      p->flags = 0;
    }
    return 0;
  }

  udx__mtu_on_probe_acked(s, p);
  udx__mtu_on_ack(s);

  if (p->flags & UDX_PKT_LOST) {
    p->flags &= ~UDX_PKT_LOST;
    s->lost_pending--;
  }
  udx__tx_list_remove(s, p);
  udx__rate_on_delivered(s, p, rs);

  uint32_t rtt = udx__clamp_rtt(s, s->now - p->time_sent);
  bool retransmitted = (p->flags & UDX_PKT_RETRANSMITTED) != 0;

  if (!retransmitted) {
    // Karn: only never-retransmitted packets give RTT samples.
    udx__winfilter_min(&s->rtt_min, UDX_RTT_MIN_WIN, s->now, rtt);
    udx__rtt_sample(s, rtt);
    s->tlp_permitted = true;
  }

  // RFC 8985 6.2 step 2: the most recently sent delivered packet.
  if (!retransmitted || rtt >= udx__winfilter_get(&s->rtt_min)) {
    s->rack_rtt = rtt;
    rs->rtt_us = rtt;
    if (p->tx_order > s->rack_xmit_order) {
      s->rack_xmit_order = p->tx_order;
      s->rack_xmit_ts = p->time_sent;
      s->rack_end_seq = seq + 1;
    }
  }

  // RFC 8985 6.2 step 3: reordering seen when a lower seq arrives late.
  if (udx__seq_gt(seq + 1, s->rack_fack)) {
    s->rack_fack = seq + 1;
  } else if (udx__seq_lt(seq + 1, s->rack_fack) && !retransmitted) {
    s->reordering_seen = true;
  }

  s->bytes_acked += p->len;
  s->delivered++;
  s->stats.delivered++;

  if (sack) {
    p->flags = UDX_PKT_USED | UDX_PKT_SACKED | (p->flags & UDX_PKT_IN_RTXQ);
    s->sacked++;
  } else {
    p->flags = 0;
  }
  return 1;
}

void
udx__arm_timers_after_send (udx_stream_t *s, bool arm_tlp) {
  if (s->rto_at == UDX_NEVER)
    udx__rearm_rto(s);
  if (arm_tlp && s->ca_state == UDX_CA_OPEN && s->sacked == 0 && s->reo_at == UDX_NEVER) {
    udx__schedule_tlp(s);
  }
}

// RFC 8985 7.4.2: the TLP episode ends when its probe (or what it repaired)
// is acked.
static void
udx__tlp_check_repaired (udx_stream_t *s, uint32_t ack) {
  if (!s->tlp_in_flight || !udx__seq_ge(ack, s->tlp_end_seq))
    return;
  if (!s->tlp_is_retrans || udx__seq_gt(ack, s->tlp_end_seq))
    s->tlp_in_flight = false;
}

// Acked bytes leave the send queue, unless the host still holds datagrams
// pointing into it (then once it lets go of the last, udx__stream_unpin).
static void
udx__release_acked_bytes (udx_stream_t *s) {
  udx_pkt_t *p = udx__pkt(s, s->snd_una);
  uint64_t off = p ? p->off : s->snd_pkt_off;
  if (s->snd_una == s->snd_nxt)
    off = s->snd_pkt_off;
  if (off > s->snd_acked_off)
    s->snd_acked_off = off;
  if (s->tx_pins == 0)
    udx__bufq_release(&s->sndq, s->pool, s->snd_acked_off);
}

void
udx__stream_unpin (udx_stream_t *s) {
  if (s->tx_pins > 0 && --s->tx_pins == 0)
    udx__bufq_release(&s->sndq, s->pool, s->snd_acked_off);
}

void
udx__process_ack (udx_stream_t *s, const void *wire_pkt, bool data_in_flight) {
  const udx_wire_pkt_t *pkt = wire_pkt;
  uint32_t ack = pkt->ack;

  // An ack beyond what we sent is bogus: ignore the ack side (RFC 793).
  if (udx__seq_gt(ack, s->snd_nxt)) {
    s->stats.malformed++;
    return;
  }

  bool ack_valid = udx__seq_ge(ack, s->snd_una);

  // RFC 793 window update (SND.WL1 / SND.WL2).
  if (ack_valid && (udx__seq_lt(s->snd_wl1, pkt->seq) || (s->snd_wl1 == pkt->seq && udx__seq_le(s->snd_wl2, ack)))) {
    uint32_t prev = s->send_rwnd;
    s->send_rwnd = pkt->rwnd;
    s->snd_wl1 = pkt->seq;
    s->snd_wl2 = ack;
    if (pkt->rwnd > 0) {
      s->zwp_at = UDX_NEVER;
      s->zwp_backoff = 0;
    }
    // A window that reopens while data is outstanding: restart the RTO
    // without backoff, so dropped data is resent promptly.
    if (prev < udx__max_payload(s) && pkt->rwnd >= udx__max_payload(s) && s->snd_una != s->snd_nxt && s->rto_backoff) {
      s->rto_backoff = 0;
      s->rto_at = s->now + s->rto;
    }
    // A zero window from a live peer counts as progress (it is not dead).
    if (pkt->rwnd < udx__max_payload(s))
      s->progress_at = s->now;
  }

  if ((s->status & UDX_S_CHANGING) && udx__seq_ge(ack, s->change_seq)) {
    s->status &= ~UDX_S_CHANGING;
    if (s->remote[1 - s->cur_remote].valid)
      s->remote[1 - s->cur_remote].valid = false;
    s->host->remote_changed(s);
  }

  udx__tlp_check_repaired(s, ack);

  if (udx__seq_gt(ack, s->high_seq) && s->ca_state != UDX_CA_OPEN) {
    // Leaving recovery: BBR restores its saved cwnd (libudx sets cwnd to
    // ssthresh here, which is 0xffff before DRAIN).
    s->ca_state = UDX_CA_OPEN;
  }

  udx_rate_sample_t rs = {.rtt_us = -1};
  s->rate_ref_ts = s->delivered_max_ts;
  uint64_t prior_delivered = s->delivered;
  bool ack_advanced = ack_valid && ack != s->snd_una;

  if (ack_advanced) {
    for (uint32_t seq = s->snd_una; seq != ack; seq++) {
      udx__ack_packet(s, seq, false, &rs);
    }
    s->snd_una = ack;
    s->progress_at = s->now;
  }

  // SACK ranges, each validated. Overlapping ranges cannot make us loop more
  // than a few windows per packet.
  uint64_t budget = 2ull * (uint32_t) (s->snd_nxt - s->snd_una) + pkt->nsacks;
  for (uint32_t i = 0; i < pkt->nsacks; i++) {
    uint32_t start, end;
    udx__wire_sack(pkt, i, &start, &end);
    if (!udx__sack_is_valid(s, start, end)) {
      s->stats.dropped_sacks++;
      continue;
    }
    for (uint32_t seq = start; seq != end && budget > 0; seq++, budget--) {
      udx__ack_packet(s, seq, true, &rs);
    }
  }

  uint32_t delivered = (uint32_t) (s->delivered - prior_delivered);
  if (delivered > 0) {
    uint32_t span16 = (delivered > 64 ? 64 : delivered) << 4;
    s->ack_span16 = s->ack_span_samples ? (s->ack_span16 * 7 + span16) / 8 : span16;
    if (s->ack_span_samples < UINT32_MAX)
      s->ack_span_samples++;
    udx__mtu_widen(s);
  }

  if (ack_advanced)
    udx__release_acked_bytes(s);
  if (delivered > 0 && s->path)
    udx__path_on_ack(s, delivered, rs.rtt_us);

  // Progress: packets newly delivered, or the cumulative ACK moved over
  // packets a SACK had already delivered (a peer may SACK from snd_una:
  // nothing is new then, but our END or a flush point may now be acked).
  bool progress = delivered > 0 || ack_advanced;

  if (progress) {
    if (s->snd_una == s->snd_nxt) {
      s->rto_at = UDX_NEVER;
      s->tlp_at = UDX_NEVER;
      s->reo_at = UDX_NEVER;
      s->rto_backoff = 0;
    } else {
      s->rto_at = UDX_NEVER;
      udx__rearm_rto(s);
      // RFC 8985 6.2 step 5: detect losses, maybe arm the reordering timer.
      uint64_t wait = udx__rack_detect_loss(s);
      s->reo_at = wait ? s->now + wait : UDX_NEVER;
      if (s->reo_at != UDX_NEVER)
        s->tlp_at = UDX_NEVER;
    }
  }

  if (ack_advanced && data_in_flight && s->snd_una != s->snd_nxt && s->reo_at == UDX_NEVER) {
    if (!udx__schedule_tlp(s))
      s->tlp_at = UDX_NEVER;
  }

  if (data_in_flight) {
    // Losses since the last sample: those RACK just found for this ACK and
    // those its timer or the RTO found in between (libudx counts neither:
    // it takes the count before detection runs, so BBR never sees a loss).
    uint32_t lost = (uint32_t) (s->lost - s->lost_sampled);
    s->lost_sampled = s->lost;
    udx__rate_generate(s, delivered, lost, &rs);
    udx__bbr_main(s, &rs);
  }

  if (!progress)
    return;

  // Our END acked: everything up to it was delivered.
  if ((s->status & (UDX_S_END_SENT | UDX_S_ENDED)) == UDX_S_END_SENT && s->snd_una == s->snd_nxt) {
    s->status |= UDX_S_ENDED;
    if (s->cb.on_finish && !UDX_CALLBACK(s, s->cb.on_finish(s)))
      return;
    // A final ACK makes sure the peer's END is acked too (as libudx).
    if (!udx__stream_dead(s))
      udx__send_ack(s);
  }

  uint64_t queued = s->sndq.end - s->bytes_acked;

  if (s->status & UDX_S_HWM) {
    uint64_t wnd = udx__min_u64((uint64_t) s->cwnd * udx__max_payload(s), s->send_rwnd);
    if (queued < UDX_HIGH_WATERMARK + wnd) {
      s->status &= ~UDX_S_HWM;
      if (s->cb.on_drain && !UDX_CALLBACK(s, s->cb.on_drain(s)))
        return;
    }
  }

  if ((s->status & UDX_S_FLUSH) && s->snd_acked_off >= s->flush_off) {
    s->status &= ~UDX_S_FLUSH;
    if (s->cb.on_flush && !UDX_CALLBACK(s, s->cb.on_flush(s)))
      return;
  }
}
