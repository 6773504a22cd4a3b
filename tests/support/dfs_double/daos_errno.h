/*
 * daos_errno.h — TEST DOUBLE standing in for DAOS's daos_errno.h (the DER error numbers and
 * d_errstr of libgurt), which CI cannot use (no DAOS on Debian). Values as listed in
 * ../shared/reference/daos-dfs.md §2.6; daos_* calls return them negated. Implemented by
 * dfs_double.c.
 */
#ifndef DFS_DOUBLE_DAOS_ERRNO_H
#define DFS_DOUBLE_DAOS_ERRNO_H

#ifdef __cplusplus
extern "C" {
#endif

/* GURT range (1000+) and DAOS range (2000+). */
enum daos_errno {
    DER_SUCCESS = 0,
    DER_NO_PERM = 1001,
    DER_NO_HDL = 1002,
    DER_INVAL = 1003,
    DER_EXIST = 1004,
    DER_NONEXIST = 1005,
    DER_UNREACH = 1006,
    DER_NOSPACE = 1007,
    DER_ALREADY = 1008,
    DER_NOMEM = 1009,
    DER_NOSYS = 1010,
    DER_TIMEDOUT = 1011,
    DER_BUSY = 1012,
    DER_AGAIN = 1013,
    DER_PROTO = 1014,
    DER_UNINIT = 1015,
    DER_TRUNC = 1016,
    DER_OVERFLOW = 1017,
    DER_CANCELED = 1018,
    DER_IO = 2001,
    DER_ENOENT = 2003,
    DER_STALE = 2007,
    DER_TX_RESTART = 2025,
    DER_NOTSUPPORTED = 2037,
};

/* "DER_NOSPACE" for -1007 (or 1007); "DER_UNKNOWN" otherwise. Static string. */
const char *d_errstr(int rc);

#ifdef __cplusplus
}
#endif
#endif /* DFS_DOUBLE_DAOS_ERRNO_H */
