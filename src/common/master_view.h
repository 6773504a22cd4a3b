/*
 * master_view.h — where the elected master is published in etcd, and how clients read it
 * (master high availability, docs/ha.md). Matches upstream Mooncake's etcd leader-election
 * keys:
 *
 *   key   mooncake-store/<cluster_id>/master_view   (a trailing '/' of cluster_id is trimmed)
 *   value the leader's RPC address "host:port"
 *   lease the leader's election lease (TTL 5 s by default), kept alive while it leads
 *   view_version = the key's etcd create revision: it grows with every election
 *
 * A master address "etcd://h1:2379;h2:2379" (also ',' between endpoints) means: follow the leader
 * elected in that etcd cluster. The client's cluster id comes from the environment variable
 * MC_STORE_CLUSTER_ID (default "mooncake_cluster"), as upstream; it must equal the masters'
 * --cluster_id. Thread-safe (no state).
 */
#ifndef MC_COMMON_MASTER_VIEW_H
#define MC_COMMON_MASTER_VIEW_H

#include "etcd.h"

#include <stddef.h>
#include <stdint.h>

#define MC_DEFAULT_CLUSTER_ID "mooncake_cluster"
#define MC_CLUSTER_ID_ENV "MC_STORE_CLUSTER_ID"
#define MC_MASTER_VIEW_LEASE_TTL_S 5 /* upstream's DEFAULT_MASTER_VIEW_LEASE_TTL_SEC */

/* "mooncake-store/<cluster_id>/master_view" into out. MC_ERR_INVALID_PARAMS when cluster_id is
 * empty (after trimming) or out is too small. */
int mc_master_view_key(const char *cluster_id, char *out, size_t cap);

/*
 * Classifies a master address: 1 for an HA spec "etcd://<endpoints>" (endpoints copied into
 * out), 0 for a plain "host:port", MC_ERR_INVALID_PARAMS (one ERROR line) for another scheme
 * (upstream's redis:// and k8s:// backends are not built here) or an empty endpoint list.
 */
int mc_master_addr_parse(const char *addr, char *endpoints, size_t cap);

/* The client's cluster id: $MC_STORE_CLUSTER_ID, else MC_DEFAULT_CLUSTER_ID. Static storage. */
const char *mc_client_cluster_id(void);

/*
 * Reads the published leader: its address into leader[0..cap), *view_version (may be NULL).
 * MC_ERR_ETCD_KEY_NOT_EXIST when no master leads now, MC_ERR_ETCD_OPERATION_ERROR when etcd
 * cannot be read, MC_ERR_INVALID_PARAMS when the value is not a "host:port" that fits.
 */
int mc_master_view_read(mc_etcd_t *e, const char *cluster_id, char *leader, size_t cap,
                        int64_t *view_version);

#endif /* MC_COMMON_MASTER_VIEW_H */
