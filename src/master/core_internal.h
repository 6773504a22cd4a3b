/*
 * core_internal.h — how the files of the Master Service core call one another: the layers they
 * form, the macro that raises an extension event, small helpers, and the functions one core
 * file defines for the others. Only for the core's files; the extensions use master_internal.h
 * (the core's *_locked API) and extension.h, other layers master_service.h.
 *
 * The core is cut by concern, and its files form layers: each calls only files of the layers
 * below it, never back (scripts/lint.sh fails on a call circle between the files of src/master).
 * A file that needs something from above gets it through an extension hook (m->ext) or the
 * eviction policy's pointer (m->eviction), which are not calls by name.
 *
 *   monitor.c   expiry and departure of clients, put timeouts, drains, sweeps; mc_master_tick
 *               -> segments.c, clients.c, objects.c, extents.c
 *   removal.c   Remove, RemoveAll, RemoveByRegex -> reads.c, objects.c, master_service.c
 *   stats.c     the stats, the operation counters, the segment list -> segments.c
 *   reads.c     reads and read leases -> segments.c, extents.c, master_service.c
 *   puts.c      placement, the put/upsert protocol
 *               -> segments.c, objects.c, extents.c, master_service.c
 *   segments.c  mount, unmount, write fences, epochs, replica descriptors
 *               -> objects.c, extents.c, clients.c, master_service.c
 *   objects.c   puts in progress, the values of objects -> extents.c
 *   extents.c   extents freed, deferred or quarantined; the journal's release gate
 *   clients.c   the client table, pings
 *   master_service.c  configuration, the clock, the extension events
 *
 * Any of them may also call the allocator, the index and journal.c, which call none of them.
 *
 * Every function declared here expects the master's lock held unless its comment says it does
 * not need it; none of them takes it.
 */
#ifndef MC_MASTER_CORE_INTERNAL_H
#define MC_MASTER_CORE_INTERNAL_H

#include "master_internal.h"

#include "extension.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- small helpers (no lock needed) --------------------------------------------------------- */

/* Milliseconds from `since` to `now`; 0 if a test clock went backwards. */
static inline uint64_t mc_master_elapsed_ms(uint64_t now, uint64_t since)
{
    return now > since ? now - since : 0;
}

/* The bytes an extent of `size` bytes takes (allocator units, MC_ALLOC_ALIGN). */
static inline uint64_t mc_master_align_up(uint64_t size)
{
    return (size + MC_ALLOC_ALIGN - 1) & ~(uint64_t)(MC_ALLOC_ALIGN - 1);
}

/* Length of a valid key, or MC_ERR_INVALID_KEY. */
static inline int64_t mc_master_key_length(const char *key)
{
    if (!key)
        return MC_ERR_INVALID_KEY;
    size_t n = strnlen(key, MC_MAX_KEY_LEN + 1);
    if (n == 0 || n > MC_MAX_KEY_LEN)
        return MC_ERR_INVALID_KEY;
    return (int64_t)n;
}

/* A NUL-terminated, non-empty string that fits in `cap` bytes. */
static inline int mc_master_text_ok(const char *s, size_t cap)
{
    return s && s[0] && strnlen(s, cap) < cap;
}

static inline int mc_master_client_id_ok(const char *id)
{
    return mc_master_text_ok(id, MC_CLIENT_ID_MAX);
}

/* ---- master_service.c: extension events raised by the core --------------------------------- */

/* Calls `hook` of every extension that has one, in table order, with the arguments after it. */
#define MC_EXT_EACH(m, hook, ...)                                                                  \
    do {                                                                                           \
        for (const mc_master_ext_t *const *x_ = (m)->ext; *x_; x_++) {                             \
            if ((*x_)->hook)                                                                       \
                (*x_)->hook(__VA_ARGS__);                                                          \
        }                                                                                          \
    } while (0)

/* 1 when an extension hides `key` (hides_key): it reads as missing and is neither removed nor
 * replaced yet. */
int mc_master_ext_hides_key_locked(mc_master_t *m, const char *key, size_t len);
/* The extensions' descriptors of o's replicas after the `n` already in out[] (fill_descs):
 * returns the count, which may pass `capacity` (nothing is written past it). */
size_t mc_master_ext_fill_descs_locked(const mc_master_t *m, const mc_object_t *o,
                                       mc_replica_desc_t *out, size_t capacity, size_t n);

/* ---- extents.c ------------------------------------------------------------------------------ */

/* Frees live extent `ref` in its segment's allocator now, whoever may still read it. */
void mc_master_extent_free_locked(mc_master_t *m, mc_replica_ref_t ref);
/* Frees deferred entry i now (the caller found its gates open); the last entry takes slot i. */
void mc_master_deferred_free_at_locked(mc_master_t *m, size_t i);

/* ---- clients.c ------------------------------------------------------------------------------ */

/* Registers client `id`, or refreshes its liveness and clears its gone mark. 0, or
 * MC_ERR_INTERNAL_ERROR when out of memory. */
int mc_master_client_touch_locked(mc_master_t *m, const char *id, uint64_t now);

/* ---- objects.c ------------------------------------------------------------------------------ */

/* Drops the put in progress on `o`: its extents are quarantined (extents.c), except those in
 * segment slot `gone` (being unmounted; UINT32_MAX: none), which are freed. `counted`: revoked
 * by the master, not by the writer. Returns 1 when `o` was deleted (it had no readable value). */
int mc_master_pending_revoke_locked(mc_master_t *m, mc_object_t *o, int counted, uint32_t gone);
/* Commits the put in progress on `o` (PROCESSING -> COMPLETE, or an upsert's swap; `checksum`
 * NULL when the writer sent none): `o` may move (object_moved). 0, or MC_ERR_INTERNAL_ERROR
 * when out of memory (the put stays in progress). */
int mc_master_pending_commit_locked(mc_master_t *m, mc_object_t *o, uint64_t now,
                                    const uint32_t *checksum);
/* Attaches the placed put `p` (now owned by the object) to `o` (an upsert), or, `o` NULL, to a
 * new PROCESSING object of `key`. 0, or MC_ERR_INTERNAL_ERROR when out of memory (nothing is
 * attached; p and its extents stay the caller's). */
int mc_master_pending_attach_locked(mc_master_t *m, mc_object_t *o, const char *key, size_t len,
                                    mc_pending_put_t *p, uint64_t now);

/* ---- segments.c ----------------------------------------------------------------------------- */

/* 1 when one of rep[0..n) is on segment `slot` (no lock needed). */
int mc_master_replicas_use_segment(const mc_replica_ref_t *rep, unsigned n, uint32_t slot);
/* Unmounts the segment in `slot` (see segments.c); `counted`: the puts it revokes count as
 * revoked by the master. 0, or MC_ERR_INTERNAL_ERROR when out of memory (nothing changed). */
int mc_master_unmount_locked(mc_master_t *m, uint32_t slot, int counted);
/* Writes descriptors of rep[0..nrep) (a 0-byte value's only while its mount lasts), at most
 * `capacity`; returns how many there are. */
size_t mc_master_fill_descs_locked(const mc_master_t *m, const mc_replica_ref_t *rep, unsigned nrep,
                                   uint64_t size, mc_replica_status_t status,
                                   mc_replica_desc_t *out, size_t capacity);

/* ---- reads.c -------------------------------------------------------------------------------- */

/* The COMPLETE object of a valid key, NULL when absent; *rc is 0, or MC_ERR_INVALID_KEY. */
mc_object_t *mc_master_find_complete_locked(mc_master_t *m, const char *key, int *rc);

#endif /* MC_MASTER_CORE_INTERNAL_H */
