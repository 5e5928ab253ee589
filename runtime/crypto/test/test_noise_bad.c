/* The Noise state machine against hostile input: wrong keys, invalid
 * points, garbage and bit-flipped messages, misuse. A failure must return a
 * clear code, wipe the state and write no unauthenticated payload byte. */

#include "test.h"

#define SENTINEL 0xa5

typedef struct {
  ludx_keypair_t s1, s2, s3, e3, e4;
} keys_t;

static void
keys (keys_t *k) {
  seed_keypair(&k->s1, 1);
  seed_keypair(&k->s2, 2);
  seed_keypair(&k->s3, 5);
  seed_keypair(&k->e3, 3);
  seed_keypair(&k->e4, 4);
}

/* A failed state is wiped: no key material is left in it. */
static void
check_failed (const ludx_noise_t *hs, int err) {
  ludx_noise_result_t res;
  CHECK_RC(ludx_noise_status(hs), LUDX_NOISE_FAILED);
  CHECK_RC(hs->error, err);
  CHECK_RC(ludx_noise_result(hs, &res), LUDX_CRYPTO_ESTATE);
  static const uint8_t zero[64];
  CHECK(memcmp(hs->h, zero, 64) == 0 && memcmp(hs->ck, zero, 64) == 0 && memcmp(hs->k, zero, 32) == 0);
  CHECK(memcmp(hs->s.secret_key, zero, 64) == 0 && memcmp(hs->e.secret_key, zero, 64) == 0);
  /* Sticky: every later call returns the same error. */
  uint8_t buf[256];
  size_t n;
  CHECK_RC(ludx_noise_send((ludx_noise_t *) hs, NULL, 0, buf, sizeof(buf), &n), err);
  CHECK_RC(ludx_noise_recv((ludx_noise_t *) hs, buf, 64, buf, sizeof(buf), &n), err);
}

/* An output buffer holds only the sentinel or zeros (wiped), never
 * plaintext or a partial message. */
static void
check_untouched (const uint8_t *buf, size_t len) {
  for (size_t i = 0; i < len; i++)
    CHECK(buf[i] == SENTINEL || buf[i] == 0);
}

/* Run XX up to (and excluding) message `upto`. */
static void
xx_until (const keys_t *k, ludx_noise_t *i, ludx_noise_t *r, int upto) {
  CHECK_OK(ludx_noise_init(i, LUDX_NOISE_XX, true, &k->s1, NULL, 0, NULL));
  CHECK_OK(ludx_noise_init(r, LUDX_NOISE_XX, false, &k->s2, NULL, 0, NULL));
  CHECK_OK(ludx_noise_set_ephemeral(i, &k->e3));
  CHECK_OK(ludx_noise_set_ephemeral(r, &k->e4));
  for (int m = 0; m < upto; m++) {
    uint8_t msg[128];
    size_t len;
    ludx_noise_t *from = m % 2 == 0 ? i : r, *to = m % 2 == 0 ? r : i;
    CHECK_OK(ludx_noise_send(from, NULL, 0, msg, sizeof(msg), &len));
    CHECK_OK(ludx_noise_recv(to, msg, len, NULL, 0, NULL));
  }
}

static void
wrong_remote_key (void) {
  keys_t k;
  keys(&k);
  uint8_t msg[256], pay[64];
  size_t len;

  /* XX initiator expecting s3 meets s2: fails on msg2, before sending msg3. */
  ludx_noise_t i, r;
  CHECK_OK(ludx_noise_init(&i, LUDX_NOISE_XX, true, &k.s1, NULL, 0, k.s3.public_key));
  CHECK_OK(ludx_noise_init(&r, LUDX_NOISE_XX, false, &k.s2, NULL, 0, NULL));
  CHECK_OK(ludx_noise_send(&i, NULL, 0, msg, sizeof(msg), &len));
  CHECK_OK(ludx_noise_recv(&r, msg, len, NULL, 0, NULL));
  CHECK_OK(ludx_noise_send(&r, NULL, 0, msg, sizeof(msg), &len));
  CHECK_RC(ludx_noise_recv(&i, msg, len, NULL, 0, NULL), LUDX_CRYPTO_EREMOTEKEY);
  check_failed(&i, LUDX_CRYPTO_EREMOTEKEY);

  /* XX responder expecting s3 meets s1: fails on msg3. */
  CHECK_OK(ludx_noise_init(&i, LUDX_NOISE_XX, true, &k.s1, NULL, 0, k.s2.public_key));
  CHECK_OK(ludx_noise_init(&r, LUDX_NOISE_XX, false, &k.s2, NULL, 0, k.s3.public_key));
  CHECK_OK(ludx_noise_send(&i, NULL, 0, msg, sizeof(msg), &len));
  CHECK_OK(ludx_noise_recv(&r, msg, len, NULL, 0, NULL));
  CHECK_OK(ludx_noise_send(&r, NULL, 0, msg, sizeof(msg), &len));
  CHECK_OK(ludx_noise_recv(&i, msg, len, NULL, 0, NULL)); /* the right key */
  CHECK_OK(ludx_noise_send(&i, NULL, 0, msg, sizeof(msg), &len));
  CHECK_RC(ludx_noise_recv(&r, msg, len, NULL, 0, NULL), LUDX_CRYPTO_EREMOTEKEY);
  check_failed(&r, LUDX_CRYPTO_EREMOTEKEY);

  /* IK responder expecting s3 meets s1: fails on msg1, payload unseen. */
  CHECK_OK(ludx_noise_init(&i, LUDX_NOISE_IK, true, &k.s1, NULL, 0, k.s2.public_key));
  CHECK_OK(ludx_noise_init(&r, LUDX_NOISE_IK, false, &k.s2, NULL, 0, k.s3.public_key));
  CHECK_OK(ludx_noise_send(&i, (const uint8_t *) "secret payload", 14, msg, sizeof(msg), &len));
  memset(pay, SENTINEL, sizeof(pay));
  CHECK_RC(ludx_noise_recv(&r, msg, len, pay, sizeof(pay), NULL), LUDX_CRYPTO_EREMOTEKEY);
  check_untouched(pay, sizeof(pay));
  check_failed(&r, LUDX_CRYPTO_EREMOTEKEY);

  /* IK initiator aiming at s3 reaches s2: s2 cannot decrypt msg1. */
  CHECK_OK(ludx_noise_init(&i, LUDX_NOISE_IK, true, &k.s1, NULL, 0, k.s3.public_key));
  CHECK_OK(ludx_noise_init(&r, LUDX_NOISE_IK, false, &k.s2, NULL, 0, NULL));
  CHECK_OK(ludx_noise_send(&i, (const uint8_t *) "secret payload", 14, msg, sizeof(msg), &len));
  memset(pay, SENTINEL, sizeof(pay));
  CHECK_RC(ludx_noise_recv(&r, msg, len, pay, sizeof(pay), NULL), LUDX_CRYPTO_EHANDSHAKE);
  check_untouched(pay, sizeof(pay));
  check_failed(&r, LUDX_CRYPTO_EHANDSHAKE);

  /* The right expected keys pass, with payloads. */
  CHECK_OK(ludx_noise_init(&i, LUDX_NOISE_IK, true, &k.s1, NULL, 0, k.s2.public_key));
  CHECK_OK(ludx_noise_init(&r, LUDX_NOISE_IK, false, &k.s2, NULL, 0, k.s1.public_key));
  CHECK_OK(ludx_noise_send(&i, (const uint8_t *) "a", 1, msg, sizeof(msg), &len));
  CHECK_OK(ludx_noise_recv(&r, msg, len, pay, sizeof(pay), NULL));
  CHECK_OK(ludx_noise_send(&r, (const uint8_t *) "b", 1, msg, sizeof(msg), &len));
  CHECK_OK(ludx_noise_recv(&i, msg, len, pay, sizeof(pay), NULL));
  CHECK_RC(ludx_noise_status(&i), LUDX_NOISE_DONE);
  CHECK_RC(ludx_noise_status(&r), LUDX_NOISE_DONE);
}

/* Encodings libsodium must refuse as a DH input. */
static const char *bad_points[] = {
    "0100000000000000000000000000000000000000000000000000000000000000", /* identity */
    "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", /* (0, -1): order 2 */
    "0000000000000000000000000000000000000000000000000000000000000000", /* order 4 */
    "0000000000000000000000000000000000000000000000000000000000000080", /* order 4, x < 0 */
    "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05", /* order 8 */
    "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a", /* order 8 */
    "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", /* y = p: non-canonical */
    "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f", /* y = p + 1 */
    "0100000000000000000000000000000000000000000000000000000000000080", /* x = 0 with sign 1 */
    "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff", /* y >= p */
    "0200000000000000000000000000000000000000000000000000000000000000", /* y = 2: not on the curve */
};
#define N_BAD (sizeof(bad_points) / sizeof(bad_points[0]))

static void
mixed_order_point (uint8_t out[32], const keys_t *k) {
  /* pk + (0, -1): on the curve, canonical, but off the prime-order subgroup. */
  uint8_t t[32];
  unhex(t, 32, bad_points[1]);
  CHECK(crypto_core_ed25519_add(out, k->s1.public_key, t) == 0);
  CHECK(crypto_core_ed25519_is_valid_point(out) == 0);
}

static void
invalid_point (void) {
  keys_t k;
  keys(&k);
  uint8_t points[N_BAD + 1][32];
  for (size_t p = 0; p < N_BAD; p++)
    unhex(points[p], 32, bad_points[p]);
  mixed_order_point(points[N_BAD], &k);

  for (size_t p = 0; p <= N_BAD; p++) {
    uint8_t dh[32], msg[256], pay[64];
    size_t len;
    CHECK_RC(ludx_dh(dh, k.s1.secret_key, points[p]), LUDX_CRYPTO_EBADKEY);
    static const uint8_t zero[32];
    CHECK(memcmp(dh, zero, 32) == 0);

    /* XX msg1 carrying a bad e: the responder fails building msg2 (ee). */
    ludx_noise_t i, r;
    CHECK_OK(ludx_noise_init(&r, LUDX_NOISE_XX, false, &k.s2, NULL, 0, NULL));
    CHECK_OK(ludx_noise_recv(&r, points[p], 32, NULL, 0, NULL));
    memset(msg, SENTINEL, sizeof(msg));
    CHECK_RC(ludx_noise_send(&r, NULL, 0, msg, sizeof(msg), &len), LUDX_CRYPTO_EBADKEY);
    check_untouched(msg, sizeof(msg));
    check_failed(&r, LUDX_CRYPTO_EBADKEY);

    /* XX msg2 with a bad e: the initiator fails on ee at once. */
    CHECK_OK(ludx_noise_init(&i, LUDX_NOISE_XX, true, &k.s1, NULL, 0, NULL));
    CHECK_OK(ludx_noise_send(&i, NULL, 0, msg, sizeof(msg), &len));
    memset(msg, 0, 96);
    memcpy(msg, points[p], 32);
    CHECK_RC(ludx_noise_recv(&i, msg, 96, NULL, 0, NULL), LUDX_CRYPTO_EBADKEY);
    check_failed(&i, LUDX_CRYPTO_EBADKEY);

    /* IK msg1 with a bad e: the responder fails on es. */
    CHECK_OK(ludx_noise_init(&r, LUDX_NOISE_IK, false, &k.s2, NULL, 0, NULL));
    memset(msg, 0, 96);
    memcpy(msg, points[p], 32);
    memset(pay, SENTINEL, sizeof(pay));
    CHECK_RC(ludx_noise_recv(&r, msg, 96 + 4, pay, sizeof(pay), NULL), LUDX_CRYPTO_EBADKEY);
    check_untouched(pay, sizeof(pay));
    check_failed(&r, LUDX_CRYPTO_EBADKEY);

    /* IK initiator given a bad responder key: fails building msg1. */
    CHECK_OK(ludx_noise_init(&i, LUDX_NOISE_IK, true, &k.s1, NULL, 0, points[p]));
    CHECK_RC(ludx_noise_send(&i, NULL, 0, msg, sizeof(msg), &len), LUDX_CRYPTO_EBADKEY);
    check_failed(&i, LUDX_CRYPTO_EBADKEY);

    /* IK msg2 with a bad e: the initiator fails on ee. */
    CHECK_OK(ludx_noise_init(&i, LUDX_NOISE_IK, true, &k.s1, NULL, 0, k.s2.public_key));
    CHECK_OK(ludx_noise_send(&i, NULL, 0, msg, sizeof(msg), &len));
    memset(msg, 0, 48);
    memcpy(msg, points[p], 32);
    CHECK_RC(ludx_noise_recv(&i, msg, 48, NULL, 0, NULL), LUDX_CRYPTO_EBADKEY);
    check_failed(&i, LUDX_CRYPTO_EBADKEY);
  }
}

/* Garbage of every length 0..300 (and around the 65535 limit) at each
 * receiving step of XX and IK. Only XX msg1 (no key yet) can be accepted,
 * and then only with 32 <= len <= 65535. */
static void
garbage_messages (void) {
  keys_t k;
  keys(&k);
  uint64_t rng = 0x9e3779b97f4a7c15ULL;
  static uint8_t junk[65536 + 16], pay[65536 + 16];
  size_t lens[] = {65534, 65535, 65536, 65537};

  for (size_t n = 0; n < 300 + sizeof(lens) / sizeof(lens[0]); n++) {
    size_t len = n < 300 ? n : lens[n - 300];
    for (int step = 0; step < 5; step++) {
      test_fill(&rng, junk, len);
      memset(pay, SENTINEL, len);
      ludx_noise_t i, r, *to;
      uint8_t msg[128];
      size_t mlen;
      if (step < 3) {
        xx_until(&k, &i, &r, step);
        to = step % 2 == 0 ? &r : &i;
      } else {
        CHECK_OK(ludx_noise_init(&i, LUDX_NOISE_IK, true, &k.s1, NULL, 0, k.s2.public_key));
        CHECK_OK(ludx_noise_init(&r, LUDX_NOISE_IK, false, &k.s2, NULL, 0, NULL));
        if (step == 4)
          CHECK_OK(ludx_noise_send(&i, NULL, 0, msg, sizeof(msg), &mlen));
        to = step == 3 ? &r : &i;
      }
      size_t plen = 12345;
      int rc = ludx_noise_recv(to, junk, len, pay, sizeof(pay), &plen);
      if (step == 0 && len >= 32 && len <= 65535) {
        /* Unauthenticated by design: e and a plaintext payload. */
        CHECK_OK(rc);
        CHECK(plen == len - 32 && memcmp(pay, junk + 32, plen) == 0);
        int s = ludx_noise_send(to, NULL, 0, msg, sizeof(msg), &mlen);
        CHECK(s == 0 || s == LUDX_CRYPTO_EBADKEY);
      } else {
        CHECK(rc == LUDX_CRYPTO_EHANDSHAKE || rc == LUDX_CRYPTO_EBADKEY);
        CHECK(plen == 12345);
        check_untouched(pay, len);
        check_failed(to, rc);
      }
      ludx_noise_wipe(&i);
      ludx_noise_wipe(&r);
    }
  }
}

/* Every single-bit flip of every message is caught, at the latest by the
 * next authenticated message. */
static void
flipped_bits (void) {
  keys_t k;
  keys(&k);
  static const size_t xx_lens[3] = {32, 96, 64};
  for (int m = 0; m < 3; m++) {
    for (size_t bit = 0; bit < xx_lens[m] * 8; bit++) {
      ludx_noise_t i, r;
      uint8_t msg[128];
      size_t len;
      xx_until(&k, &i, &r, m);
      ludx_noise_t *from = m % 2 == 0 ? &i : &r, *to = m % 2 == 0 ? &r : &i;
      CHECK_OK(ludx_noise_send(from, NULL, 0, msg, sizeof(msg), &len));
      CHECK(len == xx_lens[m]);
      msg[bit / 8] ^= (uint8_t) (1u << (bit % 8));
      int rc = ludx_noise_recv(to, msg, len, NULL, 0, NULL);
      if (m == 0 && rc == 0) {
        /* A changed e is only noticed through h: msg2 no longer verifies. */
        rc = ludx_noise_send(&r, NULL, 0, msg, sizeof(msg), &len);
        if (rc == 0) {
          rc = ludx_noise_recv(&i, msg, len, NULL, 0, NULL);
          to = &i;
        }
      }
      CHECK(rc == LUDX_CRYPTO_EHANDSHAKE || rc == LUDX_CRYPTO_EBADKEY);
      check_failed(to, rc);
      ludx_noise_wipe(&i);
      ludx_noise_wipe(&r);
    }
  }

  /* IK: both messages carry a tag. */
  for (int m = 0; m < 2; m++) {
    for (size_t bit = 0; bit < (m == 0 ? 116 : 68) * 8; bit++) {
      ludx_noise_t i, r;
      uint8_t msg[128], pay[32];
      size_t len;
      CHECK_OK(ludx_noise_init(&i, LUDX_NOISE_IK, true, &k.s1, NULL, 0, k.s2.public_key));
      CHECK_OK(ludx_noise_init(&r, LUDX_NOISE_IK, false, &k.s2, NULL, 0, NULL));
      CHECK_OK(ludx_noise_send(&i, (const uint8_t *) "0123456789abcdefghij", 20, msg, sizeof(msg), &len));
      if (m == 1) {
        CHECK_OK(ludx_noise_recv(&r, msg, len, pay, sizeof(pay), NULL));
        CHECK_OK(ludx_noise_send(&r, (const uint8_t *) "0123456789abcdefghij", 20, msg, sizeof(msg), &len));
      }
      msg[bit / 8] ^= (uint8_t) (1u << (bit % 8));
      memset(pay, SENTINEL, sizeof(pay));
      ludx_noise_t *to = m == 0 ? &r : &i;
      int rc = ludx_noise_recv(to, msg, len, pay, sizeof(pay), NULL);
      CHECK(rc == LUDX_CRYPTO_EHANDSHAKE || rc == LUDX_CRYPTO_EBADKEY);
      check_untouched(pay, sizeof(pay));
      check_failed(to, rc);
    }
  }
}

static void
misuse (void) {
  keys_t k;
  keys(&k);
  ludx_noise_t i, r;
  uint8_t msg[256], big[70000];
  size_t len;
  ludx_noise_result_t res;

  CHECK_RC(ludx_noise_init(&i, LUDX_NOISE_IK, true, &k.s1, NULL, 0, NULL), LUDX_CRYPTO_EINVAL);
  CHECK_RC(ludx_noise_status(&i), LUDX_NOISE_FAILED);
  CHECK_RC(ludx_noise_init(&i, (ludx_noise_pattern_t) 7, true, &k.s1, NULL, 0, NULL), LUDX_CRYPTO_EINVAL);
  CHECK_RC(ludx_noise_init(&i, LUDX_NOISE_XX, true, NULL, NULL, 0, NULL), LUDX_CRYPTO_EINVAL);
  CHECK_RC(ludx_noise_init(&i, LUDX_NOISE_XX, true, &k.s1, NULL, 3, NULL), LUDX_CRYPTO_EINVAL);

  CHECK_OK(ludx_noise_init(&i, LUDX_NOISE_XX, true, &k.s1, NULL, 0, NULL));
  CHECK_OK(ludx_noise_init(&r, LUDX_NOISE_XX, false, &k.s2, NULL, 0, NULL));
  CHECK_RC(ludx_noise_recv(&i, msg, 32, NULL, 0, NULL), LUDX_CRYPTO_ESTATE);
  CHECK_RC(ludx_noise_send(&r, NULL, 0, msg, sizeof(msg), &len), LUDX_CRYPTO_ESTATE);
  CHECK_RC(ludx_noise_result(&i, &res), LUDX_CRYPTO_ESTATE);
  CHECK_RC(ludx_noise_send_size(&r, 0), LUDX_CRYPTO_ESTATE);
  CHECK_RC(ludx_noise_recv_size(&i, 32), LUDX_CRYPTO_ESTATE);

  /* Non-fatal: a buffer too small, a payload too large. */
  CHECK_RC(ludx_noise_send(&i, NULL, 0, msg, 31, &len), LUDX_CRYPTO_ENOBUFS);
  CHECK_RC(ludx_noise_send(&i, big, 65535 - 31, big, sizeof(big), &len), LUDX_CRYPTO_ETOOLARGE);
  CHECK_RC(ludx_noise_send_size(&i, 65535 - 32), 65535);
  CHECK_RC(ludx_noise_status(&i), LUDX_NOISE_SEND);
  CHECK_OK(ludx_noise_send(&i, (const uint8_t *) "hi", 2, msg, sizeof(msg), &len));
  CHECK(len == 34 && memcmp(msg + 32, "hi", 2) == 0); /* XX msg1 payload is plaintext */
  CHECK_RC(ludx_noise_set_ephemeral(&i, &k.e3), LUDX_CRYPTO_ESTATE);
  CHECK_RC(ludx_noise_recv(&r, msg, len, NULL, 0, NULL), LUDX_CRYPTO_ENOBUFS);
  uint8_t pay[8];
  size_t plen;
  CHECK_OK(ludx_noise_recv(&r, msg, len, pay, sizeof(pay), &plen));
  CHECK(plen == 2 && memcmp(pay, "hi", 2) == 0);
  CHECK_OK(ludx_noise_set_ephemeral(&r, &k.e4)); /* before its e goes out */
  CHECK_OK(ludx_noise_send(&r, NULL, 0, msg, sizeof(msg), &len));
  CHECK_RC(ludx_noise_set_ephemeral(&r, &k.e4), LUDX_CRYPTO_ESTATE);
  CHECK(memcmp(msg, k.e4.public_key, 32) == 0);

  /* Done: the handshake can go no further and has forgotten its secrets. */
  CHECK_OK(ludx_noise_recv(&i, msg, len, NULL, 0, NULL));
  CHECK_OK(ludx_noise_send(&i, NULL, 0, msg, sizeof(msg), &len));
  CHECK_RC(ludx_noise_send(&i, NULL, 0, msg, sizeof(msg), &len), LUDX_CRYPTO_ESTATE);
  static const uint8_t zero[64];
  CHECK(memcmp(i.s.secret_key, zero, 64) == 0 && memcmp(i.e.secret_key, zero, 64) == 0 && memcmp(i.ck, zero, 64) == 0);
  ludx_noise_wipe(&i);
  ludx_noise_wipe(&r);
}

TEST_MAIN({"wrong_remote_key", wrong_remote_key}, {"invalid_point", invalid_point}, {"garbage_messages", garbage_messages}, {"flipped_bits", flipped_bits}, {"misuse", misuse})
