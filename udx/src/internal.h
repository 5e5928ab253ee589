#ifndef UDX_INTERNAL_H
#define UDX_INTERNAL_H

// Small helpers shared by the engine and the io layer.

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../include/udx.h"

#define UDX_UNUSED(x) ((void) (x))

#define UDX_MAGIC   0xff
#define UDX_VERSION 1

#define UDX_IPV4_OVERHEAD 48 // IPv4 20 + UDP 8 + UDX 20
#define UDX_IPV6_OVERHEAD 68 // IPv6 40 + UDP 8 + UDX 20
#define UDX_MTU_STEP      32
#define UDX_MTU_JUMP      224 // largest multiple of the step a 255-byte padding covers
#define UDX_MTU_PROBES    3

// libudx receives into 2048 bytes and truncates beyond; we take datagrams up
// to 16 KiB (raw DHT messages, jumbo frames) but send MESSAGEs libudx can
// receive.
#define UDX_RX_BUFFER_SIZE 16384
#define UDX_MESSAGE_MAX    (2048 - UDX_HEADER_SIZE)

#define UDX_DEFAULT_RWND_MAX (4 * 1024 * 1024)
#define UDX_HIGH_WATERMARK   262144
#define UDX_DEFAULT_TIMEOUT  13000 // ms: libudx gives up after 13 RTO at the 1 s floor

#define UDX_US_PER_MS 1000ull
#define UDX_US_PER_S  1000000ull
#define UDX_NEVER     UINT64_MAX

#define UDX_FLAGS_DATA_OR_END (UDX_HEADER_DATA | UDX_HEADER_END)

// The engine's own error codes: it is built without libuv (sans-IO), and the
// io layer maps these to UV_E* at the public API (udx__uv_err in udx.c), so
// callers of udx.h see the codes they always did. Distinct from any UV_E*
// value so that an unmapped code shows.
enum {
  UDX_ERR_INVAL = -4001,
  UDX_ERR_NOMEM = -4002,
  UDX_ERR_NOTCONN = -4003,
  UDX_ERR_PIPE = -4004,
  UDX_ERR_MSGSIZE = -4005,
  UDX_ERR_EOF = -4006,
  UDX_ERR_TIMEDOUT = -4007,
  UDX_ERR_CONNRESET = -4008,
  UDX_ERR_NOSPC = -4009,
  UDX_ERR_NOENT = -4010,
  UDX_ERR_BUSY = -4011,
  UDX_ERR_CANCELED = -4012,
};

// Sequence numbers are compared through signed 32-bit differences, which is
// right while the two values are within 2^31 of each other.
static inline int32_t
udx__seq_diff (uint32_t a, uint32_t b) {
  return (int32_t) (a - b);
}

static inline bool
udx__seq_lt (uint32_t a, uint32_t b) {
  return udx__seq_diff(a, b) < 0;
}

static inline bool
udx__seq_le (uint32_t a, uint32_t b) {
  return udx__seq_diff(a, b) <= 0;
}

static inline bool
udx__seq_gt (uint32_t a, uint32_t b) {
  return udx__seq_diff(a, b) > 0;
}

static inline bool
udx__seq_ge (uint32_t a, uint32_t b) {
  return udx__seq_diff(a, b) >= 0;
}

static inline uint32_t
udx__seq_max (uint32_t a, uint32_t b) {
  return udx__seq_gt(a, b) ? a : b;
}

static inline uint64_t
udx__min_u64 (uint64_t a, uint64_t b) {
  return a < b ? a : b;
}

static inline uint64_t
udx__max_u64 (uint64_t a, uint64_t b) {
  return a > b ? a : b;
}

static inline uint32_t
udx__min_u32 (uint32_t a, uint32_t b) {
  return a < b ? a : b;
}

static inline uint32_t
udx__max_u32 (uint32_t a, uint32_t b) {
  return a > b ? a : b;
}

// Little-endian field access, independent of host byte order and alignment.
static inline uint32_t
udx__read_u32 (const uint8_t *p) {
  return (uint32_t) p[0] | ((uint32_t) p[1] << 8) | ((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
}

static inline void
udx__write_u32 (uint8_t *p, uint32_t v) {
  p[0] = (uint8_t) v;
  p[1] = (uint8_t) (v >> 8);
  p[2] = (uint8_t) (v >> 16);
  p[3] = (uint8_t) (v >> 24);
}

// splitmix64: small seeded PRNG for fault injection and tests.
static inline uint64_t
udx__rand_next (uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static inline double
udx__rand_unit (uint64_t *state) {
  return (double) (udx__rand_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

#endif
