// Wire codec: header layout (little endian), flags, data_offset, both SACK forms.

#include "../src/wire.h"
#include "test.h"

// The captured libudx datagram from the reference: DATA|END, id 0x42,
// rwnd 4 MiB, seq 0x01020304, ack 0x0a0b0c0d, payload "hello".
static const uint8_t captured[] = {
    0xff, 0x01, 0x03, 0x00, 0x42, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40, 0x00,
    0x04, 0x03, 0x02, 0x01, 0x0d, 0x0c, 0x0b, 0x0a, 'h', 'e', 'l', 'l', 'o'};

static void
test_header_encode (void) {
  uint8_t h[UDX_HEADER_SIZE];
  udx__wire_header(h, UDX_HEADER_DATA | UDX_HEADER_END, 0, 0x42, 4194304, 0x01020304, 0x0a0b0c0d);
  CHECK(memcmp(h, captured, UDX_HEADER_SIZE) == 0);
}

static void
test_header_decode (void) {
  udx_wire_pkt_t p;
  CHECK_EQ(udx__wire_decode(captured, sizeof(captured), &p), UDX_WIRE_OK);
  CHECK_EQ(p.type, 3);
  CHECK_EQ(p.id, 0x42);
  CHECK_EQ(p.rwnd, 4194304);
  CHECK_EQ(p.seq, 0x01020304);
  CHECK_EQ(p.ack, 0x0a0b0c0d);
  CHECK_EQ(p.data_len, 5);
  CHECK(memcmp(p.data, "hello", 5) == 0);
  CHECK_EQ(p.nsacks, 0);

  uint32_t id;
  CHECK(udx__wire_peek(captured, sizeof(captured), &id));
  CHECK_EQ(id, 0x42);
}

static void
test_not_udx (void) {
  udx_wire_pkt_t p;
  uint8_t b[40];
  memcpy(b, captured, 20);
  CHECK_EQ(udx__wire_decode(b, 19, &p), UDX_WIRE_NOT_UDX); // truncated header
  b[0] = 0xfe;
  CHECK_EQ(udx__wire_decode(b, 20, &p), UDX_WIRE_NOT_UDX); // magic
  b[0] = 0xff;
  b[1] = 2;
  CHECK_EQ(udx__wire_decode(b, 20, &p), UDX_WIRE_NOT_UDX); // version
  uint32_t id;
  CHECK(!udx__wire_peek(b, 20, &id));
  CHECK(!udx__wire_peek(b, 3, &id));
}

static void
test_data_offset (void) {
  // MTU probe: 7 bytes of padding skipped through data_offset.
  uint8_t b[20 + 7 + 3];
  udx__wire_header(b, UDX_HEADER_DATA, 7, 1, 0, 5, 6);
  memset(b + 20, 0, 7);
  memcpy(b + 27, "abc", 3);
  udx_wire_pkt_t p;
  CHECK_EQ(udx__wire_decode(b, sizeof(b), &p), UDX_WIRE_OK);
  CHECK_EQ(p.data_len, 3);
  CHECK(memcmp(p.data, "abc", 3) == 0);

  // data_offset past the end
  b[3] = 11;
  CHECK_EQ(udx__wire_decode(b, sizeof(b), &p), UDX_WIRE_MALFORMED);
  b[3] = 10; // exactly the end: empty payload
  CHECK_EQ(udx__wire_decode(b, sizeof(b), &p), UDX_WIRE_OK);
  CHECK_EQ(p.data_len, 0);
}

static void
test_sack_forms (void) {
  // Whole-payload form (what libudx sends): 3 ranges + 5 stray bytes.
  uint8_t b[20 + 24 + 5];
  udx__wire_header(b, UDX_HEADER_SACK, 0, 1, 0, 0, 10);
  udx__wire_put_sack(b + 20, 0, 12, 14);
  udx__wire_put_sack(b + 20, 1, 20, 21);
  udx__wire_put_sack(b + 20, 2, 0xfffffff0, 0x10);
  udx_wire_pkt_t p;
  CHECK_EQ(udx__wire_decode(b, sizeof(b), &p), UDX_WIRE_OK);
  CHECK_EQ(p.nsacks, 3);
  uint32_t s, e;
  udx__wire_sack(&p, 1, &s, &e);
  CHECK_EQ(s, 20);
  CHECK_EQ(e, 21);
  udx__wire_sack(&p, 2, &s, &e);
  CHECK_EQ(s, 0xfffffff0u);
  CHECK_EQ(e, 0x10);
  // ranges are little endian on the wire
  CHECK_EQ(b[20], 12);
  CHECK_EQ(b[24], 14);

  // Piggy-backed form: data_offset bytes of ranges, then data.
  uint8_t c[20 + 8 + 4];
  udx__wire_header(c, UDX_HEADER_DATA | UDX_HEADER_SACK, 8, 1, 0, 3, 0);
  udx__wire_put_sack(c + 20, 0, 1, 0);
  memcpy(c + 28, "data", 4);
  CHECK_EQ(udx__wire_decode(c, sizeof(c), &p), UDX_WIRE_OK);
  CHECK_EQ(p.nsacks, 1);
  CHECK_EQ(p.data_len, 4);
  CHECK(memcmp(p.data, "data", 4) == 0);
}

static void
test_max_sacks_fit_base_mtu (void) {
  // An ACK with every range must fit a 1200-byte IP packet over IPv6.
  CHECK(UDX_HEADER_SIZE + 8 * UDX_WIRE_MAX_SACKS + 48 <= UDX_MTU_BASE);
  CHECK(UDX_WIRE_MAX_SACKS > 50); // more than libudx's 50
}

static const test_case_t cases[] = {
    {"header_encode", test_header_encode},
    {"header_decode", test_header_decode},
    {"not_udx", test_not_udx},
    {"data_offset", test_data_offset},
    {"sack_forms", test_sack_forms},
    {"max_sacks_fit_base_mtu", test_max_sacks_fit_base_mtu},
    {NULL, NULL},
};

int
main (int argc, char **argv) {
  return test_main(argc, argv, cases);
}
