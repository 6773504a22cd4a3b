/*
 * gurt/types.h — TEST DOUBLE of DAOS's libgurt type header (see ../daos_fs.h for what the double
 * is and where it is stricter than DAOS). Declares only what the adapter uses: d_iov_t,
 * d_sg_list_t and d_iov_set, with DAOS's layouts.
 *
 * Includes: a subset of what the real header includes (it also pulls in <uuid/uuid.h>,
 * <unistd.h>, <errno.h>, <time.h>, <limits.h>, <stdlib.h>, <stdio.h>, <pthread.h>,
 * <byteswap.h>); code that needs those includes them itself.
 */
#ifndef DFS_DOUBLE_GURT_TYPES_H
#define DFS_DOUBLE_GURT_TYPES_H

#include <stdbool.h>
#include <string.h>
#include <inttypes.h>

#if defined(__cplusplus)
extern "C" {
#endif

typedef struct {
    void *iov_buf;      /* buffer address */
    size_t iov_buf_len; /* buffer length */
    size_t iov_len;     /* data length */
} d_iov_t;

typedef struct {
    uint32_t sg_nr;     /* iovs in sg_iovs */
    uint32_t sg_nr_out; /* iovs used (output) */
    d_iov_t *sg_iovs;
} d_sg_list_t;

static inline void d_iov_set(d_iov_t *iov, void *buf, size_t size)
{
    iov->iov_buf = buf;
    iov->iov_len = iov->iov_buf_len = size;
}

#if defined(__cplusplus)
}
#endif
#endif /* DFS_DOUBLE_GURT_TYPES_H */
