// The SecretStream frame reader (ludx_ss_read) in every state: handshake
// frames before the keys, the peer's id/header frame, then data frames and
// keep-alives, with valid frames from a real peer encoder mixed with raw,
// truncated, oversized and bit-flipped input, fed in any chunking.
//
// Checked: return values are the documented ones; input is consumed exactly
// as reported; NEED_MORE only once the input is used up; an error is sticky;
// and while only well-formed frames were fed, every frame comes out exactly
// as it went in (handshake bytes or decrypted plaintext), in order, with
// nothing left over at the end.
//
// Input: byte 0 = start state (0 handshake, 1 header, 2 data), then ops.

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ludx_secretstream.h"

#define REQUIRE(c)                                                              \
  do {                                                                          \
    if (!(c)) {                                                                 \
      fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #c); \
      abort();                                                                  \
    }                                                                           \
  } while (0)

enum { M_HANDSHAKE,
       M_HEADER,
       M_DATA };

#define MAX_PENDING (1u << 20)
#define MAX_EXPECT  512

typedef struct {
  int kind;        // LUDX_SS_HANDSHAKE or LUDX_SS_DATA
  size_t off, len; // in expect_bytes
} expect_t;

static struct {
  ludx_ss_t ss, peer;
  uint8_t peer_header[LUDX_SS_HEADER_FRAMEBYTES];
  uint8_t *pending; // bytes not yet fed to the reader
  size_t pending_len;
  int model;   // where the reader will be after the bytes appended so far
  bool junk;   // something not well-formed was appended: no content checks
  bool failed; // the reader returned an error
  int error;
  expect_t expect[MAX_EXPECT];
  size_t nexpect, next;
  uint8_t *expect_bytes;
  size_t expect_len;
  uint64_t data_bytes;
} w;

static const uint8_t *in;
static size_t in_len;

static uint8_t
take (void) {
  if (in_len == 0)
    return 0;
  in_len--;
  return *in++;
}

static uint8_t tx_key[LUDX_KEYBYTES], rx_key[LUDX_KEYBYTES], hash[LUDX_HASHBYTES];

static void
append (const uint8_t *p, size_t n) {
  if (w.pending_len + n > MAX_PENDING) {
    w.junk = true; // dropped bytes: the stream no longer lines up
    return;
  }
  memcpy(w.pending + w.pending_len, p, n);
  w.pending_len += n;
}

static void
expect (int kind, const uint8_t *p, size_t n) {
  if (w.junk || w.nexpect == MAX_EXPECT || w.expect_len + n > MAX_PENDING) {
    w.junk = true;
    return;
  }
  w.expect[w.nexpect++] = (expect_t){kind, w.expect_len, n};
  memcpy(w.expect_bytes + w.expect_len, p, n);
  w.expect_len += n;
}

static void
on_output (int rc, const uint8_t *out, size_t out_len) {
  REQUIRE(out != NULL && out_len > 0);
  if (rc == LUDX_SS_DATA) {
    REQUIRE(ludx_ss_ready(&w.ss));
    w.data_bytes += out_len;
    REQUIRE(ludx_ss_stats(&w.ss)->bytes_in == w.data_bytes);
  } else {
    REQUIRE(!ludx_ss_ready(&w.ss));
    REQUIRE(out_len <= LUDX_SS_MAX_HANDSHAKE);
  }
  volatile uint8_t acc = 0; // every byte handed out is readable
  for (size_t i = 0; i < out_len; i++)
    acc ^= out[i];
  (void) acc;
  if (w.junk)
    return;
  REQUIRE(w.next < w.nexpect);
  expect_t *e = &w.expect[w.next++];
  REQUIRE(e->kind == rc);
  REQUIRE(e->len == out_len);
  REQUIRE(memcmp(w.expect_bytes + e->off, out, out_len) == 0);
}

// Feeds `n` pending bytes to the reader, in chunks of `chunk` (0 = at once).
static void
feed (size_t n, size_t chunk) {
  if (n > w.pending_len)
    n = w.pending_len;
  size_t pos = 0;
  while (pos < n) {
    size_t len = chunk ? chunk : n - pos;
    if (len > n - pos)
      len = n - pos;
    // an exact-size copy of the chunk: a read past it is caught by ASan
    uint8_t *chunk_buf = malloc(len);
    REQUIRE(chunk_buf != NULL);
    memcpy(chunk_buf, w.pending + pos, len);
    const uint8_t *p = chunk_buf;
    size_t left = len;
    for (;;) {
      const uint8_t *before = p;
      size_t before_left = left;
      const uint8_t *out = NULL;
      size_t out_len = 0;
      int rc = ludx_ss_read(&w.ss, &p, &left, &out, &out_len);
      REQUIRE(left <= before_left);
      REQUIRE(p == before + (before_left - left));
      if (rc < 0) {
        REQUIRE(ludx_crypto_errname(rc) != NULL);
        if (w.failed) {
          REQUIRE(rc == w.error); // sticky
          REQUIRE(left == before_left);
        }
        w.failed = true;
        w.error = rc;
        REQUIRE(w.junk); // only malformed input may fail the stream
        break;
      }
      REQUIRE(!w.failed);
      if (rc == LUDX_SS_NEED_MORE) {
        REQUIRE(left == 0);
        break;
      }
      REQUIRE(rc == LUDX_SS_HANDSHAKE || rc == LUDX_SS_DATA);
      on_output(rc, out, out_len);
    }
    free(chunk_buf);
    pos += len;
  }
  memmove(w.pending, w.pending + n, w.pending_len - n);
  w.pending_len -= n;
}

static void
frame (const uint8_t *body, size_t len) {
  uint8_t prefix[LUDX_SS_PREFIXBYTES];
  REQUIRE(ludx_ss_prefix(prefix, len) == 0);
  append(prefix, sizeof(prefix));
  append(body, len);
}

static void
start (void) {
  feed(w.pending_len, 0);
  uint8_t header[LUDX_SS_HEADER_FRAMEBYTES];
  int rc = ludx_ss_start(&w.ss, true, tx_key, rx_key, hash, header);
  if (w.failed) {
    REQUIRE(rc == w.error);
    return;
  }
  if (w.model != M_HANDSHAKE) {
    REQUIRE(rc == LUDX_CRYPTO_ESTATE);
    return;
  }
  REQUIRE(rc == 0);
  w.model = M_HEADER;
}

static void
data_frame (size_t len, bool flip) {
  static uint8_t msg[65536], out[65536 + 32];
  for (size_t i = 0; i < len; i++)
    msg[i] = take();
  size_t out_len;
  REQUIRE(ludx_ss_encrypt(&w.peer, msg, len, out, sizeof(out), &out_len) == 0);
  REQUIRE(out_len == ludx_ss_frame_size(len));
  if (flip) {
    size_t at = take() % out_len;
    out[at] ^= (uint8_t) (1u << (take() & 7));
    w.junk = true;
  } else if (w.model != M_DATA) {
    w.junk = true;
  } else if (len > 0) {
    expect(LUDX_SS_DATA, msg, len);
  }
  append(out, out_len);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  static bool init;
  if (!init) {
    REQUIRE(sodium_init() >= 0);
    for (int i = 0; i < LUDX_KEYBYTES; i++) {
      tx_key[i] = (uint8_t) i;
      rx_key[i] = (uint8_t) (0x80 + i);
    }
    for (int i = 0; i < LUDX_HASHBYTES; i++)
      hash[i] = (uint8_t) (0x40 ^ i);
    init = true;
  }
  in = data;
  in_len = size;

  memset(&w, 0, sizeof(w));
  w.pending = malloc(MAX_PENDING);
  w.expect_bytes = malloc(MAX_PENDING);
  REQUIRE(w.pending && w.expect_bytes);
  ludx_ss_init(&w.ss);
  ludx_ss_init(&w.peer);
  REQUIRE(ludx_ss_start(&w.peer, false, rx_key, tx_key, hash, w.peer_header) == 0);
  w.model = M_HANDSHAKE;

  uint8_t mode = take() % 3;
  if (mode >= 1)
    start();
  if (mode == 2) {
    append(w.peer_header, sizeof(w.peer_header));
    w.model = M_DATA;
  }

  int ops = 0;
  while (in_len > 0 && ops++ < 1000) {
    uint8_t op = take();
    switch (op % 11) {
      case 0: { // raw bytes
        size_t n = take();
        uint8_t buf[256];
        for (size_t i = 0; i < n; i++)
          buf[i] = take();
        append(buf, n);
        w.junk = true;
        break;
      }
      case 1: { // a handshake frame (1..65535 bytes)
        size_t n = (size_t) take() << (take() & 8);
        if (n == 0)
          n = 1;
        static uint8_t buf[65536];
        for (size_t i = 0; i < n; i++)
          buf[i] = (uint8_t) (i * 31 + n);
        if (w.model != M_HANDSHAKE)
          w.junk = true;
        else
          expect(LUDX_SS_HANDSHAKE, buf, n);
        frame(buf, n);
        break;
      }
      case 2: // the peer's id/header frame
        if (w.model == M_HEADER)
          w.model = M_DATA;
        else
          w.junk = true;
        append(w.peer_header, sizeof(w.peer_header));
        break;
      case 3: // a data frame
        data_frame(take(), false);
        break;
      case 4: // a bigger data frame
        data_frame((size_t) take() * 256 + take(), false);
        break;
      case 5: // a keep-alive
        data_frame(0, false);
        break;
      case 6: // a data frame with one bit flipped
        data_frame(take(), true);
        break;
      case 7: { // feed what is pending, in chunks
        size_t chunk = take();
        if (chunk > 128)
          chunk = (chunk - 128) * 512;
        feed(w.pending_len, chunk);
        break;
      }
      case 8: // feed part of it
        feed(take() * 16, take() % 8);
        break;
      case 9: // keys arrive (the handshake finished)
        start();
        break;
      case 10: { // a frame length only: declared, maybe never completed
        uint8_t prefix[3] = {take(), take(), take()};
        append(prefix, 3);
        w.junk = true;
        break;
      }
    }
  }
  feed(w.pending_len, 0);
  if (!w.junk) {
    REQUIRE(!w.failed);
    REQUIRE(w.next == w.nexpect); // every frame came out
  }
  // Our side can always encrypt once started, and never before.
  const uint8_t *f;
  size_t flen;
  int rc = ludx_ss_encrypt_frame(&w.ss, (const uint8_t *) "x", 1, &f, &flen);
  if (w.failed)
    REQUIRE(rc == w.error);
  else if (w.model == M_HANDSHAKE)
    REQUIRE(rc == LUDX_CRYPTO_ESTATE);
  else
    REQUIRE(rc == 0 && flen == ludx_ss_frame_size(1));

  ludx_ss_destroy(&w.ss);
  ludx_ss_destroy(&w.peer);
  free(w.pending);
  free(w.expect_bytes);
  return 0;
}
