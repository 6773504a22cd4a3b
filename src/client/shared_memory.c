/*
 * shared_memory.c — mc_store_alloc_shared / mc_store_free_shared (store.h) and the process-wide
 * list of their allocations (shared_memory.h). A plain array searched linearly: a process holds a
 * handful of pools (upstream's alloc_from_mem_pool, MooncakeHostMemAllocator), looked up only when
 * one is registered or freed.
 */
#include "shared_memory.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct shared_alloc {
    uintptr_t addr;
    size_t size;
    int fd;
    const mc_store_t *owner;
} shared_alloc_t;

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static shared_alloc_t *shared;
static size_t shared_count, shared_cap;

int mc_shared_memfd_map(size_t size, void **addr, int *fd)
{
    int f = memfd_create("mooncake_shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (f < 0 || ftruncate(f, (off_t)size) != 0 ||
        fcntl(f, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
        MC_ERROR("shared memory of %zu bytes: %s", size, strerror(errno));
        if (f >= 0)
            close(f);
        return MC_ERR_INTERNAL_ERROR;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    if (p == MAP_FAILED) {
        MC_ERROR("mapping %zu bytes of shared memory: %s", size, strerror(errno));
        close(f);
        return MC_ERR_INTERNAL_ERROR;
    }
    *addr = p;
    *fd = f;
    return 0;
}

int mc_store_alloc_shared(mc_store_t *store, size_t size, void **addr)
{
    if (!addr || size == 0 || size > MC_MAX_VALUE_SIZE)
        return MC_ERR_INVALID_PARAMS;
    *addr = NULL;
    void *p;
    int fd;
    int rc = mc_shared_memfd_map(size, &p, &fd);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&shared_lock);
    if (shared_count == shared_cap) {
        size_t cap = shared_cap ? shared_cap * 2 : 16;
        shared_alloc_t *g = realloc(shared, cap * sizeof(*g));
        if (!g) {
            pthread_mutex_unlock(&shared_lock);
            munmap(p, size);
            close(fd);
            return MC_ERR_INTERNAL_ERROR;
        }
        shared = g;
        shared_cap = cap;
    }
    shared[shared_count++] = (shared_alloc_t){(uintptr_t)p, size, fd, store};
    pthread_mutex_unlock(&shared_lock);
    *addr = p;
    return 0;
}

static void shared_release(size_t i)
{
    munmap((void *)shared[i].addr, shared[i].size);
    close(shared[i].fd);
    shared[i] = shared[--shared_count];
}

int mc_store_free_shared(mc_store_t *store, void *addr)
{
    (void)store; /* any owner's allocation may be freed by its address, as upstream's free */
    int rc = MC_ERR_INVALID_PARAMS;
    pthread_mutex_lock(&shared_lock);
    for (size_t i = 0; i < shared_count; i++) {
        if (shared[i].addr == (uintptr_t)addr) {
            shared_release(i);
            rc = 0;
            break;
        }
    }
    pthread_mutex_unlock(&shared_lock);
    return rc;
}

void mc_shared_free_owned(const mc_store_t *owner)
{
    pthread_mutex_lock(&shared_lock);
    for (size_t i = shared_count; i-- > 0;)
        if (shared[i].owner == owner)
            shared_release(i);
    pthread_mutex_unlock(&shared_lock);
}

int mc_shared_dup(const void *addr, size_t size)
{
    int fd = -1;
    pthread_mutex_lock(&shared_lock);
    for (size_t i = 0; i < shared_count; i++)
        if (shared[i].addr == (uintptr_t)addr && shared[i].size == size)
            fd = fcntl(shared[i].fd, F_DUPFD_CLOEXEC, 0);
    pthread_mutex_unlock(&shared_lock);
    return fd;
}
