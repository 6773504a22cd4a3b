/*
 * ha.h — master high availability on etcd: leader election with a lease, as upstream's
 * MasterServiceSupervisor with the etcd backend (keys in common/master_view.h).
 *
 * Every master of a cluster runs one mc_ha_t. A master that finds no leader grants an etcd lease
 * of lease_ttl_s seconds and creates mooncake-store/<cluster>/master_view = its advertised RPC
 * address under that lease, only if the key is absent (one transaction: at most one winner). The
 * winner runs on_elected (restore the index from the operation log) while it keeps the lease
 * alive, then serves. Standbys poll the key every poll_ms and compete again when it disappears
 * (the leader's lease expired or was revoked).
 *
 * No split brain. A leader renews its lease every lease_ttl_s/5 s and, with each renewal, checks
 * that the key is still its own. etcd keeps a renewed lease at least lease_ttl_s from when the
 * renewal was SENT, so the leader may serve until (send time + granted TTL × 9/10): the tenth is
 * a margin for the two clocks' rates. mc_ha_may_serve answers 0 from that deadline on, without
 * asking etcd, so a leader cut off from etcd (partitioned, stalled by SIGSTOP) stops serving before
 * etcd can let another master win. The RPC server asks mc_ha_may_serve before it executes a
 * request and again before it answers; a request refused either way gets no answer (its
 * connection is closed), so a client that retries at the new leader never runs it twice.
 * Leadership lost (the lease gone, the key not ours, or the deadline passed) calls on_deposed;
 * a deposed mc_ha_t competes no more (its master's index is stale): stop it, and start a new one
 * over a fresh master to stand by again.
 *
 * Upstream waits one more lease TTL after winning ("leader_warmup") before serving; the deadline
 * rule above already guarantees the old leader stopped serving before the key could be created
 * again, so we serve as soon as on_elected returns (failover ~ one TTL, not two).
 *
 * Thread-safety: mc_ha_may_serve, mc_ha_state and mc_ha_view from any thread; start/stop from one.
 */
#ifndef MC_MASTER_HA_H
#define MC_MASTER_HA_H

#include <stddef.h>
#include <stdint.h>

typedef struct mc_ha mc_ha_t;

typedef enum mc_ha_state {
    MC_HA_STARTING = 0,
    MC_HA_STANDBY = 1,
    MC_HA_CANDIDATE = 2,
    MC_HA_RECOVERING = 3, /* won; on_elected restoring the index */
    MC_HA_SERVING = 4,
    MC_HA_DEPOSED = 5, /* lost leadership; on_deposed called */
    MC_HA_STOPPED = 6,
} mc_ha_state_t;

typedef struct mc_ha_config {
    const char *endpoints;  /* etcd endpoints, "h:p;h:p" */
    const char *cluster_id; /* --cluster_id */
    const char *advertise;  /* this master's RPC address "host:port", published when leading */
    int lease_ttl_s;        /* 0 = MC_MASTER_VIEW_LEASE_TTL_S (5) */
    int poll_ms;            /* standby: how often the key is read; 0 = 250 */
    /* Called on the HA thread after winning, before serving (the lease is kept alive meanwhile):
     * returns 0 to serve, anything else to give up (lease revoked, compete again later). May be
     * NULL. view_version: the new view's etcd create revision. */
    int (*on_elected)(void *arg, int64_t view_version);
    /* Called once on the HA thread when leadership is lost; `why` is one line. May be NULL. */
    void (*on_deposed)(void *arg, const char *why);
    void *arg;
} mc_ha_config_t;

/* Starts the HA threads. 0, MC_ERR_INVALID_PARAMS (missing endpoints, cluster id or advertised
 * address, or an advertised wildcard address), MC_ERR_ETCD_OPERATION_ERROR (bad endpoint list),
 * MC_ERR_INTERNAL_ERROR. Strings are copied. */
int mc_ha_start(const mc_ha_config_t *config, mc_ha_t **out);
/* Stops the election and renewal threads (waiting for an on_elected under way) without giving
 * the lease up: a leader's lease then runs out by itself unless mc_ha_stop follows, as it
 * should once the owner flushed what must reach etcd under it. Idempotent; NULL: no-op. */
void mc_ha_halt(mc_ha_t *ha);
/* Halts (if not yet), then a leader revokes its lease so that a standby takes over at once, and
 * frees. NULL: no-op. */
void mc_ha_stop(mc_ha_t *ha);

/* Gives leadership up (e.g. its operation log cannot be written): stops serving at once, calls
 * on_deposed and revokes the lease so that a standby takes over without waiting for the TTL. */
void mc_ha_resign(mc_ha_t *ha, const char *why);
/* 1 while this master leads, serves and is inside its lease deadline; else 0. NULL (no HA): 1. */
int mc_ha_may_serve(const mc_ha_t *ha);
/* The state; MC_HA_DEPOSED as soon as a serving master's deadline passed (when its gate stops
 * serving), even before the renewal thread has noticed. */
mc_ha_state_t mc_ha_state(const mc_ha_t *ha);
/* Upstream's state names for /ha_status: starting, standby, candidate, recovering, serving,
 * plus deposed and stopped. */
const char *mc_ha_state_name(mc_ha_state_t state);
/* The last view seen: leader address ("" when none) and its version (0 when none). */
void mc_ha_view(const mc_ha_t *ha, char *leader, size_t cap, int64_t *view_version);
/* Counters for /metrics: state transitions, elections won, leadership losses. */
void mc_ha_counters(const mc_ha_t *ha, uint64_t *transitions, uint64_t *won, uint64_t *lost);
/* The etcd handle the HA threads use (for the operation log to share). */
struct mc_etcd *mc_ha_etcd(const mc_ha_t *ha);

#endif /* MC_MASTER_HA_H */
