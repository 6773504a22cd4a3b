/*
 * daos_types.h — TEST DOUBLE of DAOS's basic type header (see daos_fs.h for what the double is
 * and where it is stricter than DAOS). Declares, with DAOS's names and layouts, only what the
 * adapter and the double use: daos_size_t, daos_off_t, daos_anchor_t, daos_handle_t (with
 * DAOS_HDL_INVAL, daos_handle_is_inval/valid), daos_event_t, DAOS_EQ_WAIT/NOWAIT, daos_obj_id_t.
 *
 * Includes the DAOS headers the real one includes (cart/types.h, daos_errno.h) and a subset of
 * its system headers (it also includes <stdio.h>, <string.h>, <ctype.h>).
 */
#ifndef DFS_DOUBLE_DAOS_TYPES_H
#define DFS_DOUBLE_DAOS_TYPES_H

#if defined(__cplusplus)
extern "C" {
#endif

#include <stdint.h>
#include <stdbool.h>
#include <limits.h>
#include <uuid/uuid.h>

#include <cart/types.h>

#include <daos_errno.h>

typedef uint64_t daos_size_t;
typedef uint64_t daos_off_t;

typedef enum {
    DAOS_ANCHOR_TYPE_ZERO = 0,
    DAOS_ANCHOR_TYPE_HKEY = 1,
    DAOS_ANCHOR_TYPE_KEY = 2,
    DAOS_ANCHOR_TYPE_EOF = 3,
} daos_anchor_type_t;

#define DAOS_ANCHOR_BUF_MAX 104

/* Iteration anchor: zero it (or DAOS_ANCHOR_INIT) before the first call. */
typedef struct {
    uint16_t da_type; /* daos_anchor_type_t */
    uint16_t da_shard;
    uint32_t da_flags;
    uint64_t da_sub_anchors;
    uint8_t da_buf[DAOS_ANCHOR_BUF_MAX]; /* internal */
} daos_anchor_t;

#define DAOS_ANCHOR_INIT                                                                           \
    {                                                                                              \
        .da_type = DAOS_ANCHOR_TYPE_ZERO, .da_shard = 0, .da_flags = 0, .da_sub_anchors = 0,       \
        .da_buf = {                                                                                \
            0                                                                                      \
        }                                                                                          \
    }

typedef struct {
    uint64_t cookie;
} daos_handle_t;

#define DAOS_HDL_INVAL ((daos_handle_t){0})
#define DAOS_TX_NONE DAOS_HDL_INVAL

static inline bool daos_handle_is_inval(daos_handle_t hdl)
{
    return hdl.cookie == 0;
}

static inline bool daos_handle_is_valid(daos_handle_t hdl)
{
    return !daos_handle_is_inval(hdl);
}

typedef struct daos_event {
    int ev_error; /* dfs_* operations: positive errno; daos_* operations: negative DER */
    struct {
        uint64_t space[20];
    } ev_private; /* the double keeps its bookkeeping here */
    uint64_t ev_debug;
} daos_event_t;

#define DAOS_EQ_WAIT -1 /* daos_eq_poll: wait for completion forever */
#define DAOS_EQ_NOWAIT 0

typedef struct {
    uint64_t lo;
    uint64_t hi;
} daos_obj_id_t;

#if defined(__cplusplus)
}
#endif
#endif /* DFS_DOUBLE_DAOS_TYPES_H */
