#ifndef UDX_H
#define UDX_H

// UDX: reliable, congestion-controlled streams over UDP, wire-compatible with
// libudx / udx-native 1.21. Objects are opaque; the library allocates them and
// releases them itself after the last callback (on_finalize for streams,
// on_close for sockets, the udx_close callback for the instance).
//
// Every function returns 0 (or a documented positive value) on success and a
// negative libuv error code (UV_EINVAL, UV_EBUSY, ...) on failure.
//
// Callbacks run inside the library's own processing. From inside any callback
// a C user may call udx_stream_write/_write_end/_read/_read_peek/_read_consume/
// _send/_destroy and the setters: writes are queued and sent at the end of the
// current processing step; destroy marks the stream and its on_close and
// on_finalize are delivered later, never while the library still uses it.

#ifdef __cplusplus
extern "C" {
#endif

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

// The sans-IO engine (udx_engine) is built with UDX_ENGINE_NO_UV and sees
// these declarations without libuv; everyone else gets <uv.h> as before.
#ifdef UDX_ENGINE_NO_UV
typedef struct uv_loop_s uv_loop_t;
#else
#include <uv.h>
#endif

#define UDX_HEADER_SIZE 20
#define UDX_MTU_BASE    1200
#define UDX_MTU_MAX     1500

// Header type flags (byte 2 of every UDX datagram).
#define UDX_HEADER_DATA      0x01
#define UDX_HEADER_END       0x02
#define UDX_HEADER_SACK      0x04
#define UDX_HEADER_MESSAGE   0x08
#define UDX_HEADER_DESTROY   0x10
#define UDX_HEADER_HEARTBEAT 0x20

#define UDX_BBR_STATE_STARTUP   0
#define UDX_BBR_STATE_DRAIN     1
#define UDX_BBR_STATE_PROBE_BW  2
#define UDX_BBR_STATE_PROBE_RTT 3

// udx_socket_bind flags
#define UDX_SOCKET_IPV6ONLY  0x01
#define UDX_SOCKET_REUSEADDR 0x02

typedef struct udx_s udx_t;
typedef struct udx_socket_s udx_socket_t;
typedef struct udx_stream_s udx_stream_t;

// ---------------------------------------------------------------------------
// Statistics. Plain versioned structs the library keeps current: read the
// fields at any time without a call (FFI-friendly). New fields are only ever
// appended, and `version` is bumped when they are.

#define UDX_SOCKET_STATS_VERSION 5

typedef struct udx_socket_stats_s {
  uint32_t version;
  uint32_t _reserved;
  uint64_t bytes_rx;
  uint64_t bytes_tx;
  uint64_t packets_rx;          // datagrams received
  uint64_t packets_tx;          // datagrams handed to the kernel
  uint64_t malformed;           // UDX-looking datagrams dropped as malformed
  uint64_t raw_rx;              // non-UDX datagrams delivered (or dropped if not receiving)
  uint64_t raw_dropped;         // non-UDX datagrams dropped (recv not started)
  uint64_t truncated;           // datagrams larger than the receive buffer
  uint64_t send_batches;        // sendmmsg calls (or equivalents)
  uint64_t recv_batches;        // recvmmsg calls (or equivalents)
  uint64_t send_eagain;         // times the socket was full (waited for writable)
  uint64_t send_err_netunreach; // ENETUNREACH
  uint64_t send_err_hostunreach;
  uint64_t send_err_connrefused;
  uint64_t send_err_perm;    // EPERM / EACCES (firewall)
  uint64_t send_err_msgsize; // EMSGSIZE (MTU probe too large for the path)
  uint64_t send_err_nobufs;
  uint64_t send_err_other;
  uint64_t fault_dropped; // datagrams dropped by fault injection
  // version 2
  uint64_t tx_segmented; // datagrams sent inside UDP_SEGMENT (GSO) messages
  uint64_t rx_coalesced; // datagrams received inside UDP_GRO messages
  // version 3
  uint64_t wrong_source; // datagrams for a connected stream from an address not its remote (dropped)
  // version 4
  uint64_t linger_records; // gracefully closed streams that left a linger record
  uint64_t linger_acks;    // ACKs sent for closed streams (a retransmitted END)
  uint64_t linger_evicted; // records dropped early: the socket held its maximum
  // version 5
  uint64_t ack_pauses; // reads paused after a batch of only ACKs (udx_socket_set_ack_pause)
} udx_socket_stats_t;

#define UDX_STREAM_STATS_VERSION 1

typedef struct udx_stream_stats_s {
  uint32_t version;
  uint32_t mtu; // current path MTU (IP packet size)
  uint32_t max_payload;
  uint32_t bbr_state; // UDX_BBR_STATE_*
  uint32_t rtt_us;    // smoothed RTT (srtt), 0 before the first sample
  uint32_t rttvar_us;
  uint32_t rto_us;
  uint32_t min_rtt_us;  // BBR min_rtt
  uint32_t cwnd;        // packets
  uint32_t inflight;    // packets
  uint32_t send_rwnd;   // bytes, the peer's advertised window
  uint32_t recv_rwnd;   // bytes, what we advertise
  uint64_t pacing_rate; // bytes/s
  uint64_t bbr_bw;      // bytes/s (max-filtered delivery rate)
  uint64_t bytes_sent;  // UDX datagram bytes (headers included), retransmits included
  uint64_t bytes_received;
  uint64_t packets_sent;
  uint64_t packets_received;
  uint64_t retransmits;
  uint64_t rto_count;
  uint64_t fast_recoveries;
  uint64_t tlp_count;
  uint64_t dropped_sacks; // SACK ranges rejected as invalid
  uint64_t malformed;     // packets for this stream dropped as malformed
  uint64_t dropped_rwnd;  // DATA dropped because the read-buffer limit was reached
  uint64_t write_queued;  // bytes written but not yet acked
  uint64_t read_buffered; // in-order bytes waiting for udx_stream_read
  uint64_t delivered;     // packets delivered to the peer (acked)
  uint64_t lost;          // packets declared lost
  uint64_t zwp_count;     // zero-window probes sent
} udx_stream_stats_t;

// ---------------------------------------------------------------------------
// Fault injection (testing and path emulation). Decisions come from a PRNG
// seeded with `seed`, so a run is reproducible. Applies to datagrams a socket
// sends and/or receives (direction), either for the whole instance or for one
// stream's datagrams.

#define UDX_FAULT_TX 0x01
#define UDX_FAULT_RX 0x02

typedef struct udx_fault_s {
  uint64_t seed;
  uint32_t direction;         // UDX_FAULT_TX | UDX_FAULT_RX
  double loss;                // probability a datagram is dropped
  double duplicate;           // probability a datagram is delivered twice
  double reorder;             // probability a datagram is held back ...
  uint32_t reorder_us;        // ... for this long (0 = until the next datagram)
  double corrupt;             // probability one random byte is flipped
  double send_error;          // TX only: probability the send fails with send_errno
  int send_errno;             // a UV_E* code, e.g. UV_ENETUNREACH
  uint64_t blackout_start_ms; // relative to when the fault was set
  uint64_t blackout_ms;       // drop everything in [start, start+len)
} udx_fault_t;

// ---------------------------------------------------------------------------
// Instance

typedef void (*udx_close_cb)(udx_t *udx);

int
udx_init (uv_loop_t *loop, udx_t **out);

void
udx_set_data (udx_t *udx, void *data);

void *
udx_get_data (udx_t *udx);

uv_loop_t *
udx_get_loop (udx_t *udx);

// UV_EBUSY while sockets or streams are alive. Otherwise the instance closes;
// cb (may be NULL) runs from the loop, after which the memory is released.
int
udx_close (udx_t *udx, udx_close_cb cb);

// Fault injection for every datagram of this instance (NULL clears).
int
udx_set_fault (udx_t *udx, const udx_fault_t *fault);

// ---------------------------------------------------------------------------
// Socket: one UDP fd. Many streams share it (looked up by id); datagrams that
// are not UDX (or for an unknown id) go to the recv callback.

typedef void (*udx_socket_close_cb)(udx_socket_t *socket);
typedef void (*udx_socket_recv_cb)(udx_socket_t *socket, const uint8_t *buf, size_t len, const struct sockaddr *from);

int
udx_socket_init (udx_t *udx, udx_socket_t **out, udx_socket_close_cb on_close, void *data);

void
udx_socket_set_data (udx_socket_t *socket, void *data);

void *
udx_socket_get_data (udx_socket_t *socket);

// IPv4, IPv6 (dual stack unless UDX_SOCKET_IPV6ONLY), port 0 = any. Sets TTL
// 64, SO_SNDBUF 212992, SO_RCVBUF 4 MiB (stepping down to what the system
// allows), don't-fragment; on Linux UDP_SEGMENT sends and UDP_GRO receives.
int
udx_socket_bind (udx_socket_t *socket, const struct sockaddr *addr, unsigned flags);

int
udx_socket_getsockname (udx_socket_t *socket, struct sockaddr_storage *out);

// Non-UDX datagrams are dropped (and counted) until recv_start.
int
udx_socket_recv_start (udx_socket_t *socket, udx_socket_recv_cb cb);

int
udx_socket_recv_stop (udx_socket_t *socket);

// A raw datagram: best effort, sent now (or when the socket is writable).
// ttl 0 = the socket's TTL, else 1..255. An IPv4 destination on an IPv6
// socket is mapped. UV_EINVAL on bad arguments; transient send errors are
// counted in the stats, not returned.
int
udx_socket_send (udx_socket_t *socket, const void *buf, size_t len, const struct sockaddr *to, int ttl);

int
udx_socket_set_ttl (udx_socket_t *socket, int ttl);

int
udx_socket_get_ttl (udx_socket_t *socket, int *ttl);

int
udx_socket_get_send_buffer_size (udx_socket_t *socket, int *size);

int
udx_socket_set_send_buffer_size (udx_socket_t *socket, int size);

int
udx_socket_get_recv_buffer_size (udx_socket_t *socket, int *size);

int
udx_socket_set_recv_buffer_size (udx_socket_t *socket, int size);

// UV_EBUSY while streams are connected to (or relaying through) the socket:
// destroy or finish them first. Otherwise on_close runs later from the loop,
// after which the memory is released.
int
udx_socket_close (udx_socket_t *socket);

const udx_socket_stats_t *
udx_socket_stats (udx_socket_t *socket);

// Fault injection for this socket only (NULL clears). Combined with udx_set_fault.
int
udx_socket_set_fault (udx_socket_t *socket, const udx_fault_t *fault);

// Linger: a stream on this socket that closes gracefully leaves a small
// record for 4 RTO or min_ms, whichever is longer, that ACKs a
// retransmitted END (at most 8 times). At most `max` records (the oldest
// goes first; at most 4096, else UV_EINVAL); max 0 turns it off. Defaults
// 64 and 2000 ms. Changing it forgets the records.
int
udx_socket_set_linger (udx_socket_t *socket, uint32_t max, uint32_t min_ms);

// ACK pause: after a readable event that brought only ACKs, each from a
// peer that acks every packet (the libudx family) to a stream still waiting
// on data in flight, the socket stops reading for `us` microseconds and then
// takes what came in one batch, instead of waking once per ACK. Any other
// datagram in a read (data, messages, raw datagrams), or a read cut short by
// its budget, means no pause after it. A pause that caught fewer than two
// datagrams skips the next 1, 2, 4 ... 64 chances. At most 1000 (else
// UV_EINVAL); 0 turns it off. Default 100. Linux only (a timerfd per socket
// that paused; elsewhere it never pauses). Counted in stats ack_pauses.
int
udx_socket_set_ack_pause (udx_socket_t *socket, uint32_t us);

// ---------------------------------------------------------------------------
// Stream

typedef struct udx_stream_callbacks_s {
  // In-order bytes (or EOF) became available. Edge-triggered: once when the
  // read buffer goes from empty to non-empty, and once when EOF is reached.
  // Read until udx_stream_read returns 0 or UV_EOF.
  void (*on_readable)(udx_stream_t *stream);
  // The write queue fell below the high-water mark after a write returned 0.
  void (*on_drain)(udx_stream_t *stream);
  // Everything written before udx_stream_flush was acked (once per flush).
  void (*on_flush)(udx_stream_t *stream);
  // Our END was acked.
  void (*on_finish)(udx_stream_t *stream);
  // A MESSAGE datagram arrived.
  void (*on_message)(udx_stream_t *stream, const uint8_t *buf, size_t len);
  // The stream closed: 0, UV_ETIMEDOUT, UV_ECONNRESET, UV_ECANCELED ...
  // After this no callback but on_finalize runs.
  void (*on_close)(udx_stream_t *stream, int status);
  // The last call; the stream's memory is released right after it returns.
  void (*on_finalize)(udx_stream_t *stream);
  // A packet for this stream came from an unknown source (another socket, or
  // before connect). Return nonzero to drop it. NULL = accept everything.
  // Once connected, packets from an address that is not the stream's remote
  // (nor its previous one after change_remote) are dropped before this is
  // asked, unless udx_stream_set_migration allowed them.
  int (*on_firewall)(udx_stream_t *stream, udx_socket_t *socket, const struct sockaddr *from);
  // udx_stream_change_remote completed.
  void (*on_remote_changed)(udx_stream_t *stream);
} udx_stream_callbacks_t;

// local_id must be unique within the udx instance (UV_EADDRINUSE otherwise).
// callbacks is copied; any member may be NULL.
int
udx_stream_init (udx_t *udx, udx_stream_t **out, uint32_t local_id, const udx_stream_callbacks_t *callbacks, void *data);

void
udx_stream_set_data (udx_stream_t *stream, void *data);

void *
udx_stream_get_data (udx_stream_t *stream);

uint32_t
udx_stream_get_id (udx_stream_t *stream);

uint32_t
udx_stream_get_remote_id (udx_stream_t *stream);

// UV_EISCONN if already connected, UV_EINVAL for port 0 / bad family / a
// closed stream. The socket must be bound.
int
udx_stream_connect (udx_stream_t *stream, udx_socket_t *socket, uint32_t remote_id, const struct sockaddr *addr);

int
udx_stream_getpeername (udx_stream_t *stream, struct sockaddr_storage *out);

// Copies len bytes into the send queue. Returns 1 below the high-water mark,
// 0 at or above it (bytes ARE queued; wait for on_drain before writing more),
// UV_EPIPE after write_end, UV_ENOTCONN on a closed stream. Writes before
// connect are queued and sent on connect.
int
udx_stream_write (udx_stream_t *stream, const void *buf, size_t len);

// Makes the next len bytes of the stream in place: fill(ctx, buf, len) must
// write all len bytes at buf, which is the send queue's own memory, so a
// large write (a sealed frame) needs no copy. Returns as udx_stream_write,
// or fill's own negative return, with nothing queued then. Runs of 256 KiB
// and more get a mapping of their own, returned to the system as the peer
// acks them; shorter ones that cross a 16 KiB chunk are made in a buffer
// and copied. fill must not call into this stream: a write or end from it
// gets UV_EBUSY; a close or destroy from it makes this return UV_ENOTCONN,
// with nothing queued. At most 2^40 bytes at once (UV_ENOMEM past that).
typedef int (*udx_stream_fill_cb)(void *ctx, uint8_t *buf, size_t len);

int
udx_stream_write_fill (udx_stream_t *stream, size_t len, udx_stream_fill_cb fill, void *ctx);

// A run of len bytes (> 0) to be made later, off the loop thread too: *buf
// is the send queue's own memory (a mapping of its own), written by the
// caller until udx_stream_write_commit, which only the loop thread calls.
// Meanwhile other writes and ends get UV_EBUSY. A close, destroy or free
// of the stream meanwhile leaves *buf mapped: the commit then frees it
// and returns UV_ENOTCONN. 0, UV_EBUSY, UV_EPIPE, UV_ENOTCONN, UV_ENOMEM.
typedef struct udx_stream_run_s udx_stream_run_t;

int
udx_stream_write_begin (udx_stream_t *stream, size_t len, udx_stream_run_t **run, uint8_t **buf);

// Queues the run's bytes (keep) or gives the run back (nothing queued);
// frees the run either way. Returns as udx_stream_write, UV_ENOTCONN when
// the stream was closed or freed since the begin (nothing queued).
int
udx_stream_write_commit (udx_stream_run_t *run, int keep);

// Half-close: queues optional last bytes and END. on_finish once acked.
int
udx_stream_write_end (udx_stream_t *stream, const void *buf, size_t len);

// Asks for one on_flush when every byte written so far is acked. Returns 1
// (and no callback) if nothing is outstanding.
int
udx_stream_flush (udx_stream_t *stream);

// Pulls in-order bytes: n > 0 bytes copied, 0 = nothing now, UV_EOF once the
// remote END was reached and everything was read. Bytes received before a
// close stay readable until on_finalize; after them an abortive close gives
// its status (UV_ECONNRESET, UV_ETIMEDOUT).
ssize_t
udx_stream_read (udx_stream_t *stream, void *buf, size_t max);

// Zero-copy view of the first contiguous run of readable bytes. Returns 0
// with *len > 0, 0 with *len == 0 (nothing now) or UV_EOF. The view stays
// valid until the next read/consume or until control returns to the loop.
int
udx_stream_read_peek (udx_stream_t *stream, const uint8_t **p, size_t *len);

void
udx_stream_read_consume (udx_stream_t *stream, size_t n);

size_t
udx_stream_readable_bytes (udx_stream_t *stream);

// Sends a MESSAGE datagram: unreliable, unordered, not congestion controlled.
// UV_EMSGSIZE if it cannot fit one datagram (2028 bytes payload max).
int
udx_stream_send (udx_stream_t *stream, const void *buf, size_t len);

// Abortive close. Sends DESTROY if connected (the remote closes with
// UV_ECONNRESET). This side's on_close gets status 0. Returns 1 if a DESTROY
// was sent, 0 otherwise. Safe to call twice.
int
udx_stream_destroy (udx_stream_t *stream);

// Graceful close: queues END after the bytes written (if write_end was not
// called), drops what the reader has not taken and every byte that still
// arrives (acked, so the peer can reach its END), and closes with status 0
// once our END is acked and the remote's END arrived. After timeout_ms it
// sends DESTROY and closes with UV_ETIMEDOUT. A stream that never connected
// closes at once. Safe to call twice (a shorter timeout wins); destroy()
// still cuts it short.
int
udx_stream_close (udx_stream_t *stream, uint32_t timeout_ms);

// Sequence numbers; set before connect (both sides must agree).
int
udx_stream_set_seq (udx_stream_t *stream, uint32_t seq);

uint32_t
udx_stream_get_seq (udx_stream_t *stream);

int
udx_stream_set_ack (udx_stream_t *stream, uint32_t ack);

uint32_t
udx_stream_get_ack (udx_stream_t *stream);

// Bound on bytes held for a slow reader (in order + out of order). The
// advertised window is the room left; data beyond it is dropped unacked, so
// the stream holds at most limit + one packet. 0 (default): the window
// advertised is libudx's rwnd_max minus unread bytes, and rwnd_max is the
// bound.
int
udx_stream_set_read_buffer_limit (udx_stream_t *stream, size_t bytes);

// Bytes the reader took out of the read buffer and still holds (a large
// message it hands on in parts). They count as unread in the advertised
// window, so a peer that respects it sends no faster than the reader
// drains; data already in flight is still taken. The reader sets it as it
// drains and sets 0 when done (default 0). A close clears it for good.
int
udx_stream_set_read_backlog (udx_stream_t *stream, size_t bytes);

// Maximum advertised receive window, bytes (default 4 MiB).
int
udx_stream_set_rwnd_max (udx_stream_t *stream, uint32_t bytes);

uint32_t
udx_stream_get_rwnd_max (udx_stream_t *stream);

// HEARTBEAT every ms while idle (0 = off). Once the peer has answered a
// heartbeat, silence longer than the timeout closes with UV_ETIMEDOUT.
int
udx_stream_set_keepalive (udx_stream_t *stream, uint32_t ms);

// Give up (close with UV_ETIMEDOUT) after this long without progress while
// data is outstanding. Default 13000 ms, as libudx's 13 RTO at the 1 s floor.
int
udx_stream_set_timeout (udx_stream_t *stream, uint32_t ms);

// Forward every datagram for this stream to dst's remote, rewriting only the
// id. UV_EINVAL if either stream is closed.
int
udx_stream_relay_to (udx_stream_t *stream, udx_stream_t *dst);

// A connected stream accepts packets only from its remote address (and from
// the one before the last change_remote); others are dropped and counted in
// the socket's wrong_source, so an off-path sender cannot reset the stream or
// inject data. allow = 1 accepts them again (peers that move, NAT rebinding),
// subject to on_firewall for other sockets. Default 0.
int
udx_stream_set_migration (udx_stream_t *stream, int allow);

// Move the stream to another socket / remote id / address. New packets go
// there at once; on_remote_changed fires once everything sent before the
// change is acked (never from inside this call).
int
udx_stream_change_remote (udx_stream_t *stream, udx_socket_t *socket, uint32_t remote_id, const struct sockaddr *addr);

const udx_stream_stats_t *
udx_stream_stats (udx_stream_t *stream);

// Calls cb with a stats sample every interval_ms (0 = off), for plots.
typedef void (*udx_stream_trace_cb)(udx_stream_t *stream, uint64_t now_us, const udx_stream_stats_t *stats);

int
udx_stream_set_trace (udx_stream_t *stream, uint32_t interval_ms, udx_stream_trace_cb cb);

// Careful resume (draft-ietf-tsvwg-careful-resume): a delivery rate
// (payload bytes/s, as stats.bbr_bw) and min RTT (us, as stats.min_rtt_us)
// remembered from an earlier stream to the same peer over the same path.
// Before the stream sends: its first RTT sample within [rtt/2, 2 rtt] lets
// it jump to half that rate; a loss before the jump is acked retreats at
// once. 0 for either clears it. UV_EBUSY once the stream has sent.
int
udx_stream_set_resume (udx_stream_t *stream, uint64_t rate, uint32_t rtt_us);

// Fault injection for this stream's datagrams (NULL clears).
int
udx_stream_set_fault (udx_stream_t *stream, const udx_fault_t *fault);

// Acknowledgement policy. UDX_ACK_BATCH (default): in-order data is acked
// once per receive batch and at least every 32 packets; a gap, a packet
// that fills one, a duplicate and END are acked at once. UDX_ACK_EACH: one
// ACK per DATA/END packet, as libudx. Either works with any peer.
#define UDX_ACK_EACH  0
#define UDX_ACK_BATCH 1

int
udx_stream_set_ack_policy (udx_stream_t *stream, int policy);

// ---------------------------------------------------------------------------
// Transfer policies: rate limits and weighted shares, enforced in the send
// path on new data (retransmissions and control packets are never held
// back). A limiter is a token bucket of `rate` bytes/s, `burst` bytes deep
// (0: 20 ms at the rate); streams join it with a weight, and while k of them
// have data waiting, member i gets rate * w_i / (their weight sum). A stream
// belongs to up to UDX_LIMITS_MAX limiters (its own, its peer's, a link's)
// and sends only when all of them allow. rate 0 = unlimited.

typedef struct udx_limiter_s udx_limiter_t;

#define UDX_LIMITS_MAX 4

typedef struct udx_limiter_stats_s {
  uint64_t rate;    // bytes/s
  uint64_t burst;   // bytes
  uint32_t members; // streams in it
  uint32_t active;  // of those, with data waiting
  uint64_t bytes;   // DATA payload bytes sent by its members
  uint64_t waits;   // times a member was held back
} udx_limiter_stats_t;

int
udx_limiter_init (udx_limiter_t **out, uint64_t rate, uint64_t burst);

int
udx_limiter_set_rate (udx_limiter_t *limiter, uint64_t rate, uint64_t burst);

// Drops the caller's reference; the memory goes once no stream uses it.
void
udx_limiter_release (udx_limiter_t *limiter);

// Adds the stream with a weight (>= 1), or sets its weight if it is in.
// UV_ENOSPC when the stream is in UDX_LIMITS_MAX limiters already. A stream
// leaves its limiters when it is finalized.
int
udx_limiter_add (udx_limiter_t *limiter, udx_stream_t *stream, uint32_t weight);

int
udx_limiter_remove (udx_limiter_t *limiter, udx_stream_t *stream);

void
udx_limiter_get_stats (const udx_limiter_t *limiter, udx_limiter_stats_t *out);

// The live stream with this local id (for bindings that know streams by id).
int
udx_stream_lookup (udx_t *udx, uint32_t local_id, udx_stream_t **out);

// Mappings of send-queue memory alive in this process, over every instance:
// blocks of runs (256 KiB and more, udx_stream_write_fill/_begin) and the
// pages kept for a queue's next one. A gauge for leak checks: it returns to
// its value once the streams that wrote such runs are gone.
uint64_t
udx_mapped_blocks (void);

const char *
udx_version_string (void);

#ifdef __cplusplus
}
#endif

#endif
