// Stream engine: lifecycle, the write/read API, timers and deadlines.

#include <stdlib.h>
#include <string.h>

#include "path.h"
#include "policy.h"
#include "stream.h"
#include "wire.h"

#define UDX_INITIAL_CWND    10
#define UDX_INITIAL_TOKENS  25000 // as libudx
#define UDX_PACING_BURST_US 2000  // token-bucket cap: 2 ms at the pacing rate
#define UDX_INITIAL_RTO_US  (1 * UDX_US_PER_S)
#define UDX_ZWP_BACKOFF_MAX 5

void
udx__stream_engine_init (udx_stream_t *s, uint32_t local_id, const udx_host_t *host, udx_pool_t *pool, uint64_t now) {
  s->local_id = local_id;
  s->host = host;
  s->pool = pool;
  s->now = now;
  s->cur_remote = 0;

  s->ack_policy = UDX_ACK_BATCH;
  s->send_rwnd = UDX_DEFAULT_RWND_MAX; // assumed until the peer tells
  s->recv_rwnd_max = UDX_DEFAULT_RWND_MAX;
  udx__bufq_init(&s->sndq, 0);
  udx__bufq_init(&s->rdq, 0);

  s->rto = UDX_INITIAL_RTO_US;
  udx__winfilter_reset(&s->rtt_min, now, 1e18);
  s->rto_at = s->tlp_at = s->reo_at = s->zwp_at = s->keepalive_at = s->pace_at = s->trace_at = s->close_at = UDX_NEVER;
  s->timeout_ms = UDX_DEFAULT_TIMEOUT;
  s->progress_at = now;
  s->last_rx = now;

  s->ca_state = UDX_CA_OPEN;
  s->app_limited = UINT64_MAX; // app limited until the network limits us
  s->cwnd = UDX_INITIAL_CWND;
  s->tokens = UDX_INITIAL_TOKENS;
  s->tokens_at = now;
  s->pacing_burst_us = UDX_PACING_BURST_US;

  udx__mtu_reset(s, 0);
  udx__bbr_init(s);

  s->stats.version = UDX_STREAM_STATS_VERSION;
  udx__stream_refresh_stats(s);
}

int
udx__stream_relay_to (udx_stream_t *s, udx_stream_t *dst) {
  if (dst == NULL || dst == s || udx__stream_dead(s) || udx__stream_dead(dst))
    return UDX_ERR_INVAL;
  if (s->relay_to || (s->status & UDX_S_RELAYED))
    return UDX_ERR_INVAL;
  s->relay_to = dst;
  s->status |= UDX_S_RELAYED;
  s->relay_next = dst->relay_from;
  dst->relay_from = s;
  return 0;
}

bool
udx__stream_relay_recv (udx_stream_t *s, const uint8_t *buf, size_t len) {
  udx_wire_pkt_t pkt;
  if (udx__wire_decode(buf, len, &pkt) != UDX_WIRE_OK) {
    s->stats.malformed++;
    return false;
  }
  s->stats.packets_received++;
  s->stats.bytes_received += len;
  if (udx__seq_gt(pkt.seq, s->snd_nxt))
    s->snd_nxt = pkt.seq;
  if (pkt.type & UDX_HEADER_DESTROY)
    udx__stream_close(s, UDX_ERR_CONNRESET); // the host forwards it first (closing is deferred)
  return true;
}

int
udx__stream_firewall (udx_stream_t *s, void *socket, const struct sockaddr *from) {
  if (s->cb.on_firewall == NULL)
    return 0;
  s->in_callback++;
  int drop = s->cb.on_firewall(s, socket, from);
  s->in_callback--;
  return drop || udx__stream_dead(s);
}

// --- settings (the host's public API)

int
udx__stream_flush_request (udx_stream_t *s) {
  if (udx__stream_dead(s))
    return UDX_ERR_NOTCONN;
  if (s->snd_acked_off >= s->sndq.end && s->snd_una == s->snd_nxt)
    return 1;
  s->flush_off = s->sndq.end;
  s->status |= UDX_S_FLUSH;
  return 0;
}

int
udx__stream_set_seq (udx_stream_t *s, uint32_t seq) {
  if (udx__stream_dead(s))
    return UDX_ERR_INVAL;
  if (s->snd_una != s->snd_nxt)
    return UDX_ERR_BUSY; // packets outstanding
  s->snd_una = s->snd_nxt = s->snd_wl2 = seq;
  s->high_seq = s->rack_end_seq = s->rack_fack = s->tlp_end_seq = seq;
  return 0;
}

int
udx__stream_set_ack (udx_stream_t *s, uint32_t ack) {
  if (udx__stream_dead(s))
    return UDX_ERR_INVAL;
  if (s->ooo_count || s->nranges)
    return UDX_ERR_BUSY; // out-of-order data held
  s->rcv_nxt = ack;
  s->snd_wl1 = ack;
  return 0;
}

void
udx__stream_set_read_limit (udx_stream_t *s, uint64_t bytes) {
  s->read_limit = bytes;
  udx__stream_maybe_window_update(s);
}

void
udx__stream_set_read_backlog (udx_stream_t *s, uint64_t bytes) {
  if (s->status & UDX_S_CLOSING)
    return; // what comes now is dropped unread: the window stays open
  s->read_backlog = bytes;
  udx__stream_maybe_window_update(s);
  udx__stream_refresh_stats(s); // recv_rwnd
}

void
udx__stream_set_rwnd_max (udx_stream_t *s, uint32_t bytes) {
  s->recv_rwnd_max = bytes;
}

void
udx__stream_set_keepalive (udx_stream_t *s, uint32_t ms) {
  s->keepalive_ms = ms;
  s->keepalive_at = UDX_NEVER;
}

void
udx__stream_set_timeout (udx_stream_t *s, uint32_t ms) {
  s->timeout_ms = ms;
}

void
udx__stream_set_trace (udx_stream_t *s, uint32_t interval_ms, udx_stream_trace_cb cb, uint64_t now) {
  s->trace_ms = interval_ms;
  s->trace_cb = cb;
  s->trace_at = interval_ms && cb ? now + (uint64_t) interval_ms * UDX_US_PER_MS : UDX_NEVER;
}

int
udx__stream_set_ack_policy (udx_stream_t *s, int policy) {
  if (policy != UDX_ACK_EACH && policy != UDX_ACK_BATCH)
    return UDX_ERR_INVAL;
  s->ack_policy = policy;
  return 0;
}

void
udx__stream_pin (udx_stream_t *s) {
  s->tx_pins++;
}

static void
udx__stream_relay_unlink (udx_stream_t *s) {
  udx_stream_t *dst = s->relay_to;
  if (dst == NULL)
    return;
  udx_stream_t **at = &dst->relay_from;
  while (*at && *at != s)
    at = &(*at)->relay_next;
  if (*at)
    *at = s->relay_next;
  s->relay_to = NULL;
  s->relay_next = NULL;
}

void
udx__stream_end_relays (udx_stream_t *s) {
  while (s->relay_from) {
    udx_stream_t *r = s->relay_from;
    s->relay_from = r->relay_next;
    r->relay_to = NULL;
    r->relay_next = NULL;
    udx__stream_close(r, 0);
  }
}

void
udx__stream_engine_free (udx_stream_t *s) {
  udx__stream_relay_unlink(s);
  udx__stream_end_relays(s);
  udx__path_set(s, NULL);
  udx__policy_free(s);
  if (s->run) { // a run under way keeps its block until its commit
    s->pool->blocks--;
    s->run->stream = NULL;
    s->run = NULL;
  }
  udx__bufq_destroy(&s->sndq, s->pool);
  udx__bufq_destroy(&s->rdq, s->pool);
  udx__ooo_free(s);
  free(s->pkts);
  free(s->rtxq);
  free(s->ranges);
  s->ooo = NULL;
  s->pkts = NULL;
  s->rtxq = NULL;
  s->ranges = NULL;
  s->ooo_cap = s->pkts_cap = s->rtxq_cap = s->ranges_cap = 0;
  s->nranges = s->rtxq_len = 0;
}

void
udx__stream_engine_connect (udx_stream_t *s, const udx_remote_t *to, int link_mtu, uint64_t now) {
  udx__stream_clock(s, now);
  s->cur_remote = 0;
  s->remote[0] = *to;
  s->remote[0].valid = true;
  s->remote[1].valid = false;
  s->status |= UDX_S_CONNECTED;
  s->last_rx = now;
  udx__mtu_reset(s, link_mtu);

  if (s->status & UDX_S_ACK_NEEDED)
    udx__send_ack(s);
  udx__stream_flush(s, now);
}

void
udx__stream_engine_change_remote (udx_stream_t *s, const udx_remote_t *to, int link_mtu, uint64_t now) {
  udx__stream_clock(s, now);
  // `to` goes into the slot that is not current; packets already sent keep
  // going to the old remote until everything before the change is acked.
  s->cur_remote = 1 - s->cur_remote;
  s->remote[s->cur_remote] = *to;
  s->remote[s->cur_remote].valid = true;
  udx__mtu_reset(s, link_mtu);

  if (s->snd_una == s->snd_nxt) {
    s->remote[1 - s->cur_remote].valid = false;
    s->status &= ~UDX_S_CHANGING;
    s->host->remote_changed(s);
  } else {
    s->change_seq = s->snd_nxt;
    s->status |= UDX_S_CHANGING;
  }
}

void
udx__stream_close (udx_stream_t *s, int status) {
  if (udx__stream_dead(s))
    return;
  s->status |= UDX_S_CLOSED;
  s->status &= ~UDX_S_CONNECTED;
  s->close_status = status;
  udx__path_set(s, NULL); // its packets no longer count against the others
  s->rto_at = s->tlp_at = s->reo_at = s->zwp_at = s->keepalive_at = s->pace_at = s->trace_at = s->close_at = UDX_NEVER;
  udx__stream_refresh_stats(s);
  s->host->closed(s);
}

// Graceful close: our END acked, the peer's END reached and read.
void
udx__stream_check_close (udx_stream_t *s) {
  uint32_t all = UDX_S_ENDED | UDX_S_ENDED_REMOTE | UDX_S_EOF_READ;
  if ((s->status & all) == all && !udx__stream_dead(s))
    udx__stream_close(s, 0);
}

static int
udx__stream_write_check (udx_stream_t *s, uint64_t now) {
  if (s->filling)
    return UDX_ERR_BUSY; // a write from inside fill: its bytes would land in the reserved run
  if (udx__stream_dead(s))
    return UDX_ERR_NOTCONN;
  if (s->status & UDX_S_ENDING)
    return UDX_ERR_PIPE;
  udx__stream_clock(s, now);
  return 0;
}

static bool
udx__stream_idle (const udx_stream_t *s) {
  return s->snd_una == s->snd_nxt && s->sndq.end == s->snd_pkt_off;
}

// After bytes (or the END) were queued: probe a zero window, wake the
// host, and say whether the queue is above the high-water mark.
static int
udx__stream_queued (udx_stream_t *s, bool was_idle, bool end, uint64_t now) {
  if (end) {
    s->status |= UDX_S_ENDING;
    s->end_off = s->sndq.end;
  }

  // An idle stream facing a zero window probes at once (as libudx).
  if (was_idle && s->send_rwnd == 0 && (s->status & UDX_S_CONNECTED)) {
    udx__send_heartbeat(s);
    s->zwp_at = now + s->rto;
  }

  s->host->wake(s);

  uint64_t queued = s->sndq.end - s->bytes_acked;
  uint64_t wnd = udx__min_u64((uint64_t) s->cwnd * udx__max_payload(s), s->send_rwnd);
  if (queued > UDX_HIGH_WATERMARK + wnd) {
    s->status |= UDX_S_HWM;
    return 0;
  }
  return 1;
}

int
udx__stream_write (udx_stream_t *s, const void *buf, size_t len, bool end, uint64_t now) {
  int err = udx__stream_write_check(s, now);
  if (err < 0)
    return err;
  bool was_idle = udx__stream_idle(s);
  if (len > 0) {
    err = udx__bufq_append(&s->sndq, s->pool, buf, len);
    if (err < 0)
      return err;
  }
  return udx__stream_queued(s, was_idle, end, now);
}

int
udx__stream_write_fill (udx_stream_t *s, size_t len, udx_stream_fill_cb fill, void *ctx, uint64_t now) {
  int err = udx__stream_write_check(s, now);
  if (err < 0)
    return err;
  bool was_idle = udx__stream_idle(s);
  if (len > 0) {
    uint8_t *p;
    err = udx__bufq_reserve(&s->sndq, s->pool, len, &p);
    if (err < 0)
      return err;
    s->filling = true;
    err = fill(ctx, p, len);
    s->filling = false;
    if (err >= 0 && udx__stream_dead(s))
      err = UDX_ERR_NOTCONN; // closed or destroyed from inside fill
    if (err < 0) {
      udx__bufq_unreserve(&s->sndq, s->pool);
      return err;
    }
    udx__bufq_commit(&s->sndq, s->pool, len);
  }
  return udx__stream_queued(s, was_idle, false, now);
}

int
udx__stream_write_begin (udx_stream_t *s, size_t len, udx_stream_run_t **run, uint8_t **buf, uint64_t now) {
  *run = NULL;
  *buf = NULL;
  int err = udx__stream_write_check(s, now);
  if (err < 0)
    return err;
  udx_stream_run_t *r = calloc(1, sizeof(*r));
  if (r == NULL)
    return UDX_ERR_NOMEM;
  err = udx__bufq_reserve_block(&s->sndq, s->pool, len, &r->block, buf);
  if (err < 0) {
    free(r);
    return err;
  }
  r->stream = s;
  r->len = len;
  s->filling = true;
  s->run = r;
  *run = r;
  return 0;
}

int
udx__stream_write_commit (udx_stream_run_t *r, bool keep, uint64_t now) {
  udx_stream_t *s = r->stream;
  udx_bufq_ext_t *block = r->block;
  size_t len = r->len;
  free(r);
  if (s == NULL) {
    udx__bufq_free_block(block, NULL); // uncounted when the stream went
    return UDX_ERR_NOTCONN;
  }
  s->filling = false;
  s->run = NULL;
  if (!keep || udx__stream_dead(s)) {
    udx__bufq_unhold(&s->sndq);
    udx__bufq_free_block(block, s->pool);
    return keep ? UDX_ERR_NOTCONN : 0;
  }
  udx__stream_clock(s, now);
  bool was_idle = udx__stream_idle(s);
  udx__bufq_commit_block(&s->sndq, s->pool, block, len);
  return udx__stream_queued(s, was_idle, false, now);
}

int
udx__stream_send_message (udx_stream_t *s, const void *buf, size_t len, uint64_t now) {
  if (udx__stream_dead(s) || !(s->status & UDX_S_CONNECTED))
    return UDX_ERR_NOTCONN;
  if (len > UDX_MESSAGE_MAX)
    return UDX_ERR_MSGSIZE;
  udx__stream_clock(s, now);

  uint8_t hdr[UDX_HEADER_SIZE];
  const udx_remote_t *to = &s->remote[s->cur_remote];
  uint32_t rwnd = udx__recv_rwnd(s);
  s->last_rwnd = rwnd;
  udx__wire_header(hdr, UDX_HEADER_MESSAGE, 0, to->id, rwnd, s->snd_nxt, s->rcv_nxt);
  struct iovec iov = {.iov_base = (void *) buf, .iov_len = len};
  udx__send_emit(s, s->cur_remote, hdr, sizeof(hdr), &iov, 1, false);
  return 0;
}

// DESTROY (if connected), then close with status.
static int
udx__stream_abort (udx_stream_t *s, int status) {
  if ((s->status & UDX_S_RELAYED) || !(s->status & UDX_S_CONNECTED)) {
    udx__stream_close(s, status);
    return 0;
  }

  // DESTROY carries the next seq and is sent once (as libudx).
  uint8_t hdr[UDX_HEADER_SIZE];
  const udx_remote_t *to = &s->remote[s->cur_remote];
  udx__wire_header(hdr, UDX_HEADER_DESTROY, 0, to->id, udx__recv_rwnd(s), s->snd_nxt, s->rcv_nxt);
  udx__send_emit(s, s->cur_remote, hdr, sizeof(hdr), NULL, 0, false);
  s->snd_nxt++;
  udx__stream_close(s, status);
  return 1;
}

static int
udx__stream_reset (udx_stream_t *s, uint64_t now, int status) {
  if (udx__stream_dead(s))
    return 0;
  udx__stream_clock(s, now);
  return udx__stream_abort(s, status);
}

int
udx__stream_destroy (udx_stream_t *s, uint64_t now) {
  return udx__stream_reset(s, now, 0);
}

int
udx__stream_cut (udx_stream_t *s, uint64_t now) {
  // our END not acked yet: what it covers may be lost, and the close says so
  return udx__stream_reset(s, now, (s->status & UDX_S_ENDED) ? 0 : UDX_ERR_CANCELED);
}

static void
udx__reader_saw_eof (udx_stream_t *s);

// A lingering close (as a TCP close that reads on, not the RST of RFC 1122
// 4.2.2.13 for unread data): the peer's bytes are still acked, so its
// window stays open and it can reach its END; they are dropped unread.
int
udx__stream_shutdown (udx_stream_t *s, uint32_t timeout_ms, uint64_t now) {
  if (udx__stream_dead(s))
    return 0;
  udx__stream_clock(s, now);
  if ((s->status & UDX_S_RELAYED) || !(s->status & UDX_S_CONNECTED)) {
    udx__stream_close(s, 0); // no peer to end with
    return 0;
  }
  if (!(s->status & UDX_S_ENDING)) {
    int err = udx__stream_write(s, NULL, 0, true, now);
    if (err < 0)
      return err;
  }
  s->status |= UDX_S_CLOSING;
  uint64_t at = now + (uint64_t) timeout_ms * UDX_US_PER_MS;
  if (at < s->close_at)
    s->close_at = at;
  udx__bufq_release(&s->rdq, s->pool, s->rdq.end);
  udx__ooo_drop_bytes(s);
  s->read_backlog = 0; // the reader is gone: it holds nothing for us
  udx__stream_maybe_window_update(s);
  if (s->status & UDX_S_ENDED_REMOTE)
    udx__reader_saw_eof(s); // closes if our END is acked too
  s->host->wake(s);
  return 0;
}

// After the reader made room: tell the peer when the window reopened or at
// least doubled (as Linux), by two packets at the least (RFC 1122 4.2.3.3
// receiver SWS avoidance), or grew by a quarter of its maximum.
void
udx__stream_maybe_window_update (udx_stream_t *s) {
  if (!(s->status & UDX_S_CONNECTED) || udx__stream_dead(s))
    return;
  uint32_t now_rwnd = udx__recv_rwnd(s);
  if (now_rwnd <= s->last_rwnd)
    return;
  uint64_t inc = now_rwnd - s->last_rwnd;
  uint64_t mss2 = 2ull * udx__max_payload(s);
  uint64_t cap = s->read_limit ? udx__min_u64(s->read_limit, s->recv_rwnd_max) : s->recv_rwnd_max;
  if (inc < mss2 && inc < cap)
    return;
  if (s->last_rwnd < mss2 || now_rwnd >= 2ull * s->last_rwnd || inc >= cap / 4) {
    udx__send_ack(s);
    s->host->wake(s);
  }
}

static void
udx__reader_saw_eof (udx_stream_t *s) {
  if (!(s->status & UDX_S_EOF_READ)) {
    s->status |= UDX_S_EOF_READ | UDX_S_EOF_SIGNALED;
    udx__stream_check_close(s);
  }
}

ssize_t
udx__stream_read (udx_stream_t *s, void *buf, size_t max, uint64_t now) {
  udx__stream_clock(s, now);
  size_t n = 0;
  uint8_t *out = buf;
  while (n < max) {
    const uint8_t *p;
    size_t avail = udx__bufq_peek(&s->rdq, &p);
    if (avail == 0)
      break;
    size_t take = avail < max - n ? avail : max - n;
    memcpy(out + n, p, take);
    n += take;
    udx__bufq_release(&s->rdq, s->pool, s->rdq.start + take);
  }
  if (n > 0) {
    udx__stream_maybe_window_update(s);
    return (ssize_t) n;
  }
  if (s->status & UDX_S_ENDED_REMOTE) {
    udx__reader_saw_eof(s);
    return UDX_ERR_EOF;
  }
  if (udx__stream_dead(s))
    return s->close_status ? s->close_status : UDX_ERR_EOF;
  return 0;
}

int
udx__stream_peek (udx_stream_t *s, const uint8_t **p, size_t *len) {
  *len = udx__bufq_peek(&s->rdq, p);
  if (*len > 0)
    return 0;
  if (s->status & UDX_S_ENDED_REMOTE) {
    udx__reader_saw_eof(s);
    return UDX_ERR_EOF;
  }
  if (udx__stream_dead(s))
    return s->close_status ? s->close_status : UDX_ERR_EOF;
  return 0;
}

void
udx__stream_consume (udx_stream_t *s, size_t n, uint64_t now) {
  udx__stream_clock(s, now);
  uint64_t len = udx__bufq_len(&s->rdq);
  if (n > len)
    n = (size_t) len;
  if (n == 0)
    return;
  udx__bufq_release(&s->rdq, s->pool, s->rdq.start + n);
  udx__stream_maybe_window_update(s);
}

// Keepalive is armed while everything is acked; silence after the peer has
// shown it answers heartbeats means it is gone.
static void
udx__update_idle_timers (udx_stream_t *s) {
  bool idle = (s->status & UDX_S_CONNECTED) && s->snd_una == s->snd_nxt && s->sndq.end == s->snd_pkt_off;
  if (idle && s->keepalive_ms) {
    if (s->keepalive_at == UDX_NEVER)
      s->keepalive_at = s->now + (uint64_t) s->keepalive_ms * UDX_US_PER_MS;
  } else {
    s->keepalive_at = UDX_NEVER;
  }
}

void
udx__stream_flush (udx_stream_t *s, uint64_t now) {
  if (udx__stream_dead(s))
    return;
  udx__stream_clock(s, now);
  if ((s->status & (UDX_S_ACK_NEEDED | UDX_S_CONNECTED)) == (UDX_S_ACK_NEEDED | UDX_S_CONNECTED)) {
    udx__send_ack(s);
  }
  udx__send_packets(s);
  udx__update_idle_timers(s);
  udx__stream_refresh_stats(s);
}

void
udx__stream_timer (udx_stream_t *s, uint64_t now) {
  if (udx__stream_dead(s))
    return;
  udx__stream_clock(s, now);

  if (s->close_at <= now) {
    udx__stream_abort(s, UDX_ERR_TIMEDOUT);
    return;
  }

  if (s->reo_at <= now) {
    s->reo_at = UDX_NEVER;
    uint64_t wait = udx__rack_detect_loss(s);
    if (wait)
      s->reo_at = now + wait;
  }

  if (s->tlp_at <= now)
    udx__on_tlp(s);
  if (udx__stream_dead(s))
    return;

  if (s->rto_at <= now)
    udx__on_rto(s);
  if (udx__stream_dead(s))
    return;

  if (s->zwp_at <= now) {
    // RFC 1122 4.2.2.17: probe a zero window for as long as the peer
    // answers; a peer known to answer HEARTBEATs that stays silent for the
    // give-up time is gone.
    uint64_t give_up = (s->status & UDX_S_HB_ANSWERED) && s->timeout_ms ? s->last_rx + (uint64_t) s->timeout_ms * UDX_US_PER_MS : UDX_NEVER;
    if (now >= give_up) {
      udx__stream_close(s, UDX_ERR_TIMEDOUT);
      return;
    }
    s->stats.zwp_count++;
    udx__send_heartbeat(s);
    s->status |= UDX_S_HB_OUT;
    if (s->zwp_backoff < UDX_ZWP_BACKOFF_MAX)
      s->zwp_backoff++;
    s->zwp_at = udx__min_u64(now + ((uint64_t) s->rto << s->zwp_backoff), give_up);
  }

  if (s->keepalive_at <= now) {
    uint64_t silence = now - s->last_rx;
    uint64_t limit = udx__max_u64((uint64_t) s->timeout_ms, 3ull * s->keepalive_ms) * UDX_US_PER_MS;
    if ((s->status & UDX_S_HB_ANSWERED) && s->timeout_ms && silence >= limit) {
      udx__stream_close(s, UDX_ERR_TIMEDOUT);
      return;
    }
    udx__send_heartbeat(s);
    s->status |= UDX_S_HB_OUT;
    s->keepalive_at = now + (uint64_t) s->keepalive_ms * UDX_US_PER_MS;
  }

  if (s->trace_at <= now) {
    s->trace_at = now + (uint64_t) s->trace_ms * UDX_US_PER_MS;
    udx__stream_refresh_stats(s);
    if (s->trace_cb && !UDX_CALLBACK(s, s->trace_cb(s, now, &s->stats)))
      return;
  }

  if (s->pace_at <= now)
    s->pace_at = UDX_NEVER;

  udx__send_packets(s);
  udx__update_idle_timers(s);
  udx__stream_refresh_stats(s);
}

uint64_t
udx__stream_deadline (const udx_stream_t *s) {
  if (udx__stream_dead(s))
    return UDX_NEVER;
  uint64_t t = s->rto_at;
  t = udx__min_u64(t, s->tlp_at);
  t = udx__min_u64(t, s->reo_at);
  t = udx__min_u64(t, s->zwp_at);
  t = udx__min_u64(t, s->keepalive_at);
  t = udx__min_u64(t, s->pace_at);
  t = udx__min_u64(t, s->trace_at);
  t = udx__min_u64(t, s->close_at);
  return t;
}

void
udx__stream_refresh_stats (udx_stream_t *s) {
  udx_stream_stats_t *st = &s->stats;
  st->mtu = s->mtu;
  st->max_payload = udx__max_payload(s);
  st->bbr_state = s->bbr.state;
  st->rtt_us = s->srtt;
  st->rttvar_us = s->rttvar;
  st->rto_us = s->rto;
  st->min_rtt_us = s->bbr.min_rtt_us == UINT32_MAX ? 0 : s->bbr.min_rtt_us;
  st->cwnd = s->cwnd;
  st->inflight = s->inflight;
  st->send_rwnd = s->send_rwnd;
  st->recv_rwnd = udx__recv_rwnd(s);
  st->pacing_rate = s->pacing_rate;
  st->bbr_bw = (uint64_t) (udx__bbr_bw(s) * (double) UDX_US_PER_S * udx__max_payload(s));
  st->write_queued = s->sndq.end - s->bytes_acked;
  st->read_buffered = udx__bufq_len(&s->rdq);
}
