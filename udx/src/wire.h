#ifndef UDX_WIRE_H
#define UDX_WIRE_H

// The UDX wire format: a 20-byte little-endian header, optional SACK ranges,
// optional padding (data_offset) and payload.

#include "internal.h"

#define UDX_WIRE_OK        0
#define UDX_WIRE_NOT_UDX   1 // too short, wrong magic or version: a raw datagram
#define UDX_WIRE_MALFORMED 2 // UDX header but inconsistent lengths

#define UDX_WIRE_TYPE_OFFSET 2 // the header's type byte

// SACK ranges we send in one ACK: as many as fit a base-MTU packet over IPv6
// (1200 - 68 bytes of headers) / 8.
#define UDX_WIRE_MAX_SACKS ((UDX_MTU_BASE - UDX_IPV6_OVERHEAD) / 8)

typedef struct udx_wire_pkt_s {
  uint8_t type;
  uint8_t data_offset;
  uint32_t id;
  uint32_t rwnd;
  uint32_t seq;
  uint32_t ack;
  const uint8_t *sacks; // nsacks ranges of 8 bytes: start, end (half open)
  uint32_t nsacks;
  const uint8_t *data;
  size_t data_len;
} udx_wire_pkt_t;

// Quick check used by the socket demultiplexer: 1 and the id if buf looks
// like a UDX datagram, 0 otherwise.
int
udx__wire_peek (const uint8_t *buf, size_t len, uint32_t *id);

int
udx__wire_decode (const uint8_t *buf, size_t len, udx_wire_pkt_t *out);

void
udx__wire_header (uint8_t out[UDX_HEADER_SIZE], uint8_t type, uint8_t data_offset, uint32_t id, uint32_t rwnd, uint32_t seq, uint32_t ack);

static inline void
udx__wire_sack (const udx_wire_pkt_t *p, uint32_t i, uint32_t *start, uint32_t *end) {
  *start = udx__read_u32(p->sacks + 8 * i);
  *end = udx__read_u32(p->sacks + 8 * i + 4);
}

static inline void
udx__wire_put_sack (uint8_t *out, uint32_t i, uint32_t start, uint32_t end) {
  udx__write_u32(out + 8 * i, start);
  udx__write_u32(out + 8 * i + 4, end);
}

#endif
