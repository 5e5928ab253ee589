/* Two in-memory endpoints: a Noise handshake over the 3-byte framing, the
 * id/header exchange, then megabytes both ways in random write sizes, read
 * back in random chunkings (single bytes included). Hash-checked. */

#include "test.h"

typedef struct {
  uint8_t *data;
  size_t off, len, cap;
} queue_t;

static uint8_t *
queue_reserve (queue_t *q, size_t n) {
  if (q->off > 0 && q->off == q->len)
    q->off = q->len = 0;
  if (q->len + n > q->cap) {
    if (q->off > 0) {
      memmove(q->data, q->data + q->off, q->len - q->off);
      q->len -= q->off;
      q->off = 0;
    }
    if (q->len + n > q->cap) {
      q->cap = (q->len + n) * 2;
      q->data = realloc(q->data, q->cap);
      CHECK(q->data != NULL);
    }
  }
  return q->data + q->len;
}

static void
queue_push (queue_t *q, const uint8_t *p, size_t n) {
  memcpy(queue_reserve(q, n), p, n);
  q->len += n;
}

typedef struct {
  bool initiator;
  ludx_noise_pattern_t pattern;
  ludx_noise_t hs;
  ludx_ss_t ss;
  bool started;
  queue_t *out, *in;
  uint64_t rng;      /* chunking and write sizes */
  uint64_t data_rng; /* the bytes we send */
  size_t to_send, sent, received;
  crypto_generichash_state tx_hash, rx_hash;
  const char *payload, *remote_payload;
  ludx_noise_result_t res;
} endpoint_t;

static void
send_handshake (endpoint_t *e) {
  uint8_t msg[256];
  size_t len;
  const char *p = e->payload;
  CHECK_OK(ludx_noise_send(&e->hs, (const uint8_t *) p, strlen(p), msg, sizeof(msg), &len));
  uint8_t pre[3];
  CHECK_OK(ludx_ss_prefix(pre, len));
  queue_push(e->out, pre, 3);
  queue_push(e->out, msg, len);
}

static void
maybe_start (endpoint_t *e) {
  if (e->started || ludx_noise_status(&e->hs) != LUDX_NOISE_DONE)
    return;
  uint8_t header[LUDX_SS_HEADER_FRAMEBYTES];
  CHECK_OK(ludx_noise_result(&e->hs, &e->res));
  CHECK_OK(ludx_ss_start(&e->ss, e->initiator, e->res.tx, e->res.rx, e->res.hash, header));
  queue_push(e->out, header, sizeof(header));
  e->started = true;
}

static void
endpoint_init (endpoint_t *e, bool initiator, ludx_noise_pattern_t pattern, const uint8_t *remote_pk, ludx_keypair_t *kp, queue_t *out, queue_t *in, uint64_t seed, size_t to_send) {
  memset(e, 0, sizeof(*e));
  e->initiator = initiator;
  e->pattern = pattern;
  e->out = out;
  e->in = in;
  e->rng = seed;
  e->data_rng = seed * 31 + 7;
  e->to_send = to_send;
  e->payload = initiator ? "client payload" : "server payload";
  e->remote_payload = initiator ? "server payload" : "client payload";
  crypto_generichash_init(&e->tx_hash, NULL, 0, 64);
  crypto_generichash_init(&e->rx_hash, NULL, 0, 64);
  CHECK_OK(ludx_noise_init(&e->hs, pattern, initiator, kp, NULL, 0, remote_pk));
  ludx_ss_init(&e->ss);
  if (initiator)
    send_handshake(e);
}

/* Read one random-sized chunk of what the peer wrote. */
static void
endpoint_read (endpoint_t *e) {
  queue_t *q = e->in;
  size_t avail = q->len - q->off;
  if (avail == 0)
    return;
  uint64_t r = test_rand(&e->rng);
  size_t n = r % 4 == 0 ? 1 + r % 7 : 1 + (r >> 8) % 100000; /* often tiny */
  if (n > avail)
    n = avail;
  const uint8_t *in = q->data + q->off, *out;
  size_t in_len = n, out_len;
  q->off += n;

  int rc;
  while ((rc = ludx_ss_read(&e->ss, &in, &in_len, &out, &out_len)) != LUDX_SS_NEED_MORE) {
    CHECK(rc > 0);
    if (rc == LUDX_SS_HANDSHAKE) {
      uint8_t pay[256];
      size_t plen;
      CHECK_OK(ludx_noise_recv(&e->hs, out, out_len, pay, sizeof(pay), &plen));
      CHECK(plen == strlen(e->remote_payload) && memcmp(pay, e->remote_payload, plen) == 0);
      if (ludx_noise_status(&e->hs) == LUDX_NOISE_SEND)
        send_handshake(e);
      maybe_start(e);
    } else {
      crypto_generichash_update(&e->rx_hash, out, out_len);
      e->received += out_len;
    }
  }
  CHECK(in_len == 0);
}

/* One random write, through one of the three encoder paths. */
static void
endpoint_write (endpoint_t *e) {
  if (!e->started || e->sent == e->to_send)
    return;
  if (e->out->len - e->out->off > (1 << 20))
    return; /* peer is behind */
  uint64_t r = test_rand(&e->rng);
  size_t n = r % 16 == 0 ? 0 : (size_t) ((r >> 8) % (1u << ((r >> 40) % 19))); /* log-uniform, < 256 KiB */
  if (n > e->to_send - e->sent)
    n = e->to_send - e->sent;

  size_t frame_size = ludx_ss_frame_size(n), len;
  uint8_t *dst = queue_reserve(e->out, frame_size);
  switch ((r >> 4) % 3) {
    case 0: { /* plaintext elsewhere, frame into the caller's buffer */
      uint8_t *plain = malloc(n + 1);
      CHECK(plain != NULL);
      test_fill(&e->data_rng, plain, n);
      crypto_generichash_update(&e->tx_hash, plain, n);
      CHECK_OK(ludx_ss_encrypt(&e->ss, plain, n, dst, frame_size, &len));
      free(plain);
      break;
    }
    case 1: /* in place: plaintext at frame + 4 */
      test_fill(&e->data_rng, dst + 4, n);
      crypto_generichash_update(&e->tx_hash, dst + 4, n);
      CHECK_OK(ludx_ss_encrypt(&e->ss, dst + 4, n, dst, frame_size, &len));
      break;
    default: { /* the stream's own output buffer */
      uint8_t *plain = malloc(n + 1);
      const uint8_t *frame;
      CHECK(plain != NULL);
      test_fill(&e->data_rng, plain, n);
      crypto_generichash_update(&e->tx_hash, plain, n);
      CHECK_OK(ludx_ss_encrypt_frame(&e->ss, plain, n, &frame, &len));
      memcpy(dst, frame, len);
      free(plain);
      break;
    }
  }
  CHECK(len == frame_size);
  e->out->len += len;
  e->sent += n;
}

static void
run (ludx_noise_pattern_t pattern, size_t a_to_b, size_t b_to_a, uint64_t seed) {
  ludx_keypair_t ka, kb;
  CHECK_OK(ludx_keypair_random(&ka));
  CHECK_OK(ludx_keypair_random(&kb));
  queue_t ab = {0}, ba = {0};
  endpoint_t a, b;
  endpoint_init(&a, true, pattern, pattern == LUDX_NOISE_IK ? kb.public_key : NULL, &ka, &ab, &ba, seed, a_to_b);
  endpoint_init(&b, false, pattern, ka.public_key, &kb, &ba, &ab, seed + 1, b_to_a);

  for (size_t rounds = 0; a.received < b_to_a || b.received < a_to_b; rounds++) {
    CHECK(rounds < 10000000);
    endpoint_write(&a);
    endpoint_write(&b);
    endpoint_read(&b);
    endpoint_read(&a);
  }
  CHECK(a.received == b_to_a && b.received == a_to_b);
  CHECK(ab.off == ab.len && ba.off == ba.len);

  uint8_t h1[64], h2[64];
  crypto_generichash_final(&a.tx_hash, h1, 64);
  crypto_generichash_final(&b.rx_hash, h2, 64);
  CHECK(memcmp(h1, h2, 64) == 0);
  crypto_generichash_final(&b.tx_hash, h1, 64);
  crypto_generichash_final(&a.rx_hash, h2, 64);
  CHECK(memcmp(h1, h2, 64) == 0);

  CHECK(memcmp(a.res.remote_public_key, kb.public_key, 32) == 0);
  CHECK(memcmp(b.res.remote_public_key, ka.public_key, 32) == 0);
  CHECK(memcmp(a.res.hash, b.res.hash, 64) == 0);
  CHECK(memcmp(a.res.tx, b.res.rx, 32) == 0 && memcmp(a.res.rx, b.res.tx, 32) == 0);
  const ludx_ss_stats_t *sa = ludx_ss_stats(&a.ss), *sb = ludx_ss_stats(&b.ss);
  CHECK(sa->bytes_out == a_to_b && sb->bytes_in == a_to_b && sb->frames_in == sa->frames_out);
  CHECK(sb->bytes_out == b_to_a && sa->bytes_in == b_to_a && sa->frames_in == sb->frames_out);
  printf("%s: %zu + %zu bytes, %llu + %llu frames (%llu + %llu keep-alives)\n", pattern == LUDX_NOISE_XX ? "XX" : "IK", a_to_b, b_to_a, (unsigned long long) sa->frames_out, (unsigned long long) sb->frames_out, (unsigned long long) sb->keepalives_in, (unsigned long long) sa->keepalives_in);

  ludx_ss_destroy(&a.ss);
  ludx_ss_destroy(&b.ss);
  free(ab.data);
  free(ba.data);
}

static void
xx_10mb (void) {
  run(LUDX_NOISE_XX, 10 * 1000 * 1000, 3 * 1000 * 1000, 42);
}

static void
ik_1mb (void) {
  run(LUDX_NOISE_IK, 1000 * 1000, 1000 * 1000, 7);
}

TEST_MAIN({"xx_10mb", xx_10mb}, {"ik_1mb", ik_1mb})
