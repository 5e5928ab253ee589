#ifndef LUDX_CRYPTO_CORE_H
#define LUDX_CRYPTO_CORE_H

/* Errors, Ed25519 keys, BLAKE2b, namespaces, HMAC/HKDF and the Ed25519
 * "DH" of noise-curve-ed. Everything here is a thin, checked layer over
 * libsodium; sizes follow hyperswarm (32-byte public keys, 64-byte secret
 * keys, 64-byte BLAKE2b-512 hashes). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define LUDX_PUBLICKEYBYTES 32
#define LUDX_SECRETKEYBYTES 64
#define LUDX_SEEDBYTES      32
#define LUDX_SIGNBYTES      64
#define LUDX_DHBYTES        32
#define LUDX_KEYBYTES       32 /* symmetric keys (tx, rx) */
#define LUDX_HASHBYTES      64 /* BLAKE2b-512: Noise h, HMAC, HKDF outputs */
#define LUDX_H32BYTES       32

/* Error codes. All negative, below the libuv range so they never collide
 * with a UV_E* value in the layers above. */
enum {
  LUDX_CRYPTO_EINVAL = -5001,     /* bad argument (NULL, wrong size) */
  LUDX_CRYPTO_ESTATE = -5002,     /* call not valid in the current state */
  LUDX_CRYPTO_ENOMEM = -5003,     /* allocation failed */
  LUDX_CRYPTO_ENOBUFS = -5004,    /* caller's output buffer too small */
  LUDX_CRYPTO_EHANDSHAKE = -5005, /* Noise message malformed or not authentic */
  LUDX_CRYPTO_EBADKEY = -5006,    /* DH failed: invalid or small-order point */
  LUDX_CRYPTO_EREMOTEKEY = -5007, /* remote static key is not the expected one */
  LUDX_CRYPTO_EHEADER = -5008,    /* id/header frame is not 56 bytes */
  LUDX_CRYPTO_ESTREAMID = -5009,  /* id/header frame carries the wrong stream id */
  LUDX_CRYPTO_EFRAME = -5010,     /* frame length invalid (L < 17, L == 0, ...) */
  LUDX_CRYPTO_ETOOLARGE = -5011,  /* write larger than one frame can carry */
  LUDX_CRYPTO_EDECRYPT = -5012,   /* frame failed authentication */
  LUDX_CRYPTO_ENONCE = -5013,     /* unordered-send counter exhausted */
  LUDX_CRYPTO_ESIGNATURE = -5014, /* Ed25519 signature does not verify */
  LUDX_CRYPTO_ESODIUM = -5015,    /* libsodium could not initialise */
};

/* Short code name ("EDECRYPT") and a human message; "EUNKNOWN" and
 * "unknown error" for codes outside the table. */
const char *
ludx_crypto_errname (int code);
const char *
ludx_crypto_strerror (int code);

/* sodium_init(); safe to call many times. 0 or LUDX_CRYPTO_ESODIUM. */
int
ludx_crypto_init (void);

/* A byte range, for batch hashing. */
typedef struct {
  const uint8_t *data;
  size_t len;
} ludx_buf_t;

/* Ed25519 sign key pair as libsodium lays it out (secret = seed || public). */
typedef struct {
  uint8_t public_key[LUDX_PUBLICKEYBYTES];
  uint8_t secret_key[LUDX_SECRETKEYBYTES];
} ludx_keypair_t;

/* crypto_sign_seed_keypair / crypto_sign_keypair. */
int
ludx_keypair_seed (ludx_keypair_t *kp, const uint8_t seed[LUDX_SEEDBYTES]);
int
ludx_keypair_random (ludx_keypair_t *kp);

/* Ed25519 detached signatures. verify: 0 or LUDX_CRYPTO_ESIGNATURE. */
int
ludx_sign (uint8_t sig[LUDX_SIGNBYTES], const uint8_t *msg, size_t len, const uint8_t secret_key[LUDX_SECRETKEYBYTES]);
int
ludx_verify (const uint8_t sig[LUDX_SIGNBYTES], const uint8_t *msg, size_t len, const uint8_t public_key[LUDX_PUBLICKEYBYTES]);

/* noise-curve-ed DH: the clamped scalar of sk (SHA-512 of the seed, as
 * crypto_sign_ed25519_sk_to_curve25519 computes it) times the Edwards point
 * remote_pk, without clamping again; the output is a compressed Edwards
 * point. Not X25519. LUDX_CRYPTO_EBADKEY when libsodium rejects the point
 * (non-canonical, small order, off the main subgroup) or the result is the
 * identity. */
int
ludx_dh (uint8_t out[LUDX_DHBYTES], const uint8_t secret_key[LUDX_SECRETKEYBYTES], const uint8_t remote_public_key[LUDX_PUBLICKEYBYTES]);

/* BLAKE2b (crypto_generichash). out_len 16..64; key NULL/0 or 16..64 bytes.
 * The batch form hashes the concatenation of the parts. */
int
ludx_blake2b (uint8_t *out, size_t out_len, const uint8_t *msg, size_t len, const uint8_t *key, size_t key_len);
int
ludx_blake2b_batch (uint8_t *out, size_t out_len, const ludx_buf_t *parts, size_t n, const uint8_t *key, size_t key_len);

/* hypercore-crypto namespace: H32(H32(name) || byte(i)). */
void
ludx_ns (uint8_t out[LUDX_H32BYTES], const char *name, uint8_t i);

/* HMAC-BLAKE2b: 128-byte block, 64-byte output; keys longer than a block
 * are hashed to 64 bytes first (RFC 2104). */
void
ludx_hmac_blake2b (uint8_t out[LUDX_HASHBYTES], const uint8_t *key, size_t key_len, const ludx_buf_t *parts, size_t n);

/* HKDF over HMAC-BLAKE2b (RFC 5869): out_len bytes (at most 255 * 64) of
 * T(1) || T(2) || ... with the given salt, input key material and info. */
int
ludx_hkdf (uint8_t *out, size_t out_len, const uint8_t *salt, size_t salt_len, const uint8_t *ikm, size_t ikm_len, const uint8_t *info, size_t info_len);

/* sodium_memzero. */
void
ludx_wipe (void *p, size_t len);

/* XSalsa20-Poly1305 secretbox (the holepunch payloads of hyperdht). box is
 * len + LUDX_SECRETBOX_MACBYTES bytes: mac || ciphertext. open: 0 or
 * LUDX_CRYPTO_EDECRYPT (also for a box shorter than the mac). */
#define LUDX_SECRETBOX_NONCEBYTES 24
#define LUDX_SECRETBOX_KEYBYTES   32
#define LUDX_SECRETBOX_MACBYTES   16

void
ludx_secretbox (uint8_t *box, const uint8_t *msg, size_t len, const uint8_t nonce[LUDX_SECRETBOX_NONCEBYTES], const uint8_t key[LUDX_SECRETBOX_KEYBYTES]);

int
ludx_secretbox_open (uint8_t *msg, const uint8_t *box, size_t box_len, const uint8_t nonce[LUDX_SECRETBOX_NONCEBYTES], const uint8_t key[LUDX_SECRETBOX_KEYBYTES]);

/* n random bytes; with a 32-byte seed the same seed gives the same bytes
 * (for tests and deterministic data). */
void
ludx_randombytes (uint8_t *out, size_t n, const uint8_t seed[LUDX_SEEDBYTES]);

#ifdef __cplusplus
}
#endif

#endif
