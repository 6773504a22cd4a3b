/*
 * fs_common.c — what every FS adapter shares (fs_adapter_internal.h): temporary names unique
 * across processes and hosts, the host identity they carry, and the errno-to-store-code mapping
 * common to all filesystems. Thread-safe.
 */
#include "fs_adapter_internal.h"

#include "mooncake/errors.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

/* ---- temporary names ---------------------------------------------------------------------- */

/* This process's host identity (object_layout.h, mc_obj_temp_id_t), computed once. */
static uint32_t host_id;
static atomic_uint unique_counter;
static pthread_once_t unique_once = PTHREAD_ONCE_INIT;

/* Appends the first line of file `path` (or nothing) to the hash state. */
static void hash_file_line(XXH32_state_t *st, const char *path)
{
    char buf[256] = "";
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(buf, sizeof(buf), f))
            buf[0] = '\0';
        fclose(f);
    }
    XXH32_update(st, buf, strlen(buf) + 1);
}

/*
 * The machine id, the boot id and the pid namespace: two processes with the same value can
 * check each other's pid in /proc. A machine without /etc/machine-id uses its host name.
 */
static void unique_init(void)
{
    XXH32_state_t *st = XXH32_createState();
    if (!st)
        return;
    XXH32_reset(st, 0x6d63u);
    if (access("/etc/machine-id", R_OK) == 0) {
        hash_file_line(st, "/etc/machine-id");
    } else {
        char host[256] = "";
        gethostname(host, sizeof(host) - 1);
        XXH32_update(st, host, strlen(host) + 1);
    }
    hash_file_line(st, "/proc/sys/kernel/random/boot_id");
    char ns[64] = "";
    ssize_t n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
    XXH32_update(st, ns, n > 0 ? (size_t)n : 0);
    host_id = XXH32_digest(st);
    XXH32_freeState(st);
}

int mc_fs_errno_code(int err, int other)
{
    switch (err) {
    case ENOENT:
        return MC_ERR_FILE_NOT_FOUND;
    case EACCES:
    case EPERM:
    case EROFS:
        return MC_ERR_DFS_PERMISSION_DENIED;
    case ENOSPC:
    case EDQUOT:
        return MC_ERR_DFS_QUOTA_EXCEEDED;
    case ETIMEDOUT:
        return MC_ERR_DFS_NETWORK_TIMEOUT;
    case EHOSTUNREACH:
    case ENETUNREACH:
    case ECONNREFUSED:
    case ENOTCONN:
    case ESHUTDOWN:
    case EHOSTDOWN:
        return MC_ERR_DFS_SERVICE_UNAVAILABLE;
    case ESTALE:
        return MC_ERR_DFS_STALE_HANDLE;
    default:
        return other;
    }
}

uint32_t mc_fs_host_id(void)
{
    pthread_once(&unique_once, unique_init);
    return host_id;
}

void mc_fs_temp_name(char *out)
{
    pthread_once(&unique_once, unique_init);
    mc_obj_temp_id_t id = {host_id, (uint32_t)getpid(), (uint32_t)time(NULL),
                           atomic_fetch_add(&unique_counter, 1)};
    mc_obj_temp_name(&id, out);
}
