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
#include "lineedit_int.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

// The key bindings are in lineedit_edit.c, history and Ctrl-R in
// lineedit_history.c, Tab completion in lineedit_complete.c.

ludx_le_t ludx_le;

void
le_post (void) {
  if (ludx_le.posted)
    return;
  ludx_le.posted = 1;
  ludx_rt_post(ludx_le.rt, LUDX_EV_LINE, ludx_le.ref, 0, 0);
}

void
le_queue_line (const char *s, size_t n) {
  line_t *l = malloc(sizeof(*l) + n + 1);
  if (l == NULL)
    return;
  memcpy(l->text, s, n);
  l->text[n] = 0;
  l->len = n;
  l->cancel = 0;
  l->next = NULL;
  if (ludx_le.tail)
    ludx_le.tail->next = l;
  else
    ludx_le.head = l;
  ludx_le.tail = l;
  le_post();
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

void
le_stop_editing (void) {
  if (!ludx_le.editing)
    return;
  ludx_le.editing = 0;
  uv_read_stop((uv_stream_t *) &ludx_le.in);
  set_signals(1);
}

static void
on_tty_alloc (uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void) h;
  (void) suggested;
  buf->base = ludx_le.rbuf;
  buf->len = sizeof(ludx_le.rbuf);
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
    ludx_le.ahead_len = 0;
    n -= (size_t) (c + 1 - s);
    s = c + 1;
    ludx_rt_post(ludx_le.rt, LUDX_EV_INTERRUPT, 0, SIGINT, 0);
  }
  if (n == 0)
    return;
  char *a = realloc(ludx_le.ahead, ludx_le.ahead_len + n);
  if (a == NULL)
    return;
  memcpy(a + ludx_le.ahead_len, s, n);
  ludx_le.ahead = a;
  ludx_le.ahead_len += n;
}

// Once ISIG is on again, the keys that reached the terminal before it (read
// by nobody yet) are taken into the type-ahead, so a Ctrl-C among them still
// interrupts; later ones are signals.
static void
drain_typed (void) {
  uv_os_fd_t fd;
  if (!ludx_le.tty || uv_fileno((uv_handle_t *) &ludx_le.in, &fd) != 0)
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
  for (; i < n && ludx_le.editing; i++) {
    unsigned char c = (unsigned char) data[i];
    if (ludx_le.esc_len > 0) {
      ludx_le.esc[ludx_le.esc_len++] = (char) c;
      if (le_on_escape() || ludx_le.esc_len >= sizeof(ludx_le.esc) - 1)
        ludx_le.esc_len = 0;
      continue;
    }
    if (c == 27) {
      ludx_le.esc[0] = 27;
      ludx_le.esc_len = 1;
      continue;
    }
    le_on_key(c);
  }
  // what was typed after an accepted line waits for the next prompt
  if (i < n)
    type_ahead(data + i, n - i);
  if (!ludx_le.editing && ludx_le.active)
    drain_typed();
}

static void
on_tty_read (uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  (void) s;
  if (n < 0) {
    ludx_le.eof = 1;
    le_stop_editing();
    le_post();
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
    if (ludx_le.partial_len > 0) {
      size_t len = ludx_le.partial_len + (i - start);
      char *joined = malloc(len);
      if (joined == NULL)
        return;
      memcpy(joined, ludx_le.partial, ludx_le.partial_len);
      memcpy(joined + ludx_le.partial_len, buf + start, i - start);
      le_queue_line(joined, len);
      free(joined);
      ludx_le.partial_len = 0;
    } else {
      le_queue_line(buf + start, i - start);
    }
    start = i + 1;
  }
  if (start < n) {
    char *p = realloc(ludx_le.partial, ludx_le.partial_len + (n - start));
    if (p == NULL)
      return;
    ludx_le.partial = p;
    memcpy(ludx_le.partial + ludx_le.partial_len, buf + start, n - start);
    ludx_le.partial_len += n - start;
  }
}

static void
flush_partial_and_eof (void) {
  if (ludx_le.partial_len > 0)
    le_queue_line(ludx_le.partial, ludx_le.partial_len);
  ludx_le.partial_len = 0;
  ludx_le.eof = 1;
  le_post();
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
  if (!ludx_le.active)
    return;
  if (n > 0) {
    split_lines(ludx_le.rbuf, n);
    ludx_le.fs_off += n;
    uv_buf_t b = uv_buf_init(ludx_le.rbuf, sizeof(ludx_le.rbuf));
    if (uv_fs_read(&ludx_le.rt->loop, &ludx_le.fs, 0, &b, 1, ludx_le.fs_off, on_fs_read) < 0)
      flush_partial_and_eof();
  } else {
    flush_partial_and_eof();
  }
}

static void
line_shutdown (ludx_closer_t *c) {
  (void) c;
  ludx_line_stop();
}

int
ludx_line_start (ludx_rt_t *rt, uint32_t ref, const char *history) {
  if (ludx_le.active)
    return UV_EBUSY;
  memset(&ludx_le, 0, sizeof(ludx_le));
  ludx_le.rt = rt;
  ludx_le.ref = ref;
  uv_handle_type t = uv_guess_handle(0);
  if (t == UV_TTY) {
    int err = uv_tty_init(&rt->loop, &ludx_le.in, 0, 1);
    if (err < 0)
      return err;
    ludx_le.tty = 1;
    err = uv_tty_set_mode(&ludx_le.in, UV_TTY_MODE_RAW);
    if (err == 0)
      set_signals(1);
    if (err < 0) {
      uv_close((uv_handle_t *) &ludx_le.in, NULL);
      return err;
    }
    ludx_le.prompt = strdup("");
    if (history) {
      ludx_le.history_path = strdup(history);
      le_history_load(history);
    }
  } else if (t == UV_FILE) {
    uv_buf_t b = uv_buf_init(ludx_le.rbuf, sizeof(ludx_le.rbuf));
    int err = uv_fs_read(&rt->loop, &ludx_le.fs, 0, &b, 1, 0, on_fs_read);
    if (err < 0)
      return err;
  } else {
    uv_pipe_init(&rt->loop, &ludx_le.pipe, 0);
    ludx_le.has_pipe = 1;
    int err = uv_pipe_open(&ludx_le.pipe, 0);
    if (err < 0) {
      uv_close((uv_handle_t *) &ludx_le.pipe, NULL);
      ludx_le.has_pipe = 0;
      return err;
    }
    uv_read_start((uv_stream_t *) &ludx_le.pipe, on_tty_alloc, on_pipe_read);
  }
  ludx_le.active = 1;
  ludx_rt_track(rt, &ludx_le.closer, line_shutdown);
  return ludx_le.tty;
}

void
ludx_line_prompt (const char *prompt) {
  if (!ludx_le.active || !ludx_le.tty || ludx_le.eof)
    return;
  free(ludx_le.prompt);
  ludx_le.prompt = strdup(prompt);
  if (!ludx_le.editing) {
    ludx_le.editing = 1;
    set_signals(0);
    uv_read_start((uv_stream_t *) &ludx_le.in, on_tty_alloc, on_tty_read);
  }
  le_refresh();
  if (ludx_le.ahead_len > 0) {
    char *a = ludx_le.ahead;
    size_t n = ludx_le.ahead_len;
    ludx_le.ahead = NULL;
    ludx_le.ahead_len = 0;
    feed(a, n);
    free(a);
  }
}

void
ludx_line_pause (void) {
  if (!ludx_le.active || !ludx_le.tty)
    return;
  le_stop_editing();
}

int
ludx_line_take (char **line, size_t *len) {
  ludx_le.posted = 0;
  if (ludx_le.head) {
    line_t *l = ludx_le.head;
    ludx_le.head = l->next;
    if (ludx_le.head == NULL)
      ludx_le.tail = NULL;
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
  return ludx_le.eof ? UV_EOF : 0;
}

void
ludx_line_write (const char *s, size_t n) {
  if (ludx_le.editing) {
    // clear the prompt row, print, then draw the prompt and input again
    le_outs("\r\033[K");
    le_out(s, n);
    le_refresh();
  } else {
    le_out(s, n);
    fflush(stdout);
  }
}

int
ludx_line_cancel (void) {
  if (!ludx_le.editing)
    return 0;
  // the line is dropped, and the REPL is told: it may hold earlier lines
  // of an incomplete chunk
  le_outs("^C\n");
  fflush(stdout);
  ludx_le.len = ludx_le.pos = 0;
  ludx_le.hist_pos = ludx_le.hist_n;
  le_queue_line("", 0);
  ludx_le.tail->cancel = 1;
  le_stop_editing();
  return 1;
}

void
ludx_line_stop (void) {
  if (!ludx_le.active)
    return;
  ludx_rt_untrack(&ludx_le.closer);
  ludx_le.active = 0;
  if (ludx_le.tty) {
    le_stop_editing();
    le_history_save();
    uv_tty_reset_mode();
    uv_close((uv_handle_t *) &ludx_le.in, NULL);
  } else if (ludx_le.has_pipe) {
    uv_close((uv_handle_t *) &ludx_le.pipe, NULL);
  }
  while (ludx_le.head) {
    line_t *l = ludx_le.head;
    ludx_le.head = l->next;
    free(l);
  }
  ludx_le.tail = NULL;
  for (size_t i = 0; i < ludx_le.hist_n; i++)
    free(ludx_le.hist[i]);
  free(ludx_le.hist);
  free(ludx_le.partial);
  free(ludx_le.history_path);
  free(ludx_le.prompt);
  free(ludx_le.buf);
  free(ludx_le.saved);
  free(ludx_le.kill);
  free(ludx_le.search_orig);
  free(ludx_le.comp_req);
  ludx_le.kill = ludx_le.search_orig = ludx_le.comp_req = NULL;
  ludx_le.kill_len = ludx_le.comp_len = 0;
  ludx_le.searching = ludx_le.comp_pending = 0;
  free(ludx_le.ahead);
  ludx_le.ahead = NULL;
  ludx_le.ahead_len = 0;
  ludx_le.hist = NULL;
  ludx_le.partial = ludx_le.history_path = ludx_le.prompt = ludx_le.buf = ludx_le.saved = NULL;
  ludx_le.hist_n = ludx_le.len = ludx_le.cap = ludx_le.pos = 0;
}
