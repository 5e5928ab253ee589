// core.crypto.framer over a udx stream: once the keys are known, frames
// are gathered from the stream's read buffer and opened in place there
// (feed_udx, rest), and sealed into its send queue (encrypt_udx, and
// seal_udx on the libuv thread pool), with no Lua string for the raw bytes.
#include <string.h>

#include "crypto_bind.h"
#include "framer.h"

// Frames of this size and more are sealed in the udx send queue's own
// memory (udx_stream_write_fill): that saves a frame-sized buffer and a
// copy, for fresh pages per frame (faults, zeroing: about +0.3 s/GB of
// sender CPU, measured with 1 MiB frames as 2x the system time); smaller
// ones reuse the framer's buffer and are copied into the queue's pooled
// chunks, which costs less CPU than it saves memory below this size.
#define FRAMER_FILL_MIN (4 * 1024 * 1024)

// The event kind of a frame sealed off the loop (f:seal_udx).
static uint32_t ev_sealed;

// The next part (at most max bytes) of a large frame's plaintext that
// feed_udx hands over in parts; returns its length.
static size_t
push_rest (lua_State *L, framer_t *f, size_t max) {
  size_t n = f->rd_len < max ? f->rd_len : max;
  lua_pushlstring(L, (const char *) f->out + f->rd_off, n);
  f->rd_off += n;
  f->rd_len -= n;
  return n;
}

// f:rest([max]) -> the next part of a large frame feed_udx hands over in
// parts, or nil when there is none (what a failed stream keeps for its
// reader: it was authenticated).
static int
l_framer_rest (lua_State *L) {
  framer_t *f = check_framer(L);
  size_t max = (size_t) ludx_opt_integer(L, 2, "max", 65536, 1, (lua_Integer) 1 << 30);
  if (f->rd_len == 0)
    return 0;
  ludx_gc_pay(L, push_rest(L, f, max));
  return 1;
}

// While a large frame's plaintext is handed over in parts (rd_len > 0), the
// next frame is gathered into the part of f->out already handed over,
// out[0, rd_off): the stream's read buffer is drained as the reader takes
// parts, instead of filling to the receive window (4 MiB besides a 16 MiB
// frame) until the last part went. The frame's last byte stays in the
// stream, so the call after the rest finds it there and opens the frame the
// usual way (a partial frame at out[0]). A bad length prefix is left in the
// stream too, for that call to report. Returns the raw bytes taken.
static size_t
gather_behind (framer_t *f, udx_stream_t *st) {
  size_t used = 0;
  while (ludx_ss_direct(&f->ss)) {
    const uint8_t *p;
    size_t len;
    if (udx_stream_read_peek(st, &p, &len) < 0 || len == 0)
      break;
    const uint8_t *in = p;
    size_t in_len = len;
    if (f->glen == 0) {
      uint32_t flen;
      int rc = ludx_ss_next_length(&f->ss, &in, &in_len, &flen);
      if (rc < 0)
        break;
      if (rc > 0) {
        f->glen = flen;
        f->ghave = 0;
      }
    }
    size_t limit = f->glen - 1 < f->rd_off ? f->glen - 1 : f->rd_off;
    size_t take = f->glen > 0 && limit > f->ghave ? limit - f->ghave : 0;
    if (take > in_len)
      take = in_len;
    memcpy(f->out + f->ghave, in, take);
    f->ghave += (uint32_t) take;
    in_len -= take;
    udx_stream_read_consume(st, len - in_len);
    used += len - in_len;
    if (in_len > 0)
      break; // no room yet, or the frame's last byte
  }
  return used;
}

// f:rest_bytes() -> plaintext of a large frame still to hand over (feed_udx
// or rest takes it)
static int
l_framer_rest_bytes (lua_State *L) {
  lua_pushinteger(L, (lua_Integer) check_framer(L)->rd_len);
  return 1;
}

// f:feed_udx(stream [, max [, one]]) -> plaintext, raw bytes used [, more] | false
// (nothing yet) | nil (EOF) | nil, msg, code. With one = true it returns
// the plaintext of one non-empty frame (message boundaries; empty frames are
// keep-alives and skipped), leaving the next frames in the stream's buffer.
// The data phase over a udx stream, without a Lua string for the raw bytes:
// frames are gathered from the stream's read buffer (consumed as it is
// read) straight into f->out and decrypted there in place, so the plaintext
// of every frame of a call ends up contiguous and goes to Lua in one string
// (one copy in, one out, as a plain stream's read). A string holds at most
// max bytes of plaintext (default 64 KiB), or with one = true one frame when
// that frame alone is larger: a frame that would take it past max is left
// for the next call, so f->out holds at most max or one frame. A frame split at the end
// of the input stays in f->out for the next call. Only after the handshake (no
// handshake frame may come), and with nothing held from feed().
//
// In bytes mode (one = false) a frame whose plaintext is larger than max is
// handed over in max-sized strings, one per call (a third result, true,
// says more is ready): the whole frame was authenticated before the first,
// and no string of it reaches LuaJIT's large-allocation path (a 16 MiB
// frame would otherwise make a 16 MiB string per frame for the GC). No raw
// byte is taken until the last one went.
//
// Layout: the plaintext of this call is out[1, e); a frame being gathered
// sits at out[e - 1] (its tag byte, never written by the in-place open, over
// the last plaintext byte, which is kept in `under` meanwhile), so its
// plaintext lands at out[e]. Between calls a partial frame sits at out[0].
static int
l_framer_feed_udx (lua_State *L) {
  framer_t *f = check_framer(L);
  int closed;
  udx_stream_t *st = ludx_udx_stream_of(L, 2, &closed);
  size_t max = (size_t) ludx_opt_integer(L, 3, "max", 65536, 1, (lua_Integer) 1 << 30);
  int one = lua_toboolean(L, 4);
  if (f->pend_len > 0)
    return luaL_error(L, "framer: feed_udx with bytes held from feed");
  if (f->rd_len > 0) { // the rest of a large frame, already authenticated
    size_t part = push_rest(L, f, max);
    size_t used = 0;
    if (st != NULL && !closed) {
      used = gather_behind(f, st);
      udx_stream_set_read_backlog(st, f->rd_len);
      f->backlog = f->rd_len > 0;
    }
    lua_pushinteger(L, (lua_Integer) used);
    lua_pushboolean(L, f->rd_len > 0);
    ludx_gc_pay(L, part);
    return 3;
  }
  if (f->ss.error != 0) // failed (gather_behind may have met it): every call says so
    return ludx_push_crypto_error(L, f->ss.error);
  if (f->backlog && st != NULL && !closed) { // the rest went some other way (f:rest)
    udx_stream_set_read_backlog(st, 0);
    f->backlog = false;
  }
  int got = 0, eof = 0, rc = 0, full = 0;
  size_t used = 0, e = 1;
  uint8_t under = 0;
  while (st != NULL && !got && !full && rc >= 0 && (f->glen > 0 || e - 1 < max)) {
    const uint8_t *p;
    size_t len;
    int r = udx_stream_read_peek(st, &p, &len);
    if (r == UV_EOF) {
      eof = 1;
      break;
    }
    if (r < 0 || len == 0)
      break;
    const uint8_t *in = p;
    size_t in_len = len;
    while (in_len > 0 && !got && !full) {
      if (f->glen == 0 && e - 1 >= max)
        break;
      uint32_t flen;
      size_t n;
      if (ludx_ss_begun(&f->ss, &flen, &n)) {
        // a data frame begun by feed() (it came with the handshake): gathered
        // here from now on, so it is not held twice (the decoder's frame
        // and plaintext, and its copy here: 3 x 16 MiB at most)
        if (e > 1) {
          full = 1; // the next call takes it, at the start of f->out
          break;
        }
        // room first: a failure leaves the frame with the decoder
        if ((rc = grow_to(&f->out, &f->out_cap, n > 0 ? n : 1, flen)) < 0)
          break;
        const uint8_t *have;
        ludx_ss_take_begun(&f->ss, &flen, &have, &n);
        if (n > 0)
          memcpy(f->out, have, n);
        ludx_ss_trim_read(&f->ss, FRAMER_KEEP);
        under = 0;
        f->glen = flen;
        f->ghave = (uint32_t) n; // < flen: the decoder opens a frame once whole
        continue;
      }
      if (!ludx_ss_direct(&f->ss)) {
        // the id/header frame, or a frame begun by feed(): the decoder's way
        const uint8_t *out;
        size_t out_len;
        rc = ludx_ss_read(&f->ss, &in, &in_len, &out, &out_len);
        if (rc == LUDX_SS_HANDSHAKE)
          rc = LUDX_CRYPTO_ESTATE;
        if (rc <= 0)
          break;
        if ((rc = grow(&f->out, &f->out_cap, e + out_len)) < 0)
          break;
        memcpy(f->out + e, out, out_len);
        e += out_len;
        got = one;
        continue;
      }
      if (f->glen == 0) {
        uint32_t flen;
        rc = ludx_ss_next_length(&f->ss, &in, &in_len, &flen);
        if (rc <= 0)
          break;
        if (e > 1 && e - 1 + (flen - LUDX_SS_ABYTES) > max) {
          // it would take the string past max: the next call's (out[0])
          f->glen = flen;
          f->ghave = 0;
          full = 1;
          break;
        }
        // room only for what arrives: a length prefix alone must not make
        // us allocate the frame (3 bytes would pin 16 MiB per stream)
        if ((rc = grow(&f->out, &f->out_cap, e)) < 0)
          break;
        under = f->out[e - 1];
        f->glen = flen;
        f->ghave = 0;
      }
      size_t take = f->glen - f->ghave < in_len ? f->glen - f->ghave : in_len;
      if ((rc = grow_to(&f->out, &f->out_cap, e - 1 + f->ghave + take, e - 1 + f->glen)) < 0)
        break;
      memcpy(f->out + e - 1 + f->ghave, in, take);
      f->ghave += take;
      in += take;
      in_len -= take;
      if (f->ghave < f->glen)
        break;
      size_t m;
      rc = ludx_ss_open_in_place(&f->ss, f->out + e - 1, f->glen, &m);
      f->glen = f->ghave = 0;
      if (rc < 0)
        break;
      f->out[e - 1] = under;
      e += m;
      got = one && m > 0;
    }
    if (rc < 0)
      break;
    // every byte up to where it stopped was taken (a split frame or prefix
    // is kept in f->out or the decoder)
    udx_stream_read_consume(st, len - in_len);
    used += len - in_len;
  }
  if (rc < 0) {
    f->glen = f->ghave = 0;
    return ludx_push_crypto_error(L, rc);
  }
  // a frame that began in feed() (one that came with the handshake) was
  // finished by the decoder, in its own buffers: once the way is direct
  // they hold nothing and would keep that frame's size for the stream's life
  if (ludx_ss_direct(&f->ss))
    ludx_ss_trim_read(&f->ss, FRAMER_KEEP);
  size_t plain = e - 1;
  if (plain > max && !one && f->glen == 0) {
    // one large frame (a frame past max ends the gathering): its first part
    lua_pushlstring(L, (const char *) f->out + 1, max);
    f->rd_off = 1 + max;
    f->rd_len = plain - max;
    // what is still to hand over counts against the window: a peer that
    // respects it sends no faster than the reader drains
    if (st != NULL) {
      udx_stream_set_read_backlog(st, f->rd_len);
      f->backlog = true;
    }
    lua_pushinteger(L, (lua_Integer) used);
    lua_pushboolean(L, 1);
    ludx_gc_pay(L, max);
    return 3;
  }
  if (plain > 0) {
    if (f->ghave > 0) {
      uint8_t t = f->out[e - 1];
      f->out[e - 1] = under;
      lua_pushlstring(L, (const char *) f->out + 1, plain);
      f->out[e - 1] = t;
      memmove(f->out, f->out + e - 1, f->ghave);
    } else {
      lua_pushlstring(L, (const char *) f->out + 1, plain);
    }
    lua_pushinteger(L, (lua_Integer) used);
    ludx_gc_pay(L, plain);
    return 2;
  }
  if (eof || st == NULL || closed)
    lua_pushnil(L);
  else
    lua_pushboolean(L, 0);
  return 1;
}

typedef struct {
  ludx_ss_t *ss;
  const uint8_t *msg;
  size_t len;
  int rc; // the cipher's code
} seal_call_t;

static int
seal_in_place (void *ctx, uint8_t *buf, size_t len) {
  seal_call_t *c = ctx;
  c->rc = ludx_ss_encrypt(c->ss, c->msg, c->len, buf, len, NULL);
  return c->rc < 0 ? UV_ECANCELED : 0;
}

// f:encrypt_udx(stream, plaintext) -> 1 below the stream's high-water
// mark, 0 above it (the frame is queued either way) | nil, msg, code. One
// frame, encrypted in C and queued on the udx stream with no Lua string.
// A frame of FRAMER_FILL_MIN or more is sealed straight into the send
// queue's memory: no copy of it, and no frame-sized buffer here.
static int
l_framer_encrypt_udx (lua_State *L) {
  framer_t *f = check_framer(L);
  int closed;
  udx_stream_t *st = ludx_udx_stream_of(L, 2, &closed);
  size_t len;
  const char *msg = ludx_check_lstring(L, 3, "data", &len);
  if (st == NULL || closed)
    return ludx_push_error(L, "stream is closed", "EPIPE");
  if (f->job)
    return ludx_push_error(L, "a frame is being sealed", "EBUSY");
  int r;
  if (len <= LUDX_SS_MAX_WRITE && ludx_ss_frame_size(len) >= FRAMER_FILL_MIN) {
    seal_call_t c = {.ss = &f->ss, .msg = (const uint8_t *) msg, .len = len, .rc = 0};
    r = udx_stream_write_fill(st, ludx_ss_frame_size(len), seal_in_place, &c);
    if (c.rc < 0)
      return ludx_push_crypto_error(L, c.rc);
  } else {
    const uint8_t *frame;
    size_t frame_len;
    int rc = ludx_ss_encrypt_frame(&f->ss, (const uint8_t *) msg, len, &frame, &frame_len);
    if (rc < 0)
      return ludx_push_crypto_error(L, rc);
    r = udx_stream_write(st, frame, frame_len);
  }
  if (r < 0)
    return ludx_push_uv_error(L, r);
  lua_pushinteger(L, r);
  return 1;
}

static void
seal_work (uv_work_t *req) {
  seal_job_t *j = req->data;
  ludx_ss_seal_with(&j->st, j->msg, j->len, j->buf);
}

static void
seal_job_free (seal_job_t *j) {
  ludx_wipe(&j->st, sizeof(j->st));
  free(j);
}

static void
seal_done (uv_work_t *req, int status) {
  seal_job_t *j = req->data;
  if (j->f) {
    if (status == 0)
      ludx_ss_seal_end(&j->f->ss, &j->st, j->len);
    j->f->job = NULL;
  }
  // queued even when the framer went (a graceful close): the frame is
  // whole and the next the peer expects
  int r = udx_stream_write_commit(j->run, status == 0);
  ludx_rt_post(j->rt, ev_sealed, j->ref, status == 0 ? r : status, 0);
  seal_job_free(j);
}

// f:seal_udx(stream, plaintext, ref) -> true | nil, msg, code. One frame
// sealed on the thread pool into the stream's send queue, while the loop
// sends what came before it. Then a SEALED event for ref, whose a is what
// the queueing returned (1 below the high-water mark, 0 above, or a
// negative UV_E* code). The caller keeps plaintext until the event; no
// other frame is sealed or written meanwhile (EBUSY).
static int
l_framer_seal_udx (lua_State *L) {
  framer_t *f = check_framer(L);
  int closed;
  udx_stream_t *st = ludx_udx_stream_of(L, 2, &closed);
  size_t len;
  const char *msg = ludx_check_lstring(L, 3, "data", &len);
  uint32_t ref = ludx_check_ref(L, 4);
  if (st == NULL || closed)
    return ludx_push_error(L, "stream is closed", "EPIPE");
  if (f->job)
    return ludx_push_error(L, "a frame is being sealed", "EBUSY");
  seal_job_t *j = calloc(1, sizeof(*j));
  if (j == NULL)
    return ludx_push_uv_error(L, UV_ENOMEM);
  int rc = ludx_ss_seal_begin(&f->ss, len, &j->st);
  if (rc < 0) {
    free(j);
    return ludx_push_crypto_error(L, rc);
  }
  int r = udx_stream_write_begin(st, ludx_ss_frame_size(len), &j->run, &j->buf);
  if (r < 0) {
    seal_job_free(j);
    return ludx_push_uv_error(L, r);
  }
  j->f = f;
  j->msg = (const uint8_t *) msg;
  j->len = len;
  j->rt = ludx_bind_rt(L);
  j->ref = ref;
  j->req.data = j;
  r = uv_queue_work(&j->rt->loop, &j->req, seal_work, seal_done);
  if (r < 0) {
    udx_stream_write_commit(j->run, 0);
    seal_job_free(j);
    return ludx_push_uv_error(L, r);
  }
  f->job = j;
  lua_pushboolean(L, 1);
  return 1;
}

void
ludx_bind_framer_udx (lua_State *L) {
  ev_sealed = ludx_rt_kind("SEALED");
  static const luaL_Reg methods[] = {
      {"feed_udx", l_framer_feed_udx},
      {"encrypt_udx", l_framer_encrypt_udx},
      {"seal_udx", l_framer_seal_udx},
      {"rest", l_framer_rest},
      {"rest_bytes", l_framer_rest_bytes},
      {NULL, NULL},
  };
  luaL_getmetatable(L, FRAMER_MT);
  ludx_set_funcs(L, methods);
  lua_pop(L, 1);
  // the plaintext length from which encrypt_udx seals in place
  // (FRAMER_FILL_MIN): where the caller may seal on the pool instead
  lua_pushinteger(L, FRAMER_FILL_MIN - (lua_Integer) ludx_ss_frame_size(0));
  lua_setfield(L, -2, "FILL_MIN");
}
