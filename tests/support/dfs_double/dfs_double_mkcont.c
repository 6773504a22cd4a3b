/*
 * dfs_double_mkcont.c — TEST DOUBLE helper (stands in for `daos cont create --type=POSIX` plus a
 * dfuse mount, which CI cannot run): creates the container directory
 * $DFS_DOUBLE_ROOT/<pool>/<cont> of the libdfs test double (dfs_double.c) and marks <mount_dir>
 * (created when missing) as that container's root, the way dfuse shows it: the xattr
 * "user.daos" = "DAOS.POSIX://<pool>/<cont>". A filesystem without user xattrs cannot hold a
 * mount point (duns_resolve_path answers ENOTSUP there, as in DAOS): that is an error.
 *
 *   dfs_double_mkcont <mount_dir> <pool> <cont>
 */
#include <daos_uns.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

static int mkdir_p(const char *path)
{
    char buf[PATH_MAX];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char saved = *p;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) {
            fprintf(stderr, "dfs_double_mkcont: mkdir %s: %s\n", buf, strerror(errno));
            return -1;
        }
        if (saved == '\0')
            return 0;
        *p = saved;
    }
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: dfs_double_mkcont <mount_dir> <pool> <cont>\n");
        return 2;
    }
    const char *mount = argv[1], *pool = argv[2], *cont = argv[3];
    const char *root = getenv("DFS_DOUBLE_ROOT");
    if (!root || !*root)
        root = "/tmp/dfs_double";
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s/%s", root, pool, cont);
    if (mkdir_p(path) != 0 || mkdir_p(mount) != 0)
        return 1;
    char value[DUNS_MAX_XATTR_LEN + 1];
    snprintf(value, sizeof(value), "DAOS.POSIX://%s/%s", pool, cont);
    if (setxattr(mount, DUNS_XATTR_NAME, value, strlen(value), 0) != 0) {
        fprintf(stderr, "dfs_double_mkcont: cannot set %s on %s: %s\n", DUNS_XATTR_NAME, mount,
                strerror(errno));
        return 1;
    }
    return 0;
}
