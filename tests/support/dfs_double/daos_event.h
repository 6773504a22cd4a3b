/*
 * daos_event.h — TEST DOUBLE of DAOS's event and event queue API (see daos_fs.h for what the
 * double is and where it is stricter than DAOS). Same signatures as DAOS; calls return 0 or a
 * negative DER code. The double's events: see dfs_double.c.
 */
#ifndef DFS_DOUBLE_DAOS_EVENT_H
#define DFS_DOUBLE_DAOS_EVENT_H

#if defined(__cplusplus)
extern "C" {
#endif

#include <daos_types.h>
#include <daos_errno.h>

int daos_eq_create(daos_handle_t *eqh);

#define DAOS_EQ_DESTROY_FORCE 1
/* -DER_BUSY while events are in flight, unless DAOS_EQ_DESTROY_FORCE. */
int daos_eq_destroy(daos_handle_t eqh, int flags);

/* timeout in microseconds (DAOS_EQ_WAIT, DAOS_EQ_NOWAIT); returns #events or a negative DER. */
int daos_eq_poll(daos_handle_t eqh, int wait_running, int64_t timeout, unsigned int nevents,
                 daos_event_t **events);

int daos_event_init(daos_event_t *ev, daos_handle_t eqh, daos_event_t *parent);
int daos_event_fini(daos_event_t *ev);
int daos_event_test(struct daos_event *ev, int64_t timeout, bool *flag);
/* Aborts a running event: it completes (ev_error -DER_CANCELED) and must still be polled. In the
 * double, an event whose transfer is already executing finishes first. */
int daos_event_abort(daos_event_t *ev);

#if defined(__cplusplus)
}
#endif
#endif /* DFS_DOUBLE_DAOS_EVENT_H */
