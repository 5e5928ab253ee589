#ifndef LUDX_FRAMER_H
#define LUDX_FRAMER_H

// Shared by framer.c (core.crypto.framer: the secret-stream byte stream for
// a Lua stream) and framer_udx.c (its data phase over a udx stream's own
// buffers).
#include <stdbool.h>
#include <stdlib.h>

#include "bind.h"
#include "ludx_crypto.h"
#include "udx_bind.h"

#define FRAMER_MT "ludx.crypto.framer"

// f:trim() keeps buffers up to this size: 64 KiB frames never reallocate.
#define FRAMER_KEEP (256 * 1024)

struct seal_job_s;

typedef struct {
  ludx_ss_t ss;
  uint8_t *pend; // raw input held back after a handshake frame
  size_t pend_len, pend_cap;
  uint8_t *out; // plaintext of several frames of one feed
  size_t out_len, out_cap;
  uint32_t glen, ghave;   // feed_udx: the frame being gathered in out (L, bytes so far)
  size_t rd_off, rd_len;  // feed_udx: a large frame's plaintext in out, still to hand over
  bool backlog;           // feed_udx: rd_len told to its stream (one udx stream per framer)
  struct seal_job_s *job; // a frame being sealed off the loop (f:seal_udx)
} framer_t;

// A frame sealed on the libuv thread pool, straight into a run of the udx
// send queue (udx_stream_write_begin). The worker touches only the job:
// the plaintext (a Lua string the caller keeps until the event), a copy of
// the send state, and the run's memory. The framer and the stream may go
// meanwhile: the framer lets go of the job, the run keeps its memory.
typedef struct seal_job_s {
  uv_work_t req;
  framer_t *f; // NULL once the framer was freed
  udx_stream_run_t *run;
  uint8_t *buf;
  const uint8_t *msg;
  size_t len;
  ludx_ss_push_t st;
  ludx_rt_t *rt;
  uint32_t ref;
} seal_job_t;

static inline framer_t *
check_framer (lua_State *L) {
  return ludx_check_open(L, 1, FRAMER_MT, "framer");
}

// Grows to need or more (doubling), never past limit (>= need): a frame
// being gathered gets at most its own size.
static inline int
grow_to (uint8_t **p, size_t *cap, size_t need, size_t limit) {
  if (*cap >= need)
    return 0;
  size_t n = *cap * 2 > need ? *cap * 2 : need;
  if (n < 256)
    n = 256;
  if (n > limit)
    n = limit;
  uint8_t *q = realloc(*p, n);
  if (q == NULL)
    return LUDX_CRYPTO_ENOMEM;
  *p = q;
  *cap = n;
  return 0;
}

static inline int
grow (uint8_t **p, size_t *cap, size_t need) {
  return grow_to(p, cap, need, SIZE_MAX);
}

// Adds the udx data phase's methods (feed_udx, encrypt_udx, seal_udx,
// rest, rest_bytes) to the framer class, and FILL_MIN to the table on top
// of the stack (core.crypto).
void
ludx_bind_framer_udx (lua_State *L);

#endif
