/*
 * object_index.h — the master's object record and the key -> object hash map.
 *
 * An object record (mc_object_t) is one heap block: fixed fields, then rep_cap replica refs, then
 * the key and its NUL. The master owns the meaning of the fields (master_service.c); this file
 * only creates, finds, iterates and drops records. The map is open addressing with linear probing
 * over 16-byte slots {XXH3 hash, record}; deletion shifts later entries back, so there are no
 * tombstones and lookups never degrade with churn. It grows at 3/4 load and shrinks at 1/8.
 *
 * Not thread-safe: the master calls it under its lock.
 */
#ifndef MC_MASTER_OBJECT_INDEX_H
#define MC_MASTER_OBJECT_INDEX_H

#include <stddef.h>
#include <stdint.h>

struct mc_pending_put;    /* master_internal.h */
struct mc_object_offload; /* master_internal.h */

/*
 * Where one replica lives: segment slot and allocator handle. For a 0-byte object nothing is
 * allocated and `handle` holds the segment's mount generation instead, so a replica whose segment
 * was unmounted (and the slot perhaps reused) is recognised as gone.
 */
typedef struct mc_replica_ref {
    uint32_t seg;
    uint32_t handle;
} mc_replica_ref_t;

/*
 * Invariants (the master's; checked in debug builds by mc_master_tick):
 *  - complete || pending != NULL (a record with neither is deleted).
 *  - complete && size > 0 => nrep >= 1 or a disk replica (offload); every rep[i] a live extent
 *    of a mounted segment whose cookie is this record, on pairwise distinct segments.
 *  - !complete => nrep == 0 (a PROCESSING object is readable by no one; its extents are in
 *    pending).
 *  - lease_timeout == 0 means never leased; leased means lease_timeout > now. This is upstream's
 *    lease (exist and get grant it): it only refuses a Remove without force.
 *  - Being read means readers > 0 && read_until > now: `readers` leases of group read_lease_id
 *    were granted by GetReplicaList and not yet released, the latest running until read_until.
 *    Only then are the value's extents off limits (never evicted, fenced when dropped).
 *    read_lease_id changes whenever a grant finds no lease of the group still running, so a
 *    release of an earlier group never counts against a later one.
 *  - access_ms: the last commit or read (exist, get); eviction takes the least recent first
 *    (by the later of access_ms and complete_ms, which offload sets for values restored from
 *    disk).
 */
typedef struct mc_object {
    uint64_t size;                     /* bytes of the readable value */
    uint64_t lease_timeout;            /* ms (master clock); 0 = never leased */
    uint64_t soft_pin_until;           /* ms; pinned while > now; 0 = not pinned */
    uint64_t complete_ms;              /* when the readable value was committed */
    uint64_t access_ms;                /* last commit or read (eviction order) */
    uint64_t read_lease_id;            /* the current group of read leases; 0 = none yet */
    uint64_t read_until;               /* ms: when the group's latest lease runs out */
    struct mc_pending_put *pending;    /* a put or upsert in progress, or NULL */
    struct mc_object_offload *offload; /* disk replicas and offload task of the value, or NULL */
    uint16_t key_len;
    uint8_t nrep;           /* readable replicas in rep[0..nrep) */
    uint8_t rep_cap;        /* room in rep[] */
    uint8_t complete;       /* 1: a readable value exists */
    uint8_t hard_pinned;    /* 1: never evicted */
    uint8_t has_checksum;   /* 1: `checksum` is the writer's CRC32C of the readable value */
    uint32_t checksum;      /* CRC32C (Castagnoli) of the readable value */
    uint32_t readers;       /* read leases of read_lease_id granted and not released */
    uint64_t value_id;      /* identifies the readable value (task_manager.c); 0 = none yet */
    uint64_t writer;        /* hash of the client that put the value; 0 = unknown (recovered) */
    uint64_t restore_tag;   /* != 0: the value was restored (restore.c); its restore record's tag */
    mc_replica_ref_t rep[]; /* rep_cap entries, then key_len + 1 bytes of key */
} mc_object_t;

static inline const char *mc_object_key(const mc_object_t *o)
{
    return (const char *)(o->rep + o->rep_cap);
}

/* A zeroed record for key[0..len) with room for rep_cap replicas; NULL when out of memory. */
mc_object_t *mc_object_new(const char *key, size_t len, unsigned rep_cap);
void mc_object_free(mc_object_t *o);
/* Heap bytes of one record (without malloc's own overhead). */
size_t mc_object_bytes(const mc_object_t *o);

typedef struct mc_index_slot {
    uint64_t hash;
    mc_object_t *obj; /* NULL: empty */
} mc_index_slot_t;

/* Invariant: every record is reachable from slot hash & mask by linear probing without crossing
 * an empty slot; count <= 3/4 of cap; cap is a power of two (or 0 before the first insert). */
typedef struct mc_index {
    mc_index_slot_t *slots;
    size_t cap;
    size_t count;
} mc_index_t;

void mc_index_init(mc_index_t *idx);
/* Frees the table (not the records: iterate and free them first). */
void mc_index_fini(mc_index_t *idx);

mc_object_t *mc_index_find(const mc_index_t *idx, const char *key, size_t len);
/* Adds a record whose key is absent. 0 or MC_ERR_INTERNAL_ERROR (no memory to grow). */
int mc_index_insert(mc_index_t *idx, mc_object_t *o);
/* Drops the record (which must be present) from the map; does not free it. */
void mc_index_remove(mc_index_t *idx, mc_object_t *o);
/* Puts `repl` (same key) where `o` was. */
void mc_index_replace(mc_index_t *idx, mc_object_t *o, mc_object_t *repl);

/* Iteration: start with *cursor = 0; returns the next record or NULL at the end. The map must
 * not change during an iteration (collect first, then remove). */
mc_object_t *mc_index_next(const mc_index_t *idx, size_t *cursor);

/*
 * Resumable scan, for walking the map in slices with the master's lock released in between (the
 * map may grow, shrink and change between two calls). Start with cursor 0; each call hands `fn`
 * every record whose home bucket is the cursor's and returns the next cursor, 0 when the scan is
 * complete. Guarantee (the reverse-binary cursor of Redis's dictScan, which holds for linear
 * probing too because a bucket here is the set of records whose hash has the cursor's low bits):
 * a record present from the first call to the last is handed out at least once; one added or
 * removed meanwhile may or may not be; after a shrink a record may be handed out twice. `fn`
 * must not change the map; collect, then change it between calls.
 */
typedef void (*mc_index_scan_fn)(void *arg, mc_object_t *o);
size_t mc_index_scan(const mc_index_t *idx, size_t cursor, mc_index_scan_fn fn, void *arg);

static inline size_t mc_index_count(const mc_index_t *idx)
{
    return idx->count;
}

/* Bytes of the slot array. */
size_t mc_index_table_bytes(const mc_index_t *idx);

#endif /* MC_MASTER_OBJECT_INDEX_H */
