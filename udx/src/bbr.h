#ifndef UDX_BBR_H
#define UDX_BBR_H

// BBR v1 as libudx runs it (udx_bbr.c), with time in microseconds: bandwidth
// in packets per microsecond, windows in packets.

#include <stdbool.h>
#include <stdint.h>

#include "winfilter.h"

typedef struct udx_stream_s udx_stream_t;
typedef struct udx_rate_sample_s udx_rate_sample_t;

typedef struct udx_bbr_s {
  uint8_t state; // UDX_BBR_STATE_*
  uint8_t prev_ca_state;
  uint8_t cycle_index;
  bool round_start;
  bool idle_restart;
  bool full_bw_reached;
  bool has_seen_rtt;
  bool probe_rtt_round_done;
  uint32_t full_bw_count;
  double full_bw;     // datagram bytes/us
  udx_winfilter_t bw; // max filter over rounds, datagram bytes/us
  uint64_t rtt_count;
  uint64_t next_rtt_delivered;
  uint32_t min_rtt_us; // UINT32_MAX while unknown
  uint64_t min_rtt_stamp;
  uint64_t probe_rtt_done_time; // 0 = not set
  uint32_t prior_cwnd;
  uint64_t cycle_ts;
  double pacing_gain;
  double cwnd_gain;
  uint64_t ack_epoch_start;
  uint64_t ack_epoch_acked;
  uint8_t extra_acked_win_rtts;
  uint8_t extra_acked_win_index;
  uint32_t extra_acked[2];
  uint64_t extra_acked_win_start; // us: when the current window began
  // Startup exit signals (RFC 9406 delay increase, BBRv2 loss rate)
  uint32_t round_min_rtt; // us, this round (UINT32_MAX: no sample yet)
  uint32_t last_round_min_rtt;
  uint32_t round_rtt_samples;
  uint32_t round_delivered; // packets delivered / lost / loss events this round
  uint32_t round_lost;
  uint32_t round_loss_events;
  uint8_t startup_exit; // UDX_BBR_EXIT_*: why Startup ended
  // Careful resume (bbr.c): a remembered capacity, used once validated
  uint8_t cr_phase; // UDX_CR_*
  uint32_t cr_rtt_us;
  double cr_bw;      // datagram bytes/us remembered
  uint64_t cr_mark;  // delivered count that validates the jump
  uint64_t cr_start; // delivered count at the jump
  uint32_t cr_jump;  // packets: the jump's window
} udx_bbr_t;

// Careful resume phases (draft-ietf-tsvwg-careful-resume).
#define UDX_CR_NONE        0 // nothing remembered: an ordinary Startup
#define UDX_CR_RECON       1 // remembered; waiting for the first RTT sample
#define UDX_CR_UNVALIDATED 2 // jumped; the jump's packets are not acked yet
#define UDX_CR_VALIDATED   3 // the jump's packets were acked without loss
#define UDX_CR_RETREATED   4 // a loss during the jump: back to what was delivered
#define UDX_CR_SKIPPED     5 // the RTT did not match (another path?), or too late

// Seeds a stream that has not sent yet with a remembered delivery rate
// (payload bytes/s, as stats.bbr_bw) and min RTT (us): it jumps to half of
// that rate once its first RTT sample is within [rtt/2, 2 rtt].
void
udx__bbr_resume (udx_stream_t *s, uint64_t rate, uint32_t rtt_us);

#define UDX_BBR_EXIT_NONE    0
#define UDX_BBR_EXIT_PLATEAU 1 // bandwidth grew < 25% for 3 rounds (BBR)
#define UDX_BBR_EXIT_DELAY   2 // the round's min RTT rose (RFC 9406)
#define UDX_BBR_EXIT_LOSS    3 // loss rate > 2% in a round without growth (BBRv2)

void
udx__bbr_init (udx_stream_t *s);

void
udx__bbr_main (udx_stream_t *s, udx_rate_sample_t *rs);

void
udx__bbr_on_rto (udx_stream_t *s);

void
udx__bbr_on_transmit_start (udx_stream_t *s);

void
udx__bbr_save_cwnd (udx_stream_t *s);

// Windowed max delivery rate, in full-size packets/us.
double
udx__bbr_bw (const udx_stream_t *s);

#endif
