// Self-test of ludx-pathemu: runs the real binary between two UDP sockets of
// this process and checks its timing (RTT through 20 ms each way, the rate
// of a 100 Mbit/s bottleneck), its seeded loss statistics, tail drop at the
// queue limit, reordering/duplication, address learning and the "set"
// command.   usage: pathemu-selftest PATH_TO_LUDX_PATHEMU CASE (--list: the cases)
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *emu_path;
static int failures;
// LUDX_PATHEMU_STRICT=1 (make pathemu-check, on an idle machine): the timing
// cases hold the emulator to 1 ms and 3%. Without it (ctest, make test) they
// assert only what load cannot break: never early, never faster than the link,
// and no gross error such as a doubled delay.
static bool strict;

#define CHECK(cond, ...)                                     \
  do {                                                       \
    if (!(cond)) {                                           \
      failures++;                                            \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      printf(__VA_ARGS__);                                   \
      printf("\n");                                          \
    }                                                        \
  } while (0)

static uint64_t
now_ns (void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static void
sleep_until (uint64_t t) {
  struct timespec ts = {.tv_sec = (time_t) (t / 1000000000ULL), .tv_nsec = (long) (t % 1000000000ULL)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

// --- the emulator process ---------------------------------------------------

typedef struct {
  pid_t pid;
  int in;    // its stdin
  FILE *out; // its stdout
  int port_a, port_b;
  char stats[4096];
} emu_t;

static int
json_int (const char *s, const char *key, long long *out) {
  char pat[64];
  snprintf(pat, sizeof(pat), "\"%s\":", key);
  const char *p = strstr(s, pat);
  if (p == NULL)
    return -1;
  *out = strtoll(p + strlen(pat), NULL, 10);
  return 0;
}

// Reads a counter of direction "ab" or "ba" from the last stats line.
static long long
stat_of (emu_t *e, const char *dir, const char *key) {
  char pat[8];
  snprintf(pat, sizeof(pat), "\"%s\":{", dir);
  const char *p = strstr(e->stats, pat);
  long long v = -1;
  if (p == NULL || json_int(p, key, &v) != 0)
    return -1;
  return v;
}

static void
emu_start (emu_t *e, const char *const *args) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0)
    abort();
  const char *argv[64];
  int n = 0;
  argv[n++] = emu_path;
  for (int i = 0; args[i] && n < 63; i++)
    argv[n++] = args[i];
  argv[n] = NULL;
  e->pid = fork();
  if (e->pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    execv(emu_path, (char *const *) argv);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  e->in = in[1];
  e->out = fdopen(out[0], "r");
  char line[512];
  long long a = 0, b = 0;
  if (fgets(line, sizeof(line), e->out) == NULL || json_int(line, "port_a", &a) || json_int(line, "port_b", &b)) {
    printf("FAIL: no ready line from %s\n", emu_path);
    exit(1);
  }
  e->port_a = (int) a;
  e->port_b = (int) b;
}

static void
emu_command (emu_t *e, const char *cmd) {
  char line[512];
  if (write(e->in, cmd, strlen(cmd)) < 0)
    abort();
  if (fgets(line, sizeof(line), e->out) == NULL)
    abort();
  if (strncmp(cmd, "stats", 5) == 0)
    snprintf(e->stats, sizeof(e->stats), "%s", line);
}

// Closes its stdin; it prints the final stats and exits.
static void
emu_stop (emu_t *e) {
  close(e->in);
  e->stats[0] = '\0';
  char line[4096];
  while (fgets(line, sizeof(line), e->out) != NULL) {
    if (strstr(line, "\"final\":true"))
      snprintf(e->stats, sizeof(e->stats), "%s", line);
  }
  fclose(e->out);
  int status;
  waitpid(e->pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "emulator exit status %d", status);
  CHECK(strstr(e->stats, "\"reason\":\"stdin closed\"") != NULL, "final stats: %s", e->stats);
}

// --- sockets ------------------------------------------------------------------

static int
udp_socket (int *port) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  int size = 8 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size));
  if (bind(fd, (struct sockaddr *) &a, sizeof(a)) != 0)
    abort();
  socklen_t l = sizeof(a);
  getsockname(fd, (struct sockaddr *) &a, &l);
  *port = ntohs(a.sin_port);
  return fd;
}

static void
send_to (int fd, int port, const void *buf, size_t len) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t) port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (sendto(fd, buf, len, 0, (struct sockaddr *) &a, sizeof(a)) < 0)
    perror("sendto");
}

// Receives one datagram within timeout_ms; returns its length or -1.
static ssize_t
recv_wait (int fd, void *buf, size_t len, int timeout_ms) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, timeout_ms) <= 0)
    return -1;
  return recv(fd, buf, len, 0);
}

typedef struct {
  int fd, port;
  int count;
  size_t size;
  uint64_t interval_ns; // 0 = as fast as possible
  int window;           // > 0: stay at most this many ahead of the sink's highest index
  uint64_t started, ended;
} sender_t;

// The highest index the sink has seen, for a sender with a window: a stalled
// emulator then holds the sender back instead of overflowing its socket buffer.
static int sink_highest = -1;

// Sends count datagrams of size bytes, each starting with its index (u32).
enum { BATCH = 32 };

static void *
sender_run (void *arg) {
  sender_t *s = arg;
  static __thread uint8_t bufs[BATCH][2048];
  struct mmsghdr msgs[BATCH];
  struct iovec iov[BATCH];
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t) s->port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  memset(msgs, 0, sizeof(msgs));
  s->started = now_ns();
  int i = 0;
  while (i < s->count) {
    // send what is due by now, then nap: one wakeup per ~200 us, not per datagram
    uint64_t due = s->interval_ns ? (now_ns() - s->started) / s->interval_ns + 1 : (uint64_t) s->count;
    if (s->window > 0) {
      // wait for the sink, but never forever (10 s without progress: go on)
      uint64_t waited = now_ns();
      int last = __atomic_load_n(&sink_highest, __ATOMIC_ACQUIRE);
      while (i - last > s->window && now_ns() - waited < 10000000000ull) {
        sleep_until(now_ns() + 200000);
        int h = __atomic_load_n(&sink_highest, __ATOMIC_ACQUIRE);
        if (h != last)
          last = h, waited = now_ns();
      }
      if (i - last > s->window)
        s->window = 0; // the sink stopped: send the rest unheld, never hang
      else if (due > (uint64_t) (last + s->window + 1))
        due = (uint64_t) (last + s->window + 1);
    }
    while (i < s->count && (uint64_t) i < due) {
      int n = 0;
      for (; n < BATCH && i + n < s->count && (uint64_t) (i + n) < due; n++) {
        int idx = i + n;
        memcpy(bufs[n], &idx, sizeof(idx));
        iov[n] = (struct iovec){.iov_base = bufs[n], .iov_len = s->size};
        msgs[n].msg_hdr = (struct msghdr){.msg_name = &to, .msg_namelen = sizeof(to), .msg_iov = &iov[n], .msg_iovlen = 1};
      }
      int r = sendmmsg(s->fd, msgs, (unsigned) n, 0);
      if (r <= 0) {
        perror("sendmmsg");
        r = n; // counted as sent; the receiver will miss them
      }
      i += r;
    }
    if (i < s->count)
      sleep_until(now_ns() + 200000);
  }
  s->ended = now_ns();
  return NULL;
}

typedef struct {
  int n;
  uint64_t bytes, first_len;
  uint64_t t_first, t_last;
  int inversions; // datagrams that arrived after one with a higher index
  uint8_t *seen;  // per index, how many times
} sink_t;

// Receives until idle_ms pass with nothing after the first datagram; waits up
// to 10 s for the first (an emulator starting on a loaded machine is slow).
// Set by a case whose datagrams cannot be reordered: the sink ends at the
// last index instead of waiting idle_ms.
static bool sink_stop_at_last;

static void
sink_run (int fd, sink_t *k, int max_index, int idle_ms) {
  static uint8_t bufs[BATCH][2048];
  struct mmsghdr msgs[BATCH];
  struct iovec iov[BATCH];
  int highest = -1;
  memset(k, 0, sizeof(*k));
  k->seen = calloc((size_t) max_index, 1);
  for (;;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, k->n == 0 ? 10000 : idle_ms) <= 0)
      break;
    for (int i = 0; i < BATCH; i++) {
      iov[i] = (struct iovec){.iov_base = bufs[i], .iov_len = sizeof(bufs[i])};
      msgs[i].msg_hdr = (struct msghdr){.msg_iov = &iov[i], .msg_iovlen = 1};
    }
    int n = recvmmsg(fd, msgs, BATCH, MSG_DONTWAIT, NULL);
    uint64_t t = now_ns();
    for (int i = 0; i < n; i++) {
      uint64_t len = msgs[i].msg_len;
      if (k->n == 0)
        k->t_first = t, k->first_len = len;
      k->t_last = t;
      k->n++;
      k->bytes += len;
      int idx;
      memcpy(&idx, bufs[i], sizeof(idx));
      if (idx >= 0 && idx < max_index)
        k->seen[idx]++;
      if (idx < highest)
        k->inversions++;
      if (idx > highest)
        highest = idx;
    }
    __atomic_store_n(&sink_highest, highest, __ATOMIC_RELEASE);
    if (sink_stop_at_last && highest == max_index - 1)
      break; // in order and the last one came: nothing more is on the way
  }
}

static int
cmp_u64 (const void *a, const void *b) {
  uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
  return x < y ? -1 : x > y;
}

// --- cases --------------------------------------------------------------------

// n ping-pongs A -> B -> A, one at a time; returns how many came back.
static int
ping (int a, int b, emu_t *e, uint64_t *rtt, int n) {
  uint8_t buf[64];
  int got = 0;
  for (int i = 0; i < n; i++) {
    uint64_t t0 = now_ns();
    memcpy(buf, &i, sizeof(i));
    send_to(a, e->port_a, buf, 32);
    if (recv_wait(b, buf, sizeof(buf), 1000) < 0)
      continue;
    send_to(b, e->port_b, buf, 32); // echo
    if (recv_wait(a, buf, sizeof(buf), 1000) < 0)
      continue;
    rtt[got++] = now_ns() - t0;
  }
  return got;
}

// Ping-pong through 20 ms each way: never early; strict: RTT within 1 ms of 40 ms.
static void
case_rtt (void) {
  int pa, pb;
  int a = udp_socket(&pa), b = udp_socket(&pb);
  char bspec[32];
  snprintf(bspec, sizeof(bspec), "127.0.0.1:%d", pb);
  emu_t e;
  emu_start(&e, (const char *[]){"--delay", "20ms", "--b", bspec, NULL});

  enum { N = 25 };
  uint64_t rtt[N], base[N];
  int got = ping(a, b, &e, rtt, N);
  // the same through no delay: what the sockets and wakeups cost by themselves
  emu_command(&e, "set --delay 0\n");
  int got0 = ping(a, b, &e, base, N);
  emu_stop(&e);
  CHECK(got == N && got0 == N, "%d and %d of %d pings came back", got, got0, N);
  if (got == 0 || got0 == 0)
    return;
  qsort(rtt, (size_t) got, sizeof(rtt[0]), cmp_u64);
  qsort(base, (size_t) got0, sizeof(base[0]), cmp_u64);
  double min = rtt[0] / 1e6, med = rtt[got / 2] / 1e6, p90 = rtt[got * 9 / 10] / 1e6, max = rtt[got - 1] / 1e6;
  double med0 = base[got0 / 2] / 1e6;
  printf("rtt through 20 ms + 20 ms: min %.3f median %.3f p90 %.3f max %.3f ms; through 0 ms: median %.3f ms\n", min, med, p90, max, med0);
  CHECK(min >= 40.0, "min rtt %.3f ms is below 40 ms", min);
  if (strict) {
    CHECK(med < 41.0, "median rtt %.3f ms", med);
    CHECK(p90 < 41.0, "p90 rtt %.3f ms", p90);
  } else {
    // a loaded machine adds its own wake-up cost (med0) and some; a doubled
    // or ignored delay still fails
    CHECK(med < 40.0 + med0 + 20.0, "median rtt %.3f ms (no-delay median %.3f)", med, med0);
    CHECK(med0 < min, "no-delay median %.3f ms not below the delayed min %.3f", med0, min);
  }
  CHECK(stat_of(&e, "ab", "forwarded") == 2 * N && stat_of(&e, "ba", "forwarded") == 2 * N, "%s", e.stats);
  close(a);
  close(b);
}

// 1200-byte datagrams offered at ~130 Mbit/s into a 100 Mbit/s bottleneck
// with room for all of them: about the link's rate; strict: the received rate
// is within 3% of 100 Mbit/s.
// (pathemu-selftest EMU rate MBIT tries another rate, unchecked, by hand.)
static void
case_rate (int mbit) {
  int pa, pb;
  int a = udp_socket(&pa), b = udp_socket(&pb);
  char bspec[32], rspec[32];
  snprintf(bspec, sizeof(bspec), "127.0.0.1:%d", pb);
  snprintf(rspec, sizeof(rspec), "%dM", mbit);
  emu_t e;
  emu_start(&e, (const char *[]){"--rate", rspec, "--queue", "0", "--delay", "1ms", "--b", bspec, NULL});

  enum { SIZE = 1200 };
  int N = 60 * mbit; // 0.58 s at the rate
  // offered at 1.3 x the rate, so the bottleneck never idles
  sender_t s = {.fd = a, .port = e.port_a, .count = N, .size = SIZE, .interval_ns = (uint64_t) (SIZE * 8 * 1000.0 / (1.3 * mbit))};
  pthread_t th;
  pthread_create(&th, NULL, sender_run, &s);
  sink_t k;
  sink_stop_at_last = true; // no loss, no reorder: the last one ends it
  sink_run(b, &k, N, 3000);
  sink_stop_at_last = false;
  pthread_join(th, NULL);
  emu_stop(&e);

  double secs = (k.t_last - k.t_first) / 1e9;
  double rate = secs > 0 ? (double) (k.bytes - k.first_len) * 8 / secs : 0;
  double want = mbit * 1e6;
  printf("rate through %d Mbit/s: %d datagrams, %.2f Mbit/s received (%.2f%% off), offered %.1f Mbit/s, max queue %lld, late avg %lld us\n", mbit, k.n, rate / 1e6, (rate / want - 1) * 100, (double) N * SIZE * 8 / ((s.ended - s.started) / 1e9) / 1e6, stat_of(&e, "ab", "max_queue"), stat_of(&e, "ab", "late_avg_us"));
  CHECK(k.n == N, "received %d of %d", k.n, N);
  // not strict: a late wake-up releases a catch-up burst, so the span from
  // first to last shrinks; the unlimited 1.3 x offered rate still fails
  CHECK(rate < want * (strict ? 1.03 : 1.2), "rate %.3f Mbit/s", rate / 1e6);
  CHECK(rate > want * (strict ? 0.97 : 0.5), "rate %.3f Mbit/s", rate / 1e6);
  close(a);
  close(b);
  free(k.seen);
}

static long long
run_loss (uint64_t seed, int n, int *received) {
  // the sink stops at the last datagram, or after 3 s without one (a loaded
  // machine stalled the emulator past 300 ms and the sink gave up early)
  sink_stop_at_last = true;
  int pa, pb;
  int a = udp_socket(&pa), b = udp_socket(&pb);
  char bspec[32], sspec[32];
  snprintf(bspec, sizeof(bspec), "127.0.0.1:%d", pb);
  snprintf(sspec, sizeof(sspec), "%llu", (unsigned long long) seed);
  emu_t e;
  emu_start(&e, (const char *[]){"--loss", "10%", "--seed", sspec, "--b", bspec, NULL});
  // a window of 1,000 (about 1 MB of socket buffer): a stalled emulator or
  // sink must not make the kernel drop what the counts below compare
  sender_t s = {.fd = a, .port = e.port_a, .count = n, .size = 100, .interval_ns = 20000, .window = 1000};
  __atomic_store_n(&sink_highest, -1, __ATOMIC_RELEASE);
  pthread_t th;
  pthread_create(&th, NULL, sender_run, &s);
  sink_t k;
  sink_run(b, &k, n, 3000);
  sink_stop_at_last = false;
  pthread_join(th, NULL);
  emu_stop(&e);
  long long dropped = stat_of(&e, "ab", "dropped_loss");
  CHECK(stat_of(&e, "ab", "received") == n, "emulator got %lld of %d: %s", stat_of(&e, "ab", "received"), n, e.stats);
  CHECK(stat_of(&e, "ab", "forwarded") == k.n, "forwarded %lld, received %d", stat_of(&e, "ab", "forwarded"), k.n);
  CHECK(dropped + k.n == n, "dropped %lld + received %d != %d", dropped, k.n, n);
  *received = k.n;
  close(a);
  close(b);
  free(k.seen);
  return dropped;
}

// 10% loss: the count is within 5 sigma of the binomial mean, and the same
// seed drops the same datagrams.
static void
case_loss (void) {
  enum { N = 10000 };
  int r1, r2, r3;
  long long d1 = run_loss(42, N, &r1);
  long long d2 = run_loss(42, N, &r2);
  long long d3 = run_loss(43, N, &r3);
  printf("loss 10%% of %d: seed 42 dropped %lld and %lld, seed 43 dropped %lld (expected 1000 +- 150)\n", N, d1, d2, d3);
  CHECK(d1 > 850 && d1 < 1150, "dropped %lld", d1);
  CHECK(d3 > 850 && d3 < 1150, "dropped %lld", d3);
  CHECK(d1 == d2, "same seed, different drops: %lld vs %lld", d1, d2);
}

// A burst into a 10 Mbit/s link holding 50 datagrams: the rest is tail-dropped.
static void
case_queue (void) {
  int pa, pb;
  int a = udp_socket(&pa), b = udp_socket(&pb);
  char bspec[32];
  snprintf(bspec, sizeof(bspec), "127.0.0.1:%d", pb);
  emu_t e;
  emu_start(&e, (const char *[]){"--rate", "10M", "--queue", "50", "--b", bspec, NULL});
  enum { N = 400,
         SIZE = 1000 };
  sender_t s = {.fd = a, .port = e.port_a, .count = N, .size = SIZE, .interval_ns = 0};
  sender_run(&s);
  sink_t k;
  sink_run(b, &k, N, 2000); // a stalled emulator is not an empty link
  emu_stop(&e);
  long long qd = stat_of(&e, "ab", "dropped_queue"), got = stat_of(&e, "ab", "received");
  // while the burst lasted the link sent one datagram per 800 us
  double drained = (s.ended - s.started) / 800000.0;
  printf("queue 50 at 10 Mbit/s, burst of %d in %.2f ms (%.1f drained meanwhile): %d through, %lld tail-dropped, max queue %lld\n", N, (s.ended - s.started) / 1e6, drained, k.n, qd, stat_of(&e, "ab", "max_queue"));
  CHECK(got == N, "emulator got %lld", got);
  CHECK(qd + k.n == N, "dropped %lld + received %d != %d", qd, k.n, N);
  CHECK(stat_of(&e, "ab", "max_queue") == 50, "%s", e.stats);
  // at least the queue's 50 come through, and some are tail-dropped; how
  // many more than 50 depends on when the emulator read the burst (a loaded
  // machine runs it late while the link drains), so no upper bound beyond
  // the queue itself (max_queue above)
  CHECK(k.n >= 50 && qd > 0, "received %d, tail-dropped %lld", k.n, qd);
  // the survivors are the first ones, in order
  CHECK(k.inversions == 0, "%d out of order", k.inversions);
  close(a);
  close(b);
  free(k.seen);
}

// 20% of datagrams held back 5 ms, 10% sent twice.
static void
case_reorder (void) {
  int pa, pb;
  int a = udp_socket(&pa), b = udp_socket(&pb);
  char bspec[32];
  snprintf(bspec, sizeof(bspec), "127.0.0.1:%d", pb);
  emu_t e;
  emu_start(&e, (const char *[]){"--reorder", "0.2", "--reorder-delay", "5ms", "--dup", "0.1", "--seed", "9", "--b", bspec, NULL});
  enum { N = 2000 };
  sender_t s = {.fd = a, .port = e.port_a, .count = N, .size = 200, .interval_ns = 100000};
  pthread_t th;
  pthread_create(&th, NULL, sender_run, &s);
  sink_t k;
  sink_run(b, &k, N, 2000); // a stalled emulator is not an empty link
  pthread_join(th, NULL);
  emu_stop(&e);
  long long re = stat_of(&e, "ab", "reordered"), dup = stat_of(&e, "ab", "duplicated");
  int twice = 0, missing = 0;
  for (int i = 0; i < N; i++)
    twice += k.seen[i] == 2, missing += k.seen[i] == 0;
  printf("reorder 20%% / dup 10%% of %d: %lld delayed, %lld duplicated, %d arrived after a later one, %d twice\n", N, re, dup, k.inversions, twice);
  CHECK(missing == 0, "%d missing", missing);
  CHECK(twice == dup, "%d twice, %lld duplicated", twice, dup);
  CHECK(k.n == N + dup, "received %d", k.n);
  CHECK(dup > 130 && dup < 270, "duplicated %lld", dup);
  // each of the N + dup copies is held back with p = 0.2: 440 +- 5 sigma
  CHECK(re > 340 && re < 540, "reordered %lld", re);
  CHECK(k.inversions > 200, "only %d inversions", k.inversions);
  close(a);
  close(b);
  free(k.seen);
}

// Endpoint addresses are learned from their datagrams; before B is known,
// A's datagrams have nowhere to go. "set --ab-loss 1" blacks out A->B.
static void
case_learn (void) {
  int pa, pb;
  int a = udp_socket(&pa), b = udp_socket(&pb);
  emu_t e;
  emu_start(&e, (const char *[]){NULL});
  uint8_t buf[64] = {1};
  for (int i = 0; i < 5; i++)
    send_to(a, e.port_a, buf, 10);
  usleep(50000);
  send_to(b, e.port_b, buf, 11); // B speaks: learned; A is known already
  CHECK(recv_wait(a, buf, sizeof(buf), 1000) == 11, "B->A not delivered");
  send_to(a, e.port_a, buf, 12);
  CHECK(recv_wait(b, buf, sizeof(buf), 1000) == 12, "A->B not delivered after B was learned");
  emu_command(&e, "set --ab-loss 1\n");
  for (int i = 0; i < 10; i++)
    send_to(a, e.port_a, buf, 13);
  CHECK(recv_wait(b, buf, sizeof(buf), 200) < 0, "blackout leaked");
  emu_command(&e, "set --ab-loss 0\n");
  send_to(a, e.port_a, buf, 14);
  CHECK(recv_wait(b, buf, sizeof(buf), 1000) == 14, "A->B not delivered after the blackout");
  emu_command(&e, "stats\n");
  CHECK(strstr(e.stats, "\"final\":false") != NULL, "%s", e.stats);
  emu_stop(&e);
  printf("learning: %s", e.stats);
  CHECK(stat_of(&e, "ab", "dropped_no_peer") == 5, "%s", e.stats);
  CHECK(stat_of(&e, "ab", "dropped_loss") == 10, "%s", e.stats);
  CHECK(stat_of(&e, "ab", "forwarded") == 2 && stat_of(&e, "ba", "forwarded") == 1, "%s", e.stats);
  close(a);
  close(b);
}

static void
case_rate_100 (void) {
  case_rate(100);
}

// The cases, listed by --list for ctest (cmake/ListedCases.cmake): a case
// is one entry here. "serial" cases check the emulator's timing and run
// alone (RUN_SERIAL).
static const struct {
  const char *name;
  void (*fn)(void);
  bool serial;
} cases[] = {
    {"rtt", case_rtt, true},
    {"rate", case_rate_100, true},
    {"loss", case_loss, false},
    {"queue", case_queue, false},
    {"reorder", case_reorder, false},
    {"learn", case_learn, false},
};

int
main (int argc, char **argv) {
  size_t ncases = sizeof(cases) / sizeof(cases[0]);
  if (argc == 2 && strcmp(argv[1], "--list") == 0) {
    for (size_t i = 0; i < ncases; i++)
      printf("%s%s\n", cases[i].name, cases[i].serial ? " serial" : "");
    return 0;
  }
  if (argc < 3) {
    fprintf(stderr, "usage: %s LUDX_PATHEMU CASE [MBIT for rate]   (%s --list: the cases)\n", argv[0], argv[0]);
    return 2;
  }
  emu_path = argv[1];
  const char *st = getenv("LUDX_PATHEMU_STRICT");
  strict = st && strcmp(st, "0") != 0 && st[0] != 0;
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *c = argv[2];
  if (strcmp(c, "rate") == 0 && argc > 3) {
    case_rate(atoi(argv[3]));
  } else {
    size_t i = 0;
    while (i < ncases && strcmp(c, cases[i].name) != 0)
      i++;
    if (i == ncases) {
      fprintf(stderr, "unknown case %s\n", c);
      return 2;
    }
    cases[i].fn();
  }
  printf("%s: %s\n", c, failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
