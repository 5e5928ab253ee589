// Line input for the REPL that keeps the loop running.
//
// On a terminal: a small line editor over uv_tty in raw mode (emacs keys,
// word moves, kill and yank, arrows, history saved to a file, Ctrl-R
// reverse search, Tab completion answered by Lua), redrawn in place so output printed by
// tasks appears above the prompt. The terminal stays raw (non-canonical) for
// the whole session, so keys typed while a command runs, Ctrl-D included,
// wait in the terminal until the next prompt. At the prompt, Ctrl-C is a key
// (ordered with the keys around it); while a command runs, ISIG is on and
// Ctrl-C is a SIGINT that stops the command. Elsewhere (pipe, file): plain
// lines.
#include "lineedit.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

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

static struct {
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
} le;

static void
post (void) {
  if (le.posted)
    return;
  le.posted = 1;
  ludx_rt_post(le.rt, LUDX_EV_LINE, le.ref, 0, 0);
}

static void
queue_line (const char *s, size_t n) {
  line_t *l = malloc(sizeof(*l) + n + 1);
  if (l == NULL)
    return;
  memcpy(l->text, s, n);
  l->text[n] = 0;
  l->len = n;
  l->cancel = 0;
  l->next = NULL;
  if (le.tail)
    le.tail->next = l;
  else
    le.head = l;
  le.tail = l;
  post();
}

static void
out (const char *s, size_t n) {
  if (n > 0) // an empty line buffer is still NULL
    fwrite(s, 1, n, stdout);
}

static void
outs (const char *s) {
  out(s, strlen(s));
}

static int
cols (void) {
  int w = 0, h = 0;
  if (le.tty && uv_tty_get_winsize(&le.in, &w, &h) == 0 && w > 0)
    return w;
  return 80;
}

static int
is_cont (unsigned char c) {
  return (c & 0xC0) == 0x80;
}

// display width in columns (one per code point)
static size_t
width (const char *s, size_t n) {
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    if (!is_cont((unsigned char) s[i]))
      w++;
  }
  return w;
}

// Redraws the prompt and line on the current row, scrolling horizontally
// when it is wider than the terminal.
static void
refresh_search (void);

static void
refresh (void) {
  if (le.searching) {
    refresh_search();
    return;
  }
  size_t pw = width(le.prompt, strlen(le.prompt));
  size_t avail = (size_t) cols() - 1;
  if (avail <= pw + 4)
    avail = pw + 4;
  avail -= pw;
  size_t start = 0;
  while (width(le.buf + start, le.pos - start) >= avail) {
    start++;
    while (start < le.pos && is_cont((unsigned char) le.buf[start]))
      start++;
  }
  size_t end = start;
  while (end < le.len && width(le.buf + start, end - start) < avail) {
    end++;
    while (end < le.len && is_cont((unsigned char) le.buf[end]))
      end++;
  }
  char seq[32];
  outs("\r");
  outs(le.prompt);
  out(le.buf + start, end - start);
  outs("\033[K");
  snprintf(seq, sizeof(seq), "\r\033[%zuC", pw + width(le.buf + start, le.pos - start));
  if (pw + width(le.buf + start, le.pos - start) > 0)
    outs(seq);
  else
    outs("\r");
  fflush(stdout);
}

static int
reserve (size_t n) {
  if (le.len + n + 1 <= le.cap)
    return 0;
  if (le.len + n + 1 > LINE_MAX_BYTES)
    return -1;
  size_t cap = le.cap ? le.cap : 256;
  while (cap < le.len + n + 1)
    cap *= 2;
  char *b = realloc(le.buf, cap);
  if (b == NULL)
    return -1;
  le.buf = b;
  le.cap = cap;
  return 0;
}

static void
set_line (const char *s) {
  size_t n = strlen(s);
  le.len = le.pos = 0;
  if (reserve(n) < 0)
    return;
  memcpy(le.buf, s, n);
  le.len = le.pos = n;
  le.buf[n] = 0;
}

static void
insert (const char *s, size_t n) {
  if (reserve(n) < 0)
    return;
  memmove(le.buf + le.pos + n, le.buf + le.pos, le.len - le.pos);
  memcpy(le.buf + le.pos, s, n);
  le.len += n;
  le.pos += n;
  le.buf[le.len] = 0;
}

static size_t
prev_char (size_t i) {
  if (i == 0)
    return 0;
  i--;
  while (i > 0 && is_cont((unsigned char) le.buf[i]))
    i--;
  return i;
}

static size_t
next_char (size_t i) {
  if (i >= le.len)
    return le.len;
  i++;
  while (i < le.len && is_cont((unsigned char) le.buf[i]))
    i++;
  return i;
}

static void
delete_range (size_t a, size_t b) {
  if (b <= a)
    return;
  memmove(le.buf + a, le.buf + b, le.len - b);
  le.len -= b - a;
  le.buf[le.len] = 0;
  if (le.pos > b)
    le.pos -= b - a;
  else if (le.pos > a)
    le.pos = a;
}

static int
is_word (unsigned char c) {
  return c == '_' || c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static size_t
word_left (size_t i) {
  while (i > 0 && !is_word((unsigned char) le.buf[i - 1]))
    i--;
  while (i > 0 && is_word((unsigned char) le.buf[i - 1]))
    i--;
  return i;
}

static size_t
word_right (size_t i) {
  while (i < le.len && !is_word((unsigned char) le.buf[i]))
    i++;
  while (i < le.len && is_word((unsigned char) le.buf[i]))
    i++;
  return i;
}

// Deletes [a, b) and keeps it for Ctrl-Y.
static void
kill_range (size_t a, size_t b) {
  if (b <= a)
    return;
  char *k = realloc(le.kill, b - a);
  if (k != NULL) {
    memcpy(k, le.buf + a, b - a);
    le.kill = k;
    le.kill_len = b - a;
  }
  delete_range(a, b);
}

static void
yank (void) {
  if (le.kill_len > 0)
    insert(le.kill, le.kill_len);
}

// Ctrl-T: swaps the two bytes before the cursor (at the end) or around it.
static void
transpose (void) {
  if (le.len < 2 || le.pos == 0)
    return;
  size_t i = le.pos == le.len ? le.pos - 1 : le.pos;
  if (is_cont((unsigned char) le.buf[i]) || is_cont((unsigned char) le.buf[i - 1]) || (unsigned char) le.buf[i] >= 0x80 ||
      (unsigned char) le.buf[i - 1] >= 0x80)
    return; // ASCII only: a multi-byte character is left alone
  char t = le.buf[i];
  le.buf[i] = le.buf[i - 1];
  le.buf[i - 1] = t;
  le.pos = i + 1;
}

// --- Ctrl-R ----------------------------------------------------------------

// The newest entry at or below `from` containing the query (hist_n: none).
static size_t
search_from (size_t from) {
  if (le.hist_n == 0)
    return le.hist_n;
  if (from >= le.hist_n)
    from = le.hist_n - 1;
  for (size_t i = from + 1; i-- > 0;) {
    if (le.query_len == 0 || strstr(le.hist[i], le.query) != NULL)
      return i;
  }
  return le.hist_n;
}

static void
refresh_search (void) {
  outs(le.match < le.hist_n ? "\r(reverse-i-search)`" : "\r(failed reverse-i-search)`");
  out(le.query, le.query_len);
  outs("': ");
  if (le.match < le.hist_n)
    outs(le.hist[le.match]);
  outs("\033[K");
  fflush(stdout);
}

static void
search_start (void) {
  free(le.search_orig);
  le.search_orig = strdup(le.len ? le.buf : "");
  le.searching = 1;
  le.query_len = 0;
  le.query[0] = 0;
  le.match = le.hist_n ? le.hist_n - 1 : 0;
}

// Leaves the search with the match (or the original line) in the editor.
static void
search_end (int keep) {
  le.searching = 0;
  if (keep && le.match < le.hist_n)
    set_line(le.hist[le.match]);
  else
    set_line(le.search_orig ? le.search_orig : "");
  free(le.search_orig);
  le.search_orig = NULL;
  le.hist_pos = le.hist_n;
}

// A key while searching: 1 when it was used, 0 when the search ended and
// the key is for the editor.
static int
search_key (unsigned char c) {
  if (c == 18) { // Ctrl-R again: an older match
    if (le.match < le.hist_n && le.match > 0) {
      size_t m = search_from(le.match - 1);
      if (m < le.hist_n)
        le.match = m;
    }
  } else if (c == 7) { // Ctrl-G: back to the line as it was
    search_end(0);
  } else if (c == 127 || c == 8) {
    if (le.query_len > 0)
      le.query[--le.query_len] = 0;
    le.match = search_from(le.hist_n - 1);
  } else if (c >= 32 && c != 127) {
    if (le.query_len < SEARCH_MAX) {
      le.query[le.query_len++] = (char) c;
      le.query[le.query_len] = 0;
    }
    size_t m = search_from(le.match < le.hist_n ? le.match : le.hist_n - 1);
    le.match = m;
  } else {
    search_end(1);
    return 0;
  }
  refresh();
  return 1;
}

static void
history_move (int dir) {
  if (le.hist_n == 0)
    return;
  if (dir < 0 && le.hist_pos == 0)
    return;
  if (dir > 0 && le.hist_pos >= le.hist_n)
    return;
  if (le.hist_pos == le.hist_n) {
    free(le.saved);
    le.saved = strdup(le.len ? le.buf : "");
  }
  le.hist_pos += dir;
  set_line(le.hist_pos == le.hist_n ? (le.saved ? le.saved : "") : le.hist[le.hist_pos]);
}

// Ctrl-C (and Ctrl-Z, Ctrl-\) as signals, or as keys; input is kept.
static void
set_signals (int on) {
  struct termios t;
  if (tcgetattr(0, &t) != 0)
    return;
  if (on)
    t.c_lflag |= ISIG;
  else
    t.c_lflag &= ~ISIG;
  tcsetattr(0, TCSANOW, &t);
}

static void
stop_editing (void) {
  if (!le.editing)
    return;
  le.editing = 0;
  uv_read_stop((uv_stream_t *) &le.in);
  set_signals(1);
}

static void
accept_line (void) {
  le.buf[le.len] = 0;
  le.pos = le.len;
  refresh();
  outs("\n");
  fflush(stdout);
  queue_line(le.buf, le.len);
  le.len = le.pos = 0;
  le.hist_pos = le.hist_n;
  // one line at a time: the prompt comes back when Lua asks for it
  stop_editing();
}

static void
complete_request (void);

static void
on_key (unsigned char c) {
  if (le.searching && search_key(c))
    return;
  switch (c) {
    case 1:
      le.pos = 0;
      break; // Ctrl-A
    case 2:
      le.pos = prev_char(le.pos);
      break; // Ctrl-B
    case 3:  // Ctrl-C at the prompt
      ludx_line_cancel();
      return;
    case 4: // Ctrl-D: EOF on an empty line, else delete
      if (le.len == 0) {
        outs("\n");
        fflush(stdout);
        le.eof = 1;
        stop_editing();
        post();
        return;
      }
      delete_range(le.pos, next_char(le.pos));
      break;
    case 5:
      le.pos = le.len;
      break; // Ctrl-E
    case 6:
      le.pos = next_char(le.pos);
      break; // Ctrl-F
    case 8:  // Ctrl-H
    case 127:
      delete_range(prev_char(le.pos), le.pos);
      break; // Backspace
    case 11:
      kill_range(le.pos, le.len);
      break; // Ctrl-K
    case 12:
      outs("\033[H\033[2J");
      break; // Ctrl-L
    case 14:
      history_move(1);
      break; // Ctrl-N
    case 16:
      history_move(-1);
      break; // Ctrl-P
    case 18: // Ctrl-R
      search_start();
      break;
    case 20: // Ctrl-T
      transpose();
      break;
    case 21:
      kill_range(0, le.pos);
      break;   // Ctrl-U
    case 23: { // Ctrl-W: the white-space-separated word before the cursor
      size_t i = le.pos;
      while (i > 0 && le.buf[i - 1] == ' ')
        i--;
      while (i > 0 && le.buf[i - 1] != ' ')
        i--;
      kill_range(i, le.pos);
      break;
    }
    case 25: // Ctrl-Y
      yank();
      break;
    case '\r':
    case '\n':
      accept_line();
      return;
    case '\t':
      // at the start of a line or after a space: indentation; else complete
      if (le.pos == 0 || le.buf[le.pos - 1] == ' ' || le.buf[le.pos - 1] == '\t') {
        insert("  ", 2);
        break;
      }
      complete_request();
      return;
    default:
      if (c < 32)
        break;
      insert((const char *) &c, 1);
      // typing at the end of a line that fits: echo the byte, no redraw
      if (le.pos == le.len && width(le.prompt, strlen(le.prompt)) + width(le.buf, le.len) < (size_t) cols() - 1) {
        out((const char *) &c, 1);
        fflush(stdout);
        return;
      }
      break;
  }
  refresh();
}

// ESC sequences: arrows, home/end, delete.
static int
on_escape (void) {
  const char *s = le.esc;
  size_t n = le.esc_len;
  if (n < 2)
    return 0;
  if (le.searching && s[1] != '[' && s[1] != 'O') {
    search_end(1);
    refresh();
  }
  if (s[1] != '[' && s[1] != 'O') {
    // Alt-<key> (ESC <key>): word moves and kills
    switch (s[1]) {
      case 'b':
        le.pos = word_left(le.pos);
        break;
      case 'f':
        le.pos = word_right(le.pos);
        break;
      case 'd':
        kill_range(le.pos, word_right(le.pos));
        break;
      case 127:
      case 8:
        kill_range(word_left(le.pos), le.pos);
        break;
      default:
        return 1; // other Alt keys: ignored
    }
    refresh();
    return 1;
  }
  if (n < 3)
    return 0;
  char last = s[n - 1];
  if (s[1] == '[' && last >= '0' && last <= '9')
    return n >= sizeof(le.esc) - 1; // more to come
  if (s[1] == '[' && last == ';')
    return 0;
  if (le.searching)
    search_end(1);
  // Ctrl- or Alt-arrows (ESC [ 1 ; 5 C and the like): word moves
  int modified = n >= 6 && s[2] == '1' && s[3] == ';' && (s[4] == '3' || s[4] == '5');
  if (modified && (last == 'C' || last == 'D')) {
    le.pos = last == 'C' ? word_right(le.pos) : word_left(le.pos);
    refresh();
    return 1;
  }
  switch (last) {
    case 'A':
      history_move(-1);
      break;
    case 'B':
      history_move(1);
      break;
    case 'C':
      le.pos = next_char(le.pos);
      break;
    case 'D':
      le.pos = prev_char(le.pos);
      break;
    case 'H':
      le.pos = 0;
      break;
    case 'F':
      le.pos = le.len;
      break;
    case '~':
      if (n >= 4 && (s[2] == '1' || s[2] == '7'))
        le.pos = 0;
      else if (n >= 4 && (s[2] == '4' || s[2] == '8'))
        le.pos = le.len;
      else if (n >= 4 && s[2] == '3')
        delete_range(le.pos, next_char(le.pos));
      break;
    default:
      break;
  }
  refresh();
  return 1;
}

static void
on_tty_alloc (uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void) h;
  (void) suggested;
  buf->base = le.rbuf;
  buf->len = sizeof(le.rbuf);
}

// Keys typed after an accepted line wait for the next prompt, but a Ctrl-C
// among them was meant for the line that now runs (typed while ISIG was
// still off): it interrupts, and what was typed before it is dropped, as a
// terminal with ISIG flushes its input on ^C.
static void
type_ahead (const char *s, size_t n) {
  const char *c = NULL;
  for (size_t k = n; k > 0; k--) {
    if (s[k - 1] == 3) {
      c = s + k - 1;
      break;
    }
  }
  if (c != NULL) {
    le.ahead_len = 0;
    n -= (size_t) (c + 1 - s);
    s = c + 1;
    ludx_rt_post(le.rt, LUDX_EV_INTERRUPT, 0, SIGINT, 0);
  }
  if (n == 0)
    return;
  char *a = realloc(le.ahead, le.ahead_len + n);
  if (a == NULL)
    return;
  memcpy(a + le.ahead_len, s, n);
  le.ahead = a;
  le.ahead_len += n;
}

// Once ISIG is on again, the keys that reached the terminal before it (read
// by nobody yet) are taken into the type-ahead, so a Ctrl-C among them still
// interrupts; later ones are signals.
static void
drain_typed (void) {
  uv_os_fd_t fd;
  if (!le.tty || uv_fileno((uv_handle_t *) &le.in, &fd) != 0)
    return;
  char b[4096];
  for (;;) {
    int avail = 0;
    if (ioctl(fd, FIONREAD, &avail) != 0 || avail <= 0)
      return;
    ssize_t got = read(fd, b, (size_t) avail < sizeof(b) ? (size_t) avail : sizeof(b));
    if (got <= 0)
      return;
    type_ahead(b, (size_t) got);
  }
}

static void
feed (const char *data, size_t n) {
  size_t i = 0;
  for (; i < n && le.editing; i++) {
    unsigned char c = (unsigned char) data[i];
    if (le.esc_len > 0) {
      le.esc[le.esc_len++] = (char) c;
      if (on_escape() || le.esc_len >= sizeof(le.esc) - 1)
        le.esc_len = 0;
      continue;
    }
    if (c == 27) {
      le.esc[0] = 27;
      le.esc_len = 1;
      continue;
    }
    on_key(c);
  }
  // what was typed after an accepted line waits for the next prompt
  if (i < n)
    type_ahead(data + i, n - i);
  if (!le.editing && le.active)
    drain_typed();
}

static void
on_tty_read (uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  (void) s;
  if (n < 0) {
    le.eof = 1;
    stop_editing();
    post();
    return;
  }
  feed(buf->base, n);
}

static void
split_lines (const char *buf, size_t n) {
  size_t start = 0;
  for (size_t i = 0; i < n; i++) {
    if (buf[i] != '\n')
      continue;
    if (le.partial_len > 0) {
      size_t len = le.partial_len + (i - start);
      char *joined = malloc(len);
      if (joined == NULL)
        return;
      memcpy(joined, le.partial, le.partial_len);
      memcpy(joined + le.partial_len, buf + start, i - start);
      queue_line(joined, len);
      free(joined);
      le.partial_len = 0;
    } else {
      queue_line(buf + start, i - start);
    }
    start = i + 1;
  }
  if (start < n) {
    char *p = realloc(le.partial, le.partial_len + (n - start));
    if (p == NULL)
      return;
    le.partial = p;
    memcpy(le.partial + le.partial_len, buf + start, n - start);
    le.partial_len += n - start;
  }
}

static void
flush_partial_and_eof (void) {
  if (le.partial_len > 0)
    queue_line(le.partial, le.partial_len);
  le.partial_len = 0;
  le.eof = 1;
  post();
}

static void
on_pipe_read (uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  if (n > 0)
    split_lines(buf->base, n);
  else if (n < 0) {
    uv_read_stop(s);
    flush_partial_and_eof();
  }
}

static void
on_fs_read (uv_fs_t *req) {
  ssize_t n = req->result;
  uv_fs_req_cleanup(req);
  if (!le.active)
    return;
  if (n > 0) {
    split_lines(le.rbuf, n);
    le.fs_off += n;
    uv_buf_t b = uv_buf_init(le.rbuf, sizeof(le.rbuf));
    if (uv_fs_read(&le.rt->loop, &le.fs, 0, &b, 1, le.fs_off, on_fs_read) < 0)
      flush_partial_and_eof();
  } else {
    flush_partial_and_eof();
  }
}

// --- Tab completion --------------------------------------------------------
// Tab sends the text before the cursor to Lua (an LUDX_EV_LINE wakes it);
// Lua answers with ludx_line_complete while the prompt is still up. An answer
// for text that has changed since is dropped.

static void
complete_request (void) {
  char *r = malloc(le.pos + 1);
  if (r == NULL)
    return;
  memcpy(r, le.buf, le.pos);
  r[le.pos] = 0;
  free(le.comp_req);
  le.comp_req = r;
  le.comp_len = le.pos;
  le.comp_pending = 1;
  post();
}

int
ludx_line_completion (char **text, size_t *len) {
  if (!le.active || !le.comp_pending || le.comp_req == NULL)
    return 0;
  le.comp_pending = 0;
  char *t = malloc(le.comp_len + 1);
  if (t == NULL)
    return UV_ENOMEM;
  memcpy(t, le.comp_req, le.comp_len + 1);
  *text = t;
  *len = le.comp_len;
  return 1;
}

void
ludx_line_complete (size_t start, const char **items, const size_t *lens, size_t n) {
  if (!le.editing || le.comp_req == NULL)
    return;
  // the line must still be what was asked about
  int same = le.pos == le.comp_len && (le.pos == 0 || memcmp(le.buf, le.comp_req, le.pos) == 0);
  free(le.comp_req);
  le.comp_req = NULL;
  if (!same || n == 0 || start > le.pos)
    return;
  size_t typed = le.pos - start;
  // the longest prefix all candidates share
  size_t common = lens[0];
  for (size_t i = 1; i < n; i++) {
    size_t j = 0;
    while (j < common && j < lens[i] && items[i][j] == items[0][j])
      j++;
    common = j;
  }
  if (common > typed && memcmp(items[0], le.buf + start, typed) == 0) {
    insert(items[0] + typed, common - typed);
    refresh();
    return;
  }
  if (n == 1)
    return;
  // nothing more to add: list the candidates under the prompt
  int width = cols();
  size_t colw = 0;
  for (size_t i = 0; i < n && i < COMPLETE_SHOW; i++) {
    if (lens[i] > colw)
      colw = lens[i];
  }
  colw += 2;
  size_t per_row = colw < (size_t) width ? (size_t) width / colw : 1;
  outs("\r\n");
  for (size_t i = 0; i < n && i < COMPLETE_SHOW; i++) {
    out(items[i], lens[i]);
    if ((i + 1) % per_row == 0 || i + 1 == n || i + 1 == COMPLETE_SHOW) {
      outs("\r\n");
    } else {
      for (size_t k = lens[i]; k < colw; k++)
        outs(" ");
    }
  }
  if (n > COMPLETE_SHOW) {
    char more[64];
    snprintf(more, sizeof(more), "... and %zu more\r\n", n - COMPLETE_SHOW);
    outs(more);
  }
  refresh();
}

static void
history_load (const char *path) {
  FILE *f = fopen(path, "r");
  if (f == NULL)
    return;
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&line, &cap, f)) > 0) {
    if (line[n - 1] == '\n')
      line[--n] = 0;
    if (n > 0)
      ludx_line_add_history(line);
  }
  free(line);
  fclose(f);
}

static void
history_save (void) {
  if (le.history_path == NULL)
    return;
  FILE *f = fopen(le.history_path, "w");
  if (f == NULL)
    return;
  for (size_t i = 0; i < le.hist_n; i++)
    fprintf(f, "%s\n", le.hist[i]);
  fclose(f);
}

static void
line_shutdown (ludx_closer_t *c) {
  (void) c;
  ludx_line_stop();
}

int
ludx_line_start (ludx_rt_t *rt, uint32_t ref, const char *history) {
  if (le.active)
    return UV_EBUSY;
  memset(&le, 0, sizeof(le));
  le.rt = rt;
  le.ref = ref;
  uv_handle_type t = uv_guess_handle(0);
  if (t == UV_TTY) {
    int err = uv_tty_init(&rt->loop, &le.in, 0, 1);
    if (err < 0)
      return err;
    le.tty = 1;
    err = uv_tty_set_mode(&le.in, UV_TTY_MODE_RAW);
    if (err == 0)
      set_signals(1);
    if (err < 0) {
      uv_close((uv_handle_t *) &le.in, NULL);
      return err;
    }
    le.prompt = strdup("");
    if (history) {
      le.history_path = strdup(history);
      history_load(history);
    }
  } else if (t == UV_FILE) {
    uv_buf_t b = uv_buf_init(le.rbuf, sizeof(le.rbuf));
    int err = uv_fs_read(&rt->loop, &le.fs, 0, &b, 1, 0, on_fs_read);
    if (err < 0)
      return err;
  } else {
    uv_pipe_init(&rt->loop, &le.pipe, 0);
    le.has_pipe = 1;
    int err = uv_pipe_open(&le.pipe, 0);
    if (err < 0) {
      uv_close((uv_handle_t *) &le.pipe, NULL);
      le.has_pipe = 0;
      return err;
    }
    uv_read_start((uv_stream_t *) &le.pipe, on_tty_alloc, on_pipe_read);
  }
  le.active = 1;
  ludx_rt_track(rt, &le.closer, line_shutdown);
  return le.tty;
}

void
ludx_line_prompt (const char *prompt) {
  if (!le.active || !le.tty || le.eof)
    return;
  free(le.prompt);
  le.prompt = strdup(prompt);
  if (!le.editing) {
    le.editing = 1;
    set_signals(0);
    uv_read_start((uv_stream_t *) &le.in, on_tty_alloc, on_tty_read);
  }
  refresh();
  if (le.ahead_len > 0) {
    char *a = le.ahead;
    size_t n = le.ahead_len;
    le.ahead = NULL;
    le.ahead_len = 0;
    feed(a, n);
    free(a);
  }
}

void
ludx_line_pause (void) {
  if (!le.active || !le.tty)
    return;
  stop_editing();
}

int
ludx_line_take (char **line, size_t *len) {
  le.posted = 0;
  if (le.head) {
    line_t *l = le.head;
    le.head = l->next;
    if (le.head == NULL)
      le.tail = NULL;
    if (l->cancel) {
      free(l);
      return 2;
    }
    char *s = malloc(l->len + 1);
    if (s == NULL)
      return UV_ENOMEM;
    memcpy(s, l->text, l->len + 1);
    *line = s;
    *len = l->len;
    free(l);
    return 1;
  }
  return le.eof ? UV_EOF : 0;
}

void
ludx_line_write (const char *s, size_t n) {
  if (le.editing) {
    // clear the prompt row, print, then draw the prompt and input again
    outs("\r\033[K");
    out(s, n);
    refresh();
  } else {
    out(s, n);
    fflush(stdout);
  }
}

int
ludx_line_cancel (void) {
  if (!le.editing)
    return 0;
  // the line is dropped, and the REPL is told: it may hold earlier lines
  // of an incomplete chunk
  outs("^C\n");
  fflush(stdout);
  le.len = le.pos = 0;
  le.hist_pos = le.hist_n;
  queue_line("", 0);
  le.tail->cancel = 1;
  stop_editing();
  return 1;
}

void
ludx_line_add_history (const char *line) {
  if (line[0] == 0)
    return;
  if (le.hist_n > 0 && strcmp(le.hist[le.hist_n - 1], line) == 0)
    return;
  if (le.hist_n == HISTORY_MAX) {
    free(le.hist[0]);
    memmove(le.hist, le.hist + 1, (HISTORY_MAX - 1) * sizeof(char *));
    le.hist_n--;
  }
  char **h = realloc(le.hist, (le.hist_n + 1) * sizeof(char *));
  if (h == NULL)
    return;
  le.hist = h;
  // multi-line chunks are kept as one entry on one line
  char *copy = strdup(line);
  if (copy == NULL)
    return;
  for (char *p = copy; *p; p++) {
    if (*p == '\n')
      *p = ' ';
  }
  le.hist[le.hist_n++] = copy;
  le.hist_pos = le.hist_n;
}

void
ludx_line_stop (void) {
  if (!le.active)
    return;
  ludx_rt_untrack(&le.closer);
  le.active = 0;
  if (le.tty) {
    stop_editing();
    history_save();
    uv_tty_reset_mode();
    uv_close((uv_handle_t *) &le.in, NULL);
  } else if (le.has_pipe) {
    uv_close((uv_handle_t *) &le.pipe, NULL);
  }
  while (le.head) {
    line_t *l = le.head;
    le.head = l->next;
    free(l);
  }
  le.tail = NULL;
  for (size_t i = 0; i < le.hist_n; i++)
    free(le.hist[i]);
  free(le.hist);
  free(le.partial);
  free(le.history_path);
  free(le.prompt);
  free(le.buf);
  free(le.saved);
  free(le.kill);
  free(le.search_orig);
  free(le.comp_req);
  le.kill = le.search_orig = le.comp_req = NULL;
  le.kill_len = le.comp_len = 0;
  le.searching = le.comp_pending = 0;
  free(le.ahead);
  le.ahead = NULL;
  le.ahead_len = 0;
  le.hist = NULL;
  le.partial = le.history_path = le.prompt = le.buf = le.saved = NULL;
  le.hist_n = le.len = le.cap = le.pos = 0;
}
