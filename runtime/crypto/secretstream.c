/* Section marks (A.2, A.3 step 6, ...) are those of
 * docs/protocol/hyperswarm.md (secret-stream framing and handshake). */
#include "ludx_secretstream.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum {
  SS_HANDSHAKE = 0, /* no keys yet: frames are Noise messages */
  SS_HEADER = 1,    /* keys set: the peer's id/header frame comes next */
  SS_DATA = 2,
  SS_FAILED = 3,
};

#define MIN_BUFFER_CAP 256

void
ludx_ss_stream_id (uint8_t out[LUDX_SS_IDBYTES], const uint8_t hash[LUDX_HASHBYTES], bool initiator) {
  uint8_t ns[LUDX_H32BYTES];
  ludx_ns(ns, "hyperswarm/secret-stream", initiator ? 0 : 1);
  crypto_generichash(out, LUDX_SS_IDBYTES, ns, sizeof(ns), hash, LUDX_HASHBYTES);
}

int
ludx_ss_prefix (uint8_t out[LUDX_SS_PREFIXBYTES], size_t len) {
  if (len > LUDX_SS_MAX_FRAME)
    return LUDX_CRYPTO_ETOOLARGE;
  out[0] = (uint8_t) len;
  out[1] = (uint8_t) (len >> 8);
  out[2] = (uint8_t) (len >> 16);
  return 0;
}

void
ludx_ss_init (ludx_ss_t *ss) {
  memset(ss, 0, sizeof(*ss));
  ss->state = SS_HANDSHAKE;
}

static void
wipe_keys (ludx_ss_t *ss) {
  sodium_memzero(&ss->push, sizeof(ss->push));
  sodium_memzero(&ss->pull, sizeof(ss->pull));
  sodium_memzero(ss->rx, sizeof(ss->rx));
}

static void
free_buffer (uint8_t **p, size_t *cap) {
  if (*p != NULL) {
    sodium_memzero(*p, *cap);
    free(*p);
  }
  *p = NULL;
  *cap = 0;
}

static int
fail (ludx_ss_t *ss, int err) {
  wipe_keys(ss);
  free_buffer(&ss->buf, &ss->buf_cap);
  free_buffer(&ss->plain, &ss->plain_cap);
  free_buffer(&ss->out, &ss->out_cap);
  ss->buf_len = 0;
  ss->state = SS_FAILED;
  ss->error = err;
  return err;
}

/* Grow a buffer whose contents need not survive. */
static int
reserve (uint8_t **p, size_t *cap, size_t need) {
  if (*cap >= need)
    return 0;
  size_t n = *cap * 2 > need ? *cap * 2 : need;
  if (n < MIN_BUFFER_CAP)
    n = MIN_BUFFER_CAP;
  free_buffer(p, cap);
  *p = malloc(n);
  if (*p == NULL)
    return LUDX_CRYPTO_ENOMEM;
  *cap = n;
  return 0;
}

/* Grow a buffer that holds `used` bytes to fit `need`, keeping them; never
 * past `limit` (the frame's length). The old copy is wiped. A peer's 3-byte
 * length prefix alone reserves nothing: capacity follows the bytes that came. */
static int
grow_keep (uint8_t **p, size_t *cap, size_t used, size_t need, size_t limit) {
  if (*cap >= need)
    return 0;
  size_t n = *cap * 2 > need ? *cap * 2 : need;
  if (n < MIN_BUFFER_CAP)
    n = MIN_BUFFER_CAP;
  if (n > limit)
    n = limit > need ? limit : need;
  uint8_t *q = malloc(n);
  if (q == NULL)
    return LUDX_CRYPTO_ENOMEM;
  if (used > 0)
    memcpy(q, *p, used);
  free_buffer(p, cap);
  *p = q;
  *cap = n;
  return 0;
}

int
ludx_ss_start (ludx_ss_t *ss, bool initiator, const uint8_t tx[LUDX_KEYBYTES], const uint8_t rx[LUDX_KEYBYTES], const uint8_t hash[LUDX_HASHBYTES], uint8_t header_frame[LUDX_SS_HEADER_FRAMEBYTES]) {
  if (ss == NULL || tx == NULL || rx == NULL || hash == NULL || header_frame == NULL)
    return LUDX_CRYPTO_EINVAL;
  if (ss->state == SS_FAILED)
    return ss->error;
  if (ss->state != SS_HANDSHAKE)
    return LUDX_CRYPTO_ESTATE;
  if (ludx_crypto_init() < 0)
    return LUDX_CRYPTO_ESODIUM;

  /* secret-stream A.3: send streamId(h, own role) || init_push header;
   * expect streamId(h, the other role) from the peer. */
  ludx_ss_prefix(header_frame, LUDX_SS_IDHEADERBYTES);
  ludx_ss_stream_id(header_frame + LUDX_SS_PREFIXBYTES, hash, initiator);
  crypto_secretstream_xchacha20poly1305_init_push(&ss->push, header_frame + LUDX_SS_PREFIXBYTES + LUDX_SS_IDBYTES, tx);
  ludx_ss_stream_id(ss->remote_id, hash, !initiator);
  memcpy(ss->rx, rx, LUDX_KEYBYTES);
  ss->state = SS_HEADER;
  return 0;
}

size_t
ludx_ss_frame_size (size_t len) {
  return LUDX_SS_PREFIXBYTES + LUDX_SS_ABYTES + len;
}

/* Whether ss may seal a write of len bytes now. */
static int
seal_check (const ludx_ss_t *ss, size_t len) {
  if (ss->state == SS_FAILED)
    return ss->error;
  if (ss->state == SS_HANDSHAKE)
    return LUDX_CRYPTO_ESTATE;
  /* A.2: one write is one frame; L = len + 17 must fit 24 bits. */
  if (len > LUDX_SS_MAX_WRITE)
    return LUDX_CRYPTO_ETOOLARGE;
  return 0;
}

static void
count_out (ludx_ss_t *ss, size_t len) {
  ss->stats.frames_out++;
  ss->stats.bytes_out += len;
}

void
ludx_ss_seal_with (ludx_ss_push_t *st, const uint8_t *msg, size_t len, uint8_t *out) {
  ludx_ss_prefix(out, len + LUDX_SS_ABYTES);
  /* msg may sit at out + 4 (in place), as secret-stream does it. */
  crypto_secretstream_xchacha20poly1305_push(st, out + LUDX_SS_PREFIXBYTES, NULL, msg, len, NULL, 0, crypto_secretstream_xchacha20poly1305_TAG_MESSAGE);
}

int
ludx_ss_encrypt (ludx_ss_t *ss, const uint8_t *msg, size_t len, uint8_t *out, size_t out_cap, size_t *out_len) {
  if (ss == NULL || out == NULL || (msg == NULL && len > 0))
    return LUDX_CRYPTO_EINVAL;
  int rc = seal_check(ss, len);
  if (rc < 0)
    return rc;
  size_t size = ludx_ss_frame_size(len);
  if (out_cap < size)
    return LUDX_CRYPTO_ENOBUFS;
  ludx_ss_seal_with(&ss->push, msg, len, out);
  count_out(ss, len);
  if (out_len != NULL)
    *out_len = size;
  return 0;
}

int
ludx_ss_seal_begin (const ludx_ss_t *ss, size_t len, ludx_ss_push_t *st) {
  if (ss == NULL || st == NULL)
    return LUDX_CRYPTO_EINVAL;
  int rc = seal_check(ss, len);
  if (rc < 0)
    return rc;
  *st = ss->push;
  return 0;
}

void
ludx_ss_seal_end (ludx_ss_t *ss, const ludx_ss_push_t *st, size_t len) {
  ss->push = *st;
  count_out(ss, len);
}

int
ludx_ss_encrypt_frame (ludx_ss_t *ss, const uint8_t *msg, size_t len, const uint8_t **frame, size_t *frame_len) {
  if (ss == NULL || frame == NULL || frame_len == NULL)
    return LUDX_CRYPTO_EINVAL;
  if (ss->state == SS_FAILED)
    return ss->error;
  if (len > LUDX_SS_MAX_WRITE)
    return LUDX_CRYPTO_ETOOLARGE;
  int rc = reserve(&ss->out, &ss->out_cap, ludx_ss_frame_size(len));
  if (rc < 0)
    return rc;
  rc = ludx_ss_encrypt(ss, msg, len, ss->out, ss->out_cap, frame_len);
  if (rc < 0)
    return rc;
  *frame = ss->out;
  return 0;
}

/* Validate L as soon as the prefix is complete, before buffering a byte
 * of the body (A.2, A.3 step 4, A.3 step 6). */
static int
check_length (const ludx_ss_t *ss, uint32_t len) {
  switch (ss->state) {
    case SS_HANDSHAKE:
      return len == 0 || len > LUDX_SS_MAX_HANDSHAKE ? LUDX_CRYPTO_EFRAME : 0;
    case SS_HEADER:
      return len != LUDX_SS_IDHEADERBYTES ? LUDX_CRYPTO_EHEADER : 0;
    default:
      return len < LUDX_SS_ABYTES ? LUDX_CRYPTO_EFRAME : 0;
  }
}

static int
on_header (ludx_ss_t *ss, const uint8_t *frame) {
  if (sodium_memcmp(frame, ss->remote_id, LUDX_SS_IDBYTES) != 0)
    return LUDX_CRYPTO_ESTREAMID;
  if (crypto_secretstream_xchacha20poly1305_init_pull(&ss->pull, frame + LUDX_SS_IDBYTES, ss->rx) != 0)
    return LUDX_CRYPTO_EHEADER;
  sodium_memzero(ss->rx, sizeof(ss->rx));
  ss->state = SS_DATA;
  return 0;
}

static int
on_data (ludx_ss_t *ss, const uint8_t *frame, uint32_t len, size_t *plain_len) {
  int rc = reserve(&ss->plain, &ss->plain_cap, len - LUDX_SS_ABYTES);
  if (rc < 0)
    return rc;
  unsigned long long mlen = 0;
  unsigned char tag;
  /* A.3 step 6: the tag is read and ignored; a failed pull is fatal, and
   * libsodium writes no plaintext before the MAC checks out. */
  if (crypto_secretstream_xchacha20poly1305_pull(&ss->pull, ss->plain, &mlen, &tag, frame, len, NULL, 0) != 0) {
    return LUDX_CRYPTO_EDECRYPT;
  }
  ss->stats.frames_in++;
  *plain_len = (size_t) mlen;
  return 0;
}

/* Takes the 3-byte length prefix (A.2) from the input, byte by byte as it
 * comes: true once it is whole in ss->frame_len. */
static bool
read_prefix (ludx_ss_t *ss, const uint8_t **in, size_t *in_len) {
  while (ss->prefix_have < LUDX_SS_PREFIXBYTES) {
    if (*in_len == 0)
      return false;
    ss->frame_len |= (uint32_t) (**in) << (8 * ss->prefix_have);
    ss->prefix_have++;
    (*in)++;
    (*in_len)--;
  }
  return true;
}

int
ludx_ss_read (ludx_ss_t *ss, const uint8_t **in, size_t *in_len, const uint8_t **out, size_t *out_len) {
  if (ss == NULL || in == NULL || in_len == NULL || (*in == NULL && *in_len > 0) || out == NULL || out_len == NULL)
    return LUDX_CRYPTO_EINVAL;
  if (ss->state == SS_FAILED)
    return ss->error;

  for (;;) {
    if (ss->prefix_have < LUDX_SS_PREFIXBYTES) {
      if (!read_prefix(ss, in, in_len))
        return LUDX_SS_NEED_MORE;
      int rc = check_length(ss, ss->frame_len);
      if (rc < 0)
        return fail(ss, rc);
    }

    uint32_t len = ss->frame_len;
    const uint8_t *frame;
    if (ss->buf_len == 0 && *in_len >= len) {
      frame = *in; /* whole frame in the input: no copy */
      *in += len;
      *in_len -= len;
    } else {
      size_t take = len - ss->buf_len;
      if (take > *in_len)
        take = *in_len;
      if (take == 0)
        return LUDX_SS_NEED_MORE;
      int rc = grow_keep(&ss->buf, &ss->buf_cap, ss->buf_len, ss->buf_len + take, len);
      if (rc < 0)
        return fail(ss, rc);
      memcpy(ss->buf + ss->buf_len, *in, take);
      ss->buf_len += take;
      *in += take;
      *in_len -= take;
      if (ss->buf_len < len)
        return LUDX_SS_NEED_MORE;
      frame = ss->buf;
    }
    ss->prefix_have = 0;
    ss->frame_len = 0;
    ss->buf_len = 0;

    if (ss->state == SS_HANDSHAKE) {
      *out = frame;
      *out_len = len;
      return LUDX_SS_HANDSHAKE;
    }
    if (ss->state == SS_HEADER) {
      int rc = on_header(ss, frame);
      if (rc < 0)
        return fail(ss, rc);
      continue;
    }

    size_t plain_len;
    int rc = on_data(ss, frame, len, &plain_len);
    if (rc < 0)
      return fail(ss, rc);
    if (plain_len == 0) {
      ss->stats.keepalives_in++; /* A.4: keep-alives are dropped */
      continue;
    }
    ss->stats.bytes_in += plain_len;
    *out = ss->plain;
    *out_len = plain_len;
    return LUDX_SS_DATA;
  }
}

bool
ludx_ss_direct (const ludx_ss_t *ss) {
  return ss->state == SS_DATA && ss->buf_len == 0 && ss->prefix_have < LUDX_SS_PREFIXBYTES;
}

bool
ludx_ss_begun (const ludx_ss_t *ss, uint32_t *len, size_t *have_len) {
  if (ss == NULL || ss->state != SS_DATA || ss->prefix_have != LUDX_SS_PREFIXBYTES)
    return false;
  if (len != NULL)
    *len = ss->frame_len;
  if (have_len != NULL)
    *have_len = ss->buf_len;
  return true;
}

int
ludx_ss_take_begun (ludx_ss_t *ss, uint32_t *len, const uint8_t **have, size_t *have_len) {
  if (len == NULL || have == NULL || have_len == NULL || !ludx_ss_begun(ss, NULL, NULL))
    return 0;
  *len = ss->frame_len; /* checked when its prefix was read (A.2) */
  *have = ss->buf;
  *have_len = ss->buf_len;
  ss->prefix_have = 0;
  ss->frame_len = 0;
  ss->buf_len = 0;
  return 1;
}

int
ludx_ss_next_length (ludx_ss_t *ss, const uint8_t **in, size_t *in_len, uint32_t *len) {
  if (ss == NULL || in == NULL || in_len == NULL || (*in == NULL && *in_len > 0) || len == NULL)
    return LUDX_CRYPTO_EINVAL;
  if (ss->state == SS_FAILED)
    return ss->error;
  if (!ludx_ss_direct(ss))
    return LUDX_CRYPTO_ESTATE;
  if (!read_prefix(ss, in, in_len))
    return 0;
  /* A.2: L is checked before the caller buffers a byte of the body. */
  int rc = check_length(ss, ss->frame_len);
  if (rc < 0)
    return fail(ss, rc);
  *len = ss->frame_len;
  ss->prefix_have = 0;
  ss->frame_len = 0;
  return 1;
}

int
ludx_ss_open_in_place (ludx_ss_t *ss, uint8_t *frame, uint32_t len, size_t *plain_len) {
  if (ss == NULL || frame == NULL || plain_len == NULL)
    return LUDX_CRYPTO_EINVAL;
  if (ss->state == SS_FAILED)
    return ss->error;
  if (!ludx_ss_direct(ss))
    return LUDX_CRYPTO_ESTATE;
  int rc = check_length(ss, len);
  if (rc < 0)
    return fail(ss, rc);
  unsigned long long mlen = 0;
  unsigned char tag;
  /* In place as secret-stream does it: the plaintext lands one byte in
   * (over the ciphertext after the tag byte); nothing is written unless
   * the MAC checks out. */
  if (crypto_secretstream_xchacha20poly1305_pull(&ss->pull, frame + 1, &mlen, &tag, frame, len, NULL, 0) != 0)
    return fail(ss, LUDX_CRYPTO_EDECRYPT);
  ss->stats.frames_in++;
  if (mlen == 0)
    ss->stats.keepalives_in++; /* A.4: keep-alives are dropped */
  ss->stats.bytes_in += mlen;
  *plain_len = (size_t) mlen;
  return 0;
}

bool
ludx_ss_ready (const ludx_ss_t *ss) {
  return ss->state == SS_DATA;
}

const ludx_ss_stats_t *
ludx_ss_stats (const ludx_ss_t *ss) {
  return &ss->stats;
}

void
ludx_ss_trim (ludx_ss_t *ss, size_t keep) {
  if (ss == NULL)
    return;
  if (ss->out_cap > keep) { // sealed frames: nothing secret to wipe
    free(ss->out);
    ss->out = NULL;
    ss->out_cap = 0;
  }
  ludx_ss_trim_read(ss, keep);
}

void
ludx_ss_trim_read (ludx_ss_t *ss, size_t keep) {
  if (ss == NULL)
    return;
  if (ss->plain_cap > keep)
    free_buffer(&ss->plain, &ss->plain_cap);
  if (ss->buf_cap > keep && ss->buf_len == 0)
    free_buffer(&ss->buf, &ss->buf_cap);
}

size_t
ludx_ss_buffer_bytes (const ludx_ss_t *ss) {
  return ss->buf_cap + ss->plain_cap + ss->out_cap;
}

void
ludx_ss_destroy (ludx_ss_t *ss) {
  if (ss == NULL)
    return;
  wipe_keys(ss);
  free_buffer(&ss->buf, &ss->buf_cap);
  free_buffer(&ss->plain, &ss->plain_cap);
  free_buffer(&ss->out, &ss->out_cap);
  ss->buf_len = 0;
}

static double
thread_cpu_s (void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

int
ludx_ss_cipher_rate (size_t frame, uint64_t total, double *push_s, double *pull_s) {
  uint8_t key[crypto_secretstream_xchacha20poly1305_KEYBYTES];
  uint8_t header[crypto_secretstream_xchacha20poly1305_HEADERBYTES];
  crypto_secretstream_xchacha20poly1305_state push, pull;
  uint8_t *msg = calloc(1, frame);
  uint8_t *ct = malloc(frame + crypto_secretstream_xchacha20poly1305_ABYTES);
  if (msg == NULL || ct == NULL) {
    free(msg);
    free(ct);
    return LUDX_CRYPTO_ENOMEM;
  }
  randombytes_buf(key, sizeof(key));
  crypto_secretstream_xchacha20poly1305_init_push(&push, header, key);
  crypto_secretstream_xchacha20poly1305_init_pull(&pull, header, key);
  double ps = 0, pl = 0;
  int bad = 0;
  for (uint64_t done = 0; done < total; done += frame) {
    unsigned long long ct_len;
    unsigned long long msg_len;
    unsigned char tag;
    double t0 = thread_cpu_s();
    crypto_secretstream_xchacha20poly1305_push(&push, ct, &ct_len, msg, frame, NULL, 0, 0);
    double t1 = thread_cpu_s();
    bad |= crypto_secretstream_xchacha20poly1305_pull(&pull, msg, &msg_len, &tag, ct, ct_len, NULL, 0);
    double t2 = thread_cpu_s();
    ps += t1 - t0;
    pl += t2 - t1;
  }
  sodium_memzero(key, sizeof(key));
  sodium_memzero(&push, sizeof(push));
  sodium_memzero(&pull, sizeof(pull));
  free(msg);
  free(ct);
  if (bad)
    return LUDX_CRYPTO_EDECRYPT;
  *push_s = ps;
  *pull_s = pl;
  return 0;
}
