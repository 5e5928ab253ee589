#include "winfilter.h"

void
udx__winfilter_reset (udx_winfilter_t *wf, uint64_t t, double v) {
  udx_winfilter_sample_t s = {.t = t, .v = v};
  wf->s[0] = wf->s[1] = wf->s[2] = s;
}

// Ages the three samples: when the best one left the window, the others move
// up; the second and third are refreshed a quarter and half window in so the
// filter always holds diverse candidates.
static double
udx__winfilter_age (udx_winfilter_t *wf, uint64_t win, udx_winfilter_sample_t fresh) {
  uint64_t dt = fresh.t - wf->s[0].t;

  if (dt > win) {
    wf->s[0] = wf->s[1];
    wf->s[1] = wf->s[2];
    wf->s[2] = fresh;
    if (fresh.t - wf->s[0].t > win) {
      wf->s[0] = wf->s[1];
      wf->s[1] = wf->s[2];
      wf->s[2] = fresh;
    }
  } else if (wf->s[1].t == wf->s[0].t && dt > win / 4) {
    wf->s[1] = wf->s[2] = fresh;
  } else if (wf->s[2].t == wf->s[1].t && dt > win / 2) {
    wf->s[2] = fresh;
  }

  return wf->s[0].v;
}

double
udx__winfilter_max (udx_winfilter_t *wf, uint64_t win, uint64_t t, double v) {
  udx_winfilter_sample_t fresh = {.t = t, .v = v};

  if (v >= wf->s[0].v || t - wf->s[2].t > win) {
    udx__winfilter_reset(wf, t, v);
    return v;
  }

  if (v >= wf->s[1].v) {
    wf->s[1] = wf->s[2] = fresh;
  } else if (v >= wf->s[2].v) {
    wf->s[2] = fresh;
  }

  return udx__winfilter_age(wf, win, fresh);
}

double
udx__winfilter_min (udx_winfilter_t *wf, uint64_t win, uint64_t t, double v) {
  udx_winfilter_sample_t fresh = {.t = t, .v = v};

  if (v <= wf->s[0].v || t - wf->s[2].t > win) {
    udx__winfilter_reset(wf, t, v);
    return v;
  }

  if (v <= wf->s[1].v) {
    wf->s[1] = wf->s[2] = fresh;
  } else if (v <= wf->s[2].v) {
    wf->s[2] = fresh;
  }

  return udx__winfilter_age(wf, win, fresh);
}
