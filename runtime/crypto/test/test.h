#ifndef LUDX_CRYPTO_TEST_H
#define LUDX_CRYPTO_TEST_H

/* A minimal harness: each program holds named cases; `prog NAME` runs one,
 * `prog` runs all, `prog --list` prints the names (ctest registers one case
 * per name, cmake/ListedCases.cmake). A failed check prints where and exits
 * non-zero. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ludx_crypto.h"

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#define CHECK_RC(expr, want)                                                                                                                                                      \
  do {                                                                                                                                                                            \
    long rc_ = (long) (expr);                                                                                                                                                     \
    long want_ = (long) (want);                                                                                                                                                   \
    if (rc_ != want_) {                                                                                                                                                           \
      fprintf(stderr, "%s:%d: %s returned %ld (%s), wanted %ld (%s)\n", __FILE__, __LINE__, #expr, rc_, ludx_crypto_errname((int) rc_), want_, ludx_crypto_errname((int) want_)); \
      exit(1);                                                                                                                                                                    \
    }                                                                                                                                                                             \
  } while (0)

#define CHECK_OK(expr) CHECK_RC(expr, 0)

#define CHECK_HEX(buf, len, hex) check_hex(__FILE__, __LINE__, #buf, buf, len, hex)

typedef struct {
  const char *name;
  void (*fn)(void);
} test_case_t;

/* Decode hex (spaces ignored) into out; returns the byte count. */
static inline size_t
unhex (uint8_t *out, size_t cap, const char *hex) {
  size_t n = 0;
  int hi = -1;
  for (const char *p = hex; *p; p++) {
    int v;
    if (*p >= '0' && *p <= '9')
      v = *p - '0';
    else if (*p >= 'a' && *p <= 'f')
      v = *p - 'a' + 10;
    else if (*p >= 'A' && *p <= 'F')
      v = *p - 'A' + 10;
    else
      continue;
    if (hi < 0) {
      hi = v;
    } else {
      if (n >= cap) {
        fprintf(stderr, "unhex: buffer too small\n");
        exit(1);
      }
      out[n++] = (uint8_t) (hi << 4 | v);
      hi = -1;
    }
  }
  return n;
}

static inline void
check_hex (const char *file, int line, const char *what, const uint8_t *buf, size_t len, const char *hex) {
  uint8_t want[1024];
  size_t n = unhex(want, sizeof(want), hex);
  if (n != len || memcmp(buf, want, n) != 0) {
    fprintf(stderr, "%s:%d: %s (%zu bytes) differs\n  got  ", file, line, what, len);
    for (size_t i = 0; i < len; i++)
      fprintf(stderr, "%02x", buf[i]);
    fprintf(stderr, "\n  want %s\n", hex);
    exit(1);
  }
}

/* Deterministic generator for chunkings and garbage (xorshift64*). */
static inline uint64_t
test_rand (uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1DULL;
}

static inline void
test_fill (uint64_t *s, uint8_t *buf, size_t len) {
  for (size_t i = 0; i < len; i++)
    buf[i] = (uint8_t) test_rand(s);
}

static inline void
seed_keypair (ludx_keypair_t *kp, uint8_t n) {
  uint8_t seed[32];
  memset(seed, n, sizeof(seed));
  ludx_keypair_seed(kp, seed);
}

static inline int
test_main (int argc, char **argv, const test_case_t *cases, size_t n) {
  if (argc > 1 && strcmp(argv[1], "--list") == 0) {
    for (size_t i = 0; i < n; i++)
      printf("%s\n", cases[i].name);
    return 0;
  }
  if (ludx_crypto_init() < 0)
    return 1;
  int ran = 0;
  for (size_t i = 0; i < n; i++) {
    if (argc > 1 && strcmp(argv[1], cases[i].name) != 0)
      continue;
    cases[i].fn();
    printf("ok %s\n", cases[i].name);
    ran++;
  }
  if (ran == 0) {
    fprintf(stderr, "no case named %s\n", argc > 1 ? argv[1] : "(none)");
    return 1;
  }
  return 0;
}

#define TEST_MAIN(...)                                                        \
  int main(int argc, char **argv) {                                           \
    static const test_case_t cases_[] = {__VA_ARGS__};                        \
    return test_main(argc, argv, cases_, sizeof(cases_) / sizeof(cases_[0])); \
  }

#endif
