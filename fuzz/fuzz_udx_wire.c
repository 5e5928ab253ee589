// The UDX packet decoder: any bytes decode to "not UDX", "malformed" or a
// packet whose every part lies inside the datagram, and peek agrees.
#include <stdlib.h>
#include <string.h>

#include "../udx/src/wire.h"

#define REQUIRE(c) \
  do {             \
    if (!(c))      \
      abort();     \
  } while (0)

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  udx_wire_pkt_t p;
  uint32_t id = 0;
  int peek = udx__wire_peek(data, size, &id);
  int r = udx__wire_decode(data, size, &p);
  REQUIRE(r == UDX_WIRE_OK || r == UDX_WIRE_NOT_UDX || r == UDX_WIRE_MALFORMED);
  REQUIRE(peek == (r != UDX_WIRE_NOT_UDX));
  if (r != UDX_WIRE_OK)
    return 0;

  const uint8_t *end = data + size;
  REQUIRE(p.id == id);
  REQUIRE(p.data >= data + UDX_HEADER_SIZE && p.data <= end);
  REQUIRE(p.data + p.data_len == end);
  REQUIRE((size_t) (p.data - data) == (size_t) UDX_HEADER_SIZE + p.data_offset);
  if (p.type & UDX_HEADER_SACK) {
    REQUIRE(p.sacks == data + UDX_HEADER_SIZE);
    REQUIRE(p.sacks + 8 * (size_t) p.nsacks <= end);
  } else {
    REQUIRE(p.nsacks == 0);
  }
  // Touch every byte the decoder points at (ASan checks the bounds).
  uint32_t acc = 0;
  for (uint32_t i = 0; i < p.nsacks; i++) {
    uint32_t s, e;
    udx__wire_sack(&p, i, &s, &e);
    acc ^= s ^ e;
  }
  for (size_t i = 0; i < p.data_len; i++)
    acc += p.data[i];
  (void) acc;

  // The header encodes back to the same 20 bytes.
  uint8_t hdr[UDX_HEADER_SIZE];
  udx__wire_header(hdr, p.type, p.data_offset, p.id, p.rwnd, p.seq, p.ack);
  REQUIRE(memcmp(hdr, data, UDX_HEADER_SIZE) == 0);
  return 0;
}
