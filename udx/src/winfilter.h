#ifndef UDX_WINFILTER_H
#define UDX_WINFILTER_H

// Windowed min/max filter (Kathleen Nichols' algorithm, as in BBR): keeps the
// best, second best and third best samples of a sliding window so that the
// extreme over the window is known in O(1). `t` is any monotonic unit (time
// or round count); `win` is in the same unit.

#include <stdint.h>

typedef struct {
  uint64_t t;
  double v;
} udx_winfilter_sample_t;

typedef struct {
  udx_winfilter_sample_t s[3];
} udx_winfilter_t;

void
udx__winfilter_reset (udx_winfilter_t *wf, uint64_t t, double v);

static inline double
udx__winfilter_get (const udx_winfilter_t *wf) {
  return wf->s[0].v;
}

double
udx__winfilter_max (udx_winfilter_t *wf, uint64_t win, uint64_t t, double v);

double
udx__winfilter_min (udx_winfilter_t *wf, uint64_t win, uint64_t t, double v);

#endif
