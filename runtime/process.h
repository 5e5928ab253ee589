#ifndef LUDX_PROCESS_H
#define LUDX_PROCESS_H

#include <stddef.h>
#include <stdint.h>

#include "rt.h"

// Child processes with piped (or pseudo-terminal) stdio. Output is buffered in
// C and announced with one LUDX_EV_PROC_OUTPUT per empty-to-non-empty change;
// Lua takes all of it at once. Exit is LUDX_EV_PROC_EXIT.
typedef struct ludx_proc_s ludx_proc_t;

enum {
  LUDX_PROC_STDOUT = 1,
  LUDX_PROC_STDERR = 2,
};

enum {
  LUDX_PROC_STDERR_PIPE = 0,    // captured on its own
  LUDX_PROC_STDERR_INHERIT = 1, // passed through to our stderr
};

typedef struct ludx_proc_opts_s {
  const char *file;
  char **args; // argv, NULL-terminated; args[0] is the program name
  char **env;  // NULL-terminated "K=V" list, or NULL to inherit
  const char *cwd;
  int pty; // stdin, stdout and stderr on one pseudo-terminal
  int rows, cols;
  int stderr_mode;
} ludx_proc_opts_t;

int
ludx_proc_spawn (ludx_rt_t *rt, const ludx_proc_opts_t *opts, uint32_t ref, ludx_proc_t **out);

// Queues bytes for the child's stdin. 0 or a negative UV_E*.
int
ludx_proc_write (ludx_proc_t *p, const char *data, size_t len);

// Closes the child's stdin (our peers exit when it closes).
int
ludx_proc_close_stdin (ludx_proc_t *p);

// Buffered output of one stream; consume() drops the first n bytes.
const char *
ludx_proc_output (ludx_proc_t *p, int which, size_t *len, int *eof);

void
ludx_proc_consume (ludx_proc_t *p, int which, size_t n);

int
ludx_proc_kill (ludx_proc_t *p, int signum);

int
ludx_proc_pid (ludx_proc_t *p);

// 1 when the child has exited (status and terminating signal filled in).
int
ludx_proc_exited (ludx_proc_t *p, int64_t *status, int *term_signal);

int
ludx_proc_resize (ludx_proc_t *p, int rows, int cols);

// The owner lets go: stdio is closed, and the memory goes once the child has
// been reaped. A child still running at runtime shutdown gets SIGTERM.
void
ludx_proc_release (ludx_proc_t *p);

#endif
