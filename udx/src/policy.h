#ifndef UDX_POLICY_H
#define UDX_POLICY_H

// Transfer policies in the send path: the three hooks send.c calls, each a
// single pointer test when a stream has no policy (policy.c does the work).

#include "stream.h"

// A stream's memberships in limiters (allocated on the first udx_limiter_add).
typedef struct udx_member_s {
  udx_limiter_t *limiter;
  udx_stream_t *stream;
  struct udx_member_s *next; // in the limiter's list
  uint32_t weight;
  bool active; // has new data waiting (counted in the limiter's weight sum)
  int64_t tokens;
  uint64_t tokens_at;
} udx_member_t;

typedef struct udx_policy_s {
  udx_member_t m[UDX_LIMITS_MAX];
  int n;
  bool blocked; // the last udx__policy_allows said no
} udx_policy_t;

// udx.h's udx_limiter_init/_set_rate/_add/_remove with engine error codes
// (UDX_ERR_*); the io layer exposes them with UV_E* codes.
int
udx__limiter_init (udx_limiter_t **out, uint64_t rate, uint64_t burst);

int
udx__limiter_set_rate (udx_limiter_t *l, uint64_t rate, uint64_t burst);

int
udx__limiter_add (udx_limiter_t *l, udx_stream_t *s, uint32_t weight);

int
udx__limiter_remove (udx_limiter_t *l, udx_stream_t *s);

bool
udx__policy_check (udx_stream_t *s);

void
udx__policy_charge (udx_stream_t *s, size_t bytes);

void
udx__policy_settle (udx_stream_t *s, bool want_new);

void
udx__policy_free (udx_stream_t *s);

// May new data go out now? (udx__send_new)
static inline bool
udx__policy_allows (udx_stream_t *s) {
  return s->policy == NULL || udx__policy_check(s);
}

// A DATA packet of new data went out. (udx__send_new)
static inline void
udx__policy_on_send (udx_stream_t *s, size_t bytes) {
  if (s->policy)
    udx__policy_charge(s, bytes);
}

// End of a send round: want_new says new data is still waiting; a stream
// held back by its limiters gets a wake-up (pace_at). (udx__send_packets)
static inline void
udx__policy_after_send (udx_stream_t *s, bool want_new) {
  if (s->policy)
    udx__policy_settle(s, want_new);
}

#endif
