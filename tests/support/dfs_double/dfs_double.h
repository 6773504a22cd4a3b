/*
 * dfs_double.h — TEST DOUBLE only (no such header in DAOS): introspection and race hooks of the
 * libdfs test double (dfs_double.c) for the adapter's tests, e.g. to prove the adapter connects
 * once per process or to stop a dfs_move between its steps. Code that must also build against
 * the real DAOS must not include it.
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
/* dfs_move calls that failed with EEXIST or ENOENT on the destination (a concurrent mover). */
int dfs_double_move_conflicts(void);
/* dfs_read transfers that hit the end of the file before their length (a punched file too). */
int dfs_double_short_reads(void);

/* Stops (up = 0) or restarts (up = 1) the engine of every process using this DFS_DOUBLE_ROOT:
 * creates or removes $DFS_DOUBLE_ROOT/.engine_down. 0 or an errno. */
int dfs_double_set_engine(int up);
/* Calls of this process now blocked because the engine does not answer. */
int dfs_double_blocked_calls(void);
/* Events of this process submitted (dfs_read/dfs_write) and not yet reaped by daos_eq_poll or
 * daos_event_test (nor dropped by a forced daos_eq_destroy). */
int dfs_double_events_in_flight(void);

/* The points between the steps of dfs_move (daos_fs.h) at which the hook is called. */
enum {
    DFS_DOUBLE_MOVE_PUNCHED = 1,  /* the destination's data punched, its entry still there */
    DFS_DOUBLE_MOVE_REMOVED = 2,  /* the destination absent, the new entry not yet inserted */
    DFS_DOUBLE_MOVE_INSERTED = 3, /* the object under both names */
};
typedef void (*dfs_double_move_hook_t)(int step, const char *new_name, void *arg);
/* Every dfs_move of the process calls hook(step, new_name, arg) at each step (NULL: none). Set
 * it while no dfs_move runs. */
void dfs_double_set_move_hook(dfs_double_move_hook_t hook, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* DFS_DOUBLE_HOOKS_H */
