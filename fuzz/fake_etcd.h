/*
 * fake_etcd.h — a stand-in for etcd's JSON gateway for the fuzz targets that drive the etcd
 * client (fuzz_etcd.c, fuzz_oplog.c): an HTTP server on 127.0.0.1 that answers each POST, in
 * order, with the next answer queued by the target (status and body bytes, whatever they are),
 * and with 200 "{}" once the queue is empty. It never interprets a request.
 *
 * One server per process, started once; push/clear from the fuzzing thread between calls.
 */
#ifndef MC_FUZZ_FAKE_ETCD_H
#define MC_FUZZ_FAKE_ETCD_H

#include <stddef.h>

/* Starts the server; returns its port. Aborts when it cannot. */
int mc_fake_etcd_start(void);
/* Queues one answer (copied). */
void mc_fake_etcd_push(unsigned status, const void *body, size_t len);
/* Drops the answers not served yet. */
void mc_fake_etcd_clear(void);

#endif /* MC_FUZZ_FAKE_ETCD_H */
