#!/usr/bin/env python3
"""mooncake.cli_client — upstream's console-script shim for `mooncake_client`.

`python -m mooncake.cli_client ARGS...` finds the installed `mooncake_client` (mooncake._binaries.find:
MOONCAKE_BIN_DIR, the package directory, <prefix>/bin, the build tree, then PATH) and
replaces this process with it (os.execv, as upstream: same PID), passing every argument through. Exits 127 with one line on stderr when the program is
not installed.
"""
import sys

from mooncake import _binaries


def main(argv=None):
    return _binaries.run("mooncake_client", argv, exec_=True)


if __name__ == "__main__":
    sys.exit(main())
