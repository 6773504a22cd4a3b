"""mooncake._binaries — finds the mooncake-c programs the console-script shims run.

Upstream's wheel ships its binaries inside the package directory; mooncake-c installs them to
<prefix>/bin (CMAKE_INSTALL_PREFIX) and the package to <prefix>/lib/python/mooncake. A program
is looked for, in order: MOONCAKE_BIN_DIR (if set), the package directory (upstream's layout),
<prefix>/bin relative to the package, the build tree (<build>/tools next to <build>/python),
then PATH. Raises FileNotFoundError naming every place tried when none has it.
"""
import os
import shutil

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def candidates(name):
    """Where `name` is looked for, in order (without PATH)."""
    dirs = []
    env = os.environ.get("MOONCAKE_BIN_DIR")
    if env:
        dirs.append(env)
    dirs.append(_PACKAGE_DIR)
    dirs.append(os.path.normpath(os.path.join(_PACKAGE_DIR, "..", "..", "..", "bin")))
    dirs.append(os.path.normpath(os.path.join(_PACKAGE_DIR, "..", "..", "tools")))
    return [os.path.join(d, name) for d in dirs]


def find(name):
    """The path of program `name` (an executable file). FileNotFoundError when absent."""
    tried = candidates(name)
    for path in tried:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    on_path = shutil.which(name)
    if on_path:
        return on_path
    raise FileNotFoundError(
        f"{name}: program not found; looked in {', '.join(tried)} and on PATH. Install "
        f"mooncake-c (cmake --install <build>) or set MOONCAKE_BIN_DIR to the directory that "
        f"holds {name}.")


def run(name, argv=None, exec_=True):
    """Runs the installed program `name` with argv (default: sys.argv[1:]), as upstream's console
    scripts do: exec_=True replaces this process with it (os.execv: same PID, so callers can
    signal it; does not return), False runs it as a child and returns its exit status
    (subprocess.call). Returns 127 with one line on stderr when the program is not installed."""
    import subprocess
    import sys

    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        path = find(name)
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 127
    if exec_:
        os.execv(path, [path] + argv)
    return subprocess.call([path] + argv)
