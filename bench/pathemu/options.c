#include "options.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

void
pathemu_options_default (pathemu_options_t *o) {
  memset(o, 0, sizeof(*o));
  strcpy(o->host, "127.0.0.1");
  o->seed = 1;
  o->batch = 64;
  o->watch_stdin = true;
  for (int d = 0; d < 2; d++) {
    o->link[d].queue_limit = 1000;
    o->link[d].reorder_delay_ns = 1000000;
  }
}

void
pathemu_options_usage (FILE *f) {
  fputs(
      "usage: ludx-pathemu [flags]\n"
      "\n"
      "Relays UDP between endpoint A and endpoint B through an emulated path.\n"
      "A sends to port_a, the datagram leaves from port_b towards B; B sends to\n"
      "port_b, the datagram leaves from port_a towards A. Prints\n"
      "  {\"event\":\"ready\",\"host\":..,\"port_a\":..,\"port_b\":..}\n"
      "and, on SIGINT/SIGTERM, stdin EOF or \"quit\", a final stats line, then exits.\n"
      "\n"
      "Relay:\n"
      "  --host ADDR          bind address of both ports (127.0.0.1)\n"
      "  --port-a N           port A sends to (0 = any)\n"
      "  --port-b N           port B sends to (0 = any)\n"
      "  --a HOST:PORT        address of A (default: the source of the last datagram to port_a)\n"
      "  --b HOST:PORT        address of B (default: the source of the last datagram to port_b)\n"
      "  --seed N             seed of the loss/dup/reorder generators (1); A->B uses seed, B->A seed+1\n"
      "  --batch N            datagrams per recvmmsg/sendmmsg (64, at most 1024)\n"
      "  --spin D             busy-poll this long before each delivery instead of sleeping\n"
      "                       (0; e.g. 200us: deliveries within microseconds, at the cost\n"
      "                       of CPU; without it a wakeup from idle adds ~0.1-0.2 ms)\n"
      "  --no-stdin           do not read stdin (default: read commands, exit on EOF)\n"
      "  --help\n"
      "\n"
      "Path, both directions (prefix ab- or ba- for one: --ab-rate, --ba-delay, ...):\n"
      "  --rate R             bottleneck rate in bits/s, suffix k/M/G (e.g. 100M); 0 = unlimited (0)\n"
      "  --delay D            one-way delay, suffix ns/us/ms/s, plain number = ms (0)\n"
      "  --queue N            bottleneck queue limit in datagrams, tail drop (1000); 0 = unlimited\n"
      "  --overhead N         bytes added to each datagram for the rate (0; 28 = IPv4+UDP)\n"
      "  --loss P             drop probability, 0..1 or N% (0)\n"
      "  --dup P              duplication probability (0)\n"
      "  --reorder P          probability of extra delay --reorder-delay, so later datagrams overtake (0)\n"
      "  --reorder-delay D    (1ms)\n"
      "\n"
      "Order per datagram: loss, duplication, queue (tail drop) at the rate, delay\n"
      "(+ reorder delay). Queue limit and rate only act together: without a rate\n"
      "nothing queues.\n"
      "\n"
      "stdin commands, one per line:\n"
      "  stats                print {\"event\":\"stats\",\"final\":false,...}\n"
      "  set FLAGS            change path flags now, e.g. \"set --ab-loss 1\" (a blackout)\n"
      "  quit                 print the final stats and exit\n"
      "\n"
      "Stats line: {\"event\":\"stats\",\"final\":true,\"reason\":..,\"ab\":{..},\"ba\":{..}} with per\n"
      "direction received, forwarded, bytes_forwarded, dropped_loss, dropped_queue,\n"
      "duplicated, reordered, dropped_no_peer, send_errors, max_queue, and how late\n"
      "datagrams left against their schedule: late_avg_us, late_max_us.\n",
      f
  );
}

int
pathemu_parse_addr (const char *s, struct sockaddr_storage *addr) {
  char host[64];
  const char *colon = strrchr(s, ':');
  if (colon == NULL || colon == s)
    return -1;
  size_t hl = (size_t) (colon - s);
  if (s[0] == '[' && hl >= 2 && s[hl - 1] == ']') {
    s++;
    hl -= 2;
  }
  if (hl >= sizeof(host))
    return -1;
  memcpy(host, s, hl);
  host[hl] = '\0';
  char *end;
  long port = strtol(colon + 1, &end, 10);
  if (*end != '\0' || port <= 0 || port > 65535)
    return -1;

  memset(addr, 0, sizeof(*addr));
  struct sockaddr_in *in4 = (struct sockaddr_in *) addr;
  struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) addr;
  if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
    in4->sin_family = AF_INET;
    in4->sin_port = htons((uint16_t) port);
    return 0;
  }
  if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons((uint16_t) port);
    return 0;
  }
  return -1;
}

static int
parse_number (const char *s, double *out, const char **suffix) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (end == s || errno != 0 || !isfinite(v) || v < 0)
    return -1;
  *out = v;
  *suffix = end;
  return 0;
}

static int
parse_rate (const char *s, uint64_t *out) {
  double v;
  const char *suf;
  if (parse_number(s, &v, &suf) != 0)
    return -1;
  double mul = 1;
  if (*suf == 'k' || *suf == 'K')
    mul = 1e3, suf++;
  else if (*suf == 'm' || *suf == 'M')
    mul = 1e6, suf++;
  else if (*suf == 'g' || *suf == 'G')
    mul = 1e9, suf++;
  if (strcmp(suf, "") != 0 && strcmp(suf, "bit") != 0 && strcmp(suf, "bps") != 0)
    return -1;
  *out = (uint64_t) llround(v * mul);
  return 0;
}

static int
parse_duration (const char *s, uint64_t *out) {
  double v;
  const char *suf;
  if (parse_number(s, &v, &suf) != 0)
    return -1;
  double mul;
  if (strcmp(suf, "") == 0 || strcmp(suf, "ms") == 0)
    mul = 1e6;
  else if (strcmp(suf, "us") == 0)
    mul = 1e3;
  else if (strcmp(suf, "ns") == 0)
    mul = 1;
  else if (strcmp(suf, "s") == 0)
    mul = 1e9;
  else
    return -1;
  *out = (uint64_t) llround(v * mul);
  return 0;
}

static int
parse_prob (const char *s, double *out) {
  double v;
  const char *suf;
  if (parse_number(s, &v, &suf) != 0)
    return -1;
  if (strcmp(suf, "%") == 0)
    v /= 100;
  else if (*suf != '\0')
    return -1;
  if (v > 1)
    return -1;
  *out = v;
  return 0;
}

static int
parse_uint (const char *s, uint64_t max, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || v > max || s[0] == '-')
    return -1;
  *out = v;
  return 0;
}

// A path flag (name without the direction prefix) for one direction.
static int
parse_link_flag (pathemu_link_config_t *c, const char *name, const char *value) {
  uint64_t u;
  if (strcmp(name, "rate") == 0)
    return parse_rate(value, &c->rate_bps);
  if (strcmp(name, "delay") == 0)
    return parse_duration(value, &c->delay_ns);
  if (strcmp(name, "reorder-delay") == 0)
    return parse_duration(value, &c->reorder_delay_ns);
  if (strcmp(name, "loss") == 0)
    return parse_prob(value, &c->loss);
  if (strcmp(name, "dup") == 0)
    return parse_prob(value, &c->dup);
  if (strcmp(name, "reorder") == 0)
    return parse_prob(value, &c->reorder);
  if (strcmp(name, "queue") == 0) {
    if (parse_uint(value, UINT32_MAX, &u) != 0)
      return -1;
    c->queue_limit = (uint32_t) u;
    return 0;
  }
  if (strcmp(name, "overhead") == 0) {
    if (parse_uint(value, 65535, &u) != 0)
      return -1;
    c->overhead = (uint32_t) u;
    return 0;
  }
  return -2;
}

static bool
is_link_flag (const char *name) {
  static const char *names[] = {"rate", "delay", "reorder-delay", "loss", "dup", "reorder", "queue", "overhead"};
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
    if (strcmp(name, names[i]) == 0)
      return true;
  }
  return false;
}

int
pathemu_options_parse (pathemu_options_t *o, int argc, char **argv, bool runtime, char *err, size_t err_len) {
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    if (strncmp(arg, "--", 2) != 0) {
      snprintf(err, err_len, "unexpected argument '%s'", arg);
      return -1;
    }
    const char *name = arg + 2;
    if (!runtime && strcmp(name, "help") == 0)
      return 1;
    if (!runtime && strcmp(name, "no-stdin") == 0) {
      o->watch_stdin = false;
      continue;
    }
    if (i + 1 >= argc) {
      snprintf(err, err_len, "%s needs a value", arg);
      return -1;
    }
    const char *value = argv[++i];

    int dirs[2] = {1, 1};
    const char *flag = name;
    if (strncmp(name, "ab-", 3) == 0)
      dirs[1] = 0, flag = name + 3;
    else if (strncmp(name, "ba-", 3) == 0)
      dirs[0] = 0, flag = name + 3;

    if (is_link_flag(flag)) {
      for (int d = 0; d < 2; d++) {
        if (dirs[d] && parse_link_flag(&o->link[d], flag, value) != 0) {
          snprintf(err, err_len, "bad value '%s' for %s", value, arg);
          return -1;
        }
      }
      continue;
    }
    if (runtime || flag != name) {
      snprintf(err, err_len, "unknown flag %s", arg);
      return -1;
    }

    uint64_t u;
    int rc = 0;
    if (strcmp(name, "host") == 0) {
      if (strlen(value) >= sizeof(o->host))
        rc = -1;
      else
        strcpy(o->host, value);
    } else if (strcmp(name, "port-a") == 0 || strcmp(name, "port-b") == 0) {
      rc = parse_uint(value, 65535, &u);
      if (rc == 0)
        *(name[5] == 'a' ? &o->port_a : &o->port_b) = (int) u;
    } else if (strcmp(name, "a") == 0 || strcmp(name, "b") == 0) {
      int e = name[0] == 'a' ? 0 : 1;
      rc = pathemu_parse_addr(value, &o->addr[e]);
      o->fixed[e] = rc == 0;
    } else if (strcmp(name, "spin") == 0) {
      rc = parse_duration(value, &o->spin_ns);
    } else if (strcmp(name, "seed") == 0) {
      rc = parse_uint(value, UINT64_MAX, &o->seed);
    } else if (strcmp(name, "batch") == 0) {
      rc = parse_uint(value, 1024, &u);
      if (rc == 0 && u == 0)
        rc = -1;
      o->batch = (int) u;
    } else {
      snprintf(err, err_len, "unknown flag %s", arg);
      return -1;
    }
    if (rc != 0) {
      snprintf(err, err_len, "bad value '%s' for %s", value, arg);
      return -1;
    }
  }
  return 0;
}
