#ifndef UDX_STREAM_H
#define UDX_STREAM_H

// The stream engine (sans-IO). A stream is a state machine: datagrams and the
// current time (microseconds) go in through udx__stream_recv/_timer/_flush;
// datagrams come out through host->send, and udx__stream_deadline says when
// the host must call udx__stream_timer next. The engine never reads a clock,
// never touches a socket and never calls libuv: it is built as its own
// library (udx_engine) where libuv's header cannot be included.
//
// Field names follow TCP where they mean the same (snd_una, snd_nxt, rcv_nxt).

#include <sys/socket.h>
#include <sys/uio.h>

#include "bbr.h"
#include "bufq.h"
#include "internal.h"
#include "winfilter.h"

typedef struct udx_pkt_s udx_pkt_t;

// Where datagrams of a stream go. The engine reads id and ipv6; the host owns
// socket and addr. Slot 0/1: current and previous (during change_remote).
typedef struct udx_remote_s {
  void *socket;
  struct sockaddr_storage addr;
  uint32_t id;
  bool ipv6; // IPv6 header overhead (also for v4-mapped on a v6 socket)
  bool valid;
} udx_remote_t;

typedef struct udx_host_s {
  // Hands one datagram to the network. iov[0] (the header) is only valid
  // during the call. With `queued`, the other iovecs point into the stream's
  // send queue (or static memory) and stay valid while s->tx_pins > 0: the
  // host may keep them instead of copying, counting each datagram it keeps
  // in s->tx_pins and calling udx__stream_unpin once it is sent or dropped.
  // Without `queued` the host copies everything before returning.
  void (*send)(udx_stream_t *s, const udx_remote_t *to, const struct iovec *iov, int iovcnt, size_t len, bool queued);
  // The stream closed (s->close_status). The host delivers on_close and later
  // on_finalize, outside the engine call.
  void (*closed)(udx_stream_t *s);
  // Something was queued outside packet processing: call udx__stream_flush soon.
  void (*wake)(udx_stream_t *s);
  // A deferred on_remote_changed must be delivered (host calls it later).
  void (*remote_changed)(udx_stream_t *s);
} udx_host_t;

// One sent packet, indexed by seq & (cap - 1) in the outgoing ring.
#define UDX_PKT_USED          0x01
#define UDX_PKT_INFLIGHT      0x02 // in the transmit-order list, counted in inflight
#define UDX_PKT_LOST          0x04 // waiting for retransmission
#define UDX_PKT_SACKED        0x08 // delivered out of order
#define UDX_PKT_RETRANSMITTED 0x10 // ever retransmitted (Karn)
#define UDX_PKT_APP_LIMITED   0x20
#define UDX_PKT_PROBE         0x40 // MTU probe (padded)
#define UDX_PKT_IN_RTXQ       0x80

struct udx_pkt_s {
  uint64_t off;           // stream offset of the payload
  uint64_t time_sent;     // us, last transmission
  uint64_t first_sent_ts; // rate sampling (RFC draft-cheng-iccrg-delivery-rate)
  uint64_t delivered_ts;
  uint64_t delivered;
  uint64_t delivered_bytes;
  uint64_t tx_order; // transmission counter: orders sends with equal timestamps
  uint32_t seq;
  uint32_t tx_prev; // transmit-order list, by seq
  uint32_t tx_next;
  uint16_t len;
  uint8_t type; // DATA / END
  uint8_t flags;
  uint8_t padding; // MTU probe padding
  uint8_t remote;  // remote slot at first transmission
  uint8_t transmits;
  uint8_t rto_timeouts;
};

// An out-of-order packet waiting for the gap before it.
typedef struct udx_ooo_s {
  uint8_t *buf; // pool slot, NULL if empty
  uint32_t seq;
  uint16_t len;
  uint8_t type;
} udx_ooo_t;

typedef struct udx_range_s {
  uint32_t start;
  uint32_t end;
} udx_range_t;

// Rate sample for one ACK (delivery-rate estimation).
typedef struct udx_rate_sample_s {
  uint64_t prior_ts;
  uint64_t prior_delivered;
  uint64_t prior_delivered_bytes;
  uint64_t prior_tx_order;
  int64_t delivered;       // packets, -1 if invalid
  int64_t delivered_bytes; // datagram bytes, -1 if invalid
  int64_t interval_us;     // -1 if invalid
  int64_t rtt_us;          // -1 if none
  uint32_t acked_sacked;
  uint32_t losses;
  bool has_prior;
  bool is_app_limited;
  bool is_retrans;
} udx_rate_sample_t;

enum { UDX_CA_OPEN = 0,
       UDX_CA_RECOVERY = 1,
       UDX_CA_LOSS = 2 };

enum { UDX_MTU_STATE_BASE = 1,
       UDX_MTU_STATE_SEARCH = 2,
       UDX_MTU_STATE_COMPLETE = 4 };

// Stream status bits.
#define UDX_S_CONNECTED     0x0001
#define UDX_S_ENDING        0x0002 // write_end called
#define UDX_S_END_SENT      0x0004 // our END packetised
#define UDX_S_ENDED         0x0008 // our END acked
#define UDX_S_ENDING_REMOTE 0x0010 // remote END received (maybe out of order)
#define UDX_S_ENDED_REMOTE  0x0020 // rcv_nxt passed the remote END
#define UDX_S_EOF_READ      0x0040 // the reader saw the end (UV_EOF at the API)
#define UDX_S_CLOSED        0x0080
#define UDX_S_RELAYED       0x0100
#define UDX_S_HWM           0x0200 // a write returned 0; on_drain owed
#define UDX_S_FLUSH         0x0400 // on_flush owed
#define UDX_S_ACK_NEEDED    0x0800 // an ACK is owed (pre-connect data, batch policy)
#define UDX_S_EOF_SIGNALED  0x1000
#define UDX_S_CHANGING      0x2000  // change_remote in progress
#define UDX_S_HB_ANSWERED   0x4000  // the peer answers HEARTBEATs
#define UDX_S_HB_OUT        0x8000  // a keepalive HEARTBEAT is outstanding
#define UDX_S_CLOSING       0x10000 // graceful close: the reader is gone, close_at armed

// The engine's part of a stream. A host embeds it (the io layer as the first
// member of udx_io_stream_t, io.h) and keeps its own state beside it.
struct udx_stream_s {
  // --- identity and host glue
  void *data;
  const udx_host_t *host;
  udx_pool_t *pool;
  udx_stream_callbacks_t cb;
  uint32_t local_id;
  uint32_t status;
  int close_status;
  udx_remote_t remote[2];
  uint8_t cur_remote;
  int in_callback; // > 0 while a user callback runs

  uint64_t now; // us, time of the current engine call

  // --- send side
  uint32_t snd_una;
  uint32_t snd_nxt;
  uint32_t snd_wl1;
  uint32_t snd_wl2;
  uint32_t send_rwnd;     // bytes, peer's window
  udx_bufq_t sndq;        // bytes written, not yet acked
  bool filling;           // inside udx__stream_write_fill's fill, or a run begun: no other write
  udx_stream_run_t *run;  // a run begun (udx__stream_write_begin), not yet committed
  uint64_t snd_pkt_off;   // next byte to packetise
  uint64_t end_off;       // write_end position
  uint64_t bytes_acked;   // total bytes delivered (cumulative or sacked)
  uint64_t flush_off;     // on_flush owed when everything below this is acked
  uint64_t snd_acked_off; // bytes below are acked; released from sndq when tx_pins is 0
  uint32_t tx_pins;       // datagrams the host holds that point into sndq

  udx_pkt_t *pkts; // outgoing ring indexed by seq
  uint32_t pkts_cap;
  uint32_t tx_head; // oldest transmission (seq); valid if inflight > 0
  uint32_t tx_tail;
  uint32_t inflight;       // packets in the transmit-order list
  uint64_t inflight_bytes; // their datagram bytes
  uint32_t *rtxq;          // FIFO of seqs to retransmit
  uint32_t rtxq_cap;
  uint32_t rtxq_head;
  uint32_t rtxq_len;
  uint32_t lost_pending; // packets flagged LOST
  uint32_t sacked;       // packets SACKed above snd_una

  // RTT (RFC 6298), microseconds
  uint32_t srtt;
  uint32_t rttvar;
  uint32_t rto;
  udx_winfilter_t rtt_min; // RACK min RTT over 300 s

  // timers (absolute us, UDX_NEVER if not armed)
  uint64_t rto_at;
  uint64_t tlp_at;
  uint64_t reo_at;
  uint64_t zwp_at;
  uint64_t keepalive_at;
  uint64_t pace_at;
  uint64_t trace_at;
  uint64_t close_at;    // graceful close gives up (DESTROY) here
  uint32_t rto_backoff; // consecutive RTO firings (exponential backoff)
  uint64_t progress_at; // last forward progress (for the give-up timeout)
  uint64_t last_rx;     // last datagram from the peer
  uint32_t timeout_ms;  // give-up time
  uint32_t keepalive_ms;
  uint32_t zwp_backoff;

  // loss recovery, RACK-TLP (RFC 8985)
  uint8_t ca_state;
  uint32_t high_seq;
  uint64_t rack_xmit_ts;
  uint64_t rack_xmit_order; // the most recently sent delivered packet (RFC 8985 RACK.xmit_ts/end_seq)
  uint32_t rack_end_seq;
  uint32_t rack_rtt;
  uint32_t rack_fack;
  bool reordering_seen;
  bool tlp_in_flight;
  bool tlp_is_retrans;
  bool tlp_permitted;
  uint32_t tlp_end_seq;

  // delivery rate
  uint64_t tx_count; // transmissions so far (tx_order source)
  uint64_t delivered;
  uint64_t delivered_bytes; // datagram bytes (header, padding, payload), late reports left out
  uint64_t delivered_ts;
  uint64_t first_sent_ts;
  uint64_t app_limited; // 0 = not app limited, else delivered mark
  uint64_t lost;
  uint64_t lost_sampled;     // `lost` at the last rate sample
  uint64_t delivered_max_ts; // latest send time of a delivered packet
  uint64_t rate_ref_ts;      // delivered_max_ts before the current ACK (late reports)

  // congestion control (BBR) and pacing
  uint32_t cwnd;
  uint32_t ssthresh;
  udx_bbr_t bbr;
  uint64_t pacing_rate; // bytes/s
  int64_t tokens;       // bytes (may go negative: debt)
  uint64_t tokens_at;   // last refill
  uint32_t pacing_burst_us;
  // Packets an ACK that delivers any covers (x16, moving average): about 1
  // for a peer that acks every packet (the libudx family), more for peers
  // that coalesce ACKs (ludx).
  uint32_t ack_span16;
  uint32_t ack_span_samples;

  // MTU search (RFC 8899 style, in band)
  uint16_t mtu;
  uint16_t mtu_max;
  int mtu_link; // the link MTU at connect (0 or less: unknown)
  uint16_t mtu_probe_size;
  uint8_t mtu_state;
  uint8_t mtu_probe_count;
  bool mtu_probe_wanted;
  bool mtu_stepping;   // a jump was lost: steps of UDX_MTU_STEP
  uint32_t change_seq; // change_remote completes when acked past this

  // --- receive side
  uint32_t rcv_nxt;
  uint32_t remote_end_seq;
  udx_bufq_t rdq; // in-order bytes for the reader
  udx_ooo_t *ooo; // ring indexed by seq
  uint32_t ooo_cap;
  uint32_t ooo_count;
  uint64_t ooo_bytes;
  udx_range_t *ranges; // received ranges above rcv_nxt, sorted
  uint32_t nranges;
  uint32_t ranges_cap;
  uint32_t recv_rwnd_max;
  uint64_t read_limit;   // 0 = unlimited
  uint64_t read_backlog; // taken out of rdq by the reader, not yet consumed by it
  uint32_t last_rwnd;    // last advertised
  int ack_policy;
  uint32_t acks_owed; // in-order packets received since the last ACK

  // --- relay
  udx_stream_t *relay_to;
  udx_stream_t *relay_from; // streams relaying into this one (list by relay_next)
  udx_stream_t *relay_next;

  // --- tracing
  udx_stream_trace_cb trace_cb;
  uint32_t trace_ms;

  udx_stream_stats_t stats;

  struct udx_policy_s *policy; // limiters (policy.c), NULL if none

  // --- the shared window towards this stream's address (path.c)
  struct udx_path_s *path;
  udx_stream_t *path_next; // in the path's wait queue
  uint8_t path_state;      // UDX_PATH_*
  uint8_t path_quota;      // packets left in a granted turn
  bool path_blocked;       // the path window held it back this send round
};

// --- engine API (stream.c, recv.c, send.c, ack.c)

void
udx__stream_engine_init (udx_stream_t *s, uint32_t local_id, const udx_host_t *host, udx_pool_t *pool, uint64_t now);

void
udx__stream_engine_free (udx_stream_t *s);

// Connects to `to` (socket, addr, id, ipv6 filled by the host); link_mtu is
// the interface MTU towards the peer (0 or -1 unknown).
void
udx__stream_engine_connect (udx_stream_t *s, const udx_remote_t *to, int link_mtu, uint64_t now);

// Switches to `to` in the other remote slot; see udx_stream_change_remote.
void
udx__stream_engine_change_remote (udx_stream_t *s, const udx_remote_t *to, int link_mtu, uint64_t now);

// One datagram for this stream (header included, already demultiplexed).
void
udx__stream_recv (udx_stream_t *s, const uint8_t *buf, size_t len, uint64_t now);

// Out-of-order slots: what a closing stream keeps of them is their place
// (seq, type), never their bytes (recv.c).
void
udx__ooo_drop_bytes (udx_stream_t *s);

void
udx__ooo_free (udx_stream_t *s);

// Runs the timers that are due.
void
udx__stream_timer (udx_stream_t *s, uint64_t now);

// Sends what the windows and pacing allow (after writes, at batch end).
void
udx__stream_flush (udx_stream_t *s, uint64_t now);

// When udx__stream_timer must run next (UDX_NEVER if nothing is armed).
uint64_t
udx__stream_deadline (const udx_stream_t *s);

int
udx__stream_write (udx_stream_t *s, const void *buf, size_t len, bool end, uint64_t now);

// Queues len bytes that fill writes in place, in the send queue's own
// memory; a negative return from fill queues nothing and is returned.
int
udx__stream_write_fill (udx_stream_t *s, size_t len, udx_stream_fill_cb fill, void *ctx, uint64_t now);

// A run of len bytes made later, off the loop thread too, in a block of
// its own (see udx_stream_write_begin). The stream may be closed or freed
// before the commit: the run keeps its block.
struct udx_stream_run_s {
  udx_stream_t *stream; // NULL once the stream was freed
  udx_bufq_ext_t *block;
  size_t len;
};

int
udx__stream_write_begin (udx_stream_t *s, size_t len, udx_stream_run_t **run, uint8_t **buf, uint64_t now);

// keep false: nothing is queued. Frees the run. Returns as a write, or
// UDX_ERR_NOTCONN when the stream was closed or freed meanwhile.
int
udx__stream_write_commit (udx_stream_run_t *run, bool keep, uint64_t now);

int
udx__stream_send_message (udx_stream_t *s, const void *buf, size_t len, uint64_t now);

// Abortive close: DESTROY if connected. Returns 1 if DESTROY was sent.
int
udx__stream_destroy (udx_stream_t *s, uint64_t now);

// A lingering stream whose socket closes: as destroy, but the close status
// is ECANCELED unless our END was acked (nothing of ours can be lost then).
int
udx__stream_cut (udx_stream_t *s, uint64_t now);

// Graceful close: END after the queued bytes, the reader's bytes dropped;
// closes (status 0) once both ENDs are through, else DESTROY and
// UDX_ERR_TIMEDOUT after timeout_ms. A second call can only shorten it.
int
udx__stream_shutdown (udx_stream_t *s, uint32_t timeout_ms, uint64_t now);

ssize_t
udx__stream_read (udx_stream_t *s, void *buf, size_t max, uint64_t now);

int
udx__stream_peek (udx_stream_t *s, const uint8_t **p, size_t *len);

void
udx__stream_consume (udx_stream_t *s, size_t n, uint64_t now);

// s forwards every datagram to dst's remote (s->relay_to = dst); dst keeps
// s in its relay_from list so its close ends s without a scan.
// UDX_ERR_INVAL if either is closed or s relays already.
int
udx__stream_relay_to (udx_stream_t *s, udx_stream_t *dst);

// A datagram for a relaying stream (the host forwards it to relay_to's
// remote): counts it, tracks its seq, closes on DESTROY. false if malformed
// (not to be forwarded).
bool
udx__stream_relay_recv (udx_stream_t *s, const uint8_t *buf, size_t len);

// Asks the user's on_firewall about a packet from an unknown source;
// nonzero: drop it (also when the stream closed in the callback).
int
udx__stream_firewall (udx_stream_t *s, void *socket, const struct sockaddr *from);

// udx_stream_flush: 1 if nothing is outstanding, 0 if on_flush is owed.
int
udx__stream_flush_request (udx_stream_t *s);

// Settings behind udx.h's setters (same meaning, UDX_ERR_* codes).
int
udx__stream_set_seq (udx_stream_t *s, uint32_t seq);

int
udx__stream_set_ack (udx_stream_t *s, uint32_t ack);

void
udx__stream_set_read_limit (udx_stream_t *s, uint64_t bytes);

void
udx__stream_set_read_backlog (udx_stream_t *s, uint64_t bytes);

void
udx__stream_set_rwnd_max (udx_stream_t *s, uint32_t bytes);

void
udx__stream_set_keepalive (udx_stream_t *s, uint32_t ms);

void
udx__stream_set_timeout (udx_stream_t *s, uint32_t ms);

void
udx__stream_set_trace (udx_stream_t *s, uint32_t interval_ms, udx_stream_trace_cb cb, uint64_t now);

int
udx__stream_set_ack_policy (udx_stream_t *s, int policy);

// The host keeps one more datagram pointing into the send queue (see
// udx_host_t.send; udx__stream_unpin lets go of it).
void
udx__stream_pin (udx_stream_t *s);

// s is closing: the streams relaying into it close too (status 0).
void
udx__stream_end_relays (udx_stream_t *s);

// Closes the stream now with status (no packet is sent).
void
udx__stream_close (udx_stream_t *s, int status);

void
udx__stream_refresh_stats (udx_stream_t *s);

// The host is done with one datagram it kept (see udx_host_t.send).
void
udx__stream_unpin (udx_stream_t *s);

// --- internal helpers shared between engine files

static inline uint32_t
udx__max_payload (const udx_stream_t *s) {
  return (uint32_t) s->mtu - (s->remote[s->cur_remote].ipv6 ? UDX_IPV6_OVERHEAD : UDX_IPV4_OVERHEAD);
}

static inline udx_pkt_t *
udx__pkt (udx_stream_t *s, uint32_t seq) {
  if (s->pkts_cap == 0)
    return NULL;
  udx_pkt_t *p = &s->pkts[seq & (s->pkts_cap - 1)];
  return ((p->flags & UDX_PKT_USED) && p->seq == seq) ? p : NULL;
}

// Time never goes backwards inside the engine, whatever the callers pass
// (a user callback may run an API call with a fresher clock mid-processing).
static inline void
udx__stream_clock (udx_stream_t *s, uint64_t now) {
  if (now > s->now)
    s->now = now;
}

static inline bool
udx__stream_dead (const udx_stream_t *s) {
  return (s->status & UDX_S_CLOSED) != 0;
}

// Asks the host to flush a live stream soon (limiters and the path window
// wake streams other than the one the engine is running).
static inline void
udx__stream_wake (udx_stream_t *s) {
  if (!udx__stream_dead(s) && s->host && s->host->wake)
    s->host->wake(s);
}

uint32_t
udx__recv_rwnd (const udx_stream_t *s);

void
udx__send_ack (udx_stream_t *s);

void
udx__send_heartbeat (udx_stream_t *s);

void
udx__send_packets (udx_stream_t *s);

void
udx__send_emit (udx_stream_t *s, uint8_t remote, const uint8_t *hdr, size_t hdr_len, const struct iovec *iov, int iovcnt, bool queued);

void
udx__retransmit_queue_push (udx_stream_t *s, udx_pkt_t *p);

void
udx__tx_list_remove (udx_stream_t *s, udx_pkt_t *p);

void
udx__tx_list_append (udx_stream_t *s, udx_pkt_t *p);

void
udx__process_ack (udx_stream_t *s, const void *wire_pkt, bool data_in_flight);

void
udx__arm_timers_after_send (udx_stream_t *s, bool arm_tlp);

void
udx__rearm_rto (udx_stream_t *s);

bool
udx__schedule_tlp (udx_stream_t *s);

void
udx__schedule_tlp_stalled (udx_stream_t *s);

bool
udx__tlp_send (udx_stream_t *s);

uint64_t
udx__rack_detect_loss (udx_stream_t *s);

void
udx__on_rto (udx_stream_t *s);

void
udx__on_tlp (udx_stream_t *s);

void
udx__mtu_on_probe_acked (udx_stream_t *s, udx_pkt_t *p);

void
udx__mtu_on_probe_lost (udx_stream_t *s, udx_pkt_t *p);

void
udx__mtu_on_ack (udx_stream_t *s);

int
udx__mtu_padding (udx_stream_t *s, size_t udx_len);

void
udx__mtu_reset (udx_stream_t *s, int link_mtu);

// Largest UDP payload sent to a peer that acks every packet: libudx reads
// each datagram into a 2048-byte buffer (and so does ludx's transmit ring).
#define UDX_PEER_DGRAM_MAX 2048
// ACKs seen before a peer counts as acking every packet.
#define UDX_ACK_EACH_SAMPLES 64

// Whether the peer acks every packet (the libudx family), from its ACKs.
bool
udx__acks_each (const udx_stream_t *s);

// A packet of type `type` just processed is a bare ACK from a peer that acks
// every packet, and the stream still waits for ACKs of data in flight.
bool
udx__stream_ack_pausable (const udx_stream_t *s, uint8_t type);

// Past 1500 on a link that allows it, for a peer that acks every packet.
void
udx__mtu_widen (udx_stream_t *s);

void
udx__rate_on_send (udx_stream_t *s, udx_pkt_t *p);

void
udx__rate_on_delivered (udx_stream_t *s, udx_pkt_t *p, udx_rate_sample_t *rs);

void
udx__rate_generate (udx_stream_t *s, uint32_t delivered, uint32_t lost, udx_rate_sample_t *rs);

void
udx__rate_check_app_limited (udx_stream_t *s);

void
udx__pacing_refill (udx_stream_t *s);

void
udx__pacing_on_send (udx_stream_t *s, size_t bytes);

void
udx__stream_check_close (udx_stream_t *s);

void
udx__stream_maybe_window_update (udx_stream_t *s);

// Calls a user callback; returns false if the stream died in it.
#define UDX_CALLBACK(s, call) \
  ((s)->in_callback++, (call), (s)->in_callback--, !udx__stream_dead(s))

#endif
