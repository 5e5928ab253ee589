#include "ludx_crypto_core.h"

#include <sodium.h>
#include <string.h>

#define HMAC_BLOCK 128

static int
check_sizes (const uint8_t *out, size_t out_len, const uint8_t *key, size_t key_len) {
  if (out == NULL)
    return LUDX_CRYPTO_EINVAL;
  if (out_len < crypto_generichash_BYTES_MIN || out_len > crypto_generichash_BYTES_MAX)
    return LUDX_CRYPTO_EINVAL;
  if (key_len > 0 && (key == NULL || key_len < crypto_generichash_KEYBYTES_MIN || key_len > crypto_generichash_KEYBYTES_MAX))
    return LUDX_CRYPTO_EINVAL;
  return 0;
}

int
ludx_blake2b (uint8_t *out, size_t out_len, const uint8_t *msg, size_t len, const uint8_t *key, size_t key_len) {
  int rc = check_sizes(out, out_len, key, key_len);
  if (rc < 0)
    return rc;
  if (msg == NULL && len > 0)
    return LUDX_CRYPTO_EINVAL;
  crypto_generichash(out, out_len, msg, len, key_len ? key : NULL, key_len);
  return 0;
}

int
ludx_blake2b_batch (uint8_t *out, size_t out_len, const ludx_buf_t *parts, size_t n, const uint8_t *key, size_t key_len) {
  int rc = check_sizes(out, out_len, key, key_len);
  if (rc < 0)
    return rc;
  if (parts == NULL && n > 0)
    return LUDX_CRYPTO_EINVAL;
  for (size_t i = 0; i < n; i++) {
    if (parts[i].data == NULL && parts[i].len > 0)
      return LUDX_CRYPTO_EINVAL;
  }

  crypto_generichash_state st;
  crypto_generichash_init(&st, key_len ? key : NULL, key_len, out_len);
  for (size_t i = 0; i < n; i++) {
    crypto_generichash_update(&st, parts[i].data, parts[i].len);
  }
  crypto_generichash_final(&st, out, out_len);
  sodium_memzero(&st, sizeof(st));
  return 0;
}

void
ludx_ns (uint8_t out[LUDX_H32BYTES], const char *name, uint8_t i) {
  uint8_t buf[LUDX_H32BYTES + 1];
  crypto_generichash(buf, LUDX_H32BYTES, (const uint8_t *) name, strlen(name), NULL, 0);
  buf[LUDX_H32BYTES] = i;
  crypto_generichash(out, LUDX_H32BYTES, buf, sizeof(buf), NULL, 0);
}

void
ludx_hmac_blake2b (uint8_t out[LUDX_HASHBYTES], const uint8_t *key, size_t key_len, const ludx_buf_t *parts, size_t n) {
  uint8_t k[HMAC_BLOCK] = {0};
  uint8_t pad[HMAC_BLOCK];
  uint8_t inner[LUDX_HASHBYTES];
  crypto_generichash_state st;

  /* RFC 2104 2: a key longer than the block is hashed first. */
  if (key_len > HMAC_BLOCK) {
    crypto_generichash(k, LUDX_HASHBYTES, key, key_len, NULL, 0);
  } else if (key_len > 0) {
    memcpy(k, key, key_len);
  }

  for (size_t i = 0; i < HMAC_BLOCK; i++)
    pad[i] = k[i] ^ 0x36;
  crypto_generichash_init(&st, NULL, 0, LUDX_HASHBYTES);
  crypto_generichash_update(&st, pad, HMAC_BLOCK);
  for (size_t i = 0; i < n; i++) {
    crypto_generichash_update(&st, parts[i].data, parts[i].len);
  }
  crypto_generichash_final(&st, inner, LUDX_HASHBYTES);

  for (size_t i = 0; i < HMAC_BLOCK; i++)
    pad[i] = k[i] ^ 0x5c;
  crypto_generichash_init(&st, NULL, 0, LUDX_HASHBYTES);
  crypto_generichash_update(&st, pad, HMAC_BLOCK);
  crypto_generichash_update(&st, inner, LUDX_HASHBYTES);
  crypto_generichash_final(&st, out, LUDX_HASHBYTES);

  sodium_memzero(k, sizeof(k));
  sodium_memzero(pad, sizeof(pad));
  sodium_memzero(inner, sizeof(inner));
  sodium_memzero(&st, sizeof(st));
}

int
ludx_hkdf (uint8_t *out, size_t out_len, const uint8_t *salt, size_t salt_len, const uint8_t *ikm, size_t ikm_len, const uint8_t *info, size_t info_len) {
  if (out == NULL || out_len > 255 * LUDX_HASHBYTES)
    return LUDX_CRYPTO_EINVAL;
  if ((salt == NULL && salt_len > 0) || (ikm == NULL && ikm_len > 0) || (info == NULL && info_len > 0))
    return LUDX_CRYPTO_EINVAL;

  /* RFC 5869 2.2 extract: PRK = HMAC(salt, IKM). */
  uint8_t prk[LUDX_HASHBYTES];
  uint8_t t[LUDX_HASHBYTES];
  ludx_buf_t in = {ikm, ikm_len};
  ludx_hmac_blake2b(prk, salt, salt_len, &in, 1);

  /* RFC 5869 2.3 expand: T(i) = HMAC(PRK, T(i-1) || info || i). */
  size_t done = 0;
  for (uint8_t i = 1; done < out_len; i++) {
    ludx_buf_t parts[3] = {{t, i == 1 ? 0 : LUDX_HASHBYTES}, {info, info_len}, {&i, 1}};
    ludx_hmac_blake2b(t, prk, LUDX_HASHBYTES, parts, 3);
    size_t take = out_len - done < LUDX_HASHBYTES ? out_len - done : LUDX_HASHBYTES;
    memcpy(out + done, t, take);
    done += take;
  }

  sodium_memzero(prk, sizeof(prk));
  sodium_memzero(t, sizeof(t));
  return 0;
}
