#ifndef UDX_BUFQ_H
#define UDX_BUFQ_H

// Byte queues made of fixed-size chunks (send queue, read buffer), and the
// pools they draw from. Bytes are addressed by their 64-bit stream offset, so
// a packet can refer to [off, off+len) without holding pointers.

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define UDX_CHUNK_SIZE 16384
#define UDX_SLOT_SIZE  2048

// Reserved runs of at least this many bytes get a block of their own.
#define UDX_BUFQ_BLOCK_MIN (256 * 1024)

// The largest run one reservation takes (no stream queues this much).
#define UDX_BUFQ_RESERVE_MAX ((uint64_t) 1 << 40)

// A free list of equally sized blocks; keeps at most max_free cached.
typedef struct udx_freelist_s {
  void *head;
  size_t size;
  uint32_t nfree;
  uint32_t max_free;
  uint64_t allocs; // blocks obtained from malloc (for tests: no allocation per packet)
} udx_freelist_t;

typedef struct udx_pool_s {
  udx_freelist_t chunks; // UDX_CHUNK_SIZE
  udx_freelist_t slots;  // UDX_SLOT_SIZE, out-of-order packets
  uint64_t blocks;       // reserved blocks mapped now (for tests: none left behind)
  uint64_t *mapped;      // the host's count of mappings, kept atomically (NULL: none); a
                         // block keeps it past its stream's pool (udx_mapped_blocks)
  size_t huge;           // the huge-page size blocks are advised to (0: base pages); the
                         // host sets it where transparent huge pages back madvised memory
} udx_pool_t;

void
udx__pool_init (udx_pool_t *pool);

void
udx__pool_destroy (udx_pool_t *pool);

void *
udx__freelist_get (udx_freelist_t *fl);

void
udx__freelist_put (udx_freelist_t *fl, void *p);

// A block the send queue took in one piece (udx__bufq_reserve): its chunks
// are 16 KiB strides of one mapping, returned to the system as they are
// released instead of going to the pool.
typedef struct udx_bufq_ext_s {
  struct udx_bufq_ext_s *next;
  uint8_t *map;     // the mapping (NULL: a short run's buffer, at strides)
  size_t map_len;   // its size
  size_t unmapped;  // bytes at its start already unmapped
  uint8_t *strides; // first stride (page aligned)
  uint64_t off;     // stream offset of the first stride
  uint64_t end_off; // one past the last stride's capacity
  uint64_t *mapped; // the count it is in (the pool's at its mapping)
  size_t unit;      // what it is given back in whole: the page, or the huge page
} udx_bufq_ext_t;

typedef struct udx_bufq_spare_s udx_bufq_spare_t;

typedef struct udx_bufq_s {
  uint8_t **chunks; // ring of chunk pointers
  uint32_t cap;     // power of two (or 0)
  uint32_t first;
  uint32_t n;
  uint64_t base;                  // stream offset of chunks[first][0]
  uint64_t start;                 // first byte still held
  uint64_t end;                   // one past the last byte
  udx_bufq_ext_t *ext;            // blocks with chunks in the ring, oldest first
  udx_bufq_ext_t *resv;           // a block reserved, not yet committed
  bool held;                      // a block run out (udx__bufq_reserve_block): the end stays where it is
  struct udx_bufq_spare_s *spare; // released blocks' pages kept for the next block (bufq.c)
} udx_bufq_t;

void
udx__bufq_init (udx_bufq_t *q, uint64_t off);

void
udx__bufq_destroy (udx_bufq_t *q, udx_pool_t *pool);

static inline uint64_t
udx__bufq_len (const udx_bufq_t *q) {
  return q->end - q->start;
}

// Copies len bytes to the end. 0 or UDX_ERR_NOMEM (nothing appended then).
int
udx__bufq_append (udx_bufq_t *q, udx_pool_t *pool, const void *data, size_t len);

// A contiguous run of len bytes to be appended (the next bytes after end),
// for a writer that makes its bytes in place: fill *p, then
// udx__bufq_commit, or udx__bufq_unreserve to append nothing. Runs within
// one chunk are in it; other short ones are in a buffer copied at commit;
// from UDX_BUFQ_BLOCK_MIN on, a run gets a block of its own whose strides
// become the queue's chunks at commit (no copy but the room left in the
// chunks before it). 0 or UDX_ERR_NOMEM.
int
udx__bufq_reserve (udx_bufq_t *q, udx_pool_t *pool, size_t len, uint8_t **p);

// len: as reserved.
void
udx__bufq_commit (udx_bufq_t *q, udx_pool_t *pool, size_t len);

void
udx__bufq_unreserve (udx_bufq_t *q, udx_pool_t *pool);

// A block of its own for len bytes (> 0) to be appended after end, made
// later, off the loop thread too: the queue does not hold it (*e is the
// caller's), so it may be destroyed meanwhile. Nothing else may be appended
// until udx__bufq_commit_block (its lead is the room at end now) or
// udx__bufq_free_block. 0, UDX_ERR_INVAL or UDX_ERR_NOMEM.
int
udx__bufq_reserve_block (udx_bufq_t *q, udx_pool_t *pool, size_t len, udx_bufq_ext_t **e, uint8_t **p);

void
udx__bufq_commit_block (udx_bufq_t *q, udx_pool_t *pool, udx_bufq_ext_t *e, size_t len);

// The run is given back: nothing was appended.
void
udx__bufq_unhold (udx_bufq_t *q);

// pool: the one that counts it, or NULL when the caller took it off that
// count before (its queue went first).
void
udx__bufq_free_block (udx_bufq_ext_t *e, udx_pool_t *pool);

// Describes [off, off+len) (which must be held) as iovecs; returns the count
// used (at most max; the range is cut short if more would be needed).
int
udx__bufq_iov (const udx_bufq_t *q, uint64_t off, size_t len, struct iovec *iov, int max);

// Drops everything before off (clamped to [start, end]).
void
udx__bufq_release (udx_bufq_t *q, udx_pool_t *pool, uint64_t off);

// The contiguous run of bytes at start.
size_t
udx__bufq_peek (const udx_bufq_t *q, const uint8_t **p);

#endif
