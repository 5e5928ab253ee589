#include "ludx_crypto_core.h"

#include <sodium.h>

int
ludx_keypair_seed (ludx_keypair_t *kp, const uint8_t seed[LUDX_SEEDBYTES]) {
  if (kp == NULL || seed == NULL)
    return LUDX_CRYPTO_EINVAL;
  crypto_sign_seed_keypair(kp->public_key, kp->secret_key, seed);
  return 0;
}

int
ludx_keypair_random (ludx_keypair_t *kp) {
  if (kp == NULL)
    return LUDX_CRYPTO_EINVAL;
  if (ludx_crypto_init() < 0)
    return LUDX_CRYPTO_ESODIUM;
  crypto_sign_keypair(kp->public_key, kp->secret_key);
  return 0;
}

int
ludx_sign (uint8_t sig[LUDX_SIGNBYTES], const uint8_t *msg, size_t len, const uint8_t secret_key[LUDX_SECRETKEYBYTES]) {
  if (sig == NULL || secret_key == NULL || (msg == NULL && len > 0))
    return LUDX_CRYPTO_EINVAL;
  crypto_sign_detached(sig, NULL, msg, len, secret_key);
  return 0;
}

int
ludx_verify (const uint8_t sig[LUDX_SIGNBYTES], const uint8_t *msg, size_t len, const uint8_t public_key[LUDX_PUBLICKEYBYTES]) {
  if (sig == NULL || public_key == NULL || (msg == NULL && len > 0))
    return LUDX_CRYPTO_EINVAL;
  return crypto_sign_verify_detached(sig, msg, len, public_key) == 0 ? 0 : LUDX_CRYPTO_ESIGNATURE;
}

int
ludx_dh (uint8_t out[LUDX_DHBYTES], const uint8_t secret_key[LUDX_SECRETKEYBYTES], const uint8_t remote_public_key[LUDX_PUBLICKEYBYTES]) {
  if (out == NULL || secret_key == NULL || remote_public_key == NULL)
    return LUDX_CRYPTO_EINVAL;

  /* noise-curve-ed: scalar = clamp(SHA-512(seed)[0..32)), exactly what
   * sk_to_curve25519 returns; the multiplication must not clamp again. */
  uint8_t scalar[crypto_scalarmult_ed25519_SCALARBYTES];
  int rc = crypto_sign_ed25519_sk_to_curve25519(scalar, secret_key);
  if (rc == 0)
    rc = crypto_scalarmult_ed25519_noclamp(out, scalar, remote_public_key);
  sodium_memzero(scalar, sizeof(scalar));

  if (rc != 0) {
    sodium_memzero(out, LUDX_DHBYTES);
    return LUDX_CRYPTO_EBADKEY;
  }
  return 0;
}

void
ludx_secretbox (uint8_t *box, const uint8_t *msg, size_t len, const uint8_t nonce[LUDX_SECRETBOX_NONCEBYTES], const uint8_t key[LUDX_SECRETBOX_KEYBYTES]) {
  crypto_secretbox_easy(box, msg, len, nonce, key);
}

int
ludx_secretbox_open (uint8_t *msg, const uint8_t *box, size_t box_len, const uint8_t nonce[LUDX_SECRETBOX_NONCEBYTES], const uint8_t key[LUDX_SECRETBOX_KEYBYTES]) {
  if (box_len < LUDX_SECRETBOX_MACBYTES)
    return LUDX_CRYPTO_EDECRYPT;
  return crypto_secretbox_open_easy(msg, box, box_len, nonce, key) == 0 ? 0 : LUDX_CRYPTO_EDECRYPT;
}

void
ludx_randombytes (uint8_t *out, size_t n, const uint8_t seed[LUDX_SEEDBYTES]) {
  if (seed)
    randombytes_buf_deterministic(out, n, seed);
  else
    randombytes_buf(out, n);
}
