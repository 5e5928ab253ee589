// ludx-pathemu: a UDP relay that emulates a path (rate, delay, queue, loss,
// reordering, duplication) between two endpoints, for kernels without netem.
// One thread, epoll; datagrams move in recvmmsg/sendmmsg batches and leave
// at their delivery time by an absolute CLOCK_MONOTONIC timerfd (with 1 ns
// timer slack), so timing is good to tens of microseconds, not 1 ms ticks.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "link.h"
#include "options.h"
#include "sched.h"

#define MAX_DGRAM   65536
#define READ_ROUNDS 16 // recvmmsg calls per socket per wakeup, so timers are not starved
#define SOCK_BUF    (8 * 1024 * 1024)

typedef struct {
  pathemu_options_t opt;
  pathemu_link_t link[2];
  pathemu_sched_t sched;
  int sock[2]; // [0]: port_a (A talks to it), [1]: port_b
  int epfd, tfd, sfd;
  struct sockaddr_storage peer[2]; // [0] = A, [1] = B
  bool known[2];
  uint64_t armed_ns;
  // receive batch
  struct mmsghdr *rmsg;
  struct iovec *riov;
  struct sockaddr_storage *rfrom;
  uint8_t *rbuf;
  // send batch, one per output socket
  struct mmsghdr *smsg[2];
  struct iovec *siov[2];
  pathemu_pkt_t *spkt[2];
  int slen[2];
  char line[4096];
  size_t line_len;
  bool quit;
  const char *reason;
} emu_t;

static uint64_t
now_ns (void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static socklen_t
addr_len (const struct sockaddr_storage *a) {
  return a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static void
addr_str (const struct sockaddr_storage *a, char *out, size_t len) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *) a;
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
    port = ntohs(in->sin_port);
    snprintf(out, len, "%s:%d", host, port);
  } else {
    const struct sockaddr_in6 *in = (const struct sockaddr_in6 *) a;
    inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
    port = ntohs(in->sin6_port);
    snprintf(out, len, "[%s]:%d", host, port);
  }
}

static int
open_socket (const char *host, int port, int *out_port) {
  struct sockaddr_storage addr;
  char spec[96];
  snprintf(spec, sizeof(spec), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port ? port : 1);
  if (pathemu_parse_addr(spec, &addr) != 0)
    return -EINVAL;
  if (port == 0)
    ((struct sockaddr_in *) &addr)->sin_port = 0; // same offset in sockaddr_in6

  int fd = socket(addr.ss_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  int size = SOCK_BUF;
  // root may exceed net.core.*mem_max; otherwise the kernel caps the value
  if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
  }
  if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) != 0) {
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
  }
  if (bind(fd, (struct sockaddr *) &addr, addr_len(&addr)) != 0) {
    int e = -errno;
    close(fd);
    return e;
  }
  socklen_t sl = sizeof(addr);
  getsockname(fd, (struct sockaddr *) &addr, &sl);
  *out_port = ntohs(((struct sockaddr_in *) &addr)->sin_port);
  return fd;
}

static void
print_link_stats (FILE *f, const pathemu_link_stats_t *s) {
  fprintf(
      f,
      "{\"received\":%llu,\"forwarded\":%llu,\"bytes_forwarded\":%llu,\"dropped_loss\":%llu,"
      "\"dropped_queue\":%llu,\"duplicated\":%llu,\"reordered\":%llu,\"dropped_no_peer\":%llu,"
      "\"send_errors\":%llu,\"max_queue\":%u,\"late_avg_us\":%.1f,\"late_max_us\":%.1f}",
      (unsigned long long) s->received,
      (unsigned long long) s->forwarded,
      (unsigned long long) s->bytes_forwarded,
      (unsigned long long) s->dropped_loss,
      (unsigned long long) s->dropped_queue,
      (unsigned long long) s->duplicated,
      (unsigned long long) s->reordered,
      (unsigned long long) s->dropped_no_peer,
      (unsigned long long) s->send_errors,
      s->max_queue,
      s->forwarded ? (double) s->late_ns_sum / (double) s->forwarded / 1e3 : 0.0,
      (double) s->late_ns_max / 1e3
  );
}

static void
print_stats (emu_t *e, bool final) {
  char a[80] = "", b[80] = "";
  if (e->known[0])
    addr_str(&e->peer[0], a, sizeof(a));
  if (e->known[1])
    addr_str(&e->peer[1], b, sizeof(b));
  printf("{\"event\":\"stats\",\"final\":%s", final ? "true" : "false");
  if (final)
    printf(",\"reason\":\"%s\"", e->reason);
  printf(",\"a\":\"%s\",\"b\":\"%s\",\"queued\":%zu,\"ab\":", a, b, e->sched.len);
  print_link_stats(stdout, &e->link[PATHEMU_AB].stats);
  printf(",\"ba\":");
  print_link_stats(stdout, &e->link[PATHEMU_BA].stats);
  printf("}\n");
  fflush(stdout);
}

static void
flush_sends (emu_t *e, int out) {
  int n = e->slen[out];
  int done = 0;
  // datagrams from sock[out] go to the endpoint on that side
  pathemu_link_t *link = &e->link[out == 1 ? PATHEMU_AB : PATHEMU_BA];
  while (done < n) {
    int r = sendmmsg(e->sock[out], e->smsg[out] + done, (unsigned) (n - done), 0);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      // this datagram is refused (EAGAIN, ECONNREFUSED, ...): count it, go on
      link->stats.send_errors++;
      done++;
      continue;
    }
    for (int i = done; i < done + r; i++) {
      link->stats.forwarded++;
      link->stats.bytes_forwarded += e->spkt[out][i].len;
    }
    done += r;
  }
  for (int i = 0; i < n; i++)
    pathemu_sched_release(&e->sched, &e->spkt[out][i]);
  e->slen[out] = 0;
}

// Sends every datagram whose delivery time has come.
static void
deliver_due (emu_t *e) {
  uint64_t now = now_ns();
  const pathemu_pkt_t *top;
  while ((top = pathemu_sched_peek(&e->sched)) != NULL) {
    if (top->at_ns > now) {
      if (e->slen[0] == 0 && e->slen[1] == 0)
        break;
      // flush what is batched, then look at the clock again
      for (int s = 0; s < 2; s++) {
        if (e->slen[s])
          flush_sends(e, s);
      }
      now = now_ns();
      continue;
    }
    pathemu_pkt_t pkt;
    pathemu_sched_pop(&e->sched, &pkt);
    // how late it leaves against its schedule (the send syscall not included)
    pathemu_link_stats_t *st = &e->link[pkt.dir].stats;
    uint64_t late = now - pkt.at_ns;
    st->late_ns_sum += late;
    if (late > st->late_ns_max)
      st->late_ns_max = late;
    // A->B leaves from port_b towards B; B->A leaves from port_a towards A
    int out = pkt.dir == PATHEMU_AB ? 1 : 0;
    if (!e->known[out]) {
      e->link[pkt.dir].stats.dropped_no_peer++;
      pathemu_sched_release(&e->sched, &pkt);
      continue;
    }
    int i = e->slen[out]++;
    e->spkt[out][i] = pkt;
    e->siov[out][i] = (struct iovec){.iov_base = pkt.data, .iov_len = pkt.len};
    struct msghdr *h = &e->smsg[out][i].msg_hdr;
    memset(h, 0, sizeof(*h));
    h->msg_name = &e->peer[out];
    h->msg_namelen = addr_len(&e->peer[out]);
    h->msg_iov = &e->siov[out][i];
    h->msg_iovlen = 1;
    if (e->slen[out] == e->opt.batch)
      flush_sends(e, out);
  }
  for (int s = 0; s < 2; s++) {
    if (e->slen[s])
      flush_sends(e, s);
  }
}

// Arms the timer for the next delivery; with --spin, that much earlier (the
// loop then polls without sleeping until the delivery is due).
static void
arm_timer (emu_t *e) {
  const pathemu_pkt_t *top = pathemu_sched_peek(&e->sched);
  uint64_t at = top ? top->at_ns : 0;
  if (at > e->opt.spin_ns)
    at -= e->opt.spin_ns;
  else if (at)
    at = 1;
  if (at == e->armed_ns)
    return;
  struct itimerspec its = {0};
  its.it_value.tv_sec = (time_t) (at / 1000000000ULL);
  its.it_value.tv_nsec = (long) (at % 1000000000ULL);
  timerfd_settime(e->tfd, TFD_TIMER_ABSTIME, &its, NULL); // at 0: disarm
  e->armed_ns = at;
}

// Reads datagrams that arrived on sock[side] (side 0: from A, 1: from B).
static void
read_socket (emu_t *e, int side) {
  int dir = side == 0 ? PATHEMU_AB : PATHEMU_BA;
  for (int round = 0; round < READ_ROUNDS; round++) {
    for (int i = 0; i < e->opt.batch; i++) {
      e->rmsg[i].msg_hdr.msg_namelen = sizeof(struct sockaddr_storage);
      e->rmsg[i].msg_hdr.msg_flags = 0;
    }
    int n = recvmmsg(e->sock[side], e->rmsg, (unsigned) e->opt.batch, MSG_DONTWAIT, NULL);
    if (n <= 0)
      return; // EAGAIN, or an ICMP error queued on the socket
    uint64_t now = now_ns();
    for (int i = 0; i < n; i++) {
      // learn the endpoint from its latest datagram unless it was given
      if (!e->opt.fixed[side]) {
        memcpy(&e->peer[side], &e->rfrom[i], sizeof(struct sockaddr_storage));
        e->known[side] = true;
      }
      size_t len = e->rmsg[i].msg_len;
      if (e->rmsg[i].msg_hdr.msg_flags & MSG_TRUNC)
        len = MAX_DGRAM;
      uint64_t at[PATHEMU_MAX_COPIES];
      int copies = pathemu_link_arrive(&e->link[dir], now, len, at);
      for (int c = 0; c < copies; c++) {
        if (pathemu_sched_push(&e->sched, at[c], (uint8_t) dir, e->riov[i].iov_base, len) != 0) {
          e->link[dir].stats.dropped_queue++;
        }
      }
    }
    if (n < e->opt.batch)
      return;
  }
}

static void
handle_command (emu_t *e, char *line) {
  char *argv[64];
  int argc = 0;
  for (char *tok = strtok(line, " \t\r"); tok && argc < 64; tok = strtok(NULL, " \t\r"))
    argv[argc++] = tok;
  if (argc == 0)
    return;
  if (strcmp(argv[0], "stats") == 0) {
    print_stats(e, false);
  } else if (strcmp(argv[0], "quit") == 0) {
    e->quit = true;
    e->reason = "quit";
  } else if (strcmp(argv[0], "set") == 0) {
    char err[160];
    pathemu_options_t next = e->opt;
    if (pathemu_options_parse(&next, argc - 1, argv + 1, true, err, sizeof(err)) != 0) {
      // the message quotes user input: keep the JSON valid
      for (char *c = err; *c; c++) {
        if (*c == '"' || *c == '\\' || (unsigned char) *c < 0x20)
          *c = '?';
      }
      printf("{\"event\":\"error\",\"message\":\"%s\"}\n", err);
    } else {
      e->opt = next;
      for (int d = 0; d < 2; d++)
        pathemu_link_configure(&e->link[d], &e->opt.link[d]);
      printf("{\"event\":\"set\",\"ok\":true}\n");
    }
    fflush(stdout);
  } else {
    printf("{\"event\":\"error\",\"message\":\"unknown command\"}\n");
    fflush(stdout);
  }
}

static void
read_stdin (emu_t *e) {
  for (;;) {
    ssize_t r = read(STDIN_FILENO, e->line + e->line_len, sizeof(e->line) - 1 - e->line_len);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0 && errno == EAGAIN)
      return;
    if (r <= 0) {
      if (!e->quit)
        e->reason = "stdin closed";
      e->quit = true;
      return;
    }
    e->line_len += (size_t) r;
    char *start = e->line;
    char *nl;
    while (!e->quit && (nl = memchr(start, '\n', e->line_len - (size_t) (start - e->line))) != NULL) {
      *nl = '\0';
      handle_command(e, start);
      start = nl + 1;
    }
    if (e->quit)
      return;
    e->line_len -= (size_t) (start - e->line);
    memmove(e->line, start, e->line_len);
    if (e->line_len == sizeof(e->line) - 1)
      e->line_len = 0; // an overlong line is dropped
  }
}

static int
setup (emu_t *e) {
  int b = e->opt.batch;
  e->rmsg = calloc((size_t) b, sizeof(struct mmsghdr));
  e->riov = calloc((size_t) b, sizeof(struct iovec));
  e->rfrom = calloc((size_t) b, sizeof(struct sockaddr_storage));
  e->rbuf = malloc((size_t) b * MAX_DGRAM);
  if (!e->rmsg || !e->riov || !e->rfrom || !e->rbuf)
    return -ENOMEM;
  for (int i = 0; i < b; i++) {
    e->riov[i] = (struct iovec){.iov_base = e->rbuf + (size_t) i * MAX_DGRAM, .iov_len = MAX_DGRAM};
    e->rmsg[i].msg_hdr.msg_iov = &e->riov[i];
    e->rmsg[i].msg_hdr.msg_iovlen = 1;
    e->rmsg[i].msg_hdr.msg_name = &e->rfrom[i];
  }
  for (int s = 0; s < 2; s++) {
    e->smsg[s] = calloc((size_t) b, sizeof(struct mmsghdr));
    e->siov[s] = calloc((size_t) b, sizeof(struct iovec));
    e->spkt[s] = calloc((size_t) b, sizeof(pathemu_pkt_t));
    if (!e->smsg[s] || !e->siov[s] || !e->spkt[s])
      return -ENOMEM;
  }
  for (int d = 0; d < 2; d++) {
    if (pathemu_link_init(&e->link[d], &e->opt.link[d], e->opt.seed + (uint64_t) d) != 0)
      return -ENOMEM;
  }
  pathemu_sched_init(&e->sched);
  for (int s = 0; s < 2; s++) {
    e->known[s] = e->opt.fixed[s];
    if (e->known[s])
      e->peer[s] = e->opt.addr[s];
  }
  return 0;
}

static int
run (emu_t *e) {
  int ports[2];
  for (int s = 0; s < 2; s++) {
    e->sock[s] = open_socket(e->opt.host, s == 0 ? e->opt.port_a : e->opt.port_b, &ports[s]);
    if (e->sock[s] < 0) {
      fprintf(stderr, "ludx-pathemu: cannot bind %s: %s\n", e->opt.host, strerror(-e->sock[s]));
      return 1;
    }
  }
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0); // hrtimers fire on time, not 50 us late
  e->epfd = epoll_create1(EPOLL_CLOEXEC);
  e->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  signal(SIGPIPE, SIG_IGN);
  e->sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (e->epfd < 0 || e->tfd < 0 || e->sfd < 0) {
    perror("ludx-pathemu");
    return 1;
  }
  struct epoll_event ev = {.events = EPOLLIN};
  int fds[4] = {e->sock[0], e->sock[1], e->tfd, e->sfd};
  for (int i = 0; i < 4; i++) {
    ev.data.fd = fds[i];
    epoll_ctl(e->epfd, EPOLL_CTL_ADD, fds[i], &ev);
  }
  if (e->opt.watch_stdin) {
    fcntl(STDIN_FILENO, F_SETFL, fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK);
    ev.data.fd = STDIN_FILENO;
    // a regular file or /dev/null cannot be polled: then stdin is not watched
    if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, STDIN_FILENO, &ev) != 0)
      e->opt.watch_stdin = false;
  }

  printf("{\"event\":\"ready\",\"host\":\"%s\",\"port_a\":%d,\"port_b\":%d}\n", e->opt.host, ports[0], ports[1]);
  fflush(stdout);

  struct epoll_event evs[8];
  while (!e->quit) {
    // a delivery due within --spin: poll instead of sleeping, since waking
    // from idle costs ~0.1 ms on some machines
    int timeout = -1;
    const pathemu_pkt_t *top = pathemu_sched_peek(&e->sched);
    if (e->opt.spin_ns && top && top->at_ns <= now_ns() + e->opt.spin_ns)
      timeout = 0;
    int n = epoll_wait(e->epfd, evs, 8, timeout);
    if (n < 0 && errno != EINTR) {
      perror("ludx-pathemu: epoll_wait");
      return 1;
    }
    for (int i = 0; i < n; i++) {
      int fd = evs[i].data.fd;
      if (fd == e->sock[0])
        read_socket(e, 0);
      else if (fd == e->sock[1])
        read_socket(e, 1);
      else if (fd == e->tfd) {
        uint64_t ticks;
        ssize_t r = read(e->tfd, &ticks, sizeof(ticks));
        (void) r;
        e->armed_ns = 0; // a fired timer is disarmed
      } else if (fd == e->sfd) {
        struct signalfd_siginfo si;
        ssize_t r = read(e->sfd, &si, sizeof(si));
        (void) r;
        e->quit = true;
        e->reason = si.ssi_signo == SIGINT ? "SIGINT" : "SIGTERM";
      } else if (fd == STDIN_FILENO) {
        read_stdin(e);
      }
    }
    deliver_due(e);
    arm_timer(e);
  }
  print_stats(e, true);
  return 0;
}

int
main (int argc, char **argv) {
  static emu_t emu;
  char err[160];
  pathemu_options_default(&emu.opt);
  int rc = pathemu_options_parse(&emu.opt, argc - 1, argv + 1, false, err, sizeof(err));
  if (rc == 1) {
    pathemu_options_usage(stdout);
    return 0;
  }
  if (rc != 0) {
    fprintf(stderr, "ludx-pathemu: %s (see --help)\n", err);
    return 2;
  }
  if (setup(&emu) != 0) {
    fprintf(stderr, "ludx-pathemu: out of memory\n");
    return 1;
  }
  emu.reason = "";
  return run(&emu);
}
