#include <string.h>

#include "wire.h"

int
udx__wire_peek (const uint8_t *buf, size_t len, uint32_t *id) {
  if (len < UDX_HEADER_SIZE || buf[0] != UDX_MAGIC || buf[1] != UDX_VERSION)
    return 0;
  *id = udx__read_u32(buf + 4);
  return 1;
}

int
udx__wire_decode (const uint8_t *buf, size_t len, udx_wire_pkt_t *out) {
  if (len < UDX_HEADER_SIZE || buf[0] != UDX_MAGIC || buf[1] != UDX_VERSION) {
    return UDX_WIRE_NOT_UDX;
  }

  out->type = buf[UDX_WIRE_TYPE_OFFSET];
  out->data_offset = buf[3];
  out->id = udx__read_u32(buf + 4);
  out->rwnd = udx__read_u32(buf + 8);
  out->seq = udx__read_u32(buf + 12);
  out->ack = udx__read_u32(buf + 16);

  size_t payload_len = len - UDX_HEADER_SIZE;
  const uint8_t *payload = buf + UDX_HEADER_SIZE;

  // The payload always starts data_offset bytes after the header (SACK area
  // or MTU-probe padding); an offset past the end is malformed.
  if (out->data_offset > payload_len) {
    out->sacks = NULL;
    out->nsacks = 0;
    out->data = NULL;
    out->data_len = 0;
    return UDX_WIRE_MALFORMED;
  }

  out->sacks = NULL;
  out->nsacks = 0;

  if (out->type & UDX_HEADER_SACK) {
    // Two forms: ranges in the first data_offset bytes (piggy-backed), or the
    // whole payload (pure ACK, data_offset 0). A remainder is ignored.
    size_t area = (out->data_offset > 0 && out->data_offset < payload_len) ? out->data_offset : payload_len;
    out->sacks = payload;
    out->nsacks = (uint32_t) (area / 8);
  }

  out->data = payload + out->data_offset;
  out->data_len = payload_len - out->data_offset;
  return UDX_WIRE_OK;
}

void
udx__wire_header (uint8_t out[UDX_HEADER_SIZE], uint8_t type, uint8_t data_offset, uint32_t id, uint32_t rwnd, uint32_t seq, uint32_t ack) {
  out[0] = UDX_MAGIC;
  out[1] = UDX_VERSION;
  out[2] = type;
  out[3] = data_offset;
  udx__write_u32(out + 4, id);
  udx__write_u32(out + 8, rwnd);
  udx__write_u32(out + 12, seq);
  udx__write_u32(out + 16, ack);
}
