// The runtime tests' check: on failure, says where and what, and returns 1
// from the function it is in (main, or a child's body).
#ifndef LUDX_RUNTIME_TEST_CHECK_H
#define LUDX_RUNTIME_TEST_CHECK_H

#include <stdio.h>

#define CHECK(c)                                                            \
  do {                                                                      \
    if (!(c)) {                                                             \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #c); \
      return 1;                                                             \
    }                                                                       \
  } while (0)

#endif
