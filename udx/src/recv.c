// The receive path: header checks, in-order and out-of-order data, the
// read-buffer limit, END/DESTROY/MESSAGE/HEARTBEAT, and the ACK decision.

#include <stdlib.h>
#include <string.h>

#include "stream.h"
#include "wire.h"

// Coalesced ACKs: at most this many in-order packets wait for one ACK, so
// a long receive batch still clocks the sender (loopback with GRO: ~1 per
// 64 KiB, as Linux TCP acks a GRO super-packet).
#define UDX_ACK_EVERY 32

// How far above rcv_nxt a packet may be and still be buffered: the peer
// cannot have more packets in flight than our window in packets (counting
// payloads of at least 1024 bytes, below any real MTU) plus a margin. Beyond
// that a seq is dropped unacked, so a far-ahead seq cannot inflate buffers.
static uint32_t
udx__ooo_window (const udx_stream_t *s) {
  uint64_t bytes = s->read_limit ? udx__min_u64(s->read_limit, s->recv_rwnd_max) : s->recv_rwnd_max;
  uint64_t w = bytes / 1024 + 64;
  if (w > (1u << 16))
    w = 1u << 16;
  return (uint32_t) w;
}

static udx_ooo_t *
udx__ooo_slot (udx_stream_t *s, uint32_t seq) {
  if (s->ooo_cap == 0)
    return NULL;
  udx_ooo_t *o = &s->ooo[seq & (s->ooo_cap - 1)];
  return (o->buf && o->seq == seq) ? o : NULL;
}

// The buffer of an out-of-order slot whose bytes are dropped (a closing
// stream reads nothing): it keeps the slot's place, and costs no 2 KiB
// buffer per packet, however small the packets a peer sends.
// Never read or written (its slots hold 0 bytes): only its address counts,
// so one constant serves every stream and thread.
static const uint8_t udx__no_bytes_mark[1] = {0};
#define udx__no_bytes ((uint8_t *) udx__no_bytes_mark)

static void
udx__ooo_put (udx_stream_t *s, uint8_t *buf) {
  if (buf != udx__no_bytes)
    udx__freelist_put(&s->pool->slots, buf);
}

void
udx__ooo_drop_bytes (udx_stream_t *s) {
  for (uint32_t i = 0; i < s->ooo_cap; i++) {
    udx_ooo_t *o = &s->ooo[i];
    if (o->buf == NULL || o->buf == udx__no_bytes)
      continue;
    udx__ooo_put(s, o->buf);
    o->buf = udx__no_bytes;
    s->ooo_bytes -= o->len;
    o->len = 0;
  }
}

void
udx__ooo_free (udx_stream_t *s) {
  for (uint32_t i = 0; i < s->ooo_cap; i++) {
    if (s->ooo[i].buf)
      udx__ooo_put(s, s->ooo[i].buf);
  }
  free(s->ooo);
  s->ooo = NULL;
}

// Grows the ring until seq maps to a free slot (distinct seqs within the
// window never collide once cap exceeds the window).
static udx_ooo_t *
udx__ooo_reserve (udx_stream_t *s, uint32_t seq) {
  for (;;) {
    if (s->ooo_cap) {
      udx_ooo_t *o = &s->ooo[seq & (s->ooo_cap - 1)];
      if (o->buf == NULL)
        return o;
    }
    uint32_t cap = s->ooo_cap ? s->ooo_cap * 2 : 64;
    if (cap > 2 * (1u << 16))
      return NULL;
    udx_ooo_t *ring = calloc(cap, sizeof(*ring));
    if (ring == NULL)
      return NULL;
    for (uint32_t i = 0; i < s->ooo_cap; i++) {
      if (s->ooo[i].buf)
        ring[s->ooo[i].seq & (cap - 1)] = s->ooo[i];
    }
    free(s->ooo);
    s->ooo = ring;
    s->ooo_cap = cap;
  }
}

// --- received ranges above rcv_nxt (for SACK), sorted, disjoint

static void
udx__ranges_add (udx_stream_t *s, uint32_t seq) {
  uint32_t n = s->nranges;
  uint32_t i = 0;
  // first range whose end is >= seq
  while (i < n && udx__seq_lt(s->ranges[i].end, seq))
    i++;

  if (i < n && udx__seq_le(s->ranges[i].start, seq) && udx__seq_lt(seq, s->ranges[i].end))
    return;

  if (i < n && s->ranges[i].end == seq) {
    s->ranges[i].end = seq + 1;
    if (i + 1 < n && s->ranges[i + 1].start == seq + 1) {
      s->ranges[i].end = s->ranges[i + 1].end;
      memmove(&s->ranges[i + 1], &s->ranges[i + 2], (n - i - 2) * sizeof(udx_range_t));
      s->nranges--;
    }
    return;
  }
  if (i < n && s->ranges[i].start == seq + 1) {
    s->ranges[i].start = seq;
    return;
  }

  if (n == s->ranges_cap) {
    uint32_t cap = s->ranges_cap ? s->ranges_cap * 2 : 16;
    udx_range_t *r = realloc(s->ranges, cap * sizeof(*r));
    if (r == NULL)
      return; // SACK info only; the data itself is kept
    s->ranges = r;
    s->ranges_cap = cap;
  }
  memmove(&s->ranges[i + 1], &s->ranges[i], (n - i) * sizeof(udx_range_t));
  s->ranges[i].start = seq;
  s->ranges[i].end = seq + 1;
  s->nranges++;
}

static void
udx__ranges_trim (udx_stream_t *s) {
  uint32_t i = 0;
  while (i < s->nranges && udx__seq_le(s->ranges[i].end, s->rcv_nxt))
    i++;
  if (i < s->nranges && udx__seq_lt(s->ranges[i].start, s->rcv_nxt))
    s->ranges[i].start = s->rcv_nxt;
  if (i > 0) {
    memmove(&s->ranges[0], &s->ranges[i], (s->nranges - i) * sizeof(udx_range_t));
    s->nranges -= i;
  }
}

// In-order bytes (or the END) at rcv_nxt.
static bool
udx__deliver (udx_stream_t *s, uint8_t type, const uint8_t *data, size_t len) {
  bool closing = (s->status & UDX_S_CLOSING) != 0; // nobody reads: dropped
  if ((type & UDX_HEADER_DATA) && len > 0 && !closing) {
    if (udx__bufq_append(&s->rdq, s->pool, data, len) < 0)
      return false;
  }
  if (type & UDX_HEADER_END) {
    s->status |= UDX_S_ENDED_REMOTE;
    if (closing)
      s->status |= UDX_S_EOF_READ | UDX_S_EOF_SIGNALED;
  }
  s->rcv_nxt++;
  return true;
}

static uint64_t
udx__held (const udx_stream_t *s) {
  return udx__bufq_len(&s->rdq) + s->ooo_bytes;
}

// What a stream holds for its reader: the read limit, or else the maximum
// window (which libudx only advertises; a peer that respects it never
// notices the difference, one that does not cannot grow our buffers).
static uint64_t
udx__hold_limit (const udx_stream_t *s) {
  return s->read_limit ? s->read_limit : s->recv_rwnd_max;
}

// Returns 1 if the packet filled a gap or arrived in order, 2 if it was
// buffered out of order, 0 if it was a duplicate or dropped.
static int
udx__recv_data (udx_stream_t *s, const udx_wire_pkt_t *pkt) {
  uint32_t seq = pkt->seq;
  int32_t d = udx__seq_diff(seq, s->rcv_nxt);
  size_t len = (pkt->type & UDX_HEADER_DATA) ? pkt->data_len : 0;

  if (d < 0)
    return 0; // old duplicate: acked again

  if (s->status & UDX_S_ENDED_REMOTE)
    return 0; // nothing after the END

  if (s->status & UDX_S_ENDING_REMOTE) {
    // nothing beyond the END seq, and no second END elsewhere
    if (udx__seq_gt(seq, s->remote_end_seq))
      return 0;
    if ((pkt->type & UDX_HEADER_END) && seq != s->remote_end_seq)
      return 0;
  }

  if ((uint32_t) d >= udx__ooo_window(s)) {
    s->stats.dropped_rwnd++;
    return 0;
  }

  if (len > UDX_SLOT_SIZE) {
    s->stats.malformed++;
    return 0;
  }

  if (d == 0) {
    // Hold limit: accept while there is room, or when the reader has nothing
    // to consume (so out-of-order data can never wedge the stream). Holding
    // stays within limit + one packet.
    if (udx__held(s) >= udx__hold_limit(s) && udx__bufq_len(&s->rdq) > 0) {
      s->stats.dropped_rwnd++;
      return 0;
    }
    if (!udx__deliver(s, pkt->type, pkt->data, len))
      return 0;
    if (pkt->type & UDX_HEADER_END) {
      s->status |= UDX_S_ENDING_REMOTE;
      s->remote_end_seq = seq;
    }

    // Pull in what was waiting for this gap.
    udx_ooo_t *o;
    while ((o = udx__ooo_slot(s, s->rcv_nxt)) != NULL) {
      uint8_t *buf = o->buf;
      o->buf = NULL;
      s->ooo_count--;
      s->ooo_bytes -= o->len;
      bool ok = udx__deliver(s, o->type, buf, o->len);
      udx__ooo_put(s, buf);
      if (!ok)
        break;
    }
    udx__ranges_trim(s);
    return 1;
  }

  if (udx__ooo_slot(s, seq))
    return 0; // duplicate

  if (udx__held(s) + len > udx__hold_limit(s)) {
    s->stats.dropped_rwnd++;
    return 0;
  }

  udx_ooo_t *o = udx__ooo_reserve(s, seq);
  if (o == NULL)
    return 0;
  if (s->status & UDX_S_CLOSING)
    len = 0; // its place only: the bytes would be dropped on delivery
  uint8_t *buf = len ? udx__freelist_get(&s->pool->slots) : udx__no_bytes;
  if (buf == NULL)
    return 0;
  if (len)
    memcpy(buf, pkt->data, len);
  o->buf = buf;
  o->seq = seq;
  o->len = (uint16_t) len;
  o->type = pkt->type & UDX_FLAGS_DATA_OR_END;
  s->ooo_count++;
  s->ooo_bytes += len;
  if (pkt->type & UDX_HEADER_END) {
    s->status |= UDX_S_ENDING_REMOTE;
    s->remote_end_seq = seq;
  }
  udx__ranges_add(s, seq);
  return 2;
}

void
udx__stream_recv (udx_stream_t *s, const uint8_t *buf, size_t len, uint64_t now) {
  if (udx__stream_dead(s))
    return;
  udx__stream_clock(s, now);

  udx_wire_pkt_t pkt;
  int r = udx__wire_decode(buf, len, &pkt);
  if (r != UDX_WIRE_OK) {
    s->stats.malformed++;
    return;
  }

  s->stats.packets_received++;
  s->stats.bytes_received += len;
  s->last_rx = now;

  uint8_t type = pkt.type;

  // HEARTBEAT: answer with an ACK; its ack and rwnd fields are not used.
  if (type & UDX_HEADER_HEARTBEAT) {
    udx__send_ack(s);
    return;
  }

  if ((s->status & UDX_S_HB_OUT) && !(type & (UDX_FLAGS_DATA_OR_END | UDX_HEADER_MESSAGE | UDX_HEADER_DESTROY))) {
    s->status = (s->status & ~UDX_S_HB_OUT) | UDX_S_HB_ANSWERED;
  }

  bool data_in_flight = s->snd_una != s->snd_nxt;
  bool was_empty = udx__bufq_len(&s->rdq) == 0;
  bool ack_now = false;

  if (type & UDX_FLAGS_DATA_OR_END) {
    bool had_gap = s->nranges > 0;
    int got = udx__recv_data(s, &pkt);
    // An ACK goes out for every DATA/END (as libudx), or, when acks are
    // coalesced, once per receive batch and every UDX_ACK_EVERY in-order
    // packets; at once for a gap, a duplicate, a filled gap and END
    // (RFC 5681 4.2: out-of-order data is acked immediately).
    if (s->ack_policy == UDX_ACK_EACH || got != 1 || (type & UDX_HEADER_END) || had_gap || s->nranges > 0 || ++s->acks_owed >= UDX_ACK_EVERY) {
      ack_now = true;
    } else {
      s->status |= UDX_S_ACK_NEEDED;
      s->host->wake(s);
    }
  }

  if ((type & UDX_HEADER_DESTROY) && udx__seq_ge(pkt.seq, s->rcv_nxt)) {
    udx__stream_close(s, UDX_ERR_CONNRESET);
    return;
  }

  // after a graceful close nobody reads them: dropped
  if ((type & UDX_HEADER_MESSAGE) && s->cb.on_message && !(s->status & UDX_S_CLOSING)) {
    if (!UDX_CALLBACK(s, s->cb.on_message(s, pkt.data, pkt.data_len)))
      return;
  }

  if (s->status & UDX_S_CONNECTED) {
    udx__process_ack(s, &pkt, data_in_flight);
    if (udx__stream_dead(s))
      return;
  }

  if (ack_now)
    udx__send_ack(s);

  // Edge-triggered readable: empty -> non-empty, and once at EOF.
  bool eof = (s->status & UDX_S_ENDED_REMOTE) && !(s->status & UDX_S_EOF_SIGNALED) && udx__bufq_len(&s->rdq) == 0;
  bool edge = was_empty && udx__bufq_len(&s->rdq) > 0;
  if (s->status & UDX_S_ENDED_REMOTE) {
    if (edge || eof)
      s->status |= UDX_S_EOF_SIGNALED;
  }
  if ((edge || eof) && s->cb.on_readable) {
    if (!UDX_CALLBACK(s, s->cb.on_readable(s)))
      return;
  }

  udx__stream_check_close(s);
  if (udx__stream_dead(s))
    return;

  udx__send_packets(s);
}
