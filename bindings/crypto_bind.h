#ifndef LUDX_CRYPTO_BIND_H
#define LUDX_CRYPTO_BIND_H

// Shared by crypto.c (core.crypto) and framer.c (core.crypto.framer).
#include <stddef.h>
#include <stdint.h>

#include "bind.h"

// nil, message, code for a runtime/crypto error.
int
ludx_push_crypto_error (lua_State *L, int rc);

// A string of exactly `want` bytes; raises naming the argument otherwise.
const uint8_t *
ludx_check_bytes (lua_State *L, int idx, const char *name, size_t want);

int
ludx_check_boolean (lua_State *L, int idx, const char *name);

// Adds core.crypto.framer to the table on top of the stack.
void
ludx_bind_framer (lua_State *L);

#endif
