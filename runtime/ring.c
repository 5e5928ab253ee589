#include "ring.h"

#include <stdlib.h>
#include <uv.h>

#define LUDX_RING_INITIAL 256

int
ludx_ring_init (ludx_ring_t *r) {
  for (int i = 0; i < 2; i++) {
    r->buf[i] = malloc(LUDX_RING_INITIAL * sizeof(ludx_event_t));
    if (r->buf[i] == NULL) {
      ludx_ring_free(r);
      return UV_ENOMEM;
    }
    r->len[i] = 0;
    r->cap[i] = LUDX_RING_INITIAL;
  }
  r->back = 0;
  r->fail_above = 0;
  return 0;
}

void
ludx_ring_free (ludx_ring_t *r) {
  for (int i = 0; i < 2; i++) {
    free(r->buf[i]);
    r->buf[i] = NULL;
    r->len[i] = r->cap[i] = 0;
  }
}

int
ludx_ring_push (ludx_ring_t *r, uint32_t kind, uint32_t ref, int64_t a, int64_t b) {
  int i = r->back;
  if (r->len[i] == r->cap[i]) {
    size_t cap = r->cap[i] * 2;
    if (r->fail_above > 0 && cap > r->fail_above)
      return UV_ENOMEM;
    ludx_event_t *n = realloc(r->buf[i], cap * sizeof(ludx_event_t));
    if (n == NULL)
      return UV_ENOMEM;
    r->buf[i] = n;
    r->cap[i] = cap;
  }
  ludx_event_t *e = &r->buf[i][r->len[i]++];
  e->kind = kind;
  e->ref = ref;
  e->a = a;
  e->b = b;
  return 0;
}

const ludx_event_t *
ludx_ring_swap (ludx_ring_t *r, size_t *len) {
  int front = r->back;
  r->back = 1 - front;
  r->len[r->back] = 0;
  *len = r->len[front];
  return r->buf[front];
}
