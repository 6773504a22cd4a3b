/*
 * segment_registry.c — this process's registered memory: the ranges that make up its segment.
 *
 * Regions are kept sorted by address and never overlap, so a lookup is a binary search. The
 * rwlock is what keeps memory alive under a transfer: readers (local copies, the tcp server
 * receiving into a region, the shm server handing out an fd) hold it while they touch a region;
 * registration and unregistration take it for writing.
 */
#include "transfer_internal.h"

#include "log.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

void mc_registry_init(mc_segment_registry_t *r)
{
    memset(r, 0, sizeof(*r));
    pthread_rwlock_init(&r->lock, NULL);
}

void mc_registry_destroy(mc_segment_registry_t *r)
{
    for (size_t i = 0; i < r->count; i++) {
        mc_local_region_t *g = &r->regions[i];
        if (g->owned)
            munmap((void *)(uintptr_t)g->addr, g->length);
        if (g->memfd >= 0)
            close(g->memfd);
    }
    free(r->regions);
    pthread_rwlock_destroy(&r->lock);
    memset(r, 0, sizeof(*r));
}

/* Index of the first region with addr > a (upper bound). */
static size_t upper_bound(const mc_segment_registry_t *r, uint64_t a)
{
    size_t lo = 0, hi = r->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->regions[mid].addr <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int mc_registry_add(mc_segment_registry_t *r, const mc_local_region_t *region)
{
    if (region->length == 0 || region->addr + region->length < region->addr)
        return MC_ERR_INVALID_PARAMS;
    pthread_rwlock_wrlock(&r->lock);
    int rc = 0;
    size_t pos = upper_bound(r, region->addr);
    const mc_local_region_t *prev = pos > 0 ? &r->regions[pos - 1] : NULL;
    const mc_local_region_t *next = pos < r->count ? &r->regions[pos] : NULL;
    if ((prev && prev->addr + prev->length > region->addr) ||
        (next && region->addr + region->length > next->addr)) {
        MC_ERROR("register memory [%#llx, +%llu): overlaps a registered range",
                 (unsigned long long)region->addr, (unsigned long long)region->length);
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    if (r->count >= MC_TE_MAX_REGIONS) {
        MC_ERROR("register memory: more than %d regions", MC_TE_MAX_REGIONS);
        rc = MC_ERR_INVALID_PARAMS;
        goto out;
    }
    if (r->count == r->capacity) {
        size_t cap = r->capacity ? r->capacity * 2 : 8;
        mc_local_region_t *n = realloc(r->regions, cap * sizeof(*n));
        if (!n) {
            rc = MC_ERR_INTERNAL_ERROR;
            goto out;
        }
        r->regions = n;
        r->capacity = cap;
    }
    memmove(&r->regions[pos + 1], &r->regions[pos], (r->count - pos) * sizeof(*r->regions));
    r->regions[pos] = *region;
    r->count++;
    r->version++;
out:
    pthread_rwlock_unlock(&r->lock);
    return rc;
}

int mc_registry_remove(mc_segment_registry_t *r, uint64_t addr, mc_local_region_t *removed)
{
    pthread_rwlock_wrlock(&r->lock);
    size_t pos = upper_bound(r, addr);
    if (pos == 0 || r->regions[pos - 1].addr != addr) {
        pthread_rwlock_unlock(&r->lock);
        return MC_ERR_INVALID_PARAMS;
    }
    pos--;
    if (removed)
        *removed = r->regions[pos];
    memmove(&r->regions[pos], &r->regions[pos + 1], (r->count - pos - 1) * sizeof(*r->regions));
    r->count--;
    r->version++;
    pthread_rwlock_unlock(&r->lock);
    return 0;
}

const mc_local_region_t *mc_registry_find_locked(const mc_segment_registry_t *r, uint64_t addr,
                                                 uint64_t len)
{
    size_t pos = upper_bound(r, addr);
    if (pos == 0)
        return NULL;
    const mc_local_region_t *g = &r->regions[pos - 1];
    if (len > g->length || addr - g->addr > g->length - len)
        return NULL;
    return g;
}

const mc_local_region_t *mc_registry_find_shm_locked(const mc_segment_registry_t *r,
                                                     int32_t shm_index)
{
    for (size_t i = 0; i < r->count; i++) {
        if (r->regions[i].shm_index == shm_index)
            return &r->regions[i];
    }
    return NULL;
}
