/*
 * shared_memory.h — the shared memory of store.h's mc_store_alloc_shared (upstream's ShmHelper):
 * sealed memfds mapped read-write in this process, kept in one process-wide list, each owned by
 * a store handle (freed with it) or by the process (owner NULL). A dummy store hands such memory
 * to its real client as the memfd's descriptor, so the real client maps the very same pages.
 *
 * Thread-safety: every function, from any thread (one process-wide lock).
 */
#ifndef MC_CLIENT_SHARED_MEMORY_H
#define MC_CLIENT_SHARED_MEMORY_H

#include "mooncake/store.h"

#include <stddef.h>

/*
 * A sealed memfd ("mooncake_shm", its size can no longer change: a peer that maps it never
 * faults on a shrunk file) of `size` bytes, mapped shared. 0 and *addr, *fd (the caller owns
 * both: munmap, close), or MC_ERR_INTERNAL_ERROR (logged). Not put on the list.
 */
int mc_shared_memfd_map(size_t size, void **addr, int *fd);
/* A new descriptor (F_DUPFD_CLOEXEC; the caller closes it) of the listed allocation that is
 * exactly [addr, addr + size), or -1 when there is none. */
int mc_shared_dup(const void *addr, size_t size);
/* Frees every listed allocation `owner` owns (mc_store_free). */
void mc_shared_free_owned(const mc_store_t *owner);

#endif /* MC_CLIENT_SHARED_MEMORY_H */
