// One end of a timed transfer driven from C only (no Lua): the same options
// and JSON lines as bench/peers/ludx-bench.lua and udx-bench.js, so the
// lua-vs-c suite shows what the binding costs.
//
//   ludx-cbench '{"role":"send","bytes":209715200,"chunk":65536}'
#include <ctype.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#include "udx.h"

typedef struct {
  char role[8];
  double bytes;
  double chunk;
  double seed;
  char hash[8];
  double id, remote_id;
  char host[64];
  double port;
  char remote_host[64];
  double remote_port;
  double timeout_ms;
  int watch_stdin;
  char ack_policy[8];
} opts_t;

static opts_t o = {"send", 200.0 * 1024 * 1024, 65536, 1, "inline", 0, 0, "127.0.0.1", 0, "127.0.0.1", 0, 120000, 1, ""};

static uv_loop_t *loop;
static udx_t *udx;
static udx_socket_t *sock;
static udx_stream_t *stream;
static uv_pipe_t in;
static uv_timer_t watchdog;
static char line[4096];
static size_t line_len;
static int connected, sender, done_sent;
static int exit_status;

static uint8_t *buf;
static size_t full, tail, written;
static crypto_generichash_state hs;
static char hash_hex[129];
static double t_start, t_end, t_first, t_connect;
static double cpu_u0, cpu_s0, cpu_u1, cpu_s1;
static double received;
// hash "after": the bytes, kept in blocks and hashed once the transfer ended
// (one growing buffer would copy everything it holds at each doubling)
#define KEPT_BLOCK (4u << 20)
static uint8_t **kept;
static size_t kept_blocks, kept_cap, kept_tail; // bytes used in the last block
static const char *error_code = NULL;

static double
wall_ms (void) {
  uv_timeval64_t tv;
  uv_gettimeofday(&tv);
  return (double) tv.tv_sec * 1000.0 + (double) tv.tv_usec / 1000.0;
}

static void
cpu_now (double *u, double *s) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  *u = ru.ru_utime.tv_sec * 1000.0 + ru.ru_utime.tv_usec / 1000.0;
  *s = ru.ru_stime.tv_sec * 1000.0 + ru.ru_stime.tv_usec / 1000.0;
}

// --- a flat JSON object parser for the one argument ------------------------

static const char *
skip_ws (const char *p) {
  while (*p && isspace((unsigned char) *p))
    p++;
  return p;
}

static const char *
parse_string (const char *p, char *out, size_t cap) {
  if (*p != '"')
    return NULL;
  p++;
  size_t n = 0;
  while (*p && *p != '"') {
    if (*p == '\\' && p[1])
      p++;
    if (n + 1 < cap)
      out[n++] = *p;
    p++;
  }
  if (*p != '"')
    return NULL;
  out[n] = 0;
  return p + 1;
}

static int
set_option (const char *key, const char *sval, double nval, int is_str, int bval, int is_bool) {
  struct {
    const char *name;
    double *num;
    char *str;
    size_t cap;
    int *flag;
  } table[] = {
      {"role", NULL, o.role, sizeof(o.role), NULL},
      {"bytes", &o.bytes, NULL, 0, NULL},
      {"chunk", &o.chunk, NULL, 0, NULL},
      {"seed", &o.seed, NULL, 0, NULL},
      {"hash", NULL, o.hash, sizeof(o.hash), NULL},
      {"id", &o.id, NULL, 0, NULL},
      {"remoteId", &o.remote_id, NULL, 0, NULL},
      {"host", NULL, o.host, sizeof(o.host), NULL},
      {"port", &o.port, NULL, 0, NULL},
      {"remoteHost", NULL, o.remote_host, sizeof(o.remote_host), NULL},
      {"remotePort", &o.remote_port, NULL, 0, NULL},
      {"timeoutMs", &o.timeout_ms, NULL, 0, NULL},
      {"watchStdin", NULL, NULL, 0, &o.watch_stdin},
      {"ackPolicy", NULL, o.ack_policy, sizeof(o.ack_policy), NULL},
      {"seedBytes", NULL, NULL, 0, NULL},
  };
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
    if (strcmp(table[i].name, key) != 0)
      continue;
    if (table[i].num && !is_str && !is_bool)
      *table[i].num = nval;
    else if (table[i].str && is_str)
      snprintf(table[i].str, table[i].cap, "%s", sval);
    else if (table[i].flag && is_bool)
      *table[i].flag = bval;
    else
      return -1;
    return 0;
  }
  return -1;
}

static int
parse_options (const char *s) {
  const char *p = skip_ws(s);
  if (*p != '{')
    return -1;
  p = skip_ws(p + 1);
  while (*p && *p != '}') {
    char key[64], sval[256];
    p = parse_string(p, key, sizeof(key));
    if (!p)
      return -1;
    p = skip_ws(p);
    if (*p != ':')
      return -1;
    p = skip_ws(p + 1);
    int r;
    if (*p == '"') {
      p = parse_string(p, sval, sizeof(sval));
      if (!p)
        return -1;
      r = set_option(key, sval, 0, 1, 0, 0);
    } else if (strncmp(p, "true", 4) == 0 || strncmp(p, "false", 5) == 0) {
      int b = *p == 't';
      p += b ? 4 : 5;
      r = set_option(key, NULL, 0, 0, b, 1);
    } else {
      char *end;
      double v = strtod(p, &end);
      if (end == p)
        return -1;
      p = end;
      r = set_option(key, NULL, v, 0, 0, 0);
    }
    if (r < 0) {
      fprintf(stdout, "{\"event\":\"error\",\"code\":\"EINVAL\",\"message\":\"unknown or bad option %s\"}\n", key);
      return -2;
    }
    p = skip_ws(p);
    if (*p == ',')
      p = skip_ws(p + 1);
  }
  return *p == '}' ? 0 : -1;
}

// --- data --------------------------------------------------------------------

static void
generate (uint8_t *out, size_t n, uint32_t seed) {
  uint32_t x = seed ? seed : 0x9e3779b9;
  for (size_t i = 0; i < n; i += 4) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    for (size_t k = 0; k < 4 && i + k < n; k++)
      out[i + k] = (uint8_t) (x >> (8 * k));
  }
}

static void
finish_hash (void) {
  unsigned char out[64];
  crypto_generichash_final(&hs, out, sizeof(out));
  sodium_bin2hex(hash_hex, sizeof(hash_hex), out, sizeof(out));
}

static void
emit_done (void) {
  if (done_sent)
    return;
  done_sent = 1;
  const udx_stream_stats_t *st = udx_stream_stats(stream);
  double ms = t_end - (sender ? t_start : (t_first > 0 ? t_first : t_connect));
  double bytes = sender ? o.bytes : received;
  printf(
      "{\"event\":\"done\",\"role\":\"%s\",\"secret\":false,\"bytes\":%.0f,\"hash\":%s%s%s,\"t_start\":%.3f,\"t_end\":%.3f,"
      "\"ms\":%.3f,\"cpu_user_ms\":%.3f,\"cpu_sys_ms\":%.3f,\"mb_per_s\":%.3f,\"retransmits\":%llu,\"rtoCount\":%llu,"
      "\"error\":%s%s%s,\"stats\":{\"mtu\":%u,\"rtt\":%.3f,\"cwnd\":%u,\"rtoCount\":%llu,\"retransmits\":%llu,"
      "\"packetsTransmitted\":%llu,\"packetsReceived\":%llu}}\n",
      o.role, bytes, o.hash[0] == 'o' ? "" : "\"", o.hash[0] == 'o' ? "null" : hash_hex, o.hash[0] == 'o' ? "" : "\"",
      sender ? t_start : (t_first > 0 ? t_first : t_connect), t_end, ms, cpu_u1 - cpu_u0, cpu_s1 - cpu_s0,
      bytes / 1e6 / (ms / 1000.0), (unsigned long long) st->retransmits, (unsigned long long) st->rto_count,
      error_code ? "\"" : "", error_code ? error_code : "null", error_code ? "\"" : "", st->mtu, st->rtt_us / 1000.0, st->cwnd,
      (unsigned long long) st->rto_count, (unsigned long long) st->retransmits, (unsigned long long) st->packets_sent,
      (unsigned long long) st->packets_received
  );
  fflush(stdout);
}

// --- the transfer ----------------------------------------------------------

static void
write_more (void) {
  while (written < full + (tail ? 1 : 0)) {
    size_t n = written < full ? (size_t) o.chunk : tail;
    written++;
    int r = udx_stream_write(stream, buf, n);
    if (r < 0) {
      error_code = uv_err_name(r);
      return;
    }
    if (r == 0)
      return; // wait for on_drain
  }
  if (udx_stream_flush(stream) == 1) {
    // nothing outstanding (an empty transfer)
    t_end = wall_ms();
    cpu_now(&cpu_u1, &cpu_s1);
    udx_stream_write_end(stream, NULL, 0);
  }
}

static void
on_drain (udx_stream_t *s) {
  (void) s;
  if (sender)
    write_more();
}

static void
on_flush (udx_stream_t *s) {
  t_end = wall_ms();
  cpu_now(&cpu_u1, &cpu_s1);
  udx_stream_write_end(s, NULL, 0);
}

static void
on_readable (udx_stream_t *s) {
  for (;;) {
    const uint8_t *p;
    size_t len;
    int r = udx_stream_read_peek(s, &p, &len);
    if (r == UV_EOF) {
      if (!sender) {
        t_end = wall_ms();
        cpu_now(&cpu_u1, &cpu_s1);
        for (size_t b = 0; b < kept_blocks; b++)
          crypto_generichash_update(&hs, kept[b], b + 1 < kept_blocks ? KEPT_BLOCK : kept_tail);
        if (o.hash[0] != 'o')
          finish_hash();
      }
      udx_stream_write_end(s, NULL, 0);
      return;
    }
    if (len == 0)
      return;
    if (!sender) {
      if (t_first == 0) {
        t_first = wall_ms();
        printf("{\"event\":\"start\",\"t\":%.3f}\n", t_first);
        fflush(stdout);
      }
      received += len;
      if (o.hash[0] == 'a') {
        size_t off = 0;
        while (off < len) {
          if (kept_blocks == 0 || kept_tail == KEPT_BLOCK) {
            if (kept_blocks == kept_cap) {
              kept_cap = kept_cap ? kept_cap * 2 : 64;
              kept = realloc(kept, kept_cap * sizeof(*kept));
              if (kept == NULL)
                abort();
            }
            kept[kept_blocks] = malloc(KEPT_BLOCK);
            if (kept[kept_blocks] == NULL)
              abort();
            kept_blocks++;
            kept_tail = 0;
          }
          size_t n = len - off < KEPT_BLOCK - kept_tail ? len - off : KEPT_BLOCK - kept_tail;
          memcpy(kept[kept_blocks - 1] + kept_tail, p + off, n);
          kept_tail += n;
          off += n;
        }
      } else if (o.hash[0] == 'i') {
        crypto_generichash_update(&hs, p, len);
      }
    }
    udx_stream_read_consume(s, len);
  }
}

static void
on_close (udx_stream_t *s, int status) {
  (void) s;
  if (status < 0 && !error_code)
    error_code = uv_err_name(status);
  if (t_end == 0) {
    t_end = wall_ms();
    cpu_now(&cpu_u1, &cpu_s1);
  }
  emit_done();
  exit_status = error_code ? 1 : 0;
  uv_stop(loop);
}

static void
start_transfer (void) {
  t_connect = wall_ms();
  cpu_now(&cpu_u0, &cpu_s0);
  if (!sender)
    return;
  t_start = wall_ms();
  printf("{\"event\":\"start\",\"t\":%.3f}\n", t_start);
  fflush(stdout);
  write_more();
}

static void
connect_to (int port, const char *host) {
  if (connected)
    return;
  connected = 1;
  struct sockaddr_storage addr;
  if (strchr(host, ':'))
    uv_ip6_addr(host, port, (struct sockaddr_in6 *) &addr);
  else
    uv_ip4_addr(host, port, (struct sockaddr_in *) &addr);
  int id = o.remote_id > 0 ? (int) o.remote_id : (sender ? 2 : 1);
  int err = udx_stream_connect(stream, sock, (uint32_t) id, (struct sockaddr *) &addr);
  if (err < 0) {
    printf("{\"event\":\"error\",\"code\":\"%s\",\"message\":\"connect failed\"}\n", uv_err_name(err));
    exit_status = 1;
    uv_stop(loop);
    return;
  }
  printf("{\"event\":\"connect\",\"remoteId\":%d,\"remotePort\":%d}\n", id, port);
  fflush(stdout);
  start_transfer();
}

static void
on_line (const char *l) {
  const char *p = strstr(l, "\"port\"");
  if (!p)
    return;
  p = strchr(p, ':');
  if (!p)
    return;
  int port = atoi(p + 1);
  char host[64];
  snprintf(host, sizeof(host), "%s", o.remote_host);
  const char *h = strstr(l, "\"host\"");
  if (h && (h = strchr(h, ':')))
    parse_string(skip_ws(h + 1), host, sizeof(host));
  if (port > 0)
    connect_to(port, host);
}

static void
on_stdin_alloc (uv_handle_t *h, size_t suggested, uv_buf_t *b) {
  (void) h;
  (void) suggested;
  static char rb[4096];
  b->base = rb;
  b->len = sizeof(rb);
}

static void
on_stdin (uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  (void) s;
  if (n < 0) {
    fprintf(stderr, "stdin closed, exiting\n");
    exit(3);
  }
  for (ssize_t i = 0; i < n; i++) {
    if (b->base[i] == '\n') {
      line[line_len] = 0;
      on_line(line);
      line_len = 0;
    } else if (line_len + 1 < sizeof(line)) {
      line[line_len++] = b->base[i];
    }
  }
}

static void
on_watchdog (uv_timer_t *t) {
  (void) t;
  printf("{\"event\":\"error\",\"code\":\"ETIMEDOUT\",\"message\":\"gave up after %.0f ms\"}\n", o.timeout_ms);
  fflush(stdout);
  exit(1);
}

int
main (int argc, char **argv) {
  if (argc > 1) {
    int r = parse_options(argv[1]);
    if (r == -1)
      printf("{\"event\":\"error\",\"code\":\"EINVAL\",\"message\":\"options are one JSON object\"}\n");
    if (r < 0)
      return 2;
  }
  if (sodium_init() < 0)
    return 1;
  sender = strcmp(o.role, "send") == 0;
  if (!sender && strcmp(o.role, "recv") != 0) {
    printf("{\"event\":\"error\",\"code\":\"EINVAL\",\"message\":\"role must be send or recv\"}\n");
    return 2;
  }
  loop = uv_default_loop();
  udx_init(loop, &udx);
  udx_socket_init(udx, &sock, NULL, NULL);
  struct sockaddr_storage addr;
  if (strchr(o.host, ':'))
    uv_ip6_addr(o.host, (int) o.port, (struct sockaddr_in6 *) &addr);
  else
    uv_ip4_addr(o.host, (int) o.port, (struct sockaddr_in *) &addr);
  int err = udx_socket_bind(sock, (struct sockaddr *) &addr, 0);
  if (err < 0) {
    printf("{\"event\":\"error\",\"code\":\"%s\",\"message\":\"bind failed\"}\n", uv_err_name(err));
    return 1;
  }
  udx_stream_callbacks_t cbs = {.on_readable = on_readable, .on_drain = on_drain, .on_flush = on_flush, .on_close = on_close};
  int id = o.id > 0 ? (int) o.id : (sender ? 1 : 2);
  udx_stream_init(udx, &stream, (uint32_t) id, &cbs, NULL);
  if (strcmp(o.ack_policy, "batch") == 0)
    udx_stream_set_ack_policy(stream, UDX_ACK_BATCH);

  crypto_generichash_init(&hs, NULL, 0, 64);
  if (sender) {
    buf = malloc((size_t) o.chunk);
    generate(buf, (size_t) o.chunk, (uint32_t) o.seed);
    full = (size_t) (o.bytes / o.chunk);
    tail = (size_t) o.bytes - full * (size_t) o.chunk;
    if (o.hash[0] != 'o') {
      for (size_t i = 0; i < full; i++)
        crypto_generichash_update(&hs, buf, (size_t) o.chunk);
      if (tail)
        crypto_generichash_update(&hs, buf, tail);
      finish_hash();
    }
  }

  uv_timer_init(loop, &watchdog);
  uv_timer_start(&watchdog, on_watchdog, (uint64_t) o.timeout_ms, 0);
  uv_unref((uv_handle_t *) &watchdog);
  if (o.watch_stdin) {
    uv_pipe_init(loop, &in, 0);
    if (uv_pipe_open(&in, 0) == 0)
      uv_read_start((uv_stream_t *) &in, on_stdin_alloc, on_stdin);
  }
  struct sockaddr_storage name;
  udx_socket_getsockname(sock, &name);
  int port = ntohs(((struct sockaddr_in *) &name)->sin_port);
  printf("{\"event\":\"ready\",\"host\":\"%s\",\"port\":%d,\"id\":%d}\n", o.host, port, id);
  fflush(stdout);
  if (o.remote_port > 0)
    connect_to((int) o.remote_port, o.remote_host);
  uv_run(loop, UV_RUN_DEFAULT);
  return exit_status;
}
