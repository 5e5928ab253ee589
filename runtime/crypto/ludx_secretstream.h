#ifndef LUDX_SECRETSTREAM_H
#define LUDX_SECRETSTREAM_H

/* @hyperswarm/secret-stream framing over any byte stream: 3-byte
 * little-endian length prefixes; handshake frames, then one id/header frame
 * per side, then crypto_secretstream_xchacha20poly1305 data frames. Also the
 * unordered-datagram boxes (secret-stream send/trySend) and hyperdht's
 * holepunch secret.
 *
 * The decoder takes raw bytes in any chunking and hands back one whole
 * frame at a time: handshake frames as they are, data frames only once
 * decrypted and authenticated. It never allocates per frame: it keeps one
 * buffer for frames split across reads and one for plaintext, each grown to
 * the largest frame seen. */

#include <sodium.h>

#include "ludx_crypto_core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define LUDX_SS_PREFIXBYTES       3
#define LUDX_SS_ABYTES            17 /* crypto_secretstream_xchacha20poly1305_ABYTES */
#define LUDX_SS_HEADERBYTES       24
#define LUDX_SS_IDBYTES           32
#define LUDX_SS_IDHEADERBYTES     56 /* stream id || secretstream header */
#define LUDX_SS_HEADER_FRAMEBYTES 59
#define LUDX_SS_MAX_FRAME         0xFFFFFF                             /* 2^24 - 1 */
#define LUDX_SS_MAX_WRITE         (LUDX_SS_MAX_FRAME - LUDX_SS_ABYTES) /* 16777198 */
#define LUDX_SS_MAX_HANDSHAKE     65535                                /* a Noise message */

/* What ludx_ss_read() found. */
enum {
  LUDX_SS_NEED_MORE = 0, /* all input consumed, no complete frame */
  LUDX_SS_HANDSHAKE = 1, /* a raw handshake frame (before ludx_ss_start) */
  LUDX_SS_DATA = 2,      /* a decrypted, non-empty plaintext */
};

typedef struct {
  uint64_t frames_in;     /* data frames decrypted (keep-alives included) */
  uint64_t frames_out;    /* data frames encrypted */
  uint64_t keepalives_in; /* empty frames dropped */
  uint64_t bytes_in;      /* plaintext bytes delivered */
  uint64_t bytes_out;     /* plaintext bytes encrypted */
} ludx_ss_stats_t;

/* Treat as opaque; public only so callers can embed it. */
typedef struct ludx_ss_s {
  crypto_secretstream_xchacha20poly1305_state push;
  crypto_secretstream_xchacha20poly1305_state pull;
  uint8_t rx[LUDX_KEYBYTES];          /* until the remote header arrives */
  uint8_t remote_id[LUDX_SS_IDBYTES]; /* streamId(h, opposite role) */
  int state;                          /* handshake, header, data, failed */
  int error;                          /* sticky, once failed */
  uint8_t prefix_have;                /* length bytes read so far (0..3) */
  uint32_t frame_len;                 /* L of the frame being read */
  uint8_t *buf;                       /* a frame split across reads */
  size_t buf_len, buf_cap;
  uint8_t *plain; /* decrypted plaintext */
  size_t plain_cap;
  uint8_t *out; /* frames built by ludx_ss_encrypt_frame */
  size_t out_cap;
  ludx_ss_stats_t stats;
} ludx_ss_t;

/* streamId(h, role) = H32(msg = NS_INITIATOR or NS_RESPONDER; key = h). */
void
ludx_ss_stream_id (uint8_t out[LUDX_SS_IDBYTES], const uint8_t hash[LUDX_HASHBYTES], bool initiator);

/* Write the 3-byte little-endian length prefix of a frame body of len
 * bytes; LUDX_CRYPTO_ETOOLARGE above LUDX_SS_MAX_FRAME. */
int
ludx_ss_prefix (uint8_t out[LUDX_SS_PREFIXBYTES], size_t len);

/* A fresh decoder/encoder with no keys: it reads handshake frames. */
void
ludx_ss_init (ludx_ss_t *ss);

/* Install the handshake results (Noise, or hyperdht's external handshake)
 * and write our id/header frame (59 bytes) to header_frame. From now on
 * the first frame read must be the peer's id/header frame, then data.
 * Bytes still buffered from before are kept. */
int
ludx_ss_start (ludx_ss_t *ss, bool initiator, const uint8_t tx[LUDX_KEYBYTES], const uint8_t rx[LUDX_KEYBYTES], const uint8_t hash[LUDX_HASHBYTES], uint8_t header_frame[LUDX_SS_HEADER_FRAMEBYTES]);

/* Bytes of the frame carrying len bytes of plaintext: len + 20. */
size_t
ludx_ss_frame_size (size_t len);

/* Encrypt one write (len <= LUDX_SS_MAX_WRITE; 0 is a keep-alive) into one
 * frame at out. */
int
ludx_ss_encrypt (ludx_ss_t *ss, const uint8_t *msg, size_t len, uint8_t *out, size_t out_cap, size_t *out_len);

/* Same, into a buffer the stream owns; *frame stays valid until the next
 * call. */
int
ludx_ss_encrypt_frame (ludx_ss_t *ss, const uint8_t *msg, size_t len, const uint8_t **frame, size_t *frame_len);

/* Sealing a frame off the loop thread. ludx_ss_seal_begin checks ss as
 * ludx_ss_encrypt does and copies its send state into *st; no other frame
 * may be sealed with ss until ludx_ss_seal_end puts *st back (and counts
 * the frame). ludx_ss_seal_with makes the frame (ludx_ss_frame_size(len)
 * bytes at out) from *st alone, so any thread may run it. */
typedef crypto_secretstream_xchacha20poly1305_state ludx_ss_push_t;

int
ludx_ss_seal_begin (const ludx_ss_t *ss, size_t len, ludx_ss_push_t *st);

void
ludx_ss_seal_with (ludx_ss_push_t *st, const uint8_t *msg, size_t len, uint8_t *out);

void
ludx_ss_seal_end (ludx_ss_t *ss, const ludx_ss_push_t *st, size_t len);

/* Consume raw bytes from (*in, *in_len), advancing both, until one frame
 * is complete. Returns LUDX_SS_HANDSHAKE or LUDX_SS_DATA with the frame at
 * (*out, *out_len), valid until the next call; LUDX_SS_NEED_MORE once the
 * input is used up; or a negative error, after which the stream is failed
 * and its keys are wiped. The id/header frame and keep-alives are handled
 * inside. Call again with the advanced input until it returns
 * LUDX_SS_NEED_MORE. */
int
ludx_ss_read (ludx_ss_t *ss, const uint8_t **in, size_t *in_len, const uint8_t **out, size_t *out_len);

/* The data phase without the decoder's buffers, for a caller that gathers
 * frames itself (into the buffer the plaintext is delivered from).
 * ludx_ss_direct: true in the data phase when ludx_ss_read holds no frame
 * body (only then may the two calls below be used; ludx_ss_read until then).
 * ludx_ss_next_length: reads the length prefix from (*in, *in_len), kept
 * across calls when split; 1 with *len (the L bytes of the body, checked
 * before any is buffered), 0 once the input is used up, or a negative error
 * (the stream is failed). ludx_ss_open_in_place: the L-byte body at frame,
 * authenticated and decrypted in place: the plaintext is at frame + 1,
 * *plain_len bytes (0: a keep-alive, counted, to be dropped); nothing is
 * written unless it authenticates; a negative error fails the stream. */
bool
ludx_ss_direct (const ludx_ss_t *ss);
int
ludx_ss_next_length (ludx_ss_t *ss, const uint8_t **in, size_t *in_len, uint32_t *len);
int
ludx_ss_open_in_place (ludx_ss_t *ss, uint8_t *frame, uint32_t len, size_t *plain_len);
/* A data frame ludx_ss_read has begun (its length read, part of its body
 * perhaps buffered) handed to a caller that gathers frames itself, so that
 * the frame is not gathered twice. ludx_ss_begun: there is one, with *len
 * its L and *have_len the bytes of its body so far (either may be NULL).
 * ludx_ss_take_begun: gives the same and the bytes (at *have, valid until
 * the next call on ss; copy them), and leaves the decoder direct; 1, or 0
 * if there was none. */
bool
ludx_ss_begun (const ludx_ss_t *ss, uint32_t *len, size_t *have_len);
int
ludx_ss_take_begun (ludx_ss_t *ss, uint32_t *len, const uint8_t **have, size_t *have_len);
/* 1 once the peer's id/header frame has been accepted. */
bool
ludx_ss_ready (const ludx_ss_t *ss);

const ludx_ss_stats_t *
ludx_ss_stats (const ludx_ss_t *ss);

/* Free every buffer of more than `keep` bytes that holds nothing now: the
 * last built frame (call it once the frame was copied out), the decoder's
 * plaintext (once handed over), its split-frame buffer (when no frame is
 * split). So a stream that carried one 16 MiB frame does not keep 16 MiB
 * for the rest of its life. Plaintext is wiped first, ciphertext is not. */
void
ludx_ss_trim (ludx_ss_t *ss, size_t keep);

/* The read half of ludx_ss_trim: the decoder's buffers only. */
void
ludx_ss_trim_read (ludx_ss_t *ss, size_t keep);

/* Bytes allocated for buffers now (frames, plaintext). */
size_t
ludx_ss_buffer_bytes (const ludx_ss_t *ss);

/* Wipe the keys and free the buffers. */
void
ludx_ss_destroy (ludx_ss_t *ss);

/* The cipher alone, for benchmarks: seals then opens `total` bytes in
 * frames of `frame` bytes with libsodium's secretstream on this thread and
 * returns the thread CPU seconds each side took. 0, LUDX_CRYPTO_ENOMEM or
 * LUDX_CRYPTO_EDECRYPT. */
int
ludx_ss_cipher_rate (size_t frame, uint64_t total, double *push_s, double *pull_s);

/* Unordered datagrams (secret-stream send/trySend): counter(8) ||
 * crypto_secretbox_easy(msg) with nonce = counter || 16 zero bytes; the
 * counter starts at a random value and is incremented before each send. */
#define LUDX_UNORDERED_OVERHEAD 24 /* 8 counter + 16 MAC */

typedef struct {
  uint8_t tx_key[LUDX_KEYBYTES];
  uint8_t rx_key[LUDX_KEYBYTES];
  uint8_t counter[8];
  uint8_t initial[8];
  bool exhausted;
} ludx_unordered_t;

/* Keys: I->R = H32(NS_INITIATOR || NS_SEND; key = h), R->I with
 * NS_RESPONDER. Starts the counter at a random value. */
int
ludx_unordered_init (ludx_unordered_t *u, bool initiator, const uint8_t hash[LUDX_HASHBYTES]);

/* Box msg into out (len + 24 bytes). LUDX_CRYPTO_ENONCE once the counter
 * wraps back to its start. */
int
ludx_unordered_seal (ludx_unordered_t *u, const uint8_t *msg, size_t len, uint8_t *out, size_t out_cap, size_t *out_len);

/* Open a datagram into out (len - 24 bytes). LUDX_CRYPTO_EFRAME when it is
 * shorter than 24 bytes, LUDX_CRYPTO_EDECRYPT when it does not verify; no
 * replay protection (as secret-stream). */
int
ludx_unordered_open (const ludx_unordered_t *u, const uint8_t *in, size_t len, uint8_t *out, size_t out_cap, size_t *out_len);

/* hyperdht: holepunchSecret = H32(msg = NS.PEER_HOLEPUNCH; key = h). */
void
ludx_holepunch_secret (uint8_t out[LUDX_KEYBYTES], const uint8_t hash[LUDX_HASHBYTES]);

#ifdef __cplusplus
}
#endif

#endif
