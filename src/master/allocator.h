/*
 * allocator.h — the space allocator of one mounted segment: hands out extents of the address
 * range [base, base + size) that a client contributed, and takes them back.
 *
 * It never touches the memory it manages (that memory lives in another process); it only does
 * the bookkeeping. TLSF-style: free extents sit in size-class bins (16 sub-bins per power of two)
 * found through two bitmaps, so alloc and free are O(1) except one bounded fallback scan, and a
 * freed extent merges at once with free address neighbours. Metadata is one small node per extent
 * plus ~4 KiB of bin heads, whatever the segment size (32 GiB costs no more than 32 MiB).
 *
 * Extents start at addresses aligned to MC_ALLOC_ALIGN and their sizes are rounded up to it;
 * the unaligned head and tail of [base, base + size) are never handed out. Each extent is named by
 * a handle (stable until freed) and carries an opaque cookie for its owner (the master stores the
 * owning object, so unmounting can find every object with bytes in the segment).
 *
 * Not thread-safe: the master calls it under its lock. Zero-byte requests are the caller's
 * business (MC_ERR_INVALID_PARAMS here).
 */
#ifndef MC_MASTER_ALLOCATOR_H
#define MC_MASTER_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>

#define MC_ALLOC_ALIGN 64u /* bytes: extent addresses and sizes are multiples */
#define MC_ALLOC_HANDLE_NONE UINT32_MAX

typedef struct mc_alloc mc_alloc_t;

/* Manages [base, base + size). 0, MC_ERR_INVALID_PARAMS (the range wraps past 2^64),
 * MC_ERR_INTERNAL_ERROR (out of memory). */
int mc_alloc_create(uint64_t base, uint64_t size, mc_alloc_t **out);
/* Frees the bookkeeping (outstanding extents simply vanish). NULL is a no-op. */
void mc_alloc_destroy(mc_alloc_t *a);

/*
 * Allocates round_up(size, MC_ALLOC_ALIGN) bytes: *addr the first byte, *handle its name.
 * 0, MC_ERR_NO_AVAILABLE_HANDLE when no free extent is large enough, MC_ERR_INVALID_PARAMS for
 * size 0 or above 2^62, MC_ERR_INTERNAL_ERROR when the node pool cannot grow.
 */
int mc_alloc_alloc(mc_alloc_t *a, uint64_t size, void *cookie, uint64_t *addr, uint32_t *handle);
/*
 * Allocates exactly [addr, addr + round_up(size)) (addr aligned to MC_ALLOC_ALIGN), which must
 * lie in one free extent: for restoring extents a previous master handed out (restore.c).
 * *hint: a handle to start the address walk from (MC_ALLOC_HANDLE_NONE: the first extent);
 * reserving in increasing address order with the hint this returns keeps the total walk linear.
 * 0, MC_ERR_INVALID_PARAMS (unaligned, empty, outside the range), MC_ERR_NO_AVAILABLE_HANDLE
 * (some of it is allocated), MC_ERR_INTERNAL_ERROR (the node pool cannot grow).
 */
int mc_alloc_reserve(mc_alloc_t *a, uint64_t addr, uint64_t size, void *cookie, uint32_t *handle,
                     uint32_t *hint);
/* Frees an extent and merges it with free neighbours. MC_ERR_INVALID_PARAMS when `handle` does
 * not name an allocated extent (nothing changes then). */
int mc_alloc_free(mc_alloc_t *a, uint32_t handle);

/* Of an allocated extent (the handle must be live; asserted): */
uint64_t mc_alloc_extent_addr(const mc_alloc_t *a, uint32_t handle);
uint64_t mc_alloc_extent_size(const mc_alloc_t *a, uint32_t handle); /* rounded size */
void *mc_alloc_cookie(const mc_alloc_t *a, uint32_t handle);
void mc_alloc_set_cookie(mc_alloc_t *a, uint32_t handle, void *cookie);
/* 1 when `handle` names an allocated extent, else 0. */
int mc_alloc_is_live(const mc_alloc_t *a, uint32_t handle);

typedef void (*mc_alloc_visit_fn)(void *arg, uint32_t handle, uint64_t addr, uint64_t size,
                                  void *cookie);
/* Calls fn for every allocated extent in address order; fn must not alloc or free. Returns the
 * number visited. */
size_t mc_alloc_foreach_used(const mc_alloc_t *a, mc_alloc_visit_fn fn, void *arg);

uint64_t mc_alloc_capacity(const mc_alloc_t *a);     /* usable bytes (aligned part) */
uint64_t mc_alloc_used(const mc_alloc_t *a);         /* bytes in allocated extents */
uint64_t mc_alloc_largest_free(const mc_alloc_t *a); /* largest single free extent */
size_t mc_alloc_extent_count(const mc_alloc_t *a);   /* allocated extents */
size_t mc_alloc_free_extent_count(const mc_alloc_t *a);
size_t mc_alloc_metadata_bytes(const mc_alloc_t *a); /* heap the bookkeeping uses */

/* Walks every structure and checks the invariants listed in allocator.c. 0 when they hold,
 * else -1 (and logs which one broke). O(extents); for tests and debug builds. */
int mc_alloc_check(const mc_alloc_t *a);

#endif /* MC_MASTER_ALLOCATOR_H */
