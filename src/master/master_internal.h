/*
 * master_internal.h — the Master Service's state, shared by the core (master_service.c and the
 * files core_internal.h lists: segments, clients, objects, leases, liveness), eviction.c (the
 * eviction policy) and offload.c (offload tasks, disk replicas, offloading clients). Not for
 * other layers: they use master_service.h.
 *
 * Locking: everything in struct mc_master below `lock` is guarded by it; functions named
 * *_locked expect the caller to hold it. Nothing slow (I/O, sleeping) happens under it.
 */
#ifndef MC_MASTER_INTERNAL_H
#define MC_MASTER_INTERNAL_H

#include "allocator.h"
#include "master_service.h"
#include "journal.h"
#include "object_index.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define MC_EVICTION_PERIOD_MS 10
#define MC_MONITOR_PERIOD_MS 1000
/* A monitor wake-up this much later than its period: the master itself stalled (see
 * forgive_own_stall_locked). */
#define MC_MONITOR_STALL_MS 1000
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
    /* The fencing token of its allocation (replica descriptors carry it; writes carry it to the
     * owner): unique, and growing with time across master instances (see next_fence_token). */
    uint64_t token;
} mc_pending_put_t;

struct mc_offloader;

/* A mounted segment. info.used is filled only on listing (the allocator is the truth). */
typedef struct mc_segment {
    mc_segment_info_t info; /* id, name, base, size, protocol, client_id (the owner) */
    mc_alloc_t *alloc;      /* over [info.base, info.base + info.size) */
    uint32_t gen;           /* mount generation, unique per mount (0-byte replicas refer to it) */
    /* The generation its epoch is made of: its own, or that of the owner's segment of the same
     * name already mounted (one Transfer Engine serves them all, and an engine holds one epoch:
     * a client's segments share it; see mc_master_segment_epoch). */
    uint32_t epoch_gen;
    /* Graceful unmount (matches upstream GracefulUnmountSegment): 0, or the master clock ms at
     * which the monitor unmounts it. Meanwhile no put is placed on it; its objects stay
     * readable. */
    uint64_t drain_until;
    struct mc_offloader *offloader; /* the owner, when it offloads; else NULL */
    /*
     * The write fence (see mc_deferred_free_t.wfence): tokens of revoked puts with an extent
     * here that the owner must refuse (fence_tokens[i] asked for at master-wide sequence
     * fence_seqs[i], ascending), and the highest sequence the owner confirmed: every token
     * up to it is refused there and no write admitted before is still moving.
     */
    uint64_t *fence_tokens, *fence_seqs;
    size_t fence_count, fence_cap;
    uint64_t fence_acked;
} mc_segment_t;

/* A live client: one that mounted (or remounted) and has pinged within client_ttl_ms. */
typedef struct mc_client {
    char id[MC_CLIENT_ID_MAX];
    uint64_t last_seen_ms;
    uint64_t fallback_reads;      /* the running total it last reported */
    uint64_t checksum_mismatches; /* likewise */
    /* Its process was found gone (liveness.h): its segments are unmounted and its puts revoked;
     * the record stays until its TTL (its offloaded files wait for a restarted holder to take
     * them over) and a ping is told to re-mount. A mount or remount clears it. */
    int gone;
} mc_client_t;

/* ---- offload (offload.c) -------------------------------------------------------------------- */

#define MC_MAX_DISK_REPLICAS 4

/* A file holding an object's value: (key, version) names it. */
typedef struct mc_disk_replica {
    uint64_t version;
    struct mc_offloader *owner; /* LOCAL_DISK: the client holding the file; DFS: NULL */
    uint8_t type;               /* MC_REPLICA_LOCAL_DISK or MC_REPLICA_DFS */
} mc_disk_replica_t;

/*
 * An offload of an object's current value to one client.
 * Invariants: obj->offload->task == this; `src` is one of obj->rep (the memory replica being
 * read: pinned, so eviction skips the object); the task is on exactly one of owner's rings
 * (queued when lease_until == 0, else leased).
 */
typedef struct mc_offload_task {
    struct mc_offload_task *prev, *next;
    mc_object_t *obj;
    struct mc_offloader *owner;
    uint64_t id;
    uint64_t version;     /* of the file to write */
    uint64_t lease_until; /* master clock ms; 0 = queued */
    uint64_t queued_ms;   /* when it was last queued */
    mc_replica_ref_t src;
    uint32_t attempts;   /* leases handed out so far */
    uint32_t unanswered; /* of them, ended by the storage not answering (not counted against
                            offload_max_attempts: the object is not at fault, and the writer
                            takes no tasks until its storage answers again) */
} mc_offload_task_t;

/* Offload state of an object's readable value (NULL when it has neither). */
struct mc_promotion;

typedef struct mc_object_offload {
    mc_offload_task_t *task;
    struct mc_promotion *promotion; /* a promotion of the value back to memory (promotion.c) */
    uint8_t ndisk;
    uint8_t recovered; /* the value came from a rescanned file, not from a put of this master:
                          a file of a higher version of the key replaces it */
    mc_disk_replica_t disk[MC_MAX_DISK_REPLICAS];
} mc_object_offload_t;

/* A link of a doubly-linked ring (a sentinel is a ring's head). */
typedef struct mc_dlink {
    struct mc_dlink *prev, *next;
} mc_dlink_t;

struct mc_delete_queue;

/*
 * A file that must go: its value was removed, replaced or lost, or an offload of a discarded
 * value may have written it. The record lives from the discard until a client confirms the file
 * is gone (it deleted it, or never wrote it), so that
 *  - whoever removed or replaced the value can wait for that (an acknowledged remove or upsert
 *    is then never undone by a crash: the old file cannot be rescanned back);
 *  - a rescan reporting the file meanwhile is told it is obsolete (a tombstone);
 *  - it outlives its holder's departure: a local file's deletion waits, parked by the holder's
 *    storage id, for that storage to come back; a DFS one goes to any distributed client.
 * Deletions of (key, version) are unique: versions are.
 */
typedef struct mc_disk_delete {
    mc_dlink_t qlink;              /* in its queue's waiting or handed ring, or the graveyard */
    mc_dlink_t slink;              /* m->deletes_by_seq, oldest first */
    struct mc_disk_delete *hnext;  /* m->del_hash chain (by key) */
    struct mc_delete_queue *queue; /* NULL: confirmed, kept in m->graveyard */
    struct mc_offloader *owner;    /* the client that must do it; NULL: parked, or (DFS) any */
    uint64_t seq;                  /* creation order, for waiters */
    uint64_t version, size, key_hash;
    uint64_t handed_ms;                 /* when last handed out (handed ring) */
    uint8_t type;                       /* MC_REPLICA_LOCAL_DISK or MC_REPLICA_DFS */
    char storage_id[MC_OFFLOAD_ID_MAX]; /* local: the holder's storage (parking) */
    size_t key_len;
    char key[];
} mc_disk_delete_t;

/* Deletions for one client (or for any distributed client, or parked): not handed out yet, and
 * handed out (in hand-out order; handed again when not confirmed within the task lease). */
typedef struct mc_delete_queue {
    mc_dlink_t waiting, handed;
    size_t nwaiting, nhanded;
} mc_delete_queue_t;

/* A client that registered its backend with an offload heartbeat. */
typedef struct mc_offloader {
    char client_id[MC_CLIENT_ID_MAX];
    mc_offloader_info_t info;
    mc_offload_task_t queued, leased; /* ring sentinels */
    size_t n_queued, n_leased;
    mc_delete_queue_t deletes; /* its LOCAL_DISK files, and files its cancelled writes may have
                                  left, to delete */
    uint64_t last_heartbeat_ms;
    int reporting; /* asked to report its files (resync or rescan), not done yet */
} mc_offloader_t;

/*
 * Recovery of the distributed root after this master started: the files under a shared root are
 * listed by one distributed offloader the master picks (the first healthy one to heartbeat),
 * which reports them all; if it goes away before it is done, the next one is asked.
 */
typedef enum mc_dfs_recovery {
    MC_DFS_RECOVERY_NEEDED = 0,
    MC_DFS_RECOVERY_RUNNING,
    MC_DFS_RECOVERY_DONE,
} mc_dfs_recovery_t;

/*
 * An extent no object owns any more while readers may still be copying from it (a fence): its
 * object was removed, evicted or replaced while being read. It is freed when the last of those
 * readers releases its lease (`readers` releases of group `lease_id` are still due), or at
 * free_at, when their leases run out, whichever comes first. Its allocator cookie is NULL.
 * Entries die with their segment on unmount.
 */
typedef struct mc_deferred_free {
    uint32_t seg;
    uint32_t handle;
    uint32_t readers;
    uint64_t lease_id;
    uint64_t free_at;
    uint64_t waited_from; /* when a put first waited for it; 0: none has yet */
    /* With a journal attached (journal.c): the entry that dropped the extent; it is freed only
     * once mc_master_journal_durable reached it. 0: no gate; UINT64_MAX: its entry is not
     * assigned yet (the next journal entry tags it). */
    uint64_t jseq;
    /* The write fence (quarantine of a revoked put's extent): freed only once the segment's
     * owner confirmed fence sequence `wfence` (mc_segment_t.fence_acked), i.e. it refuses the
     * put's token and no write of that put can still land. 0: no gate. */
    uint64_t wfence;
} mc_deferred_free_t;

/*
 * An address range of a segment that was unmounted while read leases still covered extents in
 * it: a mount of the same name overlapping it is refused (MC_ERR_UNAVAILABLE_IN_CURRENT_STATUS)
 * until `until`, so a reader still inside its lease never sees the range's new occupant.
 */
typedef struct mc_fence {
    char name[272];
    uint64_t base, size;
    uint64_t until; /* master clock ms */
} mc_fence_t;

/* An eviction candidate; ordered by (tier, access): tier 0 are objects whose memory can go
 * because a disk replica keeps them readable; access is the object's last commit or read. */
typedef struct mc_evict_cand {
    uint64_t access;
    mc_object_t *obj;
    unsigned tier;
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
    uint64_t fenced_bytes;  /* in deferred extents: not live, not free yet */
    uint64_t last_lease_id; /* read lease groups are numbered from 1 */

    mc_fence_t *fences; /* unordered; expired ones dropped by the monitor sweep */
    size_t fence_count, fence_cap;

    mc_evict_cand_t *cand; /* eviction scratch, kept between passes */
    size_t cand_cap;
    uint64_t evict_retry_at; /* monotonic ms: the background check idles until then */

    uint64_t last_token; /* the last fencing token handed out */
    uint64_t fence_seq;  /* the last write-fence sequence asked for (master-wide) */
    uint64_t quarantined_extents, quarantine_freed; /* revoked puts' extents, since start */
    uint64_t evicted_keys, eviction_runs, expired_clients, gone_clients, revoked_puts;
    uint64_t lease_releases, put_fence_waits;
    uint64_t checksum_mismatches; /* summed from the clients' reports */
    uint64_t regex_refused;       /* remove_by_regex calls that hit a pattern limit */
    uint64_t mounts_refused;      /* mounts above cfg.max_segment_size */
    /* upstream's metric families: atomics (mc_master_count_*), except the eviction and
     * put-discard fields, written under lock and read atomically */
    mc_master_op_stats_t ops;

    /* offload (offload.c) */
    mc_offloader_t **offloaders;
    size_t n_offloaders, offloaders_cap;
    mc_delete_queue_t dfs_deletes; /* DFS files to delete, for any distributed client */
    mc_delete_queue_t parked;      /* local files of clients that left, by storage id */
    mc_dlink_t graveyard;          /* DFS deletions confirmed while the root's rescan runs */
    mc_dlink_t deletes_by_seq;     /* every deletion record, by seq */
    mc_disk_delete_t **del_hash;   /* by key; del_hash_cap buckets (a power of two) */
    size_t del_hash_cap, del_count;
    uint64_t del_seq;      /* the last seq handed out */
    uint64_t del_seq_base; /* this master's first seq (seqs of a previous one are below) */
    char dfs_storage_id[MC_OFFLOAD_ID_MAX]; /* the storage the first distributed client named */
    mc_dfs_recovery_t dfs_recovery;
    mc_offloader_t *dfs_rescanner; /* RUNNING: the client listing the root */
    uint64_t recovered_files;
    int seen_backend; /* first backend a client reported */
    char seen_fs_type[16];
    uint64_t next_task_id, next_version;
    size_t tasks_outstanding; /* queued + leased, all clients */
    uint64_t offload_done, offload_failed, offload_retried, offload_skipped, offload_bytes;
    uint64_t disk_evicted, deletes_dropped, fallback_reads;

    /* promotion (promotion.c) */
    struct mc_promotion_state *promo; /* NULL unless enable_offload && promotion_on_hit */
    struct mc_task_manager *tasks;    /* replica copy/move tasks (task_manager.c) */

    /* journal, export/import and restore (journal.c, restore.c) */
    mc_master_journal_t journal;      /* set == NULL: none attached */
    uint64_t jseq;                    /* last sequence number assigned */
    uint64_t jdurable;                /* highest seq declared durable */
    size_t j_untagged;                /* deferred entries with jseq == UINT64_MAX */
    struct mc_restore_table *restore; /* restored records not visible yet; NULL: none */
    uint64_t restore_tag;             /* last tag handed to a restored value */
    uint64_t restore_revived, restore_expired, restore_untrusted, restore_superseded;
    uint64_t restore_verified, restore_verify_failed;
    /* snapshots written (snapshot.c; upstream's master_snapshot_* families) */
    uint64_t snap_success, snap_fail, snap_ms_sum;
    uint64_t snap_ms_counts[MC_SNAPSHOT_MS_BUCKETS + 1];

    /* set by mc_master_create (master_lifecycle.c), never changed after */
    const struct mc_master_ext *const *ext; /* the extensions, NULL-terminated (extension.h) */
    /* The eviction policy (eviction.c's mc_eviction_run_locked): reached through this pointer
     * so that the core, which runs it, and the policy, which calls the core, stay one way. */
    size_t (*eviction)(mc_master_t *m, uint64_t now, int needed, int *ran);
};

/*
 * Every *_locked function begins with MC_MASTER_ASSERT_LOCKED(m): in debug builds it aborts when
 * nobody holds the master lock (a trylock that succeeds means the caller forgot it). It cannot
 * tell the caller from another holder; it catches the call made without the lock, which is the
 * mistake a new call site makes. Release builds (NDEBUG) compile it out.
 */
#ifdef NDEBUG
#define MC_MASTER_ASSERT_LOCKED(m) ((void)(m))
#else
#define MC_MASTER_ASSERT_LOCKED(m) mc_master_assert_locked((pthread_mutex_t *)&(m)->lock)
static inline void mc_master_assert_locked(pthread_mutex_t *lock)
{
    int rc = pthread_mutex_trylock(lock);
    if (rc == 0)
        pthread_mutex_unlock(lock);
    assert(rc == EBUSY && "the master lock is held");
}
#endif

/* The master's clock (ms; monotonic unless a test set another). */
static inline uint64_t mc_master_now_locked(mc_master_t *m)
{
    return m->clock(m->clock_arg);
}
/* 1 while readers hold leases on o's value (see mc_object_t): its extents must stay. */
static inline int mc_object_being_read(const mc_object_t *o, uint64_t now)
{
    return o->readers > 0 && o->read_until > now;
}
/* Sum of used and of capacity over mounted segments (bytes, as in the stats). */
void mc_master_usage_locked(mc_master_t *m, uint64_t *used, uint64_t *capacity);
/*
 * Drops an object's readable value: its extents are freed, or deferred while its lease runs; the
 * object is deleted unless a put is in progress on it (then it is PROCESSING again). Returns 1
 * when the object was deleted.
 */
int mc_master_drop_value_locked(mc_master_t *m, mc_object_t *o, uint64_t now);

/*
 * Drops an object's memory replicas only (eviction of an object that has a disk replica): their
 * extents are released as in drop_value; the object stays COMPLETE, readable from disk.
 */
void mc_master_drop_memory_locked(mc_master_t *m, mc_object_t *o, uint64_t now);
/* The value is gone (extents already released): PROCESSING again, or deleted (returns 1). */
int mc_master_value_lost_locked(mc_master_t *m, mc_object_t *o);
static inline mc_segment_t *mc_master_segment_locked(const mc_master_t *m, uint32_t slot)
{
    return slot < m->seg_cap ? m->segs[slot] : NULL;
}
/* For task_manager.c: frees an extent of `o`'s value now or once its readers are done; moves `o`
 * into a record with room for `cap` replicas (NULL, `o` untouched, when out of memory); sets the
 * allocator cookies of refs to `o`. */
void mc_master_extent_release_locked(mc_master_t *m, mc_replica_ref_t ref, const mc_object_t *o,
                                     uint64_t now);
mc_object_t *mc_master_object_regrow_locked(mc_master_t *m, mc_object_t *o, unsigned cap);
void mc_master_set_cookies_locked(mc_master_t *m, const mc_replica_ref_t *rep, unsigned n,
                                  uint64_t size, void *cookie);
/* Fills a PROCESSING/COMPLETE memory replica descriptor for ref. */
void mc_master_fill_desc_locked(const mc_master_t *m, mc_replica_ref_t ref, uint64_t size,
                                mc_replica_status_t status, mc_replica_desc_t *out);
/* A fencing token for a new allocation that writers will fill (a put's, a copy task's): unique,
 * and above every token an earlier master instance handed out (wall-clock nanoseconds, bumped
 * past the last). */
uint64_t mc_master_next_token_locked(mc_master_t *m);
/* An extent that writers carrying `token` may still be filling (a revoked put, a failed copy
 * task) and no object owns (its allocator cookie NULL): freed only once the segment's owner
 * confirmed a write fence refusing the token (mc_master_fence_ping); counted as fenced. */
void mc_master_extent_quarantine_locked(mc_master_t *m, mc_replica_ref_t ref, uint64_t token,
                                        uint64_t now);
/* The mount epoch of the segment in `slot` (as replica descriptors carry it). */
uint64_t mc_master_slot_epoch_locked(const mc_master_t *m, uint32_t slot);
/* The live client with this id, or NULL. */
mc_client_t *mc_master_client_locked(mc_master_t *m, const char *client_id);

/*
 * One eviction pass (eviction.c) when `needed` (an allocation just failed) or when used/capacity
 * is above the high watermark. Returns the number of objects evicted; *ran (may be NULL) says
 * whether a pass was due.
 */
size_t mc_eviction_run_locked(mc_master_t *m, uint64_t now, int needed, int *ran);

/* ---- state of the extensions that the core and eviction read (lock held) ------------------ */

/* 1 when the object's memory must not be evicted (an offload of it is pending). */
static inline int mc_offload_pinned(const mc_object_t *o)
{
    return o->offload && o->offload->task;
}
static inline unsigned mc_offload_ndisk(const mc_object_t *o)
{
    return o->offload ? o->offload->ndisk : 0;
}
/* An offloader's record, or NULL (offload.c; for promotion.c). */
struct mc_offloader *mc_offload_find_locked(const mc_master_t *m, const char *client_id);
int mc_offload_takes_tasks(const struct mc_offloader *o);

/* ---- core events for the eviction policy (master_service.c, lock held) -------------------- */

/* 1 when an extension keeps `o` readable another way instead of its eviction (extension.h's
 * evict_instead); the policy then leaves `o`. */
int mc_master_evict_instead_locked(mc_master_t *m, mc_object_t *o, uint64_t now);
/* 1 while an extension holds watermark-driven eviction back (extension.h's holds_eviction). */
int mc_master_eviction_held_locked(const mc_master_t *m);

/* ---- the core's lifetime helpers (master_service.c, monitor.c; for master_lifecycle.c) ----- */

/* The default master clock: mc_now_ms(). */
uint64_t mc_master_default_clock(void *arg);
/* One monitor pass: client expiry, put-start timeouts, drained segments, deferred frees, fences,
 * then every extension's sweep hook. */
void mc_master_monitor_sweep_locked(mc_master_t *m, uint64_t now);

/* FNV-1a of a client id, never 0: the writer id of a value (mc_object_t.writer) and the tasks'
 * buckets. */
static inline uint64_t mc_client_hash(const char *client_id)
{
    uint64_t h = 1469598103934665603ull;
    for (const unsigned char *p = (const unsigned char *)(client_id ? client_id : ""); *p; p++) {
        h ^= *p;
        h *= 1099511628211ull;
    }
    return h ? h : 1;
}

/* ---- journal.c: journal entries (lock held) ------------------------------------------------ */

/* The durable state of COMPLETE `o` changed (committed, replica added or dropped): a SET entry
 * (no-op without a journal). */
void mc_journal_set_locked(mc_master_t *m, const mc_object_t *o);
/* `key` lost its value: a DEL entry (no-op without a journal). */
void mc_journal_del_locked(mc_master_t *m, const char *key, size_t len);
/* Deferred-free gate: frees deferred entries whose readers are done and whose journal entry is
 * durable (extents.c); returns how many. */
size_t mc_master_deferred_sweep_locked(mc_master_t *m, uint64_t now);

#endif /* MC_MASTER_INTERNAL_H */
