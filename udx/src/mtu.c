// In-band path MTU search (RFC 8899 style): start at 1200 and probe upwards
// by padding a full DATA packet through data_offset. libudx steps by 32
// (ten round trips to 1500, while Startup sends small packets); here a probe
// first jumps by 224 bytes (the most a 255-byte padding allows, in steps of
// 32): 1200 -> 1424 -> 1500 in two round trips. The first lost jump falls
// back to steps of 32 from the confirmed size (RFC 8899 5.3 leaves the
// search to the sender). Stops at the link MTU (at most 1500) or after 3
// lost probes in a row. A peer that acks every packet (libudx) is searched
// further, to a 2048-byte UDP payload, where the link allows it (loopback).

#include "stream.h"

void
udx__mtu_reset (udx_stream_t *s, int link_mtu) {
  s->mtu_link = link_mtu;
  s->mtu = UDX_MTU_BASE;
  s->mtu_state = UDX_MTU_STATE_BASE;
  s->mtu_probe_count = 0;
  s->mtu_probe_wanted = false;
  s->mtu_stepping = false;

  if (link_mtu <= 0 || link_mtu > UDX_MTU_MAX) {
    s->mtu_max = UDX_MTU_MAX;
  } else if (link_mtu <= UDX_MTU_BASE) {
    s->mtu_max = (uint16_t) link_mtu;
    s->mtu_state = UDX_MTU_STATE_COMPLETE;
  } else {
    s->mtu_max = (uint16_t) link_mtu;
  }
  s->mtu_probe_size = (uint16_t) udx__min_u32(UDX_MTU_BASE + UDX_MTU_JUMP, s->mtu_max);
}

// The first delivered packet starts the search.
void
udx__mtu_on_ack (udx_stream_t *s) {
  if (s->mtu_state == UDX_MTU_STATE_BASE) {
    s->mtu_state = UDX_MTU_STATE_SEARCH;
    s->mtu_probe_wanted = true;
  }
}

// Padding that makes a UDX datagram of udx_len bytes an IP packet of the
// probe size, or -1 if it cannot (too large a gap, or too big already).
int
udx__mtu_padding (udx_stream_t *s, size_t udx_len) {
  size_t ipudp = s->remote[s->cur_remote].ipv6 ? 48 : 28;
  long pad = (long) s->mtu_probe_size - (long) (udx_len + ipudp);
  if (pad < 0 || pad > 255)
    return -1;
  return (int) pad;
}

void
udx__mtu_on_probe_acked (udx_stream_t *s, udx_pkt_t *p) {
  if (!(p->flags & UDX_PKT_PROBE))
    return;
  if (s->mtu_state != UDX_MTU_STATE_SEARCH || s->mtu_probe_count == 0)
    return;

  s->mtu_probe_count = 0;
  s->mtu = s->mtu_probe_size;
  s->stats.mtu = s->mtu;

  if (s->mtu_probe_size >= s->mtu_max) {
    s->mtu_state = UDX_MTU_STATE_COMPLETE;
  } else {
    uint32_t step = s->mtu_stepping ? UDX_MTU_STEP : UDX_MTU_JUMP;
    s->mtu_probe_size = (uint16_t) udx__min_u32(s->mtu_probe_size + step, s->mtu_max);
    s->mtu_probe_wanted = true;
  }
}

// A lost probe goes out again without padding.
void
udx__mtu_on_probe_lost (udx_stream_t *s, udx_pkt_t *p) {
  if (!(p->flags & UDX_PKT_PROBE))
    return;
  p->flags &= ~UDX_PKT_PROBE;
  p->padding = 0;

  if (s->mtu_state == UDX_MTU_STATE_SEARCH) {
    if (!s->mtu_stepping && s->mtu_probe_size > s->mtu + UDX_MTU_STEP) {
      // the jump was too far: search in steps from what works
      s->mtu_stepping = true;
      s->mtu_probe_size = (uint16_t) (s->mtu + UDX_MTU_STEP);
      s->mtu_probe_count = 0;
      s->mtu_probe_wanted = true;
    } else if (s->mtu_probe_count >= UDX_MTU_PROBES) {
      s->mtu_state = UDX_MTU_STATE_COMPLETE;
    } else {
      s->mtu_probe_wanted = true;
    }
  }
}

bool
udx__acks_each (const udx_stream_t *s) {
  return s->ack_span_samples >= UDX_ACK_EACH_SAMPLES && s->ack_span16 < 2 * 16;
}

bool
udx__stream_ack_pausable (const udx_stream_t *s, uint8_t type) {
  uint8_t busy = UDX_FLAGS_DATA_OR_END | UDX_HEADER_MESSAGE | UDX_HEADER_DESTROY | UDX_HEADER_HEARTBEAT;
  return !(type & busy) && (s->status & UDX_S_CONNECTED) && !udx__stream_dead(s) && s->snd_una != s->snd_nxt && udx__acks_each(s);
}

// A libudx receiver pays per datagram (a recvmsg, a callback, an ACK sent):
// 2048-byte datagrams carry 40% more per packet than 1500-byte ones. It reads
// each into a 2048-byte buffer, so that is the ceiling; a peer that coalesces
// ACKs may read into less and keeps the 1500 cap. Only once the search ended
// at that cap, on a link whose MTU is larger; the new sizes are probed
// (and a lost probe ends the search) as below 1500.
void
udx__mtu_widen (udx_stream_t *s) {
  if (s->mtu_state != UDX_MTU_STATE_COMPLETE || s->mtu != UDX_MTU_MAX || s->mtu_max != UDX_MTU_MAX)
    return;
  if (s->mtu_link <= UDX_MTU_MAX || !udx__acks_each(s))
    return;
  uint32_t ipudp = s->remote[s->cur_remote].ipv6 ? 48 : 28;
  s->mtu_max = (uint16_t) udx__min_u32((uint32_t) s->mtu_link, UDX_PEER_DGRAM_MAX + ipudp);
  s->mtu_state = UDX_MTU_STATE_SEARCH;
  s->mtu_probe_count = 0;
  s->mtu_stepping = false;
  s->mtu_probe_size = (uint16_t) udx__min_u32(s->mtu + UDX_MTU_JUMP, s->mtu_max);
  s->mtu_probe_wanted = true;
}
