/*
 * master_internal.h — the Master Service's state, shared by master_service.c (segments, clients,
 * objects, leases, liveness) and eviction.c (the eviction policy). Not for other layers: they use
 * master_service.h.
 *
 * Locking: everything in struct mc_master below `lock` is guarded by it; functions named
 * *_locked expect the caller to hold it. Nothing slow (I/O, sleeping) happens under it.
 */
#ifndef MC_MASTER_INTERNAL_H
#define MC_MASTER_INTERNAL_H

#include "allocator.h"
#include "master_service.h"
#include "object_index.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define MC_EVICTION_PERIOD_MS 10
#define MC_MONITOR_PERIOD_MS 1000
#define MC_EVICTION_IDLE_RETRY_MS 1000 /* after a pass that found nothing to evict */

/*
 * A put (or upsert) between start and end/revoke.
 * Invariants: obj->pending == this; the record is on m->pending; for size > 0, rep[0..nrep) are
 * live extents on distinct mounted segments whose cookie is obj (for size 0 they are nominal:
 * {segment slot, mount generation}); nrep >= 1 when size > 0.
 */
typedef struct mc_pending_put {
    struct mc_pending_put *prev, *next; /* ring through m->pending */
    mc_object_t *obj;
    uint64_t start_ms;        /* master clock at put_start */
    uint64_t size;            /* bytes of the value being written */
    uint64_t soft_pin_ttl_ms; /* ENABLE: the deadline is commit time + this */
    uint8_t soft_pin_action;  /* mc_soft_pin_action_t */
    uint8_t hard_pin;
    uint8_t nrep;
    mc_replica_ref_t rep[MC_MAX_REPLICAS];
    char client_id[MC_CLIENT_ID_MAX]; /* the writer; only it may end or revoke */
} mc_pending_put_t;

/* A mounted segment. info.used is filled only on listing (the allocator is the truth). */
typedef struct mc_segment {
    mc_segment_info_t info; /* id, name, base, size, protocol, client_id (the owner) */
    mc_alloc_t *alloc;      /* over [info.base, info.base + info.size) */
    uint32_t gen;           /* mount generation, unique per mount (0-byte replicas refer to it) */
} mc_segment_t;

/* A live client: one that mounted (or remounted) and has pinged within client_ttl_ms. */
typedef struct mc_client {
    char id[MC_CLIENT_ID_MAX];
    uint64_t last_seen_ms;
} mc_client_t;

/* An extent no object owns any more but a read lease may still cover: freed at free_at. Its
 * allocator cookie is NULL. Entries die with their segment on unmount. */
typedef struct mc_deferred_free {
    uint32_t seg;
    uint32_t handle;
    uint64_t free_at;
} mc_deferred_free_t;

/* An eviction candidate; ordered by (lease, done): never-leased objects have lease 0. */
typedef struct mc_evict_cand {
    uint64_t lease;
    uint64_t done;
    mc_object_t *obj;
} mc_evict_cand_t;

struct mc_master {
    mc_master_config_t cfg;
    uint64_t view_version; /* identifies this master instance (changes on restart) */
    pthread_t evict_thread, monitor_thread;

    pthread_mutex_t lock;
    pthread_cond_t wake; /* signalled on shutdown; the threads' timed waits use it */
    int stopping;
    uint64_t (*clock)(void *arg);
    void *clock_arg;
    uint64_t rng; /* xorshift64 state for placement */

    mc_index_t index;         /* key -> object, COMPLETE and PROCESSING */
    size_t complete_count;    /* objects with complete = 1 */
    mc_pending_put_t pending; /* ring head (sentinel) of puts in progress */
    size_t pending_count;

    mc_segment_t **segs; /* slots; NULL = free. A replica names its segment by slot index. */
    size_t seg_cap;
    size_t seg_count;
    uint32_t mount_gen;        /* last generation handed out */
    uint64_t largest_capacity; /* max usable bytes of one segment (a bigger value never fits) */

    mc_client_t *clients; /* unordered */
    size_t client_count, client_cap;

    mc_deferred_free_t *deferred;
    size_t deferred_count, deferred_cap;

    mc_evict_cand_t *cand; /* eviction scratch, kept between passes */
    size_t cand_cap;
    uint64_t evict_retry_at; /* monotonic ms: the background check idles until then */

    uint64_t evicted_keys, eviction_runs, expired_clients, revoked_puts;
};

uint64_t mc_master_now_locked(mc_master_t *m);
/* Sum of used and of capacity over mounted segments (bytes, as in the stats). */
void mc_master_usage_locked(mc_master_t *m, uint64_t *used, uint64_t *capacity);
/*
 * Drops an object's readable value: its extents are freed, or deferred while its lease runs; the
 * object is deleted unless a put is in progress on it (then it is PROCESSING again). Returns 1
 * when the object was deleted.
 */
int mc_master_drop_value_locked(mc_master_t *m, mc_object_t *o, uint64_t now);

/*
 * One eviction pass (eviction.c) when `needed` (an allocation just failed) or when used/capacity
 * is above the high watermark. Returns the number of objects evicted; *ran (may be NULL) says
 * whether a pass was due.
 */
size_t mc_eviction_run_locked(mc_master_t *m, uint64_t now, int needed, int *ran);

#endif /* MC_MASTER_INTERNAL_H */
