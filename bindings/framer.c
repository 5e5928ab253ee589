// core.crypto.framer(): the secret-stream byte stream (ludx_ss_t) for a Lua
// stream. It keeps the raw bytes that follow a handshake frame until feed
// is called again, so the caller can install the keys (start) in between;
// over a udx stream, feed_udx and encrypt_udx (framer_udx.c) work on the
// stream's own buffers, with no Lua string for the raw bytes.
#include <string.h>

#include "crypto_bind.h"
#include "framer.h"

static void
push_bytes (lua_State *L, const uint8_t *p, size_t len) {
  lua_pushlstring(L, (const char *) p, len);
}

// Appends plaintext to f->out; on failure f->out is emptied.
static int
out_append (framer_t *f, const uint8_t *p, size_t n) {
  if (grow(&f->out, &f->out_cap, f->out_len + n) < 0) {
    f->out_len = 0;
    return LUDX_CRYPTO_ENOMEM;
  }
  memcpy(f->out + f->out_len, p, n);
  f->out_len += n;
  return 0;
}

static void
framer_free (framer_t *f) {
  if (f->job)
    f->job->f = NULL;
  ludx_ss_destroy(&f->ss);
  if (f->out)
    ludx_wipe(f->out, f->out_cap);
  free(f->pend);
  free(f->out);
  free(f);
}

// Frees the buffers above FRAMER_KEEP that hold nothing now. Plaintext
// (f->out) is wiped first; held raw input (f->pend) is ciphertext.
static void
framer_trim (framer_t *f) {
  if (f->out_cap > FRAMER_KEEP && f->out_len == 0 && f->glen == 0 && f->rd_len == 0) {
    ludx_wipe(f->out, f->out_cap);
    free(f->out);
    f->out = NULL;
    f->out_cap = 0;
  }
  if (f->pend_cap > FRAMER_KEEP && f->pend_len == 0) {
    free(f->pend);
    f->pend = NULL;
    f->pend_cap = 0;
  }
  ludx_ss_trim(&f->ss, FRAMER_KEEP);
}

// Bytes allocated for frames and plaintext now.
static size_t
framer_buffer_bytes (const framer_t *f) {
  return f->out_cap + f->pend_cap + ludx_ss_buffer_bytes(&f->ss);
}

static int
l_framer (lua_State *L) {
  framer_t *f = calloc(1, sizeof(*f));
  if (f == NULL)
    return ludx_push_crypto_error(L, LUDX_CRYPTO_ENOMEM);
  ludx_ss_init(&f->ss);
  ludx_new_object(L, FRAMER_MT, f);
  return 1;
}

// f:start(initiator, tx, rx, hash) -> our id/header frame (59 bytes)
static int
l_framer_start (lua_State *L) {
  framer_t *f = check_framer(L);
  int initiator = ludx_check_boolean(L, 2, "initiator");
  const uint8_t *tx = ludx_check_bytes(L, 3, "tx", LUDX_KEYBYTES);
  const uint8_t *rx = ludx_check_bytes(L, 4, "rx", LUDX_KEYBYTES);
  const uint8_t *hash = ludx_check_bytes(L, 5, "hash", LUDX_HASHBYTES);
  uint8_t header[LUDX_SS_HEADER_FRAMEBYTES];
  int rc = ludx_ss_start(&f->ss, initiator, tx, rx, hash, header);
  if (rc < 0)
    return ludx_push_crypto_error(L, rc);
  push_bytes(L, header, sizeof(header));
  return 1;
}

// f:encrypt(plaintext) -> one data frame ("" is a keep-alive)
static int
l_framer_encrypt (lua_State *L) {
  framer_t *f = check_framer(L);
  size_t len;
  const char *msg = ludx_check_lstring(L, 2, "data", &len);
  if (f->job)
    return ludx_push_error(L, "a frame is being sealed", "EBUSY");
  const uint8_t *frame;
  size_t frame_len;
  int rc = ludx_ss_encrypt_frame(&f->ss, (const uint8_t *) msg, len, &frame, &frame_len);
  if (rc < 0)
    return ludx_push_crypto_error(L, rc);
  ludx_push_bytes(L, frame, frame_len);
  return 1;
}

// f:feed(raw [, one]) -> plaintext, handshake_message | nil, msg, code
//
// The plaintext of every complete data frame in the input, concatenated
// ("" when there is none). In the handshake phase it stops after one
// handshake frame and returns its body second; the bytes after it are held
// until the next call (feed("") continues). On any bad input the stream is
// failed and nothing of this call is returned, so no byte that did not
// authenticate (or that follows one that did not) ever reaches the caller.
// With one = true (message boundaries), it stops after the first non-empty
// data frame and holds the rest like after a handshake frame; empty frames
// (keep-alives) are skipped.
static int
l_framer_feed (lua_State *L) {
  framer_t *f = check_framer(L);
  size_t len;
  const uint8_t *data = (const uint8_t *) ludx_check_lstring(L, 2, "data", &len);
  int one = lua_toboolean(L, 3);
  if (f->glen > 0) // feed() would write over it (feed_udx's twin check)
    return luaL_error(L, "framer: feed with a frame held from feed_udx");
  const uint8_t *in = data;
  size_t in_len = len;
  int held = f->pend_len > 0;
  if (held) {
    if (len > 0) {
      if (grow(&f->pend, &f->pend_cap, f->pend_len + len) < 0)
        return ludx_push_crypto_error(L, LUDX_CRYPTO_ENOMEM);
      memcpy(f->pend + f->pend_len, data, len);
      f->pend_len += len;
    }
    in = f->pend;
    in_len = f->pend_len;
  }

  f->out_len = 0;
  for (;;) {
    const uint8_t *out;
    size_t out_len;
    int rc = ludx_ss_read(&f->ss, &in, &in_len, &out, &out_len);
    if (rc < 0) {
      f->pend_len = 0;
      f->out_len = 0;
      return ludx_push_crypto_error(L, rc);
    }
    if (rc == LUDX_SS_NEED_MORE)
      break;
    if (one && rc == LUDX_SS_DATA && out_len == 0)
      continue;
    if (rc == LUDX_SS_HANDSHAKE || one) {
      int n = 1;
      if (rc == LUDX_SS_HANDSHAKE) {
        // no data frame can come before keys, so the plaintext is empty
        lua_pushliteral(L, "");
        n = 2;
      }
      push_bytes(L, out, out_len); // before `in` (maybe in pend) moves
      if (in_len > 0) {
        if (held) {
          memmove(f->pend, in, in_len);
        } else if (grow(&f->pend, &f->pend_cap, in_len) < 0) {
          return ludx_push_crypto_error(L, LUDX_CRYPTO_ENOMEM);
        } else {
          memcpy(f->pend, in, in_len);
        }
      }
      f->pend_len = in_len;
      return n;
    }
    // LUDX_SS_DATA: the last frame of the input goes out without a copy
    if (in_len == 0 && f->out_len == 0) {
      f->pend_len = 0;
      ludx_push_bytes(L, out, out_len);
      return 1;
    }
    if (out_append(f, out, out_len) < 0) {
      f->pend_len = 0;
      return ludx_push_crypto_error(L, LUDX_CRYPTO_ENOMEM);
    }
  }
  f->pend_len = 0;
  size_t plain = f->out_len;
  lua_pushlstring(L, plain ? (const char *) f->out : "", plain);
  f->out_len = 0;
  ludx_gc_pay(L, plain);
  return 1;
}

// f:trim(): frees the buffers above FRAMER_KEEP that hold nothing now (a
// frame split across reads stays). Buffers grow to the largest frame seen
// and are kept for the next one; the caller trims once large frames stop,
// so a stream that carried one 16 MiB frame does not keep 16 MiB per
// direction for the rest of its life.
static int
l_framer_trim (lua_State *L) {
  framer_trim(check_framer(L));
  return 0;
}

// f:buffer_bytes() -> bytes allocated for frames and plaintext now
static int
l_framer_buffer_bytes (lua_State *L) {
  framer_t *f = check_framer(L);
  lua_pushinteger(L, (lua_Integer) framer_buffer_bytes(f));
  return 1;
}

// f:pending() -> raw bytes held that do not make a whole frame yet
static int
l_framer_pending (lua_State *L) {
  framer_t *f = check_framer(L);
  size_t gathered = f->glen > 0 ? LUDX_SS_PREFIXBYTES + f->ghave : 0;
  lua_pushinteger(L, (lua_Integer) (f->pend_len + f->ss.prefix_have + f->ss.buf_len + gathered));
  return 1;
}

// f:ready() -> true once the peer's id/header frame was accepted
static int
l_framer_ready (lua_State *L) {
  lua_pushboolean(L, ludx_ss_ready(&check_framer(L)->ss));
  return 1;
}

// f:error() -> nil | msg, code (the error that failed the framer)
static int
l_framer_error (lua_State *L) {
  framer_t *f = check_framer(L);
  if (f->ss.error == 0)
    return 0;
  lua_pushstring(L, ludx_crypto_strerror(f->ss.error));
  lua_pushstring(L, ludx_crypto_errname(f->ss.error));
  return 2;
}

static void
set_number (lua_State *L, const char *k, uint64_t v) {
  lua_pushnumber(L, (lua_Number) v);
  lua_setfield(L, -2, k);
}

// f:stats() -> {frames_in, frames_out, keepalives_in, bytes_in, bytes_out,
// buffer_bytes (allocated for frames and plaintext now)}
static int
l_framer_stats (lua_State *L) {
  framer_t *f = check_framer(L);
  const ludx_ss_stats_t *s = ludx_ss_stats(&f->ss);
  lua_createtable(L, 0, 6);
  set_number(L, "buffer_bytes", framer_buffer_bytes(f));
  set_number(L, "frames_in", s->frames_in);
  set_number(L, "frames_out", s->frames_out);
  set_number(L, "keepalives_in", s->keepalives_in);
  set_number(L, "bytes_in", s->bytes_in);
  set_number(L, "bytes_out", s->bytes_out);
  return 1;
}

static int
l_framer_destroy (lua_State *L) {
  void **ud = luaL_checkudata(L, 1, FRAMER_MT);
  if (*ud != NULL) {
    framer_free(*ud);
    *ud = NULL;
  }
  return 0;
}

// core.crypto.secretstream_rate(frame_bytes, total_bytes) -> push_s, pull_s
//
// libsodium's secretstream (XChaCha20-Poly1305, what a secret-stream frame
// is sealed with) on this thread's CPU: seconds spent pushing, then
// pulling, total_bytes in frames of frame_bytes. A bench reference: what
// encryption costs at least, with no framing, copy or I/O around it.
static int
l_secretstream_rate (lua_State *L) {
  size_t frame = (size_t) ludx_check_integer(L, 1, "frame_bytes", 1, LUDX_SS_MAX_WRITE);
  uint64_t total = (uint64_t) ludx_check_integer(L, 2, "total_bytes", 1, (lua_Integer) 1 << 40);
  double push_s, pull_s;
  int rc = ludx_ss_cipher_rate(frame, total, &push_s, &pull_s);
  if (rc < 0)
    return ludx_push_crypto_error(L, rc);
  lua_pushnumber(L, push_s);
  lua_pushnumber(L, pull_s);
  return 2;
}

void
ludx_bind_framer (lua_State *L) {
  static const luaL_Reg methods[] = {
      {"start", l_framer_start},
      {"encrypt", l_framer_encrypt},
      {"feed", l_framer_feed},
      {"pending", l_framer_pending},
      {"trim", l_framer_trim},
      {"buffer_bytes", l_framer_buffer_bytes},
      {"ready", l_framer_ready},
      {"error", l_framer_error},
      {"stats", l_framer_stats},
      {"destroy", l_framer_destroy},
      {"__gc", l_framer_destroy},
      {NULL, NULL},
  };
  ludx_new_class(L, FRAMER_MT, methods);
  lua_pushcfunction(L, l_framer);
  lua_setfield(L, -2, "framer");
  ludx_bind_framer_udx(L);
  lua_pushcfunction(L, l_secretstream_rate);
  lua_setfield(L, -2, "secretstream_rate");
}
