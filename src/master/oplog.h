/*
 * oplog.h — the master's operation log in etcd, so that objects survive a failover (upstream
 * Mooncake's OpLog idea, with our own batch encoding in src/wire/proto/oplog.proto).
 *
 * The leader appends every change of a COMPLETE object's durable state (SET with the whole
 * record, or DEL) in commit order; an appender thread writes them as batches to
 * /oplog/<cluster>/batches/<batch id, 20 digits>, each in one etcd transaction that holds only
 * while mooncake-store/<cluster>/master_view is still the leader's own view (compare on its create
 * revision): a deposed leader can never append. Batches are group commits: while one is in
 * flight, the next accumulates (at most batch_max_entries entries or ~1 MiB). When a batch is
 * committed, `durable(local_seq)` tells the master which of its entries are safe, and only then
 * may it reuse the memory of the values they removed or replaced (master_service.h's release
 * gate): a new leader replaying the log never finds an extent named by the log that was given to
 * another object.
 *
 * Standbys tail the log every poll_interval_ms and apply each entry (`apply`), so that promotion
 * only has to read the last batches. A put is acknowledged before its SET is committed (as
 * upstream's): what a leader acknowledged in its last group-commit window before it died is
 * lost to readers (reported missing, never wrong bytes). The window is one etcd round trip under
 * load; docs/benchmarks.md measures it.
 *
 * Thread-safety: mc_oplog_append from any thread (called under the master's lock: it only copies
 * into a queue); the rest from the owner's thread.
 */
#ifndef MC_MASTER_OPLOG_H
#define MC_MASTER_OPLOG_H

#include "etcd.h"

#include <stddef.h>
#include <stdint.h>

typedef struct mc_oplog mc_oplog_t;

#define MC_OPLOG_SET 1
#define MC_OPLOG_DEL 2
#define MC_OPLOG_DEFAULT_BATCH_MAX_ENTRIES 1024 /* upstream's --oplog_batch_max_entries */
#define MC_OPLOG_DEFAULT_POLL_MS 1000           /* upstream's --oplog_poll_interval_ms */
/* Entries queued but not committed, at most; beyond, the leader stops serving (see
 * mc_oplog_config_t.on_fail): it can no longer promise what it acknowledges. */
#define MC_OPLOG_MAX_PENDING (4u << 20)

typedef struct mc_oplog_config {
    mc_etcd_t *etcd; /* borrowed */
    const char *cluster_id;
    uint32_t batch_max_entries; /* 0 = MC_OPLOG_DEFAULT_BATCH_MAX_ENTRIES */
    int poll_interval_ms;       /* 0 = MC_OPLOG_DEFAULT_POLL_MS */
    /* Leader: how long the appender lets a batch fill (up to batch_max_entries) before it
     * commits it; 0 = commit at once. Fewer, larger commits cost etcd less; with acknowledgement
     * on commit (--oplog_sync_ack) every put would wait for it, so mooncake_master lingers only
     * without it. */
    int linger_ms;
    /* Standby and catch-up: applies one entry to the (not serving) master; non-zero = the entry
     * could not be applied (logged; the log is then not trusted: promotion fails). */
    int (*apply)(void *arg, uint32_t type, const char *key, const uint8_t *record, size_t len);
    /* Leader: every appended entry with local_seq <= this is committed in etcd. */
    void (*durable)(void *arg, uint64_t local_seq);
    /* Leader: the log cannot be written any more (view lost, or MC_OPLOG_MAX_PENDING reached);
     * called once from the appender thread. */
    void (*on_fail)(void *arg, const char *why);
    void *arg;
} mc_oplog_config_t;

int mc_oplog_create(const mc_oplog_config_t *config, mc_oplog_t **out);
/* Stops the threads. A leader first tries, for up to 3 s, to commit what is queued (a planned
 * stop loses nothing). NULL: no-op. */
void mc_oplog_destroy(mc_oplog_t *log);

/* Standby: starts tailing (apply). */
int mc_oplog_start_standby(mc_oplog_t *log);
/*
 * Won the election with view_version: stops tailing, applies every batch still unread (a gap or
 * an undecodable batch fails with MC_ERR_INCOMPLETE_OPLOG_CATCH_UP), then starts appending after
 * the last batch. 0, or an error (the caller gives leadership up).
 */
int mc_oplog_promote(mc_oplog_t *log, int64_t view_version);
/*
 * Leader, before admitting a new write: waits (up to timeout_ms) until at most max_pending
 * entries wait for etcd, so that what a crash can lose stays bounded. 1 when there is room,
 * 0 after the timeout (counted in backpressure_timeouts).
 */
int mc_oplog_wait_room(mc_oplog_t *log, uint64_t max_pending, int timeout_ms);
/* Leader: queues one entry (copied). local_seq: the master's journal sequence number. */
void mc_oplog_append(mc_oplog_t *log, uint64_t local_seq, uint32_t type, const char *key,
                     const uint8_t *record, size_t len);

typedef struct mc_oplog_stats {
    uint64_t last_seq;              /* appended (leader) or applied (standby) */
    uint64_t durable_seq;           /* committed in etcd (leader) */
    uint64_t last_batch_id;         /* committed or applied */
    uint64_t pending;               /* queued, not committed */
    uint64_t batches_committed;     /* leader */
    uint64_t entries_applied;       /* standby + catch-up */
    uint64_t write_failures;        /* etcd transactions that failed (retried) */
    uint64_t checksum_failures;     /* batches whose CRC32C did not match */
    uint64_t backpressure_waits;    /* writes held back while the log was behind */
    uint64_t backpressure_timeouts; /* ... that were let through after the timeout */
} mc_oplog_stats_t;
void mc_oplog_get_stats(mc_oplog_t *log, mc_oplog_stats_t *out);

#endif /* MC_MASTER_OPLOG_H */
