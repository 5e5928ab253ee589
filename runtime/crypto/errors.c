#include "ludx_crypto_core.h"

#include <sodium.h>

typedef struct {
  int code;
  const char *name;
  const char *message;
} ludx_crypto_err_t;

/* Messages follow @hyperswarm/secret-stream where it has one. */
static const ludx_crypto_err_t errors[] = {
    {LUDX_CRYPTO_EINVAL, "EINVAL", "invalid argument"},
    {LUDX_CRYPTO_ESTATE, "ESTATE", "operation not valid in the current state"},
    {LUDX_CRYPTO_ENOMEM, "ENOMEM", "out of memory"},
    {LUDX_CRYPTO_ENOBUFS, "ENOBUFS", "output buffer too small"},
    {LUDX_CRYPTO_EHANDSHAKE, "EHANDSHAKE", "Noise handshake failed"},
    {LUDX_CRYPTO_EBADKEY, "EBADKEY", "Noise handshake failed: invalid public key"},
    {LUDX_CRYPTO_EREMOTEKEY, "EREMOTEKEY", "remote public key does not match the expected key"},
    {LUDX_CRYPTO_EHEADER, "EHEADER", "Invalid header message received"},
    {LUDX_CRYPTO_ESTREAMID, "ESTREAMID", "Invalid header received"},
    {LUDX_CRYPTO_EFRAME, "EFRAME", "Invalid message received"},
    {LUDX_CRYPTO_ETOOLARGE, "ETOOLARGE", "Message is too large for an atomic write"},
    {LUDX_CRYPTO_EDECRYPT, "EDECRYPT", "Message failed to decrypt"},
    {LUDX_CRYPTO_ENONCE, "ENONCE", "udp send nonce exhausted"},
    {LUDX_CRYPTO_ESIGNATURE, "ESIGNATURE", "signature does not verify"},
    {LUDX_CRYPTO_ESODIUM, "ESODIUM", "libsodium failed to initialise"},
};

static const ludx_crypto_err_t *
find (int code) {
  for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++) {
    if (errors[i].code == code)
      return &errors[i];
  }
  return NULL;
}

const char *
ludx_crypto_errname (int code) {
  const ludx_crypto_err_t *e = find(code);
  return e ? e->name : "EUNKNOWN";
}

const char *
ludx_crypto_strerror (int code) {
  const ludx_crypto_err_t *e = find(code);
  return e ? e->message : "unknown error";
}

int
ludx_crypto_init (void) {
  return sodium_init() < 0 ? LUDX_CRYPTO_ESODIUM : 0;
}

void
ludx_wipe (void *p, size_t len) {
  sodium_memzero(p, len);
}
