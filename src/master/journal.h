/*
 * journal.h — the master's durable object state: a journal of index changes (for the HA
 * operation log), export/import of object records (for snapshots and standbys), and restore
 * with re-mount (upstream Mooncake's snapshot/oplog idea; our encoding is protobuf-c
 * `mc.ObjectRecord` (src/wire/proto/snapshot.proto), not upstream's msgpack).
 *
 * A record is the whole durable state of one COMPLETE object: key, size, CRC32C (if the writer
 * sent one), every memory replica (segment id, owner client id, segment name, address, length),
 * disk replicas (type, version, owner), soft-pin remaining ms, hard pin. Applying SET(record) or
 * DEL(key) twice is the same as once. PROCESSING puts are never journaled.
 *
 * Restore: imported records are held aside; their memory replicas are hidden (the key reads as
 * missing) until the owning client mounts (or re-mounts) a segment with the same id. At that
 * mount, before anything else can allocate in the new segment, the restored extents are reserved
 * in its allocator and the replicas become visible with the new mount's epoch; the object gets a
 * fresh lease (upstream §5.4 "grants those objects a fresh read lease": ours is upstream's
 * lease, default_kv_lease_ttl_ms, which protects it from a Remove without force). A mount with
 * another id (a restarted client) never revives them. Replicas not re-mounted within
 * 3 x client_ttl_ms of the import are dropped (counted in restore_expired). A put of a key that
 * has a restored record supersedes the record. Disk replicas are not revived from records: the
 * master's existing file rescan (offload.c) recovers them as before.
 *
 * Untrusted records (from a snapshot not marked clean: a crash may have let their extents be
 * freed and reused after it) become visible only once the owner verified their bytes against
 * the record's CRC32C (below); without a CRC32C they are dropped at re-mount.
 *
 * Thread-safety: every function may be called from any thread.
 */
#ifndef MC_MASTER_JOURNAL_H
#define MC_MASTER_JOURNAL_H

#include <stddef.h>
#include <stdint.h>

typedef struct mc_master mc_master_t;

/*
 * Journal callbacks, invoked IN COMMIT ORDER with the master's lock held (so they must be
 * cheap and must not call back into the master): seq increases by one per entry from 1.
 * `record`/`key` are valid for the call only (copy them).
 *  - set: the object's durable state is now `record` (put_end/upsert_end, replica added or
 *    dropped, restored object revived).
 *  - del: the key has no value any more (remove, eviction, remove_all/regex, last replica gone,
 *    restored record expired).
 */
typedef struct mc_master_journal {
    void (*set)(void *arg, uint64_t seq, const uint8_t *record, size_t len);
    void (*del)(void *arg, uint64_t seq, const char *key, size_t key_len);
    void *arg;
} mc_master_journal_t;

/*
 * Attaches (j != NULL, j->set and j->del non-NULL; copied) or detaches (NULL) the journal.
 * With a journal attached, an extent freed by a DEL or by a SET that dropped or replaced a
 * replica goes back to the allocator only once mc_master_journal_durable(seq) has been called
 * with seq >= that entry's seq (and its readers are done): a master taking over from this
 * journal never names memory that was reused. Detaching releases the gate (everything counts
 * as durable). 0 or MC_ERR_INVALID_PARAMS.
 */
int mc_master_set_journal(mc_master_t *m, const mc_master_journal_t *j);
/* Entries up to `seq` are durable (the operation log committed them): gated extents free. */
void mc_master_journal_durable(mc_master_t *m, uint64_t seq);
/* The next entry gets seq + 1 (when seq is above the last assigned), and entries up to seq count
 * as durable: a master restored from a snapshot or an operation log continues its numbering. */
void mc_master_journal_start_at(mc_master_t *m, uint64_t seq);
/* The last sequence number assigned (0: none yet). */
uint64_t mc_master_journal_seq(mc_master_t *m);

/*
 * Export: calls cb(arg, record, len) for every COMPLETE object's record and every restored
 * record not visible yet, in slices (the lock is held for at most ~1024 objects at a time).
 * The result is fuzzy (objects changing meanwhile may appear in either state); applying the
 * journal entries after *start_seq (the last seq assigned when the export began) fixes it.
 * cb returning non-zero stops the export with that value. Returns 0, cb's value, or
 * MC_ERR_INTERNAL_ERROR (out of memory).
 */
typedef int (*mc_master_export_fn)(void *arg, const uint8_t *record, size_t len);
int mc_master_export(mc_master_t *m, uint64_t *start_seq, mc_master_export_fn cb, void *arg);

/*
 * Import into a master that is not serving yet (restore) or a standby: SET(record) replaces any
 * restored record of the key; DEL drops it. Imported records are trusted unless
 * mc_master_import_untrusted is used. 0, MC_ERR_INVALID_PARAMS (not a record),
 * MC_ERR_INTERNAL_ERROR (out of memory).
 */
int mc_master_import(mc_master_t *m, const uint8_t *record, size_t len);
int mc_master_import_untrusted(mc_master_t *m, const uint8_t *record, size_t len);
int mc_master_import_del(mc_master_t *m, const char *key, size_t key_len);
/* A standby applying the operation log: its restored records do not expire (no owner re-mounts
 * at a standby) until mc_master_import_trust_all, when it takes over. 0 or MC_ERR_INTERNAL_ERROR.
 */
int mc_master_restore_hold(mc_master_t *m);
/* Every restored record held is trusted from now on (HA: the oplog was replayed to its head),
 * and the re-mount deadline (3 client TTLs) starts now. */
void mc_master_import_trust_all(mc_master_t *m);

/* Counters of restored records (the stats' restore_* fields). */
typedef struct mc_restore_stats {
    uint64_t pending;       /* records with a replica not visible yet */
    uint64_t revived;       /* memory replicas made visible at re-mount */
    uint64_t expired;       /* memory replicas dropped: not re-mounted in time */
    uint64_t untrusted;     /* memory replicas dropped: untrusted record */
    uint64_t superseded;    /* records dropped: the key was written meanwhile */
    uint64_t verified;      /* untrusted replicas the owner's checksum confirmed: visible */
    uint64_t verify_failed; /* untrusted replicas whose bytes did not match: dropped */
} mc_restore_stats_t;
void mc_master_restore_stats(mc_master_t *m, mc_restore_stats_t *out);

/*
 * Re-mount verification (opcodes 230/231, RestoreVerifyRequest/Response): a re-mount of a
 * segment holding replicas of untrusted records that carry a CRC32C reserves their extents and
 * holds them hidden; the owner (only the client that mounted the segment: else
 * MC_ERR_ILLEGAL_CLIENT; MC_ERR_SEGMENT_NOT_FOUND when not mounted) fetches them in pages
 * (from: 0, then *next; *next 0 = no more; at most `capacity` per call, ~4096 looked at), computes
 * the CRC32C of its own memory for each, and confirms: ok ones become visible (counted in
 * restore_verified), others are freed (restore_verify_failed). Untrusted records without a
 * checksum are dropped at re-mount (restore_untrusted). What is not confirmed within the restore
 * bound (3 x client_ttl_ms) is dropped and its extents freed.
 */
typedef struct mc_restore_extent {
    uint64_t id, address, size;
    uint32_t checksum;
} mc_restore_extent_t;
int mc_master_restore_verify_fetch(mc_master_t *m, const char *client_id, const char *segment_id,
                                   uint64_t from, mc_restore_extent_t *out, size_t capacity,
                                   size_t *n, uint64_t *next);
/* ok[i] != 0: extent ids[i] matched. *confirmed (may be NULL): replicas made visible. */
int mc_master_restore_verify_confirm(mc_master_t *m, const char *client_id, const char *segment_id,
                                     const uint64_t *ids, const uint8_t *ok, size_t n,
                                     size_t *confirmed);

/* ---- snapshots (snapshot.c) ----------------------------------------------------------------- */

/* upstream's master_snapshot_duration_ms buckets (ms); one more count for +Inf */
#define MC_SNAPSHOT_MS_BUCKETS 11
extern const double mc_snapshot_ms_bounds[MC_SNAPSHOT_MS_BUCKETS];
typedef struct mc_snapshot_stats {
    uint64_t success, fail; /* snapshots written / failed since start */
    uint64_t ms_counts[MC_SNAPSHOT_MS_BUCKETS + 1], ms_sum; /* durations (non-cumulative) */
} mc_snapshot_stats_t;
void mc_master_snapshot_stats(mc_master_t *m, mc_snapshot_stats_t *out);

/* ---- ---------------------------------------------------------------- */

/*
 * Writes a snapshot under `root`: `<root>/<YYYYMMDD_HHMMSS_mmm>/` holding records.bin
 * (u32 little-endian length + ObjectRecord, repeated) and manifest.txt (format, start seq,
 * clean flag, object count, records.bin size and CRC32C, and the manifest's own CRC32C),
 * written under a temporary name, fsynced and renamed, then `<root>/latest.txt` (name of the
 * newest) likewise. `clean`: no change may follow (graceful shutdown). Keeps the newest
 * `retention` snapshots (>= 1). `backup_dir` (NULL or ""): a second copy there too.
 * Gives up (MC_ERR_INTERNAL_ERROR, nothing left behind) once `timeout_ms` (0: none) passed.
 * `name` (may be NULL; >= 32 bytes): the snapshot's directory name. 0 or MC_ERR_INTERNAL_ERROR.
 */
int mc_master_snapshot_write(mc_master_t *m, const char *root, const char *backup_dir,
                             unsigned retention, int clean, uint64_t timeout_ms, char *name);
/*
 * Restores the newest snapshot under `root` that reads back whole and verifies, else the next
 * older, (one log line per snapshot skipped), importing its records (untrusted unless the
 * snapshot is clean). *seq: the journal seq the snapshot started at. 0 (restored), or
 * MC_ERR_OBJECT_NOT_FOUND (no usable snapshot: nothing imported).
 */
int mc_master_snapshot_restore(mc_master_t *m, const char *root, uint64_t *seq);

#endif /* MC_MASTER_JOURNAL_H */
