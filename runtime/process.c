#include "process.h"

#include <errno.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define LUDX_PROC_HIGH_WATER (16 * 1024 * 1024) // stop reading a child above this

typedef struct {
  char *data;
  size_t len, cap;
  int eof;
  int posted; // an output event is outstanding
} outbuf_t;

struct ludx_proc_s {
  ludx_closer_t closer;
  ludx_rt_t *rt;
  uint32_t ref;
  int pty;
  int pid;
  uv_process_t proc; // pipe mode
  uv_pipe_t in;      // pipe mode: child's stdin
  uv_pipe_t out;     // child's stdout, or the pty master (read and write)
  uv_pipe_t err;
  int has_in, has_out, has_err, has_proc;
  outbuf_t buf[3];
  int exited;
  int64_t status;
  int term_signal;
  int released;
  int open; // libuv handles not yet closed
  ludx_proc_t *next_pty;
};

static ludx_proc_t *pty_list = NULL;
static uv_signal_t *chld = NULL;

static void
maybe_free (ludx_proc_t *p) {
  if (p->open > 0 || !p->released || !p->exited)
    return;
  ludx_rt_untrack(&p->closer);
  for (int i = 1; i < 3; i++)
    free(p->buf[i].data);
  free(p);
}

static void
on_handle_closed (uv_handle_t *h) {
  ludx_proc_t *p = h->data;
  p->open--;
  maybe_free(p);
}

static void
close_handle (uv_handle_t *h, int *has) {
  if (!*has)
    return;
  *has = 0;
  if (!uv_is_closing(h))
    uv_close(h, on_handle_closed);
}

static void
notify_output (ludx_proc_t *p, int which) {
  outbuf_t *b = &p->buf[which];
  if (b->posted)
    return;
  b->posted = 1;
  ludx_rt_post(p->rt, LUDX_EV_PROC_OUTPUT, p->ref, which, 0);
}

static void
on_alloc (uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  ludx_proc_t *p = h->data;
  int which = (h == (uv_handle_t *) &p->err) ? LUDX_PROC_STDERR : LUDX_PROC_STDOUT;
  outbuf_t *b = &p->buf[which];
  if (suggested < 65536)
    suggested = 65536;
  if (b->cap - b->len < suggested) {
    size_t cap = b->cap ? b->cap : 65536;
    while (cap - b->len < suggested)
      cap *= 2;
    char *d = realloc(b->data, cap);
    if (d == NULL) {
      buf->base = NULL;
      buf->len = 0;
      return;
    }
    b->data = d;
    b->cap = cap;
  }
  buf->base = b->data + b->len;
  buf->len = b->cap - b->len;
}

static void
on_read (uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  ludx_proc_t *p = s->data;
  int which = (s == (uv_stream_t *) &p->err) ? LUDX_PROC_STDERR : LUDX_PROC_STDOUT;
  outbuf_t *b = &p->buf[which];
  (void) buf;
  if (n > 0) {
    b->len += n;
    if (b->len >= LUDX_PROC_HIGH_WATER)
      uv_read_stop(s);
    notify_output(p, which);
  } else if (n < 0) {
    // EOF, or EIO from a pty master once the child side closed
    uv_read_stop(s);
    b->eof = 1;
    notify_output(p, which);
  }
}

static void
on_exit_status (ludx_proc_t *p, int64_t status, int term_signal) {
  if (p->exited)
    return;
  p->exited = 1;
  p->status = status;
  p->term_signal = term_signal;
  ludx_rt_post(p->rt, LUDX_EV_PROC_EXIT, p->ref, status, term_signal);
}

static void
on_uv_exit (uv_process_t *h, int64_t status, int term_signal) {
  ludx_proc_t *p = h->data;
  on_exit_status(p, status, term_signal);
  close_handle((uv_handle_t *) &p->proc, &p->has_proc);
}

static void
unlink_pty (ludx_proc_t *p) {
  for (ludx_proc_t **pp = &pty_list; *pp; pp = &(*pp)->next_pty) {
    if (*pp == p) {
      *pp = p->next_pty;
      break;
    }
  }
  if (pty_list == NULL && chld != NULL) {
    uv_close((uv_handle_t *) chld, (uv_close_cb) free);
    chld = NULL;
  }
}

static void
on_sigchld (uv_signal_t *h, int signum) {
  (void) h;
  (void) signum;
  ludx_proc_t *p = pty_list;
  while (p) {
    ludx_proc_t *next = p->next_pty;
    int st;
    pid_t r = waitpid(p->pid, &st, WNOHANG);
    if (r == p->pid) {
      unlink_pty(p);
      if (WIFEXITED(st))
        on_exit_status(p, WEXITSTATUS(st), 0);
      else if (WIFSIGNALED(st))
        on_exit_status(p, 0, WTERMSIG(st));
      maybe_free(p);
    }
    p = next;
  }
}

static int
spawn_pty (ludx_rt_t *rt, ludx_proc_t *p, const ludx_proc_opts_t *o) {
  struct winsize ws = {.ws_row = o->rows > 0 ? o->rows : 24, .ws_col = o->cols > 0 ? o->cols : 80};
  if (chld == NULL) {
    chld = malloc(sizeof(*chld));
    if (chld == NULL)
      return UV_ENOMEM;
    uv_signal_init(&rt->loop, chld);
    uv_signal_start(chld, on_sigchld, SIGCHLD);
    uv_unref((uv_handle_t *) chld);
  }
  int master = -1;
  pid_t pid = forkpty(&master, NULL, NULL, &ws);
  if (pid < 0)
    return uv_translate_sys_error(errno);
  if (pid == 0) {
    // child: only async-signal-safe work until exec
    signal(SIGPIPE, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    if (o->cwd && chdir(o->cwd) != 0)
      _exit(127);
    if (o->env)
      execve(o->file, o->args, o->env);
    else
      execvp(o->file, o->args);
    _exit(127);
  }
  p->pid = pid;
  p->pty = 1;
  uv_pipe_init(&rt->loop, &p->out, 0);
  p->out.data = p;
  int err = uv_pipe_open(&p->out, master);
  if (err < 0) {
    close(master);
    return err;
  }
  p->has_out = 1;
  p->open++;
  p->next_pty = pty_list;
  pty_list = p;
  uv_read_start((uv_stream_t *) &p->out, on_alloc, on_read);
  return 0;
}

static int
spawn_pipes (ludx_rt_t *rt, ludx_proc_t *p, const ludx_proc_opts_t *o) {
  uv_stdio_container_t stdio[3];
  uv_pipe_init(&rt->loop, &p->in, 0);
  uv_pipe_init(&rt->loop, &p->out, 0);
  uv_pipe_init(&rt->loop, &p->err, 0);
  p->in.data = p->out.data = p->err.data = p;
  p->has_in = p->has_out = p->has_err = 1;
  p->open += 3;
  stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
  stdio[0].data.stream = (uv_stream_t *) &p->in;
  stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[1].data.stream = (uv_stream_t *) &p->out;
  if (o->stderr_mode == LUDX_PROC_STDERR_INHERIT) {
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = 2;
  } else {
    stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[2].data.stream = (uv_stream_t *) &p->err;
  }
  uv_process_options_t po;
  memset(&po, 0, sizeof(po));
  po.file = o->file;
  po.args = o->args;
  po.env = o->env;
  po.cwd = o->cwd;
  po.exit_cb = on_uv_exit;
  po.stdio = stdio;
  po.stdio_count = 3;
  p->proc.data = p;
  int err = uv_spawn(&rt->loop, &p->proc, &po);
  if (err < 0) {
    // uv_spawn failed: the process handle still needs closing
    p->exited = 1;
    p->open++;
    p->has_proc = 1;
    close_handle((uv_handle_t *) &p->proc, &p->has_proc);
    close_handle((uv_handle_t *) &p->in, &p->has_in);
    close_handle((uv_handle_t *) &p->out, &p->has_out);
    close_handle((uv_handle_t *) &p->err, &p->has_err);
    return err;
  }
  p->open++; // the process handle
  p->has_proc = 1;
  p->pid = p->proc.pid;
  uv_read_start((uv_stream_t *) &p->out, on_alloc, on_read);
  if (o->stderr_mode == LUDX_PROC_STDERR_INHERIT) {
    close_handle((uv_handle_t *) &p->err, &p->has_err);
    p->buf[LUDX_PROC_STDERR].eof = 1;
  } else {
    uv_read_start((uv_stream_t *) &p->err, on_alloc, on_read);
  }
  return 0;
}

static void
close_stdio (ludx_proc_t *p) {
  close_handle((uv_handle_t *) &p->in, &p->has_in);
  close_handle((uv_handle_t *) &p->out, &p->has_out);
  close_handle((uv_handle_t *) &p->err, &p->has_err);
}

// Runtime shutdown: a child still running is killed, so that shutdown never
// waits on it; the memory stays until the Lua side lets go too.
static void
proc_shutdown (ludx_closer_t *c) {
  ludx_proc_t *p = (ludx_proc_t *) c;
  if (!p->exited && p->pid > 0)
    kill(p->pid, SIGKILL);
  if (p->pty && !p->exited) {
    // nobody will reap it through the loop any more
    int st;
    if (waitpid(p->pid, &st, 0) == p->pid)
      on_exit_status(p, 0, SIGKILL);
    unlink_pty(p);
  }
  close_stdio(p);
  if (p->released && p->open == 0)
    maybe_free(p);
}

int
ludx_proc_spawn (ludx_rt_t *rt, const ludx_proc_opts_t *o, uint32_t ref, ludx_proc_t **out) {
  if (o->file == NULL || o->args == NULL || o->args[0] == NULL)
    return UV_EINVAL;
  ludx_proc_t *p = calloc(1, sizeof(*p));
  if (p == NULL)
    return UV_ENOMEM;
  p->rt = rt;
  p->ref = ref;
  int err = o->pty ? spawn_pty(rt, p, o) : spawn_pipes(rt, p, o);
  if (err < 0) {
    p->released = 1;
    p->exited = 1;
    if (p->open == 0) {
      free(p);
    }
    return err;
  }
  ludx_rt_track(rt, &p->closer, proc_shutdown);
  *out = p;
  return 0;
}

typedef struct {
  uv_write_t req;
  char data[];
} write_req_t;

static void
on_written (uv_write_t *req, int status) {
  (void) status; // a child that closed its stdin is not our error to report
  free(req);
}

int
ludx_proc_write (ludx_proc_t *p, const char *data, size_t len) {
  uv_stream_t *s = p->pty ? (uv_stream_t *) &p->out : (uv_stream_t *) &p->in;
  if (p->pty ? !p->has_out : !p->has_in)
    return UV_EPIPE;
  write_req_t *w = malloc(sizeof(*w) + len);
  if (w == NULL)
    return UV_ENOMEM;
  memcpy(w->data, data, len);
  uv_buf_t b = uv_buf_init(w->data, len);
  int err = uv_write(&w->req, s, &b, 1, on_written);
  if (err < 0)
    free(w);
  return err;
}

int
ludx_proc_close_stdin (ludx_proc_t *p) {
  if (p->pty)
    return ludx_proc_write(p, "\x04", 1);
  close_handle((uv_handle_t *) &p->in, &p->has_in);
  return 0;
}

const char *
ludx_proc_output (ludx_proc_t *p, int which, size_t *len, int *eof) {
  outbuf_t *b = &p->buf[which == LUDX_PROC_STDERR ? 2 : 1];
  *len = b->len;
  *eof = b->eof;
  return b->data;
}

void
ludx_proc_consume (ludx_proc_t *p, int which, size_t n) {
  which = which == LUDX_PROC_STDERR ? 2 : 1;
  outbuf_t *b = &p->buf[which];
  if (n > b->len)
    n = b->len;
  if (n > 0) { // nothing buffered yet: data is still NULL
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
  }
  if (b->len == 0)
    b->posted = 0;
  uv_pipe_t *pipe = which == 2 ? &p->err : &p->out;
  int has = which == 2 ? p->has_err : p->has_out;
  if (has && !b->eof && b->len < LUDX_PROC_HIGH_WATER && !uv_is_active((uv_handle_t *) pipe)) {
    uv_read_start((uv_stream_t *) pipe, on_alloc, on_read);
  }
}

int
ludx_proc_kill (ludx_proc_t *p, int signum) {
  if (p->exited)
    return UV_ESRCH;
  if (kill(p->pid, signum) != 0)
    return uv_translate_sys_error(errno);
  return 0;
}

int
ludx_proc_pid (ludx_proc_t *p) {
  return p->pid;
}

int
ludx_proc_exited (ludx_proc_t *p, int64_t *status, int *term_signal) {
  if (!p->exited)
    return 0;
  *status = p->status;
  *term_signal = p->term_signal;
  return 1;
}

int
ludx_proc_resize (ludx_proc_t *p, int rows, int cols) {
  if (!p->pty || !p->has_out)
    return UV_EINVAL;
  struct winsize ws = {.ws_row = rows, .ws_col = cols};
  uv_os_fd_t fd;
  if (uv_fileno((uv_handle_t *) &p->out, &fd) < 0)
    return UV_EBADF;
  if (ioctl(fd, TIOCSWINSZ, &ws) != 0)
    return uv_translate_sys_error(errno);
  return 0;
}

void
ludx_proc_release (ludx_proc_t *p) {
  if (p->released)
    return;
  p->released = 1;
  close_stdio(p);
  maybe_free(p);
}
