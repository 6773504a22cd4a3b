/*
 * daos_errno.h — TEST DOUBLE of DAOS's daos_errno.h (see daos_fs.h for what the double is and
 * where it is stricter than DAOS): the DER error numbers (DAOS's values: the GURT range from
 * 1001, the DAOS range from 2001, in DAOS's order) and d_errstr. daos_* calls return them
 * negated. Like DAOS's, it includes nothing.
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
