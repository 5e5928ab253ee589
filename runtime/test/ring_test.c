// The event ring: records come back in order, growth never drops one, and a
// swap hands Lua a stable batch while C appends to the other buffer.
#include <assert.h>
#include <stdio.h>

#include <uv.h>

#include "ring.h"

#include "check.h"

int
main (void) {
  ludx_ring_t r;
  CHECK(ludx_ring_init(&r) == 0);

  // growth: far more than the initial capacity, all kept in order
  for (int i = 0; i < 10000; i++)
    CHECK(ludx_ring_push(&r, 1, (uint32_t) i, i * 2, -i) == 0);
  CHECK(ludx_ring_pending(&r) == 10000);
  size_t n;
  const ludx_event_t *ev = ludx_ring_swap(&r, &n);
  CHECK(n == 10000);
  for (int i = 0; i < 10000; i++) {
    CHECK(ev[i].kind == 1 && ev[i].ref == (uint32_t) i && ev[i].a == i * 2 && ev[i].b == -i);
  }

  // appends during the walk of a batch land in the next batch and do not
  // move the batch being read
  CHECK(ludx_ring_pending(&r) == 0);
  for (int i = 0; i < 5000; i++)
    CHECK(ludx_ring_push(&r, 2, 7, i, 0) == 0);
  CHECK(ev[9999].ref == 9999);
  const ludx_event_t *ev2 = ludx_ring_swap(&r, &n);
  CHECK(n == 5000 && ev2 != ev);
  CHECK(ev2[4999].a == 4999 && ev2[0].kind == 2);

  // an empty turn
  ev = ludx_ring_swap(&r, &n);
  CHECK(n == 0);

  ludx_ring_free(&r);

  // fault injection: growth past fail_above fails with UV_ENOMEM and keeps
  // what was there (ludx_rt_post turns this into a loud abort)
  CHECK(ludx_ring_init(&r) == 0);
  r.fail_above = 256;
  for (int i = 0; i < 256; i++)
    CHECK(ludx_ring_push(&r, 3, (uint32_t) i, 0, 0) == 0);
  CHECK(ludx_ring_push(&r, 3, 256, 0, 0) == UV_ENOMEM);
  CHECK(ludx_ring_pending(&r) == 256);
  ev = ludx_ring_swap(&r, &n);
  CHECK(n == 256 && ev[255].ref == 255);
  CHECK(ludx_ring_push(&r, 3, 0, 0, 0) == 0);
  ludx_ring_free(&r);
  printf("ring: ok\n");
  return 0;
}
