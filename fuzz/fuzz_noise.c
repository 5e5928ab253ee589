// Noise handshake messages (XX and IK, as hyperswarm runs them): a real
// initiator and responder with fixed keys exchange messages, and the fuzz
// input replaces, masks, truncates or extends one of them (or several).
//
// Checked: the receiver either accepts (payload size as ludx_noise_recv_size
// said) or fails and stays failed with its keys wiped; a tampered message is
// never accepted where it is authenticated; and when both sides finish they
// agree on the keys and on each other's static keys.
//
// Input: byte 0 = pattern, prologue and expected-key bits; then per message
// a tamper op and its bytes.

#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ludx_noise.h"

#define REQUIRE(c)                                                              \
  do {                                                                          \
    if (!(c)) {                                                                 \
      fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #c); \
      abort();                                                                  \
    }                                                                           \
  } while (0)

static const uint8_t *in;
static size_t in_len;

static uint8_t
take (void) {
  if (in_len == 0)
    return 0;
  in_len--;
  return *in++;
}

static ludx_keypair_t kp_i, kp_r, kp_other, eph_i, eph_r;

static void
keypair (ludx_keypair_t *kp, uint8_t b) {
  uint8_t seed[LUDX_SEEDBYTES];
  memset(seed, b, sizeof(seed));
  REQUIRE(ludx_keypair_seed(kp, seed) == 0);
}

static bool
is_zero (const uint8_t *p, size_t n) {
  uint8_t acc = 0;
  for (size_t i = 0; i < n; i++)
    acc |= p[i];
  return acc == 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size) {
  static bool init;
  if (!init) {
    REQUIRE(sodium_init() >= 0);
    keypair(&kp_i, 1);
    keypair(&kp_r, 2);
    keypair(&kp_other, 3);
    keypair(&eph_i, 4);
    keypair(&eph_r, 5);
    init = true;
  }
  in = data;
  in_len = size;

  uint8_t mode = take();
  ludx_noise_pattern_t pattern = (mode & 1) ? LUDX_NOISE_IK : LUDX_NOISE_XX;
  static const uint8_t prologue[] = "prologue";
  size_t prologue_len = (mode & 2) ? sizeof(prologue) - 1 : 0;
  // the initiator's expectation of the responder (IK: required)
  const uint8_t *i_expect = pattern == LUDX_NOISE_IK || (mode & 4) ? ((mode & 8) ? kp_other.public_key : kp_r.public_key) : NULL;
  const uint8_t *r_expect = (mode & 16) ? kp_i.public_key : NULL;
  bool wrong_key = i_expect == kp_other.public_key;

  ludx_noise_t hs[2];
  REQUIRE(ludx_noise_init(&hs[0], pattern, true, &kp_i, prologue, prologue_len, i_expect) == 0);
  REQUIRE(ludx_noise_init(&hs[1], pattern, false, &kp_r, prologue, prologue_len, r_expect) == 0);
  if (mode & 32) {
    REQUIRE(ludx_noise_set_ephemeral(&hs[0], &eph_i) == 0);
    REQUIRE(ludx_noise_set_ephemeral(&hs[1], &eph_r) == 0);
  }

  bool tampered = false;
  int sender = 0;
  for (int step = 0; step < 3; step++) {
    ludx_noise_t *tx = &hs[sender], *rx = &hs[1 - sender];
    if (ludx_noise_status(tx) != LUDX_NOISE_SEND)
      break;
    uint8_t payload[256];
    size_t plen = take() % 64;
    for (size_t i = 0; i < plen; i++)
      payload[i] = (uint8_t) (i + step);
    long want = ludx_noise_send_size(tx, plen);
    REQUIRE(want > 0);
    static uint8_t msg[LUDX_NOISE_MAX_MESSAGE + 64];
    size_t mlen = 0;
    int src = ludx_noise_send(tx, payload, plen, msg, sizeof(msg), &mlen);
    if (src < 0) {
      // a tampered e accepted earlier (XX) can be an invalid point: the DH
      // of our next message fails, and we stay failed
      REQUIRE(tampered && src == LUDX_CRYPTO_EBADKEY);
      REQUIRE(ludx_noise_status(tx) == LUDX_NOISE_FAILED);
      break;
    }
    REQUIRE((long) mlen == want);

    // Tamper with the message.
    uint8_t orig[LUDX_NOISE_MAX_MESSAGE];
    memcpy(orig, msg, mlen);
    size_t orig_len = mlen;
    switch (take() % 6) {
      case 0:
        break;  // as sent
      case 1: { // xor a mask over it
        size_t n = take();
        for (size_t i = 0; i < n && in_len; i++)
          msg[(i + take()) % mlen] ^= take();
        break;
      }
      case 2: // truncate
        mlen = take() % (mlen + 1);
        break;
      case 3: { // extend
        size_t n = take();
        for (size_t i = 0; i < n; i++)
          msg[mlen++] = take();
        break;
      }
      case 4: { // replace entirely
        size_t n = (size_t) take() << (take() & 4);
        if (n > 3000)
          n = 3000;
        for (size_t i = 0; i < n; i++)
          msg[i] = take();
        mlen = n;
        break;
      }
      case 5: // replace one 32-byte key field with a chosen point
        if (mlen >= 32) {
          size_t at = (take() % (mlen / 32 + 1)) * 32;
          if (at + 32 > mlen)
            at = 0;
          static const uint8_t points[4][32] = {{0}, {1}, {0xec, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, {0xff}};
          memcpy(msg + at, points[take() % 4], 32);
        }
        break;
    }
    bool changed = mlen != orig_len || memcmp(msg, orig, mlen) != 0;

    bool tampered_before = tampered;
    tampered |= changed;

    long expect_size = ludx_noise_recv_size(rx, mlen);
    uint8_t out[LUDX_NOISE_MAX_MESSAGE];
    size_t cap = (take() & 1) ? sizeof(out) : take() % 64; // sometimes too small
    size_t out_len = 12345;
    int rc;
    for (;;) {
      // an exact-size copy: a read past the message is caught by ASan
      uint8_t *exact = malloc(mlen ? mlen : 1);
      REQUIRE(exact != NULL);
      memcpy(exact, msg, mlen);
      rc = ludx_noise_recv(rx, exact, mlen, out, cap, &out_len);
      free(exact);
      if (rc != LUDX_CRYPTO_ENOBUFS)
        break;
      // too small a payload buffer is not fatal: retry with room
      REQUIRE(expect_size > 0 && (size_t) expect_size > cap);
      REQUIRE(ludx_noise_status(rx) == LUDX_NOISE_RECV);
      cap = sizeof(out);
    }
    if (rc == 0) {
      REQUIRE(expect_size >= 0 && out_len == (size_t) expect_size);
      // Everything is authenticated except XX's first message (e and a
      // plaintext payload; a change there breaks the next message).
      if (changed)
        REQUIRE(pattern == LUDX_NOISE_XX && step == 0);
      else
        REQUIRE(out_len == plen && (plen == 0 || memcmp(out, payload, plen) == 0));
    } else {
      REQUIRE(ludx_crypto_errname(rc) != NULL);
      REQUIRE(ludx_noise_status(rx) == LUDX_NOISE_FAILED);
      ludx_noise_result_t r;
      REQUIRE(ludx_noise_result(rx, &r) < 0);
      REQUIRE(ludx_noise_recv(rx, orig, orig_len, out, sizeof(out), &out_len) == rc); // sticky
      REQUIRE(is_zero(rx->k, sizeof(rx->k)) && is_zero(rx->s.secret_key, sizeof(rx->s.secret_key)));
      if (!changed && !tampered_before)
        REQUIRE(wrong_key); // an untouched handshake fails only for a wrong expected key
      break;
    }
    sender = 1 - sender;
  }

  if (ludx_noise_status(&hs[0]) == LUDX_NOISE_DONE && ludx_noise_status(&hs[1]) == LUDX_NOISE_DONE) {
    ludx_noise_result_t a, b;
    REQUIRE(ludx_noise_result(&hs[0], &a) == 0);
    REQUIRE(ludx_noise_result(&hs[1], &b) == 0);
    REQUIRE(!tampered);
    REQUIRE(memcmp(a.tx, b.rx, sizeof(a.tx)) == 0 && memcmp(a.rx, b.tx, sizeof(a.rx)) == 0);
    REQUIRE(memcmp(a.hash, b.hash, sizeof(a.hash)) == 0);
    REQUIRE(memcmp(a.remote_public_key, kp_r.public_key, LUDX_PUBLICKEYBYTES) == 0);
    REQUIRE(memcmp(b.remote_public_key, kp_i.public_key, LUDX_PUBLICKEYBYTES) == 0);
  }
  ludx_noise_wipe(&hs[0]);
  ludx_noise_wipe(&hs[1]);
  return 0;
}
