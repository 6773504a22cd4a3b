/*
 * daos.h — TEST DOUBLE standing in for DAOS's libdaos/libgurt headers, which CI cannot use (no
 * DAOS packages on Debian, no DAOS servers). Not DAOS: a small library with the same names,
 * types, constants and calling conventions as the subset mooncake-c's DAOS adapter uses, written
 * from the public API description in ../shared/reference/daos-dfs.md, implemented over a local
 * directory by dfs_double.c. Build with -DUSE_DAOS=ON -DDAOS_TEST_DOUBLE=ON; on a DAOS host
 * -DUSE_DAOS=ON alone builds the same adapter against the real headers.
 *
 * Provided here: basic types (daos_size_t, daos_off_t, daos_handle_t, daos_obj_id_t, d_iov_t,
 * d_sg_list_t, daos_anchor_t, daos_event_t with its 20 x u64 private area), event queues
 * (daos_eq_*, daos_event_*) and object class names (daos_oclass_name2id); the DER error numbers
 * and d_errstr come from daos_errno.h, included here as DAOS's daos.h does. Conventions as in
 * DAOS: daos_* calls return 0 or a negative DER code.
 */
#ifndef DFS_DOUBLE_DAOS_H
#define DFS_DOUBLE_DAOS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "daos_errno.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t daos_size_t;
typedef uint64_t daos_off_t;
typedef uint32_t daos_oclass_id_t;

typedef struct {
    uint64_t cookie;
} daos_handle_t;

#define DAOS_HDL_INVAL ((daos_handle_t){0})

static inline bool daos_handle_is_inval(daos_handle_t h)
{
    return h.cookie == 0;
}

static inline bool daos_handle_is_valid(daos_handle_t h)
{
    return h.cookie != 0;
}

typedef struct {
    uint64_t lo;
    uint64_t hi;
} daos_obj_id_t;

/* gurt/types.h */
typedef struct {
    void *iov_buf;
    size_t iov_buf_len;
    size_t iov_len;
} d_iov_t;

typedef struct {
    uint32_t sg_nr;
    uint32_t sg_nr_out;
    d_iov_t *sg_iovs;
} d_sg_list_t;

static inline void d_iov_set(d_iov_t *iov, void *buf, size_t size)
{
    iov->iov_buf = buf;
    iov->iov_buf_len = size;
    iov->iov_len = size;
}

#define DAOS_ANCHOR_BUF_MAX 104
#define DAOS_ANCHOR_TYPE_ZERO 0
#define DAOS_ANCHOR_TYPE_EOF 3

typedef struct {
    uint16_t da_type;
    uint16_t da_shard;
    uint32_t da_flags;
    uint64_t da_sub_anchors;
    uint8_t da_buf[DAOS_ANCHOR_BUF_MAX];
} daos_anchor_t;

static inline bool daos_anchor_is_eof(daos_anchor_t *anchor)
{
    return anchor->da_type == DAOS_ANCHOR_TYPE_EOF;
}

/* daos_event.h */
typedef struct daos_event {
    int ev_error; /* dfs_* operations: positive errno; daos_* operations: negative DER */
    struct {
        uint64_t space[20];
    } ev_private;
    uint64_t ev_debug;
} daos_event_t;

#define DAOS_EQ_WAIT -1
#define DAOS_EQ_NOWAIT 0
#define DAOS_EQ_DESTROY_FORCE 1

int daos_eq_create(daos_handle_t *eqh);
int daos_eq_destroy(daos_handle_t eqh, int flags);
/* timeout in microseconds (DAOS_EQ_WAIT, DAOS_EQ_NOWAIT); returns #events or a negative DER. */
int daos_eq_poll(daos_handle_t eqh, int wait_running, int64_t timeout, unsigned int nevents,
                 daos_event_t **events);
int daos_event_init(daos_event_t *ev, daos_handle_t eqh, daos_event_t *parent);
int daos_event_fini(daos_event_t *ev);
int daos_event_test(daos_event_t *ev, int64_t timeout, bool *flag);

/* daos_obj_class.h: OC_UNKNOWN (0) for a name that is not a class. */
#define OC_UNKNOWN 0
#define OC_S1 0x1000001u
#define OC_SX 0x100FFFFu
int daos_oclass_name2id(const char *name);

#ifdef __cplusplus
}
#endif
#endif /* DFS_DOUBLE_DAOS_H */
