/*
 * dfs_double.h — TEST DOUBLE only (no such header in DAOS): introspection hooks of the libdfs
 * test double (dfs_double.c) for the adapter's tests, e.g. to prove the adapter connects once
 * per process. Code that must also build against the real DAOS must not include it.
 */
#ifndef DFS_DOUBLE_HOOKS_H
#define DFS_DOUBLE_HOOKS_H

#ifdef __cplusplus
extern "C" {
#endif

/* dfs_connect calls that have not been matched by dfs_disconnect. */
int dfs_double_live_connections(void);
/* dfs_connect calls made by this process so far. */
int dfs_double_total_connects(void);
/* dfs_init references held (dfs_init minus dfs_fini). */
int dfs_double_init_refs(void);

#ifdef __cplusplus
}
#endif
#endif /* DFS_DOUBLE_HOOKS_H */
