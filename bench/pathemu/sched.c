#include "sched.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS_PER_CHUNK 512

void
pathemu_sched_init (pathemu_sched_t *s) {
  memset(s, 0, sizeof(*s));
}

void
pathemu_sched_destroy (pathemu_sched_t *s) {
  for (size_t i = 0; i < s->len; i++) {
    if (s->heap[i].len > PATHEMU_SLOT_SIZE)
      free(s->heap[i].data);
  }
  for (size_t i = 0; i < s->chunks_len; i++)
    free(s->chunks[i]);
  free(s->chunks);
  free(s->free_slots);
  free(s->heap);
  memset(s, 0, sizeof(*s));
}

static bool
earlier (const pathemu_pkt_t *a, const pathemu_pkt_t *b) {
  return a->at_ns < b->at_ns || (a->at_ns == b->at_ns && a->seq < b->seq);
}

static int
grow (void **arr, size_t *cap, size_t elem) {
  size_t n = *cap ? *cap * 2 : 256;
  void *p = realloc(*arr, n * elem);
  if (p == NULL)
    return -ENOMEM;
  *arr = p;
  *cap = n;
  return 0;
}

static uint8_t *
slot_get (pathemu_sched_t *s) {
  if (s->free_len == 0) {
    uint8_t *chunk = malloc((size_t) SLOTS_PER_CHUNK * PATHEMU_SLOT_SIZE);
    if (chunk == NULL)
      return NULL;
    if (s->chunks_len % 64 == 0) {
      void **c = realloc(s->chunks, (s->chunks_len + 64) * sizeof(void *));
      if (c == NULL) {
        free(chunk);
        return NULL;
      }
      s->chunks = c;
    }
    s->chunks[s->chunks_len++] = chunk;
    // room for every slot ever made, so a release never has to grow it
    while (s->free_cap < s->chunks_len * SLOTS_PER_CHUNK) {
      if (grow((void **) &s->free_slots, &s->free_cap, sizeof(void *)) != 0)
        return NULL;
    }
    for (size_t i = 0; i < SLOTS_PER_CHUNK; i++) {
      s->free_slots[s->free_len++] = chunk + i * PATHEMU_SLOT_SIZE;
    }
  }
  return s->free_slots[--s->free_len];
}

int
pathemu_sched_push (pathemu_sched_t *s, uint64_t at_ns, uint8_t dir, const void *data, size_t len) {
  if (s->len == s->cap && grow((void **) &s->heap, &s->cap, sizeof(pathemu_pkt_t)) != 0)
    return -ENOMEM;
  uint8_t *buf = len > PATHEMU_SLOT_SIZE ? malloc(len) : slot_get(s);
  if (buf == NULL)
    return -ENOMEM;
  memcpy(buf, data, len);

  pathemu_pkt_t pkt = {.at_ns = at_ns, .seq = s->next_seq++, .data = buf, .len = (uint32_t) len, .dir = dir};
  size_t i = s->len++;
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!earlier(&pkt, &s->heap[parent]))
      break;
    s->heap[i] = s->heap[parent];
    i = parent;
  }
  s->heap[i] = pkt;
  return 0;
}

const pathemu_pkt_t *
pathemu_sched_peek (const pathemu_sched_t *s) {
  return s->len ? &s->heap[0] : NULL;
}

void
pathemu_sched_pop (pathemu_sched_t *s, pathemu_pkt_t *out) {
  *out = s->heap[0];
  pathemu_pkt_t last = s->heap[--s->len];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1;
    if (l >= s->len)
      break;
    size_t m = l + 1 < s->len && earlier(&s->heap[l + 1], &s->heap[l]) ? l + 1 : l;
    if (!earlier(&s->heap[m], &last))
      break;
    s->heap[i] = s->heap[m];
    i = m;
  }
  if (s->len)
    s->heap[i] = last;
}

void
pathemu_sched_release (pathemu_sched_t *s, pathemu_pkt_t *pkt) {
  if (pkt->len > PATHEMU_SLOT_SIZE) {
    free(pkt->data);
  } else {
    // the free stack always has room: every slot came from it
    s->free_slots[s->free_len++] = pkt->data;
  }
  pkt->data = NULL;
}
