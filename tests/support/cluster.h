/*
 * cluster.h — a real mooncake_master and mooncake_client holders on loopback, for the
 * integration tests (test_store, test_offload). Built on proc.h.
 *
 * Every child started here is recorded in a registry (mc_cluster_track); a failed assertion skips
 * a test's own cleanup, so teardowns call mc_cluster_kill_all() to kill whatever is still running
 * (a leftover master or mooncake_client would hold ctest's output pipe open and hang it).
 */
#ifndef MC_TEST_CLUSTER_H
#define MC_TEST_CLUSTER_H

#include "mooncake/store.h"
#include "proc.h"

#include <sys/types.h>

typedef struct mc_master {
    pid_t pid;
    int rpc_port, metrics_port;
    char addr[64];
} mc_master_t;

typedef struct mc_holder {
    mc_proc_t proc;
    char segment[300];
} mc_holder_t;

/* Child registry: record, forget, and SIGKILL + reap every recorded child still present. */
void mc_cluster_track(pid_t pid);
void mc_cluster_untrack(pid_t pid);
void mc_cluster_kill_all(void);

/* 1 when something accepts TCP connections on 127.0.0.1:port. */
int mc_port_open(int port);

/*
 * Starts mooncake_master on rpc_port (metrics on a free port) with extra flags (NULL-terminated,
 * may be NULL) and waits for its RPC port. With `offload`, --enable_offload=true comes before the
 * extra flags and the metrics port is waited for too. 0 when up, -1 otherwise.
 */
int mc_master_start_on(mc_master_t *m, int rpc_port, int offload, const char *const *extra);
/* mc_master_start_on on a free port. */
int mc_master_start(mc_master_t *m, int offload, const char *const *extra);
/* Untracks, sends sig and waits 10 s; the wait status, or -1 after a SIGKILL. */
int mc_master_stop(mc_master_t *m, int sig);

/* Sets (set != 0) or unsets each "NAME=value" of the NULL-terminated env (may be NULL). */
void mc_env_apply(const char *const *env, int set);

/*
 * mooncake_client with a segment of `segment` bytes against master m, extra flags after the
 * common ones, and `env` set only while it starts; waits timeout_ms for its ready line, tracks it
 * and fills h->segment. 0 when ready, -1 otherwise.
 */
int mc_holder_start(mc_holder_t *h, const mc_master_t *m, const char *segment,
                    const char *const *flags, const char *const *env, int timeout_ms);

/*
 * The same on an address other than 127.0.0.1 (an IPv4 address of this host, e.g. one end of a
 * veth pair in a network-fault test): mc_port_open on host, the master's RPC on host (metrics stay
 * on 127.0.0.1, m->addr is "host:port"), a holder listening on and advertising host.
 */
int mc_port_open_at(const char *host, int port);
int mc_master_start_at(mc_master_t *m, const char *host, const char *const *extra);
int mc_holder_start_at(mc_holder_t *h, const mc_master_t *m, const char *host, const char *segment,
                       const char *const *flags, const char *const *env, int timeout_ms);

/* A store client in this process with no segment and a 16 MiB local buffer, on loopback;
 * checksums off when !checksum, tcp only (MC_DISABLE_SHM=1 while it starts) with disable_shm.
 * NULL when setup failed. */
mc_store_t *mc_test_client(const mc_master_t *m, int checksum, int disable_shm);
/*
 * A put that sets a test up, tried again (every 100 ms, up to timeout_ms) while it fails: a
 * holder that just started, on a loaded host, may answer its first handshake after a short
 * MC_TRANSFER_TIMEOUT has passed. 0, or the last error.
 */
int mc_test_put_retry(mc_store_t *s, const char *key, const void *value, size_t size,
                      const mc_replicate_config_t *cfg, int timeout_ms);
/* Body of GET http://127.0.0.1:port/path (malloc'd, at most 1 MiB), or NULL. */
char *mc_http_get(int port, const char *path);
/* The master's metric `name` from its /metrics, or -1 when the master cannot be asked. */
long long mc_master_metric(const mc_master_t *m, const char *name);

#endif
