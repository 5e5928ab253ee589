// Transfer policies: token buckets with weighted shares, enforced in the send
// path on new data (retransmissions, ACKs and probes are never held back).
//
// A limiter refills at `rate` bytes/s. Its members are streams with weights;
// while a set of them has new data waiting (is active), member i refills its
// own bucket at rate * w_i / W (W: the sum of the active weights) up to a
// burst of the same share, so k busy members split the rate by weight, and
// one alone gets all of it. A packet may go when every limiter of the stream
// has a positive balance; it is charged in full (the balance may go below
// zero), and a stream held back wakes when its debts are paid. Lua sets the
// numbers; nothing here runs in Lua.

#include <stdlib.h>
#include <string.h>

#include "policy.h"

#define UDX_POLICY_MIN_BURST (4 * UDX_MTU_MAX)
#define UDX_POLICY_BURST_MS  20 // default burst: 20 ms at the rate

struct udx_limiter_s {
  uint64_t rate;  // bytes/s, 0 = unlimited
  uint64_t burst; // bytes
  uint64_t weight_active;
  uint32_t members;
  uint32_t nactive;
  int refs; // the owner's (until released) + one per member
  udx_member_t *head;
  uint64_t bytes;
  uint64_t waits;
};

static uint64_t
default_burst (uint64_t rate) {
  uint64_t b = rate * UDX_POLICY_BURST_MS / 1000;
  return b < UDX_POLICY_MIN_BURST ? UDX_POLICY_MIN_BURST : b;
}

// The sum of weights a member is measured against: the active ones, itself
// included.
static uint64_t
weight_sum (const udx_member_t *m) {
  const udx_limiter_t *l = m->limiter;
  return l->weight_active + (m->active ? 0 : m->weight);
}

static double
share_rate (const udx_member_t *m) {
  return (double) m->limiter->rate * (double) m->weight / (double) weight_sum(m);
}

static int64_t
share_burst (const udx_member_t *m) {
  const udx_limiter_t *l = m->limiter;
  uint64_t b = l->burst * m->weight / weight_sum(m);
  return (int64_t) (b < UDX_POLICY_MIN_BURST ? UDX_POLICY_MIN_BURST : b);
}

static void
refill (udx_member_t *m, uint64_t now) {
  if (now <= m->tokens_at)
    return;
  uint64_t elapsed = now - m->tokens_at;
  m->tokens_at = now;
  if (m->limiter->rate == 0)
    return;
  double t = (double) m->tokens + (double) elapsed * share_rate(m) / (double) UDX_US_PER_S;
  int64_t cap = share_burst(m);
  m->tokens = t > (double) cap ? cap : (int64_t) t;
}

// Shares change: credit every member for the time so far at the old shares.
static void
refill_all (udx_limiter_t *l, uint64_t now) {
  for (udx_member_t *m = l->head; m; m = m->next)
    refill(m, now);
}

static void
set_active (udx_member_t *m, bool active, uint64_t now) {
  if (m->active == active)
    return;
  udx_limiter_t *l = m->limiter;
  refill_all(l, now);
  m->active = active;
  if (active) {
    l->weight_active += m->weight;
    l->nactive++;
  } else {
    l->weight_active -= m->weight;
    l->nactive--;
  }
}

static void
limiter_unref (udx_limiter_t *l) {
  if (--l->refs == 0)
    free(l);
}

// Wakes every member so that a change of rate or shares takes effect now.
static void
wake_members (udx_limiter_t *l) {
  for (udx_member_t *m = l->head; m; m = m->next) {
    udx_stream_t *s = m->stream;
    udx__stream_wake(s);
  }
}

bool
udx__policy_check (udx_stream_t *s) {
  udx_policy_t *p = s->policy;
  bool ok = true;
  for (int i = 0; i < p->n; i++) {
    udx_member_t *m = &p->m[i];
    if (m->limiter->rate == 0)
      continue;
    set_active(m, true, s->now);
    refill(m, s->now);
    if (m->tokens <= 0) {
      if (!p->blocked)
        m->limiter->waits++;
      ok = false;
    }
  }
  p->blocked = !ok;
  return ok;
}

void
udx__policy_charge (udx_stream_t *s, size_t bytes) {
  udx_policy_t *p = s->policy;
  for (int i = 0; i < p->n; i++) {
    udx_member_t *m = &p->m[i];
    m->limiter->bytes += bytes;
    if (m->limiter->rate)
      m->tokens -= (int64_t) bytes;
  }
}

void
udx__policy_settle (udx_stream_t *s, bool want_new) {
  udx_policy_t *p = s->policy;
  if (!want_new) {
    p->blocked = false;
    for (int i = 0; i < p->n; i++)
      set_active(&p->m[i], false, s->now);
    return;
  }
  if (!p->blocked)
    return;
  // Held back: wake when every balance is positive again. (When the
  // balances are positive already, something else holds the stream back,
  // a window or pacing, and that wakes it.)
  uint64_t wait = 0;
  for (int i = 0; i < p->n; i++) {
    udx_member_t *m = &p->m[i];
    if (m->limiter->rate == 0)
      continue;
    refill(m, s->now);
    if (m->tokens > 0)
      continue;
    double r = share_rate(m);
    uint64_t w = (uint64_t) ((double) (1 - m->tokens) * (double) UDX_US_PER_S / r) + 1;
    if (w > wait)
      wait = w;
  }
  if (wait == 0) {
    p->blocked = false;
    return;
  }
  if (s->now + wait < s->pace_at)
    s->pace_at = s->now + wait;
  // Held back by policy is not a path limit: BBR must not learn this rate
  // as the bandwidth (the samples are app limited).
  if (s->inflight < s->cwnd) {
    uint64_t mark = s->delivered + s->inflight;
    s->app_limited = mark ? mark : 1;
  }
}

static void
member_remove (udx_stream_t *s, int i) {
  udx_policy_t *p = s->policy;
  udx_member_t *m = &p->m[i];
  udx_limiter_t *l = m->limiter;
  set_active(m, false, s->now);
  for (udx_member_t **pp = &l->head; *pp; pp = &(*pp)->next) {
    if (*pp == m) {
      *pp = m->next;
      break;
    }
  }
  l->members--;
  // keep the array dense; the limiter lists point at the members, so fix
  // the moved one's link
  int last = p->n - 1;
  if (i != last) {
    udx_member_t *moved = &p->m[last];
    udx_limiter_t *ml = moved->limiter;
    for (udx_member_t **pp = &ml->head; *pp; pp = &(*pp)->next) {
      if (*pp == moved) {
        *pp = m;
        break;
      }
    }
    *m = *moved;
  }
  memset(&p->m[last], 0, sizeof(p->m[last]));
  p->n--;
  p->blocked = false;
  wake_members(l);
  limiter_unref(l);
}

void
udx__policy_free (udx_stream_t *s) {
  if (s->policy == NULL)
    return;
  while (s->policy->n > 0)
    member_remove(s, s->policy->n - 1);
  free(s->policy);
  s->policy = NULL;
}

// --- API: udx.h's udx_limiter_* (the io layer maps the error codes of
// those that return one; release and get_stats are the public functions)

int
udx__limiter_init (udx_limiter_t **out, uint64_t rate, uint64_t burst) {
  if (out == NULL)
    return UDX_ERR_INVAL;
  udx_limiter_t *l = calloc(1, sizeof(*l));
  if (l == NULL)
    return UDX_ERR_NOMEM;
  l->rate = rate;
  l->burst = burst ? burst : default_burst(rate);
  l->refs = 1;
  *out = l;
  return 0;
}

int
udx__limiter_set_rate (udx_limiter_t *l, uint64_t rate, uint64_t burst) {
  if (l == NULL)
    return UDX_ERR_INVAL;
  uint64_t now = 0;
  for (udx_member_t *m = l->head; m; m = m->next)
    now = udx__max_u64(now, m->stream->now);
  refill_all(l, now);
  l->rate = rate;
  l->burst = burst ? burst : default_burst(rate);
  for (udx_member_t *m = l->head; m; m = m->next) {
    int64_t cap = share_burst(m);
    if (m->tokens > cap)
      m->tokens = cap;
  }
  wake_members(l);
  return 0;
}

void
udx_limiter_release (udx_limiter_t *l) {
  if (l)
    limiter_unref(l);
}

int
udx__limiter_add (udx_limiter_t *l, udx_stream_t *s, uint32_t weight) {
  if (l == NULL || s == NULL || weight == 0 || udx__stream_dead(s))
    return UDX_ERR_INVAL;
  udx_policy_t *p = s->policy;
  if (p) {
    for (int i = 0; i < p->n; i++) {
      udx_member_t *m = &p->m[i];
      if (m->limiter != l)
        continue;
      // already a member: a new weight
      refill_all(l, s->now);
      if (m->active)
        l->weight_active = l->weight_active - m->weight + weight;
      m->weight = weight;
      wake_members(l);
      return 0;
    }
    if (p->n == UDX_LIMITS_MAX)
      return UDX_ERR_NOSPC;
  } else {
    p = calloc(1, sizeof(*p));
    if (p == NULL)
      return UDX_ERR_NOMEM;
    s->policy = p;
  }
  udx_member_t *m = &p->m[p->n++];
  memset(m, 0, sizeof(*m));
  m->limiter = l;
  m->stream = s;
  m->weight = weight;
  m->tokens_at = s->now;
  m->next = l->head;
  l->head = m;
  l->members++;
  l->refs++;
  m->tokens = share_burst(m);
  if (s->host && s->host->wake)
    s->host->wake(s);
  return 0;
}

int
udx__limiter_remove (udx_limiter_t *l, udx_stream_t *s) {
  if (l == NULL || s == NULL || s->policy == NULL)
    return UDX_ERR_INVAL;
  udx_policy_t *p = s->policy;
  for (int i = 0; i < p->n; i++) {
    if (p->m[i].limiter == l) {
      member_remove(s, i);
      udx__stream_wake(s);
      return 0;
    }
  }
  return UDX_ERR_NOENT;
}

void
udx_limiter_get_stats (const udx_limiter_t *l, udx_limiter_stats_t *out) {
  memset(out, 0, sizeof(*out));
  if (l == NULL)
    return;
  out->rate = l->rate;
  out->burst = l->burst;
  out->members = l->members;
  out->active = l->nactive;
  out->bytes = l->bytes;
  out->waits = l->waits;
}
