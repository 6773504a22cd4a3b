#!/usr/bin/env python3
"""mooncake.cli_bench — upstream's console-script shim for `transfer_engine_bench`.

`python -m mooncake.cli_bench ARGS...` finds the installed `transfer_engine_bench` (mooncake._binaries.find:
MOONCAKE_BIN_DIR, the package directory, <prefix>/bin, the build tree, then PATH) and
runs it as a child and returns its exit status (subprocess.call, as upstream), passing every argument through. Exits 127 with one line on stderr when the program is
not installed.
"""
import sys

from mooncake import _binaries


def main(argv=None):
    return _binaries.run("transfer_engine_bench", argv, exec_=False)


if __name__ == "__main__":
    sys.exit(main())
