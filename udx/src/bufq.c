#include <stdlib.h>
#include <string.h>
#include "bufq.h"
#include "internal.h"

void
udx__pool_init (udx_pool_t *pool) {
  memset(pool, 0, sizeof(*pool));
  pool->chunks.size = UDX_CHUNK_SIZE;
  pool->chunks.max_free = 256; // 4 MiB cached at most
  pool->slots.size = UDX_SLOT_SIZE;
  pool->slots.max_free = 4096; // 8 MiB cached at most
}

static void
udx__freelist_destroy (udx_freelist_t *fl) {
  while (fl->head) {
    void *next = *(void **) fl->head;
    free(fl->head);
    fl->head = next;
  }
  fl->nfree = 0;
}

void
udx__pool_destroy (udx_pool_t *pool) {
  udx__freelist_destroy(&pool->chunks);
  udx__freelist_destroy(&pool->slots);
}

void *
udx__freelist_get (udx_freelist_t *fl) {
  if (fl->head) {
    void *p = fl->head;
    fl->head = *(void **) p;
    fl->nfree--;
    return p;
  }
  fl->allocs++;
  return malloc(fl->size);
}

void
udx__freelist_put (udx_freelist_t *fl, void *p) {
  if (p == NULL)
    return;
  if (fl->nfree >= fl->max_free) {
    free(p);
    return;
  }
  *(void **) p = fl->head;
  fl->head = p;
  fl->nfree++;
}

void
udx__bufq_init (udx_bufq_t *q, uint64_t off) {
  memset(q, 0, sizeof(*q));
  q->base = q->start = q->end = off;
}

void
udx__bufq_destroy (udx_bufq_t *q, udx_pool_t *pool) {
  for (uint32_t i = 0; i < q->n; i++) {
    udx__freelist_put(&pool->chunks, q->chunks[(q->first + i) & (q->cap - 1)]);
  }
  free(q->chunks);
  uint64_t end = q->end;
  udx__bufq_init(q, end);
}

static int
udx__bufq_grow_ring (udx_bufq_t *q) {
  uint32_t cap = q->cap ? q->cap * 2 : 8;
  uint8_t **chunks = malloc(cap * sizeof(*chunks));
  if (chunks == NULL)
    return UDX_ERR_NOMEM;
  for (uint32_t i = 0; i < q->n; i++) {
    chunks[i] = q->chunks[(q->first + i) & (q->cap - 1)];
  }
  free(q->chunks);
  q->chunks = chunks;
  q->cap = cap;
  q->first = 0;
  return 0;
}

static inline uint8_t *
udx__bufq_at (const udx_bufq_t *q, uint64_t off, size_t *room) {
  uint64_t rel = off - q->base;
  uint32_t i = (uint32_t) (rel / UDX_CHUNK_SIZE);
  size_t in = (size_t) (rel % UDX_CHUNK_SIZE);
  *room = UDX_CHUNK_SIZE - in;
  return q->chunks[(q->first + i) & (q->cap - 1)] + in;
}

int
udx__bufq_append (udx_bufq_t *q, udx_pool_t *pool, const void *data, size_t len) {
  // Make room first, so a failure appends nothing.
  uint64_t capacity = q->base + (uint64_t) q->n * UDX_CHUNK_SIZE;
  uint32_t added = 0;
  while (capacity - q->end < len) {
    if (q->n == q->cap) {
      int err = udx__bufq_grow_ring(q);
      if (err < 0)
        goto fail;
    }
    uint8_t *chunk = udx__freelist_get(&pool->chunks);
    if (chunk == NULL)
      goto fail;
    q->chunks[(q->first + q->n) & (q->cap - 1)] = chunk;
    q->n++;
    added++;
    capacity += UDX_CHUNK_SIZE;
  }

  const uint8_t *src = data;
  while (len > 0) {
    size_t room;
    uint8_t *dst = udx__bufq_at(q, q->end, &room);
    size_t n = len < room ? len : room;
    memcpy(dst, src, n);
    src += n;
    len -= n;
    q->end += n;
  }
  return 0;

fail:
  while (added-- > 0) {
    q->n--;
    udx__freelist_put(&pool->chunks, q->chunks[(q->first + q->n) & (q->cap - 1)]);
  }
  return UDX_ERR_NOMEM;
}

int
udx__bufq_iov (const udx_bufq_t *q, uint64_t off, size_t len, struct iovec *iov, int max) {
  int n = 0;
  while (len > 0 && n < max) {
    size_t room;
    uint8_t *p = udx__bufq_at(q, off, &room);
    size_t take = len < room ? len : room;
    iov[n].iov_base = p;
    iov[n].iov_len = take;
    n++;
    off += take;
    len -= take;
  }
  return n;
}

void
udx__bufq_release (udx_bufq_t *q, udx_pool_t *pool, uint64_t off) {
  if (off < q->start)
    return;
  if (off > q->end)
    off = q->end;
  q->start = off;
  while (q->n > 0 && q->start - q->base >= UDX_CHUNK_SIZE) {
    udx__freelist_put(&pool->chunks, q->chunks[q->first]);
    q->first = (q->first + 1) & (q->cap - 1);
    q->n--;
    q->base += UDX_CHUNK_SIZE;
  }
  if (q->start == q->end && q->n == 1) {
    // Empty: restart the single chunk at the current offset, keeping it.
    q->base = q->start;
  }
}

size_t
udx__bufq_peek (const udx_bufq_t *q, const uint8_t **p) {
  if (q->start == q->end) {
    *p = NULL;
    return 0;
  }
  size_t room;
  *p = udx__bufq_at(q, q->start, &room);
  uint64_t avail = q->end - q->start;
  return avail < room ? (size_t) avail : room;
}
