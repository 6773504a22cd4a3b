#!/usr/bin/env python3
"""mooncake.cli_bench — upstream's console-script shim for `transfer_engine_bench`.

`python -m mooncake.cli_bench ARGS...` finds the installed `transfer_engine_bench`
(mooncake._binaries.find:
MOONCAKE_BIN_DIR, the package directory, <prefix>/bin, the build tree, then PATH) and
runs it as a child and returns its exit status (subprocess.call, as upstream),
passing every argument through. Exits 127 with one line on stderr when the program is not
installed.
"""
import subprocess
import sys

from mooncake import _binaries


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        path = _binaries.find("transfer_engine_bench")
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 127
    return subprocess.call([path] + argv)


if __name__ == "__main__":
    sys.exit(main())
