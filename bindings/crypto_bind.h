#ifndef LUDX_CRYPTO_BIND_H
#define LUDX_CRYPTO_BIND_H

// Shared by crypto.c (core.crypto) and framer.c / framer_udx.c (core.crypto.framer).
#include "bind.h"

// nil, message, code for a runtime/crypto error; returns 3.
int
ludx_push_crypto_error (lua_State *L, int rc);

#endif
