/*
 * netns.h — a network namespace joined to the root namespace by a veth pair, for the tests that
 * cut, slow or vanish a link between two hosts on one machine (test_netfault, test_ha_partition,
 * test_startup, test_timeouts).
 *
 * The pair's addresses lie in a /24 of 10.<net>.0.0/16 that no interface of this host uses yet
 * (each test passes its own <net>), and every name carries the test's pid, so tests run side by
 * side. Needs root (CAP_NET_ADMIN) and iproute2. Not thread-safe: one thread sets a namespace up
 * and tears it down.
 */
#ifndef MC_TEST_NETNS_H
#define MC_TEST_NETNS_H

typedef struct mc_netns {
    int created;                     /* the namespace exists (destroy removes it) */
    char ip_bin[64];                 /* the ip command's path */
    char ns[32];                     /* the namespace's name */
    char veth_root[16], veth_ns[16]; /* the pair's ends: in the root namespace, in ns */
    char root_ip[32], ns_ip[32];     /* 10.<net>.<subnet>.1 on veth_root, .2 on veth_ns */
    int subnet;                      /* the third octet of both */
} mc_netns_t;

/* Runs the shell command line built from fmt, its output discarded; 0 when it exited 0, else -1. */
int mc_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * Creates the namespace "<tag><pid>" with lo and its end of the pair up, both ends addressed
 * (/24) and up. tag: at most 5 characters (interface names have 15). NULL when done; otherwise
 * why it cannot be done on this host (a static string), and nothing is left behind.
 */
const char *mc_netns_create(mc_netns_t *n, const char *tag, int net);

/* Removes the namespace and the pair; nothing when n was not created (safe to call twice). */
void mc_netns_destroy(mc_netns_t *n);

/* Sets the namespace's end of the pair up (1) or down (0), cutting or restoring the link. 0 or -1.
 */
int mc_netns_link_set(const mc_netns_t *n, int up);

#endif
