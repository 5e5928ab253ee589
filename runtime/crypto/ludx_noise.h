#ifndef LUDX_NOISE_H
#define LUDX_NOISE_H

/* The Noise handshake as hyperswarm runs it (noise-handshake with
 * noise-curve-ed): Noise_{XX,IK}_Ed25519_ChaChaPoly_BLAKE2b. A fixed-size
 * state machine: no allocation, no I/O. Messages go out through caller
 * buffers; on any failure the state is wiped and stays failed. */

#include "ludx_crypto_core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LUDX_NOISE_MAX_MESSAGE 65535 /* Noise 3: a message is at most 65535 bytes */
#define LUDX_NOISE_TAGBYTES    16

typedef enum {
  LUDX_NOISE_XX = 0, /* -> e; <- e, ee, s, es; -> s, se */
  LUDX_NOISE_IK = 1, /* <- s; ...; -> e, es, s, ss; <- e, ee, se */
} ludx_noise_pattern_t;

typedef enum {
  LUDX_NOISE_SEND = 1,   /* our turn to write a message */
  LUDX_NOISE_RECV = 2,   /* waiting for the peer's message */
  LUDX_NOISE_DONE = 3,   /* split done; ludx_noise_result() is valid */
  LUDX_NOISE_FAILED = 4, /* wiped; every call returns the stored error */
} ludx_noise_status_t;

/* Treat as opaque; it is public only so callers can embed it. */
typedef struct ludx_noise_s {
  uint8_t pattern;
  uint8_t step; /* index of the next message of the pattern */
  bool initiator;
  bool has_key, has_e, has_re, has_rs, has_expected;
  int status;
  int error;
  uint64_t n; /* CipherState nonce */
  uint8_t h[LUDX_HASHBYTES];
  uint8_t ck[LUDX_HASHBYTES];
  uint8_t k[LUDX_KEYBYTES];
  ludx_keypair_t s, e;
  uint8_t re[LUDX_PUBLICKEYBYTES];
  uint8_t rs[LUDX_PUBLICKEYBYTES];
  uint8_t expected_rs[LUDX_PUBLICKEYBYTES];
  uint8_t tx[LUDX_KEYBYTES];
  uint8_t rx[LUDX_KEYBYTES];
} ludx_noise_t;

typedef struct {
  uint8_t tx[LUDX_KEYBYTES];
  uint8_t rx[LUDX_KEYBYTES];
  uint8_t hash[LUDX_HASHBYTES]; /* the final h */
  uint8_t public_key[LUDX_PUBLICKEYBYTES];
  uint8_t remote_public_key[LUDX_PUBLICKEYBYTES];
} ludx_noise_result_t;

/* Start a handshake. `s` is our static Ed25519 key pair (copied). The
 * prologue is mixed into h even when empty (secret-stream: empty; hyperdht
 * IK: NS.PEER_HANDSHAKE). remote_public_key: for an IK initiator, the
 * responder's static key (required); for everyone else an optional expected
 * key: when the learned remote key differs, the handshake fails with
 * LUDX_CRYPTO_EREMOTEKEY. */
int
ludx_noise_init (ludx_noise_t *hs, ludx_noise_pattern_t pattern, bool initiator, const ludx_keypair_t *s, const uint8_t *prologue, size_t prologue_len, const uint8_t *remote_public_key);

/* Use this ephemeral key pair instead of a fresh random one (test vectors).
 * Only before the message that sends `e`. */
int
ludx_noise_set_ephemeral (ludx_noise_t *hs, const ludx_keypair_t *e);

/* LUDX_NOISE_SEND / RECV / DONE / FAILED. */
int
ludx_noise_status (const ludx_noise_t *hs);

/* Size of our next message with a payload of payload_len bytes; < 0 when it
 * is not our turn or the message would exceed LUDX_NOISE_MAX_MESSAGE. */
long
ludx_noise_send_size (const ludx_noise_t *hs, size_t payload_len);

/* Write our next message (tokens, then the encrypted payload) to out. */
int
ludx_noise_send (ludx_noise_t *hs, const uint8_t *payload, size_t payload_len, uint8_t *out, size_t out_cap, size_t *out_len);

/* Payload size a peer message of msg_len bytes would decrypt to; < 0 when
 * it is not the peer's turn or msg_len is impossible (EHANDSHAKE). */
long
ludx_noise_recv_size (const ludx_noise_t *hs, size_t msg_len);

/* Read the peer's next message; its payload is decrypted into payload
 * (which may be NULL when the payload is known to be empty). */
int
ludx_noise_recv (ludx_noise_t *hs, const uint8_t *msg, size_t msg_len, uint8_t *payload, size_t payload_cap, size_t *payload_len);

/* The running handshake hash h (the final one once DONE). */
const uint8_t *
ludx_noise_hash (const ludx_noise_t *hs);

/* Keys once DONE; LUDX_CRYPTO_ESTATE before. */
int
ludx_noise_result (const ludx_noise_t *hs, ludx_noise_result_t *out);

/* Zero every secret in the state. */
void
ludx_noise_wipe (ludx_noise_t *hs);

#ifdef __cplusplus
}
#endif

#endif
