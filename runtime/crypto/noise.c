#include "ludx_noise.h"

#include <sodium.h>
#include <string.h>

/* Tokens of a message pattern (Noise 7.1). */
enum { T_END = 0,
       T_E,
       T_S,
       T_EE,
       T_ES,
       T_SE,
       T_SS };

#define MAX_TOKENS 4

typedef struct {
  const char *name; /* 35 bytes each, so h = name padded to 64 (Noise 5.2) */
  uint8_t messages;
  uint8_t tokens[3][MAX_TOKENS + 1];
} pattern_t;

static const pattern_t patterns[] = {
    [LUDX_NOISE_XX] = {"Noise_XX_Ed25519_ChaChaPoly_BLAKE2b", 3, {{T_E}, {T_E, T_EE, T_S, T_ES}, {T_S, T_SE}}},
    [LUDX_NOISE_IK] = {"Noise_IK_Ed25519_ChaChaPoly_BLAKE2b", 2, {{T_E, T_ES, T_S, T_SS}, {T_E, T_EE, T_SE}}},
};

static bool
our_turn (const ludx_noise_t *hs) {
  /* Even messages go initiator -> responder. */
  return ((hs->step & 1) == 0) == hs->initiator;
}

static int
fail (ludx_noise_t *hs, int err) {
  ludx_noise_wipe(hs);
  hs->status = LUDX_NOISE_FAILED;
  hs->error = err;
  return err;
}

static void
mix_hash (ludx_noise_t *hs, const uint8_t *data, size_t len) {
  crypto_generichash_state st;
  crypto_generichash_init(&st, NULL, 0, LUDX_HASHBYTES);
  crypto_generichash_update(&st, hs->h, LUDX_HASHBYTES);
  crypto_generichash_update(&st, data, len);
  crypto_generichash_final(&st, hs->h, LUDX_HASHBYTES);
}

/* Noise 5.2 MixKey: (ck, k) = HKDF(ck, dh), n = 0. */
static int
mix_key (ludx_noise_t *hs, const uint8_t *local_sk, const uint8_t *remote_pk) {
  uint8_t dh[LUDX_DHBYTES];
  uint8_t out[2 * LUDX_HASHBYTES];

  int rc = ludx_dh(dh, local_sk, remote_pk);
  if (rc < 0)
    return rc;

  ludx_hkdf(out, sizeof(out), hs->ck, LUDX_HASHBYTES, dh, sizeof(dh), NULL, 0);
  memcpy(hs->ck, out, LUDX_HASHBYTES);
  memcpy(hs->k, out + LUDX_HASHBYTES, LUDX_KEYBYTES);
  hs->has_key = true;
  hs->n = 0;

  sodium_memzero(dh, sizeof(dh));
  sodium_memzero(out, sizeof(out));
  return 0;
}

/* ChaChaPoly nonce (Noise 12.3): 4 zero bytes || LE64(n). */
static void
nonce12 (const ludx_noise_t *hs, uint8_t nonce[crypto_aead_chacha20poly1305_ietf_NPUBBYTES]) {
  memset(nonce, 0, 4);
  for (int i = 0; i < 8; i++)
    nonce[4 + i] = (uint8_t) (hs->n >> (8 * i));
}

/* EncryptAndHash: c has room for len + 16 when a key exists. */
static size_t
encrypt_and_hash (ludx_noise_t *hs, const uint8_t *p, size_t len, uint8_t *c) {
  size_t clen = len;
  if (hs->has_key) {
    uint8_t nonce[crypto_aead_chacha20poly1305_ietf_NPUBBYTES];
    unsigned long long cl = 0;
    nonce12(hs, nonce);
    crypto_aead_chacha20poly1305_ietf_encrypt(c, &cl, p, len, hs->h, LUDX_HASHBYTES, NULL, nonce, hs->k);
    clen = (size_t) cl;
    hs->n++;
  } else if (len > 0 && c != p) {
    memmove(c, p, len);
  }
  mix_hash(hs, c, clen);
  return clen;
}

/* DecryptAndHash: p has room for clen - 16 when a key exists. */
static int
decrypt_and_hash (ludx_noise_t *hs, const uint8_t *c, size_t clen, uint8_t *p) {
  if (hs->has_key) {
    uint8_t nonce[crypto_aead_chacha20poly1305_ietf_NPUBBYTES];
    uint8_t dummy;
    nonce12(hs, nonce);
    if (crypto_aead_chacha20poly1305_ietf_decrypt(p ? p : &dummy, NULL, NULL, c, clen, hs->h, LUDX_HASHBYTES, nonce, hs->k) != 0) {
      return LUDX_CRYPTO_EHANDSHAKE;
    }
    hs->n++;
  } else if (clen > 0 && p != c) {
    memmove(p, c, clen);
  }
  mix_hash(hs, c, clen);
  return 0;
}

/* The DH tokens with Noise's roles: es is DH(e, rs) on the initiator and
 * DH(s, re) on the responder, se the mirror image. */
static int
dh_token (ludx_noise_t *hs, uint8_t tok) {
  bool local_static = false, remote_static = false;
  switch (tok) {
    case T_EE:
      break;
    case T_ES:
      local_static = !hs->initiator;
      remote_static = hs->initiator;
      break;
    case T_SE:
      local_static = hs->initiator;
      remote_static = !hs->initiator;
      break;
    case T_SS:
      local_static = remote_static = true;
      break;
  }
  if (remote_static ? !hs->has_rs : !hs->has_re)
    return LUDX_CRYPTO_ESTATE;
  if (!local_static && !hs->has_e)
    return LUDX_CRYPTO_ESTATE;
  return mix_key(hs, local_static ? hs->s.secret_key : hs->e.secret_key, remote_static ? hs->rs : hs->re);
}

/* Fixed (non-payload) bytes of the current message, and whether a key
 * exists when its payload is encrypted. */
static size_t
message_overhead (const ludx_noise_t *hs, bool *payload_keyed) {
  bool keyed = hs->has_key;
  size_t len = 0;
  for (const uint8_t *t = patterns[hs->pattern].tokens[hs->step]; *t != T_END; t++) {
    if (*t == T_E) {
      len += LUDX_PUBLICKEYBYTES;
    } else if (*t == T_S) {
      len += LUDX_PUBLICKEYBYTES + (keyed ? LUDX_NOISE_TAGBYTES : 0);
    } else {
      keyed = true;
    }
  }
  *payload_keyed = keyed;
  return len + (keyed ? LUDX_NOISE_TAGBYTES : 0);
}

static void
finish (ludx_noise_t *hs) {
  /* Noise 5.2 Split: (k1, k2) = HKDF(ck, empty); initiator tx = k1. */
  uint8_t out[2 * LUDX_HASHBYTES];
  ludx_hkdf(out, sizeof(out), hs->ck, LUDX_HASHBYTES, NULL, 0, NULL, 0);
  memcpy(hs->initiator ? hs->tx : hs->rx, out, LUDX_KEYBYTES);
  memcpy(hs->initiator ? hs->rx : hs->tx, out + LUDX_HASHBYTES, LUDX_KEYBYTES);
  sodium_memzero(out, sizeof(out));

  /* Completion forgets everything but the keys, h and the two public keys. */
  sodium_memzero(hs->ck, sizeof(hs->ck));
  sodium_memzero(hs->k, sizeof(hs->k));
  sodium_memzero(&hs->e, sizeof(hs->e));
  sodium_memzero(hs->re, sizeof(hs->re));
  sodium_memzero(hs->s.secret_key, sizeof(hs->s.secret_key));
  hs->has_e = hs->has_re = hs->has_key = false;
  hs->status = LUDX_NOISE_DONE;
}

static void
advance (ludx_noise_t *hs) {
  hs->step++;
  if (hs->step == patterns[hs->pattern].messages) {
    finish(hs);
  } else {
    hs->status = our_turn(hs) ? LUDX_NOISE_SEND : LUDX_NOISE_RECV;
  }
}

int
ludx_noise_init (ludx_noise_t *hs, ludx_noise_pattern_t pattern, bool initiator, const ludx_keypair_t *s, const uint8_t *prologue, size_t prologue_len, const uint8_t *remote_public_key) {
  if (hs == NULL)
    return LUDX_CRYPTO_EINVAL;
  memset(hs, 0, sizeof(*hs));
  hs->status = LUDX_NOISE_FAILED;
  hs->error = LUDX_CRYPTO_EINVAL;

  if (s == NULL || (prologue == NULL && prologue_len > 0))
    return LUDX_CRYPTO_EINVAL;
  if (pattern != LUDX_NOISE_XX && pattern != LUDX_NOISE_IK)
    return LUDX_CRYPTO_EINVAL;
  if (pattern == LUDX_NOISE_IK && initiator && remote_public_key == NULL)
    return LUDX_CRYPTO_EINVAL;
  if (ludx_crypto_init() < 0)
    return fail(hs, LUDX_CRYPTO_ESODIUM);

  hs->pattern = (uint8_t) pattern;
  hs->initiator = initiator;
  hs->s = *s;

  /* Noise 5.2 InitializeSymmetric: the 35-byte name fits HASHLEN, so it is
   * zero-padded, not hashed; ck = h. */
  const char *name = patterns[pattern].name;
  memcpy(hs->h, name, strlen(name));
  memcpy(hs->ck, hs->h, LUDX_HASHBYTES);
  mix_hash(hs, prologue, prologue_len);

  if (pattern == LUDX_NOISE_IK) {
    /* Pre-message "<- s": both sides hash the responder's static key. */
    if (initiator) {
      memcpy(hs->rs, remote_public_key, LUDX_PUBLICKEYBYTES);
      hs->has_rs = true;
    }
    mix_hash(hs, initiator ? hs->rs : hs->s.public_key, LUDX_PUBLICKEYBYTES);
  }
  if (remote_public_key != NULL && !hs->has_rs) {
    memcpy(hs->expected_rs, remote_public_key, LUDX_PUBLICKEYBYTES);
    hs->has_expected = true;
  }

  hs->error = 0;
  hs->status = our_turn(hs) ? LUDX_NOISE_SEND : LUDX_NOISE_RECV;
  return 0;
}

int
ludx_noise_set_ephemeral (ludx_noise_t *hs, const ludx_keypair_t *e) {
  if (hs == NULL || e == NULL)
    return LUDX_CRYPTO_EINVAL;
  if (hs->status != LUDX_NOISE_SEND && hs->status != LUDX_NOISE_RECV)
    return LUDX_CRYPTO_ESTATE;
  /* Too late once our e has been sent: our first message for the
   * initiator, the first reply for the responder. */
  if (hs->step > (hs->initiator ? 0 : 1))
    return LUDX_CRYPTO_ESTATE;
  hs->e = *e;
  hs->has_e = true;
  return 0;
}

int
ludx_noise_status (const ludx_noise_t *hs) {
  return hs ? hs->status : LUDX_CRYPTO_EINVAL;
}

long
ludx_noise_send_size (const ludx_noise_t *hs, size_t payload_len) {
  if (hs == NULL)
    return LUDX_CRYPTO_EINVAL;
  if (hs->status != LUDX_NOISE_SEND)
    return LUDX_CRYPTO_ESTATE;
  bool keyed;
  size_t len = message_overhead(hs, &keyed);
  if (payload_len > LUDX_NOISE_MAX_MESSAGE - len)
    return LUDX_CRYPTO_ETOOLARGE;
  return (long) (len + payload_len);
}

int
ludx_noise_send (ludx_noise_t *hs, const uint8_t *payload, size_t payload_len, uint8_t *out, size_t out_cap, size_t *out_len) {
  if (hs == NULL || out == NULL || (payload == NULL && payload_len > 0))
    return LUDX_CRYPTO_EINVAL;
  if (hs->status == LUDX_NOISE_FAILED)
    return hs->error;
  long size = ludx_noise_send_size(hs, payload_len);
  if (size < 0)
    return (int) size;
  if ((size_t) size > out_cap)
    return LUDX_CRYPTO_ENOBUFS;

  size_t off = 0;
  for (const uint8_t *t = patterns[hs->pattern].tokens[hs->step]; *t != T_END; t++) {
    int rc = 0;
    switch (*t) {
      case T_E:
        if (!hs->has_e) {
          crypto_sign_keypair(hs->e.public_key, hs->e.secret_key);
          hs->has_e = true;
        }
        memcpy(out + off, hs->e.public_key, LUDX_PUBLICKEYBYTES);
        mix_hash(hs, hs->e.public_key, LUDX_PUBLICKEYBYTES);
        off += LUDX_PUBLICKEYBYTES;
        break;
      case T_S:
        off += encrypt_and_hash(hs, hs->s.public_key, LUDX_PUBLICKEYBYTES, out + off);
        break;
      default:
        rc = dh_token(hs, *t);
        break;
    }
    if (rc < 0) {
      sodium_memzero(out, (size_t) size);
      return fail(hs, rc);
    }
  }
  off += encrypt_and_hash(hs, payload, payload_len, out + off);

  *out_len = off;
  advance(hs);
  return 0;
}

long
ludx_noise_recv_size (const ludx_noise_t *hs, size_t msg_len) {
  if (hs == NULL)
    return LUDX_CRYPTO_EINVAL;
  if (hs->status != LUDX_NOISE_RECV)
    return LUDX_CRYPTO_ESTATE;
  bool keyed;
  size_t len = message_overhead(hs, &keyed);
  if (msg_len < len || msg_len > LUDX_NOISE_MAX_MESSAGE)
    return LUDX_CRYPTO_EHANDSHAKE;
  return (long) (msg_len - len);
}

int
ludx_noise_recv (ludx_noise_t *hs, const uint8_t *msg, size_t msg_len, uint8_t *payload, size_t payload_cap, size_t *payload_len) {
  if (hs == NULL || (msg == NULL && msg_len > 0))
    return LUDX_CRYPTO_EINVAL;
  if (hs->status == LUDX_NOISE_FAILED)
    return hs->error;
  long size = ludx_noise_recv_size(hs, msg_len);
  if (size == LUDX_CRYPTO_EHANDSHAKE)
    return fail(hs, LUDX_CRYPTO_EHANDSHAKE);
  if (size < 0)
    return (int) size;
  if ((size_t) size > 0 && (payload == NULL || (size_t) size > payload_cap))
    return LUDX_CRYPTO_ENOBUFS;

  size_t off = 0;
  for (const uint8_t *t = patterns[hs->pattern].tokens[hs->step]; *t != T_END; t++) {
    int rc = 0;
    switch (*t) {
      case T_E:
        memcpy(hs->re, msg + off, LUDX_PUBLICKEYBYTES);
        hs->has_re = true;
        mix_hash(hs, hs->re, LUDX_PUBLICKEYBYTES);
        off += LUDX_PUBLICKEYBYTES;
        break;
      case T_S: {
        size_t clen = LUDX_PUBLICKEYBYTES + (hs->has_key ? LUDX_NOISE_TAGBYTES : 0);
        rc = decrypt_and_hash(hs, msg + off, clen, hs->rs);
        off += clen;
        if (rc < 0)
          break;
        hs->has_rs = true;
        if (hs->has_expected && sodium_memcmp(hs->rs, hs->expected_rs, LUDX_PUBLICKEYBYTES) != 0) {
          rc = LUDX_CRYPTO_EREMOTEKEY;
        }
        break;
      }
      default:
        rc = dh_token(hs, *t);
        break;
    }
    if (rc < 0)
      return fail(hs, rc);
  }

  int rc = decrypt_and_hash(hs, msg + off, msg_len - off, payload);
  if (rc < 0) {
    if (payload != NULL)
      sodium_memzero(payload, (size_t) size);
    return fail(hs, rc);
  }

  if (payload_len != NULL)
    *payload_len = (size_t) size;
  advance(hs);
  return 0;
}

const uint8_t *
ludx_noise_hash (const ludx_noise_t *hs) {
  return hs->h;
}

int
ludx_noise_result (const ludx_noise_t *hs, ludx_noise_result_t *out) {
  if (hs == NULL || out == NULL)
    return LUDX_CRYPTO_EINVAL;
  if (hs->status != LUDX_NOISE_DONE)
    return LUDX_CRYPTO_ESTATE;
  memcpy(out->tx, hs->tx, LUDX_KEYBYTES);
  memcpy(out->rx, hs->rx, LUDX_KEYBYTES);
  memcpy(out->hash, hs->h, LUDX_HASHBYTES);
  memcpy(out->public_key, hs->s.public_key, LUDX_PUBLICKEYBYTES);
  memcpy(out->remote_public_key, hs->rs, LUDX_PUBLICKEYBYTES);
  return 0;
}

void
ludx_noise_wipe (ludx_noise_t *hs) {
  if (hs != NULL)
    sodium_memzero(hs, sizeof(*hs));
}
