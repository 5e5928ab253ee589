#ifndef UDX_TEST_H
#define UDX_TEST_H

// Minimal test runner: each executable holds named cases; ctest runs one case
// per entry (`exe case`), or all of them without an argument. `exe --list`
// prints the names: CMake registers the ctest cases from it
// (cmake/ListedCases.cmake), so a case is added by adding it to cases[].

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*test_fn)(void);

typedef struct {
  const char *name;
  test_fn fn;
} test_case_t;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

#define CHECK_EQ(a, b)                                                                                          \
  do {                                                                                                          \
    long long _a = (long long) (a), _b = (long long) (b);                                                       \
    if (_a != _b) {                                                                                             \
      fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%lld != %lld)\n", __FILE__, __LINE__, #a, #b, _a, _b); \
      exit(1);                                                                                                  \
    }                                                                                                           \
  } while (0)

static inline int
test_main (int argc, char **argv, const test_case_t *cases) {
  if (argc > 1 && strcmp(argv[1], "--list") == 0) {
    for (const test_case_t *c = cases; c->name; c++)
      printf("%s\n", c->name);
    return 0;
  }
  int ran = 0;
  for (const test_case_t *c = cases; c->name; c++) {
    if (argc > 1 && strcmp(argv[1], c->name) != 0)
      continue;
    fprintf(stderr, "-- %s\n", c->name);
    c->fn();
    ran++;
  }
  if (ran == 0) {
    fprintf(stderr, "no test named %s\n", argc > 1 ? argv[1] : "(none)");
    return 1;
  }
  return 0;
}

// FNV-1a 64-bit: compares what was written with what was read.
static inline uint64_t
test_hash (uint64_t h, const uint8_t *p, size_t n) {
  if (h == 0)
    h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

// Deterministic test content: byte i of stream `seed`.
static inline uint8_t
test_byte (uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + (i >> 3) * 0xbf58476d1ce4e5b9ull;
  z ^= z >> 31;
  z *= 0x94d049bb133111ebull;
  z ^= z >> 29;
  return (uint8_t) (z >> (8 * (i & 7)));
}

// The test_hash of total bytes of stream `seed` (test_byte), as a reader
// that checks them keeps it.
static inline uint64_t
test_expect_hash (uint64_t seed, uint64_t total) {
  uint64_t h = 0;
  uint8_t buf[4096];
  for (uint64_t off = 0; off < total; off += sizeof(buf)) {
    size_t n = total - off < sizeof(buf) ? (size_t) (total - off) : sizeof(buf);
    for (size_t i = 0; i < n; i++)
      buf[i] = test_byte(seed, off + i);
    h = test_hash(h, buf, n);
  }
  return h;
}

#endif
