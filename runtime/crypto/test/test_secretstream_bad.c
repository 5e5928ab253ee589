/* The SecretStream decoder against hostile bytes: flipped bits, truncation,
 * bad lengths, replay and reorder, bad id/header frames, misuse. Nothing
 * unauthenticated may come out, and a failure is final. */

#include "test.h"

/* V2a keys: a = initiator, b = responder. */
#define I_TX          "36e72ba85cd0a2b5e7c9f44704a1757d7230c30dd39736e46f2190fcd1300c13"
#define I_RX          "29c4a931005b47aaf766f5ec7a119810eb15399b8612e79071f77447826dee17"
#define SENTINEL_BYTE 0xa5

#define HASH "aa42bcea44d843e3803e549191ae7eac847a85dccf21ef3918a7cf228d87b7889b194cdb190b8b2cf82daf543e71e86871532b84ba1d7982489eb3040dcfc412"

typedef struct {
  ludx_ss_t a, b;
  uint8_t header_a[LUDX_SS_HEADER_FRAMEBYTES];
  uint8_t header_b[LUDX_SS_HEADER_FRAMEBYTES];
} pair_t;

/* Both sides started; b has not read a's header yet unless `exchange`. */
static void
pair_start (pair_t *p, bool exchange) {
  uint8_t tx[32], rx[32], hash[64];
  unhex(tx, 32, I_TX);
  unhex(rx, 32, I_RX);
  unhex(hash, 64, HASH);
  ludx_ss_init(&p->a);
  ludx_ss_init(&p->b);
  CHECK_OK(ludx_ss_start(&p->a, true, tx, rx, hash, p->header_a));
  CHECK_OK(ludx_ss_start(&p->b, false, rx, tx, hash, p->header_b));
  CHECK(p->header_a[0] == 56 && p->header_a[1] == 0 && p->header_a[2] == 0);
  if (!exchange)
    return;
  const uint8_t *in = p->header_a, *out;
  size_t in_len = sizeof(p->header_a), out_len;
  CHECK_RC(ludx_ss_read(&p->b, &in, &in_len, &out, &out_len), LUDX_SS_NEED_MORE);
  CHECK(ludx_ss_ready(&p->b) && in_len == 0);
  in = p->header_b;
  in_len = sizeof(p->header_b);
  CHECK_RC(ludx_ss_read(&p->a, &in, &in_len, &out, &out_len), LUDX_SS_NEED_MORE);
  CHECK(ludx_ss_ready(&p->a));
}

static void
pair_destroy (pair_t *p) {
  ludx_ss_destroy(&p->a);
  ludx_ss_destroy(&p->b);
}

/* Feed everything to ss; returns the last result and counts DATA frames.
 * Stops at the first error. */
static int
feed (ludx_ss_t *ss, const uint8_t *buf, size_t len, int *data_frames) {
  const uint8_t *in = buf, *out;
  size_t in_len = len, out_len;
  int rc;
  *data_frames = 0;
  while ((rc = ludx_ss_read(ss, &in, &in_len, &out, &out_len)) > 0) {
    if (rc == LUDX_SS_DATA)
      (*data_frames)++;
  }
  return rc;
}

/* A failed stream keeps failing with the same code and holds no keys. */
static void
check_failed (ludx_ss_t *ss, int err) {
  const uint8_t x[4] = {1, 2, 3, 4}, *in = x, *out;
  size_t in_len = 4, out_len;
  uint8_t frame[64];
  CHECK_RC(ludx_ss_read(ss, &in, &in_len, &out, &out_len), err);
  CHECK_RC(ludx_ss_encrypt(ss, x, 4, frame, sizeof(frame), NULL), err);
  static const uint8_t zero[sizeof(ss->pull)];
  CHECK(memcmp(&ss->pull, zero, sizeof(ss->pull)) == 0 && memcmp(&ss->push, zero, sizeof(ss->push)) == 0);
  CHECK(ss->buf == NULL && ss->plain == NULL);
}

static void
flip_every_bit (void) {
  uint8_t frame[64];
  size_t len;
  for (size_t bit = 0; bit < (3 + 17 + 3) * 8; bit++) {
    pair_t p;
    pair_start(&p, true);
    CHECK_OK(ludx_ss_encrypt(&p.a, (const uint8_t *) "hi!", 3, frame, sizeof(frame), &len));
    CHECK(len == 23);
    frame[bit / 8] ^= (uint8_t) (1u << (bit % 8));
    int data;
    int rc = feed(&p.b, frame, len, &data);
    CHECK(data == 0);
    CHECK(p.b.stats.bytes_in == 0);
    if (bit >= 24) {
      CHECK_RC(rc, LUDX_CRYPTO_EDECRYPT);
    } else if (rc == LUDX_SS_NEED_MORE) {
      /* L grew: the decoder waits for bytes that would not verify either. */
      uint8_t more[1 << 16] = {0};
      rc = feed(&p.b, more, sizeof(more), &data);
      CHECK(data == 0);
      CHECK(rc == LUDX_CRYPTO_EDECRYPT || rc == LUDX_SS_NEED_MORE);
    } else {
      CHECK(rc == LUDX_CRYPTO_EFRAME || rc == LUDX_CRYPTO_EDECRYPT);
    }
    if (rc < 0)
      check_failed(&p.b, rc);
    pair_destroy(&p);
  }

  /* Flips in the id/header frame: the length, the id, or the header (the
   * first data frame then fails). */
  for (size_t bit = 0; bit < LUDX_SS_HEADER_FRAMEBYTES * 8; bit++) {
    pair_t p;
    pair_start(&p, false);
    CHECK_OK(ludx_ss_encrypt(&p.a, (const uint8_t *) "hi!", 3, frame, sizeof(frame), &len));
    uint8_t wire[LUDX_SS_HEADER_FRAMEBYTES + 64];
    memcpy(wire, p.header_a, LUDX_SS_HEADER_FRAMEBYTES);
    memcpy(wire + LUDX_SS_HEADER_FRAMEBYTES, frame, len);
    wire[bit / 8] ^= (uint8_t) (1u << (bit % 8));
    int data;
    int rc = feed(&p.b, wire, LUDX_SS_HEADER_FRAMEBYTES + len, &data);
    CHECK(data == 0);
    if (bit < 24) {
      CHECK_RC(rc, LUDX_CRYPTO_EHEADER);
    } else if (bit < (3 + 32) * 8) {
      CHECK_RC(rc, LUDX_CRYPTO_ESTREAMID);
    } else {
      CHECK_RC(rc, LUDX_CRYPTO_EDECRYPT);
    }
    check_failed(&p.b, rc);
    pair_destroy(&p);
  }
}

static void
truncated (void) {
  pair_t p;
  uint8_t frame[64], frame2[64];
  size_t len, len2;
  int data;

  /* One byte short: nothing comes out, the decoder waits. */
  pair_start(&p, true);
  CHECK_OK(ludx_ss_encrypt(&p.a, (const uint8_t *) "hello", 5, frame, sizeof(frame), &len));
  CHECK_OK(ludx_ss_encrypt(&p.a, (const uint8_t *) "world", 5, frame2, sizeof(frame2), &len2));
  for (size_t cut = 0; cut < len; cut++) {
    ludx_ss_t copy = p.b;
    copy.buf = NULL; /* a fresh decoder in the same crypto state */
    copy.buf_cap = 0;
    copy.plain = NULL;
    copy.plain_cap = 0;
    CHECK_RC(feed(&copy, frame, cut, &data), LUDX_SS_NEED_MORE);
    CHECK(data == 0);
    /* The next frame's bytes then complete it: the MAC fails. Unless they
     * are the missing bytes themselves (its length prefix equal to the
     * frame's last MAC byte: 1 run in 256 with random keys), when the frame
     * is whole again. */
    if (cut >= 3 && memcmp(frame + cut, frame2, len - cut) != 0) {
      CHECK_RC(feed(&copy, frame2, len2, &data), LUDX_CRYPTO_EDECRYPT);
      CHECK(data == 0);
    }
    ludx_ss_destroy(&copy);
  }

  /* A frame cut short with its length fixed up to match. */
  for (size_t keep = 17; keep < len - 3; keep++) {
    ludx_ss_t copy = p.b;
    copy.buf = copy.plain = NULL;
    copy.buf_cap = copy.plain_cap = 0;
    uint8_t cut[64];
    memcpy(cut, frame, 3 + keep);
    ludx_ss_prefix(cut, keep);
    CHECK_RC(feed(&copy, cut, 3 + keep, &data), LUDX_CRYPTO_EDECRYPT);
    CHECK(data == 0);
    ludx_ss_destroy(&copy);
  }

  /* The whole frame still reads. */
  CHECK_RC(feed(&p.b, frame, len, &data), LUDX_SS_NEED_MORE);
  CHECK(data == 1);
  pair_destroy(&p);
}

/* A length prefix alone reserves nothing: a peer that sends "16 MiB
 * follows" and then 10 bytes costs us buffer for the 10 bytes, not the
 * frame. A large frame in small pieces still reads whole and right. */
static void
prefix_reserves_nothing (void) {
  pair_t p;
  pair_start(&p, true);
  uint8_t forged[3 + 10] = {0};
  ludx_ss_prefix(forged, LUDX_SS_MAX_FRAME);
  const uint8_t *in = forged, *out;
  size_t in_len = sizeof(forged), out_len;
  ludx_ss_t copy = p.b;
  copy.buf = copy.plain = NULL;
  copy.buf_cap = copy.plain_cap = 0;
  CHECK_RC(ludx_ss_read(&copy, &in, &in_len, &out, &out_len), LUDX_SS_NEED_MORE);
  CHECK(copy.buf_len == 10);
  CHECK(copy.buf_cap <= 256);
  ludx_ss_destroy(&copy);

  size_t n = 1 << 20, len;
  uint8_t *plain = malloc(n), *frame = malloc(n + 64);
  CHECK(plain != NULL && frame != NULL);
  for (size_t i = 0; i < n; i++)
    plain[i] = (uint8_t) (i * 7 + 3);
  CHECK_OK(ludx_ss_encrypt(&p.a, plain, n, frame, n + 64, &len));
  int got = 0;
  for (size_t off = 0; off < len; off += 1000) {
    in = frame + off;
    in_len = len - off < 1000 ? len - off : 1000;
    int rc = ludx_ss_read(&p.b, &in, &in_len, &out, &out_len);
    if (rc == LUDX_SS_DATA) {
      CHECK(out_len == n && memcmp(out, plain, n) == 0);
      got++;
    } else {
      CHECK_RC(rc, LUDX_SS_NEED_MORE);
      /* capacity follows the bytes that came, at most twice them */
      CHECK(p.b.buf_cap <= 2 * p.b.buf_len + 256);
    }
  }
  CHECK(got == 1);
  CHECK(p.b.buf_cap <= len);
  free(plain);
  free(frame);
  pair_destroy(&p);
}

static void
lengths (void) {
  pair_t p;
  int data;
  uint8_t frame[64];
  size_t len;

  /* Encoder: at most 2^24 - 1 - 17 bytes per write, buffers checked. */
  uint8_t pre[3];
  CHECK_RC(ludx_ss_prefix(pre, LUDX_SS_MAX_FRAME + 1), LUDX_CRYPTO_ETOOLARGE);
  CHECK_OK(ludx_ss_prefix(pre, LUDX_SS_MAX_FRAME));
  CHECK(pre[0] == 0xff && pre[1] == 0xff && pre[2] == 0xff);
  pair_start(&p, true);
  CHECK_RC(ludx_ss_encrypt(&p.a, frame, LUDX_SS_MAX_WRITE + 1, frame, sizeof(frame), &len), LUDX_CRYPTO_ETOOLARGE);
  CHECK_RC(ludx_ss_encrypt(&p.a, (const uint8_t *) "x", 1, frame, 20, &len), LUDX_CRYPTO_ENOBUFS);
  CHECK_RC(ludx_ss_encrypt(&p.a, NULL, 1, frame, sizeof(frame), &len), LUDX_CRYPTO_EINVAL);
  const uint8_t *f;
  CHECK_RC(ludx_ss_encrypt_frame(&p.a, frame, LUDX_SS_MAX_WRITE + 1, &f, &len), LUDX_CRYPTO_ETOOLARGE);

  /* The largest write travels as one frame of L = 2^24 - 1. */
  uint8_t *big = malloc(LUDX_SS_MAX_WRITE);
  CHECK(big != NULL);
  for (size_t i = 0; i < LUDX_SS_MAX_WRITE; i++)
    big[i] = (uint8_t) (i * 7);
  CHECK_OK(ludx_ss_encrypt_frame(&p.a, big, LUDX_SS_MAX_WRITE, &f, &len));
  CHECK(len == LUDX_SS_MAX_FRAME + 3 && f[0] == 0xff && f[1] == 0xff && f[2] == 0xff);
  const uint8_t *in = f, *out;
  size_t in_len = len, out_len;
  CHECK_RC(ludx_ss_read(&p.b, &in, &in_len, &out, &out_len), LUDX_SS_DATA);
  CHECK(out_len == LUDX_SS_MAX_WRITE && memcmp(out, big, out_len) == 0);
  free(big);
  pair_destroy(&p);

  /* Decoder: L < 17 after the header, L = 0 anywhere, L > 65535 during
   * the handshake, all refused from the prefix alone (nothing buffered). */
  for (uint32_t l = 0; l < 17; l++) {
    pair_start(&p, true);
    uint8_t wire[3];
    ludx_ss_prefix(wire, l);
    CHECK_RC(feed(&p.b, wire, 3, &data), LUDX_CRYPTO_EFRAME);
    check_failed(&p.b, LUDX_CRYPTO_EFRAME);
    pair_destroy(&p);
  }
  static const uint32_t bad_hs[] = {0, 65536, 65537, 0x100000, LUDX_SS_MAX_FRAME};
  for (size_t i = 0; i < sizeof(bad_hs) / sizeof(bad_hs[0]); i++) {
    ludx_ss_t ss;
    ludx_ss_init(&ss);
    uint8_t wire[3];
    ludx_ss_prefix(wire, bad_hs[i]);
    CHECK_RC(feed(&ss, wire, 3, &data), LUDX_CRYPTO_EFRAME);
    CHECK(ss.buf_cap == 0);
    ludx_ss_destroy(&ss);
  }
  /* A 65535-byte handshake frame is passed through whole. */
  ludx_ss_t ss;
  ludx_ss_init(&ss);
  static uint8_t hs[3 + 65535];
  ludx_ss_prefix(hs, 65535);
  memset(hs + 3, 0x42, 65535);
  for (size_t i = 0; i < sizeof(hs); i += 1000) {
    in = hs + i;
    in_len = sizeof(hs) - i < 1000 ? sizeof(hs) - i : 1000;
    int rc = ludx_ss_read(&ss, &in, &in_len, &out, &out_len);
    CHECK_RC(rc, i + 1000 >= sizeof(hs) ? LUDX_SS_HANDSHAKE : LUDX_SS_NEED_MORE);
  }
  CHECK(out_len == 65535 && out[0] == 0x42 && out[65534] == 0x42);
  ludx_ss_destroy(&ss);
}

static void
replay_reorder (void) {
  pair_t p;
  uint8_t f1[64], f2[64];
  size_t l1, l2;
  int data;

  pair_start(&p, true);
  CHECK_OK(ludx_ss_encrypt(&p.a, (const uint8_t *) "one", 3, f1, sizeof(f1), &l1));
  CHECK_OK(ludx_ss_encrypt(&p.a, (const uint8_t *) "two", 3, f2, sizeof(f2), &l2));
  CHECK_RC(feed(&p.b, f1, l1, &data), LUDX_SS_NEED_MORE);
  CHECK(data == 1);
  CHECK_RC(feed(&p.b, f1, l1, &data), LUDX_CRYPTO_EDECRYPT); /* replay */
  CHECK(data == 0);
  check_failed(&p.b, LUDX_CRYPTO_EDECRYPT);
  pair_destroy(&p);

  pair_start(&p, true);
  CHECK_OK(ludx_ss_encrypt(&p.a, (const uint8_t *) "one", 3, f1, sizeof(f1), &l1));
  CHECK_OK(ludx_ss_encrypt(&p.a, (const uint8_t *) "two", 3, f2, sizeof(f2), &l2));
  CHECK_RC(feed(&p.b, f2, l2, &data), LUDX_CRYPTO_EDECRYPT); /* reorder */
  CHECK(data == 0);
  pair_destroy(&p);

  /* A frame from the other direction (a's own output fed back to a). */
  pair_start(&p, true);
  CHECK_OK(ludx_ss_encrypt(&p.a, (const uint8_t *) "one", 3, f1, sizeof(f1), &l1));
  CHECK_RC(feed(&p.a, f1, l1, &data), LUDX_CRYPTO_EDECRYPT);
  pair_destroy(&p);
}

static void
bad_header (void) {
  pair_t p;
  int data;
  uint8_t wire[128];

  /* L = 55 and 57: "Invalid header message received". */
  for (int d = -1; d <= 1; d += 2) {
    pair_start(&p, false);
    memcpy(wire, p.header_a, sizeof(p.header_a));
    ludx_ss_prefix(wire, (size_t) (56 + d));
    CHECK_RC(feed(&p.b, wire, 3, &data), LUDX_CRYPTO_EHEADER);
    check_failed(&p.b, LUDX_CRYPTO_EHEADER);
    pair_destroy(&p);
  }

  /* A data frame before the header. */
  pair_start(&p, false);
  size_t len;
  CHECK_OK(ludx_ss_encrypt(&p.a, (const uint8_t *) "early", 5, wire, sizeof(wire), &len));
  CHECK_RC(feed(&p.b, wire, len, &data), LUDX_CRYPTO_EHEADER);
  pair_destroy(&p);

  /* Our own header reflected back carries our role's id. */
  pair_start(&p, false);
  CHECK_RC(feed(&p.a, p.header_a, sizeof(p.header_a), &data), LUDX_CRYPTO_ESTREAMID);
  check_failed(&p.a, LUDX_CRYPTO_ESTREAMID);
  pair_destroy(&p);

  /* A header made for another handshake hash. */
  pair_start(&p, false);
  uint8_t other[64] = {9};
  memcpy(wire, p.header_a, sizeof(p.header_a));
  ludx_ss_stream_id(wire + 3, other, true);
  CHECK_RC(feed(&p.b, wire, sizeof(p.header_a), &data), LUDX_CRYPTO_ESTREAMID);
  pair_destroy(&p);
}

static void
keepalive (void) {
  pair_t p;
  uint8_t wire[256];
  size_t off = 0, len;
  int data;
  pair_start(&p, true);
  /* keep-alive, "a", keep-alive, keep-alive, "b": two plaintexts come out. */
  const char *msgs[] = {"", "a", "", "", "b"};
  for (int i = 0; i < 5; i++) {
    CHECK_OK(ludx_ss_encrypt(&p.a, (const uint8_t *) msgs[i], strlen(msgs[i]), wire + off, sizeof(wire) - off, &len));
    off += len;
  }
  CHECK(wire[0] == 17 && wire[1] == 0 && wire[2] == 0);
  CHECK_RC(feed(&p.b, wire, off, &data), LUDX_SS_NEED_MORE);
  CHECK(data == 2);
  CHECK(p.b.stats.keepalives_in == 3 && p.b.stats.frames_in == 5 && p.b.stats.bytes_in == 2);
  CHECK(p.a.stats.frames_out == 5 && p.a.stats.bytes_out == 2);
  pair_destroy(&p);
}

static void
unordered_bad (void) {
  uint8_t hash[64], box[128], plain[128];
  size_t blen, plen;
  unhex(hash, 64, HASH);
  ludx_unordered_t ui, ur;
  CHECK_OK(ludx_unordered_init(&ui, true, hash));
  CHECK_OK(ludx_unordered_init(&ur, false, hash));

  for (size_t l = 0; l < 24; l++) {
    CHECK_RC(ludx_unordered_open(&ur, box, l, plain, sizeof(plain), &plen), LUDX_CRYPTO_EFRAME);
  }
  CHECK_OK(ludx_unordered_seal(&ui, (const uint8_t *) "datagram", 8, box, sizeof(box), &blen));
  for (size_t bit = 0; bit < blen * 8; bit++) {
    box[bit / 8] ^= (uint8_t) (1u << (bit % 8));
    memset(plain, SENTINEL_BYTE, sizeof(plain));
    CHECK_RC(ludx_unordered_open(&ur, box, blen, plain, sizeof(plain), &plen), LUDX_CRYPTO_EDECRYPT);
    for (size_t i = 0; i < sizeof(plain); i++)
      CHECK(plain[i] == SENTINEL_BYTE);
    box[bit / 8] ^= (uint8_t) (1u << (bit % 8));
  }
  CHECK_OK(ludx_unordered_open(&ur, box, blen, plain, sizeof(plain), &plen));
  CHECK_OK(ludx_unordered_open(&ur, box, blen, plain, sizeof(plain), &plen)); /* no replay window */
  CHECK_RC(ludx_unordered_open(&ui, box, blen, plain, sizeof(plain), &plen), LUDX_CRYPTO_EDECRYPT);
  CHECK_RC(ludx_unordered_open(&ur, box, blen, plain, 7, &plen), LUDX_CRYPTO_ENOBUFS);
  CHECK_RC(ludx_unordered_seal(&ui, plain, 8, box, 31, &blen), LUDX_CRYPTO_ENOBUFS);

  /* The counter wraps back to its start: sending stops for good. */
  memset(ui.counter, 0xff, 8);
  memset(ui.initial, 0x00, 8);
  ui.initial[0] = 1;
  CHECK_OK(ludx_unordered_seal(&ui, NULL, 0, box, sizeof(box), &blen)); /* -> 00..00 */
  CHECK_RC(ludx_unordered_seal(&ui, NULL, 0, box, sizeof(box), &blen), LUDX_CRYPTO_ENONCE);
  CHECK_RC(ludx_unordered_seal(&ui, NULL, 0, box, sizeof(box), &blen), LUDX_CRYPTO_ENONCE);
}

static void
misuse (void) {
  ludx_ss_t ss;
  uint8_t frame[64], header[LUDX_SS_HEADER_FRAMEBYTES], key[32] = {0}, hash[64] = {0};
  size_t len;
  ludx_ss_init(&ss);
  CHECK_RC(ludx_ss_encrypt(&ss, (const uint8_t *) "x", 1, frame, sizeof(frame), &len), LUDX_CRYPTO_ESTATE);
  CHECK_RC(ludx_ss_start(&ss, true, key, NULL, hash, header), LUDX_CRYPTO_EINVAL);
  CHECK_OK(ludx_ss_start(&ss, true, key, key, hash, header));
  CHECK_RC(ludx_ss_start(&ss, true, key, key, hash, header), LUDX_CRYPTO_ESTATE);
  const uint8_t *in = NULL, *out;
  size_t in_len = 0, out_len;
  CHECK_RC(ludx_ss_read(&ss, &in, &in_len, &out, &out_len), LUDX_SS_NEED_MORE);
  in_len = 3;
  CHECK_RC(ludx_ss_read(&ss, &in, &in_len, &out, &out_len), LUDX_CRYPTO_EINVAL);
  CHECK_RC(ludx_ss_read(&ss, NULL, &in_len, &out, &out_len), LUDX_CRYPTO_EINVAL);
  ludx_ss_destroy(&ss);
  ludx_ss_destroy(NULL);
}

/* A frame the decoder began is taken over by a caller that gathers frames
 * itself: its length and the bytes so far come out, the decoder is direct
 * after, and the frame opens in place with the rest added. */
static void
take_begun (void) {
  pair_t p;
  pair_start(&p, true);
  uint8_t msg[3000], frame[3100];
  for (size_t i = 0; i < sizeof(msg); i++)
    msg[i] = (uint8_t) (i * 7);
  size_t flen;
  CHECK_OK(ludx_ss_encrypt(&p.a, msg, sizeof(msg), frame, sizeof(frame), &flen));
  uint32_t len;
  const uint8_t *have;
  size_t have_len;
  CHECK(!ludx_ss_begun(&p.b, NULL, NULL));
  CHECK(ludx_ss_take_begun(&p.b, &len, &have, &have_len) == 0);
  /* the prefix and 1000 bytes of the body through the decoder */
  const uint8_t *in = frame, *out;
  size_t in_len = 1003, out_len;
  CHECK_RC(ludx_ss_read(&p.b, &in, &in_len, &out, &out_len), LUDX_SS_NEED_MORE);
  uint32_t blen = 0;
  size_t bhave = 0;
  CHECK(ludx_ss_begun(&p.b, &blen, &bhave) && !ludx_ss_direct(&p.b));
  CHECK(blen == flen - 3 && bhave == 1000);
  CHECK(ludx_ss_take_begun(&p.b, &len, &have, &have_len) == 1);
  CHECK(len == flen - 3 && have_len == 1000);
  uint8_t body[3100];
  memcpy(body, have, have_len);
  CHECK(ludx_ss_direct(&p.b) && !ludx_ss_begun(&p.b, NULL, NULL));
  memcpy(body + 1000, frame + 1003, flen - 1003);
  size_t plain;
  CHECK_OK(ludx_ss_open_in_place(&p.b, body, len, &plain));
  CHECK(plain == sizeof(msg) && memcmp(body + 1, msg, plain) == 0);
  /* only the prefix read: nothing of the body yet */
  CHECK_OK(ludx_ss_encrypt(&p.a, msg, 10, frame, sizeof(frame), &flen));
  in = frame;
  in_len = 3;
  CHECK_RC(ludx_ss_read(&p.b, &in, &in_len, &out, &out_len), LUDX_SS_NEED_MORE);
  CHECK(ludx_ss_take_begun(&p.b, &len, &have, &have_len) == 1);
  CHECK(len == flen - 3 && have_len == 0);
  memcpy(body, frame + 3, len);
  CHECK_OK(ludx_ss_open_in_place(&p.b, body, len, &plain));
  CHECK(plain == 10 && memcmp(body + 1, msg, 10) == 0);
  pair_destroy(&p);
}

TEST_MAIN({"take_begun", take_begun}, {"flip_every_bit", flip_every_bit}, {"truncated", truncated}, {"prefix_reserves_nothing", prefix_reserves_nothing}, {"lengths", lengths}, {"replay_reorder", replay_reorder}, {"bad_header", bad_header}, {"keepalive", keepalive}, {"unordered_bad", unordered_bad}, {"misuse", misuse})
