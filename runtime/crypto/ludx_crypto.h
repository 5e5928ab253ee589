#ifndef LUDX_CRYPTO_H
#define LUDX_CRYPTO_H

/* ludx crypto: the Noise handshake and SecretStream framing of the
 * hyperswarm stack, on libsodium. No I/O, no Lua.
 *
 *   ludx_crypto_core.h   errors, Ed25519 keys and signatures, BLAKE2b,
 *                        namespaces, HMAC/HKDF, the noise-curve-ed DH
 *   ludx_noise.h         Noise XX / IK state machine
 *   ludx_secretstream.h  frames, id/header exchange, data frames,
 *                        unordered datagrams, holepunch secret */

#include "ludx_crypto_core.h"
#include "ludx_noise.h"
#include "ludx_secretstream.h"

#endif
