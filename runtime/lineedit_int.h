// Internal to the line editor (runtime/lineedit*.c): its one state and
// the functions its files share. Not part of the runtime's API.
#ifndef LUDX_LINEEDIT_INT_H
#define LUDX_LINEEDIT_INT_H

#include "lineedit.h"

#define HISTORY_MAX    1000
#define LINE_MAX_BYTES (1 << 20)
#define SEARCH_MAX     256 // bytes of a Ctrl-R query
#define COMPLETE_SHOW  200 // candidates listed at most

typedef struct line_s {
  struct line_s *next;
  int cancel; // Ctrl-C at the prompt, not a line
  size_t len;
  char text[];
} line_t;

typedef struct {
  ludx_closer_t closer;
  ludx_rt_t *rt;
  uint32_t ref;
  int active;
  int tty;
  int editing; // the prompt shows and keys are read raw
  int eof;
  int posted;
  uv_tty_t in;    // terminal
  uv_pipe_t pipe; // pipe
  int has_pipe;
  uv_fs_t fs; // regular file
  char rbuf[65536];
  int64_t fs_off;
  char *partial; // an unterminated line from a non-terminal stdin
  size_t partial_len;
  line_t *head, *tail;
  // editor state
  char *prompt;
  char *buf;
  size_t len, cap, pos;
  char *ahead; // keys typed after an accepted line, for the next prompt
  size_t ahead_len;
  char esc[16]; // an escape sequence being read
  size_t esc_len;
  char **hist;
  size_t hist_n;
  size_t hist_pos; // == hist_n: the line being typed
  char *saved;     // the line being typed while browsing history
  char *history_path;
  char *kill; // the last killed text, for Ctrl-Y
  size_t kill_len;
  int searching; // Ctrl-R: reverse incremental history search
  char query[SEARCH_MAX + 1];
  size_t query_len;
  size_t match;      // history index of the match (hist_n: none)
  char *search_orig; // the line before the search, for Ctrl-G
  char *comp_req;    // Tab: the text before the cursor, waiting for Lua
  size_t comp_len;
  int comp_pending; // a request Lua has not taken yet
} ludx_le_t;

// stdin has one reader: one state for the process (lineedit.c)
extern ludx_le_t ludx_le;

// lineedit.c: the queue of lines, raw mode, reading stdin
void
le_post (void);
void
le_queue_line (const char *s, size_t n);
void
le_stop_editing (void);

// lineedit_edit.c: output, the edit buffer and the key bindings
void
le_out (const char *s, size_t n);
void
le_outs (const char *s);
int
le_cols (void);
void
le_refresh (void);
void
le_set_line (const char *s);
void
le_insert (const char *s, size_t n);
void
le_on_key (unsigned char c);
int
le_on_escape (void);

// lineedit_history.c: history and Ctrl-R search
void
le_refresh_search (void);
void
le_search_start (void);
void
le_search_end (int keep);
int
le_search_key (unsigned char c);
void
le_history_move (int dir);
void
le_history_load (const char *path);
void
le_history_save (void);

// lineedit_complete.c: Tab completion answered by Lua
void
le_complete_request (void);

#endif
