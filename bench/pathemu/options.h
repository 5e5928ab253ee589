// Command-line flags of ludx-pathemu, also accepted at run time by the
// "set" command on stdin (link flags only).
#ifndef LUDX_PATHEMU_OPTIONS_H
#define LUDX_PATHEMU_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

#include "link.h"

enum { PATHEMU_AB = 0,
       PATHEMU_BA = 1 };

typedef struct {
  char host[64];                   // bind address of both relay sockets
  int port_a;                      // the port endpoint A sends to
  int port_b;                      // the port endpoint B sends to
  struct sockaddr_storage addr[2]; // fixed endpoint addresses: [0] = A, [1] = B
  bool fixed[2];
  uint64_t seed;
  int batch;
  uint64_t spin_ns; // poll without sleeping this long before a delivery
  bool watch_stdin;
  pathemu_link_config_t link[2]; // [PATHEMU_AB], [PATHEMU_BA]
} pathemu_options_t;

void
pathemu_options_default (pathemu_options_t *o);

// Parses argv (without argv[0]). runtime=true accepts only link flags.
// Returns 0, 1 for --help, or -1 with a message in err.
int
pathemu_options_parse (pathemu_options_t *o, int argc, char **argv, bool runtime, char *err, size_t err_len);

void
pathemu_options_usage (FILE *f);

// "127.0.0.1:4000" or "[::1]:4000" into addr. Returns 0 or -1.
int
pathemu_parse_addr (const char *s, struct sockaddr_storage *addr);

#endif
