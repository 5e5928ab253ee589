/* Byte-for-byte vectors from the reference JavaScript (hyperswarm-protocol
 * Appendix V1-V4 and the namespace table). Key seed n = 32 bytes of n. */

#include "test.h"

#define PK1 "8a88e3dd7409f195fd52db2d3cba5d72ca6709bf1d94121bf3748801b40f6f5c"
#define PK2 "8139770ea87d175f56a35466c34c7ecccb8d8a91b4ee37a25df60f5b8fc9b394"

/* V2a: Noise XX, curve-ed, empty prologue, I = seed 1, R = seed 2,
 * ephemerals seed 3 / seed 4, empty payloads. */
#define XX_H_INIT "ccb02d59b57b48c5bc64fafb7fc70680eb907d6830a9b039c39136733f44bbd6ebcddac9b202ff6bf777f1b1c8cb8cb964038751f8f11d8adb8ec976fea28f18"
#define XX_MSG1   "ed4928c628d1c2c6eae90338905995612959273a5c63f93636c14614ac8737d1"
#define XX_MSG2   "ca93ac1705187071d67b83c7ff0efe8108e8ec4530575d7726879333dbdabe7c 8924380c5066a7dcffff1174cebcbfefc17dafd675f6dc2e688de867ff96c431a1fcb7f80997fba29d5bbc64a50e8d74 e82bc092a89c62eacaf68db17bb5d0b5"
#define XX_MSG3   "585b6e8320c9dfc6764d48e242b912333244a85ae8769c90ee632f1d3bf6945d6d4729ee9c716f0f82946ce191158c48 0d53f508585c93bb66354bbee6b8bdad"
#define XX_HASH   "aa42bcea44d843e3803e549191ae7eac847a85dccf21ef3918a7cf228d87b7889b194cdb190b8b2cf82daf543e71e86871532b84ba1d7982489eb3040dcfc412"
#define XX_I_TX   "36e72ba85cd0a2b5e7c9f44704a1757d7230c30dd39736e46f2190fcd1300c13"
#define XX_I_RX   "29c4a931005b47aaf766f5ec7a119810eb15399b8612e79071f77447826dee17"
#define XX_ID_I   "a1d1ba79814a026a75d3d0d86df2d767c48c1a62a59d9e5d47876ab9b0867673"
#define XX_ID_R   "87964fe510a0eef9766102bc05eb51bd18d4baf59ec0fe2e51fa323b19101cf6"

static void
namespaces (void) {
  static const struct {
    const char *name;
    uint8_t i;
    const char *hex;
  } table[] = {
      {"hyperswarm/secret-stream", 0, "a931a0155b5c09e6d28628236af83c4b8a6af9af60986edeede9dc5d63192bf7"},
      {"hyperswarm/secret-stream", 1, "742c9d833d430af4c48a8705e91631eecf295442bbca18996e597097723b1061"},
      {"hyperswarm/secret-stream", 2, "aab97d097471f56651b0460ffc8aaa7d3342f7377597d60b925a1dac689adcbf"},
      {"hyperswarm/dht", 4, "36386adddf9f6fd60db83a6f42fc159d1146aa8644037664230aaa1f0179d497"},
      {"hyperswarm/dht", 5, "ded293cd93fb395e756ecf5fff426529e72c36eacc22e5ed944d9099a2561e32"},
      {"hyperswarm/dht", 6, "668e823edd5ce7f5338d68bf1161f4a3c28ce437ee2ab49efd30d99366039b1e"},
      {"hyperswarm/dht", 0, "14d6d4b49214ab1033ed204976caa258bae9e1e8543b9ad1fd996a910b0c4e3a"},
      {"hyperswarm/dht", 1, "f1191cd5e67b10b54a507033280ed1ff0e12278268d5679c8f93d417210d168b"},
      {"hyperswarm/dht", 10, "6b8a2a8623f28c6c02a1e22abe515ce31cafd9af61d4b69970639aa7eb96a8d5"},
  };
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
    uint8_t ns[32];
    ludx_ns(ns, table[i].name, table[i].i);
    CHECK_HEX(ns, 32, table[i].hex);
  }

  /* Intermediate values: H32(name), checked by their ends. */
  uint8_t h[32];
  CHECK_OK(ludx_blake2b(h, 32, (const uint8_t *) "hyperswarm/secret-stream", 24, NULL, 0));
  CHECK(h[0] == 0x03 && h[1] == 0xb0 && h[2] == 0x61 && h[3] == 0xa9 && h[30] == 0xc1 && h[31] == 0x55);
  CHECK_OK(ludx_blake2b(h, 32, (const uint8_t *) "hyperswarm/dht", 14, NULL, 0));
  CHECK(h[0] == 0xd7 && h[1] == 0x0d && h[2] == 0x90 && h[3] == 0xf7 && h[30] == 0xcb && h[31] == 0x90);
}

static void
keypairs (void) {
  static const char *pks[] = {PK1, PK2, "ed4928c628d1c2c6eae90338905995612959273a5c63f93636c14614ac8737d1", "ca93ac1705187071d67b83c7ff0efe8108e8ec4530575d7726879333dbdabe7c"};
  for (int i = 0; i < 4; i++) {
    ludx_keypair_t kp;
    seed_keypair(&kp, (uint8_t) (i + 1));
    CHECK_HEX(kp.public_key, 32, pks[i]);
    CHECK(kp.secret_key[0] == i + 1 && memcmp(kp.secret_key + 32, kp.public_key, 32) == 0);
  }
  ludx_keypair_t a, b;
  CHECK_OK(ludx_keypair_random(&a));
  CHECK_OK(ludx_keypair_random(&b));
  CHECK(memcmp(a.public_key, b.public_key, 32) != 0);
  CHECK_RC(ludx_keypair_seed(NULL, a.secret_key), LUDX_CRYPTO_EINVAL);
}

static void
v1_dh (void) {
  ludx_keypair_t k1, k2;
  seed_keypair(&k1, 1);
  seed_keypair(&k2, 2);
  uint8_t a[32], b[32];
  CHECK_OK(ludx_dh(a, k1.secret_key, k2.public_key));
  CHECK_OK(ludx_dh(b, k2.secret_key, k1.public_key));
  CHECK_HEX(a, 32, "5612509e82825296cbaaae306ffe1088cbbe200de8ba23dad06f67e607f861df");
  CHECK_HEX(b, 32, "5612509e82825296cbaaae306ffe1088cbbe200de8ba23dad06f67e607f861df");

  /* X25519 on converted keys gives 4181d730...220b, which is not used. */
  uint8_t xs[32], xp[32], x[32];
  crypto_sign_ed25519_sk_to_curve25519(xs, k1.secret_key);
  CHECK(crypto_sign_ed25519_pk_to_curve25519(xp, k2.public_key) == 0);
  CHECK(crypto_scalarmult(x, xs, xp) == 0);
  CHECK(x[0] == 0x41 && x[1] == 0x81 && x[2] == 0xd7 && x[3] == 0x30 && x[30] == 0x22 && x[31] == 0x0b);
  CHECK(memcmp(x, a, 32) != 0);
}

static void
xx_handshake (ludx_noise_t *i, ludx_noise_t *r) {
  ludx_keypair_t s1, s2, e3, e4;
  seed_keypair(&s1, 1);
  seed_keypair(&s2, 2);
  seed_keypair(&e3, 3);
  seed_keypair(&e4, 4);
  CHECK_OK(ludx_noise_init(i, LUDX_NOISE_XX, true, &s1, NULL, 0, NULL));
  CHECK_OK(ludx_noise_init(r, LUDX_NOISE_XX, false, &s2, NULL, 0, NULL));
  CHECK_OK(ludx_noise_set_ephemeral(i, &e3));
  CHECK_OK(ludx_noise_set_ephemeral(r, &e4));
  CHECK_HEX(ludx_noise_hash(i), 64, XX_H_INIT);
  CHECK_HEX(ludx_noise_hash(r), 64, XX_H_INIT);

  uint8_t msg[256];
  size_t len, plen;
  CHECK_RC(ludx_noise_status(i), LUDX_NOISE_SEND);
  CHECK_RC(ludx_noise_status(r), LUDX_NOISE_RECV);
  CHECK_RC(ludx_noise_send_size(i, 0), 32);
  CHECK_OK(ludx_noise_send(i, NULL, 0, msg, sizeof(msg), &len));
  CHECK_HEX(msg, len, XX_MSG1);
  CHECK_RC(ludx_noise_recv_size(r, len), 0);
  CHECK_OK(ludx_noise_recv(r, msg, len, NULL, 0, &plen));
  CHECK(plen == 0);

  CHECK_RC(ludx_noise_send_size(r, 0), 96);
  CHECK_OK(ludx_noise_send(r, NULL, 0, msg, sizeof(msg), &len));
  CHECK_HEX(msg, len, XX_MSG2);
  CHECK_OK(ludx_noise_recv(i, msg, len, NULL, 0, &plen));

  CHECK_RC(ludx_noise_send_size(i, 0), 64);
  CHECK_OK(ludx_noise_send(i, NULL, 0, msg, sizeof(msg), &len));
  CHECK_HEX(msg, len, XX_MSG3);
  CHECK_RC(ludx_noise_status(i), LUDX_NOISE_DONE);
  CHECK_OK(ludx_noise_recv(r, msg, len, NULL, 0, &plen));
  CHECK_RC(ludx_noise_status(r), LUDX_NOISE_DONE);
}

static void
v2a_xx (void) {
  ludx_noise_t i, r;
  xx_handshake(&i, &r);

  ludx_noise_result_t ri, rr;
  CHECK_OK(ludx_noise_result(&i, &ri));
  CHECK_OK(ludx_noise_result(&r, &rr));
  CHECK_HEX(ri.hash, 64, XX_HASH);
  CHECK_HEX(rr.hash, 64, XX_HASH);
  CHECK_HEX(ri.tx, 32, XX_I_TX);
  CHECK_HEX(rr.rx, 32, XX_I_TX);
  CHECK_HEX(ri.rx, 32, XX_I_RX);
  CHECK_HEX(rr.tx, 32, XX_I_RX);
  CHECK_HEX(ri.remote_public_key, 32, PK2);
  CHECK_HEX(rr.remote_public_key, 32, PK1);
  CHECK_HEX(ri.public_key, 32, PK1);
  CHECK_HEX(rr.public_key, 32, PK2);

  uint8_t id[32];
  ludx_ss_stream_id(id, ri.hash, true);
  CHECK_HEX(id, 32, XX_ID_I);
  ludx_ss_stream_id(id, ri.hash, false);
  CHECK_HEX(id, 32, XX_ID_R);

  ludx_unordered_t ui, ur;
  CHECK_OK(ludx_unordered_init(&ui, true, ri.hash));
  CHECK_OK(ludx_unordered_init(&ur, false, rr.hash));
  CHECK_HEX(ui.tx_key, 32, "ce10a1e3cc0ad57bdcb2e7b64917df0259b27032784b4dcf246f5a728d327d0f");
  CHECK_HEX(ui.rx_key, 32, "09e50ea37afaafacfc2bf3239cbfd18502269676975b793c08f7945b7d02e8ff");
  CHECK(memcmp(ui.tx_key, ur.rx_key, 32) == 0 && memcmp(ui.rx_key, ur.tx_key, 32) == 0);

  /* A datagram both ways. */
  uint8_t box[64], plain[64];
  size_t blen, plen;
  CHECK_OK(ludx_unordered_seal(&ui, (const uint8_t *) "ping", 4, box, sizeof(box), &blen));
  CHECK(blen == 28);
  CHECK_OK(ludx_unordered_open(&ur, box, blen, plain, sizeof(plain), &plen));
  CHECK(plen == 4 && memcmp(plain, "ping", 4) == 0);
  CHECK_OK(ludx_unordered_seal(&ur, NULL, 0, box, sizeof(box), &blen));
  CHECK_OK(ludx_unordered_open(&ui, box, blen, plain, sizeof(plain), &plen));
  CHECK(plen == 0);

  /* Nonce: counter(8) || 16 zero bytes; the counter went up by one. */
  uint8_t nonce[24] = {0}, opened[4];
  memcpy(nonce, box, 8);
  CHECK(crypto_secretbox_open_easy(opened, box + 8, blen - 8, nonce, ui.rx_key) == 0);
  ludx_noise_wipe(&i);
  ludx_noise_wipe(&r);
}

static void
v2b_ik (void) {
  ludx_keypair_t s1, s2, e3, e4;
  seed_keypair(&s1, 1);
  seed_keypair(&s2, 2);
  seed_keypair(&e3, 3);
  seed_keypair(&e4, 4);
  uint8_t prologue[32], cpay[20], spay[20];
  ludx_ns(prologue, "hyperswarm/dht", 0); /* NS.PEER_HANDSHAKE */
  unhex(cpay, sizeof(cpay), "011a0001017f000001419c0100fe443322110001");
  unhex(spay, sizeof(spay), "011a0001017f000001429c0100fe887766550001");

  ludx_noise_t i, r;
  CHECK_OK(ludx_noise_init(&i, LUDX_NOISE_IK, true, &s1, prologue, 32, s2.public_key));
  CHECK_OK(ludx_noise_init(&r, LUDX_NOISE_IK, false, &s2, prologue, 32, NULL));
  CHECK_OK(ludx_noise_set_ephemeral(&i, &e3));
  CHECK_OK(ludx_noise_set_ephemeral(&r, &e4));
  const char *h_init = "c790644db568c8ae7f0132299e4720b8181e1ad03317d9b245ebecdc01d27c378963e8709830f7f50cdffbd297cef921bf5d7a290d282cc055252457b616e708";
  CHECK_HEX(ludx_noise_hash(&i), 64, h_init);
  CHECK_HEX(ludx_noise_hash(&r), 64, h_init);

  uint8_t msg[256], pay[64];
  size_t len, plen;
  CHECK_RC(ludx_noise_send_size(&i, 20), 116);
  CHECK_OK(ludx_noise_send(&i, cpay, 20, msg, sizeof(msg), &len));
  CHECK_HEX(msg, len, "ed4928c628d1c2c6eae90338905995612959273a5c63f93636c14614ac8737d1 605c88a9067c5f85bd7499907d5c869548dd90bed5350bb2e7cb47efe61f60bc315838e49205f95b5a618d7c8c212eeb f0fd5de81ac21376e31d91dd5c45e3c7b2c9804e15965f95e776c2f60af087d18f4760cc");
  CHECK_RC(ludx_noise_recv_size(&r, len), 20);
  CHECK_RC(ludx_noise_recv(&r, msg, len, pay, 19, &plen), LUDX_CRYPTO_ENOBUFS); /* not fatal */
  CHECK_OK(ludx_noise_recv(&r, msg, len, pay, sizeof(pay), &plen));
  CHECK(plen == 20 && memcmp(pay, cpay, 20) == 0);

  CHECK_RC(ludx_noise_send_size(&r, 20), 68);
  CHECK_OK(ludx_noise_send(&r, spay, 20, msg, sizeof(msg), &len));
  CHECK_HEX(msg, len, "ca93ac1705187071d67b83c7ff0efe8108e8ec4530575d7726879333dbdabe7c f6c2821870b51f7d0cea6b064e8ceeb3cffe66540717c73e5e107d81d9b54669472be99f");
  CHECK_RC(ludx_noise_status(&r), LUDX_NOISE_DONE);
  CHECK_OK(ludx_noise_recv(&i, msg, len, pay, sizeof(pay), &plen));
  CHECK(plen == 20 && memcmp(pay, spay, 20) == 0);
  CHECK_RC(ludx_noise_status(&i), LUDX_NOISE_DONE);

  ludx_noise_result_t ri, rr;
  CHECK_OK(ludx_noise_result(&i, &ri));
  CHECK_OK(ludx_noise_result(&r, &rr));
  const char *hash = "62fd63ee2ddae4918aae583b95c4db9a7654473729133bac0f83ddbc0960714f984c5edf2ba3c4f1a74584da706c03b03c7a57f37731228b328dd0840631d758";
  CHECK_HEX(ri.hash, 64, hash);
  CHECK_HEX(rr.hash, 64, hash);
  CHECK_HEX(ri.tx, 32, "cc00d99bd3a15a6779df38fd42fd25a84d73264023e7c1da95cf3bcbdce9c210");
  CHECK_HEX(rr.rx, 32, "cc00d99bd3a15a6779df38fd42fd25a84d73264023e7c1da95cf3bcbdce9c210");
  CHECK_HEX(ri.rx, 32, "78dd48ecef5d11fd953197694a8ee2d9f8d86d49d56d856e3dd7c8e78047826b");
  CHECK_HEX(rr.tx, 32, "78dd48ecef5d11fd953197694a8ee2d9f8d86d49d56d856e3dd7c8e78047826b");
  CHECK_HEX(rr.remote_public_key, 32, PK1);
  CHECK_HEX(ri.remote_public_key, 32, PK2);

  uint8_t out[32];
  ludx_ss_stream_id(out, ri.hash, true);
  CHECK_HEX(out, 32, "84f68294db0b39ca8be5147bcf3b3ed7a3a712f12cea466bb1d713b660298763");
  ludx_ss_stream_id(out, ri.hash, false);
  CHECK_HEX(out, 32, "6c7446df7c73c9b8d2c5e26480566ae88e23a5dd2107bd09597dd0d8e843579c");
  ludx_holepunch_secret(out, ri.hash);
  CHECK_HEX(out, 32, "b24ce7058997ff29fc8d47b6566dfdbba6d816eae434dab632a9c9c819c3e820");
}

/* Feed a captured byte stream in chunks of `step` bytes (0: all at once);
 * collect handshake frames and plaintexts into `log` as "H<len>:" and
 * "D<text>;". `start` installs the keys after `handshakes` frames. */
static void
read_stream (const uint8_t *wire, size_t wire_len, size_t step, size_t handshakes, bool initiator, const char *tx, const char *rx, char *log, size_t log_cap) {
  uint8_t k_tx[32], k_rx[32], hash[64], header[LUDX_SS_HEADER_FRAMEBYTES];
  unhex(k_tx, 32, tx);
  unhex(k_rx, 32, rx);
  unhex(hash, 64, XX_HASH);

  ludx_ss_t ss;
  ludx_ss_init(&ss);
  size_t seen = 0, off = 0;
  log[0] = 0;
  while (off < wire_len) {
    size_t n = step == 0 || wire_len - off < step ? wire_len - off : step;
    const uint8_t *in = wire + off;
    size_t in_len = n;
    off += n;
    for (;;) {
      const uint8_t *out;
      size_t out_len;
      int rc = ludx_ss_read(&ss, &in, &in_len, &out, &out_len);
      CHECK(rc >= 0);
      if (rc == LUDX_SS_NEED_MORE)
        break;
      size_t used = strlen(log);
      if (rc == LUDX_SS_HANDSHAKE) {
        snprintf(log + used, log_cap - used, "H%zu:", out_len);
        if (++seen == handshakes)
          CHECK_OK(ludx_ss_start(&ss, initiator, k_tx, k_rx, hash, header));
      } else {
        snprintf(log + used, log_cap - used, "D%.*s;", (int) out_len, (const char *) out);
      }
    }
    CHECK(in_len == 0);
  }
  CHECK(ludx_ss_ready(&ss));
  ludx_ss_destroy(&ss);
}

static void
v3_transcript (void) {
  /* I -> R: msg1, msg3, id/header, "hello", keep-alive. */
  uint8_t i_to_r[512], r_to_i[512];
  size_t a = unhex(i_to_r, sizeof(i_to_r), "200000" XX_MSG1 "400000" XX_MSG3 "380000" XX_ID_I "1e330d7d7f70376be10735b9ca24175a82265b46c603d4ec"
                                           "1600001001d3f70edcd14cbad1e1eb5696d7544bb8be035984"
                                           "1100007afb00e1f7246b14689feec9528028bf05");
  size_t b = unhex(r_to_i, sizeof(r_to_i), "600000" XX_MSG2 "380000" XX_ID_R "753cef8803a7a431775523b8e4d94c88bb89b2c67f11d47a"
                                           "1600000e6464075d9a4d51ec9072d808888f8c257979bcf729");
  CHECK(a == 35 + 67 + 59 + 25 + 20 && b == 99 + 59 + 25);

  static const size_t steps[] = {0, 1, 2, 3, 5, 7, 19, 58, 59, 60};
  char log[256];
  for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
    /* The responder reads what the initiator wrote, with R's keys. */
    read_stream(i_to_r, a, steps[s], 2, false, XX_I_RX, XX_I_TX, log, sizeof(log));
    CHECK(strcmp(log, "H32:H64:Dhello;") == 0);
    read_stream(r_to_i, b, steps[s], 1, true, XX_I_TX, XX_I_RX, log, sizeof(log));
    CHECK(strcmp(log, "H96:Dworld;") == 0);
  }

  /* The handshake frames carry the V2a messages. */
  ludx_ss_t ss;
  ludx_ss_init(&ss);
  const uint8_t *in = i_to_r, *out;
  size_t in_len = a, out_len;
  CHECK_RC(ludx_ss_read(&ss, &in, &in_len, &out, &out_len), LUDX_SS_HANDSHAKE);
  CHECK_HEX(out, out_len, XX_MSG1);
  CHECK_RC(ludx_ss_read(&ss, &in, &in_len, &out, &out_len), LUDX_SS_HANDSHAKE);
  CHECK_HEX(out, out_len, XX_MSG3);
  ludx_ss_destroy(&ss);
}

static void
v4_signatures (void) {
  ludx_keypair_t k1;
  seed_keypair(&k1, 1);

  uint8_t addr[6] = {0x7f, 0, 0, 1, 0x4a, 0xc2}; /* 127.0.0.1:49738 */
  uint8_t node_id[32], target[32], token[32], peer[33];
  CHECK_OK(ludx_blake2b(node_id, 32, addr, 6, NULL, 0));
  CHECK(node_id[0] == 0xea && node_id[1] == 0x50 && node_id[2] == 0xf5 && node_id[3] == 0x56 && node_id[30] == 0xac && node_id[31] == 0x6c);
  memset(target, 0x07, 32);
  memset(token, 0x11, 32);
  memcpy(peer, k1.public_key, 32);
  peer[32] = 0; /* relayAddresses: empty array */

  uint8_t signable[64], sig[64];
  ludx_buf_t parts[5] = {{target, 32}, {node_id, 32}, {token, 32}, {peer, 33}, {NULL, 0}};
  CHECK_OK(ludx_blake2b_batch(signable + 32, 32, parts, 5, NULL, 0));
  CHECK_HEX(signable + 32, 32, "0cc5f6e19a349e2e77c35d9400818cc4c2da3381a459ecdda54db32da594240e");

  ludx_ns(signable, "hyperswarm/dht", 4); /* NS.ANNOUNCE */
  CHECK_OK(ludx_sign(sig, signable, 64, k1.secret_key));
  CHECK_HEX(sig, 64, "f7983c89f0d9639b850789b969a563361d361368d5699264301a31e79dd7f69be7f8828efb46738cfe5856c805d73f96794ba8f782f896320f00052a66377405");
  CHECK_OK(ludx_verify(sig, signable, 64, k1.public_key));
  signable[0] ^= 1;
  CHECK_RC(ludx_verify(sig, signable, 64, k1.public_key), LUDX_CRYPTO_ESIGNATURE);

  ludx_ns(signable, "hyperswarm/dht", 5); /* NS.UNANNOUNCE */
  CHECK_OK(ludx_sign(sig, signable, 64, k1.secret_key));
  CHECK_HEX(sig, 64, "15d8a0916bd5ea886a92b078377d74086d0dca7c572141d3c02cfcaf10c6315c55b128531c825faae33ce39306588f54c5a175105b1fd03040b45a59de3bd307");

  uint8_t mutable_signable[7];
  unhex(mutable_signable, 7, "050568656c6c6f"); /* seq 5, value "hello" */
  ludx_ns(signable, "hyperswarm/dht", 6);       /* NS.MUTABLE_PUT */
  CHECK_OK(ludx_blake2b(signable + 32, 32, mutable_signable, 7, NULL, 0));
  CHECK_OK(ludx_sign(sig, signable, 64, k1.secret_key));
  CHECK_HEX(sig, 64, "563f636d6d357642b088e989ccaf880f196dc28dca9e6bc00ff9612ce20eeef535aed98997424eb6caabd42545691df10e1ab9132748c1012c963869db33e406");
  CHECK_OK(ludx_verify(sig, signable, 64, k1.public_key));

  uint8_t h[32];
  CHECK_OK(ludx_blake2b(h, 32, k1.public_key, 32, NULL, 0));
  CHECK_HEX(h, 32, "c5e21ab1c9f6022d81c3b25e3436cb7f1df77f9652ae3e1310c28e621dd87b4c");
}

static void
hmac_hkdf (void) {
  /* A key longer than the 128-byte block acts as its BLAKE2b-512. */
  uint8_t long_key[200], hashed[64], a[64], b[64];
  memset(long_key, 0xab, sizeof(long_key));
  CHECK_OK(ludx_blake2b(hashed, 64, long_key, sizeof(long_key), NULL, 0));
  ludx_buf_t msg = {(const uint8_t *) "message", 7};
  ludx_hmac_blake2b(a, long_key, sizeof(long_key), &msg, 1);
  ludx_hmac_blake2b(b, hashed, 64, &msg, 1);
  CHECK(memcmp(a, b, 64) == 0);

  /* Splitting the message across parts changes nothing. */
  ludx_buf_t split[3] = {{(const uint8_t *) "mes", 3}, {NULL, 0}, {(const uint8_t *) "sage", 4}};
  ludx_hmac_blake2b(b, hashed, 64, split, 3);
  CHECK(memcmp(a, b, 64) == 0);

  /* HMAC by hand: H64((K ^ 0x5c) || H64((K ^ 0x36) || m)), K = "key" padded. */
  uint8_t pad[128 + 64], inner[64];
  memset(pad, 0, 128);
  memcpy(pad, "key", 3);
  for (int i = 0; i < 128; i++)
    pad[i] ^= 0x36;
  memcpy(pad + 128, "message", 7);
  CHECK_OK(ludx_blake2b(inner, 64, pad, 128 + 7, NULL, 0));
  memset(pad, 0, 128);
  memcpy(pad, "key", 3);
  for (int i = 0; i < 128; i++)
    pad[i] ^= 0x5c;
  memcpy(pad + 128, inner, 64);
  CHECK_OK(ludx_blake2b(b, 64, pad, 128 + 64, NULL, 0));
  ludx_hmac_blake2b(a, (const uint8_t *) "key", 3, &msg, 1);
  CHECK(memcmp(a, b, 64) == 0);

  /* HKDF: T1 = HMAC(prk, 0x01), T2 = HMAC(prk, T1 || 0x02); prefixes agree. */
  uint8_t salt[64] = {1}, ikm[32] = {2}, out[130], prk[64], t[64], t1[64];
  CHECK_OK(ludx_hkdf(out, sizeof(out), salt, 64, ikm, 32, NULL, 0));
  ludx_buf_t in = {ikm, 32};
  ludx_hmac_blake2b(prk, salt, 64, &in, 1);
  uint8_t one = 1, two = 2, three = 3;
  ludx_buf_t p1 = {&one, 1};
  ludx_hmac_blake2b(t1, prk, 64, &p1, 1);
  CHECK(memcmp(out, t1, 64) == 0);
  ludx_buf_t p2[2] = {{t1, 64}, {&two, 1}};
  ludx_hmac_blake2b(t, prk, 64, p2, 2);
  CHECK(memcmp(out + 64, t, 64) == 0);
  ludx_buf_t p3[2] = {{t, 64}, {&three, 1}};
  ludx_hmac_blake2b(t1, prk, 64, p3, 2);
  CHECK(memcmp(out + 128, t1, 2) == 0);
  CHECK_RC(ludx_hkdf(out, 255 * 64 + 1, salt, 64, ikm, 32, NULL, 0), LUDX_CRYPTO_EINVAL);

  /* BLAKE2b argument checks. */
  CHECK_RC(ludx_blake2b(out, 65, ikm, 32, NULL, 0), LUDX_CRYPTO_EINVAL);
  CHECK_RC(ludx_blake2b(out, 32, ikm, 32, ikm, 8), LUDX_CRYPTO_EINVAL);
  CHECK_OK(ludx_blake2b(out, 32, NULL, 0, salt, 64));
}

static void
errors (void) {
  static const int codes[] = {LUDX_CRYPTO_EINVAL, LUDX_CRYPTO_ESTATE, LUDX_CRYPTO_ENOMEM, LUDX_CRYPTO_ENOBUFS, LUDX_CRYPTO_EHANDSHAKE, LUDX_CRYPTO_EBADKEY, LUDX_CRYPTO_EREMOTEKEY, LUDX_CRYPTO_EHEADER, LUDX_CRYPTO_ESTREAMID, LUDX_CRYPTO_EFRAME, LUDX_CRYPTO_ETOOLARGE, LUDX_CRYPTO_EDECRYPT, LUDX_CRYPTO_ENONCE, LUDX_CRYPTO_ESIGNATURE, LUDX_CRYPTO_ESODIUM};
  size_t n = sizeof(codes) / sizeof(codes[0]);
  for (size_t i = 0; i < n; i++) {
    CHECK(strcmp(ludx_crypto_errname(codes[i]), "EUNKNOWN") != 0);
    CHECK(ludx_crypto_errname(codes[i])[0] == 'E');
    for (size_t j = 0; j < i; j++) {
      CHECK(codes[i] != codes[j]);
      CHECK(strcmp(ludx_crypto_errname(codes[i]), ludx_crypto_errname(codes[j])) != 0);
      CHECK(strcmp(ludx_crypto_strerror(codes[i]), ludx_crypto_strerror(codes[j])) != 0);
    }
  }
  CHECK(strcmp(ludx_crypto_errname(0), "EUNKNOWN") == 0);
  CHECK(strcmp(ludx_crypto_strerror(-1), "unknown error") == 0);
  CHECK(strcmp(ludx_crypto_strerror(LUDX_CRYPTO_EHANDSHAKE), "Noise handshake failed") == 0);
}

TEST_MAIN({"namespaces", namespaces}, {"keypairs", keypairs}, {"v1_dh", v1_dh}, {"v2a_xx", v2a_xx}, {"v2b_ik", v2b_ik}, {"v3_transcript", v3_transcript}, {"v4_signatures", v4_signatures}, {"hmac_hkdf", hmac_hkdf}, {"errors", errors})
