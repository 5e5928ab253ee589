// Test and benchmark data: the xorshift32 byte stream the Node peers use
// (spec/interop/README.md), and incremental BLAKE2b-512 of what goes by.
#include <sodium.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <string.h>

#include "bind.h"

#define HASHER_MT "ludx.hasher"
#define GEN_MT    "ludx.datagen"

typedef struct {
  uint32_t x;
  uint8_t pending[4]; // bytes of the current word not yet handed out
  int npending;
} datagen_t;

static uint32_t
next_word (datagen_t *g) {
  uint32_t x = g->x;
  x ^= x << 13;
  x ^= x >> 17;
  x ^= x << 5;
  g->x = x;
  return x;
}

static void
fill (datagen_t *g, uint8_t *out, size_t n) {
  size_t i = 0;
  while (i < n && g->npending > 0) {
    out[i++] = g->pending[4 - g->npending];
    g->npending--;
  }
  for (; i + 4 <= n; i += 4) {
    uint32_t w = next_word(g); // little-endian words
    out[i] = (uint8_t) w;
    out[i + 1] = (uint8_t) (w >> 8);
    out[i + 2] = (uint8_t) (w >> 16);
    out[i + 3] = (uint8_t) (w >> 24);
  }
  if (i < n) {
    uint32_t w = next_word(g);
    for (int k = 0; k < 4; k++)
      g->pending[k] = (uint8_t) (w >> (8 * k));
    g->npending = 4;
    while (i < n) {
      out[i++] = g->pending[4 - g->npending];
      g->npending--;
    }
  }
}

// core.datagen(seed) -> generator with :next(n) -> n bytes
static int
l_datagen (lua_State *L) {
  uint32_t seed = (uint32_t) ludx_opt_integer(L, 1, "seed", 1, 0, UINT32_MAX);
  datagen_t *g = lua_newuserdata(L, sizeof(*g));
  memset(g, 0, sizeof(*g));
  g->x = seed ? seed : 0x9e3779b9;
  luaL_getmetatable(L, GEN_MT);
  lua_setmetatable(L, -2);
  return 1;
}

static int
l_gen_next (lua_State *L) {
  datagen_t *g = luaL_checkudata(L, 1, GEN_MT);
  size_t n = (size_t) ludx_check_integer(L, 2, "n", 0, (lua_Integer) 1 << 31);
  // A large block is made in a mapping of its own: freed with malloc, it
  // would raise glibc's mmap threshold, and the next ones would stay in the
  // heap as free memory the process keeps (16 MiB in a bench sender's RSS).
  bool mapped = n >= (1 << 20);
  uint8_t *buf = mapped ? mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) : malloc(n ? n : 1);
  if (buf == NULL || buf == MAP_FAILED)
    return ludx_push_uv_error(L, UV_ENOMEM);
  fill(g, buf, n);
  lua_pushlstring(L, (const char *) buf, n);
  if (mapped)
    munmap(buf, n);
  else
    free(buf);
  return 1;
}

// Bytes kept for a later hash (h:keep), in batches of KEEP_BATCH, each a
// mapping of its own: the bench takes the bytes kept off an end's RSS, and
// a malloc'd MiB took 257 pages (0.8 MB of a 200 MB receiver's figure).
#define KEEP_BATCH (1024 * 1024)

typedef struct {
  crypto_generichash_state st;
  size_t outlen;
  int done;
  double bytes;
  uint8_t **kept; // full batches, then the one being filled
  size_t nkept, kept_cap, last_len;
} hasher_t;

static void
hasher_drop_kept (hasher_t *h) {
  for (size_t i = 0; i < h->nkept; i++)
    munmap(h->kept[i], KEEP_BATCH);
  free(h->kept);
  h->kept = NULL;
  h->nkept = h->kept_cap = h->last_len = 0;
}

// libsodium's hash state must be 64-byte aligned; userdata is only 8- or
// 16-byte aligned, so the state sits at the first aligned address inside.
#define HASHER_ALIGN 64

static hasher_t *
hasher_at (void *ud) {
  return (hasher_t *) (((uintptr_t) ud + HASHER_ALIGN - 1) & ~(uintptr_t) (HASHER_ALIGN - 1));
}

static hasher_t *
check_hasher (lua_State *L) {
  return hasher_at(luaL_checkudata(L, 1, HASHER_MT));
}

// core.hasher([outlen = 64]) -> incremental BLAKE2b
static int
l_hasher (lua_State *L) {
  size_t outlen = (size_t) ludx_opt_integer(L, 1, "outlen", 64, crypto_generichash_BYTES_MIN, crypto_generichash_BYTES_MAX);
  hasher_t *h = hasher_at(lua_newuserdata(L, sizeof(hasher_t) + HASHER_ALIGN - 1));
  memset(h, 0, sizeof(*h));
  h->outlen = outlen;
  if (sodium_init() < 0 || crypto_generichash_init(&h->st, NULL, 0, outlen) != 0)
    return luaL_error(L, "hasher: libsodium failed");
  luaL_getmetatable(L, HASHER_MT);
  lua_setmetatable(L, -2);
  return 1;
}

static int
l_hasher_update (lua_State *L) {
  hasher_t *h = check_hasher(L);
  size_t len;
  const char *s = ludx_check_lstring(L, 2, "data", &len);
  if (h->done)
    return luaL_error(L, "hasher: update after digest");
  crypto_generichash_update(&h->st, (const unsigned char *) s, len);
  h->bytes += (double) len;
  lua_settop(L, 1);
  return 1;
}

// h:keep(data) -> h: copies data aside, hashed by hex() after everything
// updated before it (benchmarks: the receiver's timed part copies as a Node
// receiver does, and hashes after; the bytes stay outside the Lua heap).
static int
l_hasher_keep (lua_State *L) {
  hasher_t *h = check_hasher(L);
  size_t len;
  const char *s = ludx_check_lstring(L, 2, "data", &len);
  if (h->done)
    return luaL_error(L, "hasher: keep after digest");
  while (len > 0) {
    if (h->nkept == 0 || h->last_len == KEEP_BATCH) {
      if (h->nkept == h->kept_cap) {
        size_t cap = h->kept_cap ? h->kept_cap * 2 : 64;
        uint8_t **k = realloc(h->kept, cap * sizeof(*k));
        if (k == NULL)
          return ludx_push_uv_error(L, UV_ENOMEM);
        h->kept = k;
        h->kept_cap = cap;
      }
      uint8_t *b = mmap(NULL, KEEP_BATCH, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (b == MAP_FAILED)
        return ludx_push_uv_error(L, UV_ENOMEM);
      h->kept[h->nkept++] = b;
      h->last_len = 0;
    }
    size_t n = KEEP_BATCH - h->last_len < len ? KEEP_BATCH - h->last_len : len;
    memcpy(h->kept[h->nkept - 1] + h->last_len, s, n);
    h->last_len += n;
    s += n;
    len -= n;
  }
  lua_settop(L, 1);
  return 1;
}

static int
l_hasher_gc (lua_State *L) {
  hasher_drop_kept(check_hasher(L));
  return 0;
}

// h:hex() -> digest in hex (the hasher is finished)
static int
l_hasher_hex (lua_State *L) {
  hasher_t *h = check_hasher(L);
  if (h->done)
    return luaL_error(L, "hasher: digest already taken");
  for (size_t i = 0; i < h->nkept; i++) {
    size_t n = i + 1 == h->nkept ? h->last_len : KEEP_BATCH;
    crypto_generichash_update(&h->st, h->kept[i], n);
    h->bytes += (double) n;
  }
  hasher_drop_kept(h);
  unsigned char out[crypto_generichash_BYTES_MAX];
  char hex[2 * crypto_generichash_BYTES_MAX + 1];
  crypto_generichash_final(&h->st, out, h->outlen);
  h->done = 1;
  sodium_bin2hex(hex, sizeof(hex), out, h->outlen);
  lua_pushstring(L, hex);
  return 1;
}

static int
l_hasher_bytes (lua_State *L) {
  hasher_t *h = check_hasher(L);
  lua_pushnumber(L, h->bytes);
  return 1;
}

void
ludx_bind_testdata (lua_State *L) {
  static const luaL_Reg gen_methods[] = {{"next", l_gen_next}, {NULL, NULL}};
  ludx_new_class(L, GEN_MT, gen_methods);
  static const luaL_Reg hasher_methods[] = {{"update", l_hasher_update}, {"keep", l_hasher_keep}, {"hex", l_hasher_hex}, {"bytes", l_hasher_bytes}, {"__gc", l_hasher_gc}, {NULL, NULL}};
  ludx_new_class(L, HASHER_MT, hasher_methods);
  static const luaL_Reg funcs[] = {{"datagen", l_datagen}, {"hasher", l_hasher}, {NULL, NULL}};
  ludx_set_funcs(L, funcs);
}
