#ifndef UDX_IO_H
#define UDX_IO_H

// The libuv shell around the engine: the instance (stream table, flush
// scheduling), sockets (one UDP fd under uv_poll, batched recvmmsg/sendmmsg)
// and fault injection.

#include <sys/socket.h>
#include <uv.h>

#include "bufq.h"
#include "internal.h"
#include "stream.h"

// The receive area: 512 KiB, its pages touched as used: 32 datagrams a call,
// or with GRO 8 messages of up to 64 KiB (~350 datagrams, about the budget;
// 2 MiB before, which held a receiver's RSS 1.3 MB up and overran the budget).
#define UDX_RX_BATCH          32    // messages per recvmmsg
#define UDX_RX_GRO_SIZE       65536 // a GRO message: up to 64 KiB of datagrams
#define UDX_RX_AREA           (UDX_RX_BATCH * UDX_RX_BUFFER_SIZE)
#define UDX_RX_BUDGET         256          // datagrams per readable callback
#define UDX_TX_SLOTS          512          // datagrams queued per socket before a flush
#define UDX_TX_IOV            4            // header, padding, payload in up to two chunks
#define UDX_TX_SLOT_SIZE      2048         // largest datagram the ring copies
#define UDX_TX_ARENA          (256 * 1024) // bytes copied into the ring at most
#define UDX_GSO_SEGS          64           // datagrams per UDP_SEGMENT send (kernel limit)
#define UDX_GSO_BYTES         65000        // bytes per UDP_SEGMENT send (under 64 KiB)
#define UDX_HELD_MAX          256          // datagrams held back by fault injection (reorder)
#define UDX_ACK_PAUSE_US      100          // default ACK pause (udx_socket_set_ack_pause)
#define UDX_ACK_PAUSE_MAX_US  1000
#define UDX_ACK_PAUSE_BACKOFF 64 // most chances skipped after an idle pause

typedef struct udx_fault_state_s {
  udx_fault_t cfg;
  uint64_t rng;
  uint64_t set_at; // us
} udx_fault_state_t;

enum {
  UDX_FAULT_PASS = 0,
  UDX_FAULT_DROP,
  UDX_FAULT_DUP,
  UDX_FAULT_HOLD,
  UDX_FAULT_ERROR,
};

#ifdef __linux__
typedef struct mmsghdr udx_mmsg_t;
#else
typedef struct udx_mmsg_s {
  struct msghdr msg_hdr;
  unsigned int msg_len;
} udx_mmsg_t;
#endif

// Control data of one UDP_SEGMENT message.
typedef union udx_gso_cmsg_u {
  struct cmsghdr h;
  uint8_t buf[64];
} udx_gso_cmsg_t;

typedef union udx_addr_u {
  struct sockaddr sa;
  struct sockaddr_in v4;
  struct sockaddr_in6 v6;
} udx_addr_t;

// One datagram waiting in a socket's transmit ring. iov[0] is the header
// (in hdr) or the whole datagram (copied into the arena); with `pin` set the
// other iovecs point into that stream's send queue (no copy).
typedef struct udx_tx_slot_s {
  udx_addr_t to;
  uint32_t to_len;
  uint32_t len; // datagram bytes
  udx_stream_t *pin;
  uint8_t niov; // 0: dropped while queued (its stream went away)
  uint8_t hdr[UDX_HEADER_SIZE];
  struct iovec iov[UDX_TX_IOV];
} udx_tx_slot_t;

typedef struct udx_held_s {
  uint64_t release_at; // us; 0 = after the next datagram
  uint8_t rx;
  struct sockaddr_storage addr;
  size_t len;
  uint8_t *buf;
} udx_held_t;

// Stream ids map to streams in an open-addressing table (linear probing).
typedef struct udx_idmap_s {
  udx_stream_t **slots;
  uint32_t cap; // power of two
  uint32_t len;
} udx_idmap_t;

// The io layer's stream: the engine's stream first (udx_stream_t * is the
// public handle; udx__io converts back), then what only the io layer uses.
typedef struct udx_io_stream_s {
  udx_stream_t s;
  udx_t *udx;
  struct udx_fault_state_s *fault; // fault injection for its datagrams
  uv_timer_t timer;
  uint64_t timer_at;
  udx_stream_t *next_dirty;
  udx_stream_t *next_closing;
  bool dirty;
  bool closing;
  bool remote_changed_owed;
  bool migration; // accept packets from addresses other than the remotes
} udx_io_stream_t;

static inline udx_io_stream_t *
udx__io (udx_stream_t *s) {
  return (udx_io_stream_t *) s;
}

struct udx_socket_s {
  udx_t *udx;
  void *data;
  int fd;
  int family; // AF_INET / AF_INET6
  bool bound;
  bool closing;
  bool polling;
  bool want_writable;
  bool tx_listed;
  bool ipv6only;
  int ttl;
  int nhandles; // handles still to close once closing
  uv_poll_t poll;
  udx_socket_close_cb on_close;
  udx_socket_recv_cb on_recv;
  udx_socket_stats_t stats;

  udx_tx_slot_t *tx; // ring of pending datagrams
  uint32_t tx_head;
  uint32_t tx_len;
  uint8_t *arena; // copied datagram bytes of the ring, reset when it empties
  uint32_t arena_used;
  struct iovec *tx_iov;    // scratch for one flush: iovecs of the batch
  udx_mmsg_t *tx_msgs;     // scratch: one message per datagram or GSO run
  udx_gso_cmsg_t *tx_cmsg; // scratch: their UDP_SEGMENT control data
  uint32_t tx_plain;       // slots at the head to send without GSO (after an error)
  bool gso;                // UDP_SEGMENT works on this socket
  bool gro;                // UDP_GRO: a received message may hold several datagrams

  // ACK pause (rx.c): reading stops for ack_pause_us after a readable
  // event that brought only ACKs a stream waits on from a peer that acks
  // every packet, so those ACKs wake us once per pause, not once each.
  uint32_t ack_pause_us; // 0: off
  int pause_fd;          // timer fd, -1 until the first pause
  uv_poll_t pause_poll;
  bool rx_paused;
  bool rx_after_pause;   // the read under way follows a pause
  uint8_t pause_backoff; // chances skipped after a pause that caught < 2
  uint8_t pause_skip;    // chances still to skip
  bool rx_acks_only;     // every datagram of the read under way was such an ACK

  udx_fault_state_t *fault;
  udx_held_t held[UDX_HELD_MAX];
  uint32_t nheld;
  uv_timer_t held_timer;
  bool held_timer_init;

  struct udx_path_s *paths; // shared windows, one per destination (path.h)

  struct udx_linger_s *linger; // ring of linger_max records, made on first use (linger.h)
  uint32_t linger_head;
  uint32_t linger_len;
  uint32_t linger_max;
  uint32_t linger_ms;

  udx_socket_t *next_tx; // sockets with pending tx
  udx_socket_t *prev;
  udx_socket_t *next;
};

struct udx_s {
  uv_loop_t *loop;
  void *data;
  udx_pool_t pool;
  udx_idmap_t ids;
  uint32_t nstreams; // alive (not finalized)
  uint32_t nsockets;
  udx_socket_t *sockets;
  bool closing;
  udx_close_cb on_close;

  uv_prepare_t prepare;
  uv_check_t check;
  int nhandles; // open handles of the instance (for close)

  udx_stream_t *dirty; // streams to flush
  udx_stream_t *closing_streams;
  udx_socket_t *tx_pending;
  int settling;

  udx_fault_state_t *fault;

  // receive buffers, shared by all sockets (processing is synchronous)
  uint8_t *rx_bufs;
  struct sockaddr_storage rx_addrs[UDX_RX_BATCH];
  uint8_t rx_dup[UDX_RX_BUFFER_SIZE]; // a datagram duplicated by fault injection

  uint64_t log_at; // rate-limited logging
  uint64_t log_suppressed;
};

// --- udx.c

uint64_t
udx__now (void);

// An engine error code (UDX_ERR_*) as the UV_E* code udx.h documents;
// other values pass through.
int
udx__uv_err (int err);

void
udx__settle (udx_t *udx);

void
udx__mark_dirty (udx_stream_t *s);

void
udx__log (udx_t *udx, const char *fmt, ...);

udx_stream_t *
udx__idmap_get (const udx_idmap_t *m, uint32_t id);

int
udx__idmap_put (udx_idmap_t *m, udx_stream_t *s);

void
udx__idmap_del (udx_idmap_t *m, uint32_t id);

extern const udx_host_t udx__io_host;

// --- rx.c

void
udx__socket_read (udx_socket_t *sock);

// Stops reading for ack_pause_us (see ACK pause in rx.c); a no-op when
// the pause is off, under way or the socket closes.
void
udx__socket_pause (udx_socket_t *sock);

void
udx__socket_poll_update (udx_socket_t *sock);

bool
udx__hold (udx_socket_t *sock, udx_fault_state_t *f, bool rx, const uint8_t *buf, size_t len, const struct sockaddr_storage *addr, uint64_t now);

void
udx__held_release (udx_socket_t *sock, bool only_next);

// --- tx.c

// Queues one datagram for the next flush. iov[0] is copied; the others are
// copied too unless `pin` is given: then they point into pin's send queue and
// are kept (pin->tx_pins counts them) until the datagram is sent or dropped.
void
udx__socket_queue (udx_socket_t *sock, const struct sockaddr *to, const struct iovec *iov, int iovcnt, size_t len, udx_fault_state_t *stream_fault, udx_stream_t *pin);

// Sends what is queued (sendmmsg, UDP_SEGMENT runs); on EAGAIN waits for
// the socket to become writable.
void
udx__socket_flush (udx_socket_t *sock);

// Drops every queued datagram (socket closing).
void
udx__socket_tx_clear (udx_socket_t *sock);

// A stream is going away: its queued datagrams that point into its send
// queue are dropped.
void
udx__tx_forget_stream (udx_t *udx, udx_stream_t *s);

// Cuts slots [0, n) into messages: a message is one datagram, or with gso a
// run of datagrams to the same address, all as long as the first except a
// shorter last one, within UDX_GSO_SEGS / UDX_GSO_BYTES. Writes the number of
// slots of each message to segs; returns the number of messages.
int
udx__tx_plan (const udx_tx_slot_t *slots, int n, bool gso, uint16_t *segs);

void
udx__held_commit_tx (udx_socket_t *sock, const uint8_t *buf, size_t len, const struct sockaddr_storage *to);

// --- socket.c

void
udx__socket_send_error (udx_socket_t *sock, int err);

// Converts a v4 address to v4-mapped v6 when the socket is IPv6.
socklen_t
udx__socket_dest (udx_socket_t *sock, const struct sockaddr *to, struct sockaddr_storage *out);

// Same address and port, both as udx__socket_dest writes them.
bool
udx__same_dest (const struct sockaddr_storage *a, const struct sockaddr_storage *b);

// The shared window towards dest (as udx__socket_dest wrote it), created on
// first use; NULL if out of memory (the stream then runs on its own).
struct udx_path_s *
udx__socket_path (udx_socket_t *sock, const struct sockaddr_storage *dest);

void
udx__addr_unmap (struct sockaddr_storage *addr);

// --- sys.c (OS specifics)

int
udx__sys_socket (int family, bool ipv6only, bool reuseaddr);

void
udx__sys_set_buffers (int fd);

int
udx__sys_set_ttl (int fd, int family, int ttl);

int
udx__sys_get_ttl (int fd, int family, int *ttl);

void
udx__sys_set_dontfrag (int fd, int family);

// Interface MTU towards addr (temp socket, connect, IP_MTU), or -1.
int
udx__sys_link_mtu (const struct sockaddr *addr);

typedef struct udx_rx_msg_s {
  size_t len;
  size_t seg; // GRO: datagrams of seg bytes (the last may be shorter); 0: one datagram
  bool truncated;
} udx_rx_msg_t;

// Receives up to n messages into bufs (each `size` bytes apart). Returns
// the count (msgs and addrs filled) or a negative UV error.
int
udx__sys_recv_batch (int fd, uint8_t *bufs, size_t size, struct sockaddr_storage *addrs, udx_rx_msg_t *msgs, int n);

// Sends n prepared messages (msg_name, msg_iov, msg_control set); returns
// how many went out (> 0), or a negative UV error for the first one.
int
udx__sys_send_msgs (int fd, udx_mmsg_t *msgs, int n);

// Sets a message's control data to a UDP_SEGMENT send of gso_size-byte
// segments.
void
udx__sys_gso_cmsg (struct msghdr *h, udx_gso_cmsg_t *c, uint16_t gso_size);

// Enables UDP_SEGMENT sends; false if unsupported (or UDX_GSO=0).
bool
udx__sys_enable_gso (int fd);

// Enables UDP_GRO receives; false if unsupported (or UDX_GRO=0).
bool
udx__sys_enable_gro (int fd);

// The size of a transparent huge page that madvised memory may get (Linux
// THP in "always" or "madvise" mode), or 0: none, or UDX_THP=0 (for
// measurements).
size_t
udx__sys_huge_page_size (void);

// A one-shot timer of microsecond resolution as a pollable fd (timerfd), or
// a negative UV error (UV_ENOSYS where there is none).
int
udx__sys_timer_fd (void);

// Fires the timer fd once, `us` from now.
int
udx__sys_timer_arm (int fd, uint32_t us);

// Clears a fired timer fd's readable state.
void
udx__sys_timer_drain (int fd);

// --- fault.c

udx_fault_state_t *
udx__fault_new (const udx_fault_t *cfg, uint64_t now);

// Decides what happens to a datagram (dir: UDX_FAULT_TX or UDX_FAULT_RX);
// may corrupt buf in place. *err gets the errno for UDX_FAULT_ERROR.
int
udx__fault_decide (udx_fault_state_t *f, int dir, uint64_t now, uint8_t *buf, size_t len, int *err);

#endif
