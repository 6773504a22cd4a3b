/*
 * offload_backend.h — the offload backend layer: where a client's disk replicas live, behind one
 * interface with two implementations on the FS adapter (include/mooncake/fs_adapter.h):
 *
 *   local        files under MOONCAKE_OFFLOAD_FILE_STORAGE_PATH through the posix adapter; only
 *                this client reads them directly (others ask it, offload_server.h). Restart
 *                recovery rescans them.
 *   distributed  files under MOONCAKE_DISTRIBUTED_ROOT_DIR through the adapter of
 *                MOONCAKE_DISTRIBUTED_FS_TYPE (posix on any shared mount, or daos); every client
 *                of the cluster reads them directly.
 *
 * A disk replica is the object (key, version): it is stored as the adapter object named
 * "<16 lowercase hex digits of version>/<key>", so two incarnations of one key never share a file
 * and a reader never confuses them. Keys up to MC_OFFLOAD_KEY_MAX bytes can be offloaded.
 *
 * The distributed root carries a cluster marker (the adapter object "mooncake.cluster", which no
 * version-named object can collide with): a cluster id and the fs type, written by the first
 * client that uses the root and checked by every later one. Its id is what the master compares
 * to tell that two clients mount the same storage (paths may differ between hosts). A local
 * directory has one too: its id names that disk to the master across its client's restarts.
 *
 * Thread-safety: every call but close may run concurrently. Ownership: the backend copies what
 * it needs from the env at open.
 */
#ifndef MC_CLIENT_OFFLOAD_BACKEND_H
#define MC_CLIENT_OFFLOAD_BACKEND_H

#include "mooncake/fs_adapter.h"
#include "offload_config.h"

#include <stddef.h>
#include <stdint.h>

#define MC_OFFLOAD_KEY_MAX (4096 - 17)
#define MC_OFFLOAD_FILE_KEY_MAX (MC_OFFLOAD_KEY_MAX + 17)

typedef struct mc_offload_backend mc_offload_backend_t;

/*
 * Opens `kind` (MC_OFFLOAD_LOCAL on `local_dir`, MC_OFFLOAD_DISTRIBUTED on env->root_dir) and,
 * for distributed, reads or creates the cluster marker. With env->health_check the backend is
 * probed once. Returns 0, or an error code with one sentence in err.
 */
int mc_offload_backend_open(const mc_offload_env_t *env, int kind, const char *local_dir,
                            mc_offload_backend_t **out, char *err, size_t errlen);
void mc_offload_backend_close(mc_offload_backend_t *b);

int mc_offload_backend_kind(const mc_offload_backend_t *b);
const char *mc_offload_backend_fs_type(const mc_offload_backend_t *b);
/* The id in the storage's marker: distributed, the cluster id every client of the root shares;
 * local, the id of this directory (it outlives the client's restarts). */
const char *mc_offload_backend_storage_id(const mc_offload_backend_t *b);
/* The directory the backend stores under. */
const char *mc_offload_backend_root(const mc_offload_backend_t *b);

/* Writes "<version>/<key>" into out (cap bytes); MC_ERR_INVALID_KEY when it does not fit. */
int mc_offload_file_key(const char *key, uint64_t version, char *out, size_t cap);

/* Stores the value of (key, version), published atomically. */
int mc_offload_backend_write(mc_offload_backend_t *b, const char *key, uint64_t version,
                             const void *value, uint64_t size);
/* Reads it back, verifying the checksums: 0, MC_ERR_FILE_NOT_FOUND, MC_ERR_CHECKSUM_MISMATCH,
 * MC_ERR_FILE_INVALID_BUFFER (another size), or an I/O code. */
int mc_offload_backend_read(mc_offload_backend_t *b, const char *key, uint64_t version, void *buf,
                            uint64_t size);
int mc_offload_backend_remove(mc_offload_backend_t *b, const char *key, uint64_t version);
/*
 * Every stored disk replica (restart recovery), with the CRC32C of its value from the file's
 * header; other objects (the marker) are skipped. One listing and one header read per file.
 */
typedef int (*mc_offload_scan_cb)(const char *key, uint64_t version, uint64_t size, uint32_t crc,
                                  void *arg);
int mc_offload_backend_scan(mc_offload_backend_t *b, mc_offload_scan_cb cb, void *arg);
/*
 * Deletes the temporary files writers that died mid-write left in the storage (never a live
 * writer's: mc_fs_clean_temps). One listing of names; failures are logged. Offloaders call it at
 * start, readers do not (they write nothing, and there may be many).
 */
void mc_offload_backend_clean_temps(mc_offload_backend_t *b);
/* Write, read back and delete a probe object: 0 when the backend works. */
int mc_offload_backend_health(mc_offload_backend_t *b);
/* The adapter's counts of the storage not answering (mc_fs_adapter_health). */
void mc_offload_backend_health_stats(const mc_offload_backend_t *b, mc_fs_health_stats_t *out);
/* 1 for the codes that say the storage did not answer (a deadline, wedged): not the object's
 * fault, and nothing to retry before the storage answers again. */
int mc_offload_storage_unavailable(int code);

#endif /* MC_CLIENT_OFFLOAD_BACKEND_H */
