// The send path: late packetisation from the send queue, retransmissions,
// pacing, ACK and control packets.

#include <stdlib.h>
#include <string.h>

#include "path.h"
#include "policy.h"
#include "stream.h"
#include "wire.h"

#define UDX_PKTS_MAX_CAP (1u << 18)

static const uint8_t udx__zeros[256];

uint32_t
udx__recv_rwnd (const udx_stream_t *s) {
  // the reader's backlog counts as unread (RFC 9293 3.8.6: the window offered
  // is the buffer space left), but bounds no packet in flight
  uint64_t held = udx__bufq_len(&s->rdq) + s->read_backlog;
  uint64_t room;
  if (s->read_limit) {
    held += s->ooo_bytes;
    room = s->read_limit > held ? s->read_limit - held : 0;
    if (room > s->recv_rwnd_max)
      room = s->recv_rwnd_max;
  } else {
    room = s->recv_rwnd_max > held ? s->recv_rwnd_max - held : 0;
  }
  return (uint32_t) room;
}

static const udx_remote_t *
udx__remote_for (udx_stream_t *s, uint8_t slot) {
  if (slot > 1 || !s->remote[slot].valid)
    slot = s->cur_remote;
  return &s->remote[slot];
}

static void
udx__header (udx_stream_t *s, uint8_t *hdr, uint8_t type, uint8_t data_offset, const udx_remote_t *to, uint32_t seq) {
  uint32_t rwnd = udx__recv_rwnd(s);
  s->last_rwnd = rwnd;
  udx__wire_header(hdr, type, data_offset, to->id, rwnd, seq, s->rcv_nxt);
}

void
udx__send_emit (udx_stream_t *s, uint8_t slot, const uint8_t *hdr, size_t hdr_len, const struct iovec *iov, int iovcnt, bool queued) {
  struct iovec v[8];
  size_t len = hdr_len;
  v[0].iov_base = (void *) hdr;
  v[0].iov_len = hdr_len;
  int n = 1;
  for (int i = 0; i < iovcnt && n < 8; i++) {
    if (iov[i].iov_len == 0)
      continue;
    v[n++] = iov[i];
    len += iov[i].iov_len;
  }
  s->stats.packets_sent++;
  s->stats.bytes_sent += len;
  s->host->send(s, udx__remote_for(s, slot), v, n, len, queued);
}

// ACK: cumulative ack + as many SACK ranges as fit a base-MTU packet.
void
udx__send_ack (udx_stream_t *s) {
  if (!(s->status & UDX_S_CONNECTED) || udx__stream_dead(s)) {
    s->status |= UDX_S_ACK_NEEDED; // sent on connect
    return;
  }

  uint8_t hdr[UDX_HEADER_SIZE];
  uint8_t sacks[UDX_WIRE_MAX_SACKS * 8];
  uint32_t n = s->nranges < UDX_WIRE_MAX_SACKS ? s->nranges : UDX_WIRE_MAX_SACKS;

  for (uint32_t i = 0; i < n; i++) {
    udx__wire_put_sack(sacks, i, s->ranges[i].start, s->ranges[i].end);
  }

  const udx_remote_t *to = &s->remote[s->cur_remote];
  udx__header(s, hdr, n ? UDX_HEADER_SACK : 0, 0, to, s->snd_nxt);

  struct iovec iov = {.iov_base = sacks, .iov_len = n * 8};
  udx__send_emit(s, s->cur_remote, hdr, sizeof(hdr), &iov, 1, false);
  s->status &= ~UDX_S_ACK_NEEDED;
  s->acks_owed = 0;
}

void
udx__send_heartbeat (udx_stream_t *s) {
  if (!(s->status & UDX_S_CONNECTED) || udx__stream_dead(s))
    return;
  uint8_t hdr[UDX_HEADER_SIZE];
  const udx_remote_t *to = &s->remote[s->cur_remote];
  udx__header(s, hdr, UDX_HEADER_HEARTBEAT, 0, to, s->snd_nxt);
  udx__send_emit(s, s->cur_remote, hdr, sizeof(hdr), NULL, 0, false);
}

// --- transmit-order list (RACK walks it oldest first), linked by seq

void
udx__tx_list_append (udx_stream_t *s, udx_pkt_t *p) {
  if (s->inflight == 0) {
    s->tx_head = s->tx_tail = p->seq;
  } else {
    udx_pkt_t *tail = udx__pkt(s, s->tx_tail);
    if (tail)
      tail->tx_next = p->seq;
    p->tx_prev = s->tx_tail;
    s->tx_tail = p->seq;
  }
  p->flags |= UDX_PKT_INFLIGHT;
  s->inflight++;
  udx__path_inflight_add(s, 1);
  s->inflight_bytes += UDX_HEADER_SIZE + p->padding + p->len;
}

void
udx__tx_list_remove (udx_stream_t *s, udx_pkt_t *p) {
  if (!(p->flags & UDX_PKT_INFLIGHT))
    return;
  if (s->inflight > 1) {
    if (p->seq == s->tx_head) {
      s->tx_head = p->tx_next;
    } else if (p->seq == s->tx_tail) {
      s->tx_tail = p->tx_prev;
    } else {
      udx_pkt_t *prev = udx__pkt(s, p->tx_prev);
      udx_pkt_t *next = udx__pkt(s, p->tx_next);
      if (prev)
        prev->tx_next = p->tx_next;
      if (next)
        next->tx_prev = p->tx_prev;
    }
  }
  p->flags &= ~UDX_PKT_INFLIGHT;
  s->inflight--;
  udx__path_inflight_add(s, -1);
  s->inflight_bytes -= UDX_HEADER_SIZE + p->padding + p->len;
}

// --- retransmission queue (FIFO of seqs; stale entries are skipped)

void
udx__retransmit_queue_push (udx_stream_t *s, udx_pkt_t *p) {
  if (p->flags & UDX_PKT_IN_RTXQ)
    return;
  if (s->rtxq_len == s->rtxq_cap) {
    uint32_t cap = s->rtxq_cap ? s->rtxq_cap * 2 : 64;
    uint32_t *q = malloc(cap * sizeof(*q));
    if (q == NULL)
      return; // stays LOST; the next RTO requeues it
    for (uint32_t i = 0; i < s->rtxq_len; i++) {
      q[i] = s->rtxq[(s->rtxq_head + i) & (s->rtxq_cap - 1)];
    }
    free(s->rtxq);
    s->rtxq = q;
    s->rtxq_cap = cap;
    s->rtxq_head = 0;
  }
  s->rtxq[(s->rtxq_head + s->rtxq_len) & (s->rtxq_cap - 1)] = p->seq;
  s->rtxq_len++;
  p->flags |= UDX_PKT_IN_RTXQ;
}

static udx_pkt_t *
udx__retransmit_queue_peek (udx_stream_t *s) {
  while (s->rtxq_len > 0) {
    uint32_t seq = s->rtxq[s->rtxq_head];
    udx_pkt_t *p = udx__pkt(s, seq);
    if (p && (p->flags & UDX_PKT_LOST))
      return p;
    if (p)
      p->flags &= ~UDX_PKT_IN_RTXQ;
    s->rtxq_head = (s->rtxq_head + 1) & (s->rtxq_cap - 1);
    s->rtxq_len--;
  }
  return NULL;
}

static void
udx__retransmit_queue_pop (udx_stream_t *s, udx_pkt_t *p) {
  p->flags &= ~UDX_PKT_IN_RTXQ;
  s->rtxq_head = (s->rtxq_head + 1) & (s->rtxq_cap - 1);
  s->rtxq_len--;
}

// --- outgoing ring

static bool
udx__pkts_reserve (udx_stream_t *s) {
  uint32_t used = s->snd_nxt - s->snd_una;
  if (used < s->pkts_cap)
    return true;
  if (s->pkts_cap >= UDX_PKTS_MAX_CAP)
    return false;

  uint32_t cap = s->pkts_cap ? s->pkts_cap * 2 : 64;
  udx_pkt_t *pkts = calloc(cap, sizeof(*pkts));
  if (pkts == NULL)
    return false;
  for (uint32_t seq = s->snd_una; seq != s->snd_nxt; seq++) {
    udx_pkt_t *p = udx__pkt(s, seq);
    if (p)
      pkts[seq & (cap - 1)] = *p;
  }
  free(s->pkts);
  s->pkts = pkts;
  s->pkts_cap = cap;
  return true;
}

// --- transmission

static void
udx__transmit (udx_stream_t *s, udx_pkt_t *p, bool retransmit) {
  udx__rate_check_app_limited(s);

  if (p->transmits < 255)
    p->transmits++;
  if (retransmit) {
    p->flags |= UDX_PKT_RETRANSMITTED;
    s->stats.retransmits++;
  }
  p->time_sent = s->now;
  p->tx_order = ++s->tx_count;
  udx__rate_on_send(s, p);

  if (p->flags & UDX_PKT_LOST) {
    p->flags &= ~UDX_PKT_LOST;
    s->lost_pending--;
  }
  udx__tx_list_append(s, p);

  if (p->remote > 1 || !s->remote[p->remote].valid)
    p->remote = s->cur_remote;
  const udx_remote_t *to = &s->remote[p->remote];

  // Retransmissions keep seq and payload but carry the current ack and rwnd.
  uint8_t hdr[UDX_HEADER_SIZE];
  udx__header(s, hdr, p->type, p->padding, to, p->seq);

  struct iovec iov[4];
  int n = 0;
  if (p->padding) {
    iov[n].iov_base = (void *) udx__zeros;
    iov[n].iov_len = p->padding;
    n++;
  }
  if (p->len)
    n += udx__bufq_iov(&s->sndq, p->off, p->len, iov + n, 4 - n);

  // The payload is read from the send queue (and the padding from static
  // zeros) when the host sends it: no copy here.
  udx__send_emit(s, p->remote, hdr, sizeof(hdr), iov, n, true);
  udx__pacing_on_send(s, UDX_HEADER_SIZE + p->padding + p->len);
}

static bool
udx__end_pending (const udx_stream_t *s) {
  return (s->status & (UDX_S_ENDING | UDX_S_END_SENT)) == UDX_S_ENDING;
}

static uint32_t
udx__rwnd_pkts (const udx_stream_t *s) {
  if (s->send_rwnd == 0)
    return 0;
  uint32_t n = s->send_rwnd / udx__max_payload(s);
  return n ? n : 1;
}

static bool
udx__window_allows_new (const udx_stream_t *s) {
  return s->inflight < udx__min_u32(s->cwnd, udx__rwnd_pkts(s));
}

static bool
udx__has_new (const udx_stream_t *s) {
  return s->sndq.end > s->snd_pkt_off || udx__end_pending(s);
}

// Cuts the next packet from the send queue and sends it. A TLP probe ignores
// cwnd but not the peer's window (RFC 8985 7.3).
static bool
udx__send_new (udx_stream_t *s, bool tlp) {
  if (!udx__has_new(s))
    return false;
  if (tlp) {
    if (s->inflight >= udx__rwnd_pkts(s))
      return false;
  } else if (!udx__window_allows_new(s) || s->tokens <= 0 || !udx__policy_allows(s) || !udx__path_allows(s)) {
    return false;
  }
  if (!udx__pkts_reserve(s))
    return false;

  bool was_idle = s->snd_una == s->snd_nxt;
  uint64_t avail = s->sndq.end - s->snd_pkt_off;
  uint32_t len = (uint32_t) udx__min_u64(avail, udx__max_payload(s));

  udx_pkt_t *p = &s->pkts[s->snd_nxt & (s->pkts_cap - 1)];
  memset(p, 0, sizeof(*p));
  p->seq = s->snd_nxt;
  p->off = s->snd_pkt_off;
  p->len = (uint16_t) len;
  p->type = len ? UDX_HEADER_DATA : 0;
  p->flags = UDX_PKT_USED;
  p->remote = s->cur_remote;

  if (udx__end_pending(s) && s->snd_pkt_off + len == s->end_off) {
    p->type |= UDX_HEADER_END;
    s->status |= UDX_S_END_SENT;
  }

  // RFC 8899: pad a full-enough DATA packet up to the probe size.
  if (s->mtu_probe_wanted && !tlp && !(s->status & UDX_S_CHANGING) && (p->type & UDX_HEADER_DATA)) {
    int pad = udx__mtu_padding(s, UDX_HEADER_SIZE + len);
    if (pad >= 0) {
      p->padding = (uint8_t) pad;
      p->flags |= UDX_PKT_PROBE;
      s->mtu_probe_count++;
      s->mtu_probe_wanted = false;
    }
  }

  if (was_idle)
    s->progress_at = s->now;

  udx__transmit(s, p, false);
  udx__policy_on_send(s, len);
  if (!tlp && s->path)
    udx__path_on_send(s);
  s->snd_pkt_off += len;
  s->snd_nxt++;

  if (was_idle)
    udx__bbr_on_transmit_start(s);

  if (tlp) {
    s->tlp_is_retrans = false;
    s->tlp_in_flight = true;
    s->tlp_end_seq = p->seq;
    s->tlp_permitted = false;
  }

  udx__arm_timers_after_send(s, !tlp);
  return true;
}

static void
udx__retransmit (udx_stream_t *s, udx_pkt_t *p) {
  bool was_empty = s->inflight == 0;
  udx__tx_list_remove(s, p);
  udx__transmit(s, p, true);
  if (was_empty)
    udx__bbr_on_transmit_start(s);
  udx__arm_timers_after_send(s, false);
}

// TLP (RFC 8985 7.3): new data if the peer's window allows, else the last
// packet again.
bool
udx__tlp_send (udx_stream_t *s) {
  if (udx__send_new(s, true))
    return true;

  udx_pkt_t *p = udx__pkt(s, s->snd_nxt - 1);
  if (p == NULL || (p->flags & (UDX_PKT_LOST | UDX_PKT_SACKED))) {
    // The last packet arrived: probe with the oldest transmission in flight.
    p = s->inflight ? udx__pkt(s, s->tx_head) : NULL;
    if (p == NULL)
      return false;
  }

  udx__retransmit(s, p);
  s->tlp_is_retrans = true;
  s->tlp_in_flight = true;
  s->tlp_end_seq = p->seq;
  s->tlp_permitted = false;
  return true;
}

void
udx__send_packets (udx_stream_t *s) {
  if (!(s->status & UDX_S_CONNECTED) || udx__stream_dead(s))
    return;

  udx__pacing_refill(s);

  // Retransmissions first: gated by cwnd and pacing, not by rwnd (the peer
  // may have shrunk it while they were in flight).
  while (s->lost_pending > 0 && s->inflight < s->cwnd && s->tokens > 0) {
    udx_pkt_t *p = udx__retransmit_queue_peek(s);
    if (p == NULL || !udx__path_allows(s))
      break;
    udx__retransmit_queue_pop(s, p);
    udx__retransmit(s, p);
    if (s->path)
      udx__path_on_send(s);
  }

  while (udx__send_new(s, false)) {
  }

  // Out of tokens with something to send: wake when the debt is paid.
  bool want = (s->lost_pending > 0 && s->inflight < s->cwnd) || (udx__has_new(s) && udx__window_allows_new(s));
  if (!want)
    udx__schedule_tlp_stalled(s);
  if (want && s->tokens <= 0 && s->pacing_rate > 0) {
    uint64_t wait = ((uint64_t) (1 - s->tokens) * UDX_US_PER_S + s->pacing_rate - 1) / s->pacing_rate;
    s->pace_at = s->now + (wait ? wait : 1);
  } else {
    s->pace_at = UDX_NEVER;
  }
  udx__policy_after_send(s, udx__has_new(s));
  if (s->path)
    udx__path_after_send(s);

  // Zero window with data waiting and nothing in flight: probe (ZWP).
  if (s->send_rwnd == 0 && s->snd_una == s->snd_nxt && udx__has_new(s)) {
    if (s->zwp_at == UDX_NEVER)
      s->zwp_at = s->now + s->rto;
  } else {
    s->zwp_at = UDX_NEVER;
    s->zwp_backoff = 0;
  }
}
