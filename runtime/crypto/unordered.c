#include "ludx_secretstream.h"

#include <string.h>

/* secret-stream A.5 and hyperdht D.8 (docs/protocol/hyperswarm.md): keys
 * derived from the handshake hash for the side channels. */

int
ludx_unordered_init (ludx_unordered_t *u, bool initiator, const uint8_t hash[LUDX_HASHBYTES]) {
  if (u == NULL || hash == NULL)
    return LUDX_CRYPTO_EINVAL;
  if (ludx_crypto_init() < 0)
    return LUDX_CRYPTO_ESODIUM;

  uint8_t ns_i[LUDX_H32BYTES], ns_r[LUDX_H32BYTES], ns_send[LUDX_H32BYTES];
  ludx_ns(ns_i, "hyperswarm/secret-stream", 0);
  ludx_ns(ns_r, "hyperswarm/secret-stream", 1);
  ludx_ns(ns_send, "hyperswarm/secret-stream", 2);

  ludx_buf_t i_to_r[2] = {{ns_i, sizeof(ns_i)}, {ns_send, sizeof(ns_send)}};
  ludx_buf_t r_to_i[2] = {{ns_r, sizeof(ns_r)}, {ns_send, sizeof(ns_send)}};
  ludx_blake2b_batch(initiator ? u->tx_key : u->rx_key, LUDX_KEYBYTES, i_to_r, 2, hash, LUDX_HASHBYTES);
  ludx_blake2b_batch(initiator ? u->rx_key : u->tx_key, LUDX_KEYBYTES, r_to_i, 2, hash, LUDX_HASHBYTES);

  randombytes_buf(u->counter, sizeof(u->counter));
  memcpy(u->initial, u->counter, sizeof(u->counter));
  u->exhausted = false;
  return 0;
}

int
ludx_unordered_seal (ludx_unordered_t *u, const uint8_t *msg, size_t len, uint8_t *out, size_t out_cap, size_t *out_len) {
  if (u == NULL || out == NULL || (msg == NULL && len > 0))
    return LUDX_CRYPTO_EINVAL;
  if (out_cap < LUDX_UNORDERED_OVERHEAD || len > out_cap - LUDX_UNORDERED_OVERHEAD)
    return LUDX_CRYPTO_ENOBUFS;
  if (u->exhausted)
    return LUDX_CRYPTO_ENONCE;

  /* Increment before each send; back at the start means every nonce of
   * this key has been used. */
  sodium_increment(u->counter, sizeof(u->counter));
  if (memcmp(u->counter, u->initial, sizeof(u->counter)) == 0) {
    u->exhausted = true;
    return LUDX_CRYPTO_ENONCE;
  }

  uint8_t nonce[crypto_secretbox_NONCEBYTES] = {0};
  memcpy(nonce, u->counter, sizeof(u->counter));
  if (len > 0)
    memmove(out + sizeof(u->counter), msg, len);
  memcpy(out, u->counter, sizeof(u->counter));
  crypto_secretbox_easy(out + sizeof(u->counter), out + sizeof(u->counter), len, nonce, u->tx_key);
  if (out_len != NULL)
    *out_len = len + LUDX_UNORDERED_OVERHEAD;
  return 0;
}

int
ludx_unordered_open (const ludx_unordered_t *u, const uint8_t *in, size_t len, uint8_t *out, size_t out_cap, size_t *out_len) {
  if (u == NULL || out == NULL || (in == NULL && len > 0))
    return LUDX_CRYPTO_EINVAL;
  if (len < LUDX_UNORDERED_OVERHEAD)
    return LUDX_CRYPTO_EFRAME;
  if (out_cap < len - LUDX_UNORDERED_OVERHEAD)
    return LUDX_CRYPTO_ENOBUFS;

  uint8_t nonce[crypto_secretbox_NONCEBYTES] = {0};
  memcpy(nonce, in, 8);
  if (crypto_secretbox_open_easy(out, in + 8, len - 8, nonce, u->rx_key) != 0)
    return LUDX_CRYPTO_EDECRYPT;
  if (out_len != NULL)
    *out_len = len - LUDX_UNORDERED_OVERHEAD;
  return 0;
}

void
ludx_holepunch_secret (uint8_t out[LUDX_KEYBYTES], const uint8_t hash[LUDX_HASHBYTES]) {
  uint8_t ns[LUDX_H32BYTES];
  ludx_ns(ns, "hyperswarm/dht", 1); /* NS.PEER_HOLEPUNCH */
  crypto_generichash(out, LUDX_KEYBYTES, ns, sizeof(ns), hash, LUDX_HASHBYTES);
}
