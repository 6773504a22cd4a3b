#!/usr/bin/env python3
"""drop_page_cache.py — drops the page cache of every regular file under the given directories.

Used by bench/fio_compare.sh between a write phase and a read phase, so that both the
benchmark and fio read from the device, not from memory: each file is fsynced (dirty pages
cannot be dropped) and then posix_fadvise(POSIX_FADV_DONTNEED) is called on its whole range.
Prints the number of files and bytes dropped.

    python3 bench/drop_page_cache.py DIR [DIR...]
"""
import os
import sys


def drop(path):
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def main(dirs):
    files = size = 0
    for top in dirs:
        for root, _, names in os.walk(top):
            for name in names:
                p = os.path.join(root, name)
                if os.path.isfile(p) and not os.path.islink(p):
                    size += drop(p)
                    files += 1
    print(f"drop_page_cache: {files} files, {size / 2**20:.1f} MiB dropped from the page cache")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: drop_page_cache.py DIR [DIR...]")
    main(sys.argv[1:])
