// BBR v1 congestion control (draft-cardwell-iccrg-bbr-congestion-control-00),
// following the structure and constants of libudx's port, in microseconds.
//
// Each ACK brings a rate sample; from it BBR keeps
//   bw      = windowed max of delivered / interval (10 rounds)
//   min_rtt = windowed min of RTT (10 s)
// and sets pacing_rate = pacing_gain * bw, cwnd = cwnd_gain * bw * min_rtt.

#include "bbr.h"
#include "stream.h"

#define BBR_CYCLE_LEN          8
#define BBR_BW_FILTER_ROUNDS   (BBR_CYCLE_LEN + 2)
#define BBR_MIN_RTT_WINDOW_US  (10 * UDX_US_PER_S)
#define BBR_PROBE_RTT_US       (200 * UDX_US_PER_MS)
#define BBR_EXTRA_ACKED_MAX_US (100 * UDX_US_PER_MS)

static const double bbr_pacing_margin = 0.99;
static const double bbr_high_gain = 2.88539; // 2/ln(2)
static const double bbr_drain_gain = 1 / 2.88539;
static const double bbr_cwnd_gain = 2.0;
static const double bbr_cycle_gain[BBR_CYCLE_LEN] = {1.25, 0.75, 1, 1, 1, 1, 1, 1};
static const uint32_t bbr_cwnd_min_target = 4;
static const double bbr_full_bw_thresh = 1.25;
static const uint32_t bbr_full_bw_count = 3;
static const uint32_t bbr_extra_acked_win_rtts = 5;

double
udx__bbr_bw (const udx_stream_t *s) {
  return udx__winfilter_get(&s->bbr.bw);
}

static uint32_t
bbr_pkt_bytes (const udx_stream_t *s) {
  return udx__max_payload(s) + UDX_HEADER_SIZE;
}

static uint64_t
bbr_rate_bytes_per_s (const udx_stream_t *s, double bw, double gain) {
  double rate = bw * (double) UDX_US_PER_S * bbr_pkt_bytes(s) * gain * bbr_pacing_margin;
  if (rate < 1)
    rate = 1;
  return (uint64_t) rate;
}

// BBR 4.2.1 (init): cwnd / srtt at high gain; 1 ms stands in for an unknown srtt.
static void
bbr_init_pacing_rate (udx_stream_t *s) {
  uint32_t srtt = s->srtt;
  if (srtt) {
    s->bbr.has_seen_rtt = true;
  } else {
    srtt = 1000;
  }
  double bw = (double) s->cwnd / srtt;
  s->pacing_rate = bbr_rate_bytes_per_s(s, bw, bbr_high_gain);
}

static void
bbr_set_pacing_rate (udx_stream_t *s, double bw, double gain) {
  uint64_t rate = bbr_rate_bytes_per_s(s, bw, gain);

  if (!s->bbr.has_seen_rtt && s->srtt) {
    bbr_init_pacing_rate(s);
  }
  // Before the pipe is full the rate only grows.
  if (s->bbr.full_bw_reached || rate > s->pacing_rate) {
    s->pacing_rate = rate;
  }
}

void
udx__bbr_save_cwnd (udx_stream_t *s) {
  if (s->bbr.prev_ca_state < UDX_CA_RECOVERY && s->bbr.state != UDX_BBR_STATE_PROBE_RTT) {
    s->bbr.prior_cwnd = s->cwnd;
  } else {
    s->bbr.prior_cwnd = udx__max_u32(s->bbr.prior_cwnd, s->cwnd);
  }
}

// BDP in packets for a gain; 10 (the initial cwnd) while min_rtt is unknown.
static uint32_t
bbr_bdp (const udx_stream_t *s, double bw, double gain) {
  if (s->bbr.min_rtt_us == UINT32_MAX)
    return 10;
  double bdp = bw * s->bbr.min_rtt_us * gain;
  if (bdp > (double) UINT32_MAX / 2)
    return UINT32_MAX / 2;
  return (uint32_t) bdp;
}

static void
bbr_reset_probe_bw (udx_stream_t *s);

static void
bbr_reset_mode (udx_stream_t *s) {
  if (!s->bbr.full_bw_reached) {
    s->bbr.state = UDX_BBR_STATE_STARTUP;
  } else {
    bbr_reset_probe_bw(s);
  }
}

static void
bbr_check_probe_rtt_done (udx_stream_t *s) {
  if (!(s->bbr.probe_rtt_done_time && s->now > s->bbr.probe_rtt_done_time))
    return;
  s->bbr.min_rtt_stamp = s->now;
  s->cwnd = udx__max_u32(s->cwnd, s->bbr.prior_cwnd);
  bbr_reset_mode(s);
}

// BBR 4.2.2: restarting from idle.
void
udx__bbr_on_transmit_start (udx_stream_t *s) {
  if (!s->app_limited)
    return;
  s->bbr.idle_restart = true;
  s->bbr.ack_epoch_start = s->now;
  s->bbr.ack_epoch_acked = 0;
  if (s->bbr.state == UDX_BBR_STATE_PROBE_BW) {
    bbr_set_pacing_rate(s, udx__bbr_bw(s), 1.0);
  } else if (s->bbr.state == UDX_BBR_STATE_PROBE_RTT) {
    bbr_check_probe_rtt_done(s);
  }
}

// Extra cwnd for ACK aggregation, capped at 100 ms worth of bw.
static uint32_t
bbr_ack_aggregation_cwnd (const udx_stream_t *s) {
  if (!s->bbr.full_bw_reached)
    return 0;
  double max_aggr = udx__bbr_bw(s) * BBR_EXTRA_ACKED_MAX_US;
  uint32_t extra = udx__max_u32(s->bbr.extra_acked[0], s->bbr.extra_acked[1]);
  if ((double) extra > max_aggr)
    extra = (uint32_t) max_aggr;
  return extra;
}

// Packet conservation on entering recovery, restore on leaving it.
static bool
bbr_recover_or_restore (udx_stream_t *s, udx_rate_sample_t *rs, uint32_t acked, uint32_t *out) {
  uint8_t prev = s->bbr.prev_ca_state;
  uint8_t state = s->ca_state;
  uint32_t cwnd = s->cwnd;

  if (rs->losses > 0) {
    cwnd = cwnd > rs->losses ? cwnd - rs->losses : 1;
  }

  if (state == UDX_CA_RECOVERY && prev != UDX_CA_RECOVERY) {
    s->bbr.use_packet_conservation = true;
    s->bbr.next_rtt_delivered = s->delivered;
    cwnd = s->inflight + acked;
  } else if (prev >= UDX_CA_RECOVERY && state == UDX_CA_OPEN) {
    cwnd = udx__max_u32(cwnd, s->bbr.prior_cwnd);
    s->bbr.use_packet_conservation = false;
  }

  s->bbr.prev_ca_state = state;

  if (s->bbr.use_packet_conservation) {
    *out = udx__max_u32(cwnd, s->inflight + acked);
    return true;
  }
  *out = cwnd;
  return false;
}

static void
bbr_set_cwnd (udx_stream_t *s, udx_rate_sample_t *rs, uint32_t acked, double bw, double gain) {
  uint32_t cwnd = s->cwnd;

  if (acked) {
    if (!bbr_recover_or_restore(s, rs, acked, &cwnd)) {
      uint32_t target = bbr_bdp(s, bw, gain) + bbr_ack_aggregation_cwnd(s);
      if (s->bbr.full_bw_reached) {
        cwnd = udx__min_u32(cwnd + acked, target);
      } else if (cwnd < target || s->delivered < 10) {
        cwnd = cwnd + acked;
      }
      cwnd = udx__max_u32(cwnd, bbr_cwnd_min_target);
    }
  }

  s->cwnd = cwnd;
  if (s->bbr.state == UDX_BBR_STATE_PROBE_RTT) {
    s->cwnd = udx__min_u32(s->cwnd, bbr_cwnd_min_target);
  }
}

static bool
bbr_is_next_cycle_phase (udx_stream_t *s, udx_rate_sample_t *rs) {
  bool full_length = s->delivered_ts > s->bbr.cycle_ts && s->delivered_ts - s->bbr.cycle_ts > s->bbr.min_rtt_us;
  double gain = s->bbr.pacing_gain;

  if (gain == 1.0)
    return full_length;

  double bw = udx__bbr_bw(s);
  if (gain > 1.0) {
    return full_length && (rs->losses || s->inflight > bbr_bdp(s, bw, gain));
  }
  return full_length || s->inflight <= bbr_bdp(s, bw, 1.0);
}

static void
bbr_advance_cycle_phase (udx_stream_t *s) {
  s->bbr.cycle_index = (s->bbr.cycle_index + 1) & (BBR_CYCLE_LEN - 1);
  s->bbr.cycle_ts = s->delivered_ts;
}

static void
bbr_reset_probe_bw (udx_stream_t *s) {
  s->bbr.state = UDX_BBR_STATE_PROBE_BW;
  // libudx starts at a fixed phase (index 3, advanced to 4: a 1.0 phase).
  s->bbr.cycle_index = 3;
  bbr_advance_cycle_phase(s);
}

static void
bbr_update_bw (udx_stream_t *s, udx_rate_sample_t *rs) {
  s->bbr.round_start = false;
  if (rs->delivered < 0 || rs->interval_us <= 0)
    return;

  // A round ends when a packet sent after the round began is delivered.
  if (rs->prior_delivered >= s->bbr.next_rtt_delivered) {
    s->bbr.next_rtt_delivered = s->delivered;
    s->bbr.rtt_count++;
    s->bbr.round_start = true;
    s->bbr.use_packet_conservation = false;
  }

  double bw = (double) rs->delivered / (double) rs->interval_us;
  if (!rs->is_app_limited || bw >= udx__bbr_bw(s)) {
    udx__winfilter_max(&s->bbr.bw, BBR_BW_FILTER_ROUNDS, s->bbr.rtt_count, bw);
  }
}

static void
bbr_update_ack_aggregation (udx_stream_t *s, udx_rate_sample_t *rs) {
  if (rs->acked_sacked == 0 || rs->delivered < 0 || rs->interval_us <= 0)
    return;

  if (s->bbr.round_start) {
    s->bbr.extra_acked_win_rtts = (uint8_t) udx__min_u32(0xff, s->bbr.extra_acked_win_rtts + 1u);
    if (s->bbr.extra_acked_win_rtts >= bbr_extra_acked_win_rtts) {
      s->bbr.extra_acked_win_rtts = 0;
      s->bbr.extra_acked_win_index = s->bbr.extra_acked_win_index ? 0 : 1;
      s->bbr.extra_acked[s->bbr.extra_acked_win_index] = 0;
    }
  }

  uint64_t epoch_us = s->delivered_ts > s->bbr.ack_epoch_start ? s->delivered_ts - s->bbr.ack_epoch_start : 0;
  double expected = udx__bbr_bw(s) * (double) epoch_us;

  // Restart the epoch when ACKs come slower than expected.
  if ((double) s->bbr.ack_epoch_acked <= expected) {
    s->bbr.ack_epoch_acked = 0;
    s->bbr.ack_epoch_start = s->delivered_ts;
    expected = 0;
  }

  s->bbr.ack_epoch_acked += rs->acked_sacked;

  double extra = (double) s->bbr.ack_epoch_acked - expected;
  if (extra < 0)
    extra = 0;
  if (extra > s->cwnd)
    extra = s->cwnd;

  uint32_t *slot = &s->bbr.extra_acked[s->bbr.extra_acked_win_index];
  if ((uint32_t) extra > *slot)
    *slot = (uint32_t) extra;
}

// BBR 4.3.1.2: the pipe is full when bw grew less than 25% in 3 rounds.
static void
bbr_check_full_bw_reached (udx_stream_t *s, udx_rate_sample_t *rs) {
  if (s->bbr.full_bw_reached || !s->bbr.round_start || rs->is_app_limited)
    return;

  double max_bw = udx__bbr_bw(s);
  if (max_bw >= s->bbr.full_bw * bbr_full_bw_thresh) {
    s->bbr.full_bw = max_bw;
    s->bbr.full_bw_count = 0;
    return;
  }

  s->bbr.full_bw_count++;
  s->bbr.full_bw_reached = s->bbr.full_bw_count >= bbr_full_bw_count;
}

static void
bbr_check_drain (udx_stream_t *s) {
  if (s->bbr.state == UDX_BBR_STATE_STARTUP && s->bbr.full_bw_reached) {
    s->bbr.state = UDX_BBR_STATE_DRAIN;
    s->ssthresh = bbr_bdp(s, udx__bbr_bw(s), 1.0);
  }
  if (s->bbr.state == UDX_BBR_STATE_DRAIN && s->inflight <= bbr_bdp(s, udx__bbr_bw(s), 1.0)) {
    bbr_reset_probe_bw(s);
  }
}

// BBR 4.3.4: min_rtt over 10 s; when it expires, PROBE_RTT drains the queue
// (cwnd 4) for 200 ms and one round.
static void
bbr_update_min_rtt (udx_stream_t *s, udx_rate_sample_t *rs) {
  bool expired = s->now > s->bbr.min_rtt_stamp + BBR_MIN_RTT_WINDOW_US;

  if (rs->rtt_us >= 0 && ((uint64_t) rs->rtt_us < s->bbr.min_rtt_us || expired)) {
    s->bbr.min_rtt_us = rs->rtt_us > 0 ? (uint32_t) rs->rtt_us : 1;
    s->bbr.min_rtt_stamp = s->now;
  }

  if (expired && !s->bbr.idle_restart && s->bbr.state != UDX_BBR_STATE_PROBE_RTT) {
    s->bbr.state = UDX_BBR_STATE_PROBE_RTT;
    udx__bbr_save_cwnd(s);
    s->bbr.probe_rtt_done_time = 0;
  }

  if (s->bbr.state == UDX_BBR_STATE_PROBE_RTT) {
    uint64_t mark = s->delivered + s->inflight;
    s->app_limited = mark ? mark : 1;

    if (!s->bbr.probe_rtt_done_time && s->inflight <= bbr_cwnd_min_target) {
      s->bbr.probe_rtt_done_time = s->now + BBR_PROBE_RTT_US;
      s->bbr.probe_rtt_round_done = false;
      s->bbr.next_rtt_delivered = s->delivered;
    } else if (s->bbr.probe_rtt_done_time) {
      if (s->bbr.round_start)
        s->bbr.probe_rtt_round_done = true;
      if (s->bbr.probe_rtt_round_done)
        bbr_check_probe_rtt_done(s);
    }
  }

  if (rs->delivered > 0)
    s->bbr.idle_restart = false;
}

static void
bbr_update_gains (udx_stream_t *s) {
  switch (s->bbr.state) {
    case UDX_BBR_STATE_STARTUP:
      s->bbr.pacing_gain = bbr_high_gain;
      s->bbr.cwnd_gain = bbr_high_gain;
      break;
    case UDX_BBR_STATE_DRAIN:
      s->bbr.pacing_gain = bbr_drain_gain;
      s->bbr.cwnd_gain = bbr_high_gain;
      break;
    case UDX_BBR_STATE_PROBE_BW:
      s->bbr.pacing_gain = bbr_cycle_gain[s->bbr.cycle_index];
      s->bbr.cwnd_gain = bbr_cwnd_gain;
      break;
    default: // PROBE_RTT
      s->bbr.pacing_gain = 1.0;
      s->bbr.cwnd_gain = 1.0;
      break;
  }
}

void
udx__bbr_main (udx_stream_t *s, udx_rate_sample_t *rs) {
  bbr_update_bw(s, rs);
  bbr_update_ack_aggregation(s, rs);
  if (s->bbr.state == UDX_BBR_STATE_PROBE_BW && bbr_is_next_cycle_phase(s, rs)) {
    bbr_advance_cycle_phase(s);
  }
  bbr_check_full_bw_reached(s, rs);
  bbr_check_drain(s);
  bbr_update_min_rtt(s, rs);
  bbr_update_gains(s);

  double bw = udx__bbr_bw(s);
  bbr_set_pacing_rate(s, bw, s->bbr.pacing_gain);
  bbr_set_cwnd(s, rs, rs->acked_sacked, bw, s->bbr.cwnd_gain);
}

void
udx__bbr_init (udx_stream_t *s) {
  udx_bbr_t *b = &s->bbr;
  b->prior_cwnd = 0;
  s->ssthresh = 0xffff;
  b->rtt_count = 0;
  b->next_rtt_delivered = s->delivered;
  b->prev_ca_state = UDX_CA_OPEN;
  b->use_packet_conservation = false;
  b->probe_rtt_done_time = 0;
  b->probe_rtt_round_done = false;
  b->min_rtt_us = UINT32_MAX;
  b->min_rtt_stamp = s->now;
  udx__winfilter_reset(&b->bw, 0, 0);
  b->has_seen_rtt = false;
  bbr_init_pacing_rate(s);
  b->round_start = false;
  b->idle_restart = false;
  b->full_bw_reached = false;
  b->full_bw = 0;
  b->full_bw_count = 0;
  b->cycle_ts = 0;
  b->cycle_index = 0;
  b->state = UDX_BBR_STATE_STARTUP;
  b->pacing_gain = bbr_high_gain;
  b->cwnd_gain = bbr_high_gain;
  b->ack_epoch_start = s->now;
  b->ack_epoch_acked = 0;
  b->extra_acked_win_rtts = 0;
  b->extra_acked_win_index = 0;
  b->extra_acked[0] = 0;
  b->extra_acked[1] = 0;
}

// BBR 4.2.4: an RTO is treated as a dummy loss sample; cwnd is not collapsed.
void
udx__bbr_on_rto (udx_stream_t *s) {
  s->bbr.prev_ca_state = UDX_CA_LOSS;
  s->bbr.full_bw = 0;
  s->bbr.round_start = true;
}
