// BBR v1 congestion control (draft-cardwell-iccrg-bbr-congestion-control-00),
// following the structure and constants of libudx's port, in microseconds.
//
// Each ACK brings a rate sample; from it BBR keeps
//   bw      = windowed max of delivered / interval (10 rounds)
//   min_rtt = windowed min of RTT (10 s)
// and sets pacing_rate = pacing_gain * bw, cwnd = cwnd_gain * bw * min_rtt.

#include "bbr.h"
#include "path.h"
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
// ...and at least this long: on a sub-millisecond path (loopback, LAN) 5
// rounds are shorter than a receiver's bursts (a JS event loop that
// decrypts a frame, GC), which the window must remember to cover them
#define BBR_EXTRA_ACKED_MIN_WIN_US (10 * UDX_US_PER_MS)

#define BBR_HS_SAMPLES       8                    // RFC 9406 N_RTT_SAMPLE
#define BBR_HS_THRESH_MIN_US (4 * UDX_US_PER_MS)  // RFC 9406 MIN_RTT_THRESH
#define BBR_HS_THRESH_MAX_US (16 * UDX_US_PER_MS) // RFC 9406 MAX_RTT_THRESH
#define BBR_LOSS_EVENTS      8                    // BBRv2 full_loss_cnt
static const double bbr_loss_thresh = 0.02;       // BBRv2 loss_thresh
static const double bbr_loss_overflow = 0.1;      // a queue overflowing, even while growing

static uint32_t
bbr_pkt_bytes (const udx_stream_t *s) {
  return udx__max_payload(s) + UDX_HEADER_SIZE;
}

// The filter holds datagram bytes per us: packet counts would overstate
// the rate once the MTU search makes packets larger than those measured.
static double
bbr_bw_bytes (const udx_stream_t *s) {
  return udx__winfilter_get(&s->bbr.bw);
}

// In full-size packets per us, for windows counted in packets.
double
udx__bbr_bw (const udx_stream_t *s) {
  return bbr_bw_bytes(s) / bbr_pkt_bytes(s);
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
  // No bandwidth sample yet (Startup can end on loss before one): keep the
  // initial rate. Pacing at "0" would send a packet every twenty minutes.
  if (bw <= 0)
    return;
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

// Losses come off the window; leaving recovery restores the window from
// before it. There is no packet conservation (cwnd = inflight for a round
// after each entry into recovery, as Linux's BBRv1 does): BBR paces, and
// under random loss a stream is in recovery nearly all the time, so the
// window stayed below the pipe (5% loss, 100 Mbit/s, 40 ms: goodput 87.9-
// 88.6% with it, 89.1-89.2% without; 1% and 0% unchanged).
static void
bbr_recover_or_restore (udx_stream_t *s, udx_rate_sample_t *rs, uint32_t *cwnd) {
  uint8_t prev = s->bbr.prev_ca_state;
  uint8_t state = s->ca_state;
  if (rs->losses > 0) {
    *cwnd = *cwnd > rs->losses ? *cwnd - rs->losses : 1;
  }
  if (prev >= UDX_CA_RECOVERY && state == UDX_CA_OPEN) {
    *cwnd = udx__max_u32(*cwnd, s->bbr.prior_cwnd);
  }
  s->bbr.prev_ca_state = state;
}

static void
bbr_set_cwnd (udx_stream_t *s, udx_rate_sample_t *rs, uint32_t acked, double bw, double gain) {
  uint32_t cwnd = s->cwnd;

  if (acked) {
    bbr_recover_or_restore(s, rs, &cwnd);
    uint32_t target = bbr_bdp(s, bw, gain) + bbr_ack_aggregation_cwnd(s);
    if (s->bbr.full_bw_reached) {
      cwnd = udx__min_u32(cwnd + acked, target);
    } else if (cwnd < target || s->delivered < 10) {
      cwnd = cwnd + acked;
    }
    cwnd = udx__max_u32(cwnd, bbr_cwnd_min_target);
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
  // The drain phase lasts until the queue is gone (BBRv3 ProbeBW_DOWN: until
  // inflight <= BDP), not one min_rtt: bw samples a little above the true
  // rate (ACK compression) otherwise leave a queue that BBRv1 only removes
  // in PROBE_RTT, 10 s later. Bounded by 4 min_rtt for a low estimate.
  bool long_enough = s->delivered_ts > s->bbr.cycle_ts && s->delivered_ts - s->bbr.cycle_ts > 4ull * s->bbr.min_rtt_us;
  return long_enough || s->inflight <= bbr_bdp(s, bw, 1.0);
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
  }

  double bw = (double) rs->delivered_bytes / (double) rs->interval_us;
  if (!rs->is_app_limited || bw >= bbr_bw_bytes(s)) {
    udx__winfilter_max(&s->bbr.bw, BBR_BW_FILTER_ROUNDS, s->bbr.rtt_count, bw);
  }
}

static void
bbr_update_ack_aggregation (udx_stream_t *s, udx_rate_sample_t *rs) {
  if (rs->acked_sacked == 0 || rs->delivered < 0 || rs->interval_us <= 0)
    return;

  if (s->bbr.round_start) {
    s->bbr.extra_acked_win_rtts = (uint8_t) udx__min_u32(0xff, s->bbr.extra_acked_win_rtts + 1u);
    if (s->bbr.extra_acked_win_rtts >= bbr_extra_acked_win_rtts &&
        s->now - s->bbr.extra_acked_win_start >= BBR_EXTRA_ACKED_MIN_WIN_US) {
      s->bbr.extra_acked_win_start = s->now;
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

static void
bbr_startup_done (udx_stream_t *s, uint8_t why) {
  s->bbr.full_bw_reached = true;
  s->bbr.startup_exit = why;
}

// RFC 9406 4.2 (the delay increase HyStart++ reads as a growing queue):
// once a round has 8 RTT samples, its min RTT above the previous round's by
// clamp(min/8, 4 ms, 16 ms) ends Startup. Without this, Startup stops only
// after 3 rounds without growth, each longer as the queue fills.
static void
bbr_check_delay_increase (udx_stream_t *s, udx_rate_sample_t *rs) {
  udx_bbr_t *b = &s->bbr;
  if (rs->rtt_us < 0)
    return;
  if ((uint64_t) rs->rtt_us < b->round_min_rtt)
    b->round_min_rtt = (uint32_t) rs->rtt_us;
  b->round_rtt_samples++;
  if (b->full_bw_reached || b->state != UDX_BBR_STATE_STARTUP || rs->is_app_limited)
    return;
  if (b->round_rtt_samples < BBR_HS_SAMPLES || b->last_round_min_rtt == UINT32_MAX)
    return;
  uint64_t thresh = b->last_round_min_rtt / 8;
  if (thresh < BBR_HS_THRESH_MIN_US)
    thresh = BBR_HS_THRESH_MIN_US;
  if (thresh > BBR_HS_THRESH_MAX_US)
    thresh = BBR_HS_THRESH_MAX_US;
  if (b->round_min_rtt >= b->last_round_min_rtt + thresh)
    bbr_startup_done(s, UDX_BBR_EXIT_DELAY);
}

// BBR 4.3.1.2: the pipe is full when bw grew less than 25% in 3 rounds.
static void
bbr_check_full_bw_reached (udx_stream_t *s, udx_rate_sample_t *rs) {
  udx_bbr_t *b = &s->bbr;
  if (b->full_bw_reached || !b->round_start || rs->is_app_limited)
    return;

  double max_bw = bbr_bw_bytes(s);
  if (max_bw >= b->full_bw * bbr_full_bw_thresh) {
    b->full_bw = max_bw;
    b->full_bw_count = 0;
    return;
  }

  b->full_bw_count++;
  if (b->full_bw_count >= bbr_full_bw_count)
    bbr_startup_done(s, UDX_BBR_EXIT_PLATEAU);
}

// BBRv2's loss signal (bbr2_check_loss_too_high_in_startup), on every ACK
// that reports losses: at least 8 loss events in the round and a loss rate
// above 2%. Random loss on a path that is not full yet must not stop the
// ramp (BBRv1 would then need many probe cycles to grow), so the 2% counts
// only once the round brought no growth; a queue too shallow for the delay
// signal overflows under Startup's 2.89x gain with a much higher rate
// (most of the excess is lost), which ends Startup at once.
static void
bbr_check_startup_loss (udx_stream_t *s, udx_rate_sample_t *rs) {
  udx_bbr_t *b = &s->bbr;
  if (b->full_bw_reached || b->state != UDX_BBR_STATE_STARTUP || rs->losses == 0)
    return;
  if (b->round_loss_events < BBR_LOSS_EVENTS)
    return;
  double rate = (double) b->round_lost / (double) ((uint64_t) b->round_delivered + b->round_lost);
  bool grew = bbr_bw_bytes(s) >= b->full_bw * bbr_full_bw_thresh;
  if (rate > bbr_loss_overflow || (rate > bbr_loss_thresh && !grew))
    bbr_startup_done(s, UDX_BBR_EXIT_LOSS);
}

// Per-round counters of the Startup signals; a new round starts them over.
static void
bbr_round_counters (udx_stream_t *s, udx_rate_sample_t *rs) {
  udx_bbr_t *b = &s->bbr;
  if (b->round_start) {
    b->last_round_min_rtt = b->round_min_rtt;
    b->round_min_rtt = UINT32_MAX;
    b->round_rtt_samples = 0;
    b->round_delivered = 0;
    b->round_lost = 0;
    b->round_loss_events = 0;
  }
  b->round_delivered += rs->acked_sacked;
  b->round_lost += rs->losses;
  if (rs->losses)
    b->round_loss_events++;
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

// Careful resume (draft-ietf-tsvwg-careful-resume), on BBR. A stream
// seeded with a remembered rate and RTT starts as any other (the initial
// window: Reconnaissance). Its first RTT sample decides: outside [rtt/2,
// 2 rtt] the path is not the one remembered and nothing changes; inside,
// while still in Startup, it jumps to half the remembered rate, paced (the
// bandwidth estimate is set so Startup's gain gives that rate) with the
// window of half the remembered BDP. Startup then goes on from what the
// jump delivers. The jump is validated once every packet sent through it
// is acked; a loss (or RTO) before that is a safe retreat: the window
// becomes half of what was delivered since the jump, the estimate what
// this ACK measured, and Startup ends (no second ramp over a path that
// just dropped packets).
void
udx__bbr_resume (udx_stream_t *s, uint64_t rate, uint32_t rtt_us) {
  udx_bbr_t *b = &s->bbr;
  if (rate == 0 || rtt_us == 0 || s->delivered > 0 || b->full_bw_reached) {
    b->cr_phase = UDX_CR_NONE;
    return;
  }
  double payload = (double) udx__max_payload(s);
  b->cr_bw = (double) rate / (double) UDX_US_PER_S * (payload + UDX_HEADER_SIZE) / payload;
  b->cr_rtt_us = rtt_us;
  b->cr_phase = UDX_CR_RECON;
}

static void
bbr_retreat (udx_stream_t *s, udx_rate_sample_t *rs) {
  udx_bbr_t *b = &s->bbr;
  uint64_t got = s->delivered - b->cr_start;
  uint32_t cwnd = (uint32_t) udx__min_u64(got / 2, b->cr_jump);
  s->cwnd = udx__max_u32(cwnd, bbr_cwnd_min_target);
  b->prior_cwnd = s->cwnd; // leaving recovery must not restore the jump
  double bw = 0;
  if (rs && rs->delivered > 0 && rs->interval_us > 0)
    bw = (double) rs->delivered_bytes / (double) rs->interval_us;
  udx__winfilter_reset(&b->bw, b->rtt_count, bw);
  s->pacing_rate = bbr_rate_bytes_per_s(s, bw > 0 ? bw / bbr_pkt_bytes(s) : (double) s->cwnd / udx__max_u32(b->cr_rtt_us, 1), 1.0);
  if (!b->full_bw_reached)
    bbr_startup_done(s, UDX_BBR_EXIT_LOSS);
  b->cr_phase = UDX_CR_RETREATED;
}

static void
bbr_careful_resume (udx_stream_t *s, udx_rate_sample_t *rs) {
  udx_bbr_t *b = &s->bbr;
  if (b->cr_phase == UDX_CR_RECON) {
    if (rs->rtt_us < 0)
      return;
    uint64_t rtt = (uint64_t) rs->rtt_us;
    if (b->full_bw_reached || rs->losses > 0 || rtt * 2 < b->cr_rtt_us || rtt > 2ull * b->cr_rtt_us) {
      b->cr_phase = UDX_CR_SKIPPED;
      return;
    }
    double jump_bw = b->cr_bw / 2;
    double jump = jump_bw * (double) b->cr_rtt_us / bbr_pkt_bytes(s);
    // at most 2^20 packets (1.4 GB in flight), whatever was remembered
    b->cr_jump = jump > (double) (1u << 20) ? 1u << 20 : (uint32_t) jump;
    udx__winfilter_reset(&b->bw, b->rtt_count, jump_bw / bbr_high_gain);
    if (s->cwnd < b->cr_jump)
      s->cwnd = b->cr_jump;
    s->pacing_rate = bbr_rate_bytes_per_s(s, jump_bw / bbr_pkt_bytes(s), 1.0);
    // the RTT is known now: BBR's first-RTT pacing (cwnd / srtt at high
    // gain) must not re-pace the jump at 2.89x (a burst at 1.3x the link)
    b->has_seen_rtt = true;
    b->cr_start = s->delivered;
    b->cr_mark = s->delivered + s->inflight + b->cr_jump;
    b->cr_phase = UDX_CR_UNVALIDATED;
    return;
  }
  if (b->cr_phase == UDX_CR_UNVALIDATED) {
    if (rs->losses > 0)
      bbr_retreat(s, rs);
    else if (s->delivered >= b->cr_mark)
      b->cr_phase = UDX_CR_VALIDATED;
  }
}

// On a shared path the path window (path.c) bounds what all members have in
// flight together. While it has room and nobody waits for a turn, a member
// in ProbeBW paces at no less than the path's delivery rate: when others go
// idle (their transfers end) it takes their room within a round trip, where
// its own estimate grows 25% per ProbeBW cycle (16 streams, 64 MB: the last
// ones took 140 ms over their due). A full window keeps each to its own
// estimate (always the floor, 100 streams over loopback lost 3700 packets
// in bursts and ended at Jain 0.92).
static double
bbr_send_bw (const udx_stream_t *s, double bw) {
  const udx_path_t *p = s->path;
  if (p == NULL || !udx__path_shared(p) || s->bbr.state != UDX_BBR_STATE_PROBE_BW)
    return bw;
  if (p->wait_head != NULL || (uint64_t) p->inflight + p->granted >= p->cwnd)
    return bw;
  // at most twice its own estimate: slow start's pace, not a burst
  double path_bw = udx__winfilter_get(&p->bw); // packets/us
  if (path_bw > 2 * bw)
    path_bw = 2 * bw;
  return path_bw > bw ? path_bw : bw;
}

void
udx__bbr_main (udx_stream_t *s, udx_rate_sample_t *rs) {
  if (s->bbr.cr_phase == UDX_CR_RECON || s->bbr.cr_phase == UDX_CR_UNVALIDATED)
    bbr_careful_resume(s, rs);
  bbr_update_bw(s, rs);
  bbr_update_ack_aggregation(s, rs);
  if (s->bbr.state == UDX_BBR_STATE_PROBE_BW && bbr_is_next_cycle_phase(s, rs)) {
    bbr_advance_cycle_phase(s);
  }
  bbr_check_full_bw_reached(s, rs);
  bbr_round_counters(s, rs);
  bbr_check_startup_loss(s, rs);
  bbr_check_delay_increase(s, rs);
  bbr_check_drain(s);
  bbr_update_min_rtt(s, rs);
  bbr_update_gains(s);

  double bw = bbr_send_bw(s, udx__bbr_bw(s));
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
  b->round_min_rtt = UINT32_MAX;
  b->last_round_min_rtt = UINT32_MAX;
  b->round_rtt_samples = 0;
  b->round_delivered = 0;
  b->round_lost = 0;
  b->round_loss_events = 0;
  b->startup_exit = UDX_BBR_EXIT_NONE;
  b->cr_phase = UDX_CR_NONE;
}

// BBR 4.2.4: an RTO is treated as a dummy loss sample; cwnd is not collapsed.
void
udx__bbr_on_rto (udx_stream_t *s) {
  if (s->bbr.cr_phase == UDX_CR_UNVALIDATED)
    bbr_retreat(s, NULL);
  s->bbr.prev_ca_state = UDX_CA_LOSS;
  s->bbr.full_bw = 0;
  s->bbr.round_start = true;
}
