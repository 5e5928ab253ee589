#ifndef _GNU_SOURCE
#define _GNU_SOURCE // mremap
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bufq.h"
#include "internal.h"

// Counts a mapping made (+1) or gone (-1) in the host's count (the pool's
// `mapped`, udx_mapped_blocks), if it keeps one. Loops may run on several
// threads.
static void
udx__mapped_add (uint64_t *count, int d) {
  if (count == NULL)
    return;
  if (d > 0)
    __atomic_add_fetch(count, (uint64_t) d, __ATOMIC_RELAXED);
  else
    __atomic_sub_fetch(count, (uint64_t) -d, __ATOMIC_RELAXED);
}

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

// Released strides go back to the system in steps of this much.
#define UDX_EXT_UNMAP_STEP (1024 * 1024)

static size_t
udx__page_size (void) {
  long n = sysconf(_SC_PAGESIZE); // libc keeps it: no cache of ours (no shared state)
  return n > 0 ? (size_t) n : 4096;
}

// Unmaps what is left of a block and frees it.
static void
udx__ext_unmap (udx_bufq_ext_t *e) {
  if (e->map_len > e->unmapped)
    munmap(e->map + e->unmapped, e->map_len - e->unmapped);
  udx__mapped_add(e->mapped, -1);
  free(e);
}

static void
udx__ext_free (udx_bufq_ext_t *e, udx_pool_t *pool) {
  pool->blocks--;
  udx__ext_unmap(e);
}

// Pages that released strides free are kept for the queue's next block, up
// to about one largest SecretStream frame: moved there (mremap) instead of
// unmapped, so that block is not made of fresh pages (a first touch of each
// is a fault: ~4,096 per 16 MiB frame). A queue that empties, or goes,
// unmaps them. They sit in a range reserved for them (PROT_NONE past len),
// one piece per move, in order. Base pages only: blocks on huge pages keep
// no spares (see udx__huge_unit).
#define UDX_SPARE_MAX    (16 * 1024 * 1024 + 1024 * 1024)
#define UDX_SPARE_PIECES 32

struct udx_bufq_spare_s {
  uint64_t *mapped; // the count it is in (its block's)
  uint8_t *base;    // the reserved range
  size_t len;       // bytes of pages in it, from base
  uint32_t n;
  size_t piece[UDX_SPARE_PIECES];
};

static void
udx__spare_free (udx_bufq_t *q) {
  udx_bufq_spare_t *s = q->spare;
  if (s == NULL)
    return;
  munmap(s->base, UDX_SPARE_MAX);
  udx__mapped_add(s->mapped, -1);
  free(s);
  q->spare = NULL;
}

// [p, p+n) of a block, no longer needed: kept as spare, or unmapped (huge
// pages always).
static void
udx__bufq_retire (udx_bufq_t *q, const udx_bufq_ext_t *e, uint8_t *p, size_t n) {
  if (e->unit > udx__page_size()) { // huge pages: a block of them faults 8 times per 16 MiB
    munmap(p, n);
    return;
  }
  udx_bufq_spare_t *s = q->spare;
  if (s == NULL) {
    s = calloc(1, sizeof(*s));
    void *r = s ? mmap(NULL, UDX_SPARE_MAX, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) : MAP_FAILED;
    if (r == MAP_FAILED) {
      free(s);
      munmap(p, n);
      return;
    }
    s->base = r;
    s->mapped = e->mapped;
    q->spare = s;
    udx__mapped_add(s->mapped, 1);
  }
  // the target is ours (the reservation); a move fails across two of the
  // block's mappings (a piece moved into it before): then it is unmapped
  if (s->n < UDX_SPARE_PIECES && n <= UDX_SPARE_MAX - s->len &&
      mremap(p, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, s->base + s->len) != MAP_FAILED) {
    s->piece[s->n++] = n;
    s->len += n;
    return;
  }
  munmap(p, n);
}

// A new block [map, map+size) takes the spare pages at its start. The
// reservation's holes are not ours any more (another thread may map
// there): only its untouched tail is unmapped, and the next retire makes a
// new one.
static void
udx__bufq_reuse (udx_bufq_t *q, uint8_t *map, size_t size) {
  udx_bufq_spare_t *s = q->spare;
  if (s == NULL)
    return;
  size_t at = 0, from = 0;
  for (uint32_t i = 0; i < s->n; i++) {
    size_t n = s->piece[i];
    if (n > size - at || mremap(s->base + from, n, n, MREMAP_MAYMOVE | MREMAP_FIXED, map + at) == MAP_FAILED)
      munmap(s->base + from, n);
    else
      at += n;
    from += n;
  }
  munmap(s->base + s->len, UDX_SPARE_MAX - s->len);
  udx__mapped_add(s->mapped, -1);
  free(s);
  q->spare = NULL;
}

// Gives back what the released strides (the first `done` bytes of them)
// free, in whole pages, once a step's worth has gathered.
static void
udx__ext_trim (udx_bufq_t *q, udx_bufq_ext_t *e, uint64_t done) {
  size_t to = (size_t) (e->strides - e->map) + (size_t) done;
  size_t unit = e->unit ? e->unit : udx__page_size();
  to -= to % unit; // a huge page goes whole, or its mapping would be split
  if (to > e->unmapped && to - e->unmapped >= UDX_EXT_UNMAP_STEP) {
    udx__bufq_retire(q, e, e->map + e->unmapped, to - e->unmapped);
    e->unmapped = to;
  }
}

static bool
udx__ext_owns (const udx_bufq_ext_t *e, uint64_t chunk_off) {
  return chunk_off >= e->off && chunk_off < e->end_off;
}

void
udx__bufq_destroy (udx_bufq_t *q, udx_pool_t *pool) {
  udx__bufq_unreserve(q, pool);
  for (uint32_t i = 0; i < q->n; i++) {
    uint64_t off = q->base + (uint64_t) i * UDX_CHUNK_SIZE;
    bool ext = false;
    for (udx_bufq_ext_t *e = q->ext; e && !ext; e = e->next)
      ext = udx__ext_owns(e, off);
    if (!ext)
      udx__freelist_put(&pool->chunks, q->chunks[(q->first + i) & (q->cap - 1)]);
  }
  while (q->ext) {
    udx_bufq_ext_t *e = q->ext;
    q->ext = e->next;
    udx__ext_free(e, pool);
  }
  free(q->chunks);
  udx__spare_free(q);
  uint64_t end = q->end;
  udx__bufq_init(q, end);
}

static int
udx__bufq_grow_ring (udx_bufq_t *q) {
  if (q->cap > UINT32_MAX / 2)
    return UDX_ERR_NOMEM;
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

static uint64_t
udx__bufq_capacity (const udx_bufq_t *q) {
  return q->base + (uint64_t) q->n * UDX_CHUNK_SIZE;
}

// Adds pool chunks until len more bytes fit; on failure adds none.
static int
udx__bufq_room (udx_bufq_t *q, udx_pool_t *pool, size_t len) {
  uint64_t capacity = udx__bufq_capacity(q);
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
  return 0;

fail:
  while (added-- > 0) {
    q->n--;
    udx__freelist_put(&pool->chunks, q->chunks[(q->first + q->n) & (q->cap - 1)]);
  }
  return UDX_ERR_NOMEM;
}

// Copies into room made before.
static void
udx__bufq_copy_in (udx_bufq_t *q, const uint8_t *src, size_t len) {
  while (len > 0) {
    size_t room;
    uint8_t *dst = udx__bufq_at(q, q->end, &room);
    size_t n = len < room ? len : room;
    memcpy(dst, src, n);
    src += n;
    len -= n;
    q->end += n;
  }
}

int
udx__bufq_append (udx_bufq_t *q, udx_pool_t *pool, const void *data, size_t len) {
  int err = udx__bufq_room(q, pool, len);
  if (err < 0)
    return err;
  udx__bufq_copy_in(q, data, len);
  return 0;
}

// Blocks on huge pages (pool->huge, set by the host where transparent huge
// pages back madvised memory): a block's strides start on a huge-page
// boundary and are advised MADV_HUGEPAGE. A 16 MiB frame is then 8 pages
// for the TLB instead of 4,096, and 8 faults. On a virtual machine, where a
// TLB miss walks two page tables, a sender of 16 MiB SecretStream frames on
// base pages spent 4.6 CPU s/GB (64 KiB frames, whose chunks stay in a few
// pages: 1.5); on huge pages 1.3. Released strides then go back in whole
// huge pages, and no spare pages are kept (moving base pages into a block
// would split its huge pages; faults are few anyway).
static size_t
udx__huge_unit (size_t huge, size_t page) {
  if (huge <= page || (huge & (huge - 1)) != 0 || huge > ((size_t) 1 << 30))
    return page;
  return huge;
}

// size bytes mapped at a multiple of align (a page multiple); NULL on failure.
static uint8_t *
udx__map_aligned (size_t size, size_t align, size_t page) {
  size_t extra = align > page ? align : 0;
  if (size > SIZE_MAX - extra)
    return NULL;
  void *r = mmap(NULL, size + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (r == MAP_FAILED)
    return NULL;
  uint8_t *raw = r;
  if (extra == 0)
    return raw;
  uint8_t *map = (uint8_t *) (((uintptr_t) raw + align - 1) & ~(uintptr_t) (align - 1));
  if (map > raw)
    munmap(raw, (size_t) (map - raw));
  if (raw + size + extra > map + size)
    munmap(map + size, (size_t) (raw + size + extra - (map + size)));
  return map;
}

// A block: [pad][lead: the room left in the queue's chunks, copied to them
// at commit][strides], with the strides page aligned so that released ones
// can be unmapped. A run that fits the lead has no strides: it is copied
// whole at commit, and the mapping goes then.
static int
udx__bufq_map_block (udx_bufq_t *q, udx_pool_t *pool, size_t len, udx_bufq_ext_t **out, uint8_t **p) {
  uint64_t capacity = udx__bufq_capacity(q);
  size_t lead = (size_t) (capacity - q->end);
  size_t page = udx__page_size();
  size_t unit = udx__huge_unit(pool->huge, page);
  size_t nstr = len > lead ? (len - lead + UDX_CHUNK_SIZE - 1) / UDX_CHUNK_SIZE : 0;
  size_t pad = (unit - lead % unit) % unit; // never touched: no memory
  size_t size = pad + lead + nstr * UDX_CHUNK_SIZE;
  size = (size + page - 1) / page * page;
  while (q->cap - q->n < nstr) {
    if (udx__bufq_grow_ring(q) < 0)
      return UDX_ERR_NOMEM;
  }
  udx_bufq_ext_t *e = calloc(1, sizeof(*e));
  if (e == NULL)
    return UDX_ERR_NOMEM;
  uint8_t *map = udx__map_aligned(size, unit, page);
  if (map == NULL) {
    free(e);
    return UDX_ERR_NOMEM;
  }
  // huge pages from the strides on (the lead is copied out at commit); a
  // refusal leaves base pages, as without them
  if (unit > page)
    madvise(map + pad + lead, size - pad - lead, MADV_HUGEPAGE);
  else
    udx__bufq_reuse(q, map, size);
  e->unit = unit;
  e->mapped = pool->mapped;
  udx__mapped_add(e->mapped, 1);
  pool->blocks++;
  e->map = map;
  e->map_len = size;
  e->strides = e->map + pad + lead;
  e->off = capacity;
  e->end_off = capacity + (uint64_t) nstr * UDX_CHUNK_SIZE;
  *out = e;
  *p = e->map + pad;
  return 0;
}

int
udx__bufq_reserve (udx_bufq_t *q, udx_pool_t *pool, size_t len, uint8_t **p) {
  *p = NULL;
  if ((uint64_t) len > UDX_BUFQ_RESERVE_MAX || len > SIZE_MAX / 2)
    return UDX_ERR_NOMEM; // and the size math below cannot wrap
  // short, or within room made before (a short reservation given back
  // leaves its chunks): a block would have no strides of its own
  if (len < UDX_BUFQ_BLOCK_MIN || len <= udx__bufq_capacity(q) - q->end) {
    int err = udx__bufq_room(q, pool, len);
    if (err < 0)
      return err;
    size_t room = 0;
    if (len > 0)
      *p = udx__bufq_at(q, q->end, &room);
    if (len <= room)
      return 0; // in place, in one chunk
    // across chunks: made in a buffer, copied at commit
    udx_bufq_ext_t *e = calloc(1, sizeof(*e) + len);
    if (e == NULL)
      return UDX_ERR_NOMEM;
    e->strides = (uint8_t *) (e + 1);
    q->resv = e;
    *p = e->strides;
    return 0;
  }

  udx_bufq_ext_t *e;
  int err = udx__bufq_map_block(q, pool, len, &e, p);
  if (err < 0)
    return err;
  q->resv = e;
  return 0;
}

// Appends a mapped block's run: the lead copied to the queue's chunks, the
// strides become chunks.
static void
udx__bufq_commit_map (udx_bufq_t *q, udx_pool_t *pool, udx_bufq_ext_t *e, size_t len) {
  size_t lead = (size_t) (e->off - q->end);
  if (len <= lead) { // no strides: all of it fit the room before
    udx__bufq_copy_in(q, e->strides - lead, len);
    udx__ext_free(e, pool);
    return;
  }
  udx__bufq_copy_in(q, e->strides - lead, lead);
  for (uint64_t off = e->off; off < e->end_off; off += UDX_CHUNK_SIZE) {
    q->chunks[(q->first + q->n) & (q->cap - 1)] = e->strides + (off - e->off);
    q->n++;
  }
  q->end += len - lead;
  // The pad and the copied lead are not needed now.
  e->unmapped = (size_t) (e->strides - e->map);
  if (e->unmapped > 0)
    munmap(e->map, e->unmapped);
  udx_bufq_ext_t **tail = &q->ext;
  while (*tail)
    tail = &(*tail)->next;
  *tail = e;
}

void
udx__bufq_commit (udx_bufq_t *q, udx_pool_t *pool, size_t len) {
  udx_bufq_ext_t *e = q->resv;
  if (e == NULL) {
    q->end += len; // made in place
    return;
  }
  q->resv = NULL;
  if (e->map == NULL) {
    udx__bufq_copy_in(q, e->strides, len); // room was made at reserve
    free(e);
    return;
  }
  udx__bufq_commit_map(q, pool, e, len);
}

int
udx__bufq_reserve_block (udx_bufq_t *q, udx_pool_t *pool, size_t len, udx_bufq_ext_t **e, uint8_t **p) {
  *e = NULL;
  *p = NULL;
  if (len == 0 || (uint64_t) len > UDX_BUFQ_RESERVE_MAX || len > SIZE_MAX / 2)
    return len == 0 ? UDX_ERR_INVAL : UDX_ERR_NOMEM;
  int err = udx__bufq_map_block(q, pool, len, e, p);
  if (err == 0)
    q->held = true;
  return err;
}

void
udx__bufq_unhold (udx_bufq_t *q) {
  q->held = false;
}

void
udx__bufq_commit_block (udx_bufq_t *q, udx_pool_t *pool, udx_bufq_ext_t *e, size_t len) {
  q->held = false;
  udx__bufq_commit_map(q, pool, e, len);
}

void
udx__bufq_free_block (udx_bufq_ext_t *e, udx_pool_t *pool) {
  if (pool)
    udx__ext_free(e, pool);
  else
    udx__ext_unmap(e);
}

void
udx__bufq_unreserve (udx_bufq_t *q, udx_pool_t *pool) {
  udx_bufq_ext_t *e = q->resv;
  q->resv = NULL;
  if (e && e->map)
    udx__ext_free(e, pool);
  else
    free(e);
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

// Drops the chunk at base: back to the pool, or unmapped with its block.
static void
udx__bufq_drop_first (udx_bufq_t *q, udx_pool_t *pool) {
  udx_bufq_ext_t *e = q->ext;
  if (e && udx__ext_owns(e, q->base)) {
    if (q->base + UDX_CHUNK_SIZE >= e->end_off) {
      q->ext = e->next;
      if (e->map_len > e->unmapped)
        udx__bufq_retire(q, e, e->map + e->unmapped, e->map_len - e->unmapped);
      e->unmapped = e->map_len;
      udx__ext_free(e, pool);
    } else {
      udx__ext_trim(q, e, q->base + UDX_CHUNK_SIZE - e->off);
    }
  } else {
    udx__freelist_put(&pool->chunks, q->chunks[q->first]);
  }
  q->first = (q->first + 1) & (q->cap - 1);
  q->n--;
  q->base += UDX_CHUNK_SIZE;
}

void
udx__bufq_release (udx_bufq_t *q, udx_pool_t *pool, uint64_t off) {
  if (off < q->start)
    return;
  if (off > q->end)
    off = q->end;
  q->start = off;
  while (q->n > 0 && q->start - q->base >= UDX_CHUNK_SIZE)
    udx__bufq_drop_first(q, pool);
  // Empty: restart the single chunk at the current offset, keeping it,
  // unless it is the last of a block (which would keep the block). Not
  // while a run is out: its block starts where the chunks end now.
  if (q->start == q->end && q->n == 1 && !q->held) {
    if (q->ext && udx__ext_owns(q->ext, q->base))
      udx__bufq_drop_first(q, pool);
    q->base = q->start;
  }
  if (q->start == q->end && !q->held)
    udx__spare_free(q); // nothing queued: an idle stream keeps no pages
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
