#!/usr/bin/env python3
"""mooncake.cli — upstream's console-script shim for `mooncake_master`.

`python -m mooncake.cli ARGS...` finds the installed `mooncake_master` (mooncake._binaries.find:
MOONCAKE_BIN_DIR, the package directory, <prefix>/bin, the build tree, then PATH) and
replaces this process with it (os.execv, as upstream: same PID),
passing every argument through. Exits 127 with one line on stderr when the program is not
installed.
"""
import os
import sys

from mooncake import _binaries


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        path = _binaries.find("mooncake_master")
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 127
    # exec: the console script's PID becomes the program's, so callers can signal it
    os.execv(path, [path] + argv)


if __name__ == "__main__":
    sys.exit(main())
