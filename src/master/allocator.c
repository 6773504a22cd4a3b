/*
 * allocator.c — TLSF-style offset allocator for one segment (see allocator.h).
 *
 * Space is counted in units of MC_ALLOC_ALIGN bytes from the first aligned address. Every extent,
 * free or allocated, is a node in a pool array; nodes are named by their index (the handle), so
 * growing the pool never invalidates a handle. Free extents are kept in size-class bins: first
 * level = power of two of the size, second level = the next SL_BITS bits (sizes below SL_COUNT
 * units get one exact bin each). A bitmap per level says which bins are non-empty, so "the first
 * non-empty bin at least this big" is two count-trailing-zeros.
 *
 * Allocation is good-fit: the request is rounded up to the next bin boundary so that any extent
 * of the bin found fits (O(1)); only if no such bin has anything is the request's own bin scanned
 * for an extent that is large enough (this is what lets the whole segment, or any exact-size
 * leftover, still be allocated). The remainder of a split goes back into a bin.
 */
#include "allocator.h"

#include "log.h"
#include "mooncake/errors.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define UNIT_SHIFT 6
_Static_assert(MC_ALLOC_ALIGN == (1u << UNIT_SHIFT), "MC_ALLOC_ALIGN must be 1 << UNIT_SHIFT");

#define SL_BITS 4
#define SL_COUNT (1u << SL_BITS)
#define FL_COUNT 56 /* units < 2^58 (bytes < 2^64), rounded requests one level above */
#define MAX_REQUEST (1ull << 62)

#define NODE_NONE UINT32_MAX
#define NODE_USED (UINT32_MAX - 1)  /* bin_prev of an allocated extent */
#define NODE_SPARE (UINT32_MAX - 2) /* bin_prev of a pooled node that is not an extent */
#define NODE_CAP_MAX (UINT32_MAX - 3)
#define NODE_CAP_INITIAL 16u

/*
 * One extent, or a spare pool slot.
 * Invariants (checked by mc_alloc_check):
 *  - Walking `next` from a->head visits extents whose [offset, offset + size) tile [0, a->units)
 *    in address order without gaps; `prev` is the reverse link.
 *  - No two address-adjacent extents are both free (frees coalesce at once).
 *  - A free extent is in exactly one bin list, the bin mapping(size) names; a bin's bitmap bits
 *    are set iff its list is non-empty. Allocated extents are in no list (bin_prev = NODE_USED).
 *  - Spare slots (bin_prev = NODE_SPARE) form a singly linked list through `next`.
 *  - a->used_units is the sum of the sizes of allocated extents.
 */
struct node {
    uint64_t offset;   /* units from a->first */
    uint64_t size;     /* units, > 0 */
    uint32_t prev;     /* address-order neighbours, NODE_NONE at the ends */
    uint32_t next;     /* (for a spare slot: the next spare) */
    uint32_t bin_prev; /* free: previous in its bin (NODE_NONE first); else NODE_USED/NODE_SPARE */
    uint32_t bin_next; /* free: next in its bin */
    void *cookie;      /* allocated: the owner's cookie */
};

struct mc_alloc {
    uint64_t first;      /* first aligned address of the range */
    uint64_t units;      /* managed units */
    uint64_t used_units; /* in allocated extents */
    size_t used_count;   /* allocated extents */
    size_t free_count;   /* free extents */
    uint64_t fl_bitmap;
    uint16_t sl_bitmap[FL_COUNT];
    uint32_t bins[FL_COUNT][SL_COUNT]; /* heads of the free lists */
    struct node *nodes;
    uint32_t node_cap;
    uint32_t spare; /* first spare slot, NODE_NONE when the pool is full */
    uint32_t head;  /* the extent at offset 0, NODE_NONE for an empty range */
};

static unsigned msb64(uint64_t x)
{
    return 63u - (unsigned)__builtin_clzll(x);
}

/* The bin of a free extent of u units. */
static void mapping(uint64_t u, unsigned *fl, unsigned *sl)
{
    if (u < SL_COUNT) {
        *fl = 0;
        *sl = (unsigned)u;
        return;
    }
    unsigned f = msb64(u);
    *fl = f - SL_BITS + 1;
    *sl = (unsigned)(u >> (f - SL_BITS)) & (SL_COUNT - 1);
}

static int node_is_free(const struct node *n)
{
    return n->bin_prev != NODE_USED && n->bin_prev != NODE_SPARE;
}

static void bin_insert(mc_alloc_t *a, uint32_t idx)
{
    struct node *n = &a->nodes[idx];
    unsigned fl, sl;
    mapping(n->size, &fl, &sl);
    uint32_t head = a->bins[fl][sl];
    n->bin_prev = NODE_NONE;
    n->bin_next = head;
    if (head != NODE_NONE)
        a->nodes[head].bin_prev = idx;
    a->bins[fl][sl] = idx;
    a->fl_bitmap |= 1ull << fl;
    a->sl_bitmap[fl] |= (uint16_t)(1u << sl);
    a->free_count++;
}

static void bin_remove(mc_alloc_t *a, uint32_t idx)
{
    struct node *n = &a->nodes[idx];
    unsigned fl, sl;
    assert(node_is_free(n));
    mapping(n->size, &fl, &sl);
    if (n->bin_prev != NODE_NONE)
        a->nodes[n->bin_prev].bin_next = n->bin_next;
    else
        a->bins[fl][sl] = n->bin_next;
    if (n->bin_next != NODE_NONE)
        a->nodes[n->bin_next].bin_prev = n->bin_prev;
    if (a->bins[fl][sl] == NODE_NONE) {
        a->sl_bitmap[fl] &= (uint16_t) ~(1u << sl);
        if (a->sl_bitmap[fl] == 0)
            a->fl_bitmap &= ~(1ull << fl);
    }
    n->bin_prev = NODE_USED; /* out of every list; the caller decides what it becomes */
    n->bin_next = NODE_NONE;
    a->free_count--;
}

static void release_node(mc_alloc_t *a, uint32_t idx)
{
    struct node *n = &a->nodes[idx];
    n->bin_prev = NODE_SPARE;
    n->cookie = NULL;
    n->next = a->spare;
    a->spare = idx;
}

/* Makes sure a spare slot exists, growing the pool (which may move a->nodes). */
static int ensure_spare(mc_alloc_t *a)
{
    if (a->spare != NODE_NONE)
        return 0;
    if (a->node_cap >= NODE_CAP_MAX)
        return MC_ERR_INTERNAL_ERROR;
    uint32_t cap = a->node_cap > NODE_CAP_MAX / 2 ? NODE_CAP_MAX : a->node_cap * 2;
    struct node *nodes = realloc(a->nodes, (size_t)cap * sizeof(*nodes));
    if (!nodes)
        return MC_ERR_INTERNAL_ERROR;
    a->nodes = nodes;
    for (uint32_t i = cap; i-- > a->node_cap;)
        release_node(a, i);
    a->node_cap = cap;
    return 0;
}

static uint32_t take_spare(mc_alloc_t *a)
{
    uint32_t idx = a->spare;
    assert(idx != NODE_NONE);
    a->spare = a->nodes[idx].next;
    return idx;
}

/* Head of the first non-empty bin at or after (fl, sl), or NODE_NONE. */
static uint32_t find_bin_from(const mc_alloc_t *a, unsigned fl, unsigned sl)
{
    if (fl >= FL_COUNT)
        return NODE_NONE;
    uint32_t slmap = a->sl_bitmap[fl] & (~0u << sl);
    if (slmap == 0) {
        if (fl + 1 >= FL_COUNT)
            return NODE_NONE;
        uint64_t flmap = a->fl_bitmap & (~0ull << (fl + 1));
        if (flmap == 0)
            return NODE_NONE;
        fl = (unsigned)__builtin_ctzll(flmap);
        slmap = a->sl_bitmap[fl];
    }
    return a->bins[fl][__builtin_ctz(slmap)];
}

/* A free extent of at least u units, or NODE_NONE. */
static uint32_t find_fit(const mc_alloc_t *a, uint64_t u)
{
    unsigned fl, sl;
    uint64_t rounded = u;
    if (u >= SL_COUNT)
        rounded = u + (1ull << (msb64(u) - SL_BITS)) - 1;
    mapping(rounded, &fl, &sl);
    uint32_t idx = find_bin_from(a, fl, sl);
    if (idx != NODE_NONE)
        return idx;
    /* Nothing in a bin that surely fits: the request's own bin may still hold a big enough one. */
    mapping(u, &fl, &sl);
    for (idx = a->bins[fl][sl]; idx != NODE_NONE; idx = a->nodes[idx].bin_next) {
        if (a->nodes[idx].size >= u)
            return idx;
    }
    return NODE_NONE;
}

int mc_alloc_create(uint64_t base, uint64_t size, mc_alloc_t **out)
{
    *out = NULL;
    if (size > UINT64_MAX - base)
        return MC_ERR_INVALID_PARAMS;
    mc_alloc_t *a = calloc(1, sizeof(*a));
    if (!a)
        return MC_ERR_INTERNAL_ERROR;
    a->nodes = malloc(NODE_CAP_INITIAL * sizeof(*a->nodes));
    if (!a->nodes) {
        free(a);
        return MC_ERR_INTERNAL_ERROR;
    }
    memset(a->bins, 0xff, sizeof(a->bins)); /* NODE_NONE everywhere */
    a->node_cap = NODE_CAP_INITIAL;
    a->spare = NODE_NONE;
    for (uint32_t i = NODE_CAP_INITIAL; i-- > 0;)
        release_node(a, i);

    uint64_t end = (base + size) & ~(uint64_t)(MC_ALLOC_ALIGN - 1);
    uint64_t pad = (MC_ALLOC_ALIGN - base % MC_ALLOC_ALIGN) % MC_ALLOC_ALIGN;
    a->first = pad > UINT64_MAX - base ? UINT64_MAX : base + pad; /* UINT64_MAX: empty range */
    a->units = end > a->first ? (end - a->first) >> UNIT_SHIFT : 0;
    a->head = NODE_NONE;
    if (a->units > 0) {
        uint32_t idx = take_spare(a);
        a->nodes[idx] = (struct node){
            .offset = 0, .size = a->units, .prev = NODE_NONE, .next = NODE_NONE, .cookie = NULL};
        bin_insert(a, idx);
        a->head = idx;
    }
    *out = a;
    return 0;
}

void mc_alloc_destroy(mc_alloc_t *a)
{
    if (!a)
        return;
    free(a->nodes);
    free(a);
}

int mc_alloc_alloc(mc_alloc_t *a, uint64_t size, void *cookie, uint64_t *addr, uint32_t *handle)
{
    if (size == 0 || size > MAX_REQUEST)
        return MC_ERR_INVALID_PARAMS;
    uint64_t u = (size + MC_ALLOC_ALIGN - 1) >> UNIT_SHIFT;
    if (u > a->units - a->used_units)
        return MC_ERR_NO_AVAILABLE_HANDLE;
    if (ensure_spare(a) != 0) /* before anything changes: a split needs one */
        return MC_ERR_INTERNAL_ERROR;
    uint32_t idx = find_fit(a, u);
    if (idx == NODE_NONE)
        return MC_ERR_NO_AVAILABLE_HANDLE;
    bin_remove(a, idx);
    if (a->nodes[idx].size > u) {
        uint32_t rest = take_spare(a);
        struct node *n = &a->nodes[idx];
        a->nodes[rest] = (struct node){.offset = n->offset + u,
                                       .size = n->size - u,
                                       .prev = idx,
                                       .next = n->next,
                                       .cookie = NULL};
        if (n->next != NODE_NONE)
            a->nodes[n->next].prev = rest;
        n->next = rest;
        n->size = u;
        bin_insert(a, rest);
    }
    struct node *n = &a->nodes[idx];
    n->bin_prev = NODE_USED;
    n->cookie = cookie;
    a->used_units += u;
    a->used_count++;
    *addr = a->first + (n->offset << UNIT_SHIFT);
    *handle = idx;
    return 0;
}

/* Splits off the head of free node idx (bin_removed) at `u` units: a new free node follows. */
static void split_tail(mc_alloc_t *a, uint32_t idx, uint64_t u)
{
    uint32_t rest = take_spare(a);
    struct node *n = &a->nodes[idx];
    a->nodes[rest] = (struct node){
        .offset = n->offset + u, .size = n->size - u, .prev = idx, .next = n->next, .cookie = NULL};
    if (n->next != NODE_NONE)
        a->nodes[n->next].prev = rest;
    n->next = rest;
    n->size = u;
    bin_insert(a, rest);
}

int mc_alloc_reserve(mc_alloc_t *a, uint64_t addr, uint64_t size, void *cookie, uint32_t *handle,
                     uint32_t *hint)
{
    if (size == 0 || size > MAX_REQUEST || addr % MC_ALLOC_ALIGN || addr < a->first)
        return MC_ERR_INVALID_PARAMS;
    uint64_t off = (addr - a->first) >> UNIT_SHIFT;
    uint64_t u = (size + MC_ALLOC_ALIGN - 1) >> UNIT_SHIFT;
    if (off >= a->units || u > a->units - off)
        return MC_ERR_INVALID_PARAMS;
    uint32_t idx = a->head;
    if (hint && *hint != MC_ALLOC_HANDLE_NONE && *hint < a->node_cap &&
        a->nodes[*hint].bin_prev != NODE_SPARE && a->nodes[*hint].offset <= off)
        idx = *hint;
    while (idx != NODE_NONE && a->nodes[idx].offset + a->nodes[idx].size <= off)
        idx = a->nodes[idx].next;
    if (idx == NODE_NONE || !node_is_free(&a->nodes[idx]) ||
        a->nodes[idx].offset + a->nodes[idx].size < off + u)
        return MC_ERR_NO_AVAILABLE_HANDLE;
    /* up to two splits: a spare node each */
    if (ensure_spare(a) != 0)
        return MC_ERR_INTERNAL_ERROR;
    uint32_t s1 = take_spare(a);
    if (ensure_spare(a) != 0) {
        release_node(a, s1);
        return MC_ERR_INTERNAL_ERROR;
    }
    release_node(a, s1);
    bin_remove(a, idx);
    if (a->nodes[idx].offset < off) { /* free head stays free; idx moves to its tail */
        uint32_t head = idx;
        split_tail(a, head, off - a->nodes[head].offset);
        idx = a->nodes[head].next;
        bin_remove(a, idx);
        bin_insert(a, head);
    }
    if (a->nodes[idx].size > u)
        split_tail(a, idx, u);
    struct node *n = &a->nodes[idx];
    n->bin_prev = NODE_USED;
    n->cookie = cookie;
    a->used_units += u;
    a->used_count++;
    *handle = idx;
    if (hint)
        *hint = idx;
    return 0;
}

int mc_alloc_is_live(const mc_alloc_t *a, uint32_t handle)
{
    return handle < a->node_cap && a->nodes[handle].bin_prev == NODE_USED;
}

int mc_alloc_free(mc_alloc_t *a, uint32_t handle)
{
    if (!mc_alloc_is_live(a, handle))
        return MC_ERR_INVALID_PARAMS;
    uint32_t idx = handle;
    struct node *n = &a->nodes[idx];
    a->used_units -= n->size;
    a->used_count--;
    n->cookie = NULL;
    if (n->prev != NODE_NONE && node_is_free(&a->nodes[n->prev])) {
        uint32_t p = n->prev;
        bin_remove(a, p);
        a->nodes[p].size += n->size;
        a->nodes[p].next = n->next;
        if (n->next != NODE_NONE)
            a->nodes[n->next].prev = p;
        release_node(a, idx);
        idx = p;
        n = &a->nodes[idx];
    }
    if (n->next != NODE_NONE && node_is_free(&a->nodes[n->next])) {
        uint32_t x = n->next;
        bin_remove(a, x);
        n->size += a->nodes[x].size;
        n->next = a->nodes[x].next;
        if (n->next != NODE_NONE)
            a->nodes[n->next].prev = idx;
        release_node(a, x);
    }
    bin_insert(a, idx);
    return 0;
}

uint64_t mc_alloc_extent_addr(const mc_alloc_t *a, uint32_t handle)
{
    assert(mc_alloc_is_live(a, handle));
    return a->first + (a->nodes[handle].offset << UNIT_SHIFT);
}

uint64_t mc_alloc_extent_size(const mc_alloc_t *a, uint32_t handle)
{
    assert(mc_alloc_is_live(a, handle));
    return a->nodes[handle].size << UNIT_SHIFT;
}

void *mc_alloc_cookie(const mc_alloc_t *a, uint32_t handle)
{
    assert(mc_alloc_is_live(a, handle));
    return a->nodes[handle].cookie;
}

void mc_alloc_set_cookie(mc_alloc_t *a, uint32_t handle, void *cookie)
{
    assert(mc_alloc_is_live(a, handle));
    a->nodes[handle].cookie = cookie;
}

size_t mc_alloc_foreach_used(const mc_alloc_t *a, mc_alloc_visit_fn fn, void *arg)
{
    size_t visited = 0;
    for (uint32_t i = a->head; i != NODE_NONE; i = a->nodes[i].next) {
        const struct node *n = &a->nodes[i];
        if (n->bin_prev != NODE_USED)
            continue;
        fn(arg, i, a->first + (n->offset << UNIT_SHIFT), n->size << UNIT_SHIFT, n->cookie);
        visited++;
    }
    return visited;
}

uint64_t mc_alloc_capacity(const mc_alloc_t *a)
{
    return a->units << UNIT_SHIFT;
}

uint64_t mc_alloc_used(const mc_alloc_t *a)
{
    return a->used_units << UNIT_SHIFT;
}

uint64_t mc_alloc_largest_free(const mc_alloc_t *a)
{
    if (a->fl_bitmap == 0)
        return 0;
    unsigned fl = msb64(a->fl_bitmap);
    unsigned sl = msb64(a->sl_bitmap[fl]);
    uint64_t best = 0;
    for (uint32_t i = a->bins[fl][sl]; i != NODE_NONE; i = a->nodes[i].bin_next) {
        if (a->nodes[i].size > best)
            best = a->nodes[i].size;
    }
    return best << UNIT_SHIFT;
}

size_t mc_alloc_extent_count(const mc_alloc_t *a)
{
    return a->used_count;
}

size_t mc_alloc_free_extent_count(const mc_alloc_t *a)
{
    return a->free_count;
}

size_t mc_alloc_metadata_bytes(const mc_alloc_t *a)
{
    return sizeof(*a) + (size_t)a->node_cap * sizeof(*a->nodes);
}

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            MC_ERROR("allocator invariant broken: " __VA_ARGS__);                                  \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

/* The address-order walk: tiling, coalescing, used total. */
static int check_extents(const mc_alloc_t *a, size_t *free_seen)
{
    uint64_t offset = 0, used = 0;
    size_t used_seen = 0, steps = 0;
    uint32_t prev = NODE_NONE;
    int prev_free = 0;
    *free_seen = 0;
    for (uint32_t i = a->head; i != NODE_NONE; i = a->nodes[i].next) {
        const struct node *n = &a->nodes[i];
        CHECK(i < a->node_cap && ++steps <= a->node_cap, "extent list corrupt at %u", i);
        CHECK(n->bin_prev != NODE_SPARE, "spare node %u in the extent list", i);
        CHECK(n->prev == prev, "node %u prev %u, expected %u", i, n->prev, prev);
        CHECK(n->offset == offset && n->size > 0, "node %u at %llu+%llu, expected offset %llu", i,
              (unsigned long long)n->offset, (unsigned long long)n->size,
              (unsigned long long)offset);
        int is_free = node_is_free(n);
        CHECK(!(is_free && prev_free), "free nodes %u and %u are adjacent", prev, i);
        if (is_free) {
            (*free_seen)++;
        } else {
            used += n->size;
            used_seen++;
        }
        offset += n->size;
        prev = i;
        prev_free = is_free;
    }
    CHECK(offset == a->units, "extents cover %llu of %llu units", (unsigned long long)offset,
          (unsigned long long)a->units);
    CHECK(used == a->used_units && used_seen == a->used_count, "used %llu/%zu, recorded %llu/%zu",
          (unsigned long long)used, used_seen, (unsigned long long)a->used_units, a->used_count);
    return 0;
}

/* Every bin list: membership, links, bitmaps. */
static int check_bins(const mc_alloc_t *a, size_t free_seen)
{
    size_t in_bins = 0;
    for (unsigned fl = 0; fl < FL_COUNT; fl++) {
        for (unsigned sl = 0; sl < SL_COUNT; sl++) {
            uint32_t prev = NODE_NONE;
            int nonempty = a->bins[fl][sl] != NODE_NONE;
            CHECK(nonempty == !!(a->sl_bitmap[fl] & (1u << sl)), "sl bitmap of bin %u/%u", fl, sl);
            for (uint32_t i = a->bins[fl][sl]; i != NODE_NONE; i = a->nodes[i].bin_next) {
                const struct node *n = &a->nodes[i];
                unsigned f, s;
                CHECK(i < a->node_cap && ++in_bins <= free_seen, "bin %u/%u list corrupt", fl, sl);
                CHECK(node_is_free(n) && n->bin_prev == prev, "bin %u/%u links at %u", fl, sl, i);
                mapping(n->size, &f, &s);
                CHECK(f == fl && s == sl, "node %u of size %llu in bin %u/%u", i,
                      (unsigned long long)n->size, fl, sl);
                prev = i;
            }
        }
        CHECK(!!a->sl_bitmap[fl] == !!(a->fl_bitmap & (1ull << fl)), "fl bitmap bit %u", fl);
    }
    CHECK(in_bins == free_seen && free_seen == a->free_count, "%zu in bins, %zu free, %zu counted",
          in_bins, free_seen, a->free_count);
    return 0;
}

int mc_alloc_check(const mc_alloc_t *a)
{
    size_t free_seen = 0;
    if (check_extents(a, &free_seen) != 0)
        return -1;
    return check_bins(a, free_seen);
}
