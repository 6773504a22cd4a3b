"""Stopping a process for a test, and knowing it is stopped.

os.kill(pid, SIGSTOP) returns before the target's threads have stopped (a worker thread was seen
running 8.7 ms after it), so a test that acts on "stopped" right after it may be acting on a
process still serving. freeze() sends SIGSTOP and returns only once every thread of pid is in
state T in /proc/PID/task/TID/stat; it raises when the process died or did not stop in time, so
the test fails instead of passing without a stopped peer. The Python twin of tests/support/proc.h
(mc_proc_freeze, mc_proc_is_frozen, mc_proc_thaw).
"""
import os
import signal
import time


def _state(pid, tid):
    """The state letter of one thread: the field after the ")" closing the command name (which
    may itself hold spaces or parentheses); None when the thread is gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    rp = stat.rfind(b")")
    return chr(stat[rp + 2]) if rp >= 0 and len(stat) > rp + 2 else None


def is_frozen(pid):
    """True when every thread of pid is stopped (T) now, False when one runs; raises
    ProcessLookupError when pid is gone or a zombie."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        raise ProcessLookupError(f"process {pid} is gone") from None
    states = {tid: _state(pid, tid) for tid in tids}
    states = {tid: s for tid, s in states.items() if s not in (None, "X")}
    live = [s for tid, s in states.items() if s != "Z"]
    if not live:
        raise ProcessLookupError(f"process {pid} is gone")
    return all(s == "T" for s in live)


def freeze(pid, timeout=5.0):
    """SIGSTOP pid and wait until every thread is stopped; raises ProcessLookupError when it
    died, TimeoutError when it did not stop within timeout seconds."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while not is_frozen(pid):
        if time.monotonic() > deadline:
            raise TimeoutError(f"process {pid} did not stop within {timeout} s")
        time.sleep(0.001)


def thaw(pid):
    """Resume a process stopped by freeze (SIGCONT)."""
    os.kill(pid, signal.SIGCONT)
