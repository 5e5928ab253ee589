// Seeded fault injection for datagrams: loss, duplication, reordering (hold
// back), corruption, blackout windows and injected send errors.

#include <stdlib.h>

#include "io.h"

udx_fault_state_t *
udx__fault_new (const udx_fault_t *cfg, uint64_t now) {
  udx_fault_state_t *f = calloc(1, sizeof(*f));
  if (f == NULL)
    return NULL;
  f->cfg = *cfg;
  if (f->cfg.direction == 0)
    f->cfg.direction = UDX_FAULT_TX;
  f->rng = cfg->seed ? cfg->seed : 1;
  f->set_at = now;
  return f;
}

int
udx__fault_decide (udx_fault_state_t *f, int dir, uint64_t now, uint8_t *buf, size_t len, int *err) {
  if (f == NULL || !(f->cfg.direction & (uint32_t) dir))
    return UDX_FAULT_PASS;
  const udx_fault_t *c = &f->cfg;

  uint64_t since_ms = (now - f->set_at) / UDX_US_PER_MS;
  if (c->blackout_ms && since_ms >= c->blackout_start_ms && since_ms < c->blackout_start_ms + c->blackout_ms) {
    return UDX_FAULT_DROP;
  }
  if (c->loss > 0 && udx__rand_unit(&f->rng) < c->loss)
    return UDX_FAULT_DROP;
  if (dir == UDX_FAULT_TX && c->send_error > 0 && udx__rand_unit(&f->rng) < c->send_error) {
    *err = c->send_errno ? c->send_errno : UV_ENETUNREACH;
    return UDX_FAULT_ERROR;
  }
  if (c->corrupt > 0 && len > 0 && udx__rand_unit(&f->rng) < c->corrupt) {
    buf[udx__rand_next(&f->rng) % len] ^= (uint8_t) (1 + udx__rand_next(&f->rng) % 255);
  }
  if (c->reorder > 0 && udx__rand_unit(&f->rng) < c->reorder)
    return UDX_FAULT_HOLD;
  if (c->duplicate > 0 && udx__rand_unit(&f->rng) < c->duplicate)
    return UDX_FAULT_DUP;
  return UDX_FAULT_PASS;
}
