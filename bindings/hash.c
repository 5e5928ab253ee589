// core.hasher: incremental BLAKE2b (crypto_generichash), for hashing files
// chunk by chunk (the share tools hash whole files as b2sum does).
//
//   local h = core.hasher([outlen = 64])   -- 16..64 bytes
//   h:update(data)                         -- any number of times
//   h:digest()                             -- the hash; the state is spent
//
// The state lives in C memory apart from the userdata (it needs 64-byte
// alignment); __gc frees it.
#include <sodium.h>
#include <stdlib.h>

#include "bind.h"

#define HASHER_MT "ludx.hasher"

typedef struct hasher_s {
  crypto_generichash_state st;
  size_t out_len;
  int done;
} hasher_t;

static int
l_hasher (lua_State *L) {
  size_t out_len = (size_t) ludx_opt_integer(L, 1, "outlen", crypto_generichash_BYTES_MAX, crypto_generichash_BYTES_MIN, crypto_generichash_BYTES_MAX);
  hasher_t *h = NULL;
  if (posix_memalign((void **) &h, 64, sizeof(*h)) != 0 || h == NULL)
    return ludx_push_error(L, "out of memory", "ENOMEM");
  crypto_generichash_init(&h->st, NULL, 0, out_len);
  h->out_len = out_len;
  h->done = 0;
  ludx_new_object(L, HASHER_MT, h);
  return 1;
}

static hasher_t *
check_hasher (lua_State *L) {
  hasher_t *h = ludx_check_open(L, 1, HASHER_MT, "hasher");
  if (h->done)
    luaL_error(L, "hasher: digest() was already taken");
  return h;
}

static int
l_update (lua_State *L) {
  hasher_t *h = check_hasher(L);
  size_t len;
  const char *data = ludx_check_lstring(L, 2, "data", &len);
  crypto_generichash_update(&h->st, (const unsigned char *) data, len);
  lua_settop(L, 1);
  return 1;
}

static int
l_digest (lua_State *L) {
  hasher_t *h = check_hasher(L);
  unsigned char out[crypto_generichash_BYTES_MAX];
  crypto_generichash_final(&h->st, out, h->out_len);
  h->done = 1;
  lua_pushlstring(L, (const char *) out, h->out_len);
  return 1;
}

static int
l_gc (lua_State *L) {
  void **ud = luaL_checkudata(L, 1, HASHER_MT);
  free(*ud);
  *ud = NULL;
  return 0;
}

void
ludx_bind_hash (lua_State *L) {
  static const luaL_Reg methods[] = {
      {"update", l_update},
      {"digest", l_digest},
      {"__gc", l_gc},
      {NULL, NULL},
  };
  static const luaL_Reg funcs[] = {
      {"hasher", l_hasher},
      {NULL, NULL},
  };
  ludx_new_class(L, HASHER_MT, methods);
  ludx_set_funcs(L, funcs);
}
