/*
 * dummy_client.h — the dummy side of the dummy/real split (store.h, "dummy clients"): what every
 * public mc_store_* call on a dummy store forwards to (store_client.c dispatches in one line).
 * Arguments and results are those of the mc_store_* call of the same name. Thread-safe: calls
 * from any threads are serialised on the dummy's one connection; close waits for calls in
 * flight.
 */
#ifndef MC_CLIENT_DUMMY_CLIENT_H
#define MC_CLIENT_DUMMY_CLIENT_H

#include "mooncake/store.h"

typedef struct mc_dummy mc_dummy_t;

int mc_dummy_setup(const mc_store_dummy_config_t *config, mc_dummy_t **out);
int mc_dummy_close(mc_dummy_t *d);
void mc_dummy_free(mc_dummy_t *d);
int mc_dummy_health_check(mc_dummy_t *d);

int mc_dummy_write(mc_dummy_t *d, int upsert, int zero_copy, const char *const *keys,
                   const void *const *values, const size_t *sizes, size_t n,
                   const mc_replicate_config_t *config, int *results);
int mc_dummy_read(mc_dummy_t *d, int zero_copy, const char *const *keys, void *const *bufs,
                  const size_t *capacities, size_t n, int64_t *results);
/* remove = 0: exist, 1: remove (force) */
int mc_dummy_per_key(mc_dummy_t *d, int remove, const char *const *keys, size_t n, int force,
                     int *results);
int64_t mc_dummy_remove_all(mc_dummy_t *d, int force);
int64_t mc_dummy_remove_by_regex(mc_dummy_t *d, const char *regex, int force);
int64_t mc_dummy_get_size(mc_dummy_t *d, const char *key);
int mc_dummy_get_replica_desc(mc_dummy_t *d, const char *key, mc_replica_desc_t *out,
                              size_t capacity, size_t *count);
int mc_dummy_register_buffer(mc_dummy_t *d, void *buf, size_t size);
int mc_dummy_unregister_buffer(mc_dummy_t *d, void *buf);
int mc_dummy_get_offload_stats(mc_dummy_t *d, mc_store_offload_stats_t *out);
int mc_dummy_set_offloading(mc_dummy_t *d, int enabled);

/* Frees the shared allocations (mc_store_alloc_shared) `owner` owns: mc_store_free. */
void mc_shared_free_owned(const mc_store_t *owner);

#endif /* MC_CLIENT_DUMMY_CLIENT_H */
