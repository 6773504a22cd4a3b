/*
 * object_index.c — object records and the open-addressing key -> object map (see object_index.h).
 *
 * Linear probing keeps a probe sequence in one or two cache lines; the slot carries the full
 * 64-bit hash so a probe only dereferences a record when the hashes match. Removal uses backward
 * shift (Knuth's algorithm R): later entries of the cluster that may legally sit in the hole move
 * back, so no tombstones accumulate under put/remove churn.
 */
#include "object_index.h"

#include "mooncake/errors.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define INDEX_INITIAL_CAP 64

static uint64_t hash_key(const char *key, size_t len)
{
    return XXH3_64bits(key, len);
}

mc_object_t *mc_object_new(const char *key, size_t len, unsigned rep_cap)
{
    assert(len <= UINT16_MAX && rep_cap <= UINT8_MAX);
    mc_object_t *o = calloc(1, sizeof(*o) + rep_cap * sizeof(mc_replica_ref_t) + len + 1);
    if (!o)
        return NULL;
    o->key_len = (uint16_t)len;
    o->rep_cap = (uint8_t)rep_cap;
    memcpy((char *)mc_object_key(o), key, len); /* calloc supplied the NUL */
    return o;
}

void mc_object_free(mc_object_t *o)
{
    free(o);
}

size_t mc_object_bytes(const mc_object_t *o)
{
    return sizeof(*o) + o->rep_cap * sizeof(mc_replica_ref_t) + o->key_len + 1u;
}

void mc_index_init(mc_index_t *idx)
{
    idx->slots = NULL;
    idx->cap = 0;
    idx->count = 0;
}

void mc_index_fini(mc_index_t *idx)
{
    free(idx->slots);
    mc_index_init(idx);
}

static int key_equal(const mc_object_t *o, const char *key, size_t len)
{
    return o->key_len == len && memcmp(mc_object_key(o), key, len) == 0;
}

mc_object_t *mc_index_find(const mc_index_t *idx, const char *key, size_t len)
{
    if (idx->cap == 0)
        return NULL;
    uint64_t h = hash_key(key, len);
    size_t mask = idx->cap - 1;
    for (size_t i = h & mask; idx->slots[i].obj; i = (i + 1) & mask) {
        if (idx->slots[i].hash == h && key_equal(idx->slots[i].obj, key, len))
            return idx->slots[i].obj;
    }
    return NULL;
}

static void place(mc_index_slot_t *slots, size_t cap, uint64_t h, mc_object_t *o)
{
    size_t mask = cap - 1;
    size_t i = h & mask;
    while (slots[i].obj)
        i = (i + 1) & mask;
    slots[i].hash = h;
    slots[i].obj = o;
}

static int resize(mc_index_t *idx, size_t cap)
{
    mc_index_slot_t *slots = calloc(cap, sizeof(*slots));
    if (!slots)
        return MC_ERR_INTERNAL_ERROR;
    for (size_t i = 0; i < idx->cap; i++) {
        if (idx->slots[i].obj)
            place(slots, cap, idx->slots[i].hash, idx->slots[i].obj);
    }
    free(idx->slots);
    idx->slots = slots;
    idx->cap = cap;
    return 0;
}

int mc_index_insert(mc_index_t *idx, mc_object_t *o)
{
    assert(!mc_index_find(idx, mc_object_key(o), o->key_len));
    if ((idx->count + 1) * 4 > idx->cap * 3) {
        int rc = resize(idx, idx->cap ? idx->cap * 2 : INDEX_INITIAL_CAP);
        if (rc != 0)
            return rc;
    }
    place(idx->slots, idx->cap, hash_key(mc_object_key(o), o->key_len), o);
    idx->count++;
    return 0;
}

/* The slot holding `o`, which must be present. */
static size_t slot_of(const mc_index_t *idx, const mc_object_t *o)
{
    size_t mask = idx->cap - 1;
    size_t i = hash_key(mc_object_key(o), o->key_len) & mask;
    while (idx->slots[i].obj != o) {
        assert(idx->slots[i].obj); /* reaching an empty slot means o is not in the map */
        i = (i + 1) & mask;
    }
    return i;
}

void mc_index_remove(mc_index_t *idx, mc_object_t *o)
{
    size_t mask = idx->cap - 1;
    size_t hole = slot_of(idx, o);
    for (size_t j = (hole + 1) & mask; idx->slots[j].obj; j = (j + 1) & mask) {
        size_t home = idx->slots[j].hash & mask;
        /* The entry at j stays if its home lies cyclically in (hole, j]. */
        int stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (stays)
            continue;
        idx->slots[hole] = idx->slots[j];
        hole = j;
    }
    idx->slots[hole].obj = NULL;
    idx->slots[hole].hash = 0;
    idx->count--;
    if (idx->cap > INDEX_INITIAL_CAP && idx->count * 8 < idx->cap)
        (void)resize(idx, idx->cap / 2); /* failing to shrink is harmless */
}

void mc_index_replace(mc_index_t *idx, mc_object_t *o, mc_object_t *repl)
{
    assert(repl->key_len == o->key_len && key_equal(repl, mc_object_key(o), o->key_len));
    idx->slots[slot_of(idx, o)].obj = repl;
}

mc_object_t *mc_index_next(const mc_index_t *idx, size_t *cursor)
{
    while (*cursor < idx->cap) {
        mc_object_t *o = idx->slots[(*cursor)++].obj;
        if (o)
            return o;
    }
    return NULL;
}

/* The bits of v in reverse order (bit 0 <-> bit 63). */
static uint64_t reverse_bits(uint64_t v)
{
    v = ((v >> 1) & 0x5555555555555555ull) | ((v & 0x5555555555555555ull) << 1);
    v = ((v >> 2) & 0x3333333333333333ull) | ((v & 0x3333333333333333ull) << 2);
    v = ((v >> 4) & 0x0f0f0f0f0f0f0f0full) | ((v & 0x0f0f0f0f0f0f0f0full) << 4);
    v = ((v >> 8) & 0x00ff00ff00ff00ffull) | ((v & 0x00ff00ff00ff00ffull) << 8);
    v = ((v >> 16) & 0x0000ffff0000ffffull) | ((v & 0x0000ffff0000ffffull) << 16);
    return (v >> 32) | (v << 32);
}

size_t mc_index_scan(const mc_index_t *idx, size_t cursor, mc_index_scan_fn fn, void *arg)
{
    _Static_assert(sizeof(size_t) == sizeof(uint64_t), "the scan cursor is 64 bits");
    if (idx->cap == 0)
        return 0;
    uint64_t mask = idx->cap - 1, bucket = cursor & mask;
    /* Records of this bucket sit from slot `bucket` on, before the next empty slot (there is
     * one: count <= 3/4 cap). */
    for (uint64_t i = bucket; idx->slots[i].obj; i = (i + 1) & mask) {
        if ((idx->slots[i].hash & mask) == bucket)
            fn(arg, idx->slots[i].obj);
    }
    /* Increment the bucket number from its highest bit down: the buckets already visited stay a
     * prefix of the order when the table doubles or halves. */
    uint64_t v = cursor | ~mask;
    v = reverse_bits(v) + 1;
    return (size_t)reverse_bits(v);
}

size_t mc_index_table_bytes(const mc_index_t *idx)
{
    return idx->cap * sizeof(mc_index_slot_t);
}
