// The line editor's buffer, its redraw and its key bindings (emacs keys,
// word moves, kill and yank, arrows); see lineedit.c.
#include "lineedit_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
le_out (const char *s, size_t n) {
  if (n > 0) // an empty line buffer is still NULL
    fwrite(s, 1, n, stdout);
}

void
le_outs (const char *s) {
  le_out(s, strlen(s));
}

int
le_cols (void) {
  int w = 0, h = 0;
  if (ludx_le.tty && uv_tty_get_winsize(&ludx_le.in, &w, &h) == 0 && w > 0)
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
void
le_refresh (void) {
  if (ludx_le.searching) {
    le_refresh_search();
    return;
  }
  size_t pw = width(ludx_le.prompt, strlen(ludx_le.prompt));
  size_t avail = (size_t) le_cols() - 1;
  if (avail <= pw + 4)
    avail = pw + 4;
  avail -= pw;
  size_t start = 0;
  while (width(ludx_le.buf + start, ludx_le.pos - start) >= avail) {
    start++;
    while (start < ludx_le.pos && is_cont((unsigned char) ludx_le.buf[start]))
      start++;
  }
  size_t end = start;
  while (end < ludx_le.len && width(ludx_le.buf + start, end - start) < avail) {
    end++;
    while (end < ludx_le.len && is_cont((unsigned char) ludx_le.buf[end]))
      end++;
  }
  char seq[32];
  le_outs("\r");
  le_outs(ludx_le.prompt);
  le_out(ludx_le.buf + start, end - start);
  le_outs("\033[K");
  snprintf(seq, sizeof(seq), "\r\033[%zuC", pw + width(ludx_le.buf + start, ludx_le.pos - start));
  if (pw + width(ludx_le.buf + start, ludx_le.pos - start) > 0)
    le_outs(seq);
  else
    le_outs("\r");
  fflush(stdout);
}

static int
reserve (size_t n) {
  if (ludx_le.len + n + 1 <= ludx_le.cap)
    return 0;
  if (ludx_le.len + n + 1 > LINE_MAX_BYTES)
    return -1;
  size_t cap = ludx_le.cap ? ludx_le.cap : 256;
  while (cap < ludx_le.len + n + 1)
    cap *= 2;
  char *b = realloc(ludx_le.buf, cap);
  if (b == NULL)
    return -1;
  ludx_le.buf = b;
  ludx_le.cap = cap;
  return 0;
}

void
le_set_line (const char *s) {
  size_t n = strlen(s);
  ludx_le.len = ludx_le.pos = 0;
  if (reserve(n) < 0)
    return;
  memcpy(ludx_le.buf, s, n);
  ludx_le.len = ludx_le.pos = n;
  ludx_le.buf[n] = 0;
}

void
le_insert (const char *s, size_t n) {
  if (reserve(n) < 0)
    return;
  memmove(ludx_le.buf + ludx_le.pos + n, ludx_le.buf + ludx_le.pos, ludx_le.len - ludx_le.pos);
  memcpy(ludx_le.buf + ludx_le.pos, s, n);
  ludx_le.len += n;
  ludx_le.pos += n;
  ludx_le.buf[ludx_le.len] = 0;
}

static size_t
prev_char (size_t i) {
  if (i == 0)
    return 0;
  i--;
  while (i > 0 && is_cont((unsigned char) ludx_le.buf[i]))
    i--;
  return i;
}

static size_t
next_char (size_t i) {
  if (i >= ludx_le.len)
    return ludx_le.len;
  i++;
  while (i < ludx_le.len && is_cont((unsigned char) ludx_le.buf[i]))
    i++;
  return i;
}

static void
delete_range (size_t a, size_t b) {
  if (b <= a)
    return;
  memmove(ludx_le.buf + a, ludx_le.buf + b, ludx_le.len - b);
  ludx_le.len -= b - a;
  ludx_le.buf[ludx_le.len] = 0;
  if (ludx_le.pos > b)
    ludx_le.pos -= b - a;
  else if (ludx_le.pos > a)
    ludx_le.pos = a;
}

static int
is_word (unsigned char c) {
  return c == '_' || c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static size_t
word_left (size_t i) {
  while (i > 0 && !is_word((unsigned char) ludx_le.buf[i - 1]))
    i--;
  while (i > 0 && is_word((unsigned char) ludx_le.buf[i - 1]))
    i--;
  return i;
}

static size_t
word_right (size_t i) {
  while (i < ludx_le.len && !is_word((unsigned char) ludx_le.buf[i]))
    i++;
  while (i < ludx_le.len && is_word((unsigned char) ludx_le.buf[i]))
    i++;
  return i;
}

// Deletes [a, b) and keeps it for Ctrl-Y.
static void
kill_range (size_t a, size_t b) {
  if (b <= a)
    return;
  char *k = realloc(ludx_le.kill, b - a);
  if (k != NULL) {
    memcpy(k, ludx_le.buf + a, b - a);
    ludx_le.kill = k;
    ludx_le.kill_len = b - a;
  }
  delete_range(a, b);
}

static void
yank (void) {
  if (ludx_le.kill_len > 0)
    le_insert(ludx_le.kill, ludx_le.kill_len);
}

// Ctrl-T: swaps the two bytes before the cursor (at the end) or around it.
static void
transpose (void) {
  if (ludx_le.len < 2 || ludx_le.pos == 0)
    return;
  size_t i = ludx_le.pos == ludx_le.len ? ludx_le.pos - 1 : ludx_le.pos;
  if (is_cont((unsigned char) ludx_le.buf[i]) || is_cont((unsigned char) ludx_le.buf[i - 1]) || (unsigned char) ludx_le.buf[i] >= 0x80 ||
      (unsigned char) ludx_le.buf[i - 1] >= 0x80)
    return; // ASCII only: a multi-byte character is left alone
  char t = ludx_le.buf[i];
  ludx_le.buf[i] = ludx_le.buf[i - 1];
  ludx_le.buf[i - 1] = t;
  ludx_le.pos = i + 1;
}

static void
accept_line (void) {
  ludx_le.buf[ludx_le.len] = 0;
  ludx_le.pos = ludx_le.len;
  le_refresh();
  le_outs("\n");
  fflush(stdout);
  le_queue_line(ludx_le.buf, ludx_le.len);
  ludx_le.len = ludx_le.pos = 0;
  ludx_le.hist_pos = ludx_le.hist_n;
  // one line at a time: the prompt comes back when Lua asks for it
  le_stop_editing();
}

void
le_on_key (unsigned char c) {
  if (ludx_le.searching && le_search_key(c))
    return;
  switch (c) {
    case 1:
      ludx_le.pos = 0;
      break; // Ctrl-A
    case 2:
      ludx_le.pos = prev_char(ludx_le.pos);
      break; // Ctrl-B
    case 3:  // Ctrl-C at the prompt
      ludx_line_cancel();
      return;
    case 4: // Ctrl-D: EOF on an empty line, else delete
      if (ludx_le.len == 0) {
        le_outs("\n");
        fflush(stdout);
        ludx_le.eof = 1;
        le_stop_editing();
        le_post();
        return;
      }
      delete_range(ludx_le.pos, next_char(ludx_le.pos));
      break;
    case 5:
      ludx_le.pos = ludx_le.len;
      break; // Ctrl-E
    case 6:
      ludx_le.pos = next_char(ludx_le.pos);
      break; // Ctrl-F
    case 8:  // Ctrl-H
    case 127:
      delete_range(prev_char(ludx_le.pos), ludx_le.pos);
      break; // Backspace
    case 11:
      kill_range(ludx_le.pos, ludx_le.len);
      break; // Ctrl-K
    case 12:
      le_outs("\033[H\033[2J");
      break; // Ctrl-L
    case 14:
      le_history_move(1);
      break; // Ctrl-N
    case 16:
      le_history_move(-1);
      break; // Ctrl-P
    case 18: // Ctrl-R
      le_search_start();
      break;
    case 20: // Ctrl-T
      transpose();
      break;
    case 21:
      kill_range(0, ludx_le.pos);
      break;   // Ctrl-U
    case 23: { // Ctrl-W: the white-space-separated word before the cursor
      size_t i = ludx_le.pos;
      while (i > 0 && ludx_le.buf[i - 1] == ' ')
        i--;
      while (i > 0 && ludx_le.buf[i - 1] != ' ')
        i--;
      kill_range(i, ludx_le.pos);
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
      if (ludx_le.pos == 0 || ludx_le.buf[ludx_le.pos - 1] == ' ' || ludx_le.buf[ludx_le.pos - 1] == '\t') {
        le_insert("  ", 2);
        break;
      }
      le_complete_request();
      return;
    default:
      if (c < 32)
        break;
      le_insert((const char *) &c, 1);
      // typing at the end of a line that fits: echo the byte, no redraw
      if (ludx_le.pos == ludx_le.len && width(ludx_le.prompt, strlen(ludx_le.prompt)) + width(ludx_le.buf, ludx_le.len) < (size_t) le_cols() - 1) {
        le_out((const char *) &c, 1);
        fflush(stdout);
        return;
      }
      break;
  }
  le_refresh();
}

// ESC sequences: arrows, home/end, delete.
int
le_on_escape (void) {
  const char *s = ludx_le.esc;
  size_t n = ludx_le.esc_len;
  if (n < 2)
    return 0;
  if (ludx_le.searching && s[1] != '[' && s[1] != 'O') {
    le_search_end(1);
    le_refresh();
  }
  if (s[1] != '[' && s[1] != 'O') {
    // Alt-<key> (ESC <key>): word moves and kills
    switch (s[1]) {
      case 'b':
        ludx_le.pos = word_left(ludx_le.pos);
        break;
      case 'f':
        ludx_le.pos = word_right(ludx_le.pos);
        break;
      case 'd':
        kill_range(ludx_le.pos, word_right(ludx_le.pos));
        break;
      case 127:
      case 8:
        kill_range(word_left(ludx_le.pos), ludx_le.pos);
        break;
      default:
        return 1; // other Alt keys: ignored
    }
    le_refresh();
    return 1;
  }
  if (n < 3)
    return 0;
  char last = s[n - 1];
  if (s[1] == '[' && last >= '0' && last <= '9')
    return n >= sizeof(ludx_le.esc) - 1; // more to come
  if (s[1] == '[' && last == ';')
    return 0;
  if (ludx_le.searching)
    le_search_end(1);
  // Ctrl- or Alt-arrows (ESC [ 1 ; 5 C and the like): word moves
  int modified = n >= 6 && s[2] == '1' && s[3] == ';' && (s[4] == '3' || s[4] == '5');
  if (modified && (last == 'C' || last == 'D')) {
    ludx_le.pos = last == 'C' ? word_right(ludx_le.pos) : word_left(ludx_le.pos);
    le_refresh();
    return 1;
  }
  switch (last) {
    case 'A':
      le_history_move(-1);
      break;
    case 'B':
      le_history_move(1);
      break;
    case 'C':
      ludx_le.pos = next_char(ludx_le.pos);
      break;
    case 'D':
      ludx_le.pos = prev_char(ludx_le.pos);
      break;
    case 'H':
      ludx_le.pos = 0;
      break;
    case 'F':
      ludx_le.pos = ludx_le.len;
      break;
    case '~':
      if (n >= 4 && (s[2] == '1' || s[2] == '7'))
        ludx_le.pos = 0;
      else if (n >= 4 && (s[2] == '4' || s[2] == '8'))
        ludx_le.pos = ludx_le.len;
      else if (n >= 4 && s[2] == '3')
        delete_range(ludx_le.pos, next_char(ludx_le.pos));
      break;
    default:
      break;
  }
  le_refresh();
  return 1;
}
