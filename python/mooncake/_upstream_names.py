"""mooncake._upstream_names — module-level names upstream's ``mooncake.store`` has beyond the
store classes, for ``mooncake.store`` to re-export (``from mooncake._upstream_names import *``).

    TaskType    REPLICA_COPY 0, REPLICA_MOVE 1            (upstream task_manager.h)
    TaskStatus  PENDING 0, PROCESSING 1, FAILED 2, SUCCESS 3
    bind_to_numa_node(node: int) -> None

The enums carry upstream's values; this build has no copy/move tasks yet (create_copy_task,
create_move_task and query_task are absent), so nothing returns them today.

bind_to_numa_node matches upstream (store_py.cpp, libnuma's numa_run_on_node +
numa_set_preferred): it runs the calling thread on the CPUs of NUMA node `node` and makes that
node the preferred one for the thread's future memory allocations (set_mempolicy
MPOL_PREFERRED; other nodes remain a fallback). Like upstream it never raises for a bad node or
a machine without NUMA: it logs a warning and changes nothing it could not apply. Reads
/sys/devices/system/node; Linux only (x86_64 and aarch64 for the memory policy).
"""
import ctypes
import enum
import logging
import os
import platform

__all__ = ["TaskType", "TaskStatus", "bind_to_numa_node"]

logger = logging.getLogger("mooncake.store")

_NODE_DIR = "/sys/devices/system/node"
_MPOL_PREFERRED = 1
_SYS_SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237}


class TaskType(enum.IntEnum):
    REPLICA_COPY = 0
    REPLICA_MOVE = 1


class TaskStatus(enum.IntEnum):
    PENDING = 0
    PROCESSING = 1
    FAILED = 2
    SUCCESS = 3


def _cpulist(text):
    """CPUs of a sysfs list such as "0-3,8,10-11"."""
    cpus = set()
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


def _set_preferred(node):
    number = _SYS_SET_MEMPOLICY.get(platform.machine())
    if number is None:
        logger.warning("bind_to_numa_node: memory policy not supported on %s; CPU binding only",
                       platform.machine())
        return
    words = node // 64 + 1
    mask = (ctypes.c_ulong * words)()
    mask[node // 64] = 1 << (node % 64)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(ctypes.c_long(number), ctypes.c_int(_MPOL_PREFERRED), mask,
                    ctypes.c_ulong(words * 64 + 1)) != 0:
        logger.warning("bind_to_numa_node: set_mempolicy for node %d failed: %s", node,
                       os.strerror(ctypes.get_errno()))


def bind_to_numa_node(node):
    """Runs the calling thread on NUMA node `node` and prefers its memory (see the module
    docstring). TypeError when node is not an int; otherwise never raises."""
    if not isinstance(node, int) or isinstance(node, bool):
        raise TypeError(f"node must be an int, not {type(node).__name__}")
    if not os.path.isdir(_NODE_DIR):
        logger.warning("NUMA is not available on this system; binding skipped")
        return
    try:
        with open(os.path.join(_NODE_DIR, f"node{node}", "cpulist")) as f:
            cpus = _cpulist(f.read())
    except (OSError, ValueError):
        cpus = None
    if node < 0 or not cpus:
        logger.warning("Invalid NUMA node: %d; binding skipped", node)
        return
    try:
        os.sched_setaffinity(0, cpus)  # pid 0: the calling thread
    except OSError as e:
        logger.warning("bind_to_numa_node: running on node %d failed: %s", node, e)
    _set_preferred(node)
