/*
 * restore_table.h — the restore table (restore_table.c) and object records (journal.c), shared
 * by journal.c (records and the journal of changes: the part the core calls) and restore.c
 * (export, import, revival at re-mount: the restore extension). Everything here runs with the
 * master's lock held.
 *
 * The table holds imported records whose memory replicas are hidden until their owner
 * re-mounts (journal.h); a record's segments are interned (records share a few segments).
 */
#ifndef MC_MASTER_RESTORE_TABLE_H
#define MC_MASTER_RESTORE_TABLE_H

#include "master_internal.h"

#include <stddef.h>
#include <stdint.h>

/* A segment restored records name (interned: records share a few segments). */
typedef struct seg_ref {
    char id[MC_SEGMENT_ID_MAX];
    char client_id[MC_CLIENT_ID_MAX];
    char name[272];
} seg_ref_t;

typedef struct mc_restore_mem {
    uint64_t address;
    uint32_t ref; /* index into the table's seg_refs */
    /* 1: re-mounted from an untrusted record, its extent reserved (handle in segment `slot` of
     * mount generation `gen`) until the owner verifies its checksum (verify items below) */
    uint8_t verifying;
    uint32_t slot, gen, handle;
} mc_restore_mem_t;

/* A restored record with memory replicas not visible yet (mem[0..nmem)). */
typedef struct mc_restore_entry {
    struct mc_restore_entry *next; /* hash chain */
    uint64_t hash, size, soft_pin_ms, tag;
    uint32_t checksum;
    uint8_t has_checksum, hard_pinned, trusted, nmem;
    size_t key_len;
    char *key;              /* after mem[] in the same block */
    mc_restore_mem_t mem[]; /* room for the record's replicas */
} mc_restore_entry_t;

/* An extent the owner is asked to verify (its id is its index + 1); the entry of (key, tag)
 * holds the reservation: an item whose entry or mem is gone is skipped. */
typedef struct verify_item {
    char *key;
    size_t key_len;
    uint64_t tag, address, size;
    uint32_t checksum, slot, gen;
    uint8_t done;
} verify_item_t;

/* Chained hash by key; cap is a power of two. */
typedef struct mc_restore_table {
    mc_restore_entry_t **b;
    size_t cap, count;
    uint64_t deadline; /* master clock ms: what is still hidden then is dropped */
    int hold;          /* a standby: nothing expires until it takes over (trust_all) */
    verify_item_t *items;
    size_t nitems, items_cap, items_open;
    seg_ref_t *refs;
    size_t nrefs, refs_cap;
} mc_restore_table_t;

/* The table, created on first use (1024 buckets); NULL when out of memory. */
mc_restore_table_t *mc_restore_table_of(mc_master_t *m);
/* Index of the interned (id, client, name), added if new; UINT32_MAX when out of memory. */
uint32_t mc_restore_ref_intern(mc_restore_table_t *t, const char *id, const char *client,
                               const char *name);
/* The chain link where (key, len) with hash `h` (XXH3-64 of the key) is or would go. */
mc_restore_entry_t **mc_restore_entry_slot(mc_restore_table_t *t, const char *key, size_t len,
                                           uint64_t h);
/* The entry of `key`, or NULL. */
mc_restore_entry_t *mc_restore_entry_find(mc_master_t *m, const char *key, size_t len);
/* Takes `e` out of its chain (not freed). */
void mc_restore_entry_unlink(mc_restore_table_t *t, mc_restore_entry_t *e);
/* Frees e and the reservations it holds. */
void mc_restore_entry_free(mc_master_t *m, mc_restore_entry_t *e);
/* Doubles the buckets (left as they are when out of memory: longer chains, still correct). */
void mc_restore_table_grow(mc_restore_table_t *t);
/* The restore entry whose hidden replicas belong to o's record, or NULL. */
mc_restore_entry_t *mc_restore_entry_of(mc_master_t *m, const mc_object_t *o);

/* `key` got a new value or was removed by this master: a restored record of it is stale. */
void mc_restore_forget_locked(mc_master_t *m, const char *key, size_t len);
/* 1 when `key` has a restored record still hidden (its owner has not re-mounted yet). Such a
 * key is neither removed nor replaced until it is visible (or dropped): the log names its
 * extent, which no allocator holds yet, so a DEL or SET now could let that memory be handed out
 * before the change is in etcd (docs/ha.md). */
int mc_restore_hides_key_locked(mc_master_t *m, const char *key, size_t len);
/* 1 while restored records wait for a re-mount. */
int mc_restore_pending_locked(const mc_master_t *m);
/* Frees the table (the segments go with the master: nothing is released). */
void mc_restore_fini(mc_master_t *m);

/* Encodes the record of COMPLETE `o` (NULL: of `e` alone) plus e's hidden replicas (e may be
 * NULL), `now` on the master clock. Returns a malloc'd buffer of *len bytes, or NULL when out
 * of memory. */
uint8_t *mc_record_encode(const mc_master_t *m, const mc_object_t *o, const mc_restore_entry_t *e,
                          uint64_t now, size_t *len);

#endif /* MC_MASTER_RESTORE_TABLE_H */
