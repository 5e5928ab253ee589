// In-band path MTU search (RFC 8899 style, as libudx): start at 1200, probe
// upwards in steps of 32 by padding a full DATA packet through data_offset,
// stop at the link MTU (at most 1500) or after 3 lost probes in a row.

#include "stream.h"

void
udx__mtu_reset (udx_stream_t *s, int link_mtu) {
  s->mtu = UDX_MTU_BASE;
  s->mtu_state = UDX_MTU_STATE_BASE;
  s->mtu_probe_count = 0;
  s->mtu_probe_size = UDX_MTU_BASE; // the first probe confirms the base
  s->mtu_probe_wanted = false;

  if (link_mtu <= 0 || link_mtu > UDX_MTU_MAX) {
    s->mtu_max = UDX_MTU_MAX;
  } else if (link_mtu <= UDX_MTU_BASE) {
    s->mtu_max = (uint16_t) link_mtu;
    s->mtu_state = UDX_MTU_STATE_COMPLETE;
  } else {
    s->mtu_max = (uint16_t) link_mtu;
  }
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
    s->mtu_probe_size = (uint16_t) udx__min_u32(s->mtu_probe_size + UDX_MTU_STEP, s->mtu_max);
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
    if (s->mtu_probe_count >= UDX_MTU_PROBES) {
      s->mtu_state = UDX_MTU_STATE_COMPLETE;
    } else {
      s->mtu_probe_wanted = true;
    }
  }
}
