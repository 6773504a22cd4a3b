/*
 * etcd_cluster.h — a real etcd cluster (Debian's etcd 3.4 binary) on loopback for the integration
 * tests: N members (1 or 3) on free 127.0.0.1 ports, data dirs and logs under one mkdtemp dir.
 *
 * Every member is recorded with mc_cluster_track (cluster.h), so mc_cluster_kill_all() in a test's
 * teardown kills what a failed assertion left running; mc_etcd_cluster_destroy() also removes the
 * temp dir. Each member's stderr/stdout go to <dir>/mN.log (appended across restarts).
 * Members die with the test process (PR_SET_PDEATHSIG: also when ctest's timeout kills it).
 * Not thread-safe: one thread drives a cluster, and it must be the thread that lives as long as
 * the cluster (the test's main thread: the death signal follows the thread that started a member).
 */
#ifndef MC_TEST_ETCD_CLUSTER_H
#define MC_TEST_ETCD_CLUSTER_H

#include <sys/types.h>

#define MC_ETCD_CLUSTER_MAX 3

typedef struct mc_etcd_cluster {
    int n;
    char dir[256];                        /* the mkdtemp dir ("" when none) */
    pid_t pid[MC_ETCD_CLUSTER_MAX];       /* 0: not running */
    int client_port[MC_ETCD_CLUSTER_MAX]; /* 127.0.0.1:client_port serves the v3 gateway */
    int peer_port[MC_ETCD_CLUSTER_MAX];
    char endpoint[MC_ETCD_CLUSTER_MAX][32];   /* "127.0.0.1:port" */
    char endpoints[MC_ETCD_CLUSTER_MAX * 32]; /* "127.0.0.1:p1;127.0.0.1:p2;..." */
    char extra_host[32]; /* "" or an IPv4 address each member also serves clients on */
} mc_etcd_cluster_t;

/*
 * Starts n members (1 <= n <= MC_ETCD_CLUSTER_MAX) and waits (up to 30 s) until each answers a
 * put + get through its own endpoint. 0 when up; -1 otherwise (logs printed, everything torn down).
 */
int mc_etcd_cluster_start(mc_etcd_cluster_t *c, int n);
/* The same, each member also serving clients on extra_host (e.g. the root end of a veth pair,
 * for a process in a network namespace), on the same client port. */
int mc_etcd_cluster_start_at(mc_etcd_cluster_t *c, int n, const char *extra_host);
/* SIGKILLs member i and reaps it; 0, or -1 when it was not running. */
int mc_etcd_cluster_kill(mc_etcd_cluster_t *c, int i);
/* Stops member i (mc_proc_freeze: returns once every thread is stopped) / resumes it (SIGCONT);
 * 0, or -1 when it is not running or did not stop within 5 s. */
int mc_etcd_cluster_pause(mc_etcd_cluster_t *c, int i);
int mc_etcd_cluster_resume(mc_etcd_cluster_t *c, int i);
/* Restarts killed member i on its data dir and waits (up to 30 s) until it answers a get through
 * its own endpoint (it rejoined the quorum). 0, or -1. */
int mc_etcd_cluster_restart(mc_etcd_cluster_t *c, int i);
/* Prints the last `lines` lines of each member's log to stderr. */
void mc_etcd_cluster_print_logs(const mc_etcd_cluster_t *c, int lines);
/* Kills every member (SIGKILL), reaps it and removes the temp dir. Safe to call twice. */
void mc_etcd_cluster_destroy(mc_etcd_cluster_t *c);

#endif
