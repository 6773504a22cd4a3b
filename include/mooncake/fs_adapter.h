/*
 * fs_adapter.h — the FS adapter: Mooncake-style objects on a filesystem, one file per object.
 *
 * The distributed offload backend (MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR=distributed) and
 * daos_adapter_bench store objects through this interface. Two adapters sit behind it:
 *   "posix"  any POSIX directory (local disk, NFS, Lustre, CephFS, a dfuse mount) through
 *            open/pwrite/pread/fsync/rename;
 *   "daos"   a DAOS/MASS POSIX container through libdfs: root_dir (a dfuse/UNS path such as
 *            /mnt/mass/mooncake) is only used to resolve pool, container and the directory inside
 *            the container; object bytes go through dfs_write/dfs_read. Built only with
 *            -DUSE_DAOS=ON; otherwise opening it fails with MC_ERR_NOT_SUPPORTED.
 *   "hf3fs"  is refused (MC_ERR_NOT_SUPPORTED); any other name is MC_ERR_INVALID_PARAMS.
 *
 * Layout under root_dir (identical for both adapters, so a directory written by one is read by
 * the other through a dfuse mount):
 *   <root>/<hh>/<name>    hh = two lowercase hex digits, the top byte of XXH3-64(key);
 *                         name = the key escaped (bytes outside [A-Za-z0-9._-], and a leading
 *                         '.', become %XX), reversible; keys whose escaped form exceeds
 *                         MC_FS_NAME_MAX_ESCAPED bytes get "<escaped prefix>~<xxh128 hex>" and
 *                         the full key is taken from the object header.
 *   <root>/<hh>/.t*       temporary files of writes in progress (never listed, never read);
 *                         the name carries the writer's identity (mc_fs_clean_temps).
 *   <root>/.probe/        the health check's probe objects.
 * An object file holds a header (magic "MCOBJ", version, header length, key, value size,
 * CRC32C of the value, CRC32C of the header; zero-padded to 4 KiB for values of 64 KiB and more)
 * followed by the value (see src/storage/object_layout.h).
 *
 * Units: sizes and offsets in bytes. Keys: 1..MC_FS_KEY_MAX bytes, no NUL (C strings); any
 * other byte is allowed, '/' included.
 *
 * Ownership: mc_fs_adapter_open() allocates the adapter; mc_fs_adapter_close() frees it and is
 * the only call that may not run concurrently with others on the same adapter. The config is
 * copied at open (strings included): the caller keeps ownership of its mc_fs_config_t. Buffers
 * passed to write/read stay the caller's; the adapter does not keep pointers to them after the
 * call returns.
 *
 * Thread-safety: every call except close may be made concurrently from any number of threads on
 * one adapter (the I/O threads of the offload worker or the benchmark). Concurrent writers of one
 * key: the last rename wins, readers see one complete version. A reader never sees a partially
 * written object: writes go to a temporary name and are published by an atomic rename (posix:
 * after fsync, followed by an fsync of the directory; daos: dfs_move after the writes completed).
 *
 * Error codes (include/mooncake/errors.h), mapped in exactly one place per adapter, with the
 * errno (or DAOS DER code) and the path in one ERROR/WARNING log line:
 *   MC_ERR_INVALID_PARAMS (-600)         bad config or arguments (empty/too long key, NULL
 *                                        buffer with size > 0, unknown fs type, unknown object
 *                                        class, root_dir not absolute)
 *   MC_ERR_NOT_SUPPORTED (-1012)         fs type not built into this binary, or hf3fs
 *   MC_ERR_FILE_NOT_FOUND (-1100)        read/stat/remove of a key that has no object (ENOENT);
 *                                        at open: root_dir does not resolve to a DAOS container
 *   MC_ERR_FILE_OPEN_FAIL (-1101)        root_dir unusable (a component is not a directory,
 *                                        ENOTDIR/EEXIST/ENAMETOOLONG/ELOOP) or an object cannot
 *                                        be opened/created for another reason
 *   MC_ERR_FILE_READ_FAIL (-1102)        read I/O error (EIO, ...) or a short read (the file
 *                                        ends before header + value)
 *   MC_ERR_FILE_WRITE_FAIL (-1103)       write/fsync/rename I/O error (EIO, ...)
 *   MC_ERR_FILE_INVALID_BUFFER (-1104)   read: the stored value size differs from `size`
 *   MC_ERR_CHECKSUM_MISMATCH (-801)      the header or the value fails its CRC32C, the magic or
 *                                        version is wrong, or the header names another key
 *   MC_ERR_DFS_NETWORK_TIMEOUT (-1600)   ETIMEDOUT (DER_TIMEDOUT); daos: the operation's
 *                                        deadline (read_timeout_ms / write_timeout_ms) passed
 *                                        with DAOS not answering: its transfers were aborted
 *                                        (nothing of them lands in or reads from the caller's
 *                                        buffer after the return) and the call returned
 *   MC_ERR_DFS_SERVICE_UNAVAILABLE (-1601) the storage service is unreachable (EHOSTUNREACH,
 *                                        ENETUNREACH, ECONNREFUSED, ENOTCONN, ESHUTDOWN, EAGAIN
 *                                        from the DAOS client, DER_UNREACH, no daos_agent);
 *                                        daos: "wedged" — a DAOS call passed its deadline and
 *                                        none has answered since: new operations fail at once
 *                                        instead of queueing behind the stuck ones (one probe
 *                                        per second is let through; an answer ends the state)
 *   MC_ERR_DFS_QUOTA_EXCEEDED (-1602)    ENOSPC, EDQUOT (DER_NOSPACE)
 *   MC_ERR_DFS_PERMISSION_DENIED (-1603) EACCES, EPERM, EROFS (DER_NO_PERM)
 *   MC_ERR_DFS_STALE_HANDLE (-1604)      ESTALE (DER_STALE, DER_NO_HDL)
 *   MC_ERR_DFS_PARTIAL_WRITE (-1605)     a write call stored fewer bytes than asked
 *   MC_ERR_INTERNAL_ERROR (-1)           out of memory, or an unexpected library state
 */
#ifndef MOONCAKE_FS_ADAPTER_H
#define MOONCAKE_FS_ADAPTER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest key in bytes (the header stores the key; upstream keys are far shorter). */
#define MC_FS_KEY_MAX 4096
/* Escaped names longer than this are shortened with a hash (NAME_MAX is 255). */
#define MC_FS_NAME_MAX_ESCAPED 200
/* Largest accepted transfer / chunk size and iovcnt. */
#define MC_FS_XFER_MAX (UINT64_C(1) << 32)
#define MC_FS_IOVCNT_MAX 1024

/* Defaults of mc_fs_config_init(), the guide's MOONCAKE_DISTRIBUTED_* defaults. */
#define MC_FS_DEFAULT_WRITE_XFER 0                  /* unsplit writes */
#define MC_FS_DEFAULT_READ_XFER (UINT64_C(8) << 20) /* 8 MiB */
#define MC_FS_DEFAULT_CHUNK (UINT64_C(8) << 20)     /* 8 MiB */
#define MC_FS_DEFAULT_TIMEOUT_MS 30000              /* daos: per-operation deadline */

typedef struct mc_fs_config {
    const char *fs_type;       /* "posix" or "daos" */
    const char *root_dir;      /* absolute path; created (with parents) when missing */
    uint64_t write_xfer_size;  /* bytes per write call (dfs_write / pwritev); 0 = unsplit */
    uint64_t read_xfer_size;   /* bytes per read call (dfs_read / preadv); 0 = unsplit */
    uint64_t chunk_size;       /* daos: chunk size of created files, 0 = container default;
                                  posix: ignored */
    const char *oclass;        /* daos: object class name of created files ("S1", "SX",
                                  "EC_4P1GX", ...), NULL or "" = container default; posix: ignored */
    unsigned iovcnt;           /* scatter-gather pieces per transfer (0 or 1 = one piece) */
    size_t alignment;          /* bytes; alignment of the adapter's own buffers (header staging),
                                  0 = page size; must be 0 or a power of two */
    unsigned io_threads;       /* threads expected to call concurrently; daos: event queues
                                  created, at most 64 (0 = 8) */
    uint32_t read_timeout_ms;  /* daos: deadline of one read or stat (open, transfers, size) and
                                  of each directory listing call; 0 = MC_FS_DEFAULT_TIMEOUT_MS;
                                  posix: ignored */
    uint32_t write_timeout_ms; /* daos: deadline of one write (create, transfers, publish) or
                                  remove, of each call of the adapter's open, and of its close; 0 =
                                  MC_FS_DEFAULT_TIMEOUT_MS; posix: ignored */
} mc_fs_config_t;

typedef struct mc_fs_adapter mc_fs_adapter_t;

/* Fills `cfg` with the defaults above (fs_type "posix", root_dir NULL). */
void mc_fs_config_init(mc_fs_config_t *cfg);

/* 1 when this binary can open fs type `fs_type` ("posix" always; "daos" with -DUSE_DAOS=ON). */
int mc_fs_type_supported(const char *fs_type);

/*
 * Opens an adapter on cfg->root_dir: validates the config, creates root_dir and its 256 hash
 * directories when missing, and (daos) resolves and connects to the container. On failure
 * *out is NULL and one ERROR line says why (e.g. "fs type daos is not built into this binary
 * (rebuild with -DUSE_DAOS=ON)").
 */
int mc_fs_adapter_open(const mc_fs_config_t *cfg, mc_fs_adapter_t **out);

/* Releases everything (daos: the last adapter of the process disconnects). NULL is a no-op. */
void mc_fs_adapter_close(mc_fs_adapter_t *a);

/* "posix" or "daos". */
const char *mc_fs_adapter_type(const mc_fs_adapter_t *a);

/*
 * What an adapter counted about its storage not answering. daos: counts of the whole process
 * (one DAOS client serves every adapter of a process, and a dead engine stalls them all);
 * posix: all 0. Thread-safe; a snapshot.
 */
typedef struct mc_fs_health_stats {
    uint64_t timeouts;      /* operations that passed their deadline (MC_ERR_DFS_NETWORK_TIMEOUT) */
    uint64_t fast_failures; /* operations refused at once while wedged */
    uint64_t stuck_calls;   /* DAOS calls given up at their deadline that have not returned yet */
    int wedged;             /* 1 while wedged (see MC_ERR_DFS_SERVICE_UNAVAILABLE above) */
} mc_fs_health_stats_t;
void mc_fs_adapter_health(const mc_fs_adapter_t *a, mc_fs_health_stats_t *out);

/*
 * Stores `size` bytes under `key`, replacing any previous object of that key atomically.
 * `value` may be NULL only when size is 0. Returns when the object is published and durable
 * (posix: data fsynced before the rename, the directory fsynced after it).
 */
int mc_fs_write(mc_fs_adapter_t *a, const char *key, const void *value, uint64_t size);

/*
 * Reads the value of `key` into buf[0..size), where `size` is the value's exact size (from the
 * replica descriptor or mc_fs_stat). Verifies magic, version, key and both checksums.
 * Returns 0, MC_ERR_FILE_NOT_FOUND, MC_ERR_FILE_INVALID_BUFFER (stored size differs; nothing
 * useful in buf), MC_ERR_CHECKSUM_MISMATCH, or an I/O code. On error buf's content is undefined.
 */
int mc_fs_read(mc_fs_adapter_t *a, const char *key, void *buf, uint64_t size);

/* The value size of `key` (reads and verifies the header). */
int mc_fs_stat(mc_fs_adapter_t *a, const char *key, uint64_t *size);

/* Deletes the object of `key` (posix: the directory is fsynced after the unlink).
 * MC_ERR_FILE_NOT_FOUND when there is none. */
int mc_fs_remove(mc_fs_adapter_t *a, const char *key);

/*
 * Calls cb(key, value_size, arg) once per stored object (restart recovery), in no particular
 * order; objects written or removed during the listing may or may not be reported. A non-zero
 * return from cb stops the listing and is returned. Files that are not valid objects are
 * skipped with a WARNING. `key` is valid only during the call.
 */
typedef int (*mc_fs_list_cb)(const char *key, uint64_t value_size, void *arg);
int mc_fs_list(mc_fs_adapter_t *a, mc_fs_list_cb cb, void *arg);

/*
 * mc_fs_list with what each object's header says: its key, value size and the CRC32C of its
 * value (the value itself is not read). The cost is one directory listing plus one small read
 * (the header) per object; no stat.
 */
typedef struct mc_fs_object_info {
    const char *key; /* valid only during the callback */
    uint64_t value_size;
    uint32_t value_crc;
} mc_fs_object_info_t;
typedef int (*mc_fs_scan_cb)(const mc_fs_object_info_t *obj, void *arg);
int mc_fs_scan(mc_fs_adapter_t *a, mc_fs_scan_cb cb, void *arg);

/*
 * Deletes what writers that died mid-write left behind: temporary files (and health-check probe
 * objects) in every hash directory and in <root>/.probe, judged from their names alone (one
 * listing, no stat). A temporary's name carries its writer's host (machine, boot and pid
 * namespace), pid and creation time; it is deleted when that writer is certainly gone — on this
 * host: the pid is not running, or runs a process started after the temporary was made; from
 * another host: the temporary is older than MC_FS_TEMP_FOREIGN_AGE_S. A temporary a live writer
 * is still writing is never deleted. Temporaries of another name format are left alone.
 * *removed / *kept (either may be NULL) get the counts.
 */
#define MC_FS_TEMP_FOREIGN_AGE_S (24 * 3600)
int mc_fs_clean_temps(mc_fs_adapter_t *a, uint64_t *removed, uint64_t *kept);

/*
 * Proves the backend works: writes a probe object (4 KiB, unique per call) under <root>/.probe,
 * reads it back, compares, and deletes it. Returns 0 or the failing step's code.
 */
int mc_fs_health_check(mc_fs_adapter_t *a);

#ifdef __cplusplus
}
#endif
#endif /* MOONCAKE_FS_ADAPTER_H */
