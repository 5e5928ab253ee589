#ifndef LUDX_LINEEDIT_H
#define LUDX_LINEEDIT_H

#include <stddef.h>
#include <stdint.h>

#include "rt.h"

// Line input for the REPL that keeps the loop running. On a terminal it is a
// line editor over uv_tty (editing keys, history); otherwise it reads lines
// from stdin (pipe or file) with no prompt. Each queued line (or EOF) is
// announced as LUDX_EV_LINE.

// Starts reading stdin. history may be NULL. Returns 1 when stdin is a
// terminal (editing on), 0 when it is not, or a negative UV_E*.
int
ludx_line_start (ludx_rt_t *rt, uint32_t ref, const char *history);

// Shows the prompt and accepts one line (terminal only; a no-op otherwise).
void
ludx_line_prompt (const char *prompt);

// Hides the prompt while a command runs; keys typed meanwhile stay queued.
void
ludx_line_pause (void);

// Takes the next line: 1 (*line malloc'd, caller frees), 0 none yet, 2 the
// line was cancelled with Ctrl-C, UV_EOF at the end.
int
ludx_line_take (char **line, size_t *len);

// Writes output without breaking the prompt and the line being typed.
void
ludx_line_write (const char *s, size_t n);

// Ctrl-C at the prompt: drops the line being typed; line_take then reports
// the cancel, and the next prompt starts afresh. 0 when no prompt shows
// (a line was taken and runs, or is about to).
int
ludx_line_cancel (void);

void
ludx_line_add_history (const char *line);

// Tab at the prompt asks for completions: 1 and the text before the cursor
// (malloc'd, caller frees) when a request is waiting, else 0.
int
ludx_line_completion (char **text, size_t *len);

// The answer: candidates for the bytes from `start` to the cursor. The
// common prefix is inserted; when that adds nothing, they are listed.
void
ludx_line_complete (size_t start, const char **items, const size_t *lens, size_t n);

// Restores the terminal and saves the history.
void
ludx_line_stop (void);

#endif
