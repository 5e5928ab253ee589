// Helpers of the crypto areas (crypto.c, framer.c, framer_udx.c) that need runtime/crypto.
#include "crypto_bind.h"

#include "ludx_crypto.h"

int
ludx_push_crypto_error (lua_State *L, int rc) {
  return ludx_push_error(L, ludx_crypto_strerror(rc), ludx_crypto_errname(rc));
}
