// core.crypto: the hyperswarm crypto of runtime/crypto for Lua.
//
// Functions (all in the sub-table core.crypto; byte strings are Lua strings):
//   keypair([seed32]) -> public_key32, secret_key64
//   sign(message, secret_key64) -> signature64
//   verify(signature, message, public_key32) -> boolean
//   dh(secret_key64, remote_public_key32) -> 32 | nil, msg, "EBADKEY"
//   blake2b(data[, outlen=32][, key]) -> digest
//   blake2b_batch({data, ...}[, outlen=32][, key]) -> digest of the concatenation
//   ns(name, i) -> H32(H32(name) || byte(i))
//   secretbox(message, nonce24, key32) -> mac16 || ciphertext
//   secretbox_open(box, nonce24, key32) -> message | nil, msg, "EDECRYPT"
//   randombytes(n[, seed32]) -> n random bytes (deterministic with a seed)
//   stream_id(hash64, initiator) -> 32
//   holepunch_secret(hash64) -> 32
//   frame(body) -> 3-byte LE length || body
//   noise(pattern, initiator, keypair, prologue, remote_public_key) -> handshake
//   unordered(initiator, hash64) -> box
// (core.crypto.framer is added by framer.c, registered from core.c)
// and the constants MAX_WRITE, MAX_FRAME, HEADER_FRAMEBYTES, ABYTES.
//
// Arguments of the wrong type or size raise and name the argument; bytes
// that may come from the network (Noise messages, raw stream bytes, boxes,
// signatures) never raise: they give nil, message, code. Errors carry the
// crypto error names of ludx_crypto_core.h ("EDECRYPT", "EHANDSHAKE", ...).
#include <stdlib.h>
#include <string.h>

#include "bind.h"
#include "crypto_bind.h"
#include "ludx_crypto.h"

#define NOISE_MT   "ludx.crypto.noise"
#define UNORDER_MT "ludx.crypto.unordered"

static const char *
fname (lua_State *L) {
  lua_Debug ar;
  if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.name)
    return ar.name;
  return "?";
}

static const uint8_t *
opt_bytes (lua_State *L, int idx, const char *name, size_t want) {
  if (lua_isnoneornil(L, idx))
    return NULL;
  return ludx_check_bytes(L, idx, name, want);
}

// {public_key = 32 bytes, secret_key = 64 bytes}
static void
check_keypair (lua_State *L, int idx, const char *name, ludx_keypair_t *kp) {
  if (lua_type(L, idx) != LUA_TTABLE)
    luaL_error(L, "bad argument '%s' to '%s' ({public_key=, secret_key=} expected, got %s)", name, fname(L), luaL_typename(L, idx));
  static const struct {
    const char *field;
    size_t len;
  } fields[2] = {{"public_key", LUDX_PUBLICKEYBYTES}, {"secret_key", LUDX_SECRETKEYBYTES}};
  for (int i = 0; i < 2; i++) {
    lua_getfield(L, idx, fields[i].field);
    size_t len = 0;
    const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
    if (s == NULL || len != fields[i].len)
      luaL_error(L, "bad argument '%s' to '%s' (field %s: %d-byte string expected)", name, fname(L), fields[i].field, (int) fields[i].len);
    memcpy(i == 0 ? kp->public_key : kp->secret_key, s, len);
    lua_pop(L, 1);
  }
}

static void
push_bytes (lua_State *L, const uint8_t *p, size_t len) {
  lua_pushlstring(L, (const char *) p, len);
}

// Output length 16..64 and an optional 16..64-byte key, as crypto_generichash.
static void
hash_options (lua_State *L, int idx, size_t *out_len, const uint8_t **key, size_t *key_len) {
  *out_len = (size_t) ludx_opt_integer(L, idx, "outlen", LUDX_H32BYTES, 16, 64);
  *key = (const uint8_t *) ludx_opt_lstring(L, idx + 1, "key", NULL, key_len);
  if (*key != NULL && (*key_len < 16 || *key_len > 64))
    luaL_error(L, "bad argument 'key' to '%s' (16..64 bytes expected, got %d)", fname(L), (int) *key_len);
}

//----------------------------------------------------------------------------
// Primitives.

static int
l_keypair (lua_State *L) {
  const uint8_t *seed = opt_bytes(L, 1, "seed", LUDX_SEEDBYTES);
  ludx_keypair_t kp;
  int rc = seed ? ludx_keypair_seed(&kp, seed) : ludx_keypair_random(&kp);
  if (rc < 0)
    return ludx_push_crypto_error(L, rc);
  push_bytes(L, kp.public_key, sizeof(kp.public_key));
  push_bytes(L, kp.secret_key, sizeof(kp.secret_key));
  ludx_wipe(&kp, sizeof(kp));
  return 2;
}

static int
l_sign (lua_State *L) {
  size_t len;
  const char *msg = ludx_check_lstring(L, 1, "message", &len);
  const uint8_t *sk = ludx_check_bytes(L, 2, "secret_key", LUDX_SECRETKEYBYTES);
  uint8_t sig[LUDX_SIGNBYTES];
  int rc = ludx_sign(sig, (const uint8_t *) msg, len, sk);
  if (rc < 0)
    return ludx_push_crypto_error(L, rc);
  push_bytes(L, sig, sizeof(sig));
  return 1;
}

// A signature of the wrong size comes from a peer: it does not verify.
static int
l_verify (lua_State *L) {
  size_t sig_len, len;
  const char *sig = ludx_check_lstring(L, 1, "signature", &sig_len);
  const char *msg = ludx_check_lstring(L, 2, "message", &len);
  const uint8_t *pk = ludx_check_bytes(L, 3, "public_key", LUDX_PUBLICKEYBYTES);
  int ok = sig_len == LUDX_SIGNBYTES && ludx_verify((const uint8_t *) sig, (const uint8_t *) msg, len, pk) == 0;
  lua_pushboolean(L, ok);
  return 1;
}

static int
l_dh (lua_State *L) {
  const uint8_t *sk = ludx_check_bytes(L, 1, "secret_key", LUDX_SECRETKEYBYTES);
  const uint8_t *pk = ludx_check_bytes(L, 2, "remote_public_key", LUDX_PUBLICKEYBYTES);
  uint8_t out[LUDX_DHBYTES];
  int rc = ludx_dh(out, sk, pk);
  if (rc < 0)
    return ludx_push_crypto_error(L, rc);
  push_bytes(L, out, sizeof(out));
  ludx_wipe(out, sizeof(out));
  return 1;
}

static int
l_blake2b (lua_State *L) {
  size_t len, out_len, key_len;
  const uint8_t *key;
  const char *data = ludx_check_lstring(L, 1, "data", &len);
  hash_options(L, 2, &out_len, &key, &key_len);
  uint8_t out[64];
  int rc = ludx_blake2b(out, out_len, (const uint8_t *) data, len, key, key_len);
  if (rc < 0)
    return ludx_push_crypto_error(L, rc);
  push_bytes(L, out, out_len);
  return 1;
}

#define BATCH_STACK 16

static int
l_blake2b_batch (lua_State *L) {
  ludx_check_table(L, 1, "list");
  size_t out_len, key_len;
  const uint8_t *key;
  hash_options(L, 2, &out_len, &key, &key_len);
  size_t n = lua_objlen(L, 1);
  ludx_buf_t stack[BATCH_STACK];
  ludx_buf_t *parts = stack;
  if (n > BATCH_STACK) {
    parts = lua_newuserdata(L, n * sizeof(ludx_buf_t)); // freed by the GC
  }
  for (size_t i = 0; i < n; i++) {
    lua_rawgeti(L, 1, (int) i + 1);
    if (lua_type(L, -1) != LUA_TSTRING)
      return luaL_error(L, "bad argument 'list' to 'blake2b_batch' (item %d is a %s, string expected)", (int) i + 1, luaL_typename(L, -1));
    parts[i].data = (const uint8_t *) lua_tolstring(L, -1, &parts[i].len);
    lua_pop(L, 1); // the table keeps the string alive
  }
  uint8_t out[64];
  int rc = ludx_blake2b_batch(out, out_len, parts, n, key, key_len);
  if (rc < 0)
    return ludx_push_crypto_error(L, rc);
  push_bytes(L, out, out_len);
  return 1;
}

static int
l_ns (lua_State *L) {
  const char *name = ludx_check_lstring(L, 1, "name", NULL);
  uint8_t i = (uint8_t) ludx_check_integer(L, 2, "i", 0, 255);
  uint8_t out[LUDX_H32BYTES];
  ludx_ns(out, name, i);
  push_bytes(L, out, sizeof(out));
  return 1;
}

static int
l_secretbox (lua_State *L) {
  size_t len;
  const char *msg = ludx_check_lstring(L, 1, "message", &len);
  const uint8_t *nonce = ludx_check_bytes(L, 2, "nonce", LUDX_SECRETBOX_NONCEBYTES);
  const uint8_t *key = ludx_check_bytes(L, 3, "key", LUDX_SECRETBOX_KEYBYTES);
  size_t out_len = len + LUDX_SECRETBOX_MACBYTES;
  uint8_t *out = lua_newuserdata(L, out_len);
  ludx_secretbox(out, (const uint8_t *) msg, len, nonce, key);
  push_bytes(L, out, out_len);
  return 1;
}

static int
l_secretbox_open (lua_State *L) {
  size_t len;
  const char *box = ludx_check_lstring(L, 1, "box", &len);
  const uint8_t *nonce = ludx_check_bytes(L, 2, "nonce", LUDX_SECRETBOX_NONCEBYTES);
  const uint8_t *key = ludx_check_bytes(L, 3, "key", LUDX_SECRETBOX_KEYBYTES);
  if (len < LUDX_SECRETBOX_MACBYTES)
    return ludx_push_crypto_error(L, LUDX_CRYPTO_EDECRYPT);
  size_t out_len = len - LUDX_SECRETBOX_MACBYTES;
  uint8_t *out = lua_newuserdata(L, out_len > 0 ? out_len : 1);
  int rc = ludx_secretbox_open(out, (const uint8_t *) box, len, nonce, key);
  if (rc < 0)
    return ludx_push_crypto_error(L, rc);
  push_bytes(L, out, out_len);
  return 1;
}

static int
l_randombytes (lua_State *L) {
  size_t n = (size_t) ludx_check_integer(L, 1, "n", 0, 1 << 30);
  const uint8_t *seed = opt_bytes(L, 2, "seed", LUDX_SEEDBYTES);
  uint8_t *out = lua_newuserdata(L, n > 0 ? n : 1);
  ludx_randombytes(out, n, seed);
  push_bytes(L, out, n);
  return 1;
}

static int
l_stream_id (lua_State *L) {
  const uint8_t *hash = ludx_check_bytes(L, 1, "hash", LUDX_HASHBYTES);
  int initiator = ludx_check_boolean(L, 2, "initiator");
  uint8_t out[LUDX_SS_IDBYTES];
  ludx_ss_stream_id(out, hash, initiator);
  push_bytes(L, out, sizeof(out));
  return 1;
}

static int
l_holepunch_secret (lua_State *L) {
  const uint8_t *hash = ludx_check_bytes(L, 1, "hash", LUDX_HASHBYTES);
  uint8_t out[LUDX_KEYBYTES];
  ludx_holepunch_secret(out, hash);
  push_bytes(L, out, sizeof(out));
  return 1;
}

// A handshake frame: the 3-byte length, then the Noise message.
static int
l_frame (lua_State *L) {
  size_t len;
  ludx_check_lstring(L, 1, "body", &len);
  uint8_t prefix[LUDX_SS_PREFIXBYTES];
  int rc = ludx_ss_prefix(prefix, len);
  if (rc < 0)
    return ludx_push_crypto_error(L, rc);
  lua_pushlstring(L, (const char *) prefix, sizeof(prefix));
  lua_pushvalue(L, 1);
  lua_concat(L, 2);
  return 1;
}

//----------------------------------------------------------------------------
// Noise handshake: core.crypto.noise(pattern, initiator, keypair, prologue,
// remote_public_key). keypair nil = a random one; prologue nil = empty.

static ludx_noise_t *
check_noise (lua_State *L) {
  return ludx_check_open(L, 1, NOISE_MT, "handshake");
}

static int
l_noise (lua_State *L) {
  const char *pat = ludx_check_lstring(L, 1, "pattern", NULL);
  ludx_noise_pattern_t pattern;
  if (strcmp(pat, "XX") == 0)
    pattern = LUDX_NOISE_XX;
  else if (strcmp(pat, "IK") == 0)
    pattern = LUDX_NOISE_IK;
  else
    return luaL_error(L, "bad argument 'pattern' to 'noise' ('XX' or 'IK' expected, got '%s')", pat);
  int initiator = ludx_check_boolean(L, 2, "initiator");
  ludx_keypair_t kp;
  if (lua_isnoneornil(L, 3))
    ludx_keypair_random(&kp);
  else
    check_keypair(L, 3, "keypair", &kp);
  size_t prologue_len;
  const char *prologue = ludx_opt_lstring(L, 4, "prologue", "", &prologue_len);
  const uint8_t *rs = opt_bytes(L, 5, "remote_public_key", LUDX_PUBLICKEYBYTES);
  if (pattern == LUDX_NOISE_IK && initiator && rs == NULL) {
    ludx_wipe(&kp, sizeof(kp));
    return luaL_error(L, "bad argument 'remote_public_key' to 'noise' (an IK initiator needs the responder's key)");
  }

  ludx_noise_t *hs = malloc(sizeof(*hs));
  if (hs == NULL) {
    ludx_wipe(&kp, sizeof(kp));
    return ludx_push_crypto_error(L, LUDX_CRYPTO_ENOMEM);
  }
  int rc = ludx_noise_init(hs, pattern, initiator, &kp, (const uint8_t *) prologue, prologue_len, rs);
  ludx_wipe(&kp, sizeof(kp));
  if (rc < 0) {
    ludx_noise_wipe(hs);
    free(hs);
    return ludx_push_crypto_error(L, rc);
  }
  ludx_new_object(L, NOISE_MT, hs);
  return 1;
}

// hs:set_ephemeral(keypair): fixed ephemeral keys, for test vectors.
static int
l_noise_set_ephemeral (lua_State *L) {
  ludx_noise_t *hs = check_noise(L);
  ludx_keypair_t kp;
  check_keypair(L, 2, "keypair", &kp);
  int rc = ludx_noise_set_ephemeral(hs, &kp);
  ludx_wipe(&kp, sizeof(kp));
  if (rc < 0)
    return ludx_push_crypto_error(L, rc);
  lua_pushboolean(L, 1);
  return 1;
}

// hs:send([payload]) -> message
static int
l_noise_send (lua_State *L) {
  ludx_noise_t *hs = check_noise(L);
  size_t len;
  const char *payload = ludx_opt_lstring(L, 2, "payload", "", &len);
  if (hs->status == LUDX_NOISE_FAILED)
    return ludx_push_crypto_error(L, hs->error);
  long size = ludx_noise_send_size(hs, len);
  if (size < 0)
    return ludx_push_crypto_error(L, (int) size);
  uint8_t *out = lua_newuserdata(L, (size_t) size);
  size_t out_len;
  int rc = ludx_noise_send(hs, (const uint8_t *) payload, len, out, (size_t) size, &out_len);
  if (rc < 0)
    return ludx_push_crypto_error(L, rc);
  push_bytes(L, out, out_len);
  return 1;
}

// hs:recv(message) -> payload | nil, msg, code (the handshake is then failed)
static int
l_noise_recv (lua_State *L) {
  ludx_noise_t *hs = check_noise(L);
  size_t len;
  const char *msg = ludx_check_lstring(L, 2, "message", &len);
  if (hs->status == LUDX_NOISE_FAILED)
    return ludx_push_crypto_error(L, hs->error);
  long size = ludx_noise_recv_size(hs, len);
  if (size == LUDX_CRYPTO_EHANDSHAKE) {
    // a message of an impossible size fails the handshake like a bad one
    int rc = ludx_noise_recv(hs, (const uint8_t *) msg, len, NULL, 0, NULL);
    return ludx_push_crypto_error(L, rc < 0 ? rc : LUDX_CRYPTO_EHANDSHAKE);
  }
  if (size < 0)
    return ludx_push_crypto_error(L, (int) size);
  uint8_t *payload = lua_newuserdata(L, size > 0 ? (size_t) size : 1);
  size_t payload_len = 0;
  int rc = ludx_noise_recv(hs, (const uint8_t *) msg, len, payload, (size_t) size, &payload_len);
  if (rc < 0)
    return ludx_push_crypto_error(L, rc);
  push_bytes(L, payload, payload_len);
  return 1;
}

static const char *const noise_status_names[] = {"?", "send", "recv", "done", "failed"};

// hs:status() -> "send" | "recv" | "done" | "failed" [, msg, code]
static int
l_noise_status (lua_State *L) {
  ludx_noise_t *hs = check_noise(L);
  int st = ludx_noise_status(hs);
  lua_pushstring(L, st >= 1 && st <= 4 ? noise_status_names[st] : "?");
  if (st != LUDX_NOISE_FAILED)
    return 1;
  lua_pushstring(L, ludx_crypto_strerror(hs->error));
  lua_pushstring(L, ludx_crypto_errname(hs->error));
  return 3;
}

static int
l_noise_complete (lua_State *L) {
  lua_pushboolean(L, ludx_noise_status(check_noise(L)) == LUDX_NOISE_DONE);
  return 1;
}

// hs:hash() -> the running handshake hash (64 bytes)
static int
l_noise_hash (lua_State *L) {
  push_bytes(L, ludx_noise_hash(check_noise(L)), LUDX_HASHBYTES);
  return 1;
}

// hs:result() -> {tx, rx, hash, public_key, remote_public_key}
static int
l_noise_result (lua_State *L) {
  ludx_noise_t *hs = check_noise(L);
  ludx_noise_result_t r;
  int rc = ludx_noise_result(hs, &r);
  if (rc < 0)
    return ludx_push_crypto_error(L, rc);
  lua_createtable(L, 0, 5);
  push_bytes(L, r.tx, sizeof(r.tx));
  lua_setfield(L, -2, "tx");
  push_bytes(L, r.rx, sizeof(r.rx));
  lua_setfield(L, -2, "rx");
  push_bytes(L, r.hash, sizeof(r.hash));
  lua_setfield(L, -2, "hash");
  push_bytes(L, r.public_key, sizeof(r.public_key));
  lua_setfield(L, -2, "public_key");
  push_bytes(L, r.remote_public_key, sizeof(r.remote_public_key));
  lua_setfield(L, -2, "remote_public_key");
  ludx_wipe(&r, sizeof(r));
  return 1;
}

// hs:destroy(): wipe the keys now (also done by the GC).
static int
l_noise_destroy (lua_State *L) {
  void **ud = luaL_checkudata(L, 1, NOISE_MT);
  if (*ud != NULL) {
    ludx_noise_wipe(*ud);
    free(*ud);
    *ud = NULL;
  }
  return 0;
}

//----------------------------------------------------------------------------
// Unordered datagrams (secret-stream send/trySend).

static ludx_unordered_t *
check_unordered (lua_State *L) {
  return ludx_check_open(L, 1, UNORDER_MT, "unordered box");
}

static int
l_unordered (lua_State *L) {
  int initiator = ludx_check_boolean(L, 1, "initiator");
  const uint8_t *hash = ludx_check_bytes(L, 2, "hash", LUDX_HASHBYTES);
  ludx_unordered_t *u = malloc(sizeof(*u));
  if (u == NULL)
    return ludx_push_crypto_error(L, LUDX_CRYPTO_ENOMEM);
  int rc = ludx_unordered_init(u, initiator, hash);
  if (rc < 0) {
    free(u);
    return ludx_push_crypto_error(L, rc);
  }
  ludx_new_object(L, UNORDER_MT, u);
  return 1;
}

// u:seal(message) -> datagram (message + 24 bytes)
static int
l_unordered_seal (lua_State *L) {
  ludx_unordered_t *u = check_unordered(L);
  size_t len;
  const char *msg = ludx_check_lstring(L, 2, "message", &len);
  size_t cap = len + LUDX_UNORDERED_OVERHEAD;
  uint8_t *out = lua_newuserdata(L, cap);
  size_t out_len;
  int rc = ludx_unordered_seal(u, (const uint8_t *) msg, len, out, cap, &out_len);
  if (rc < 0)
    return ludx_push_crypto_error(L, rc);
  push_bytes(L, out, out_len);
  return 1;
}

// u:open(datagram) -> message | nil, msg, "EFRAME" / "EDECRYPT"
static int
l_unordered_open (lua_State *L) {
  ludx_unordered_t *u = check_unordered(L);
  size_t len;
  const char *in = ludx_check_lstring(L, 2, "datagram", &len);
  if (len < LUDX_UNORDERED_OVERHEAD)
    return ludx_push_crypto_error(L, LUDX_CRYPTO_EFRAME);
  size_t cap = len - LUDX_UNORDERED_OVERHEAD;
  uint8_t *out = lua_newuserdata(L, cap > 0 ? cap : 1);
  size_t out_len;
  int rc = ludx_unordered_open(u, (const uint8_t *) in, len, out, cap, &out_len);
  if (rc < 0)
    return ludx_push_crypto_error(L, rc);
  push_bytes(L, out, out_len);
  return 1;
}

static int
l_unordered_destroy (lua_State *L) {
  void **ud = luaL_checkudata(L, 1, UNORDER_MT);
  if (*ud != NULL) {
    ludx_wipe(*ud, sizeof(ludx_unordered_t));
    free(*ud);
    *ud = NULL;
  }
  return 0;
}

//----------------------------------------------------------------------------

void
ludx_bind_crypto (lua_State *L) {
  if (ludx_crypto_init() < 0)
    luaL_error(L, "ludx: libsodium failed to initialise");

  static const luaL_Reg noise_methods[] = {
      {"send", l_noise_send},
      {"recv", l_noise_recv},
      {"status", l_noise_status},
      {"complete", l_noise_complete},
      {"hash", l_noise_hash},
      {"result", l_noise_result},
      {"set_ephemeral", l_noise_set_ephemeral},
      {"destroy", l_noise_destroy},
      {"__gc", l_noise_destroy},
      {NULL, NULL},
  };
  static const luaL_Reg unordered_methods[] = {
      {"seal", l_unordered_seal},
      {"open", l_unordered_open},
      {"destroy", l_unordered_destroy},
      {"__gc", l_unordered_destroy},
      {NULL, NULL},
  };
  static const luaL_Reg funcs[] = {
      {"keypair", l_keypair},
      {"sign", l_sign},
      {"verify", l_verify},
      {"dh", l_dh},
      {"blake2b", l_blake2b},
      {"blake2b_batch", l_blake2b_batch},
      {"ns", l_ns},
      {"secretbox", l_secretbox},
      {"secretbox_open", l_secretbox_open},
      {"randombytes", l_randombytes},
      {"stream_id", l_stream_id},
      {"holepunch_secret", l_holepunch_secret},
      {"frame", l_frame},
      {"noise", l_noise},
      {"unordered", l_unordered},
      {NULL, NULL},
  };
  ludx_new_class(L, NOISE_MT, noise_methods);
  ludx_new_class(L, UNORDER_MT, unordered_methods);

  lua_createtable(L, 0, 24);
  ludx_set_funcs(L, funcs);
  lua_pushinteger(L, LUDX_SS_MAX_WRITE);
  lua_setfield(L, -2, "MAX_WRITE");
  lua_pushinteger(L, LUDX_SS_MAX_FRAME);
  lua_setfield(L, -2, "MAX_FRAME");
  lua_pushinteger(L, LUDX_SS_HEADER_FRAMEBYTES);
  lua_setfield(L, -2, "HEADER_FRAMEBYTES");
  lua_pushinteger(L, LUDX_SS_ABYTES);
  lua_setfield(L, -2, "ABYTES");
  lua_setfield(L, -2, "crypto");
}
