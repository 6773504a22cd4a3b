"""test_prefault.py — segment memory pre-faulted after start-up (src/client/prefault.h).

Against a real mooncake_master and mooncake_client processes on loopback, each client started
with its own MC_SEGMENT_PREFAULT* environment; a store client in this process (no segment of
its own) puts and gets through the mooncake_client's segment over shared memory, i.e. a peer
process writing the pages the pass is faulting. The client's log lines ("segment pre-fault
progress/done/stopped ...") and its RssShmem (/proc/PID/status: the segment pages mapped in
its own page tables, which only its pre-fault pass touches) tell the pass's state; tests wait
for states, never for time.
"""
import os
import random
import re
import signal
import subprocess
import tempfile
import time
import unittest

from test_store import BUILD, die_with_parent, free_port, wait_port

import mooncake.store as mcs

MiB = 1 << 20
INVALID_PARAMS = -600
WAIT_S = 120.0  # upper bound of any state wait (a loaded 2-vCPU VM)
SANITIZER = re.compile(r"ERROR: (Address|Leak)Sanitizer|runtime error:")


def memory_cgroup_dir():
    """This process's memory cgroup directory when a child may be made there (root, cgroup v1
    or v2 with the memory controller), else None."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[1] == "memory":
            d = "/sys/fs/cgroup/memory" + parts[2]
            if os.access(d, os.W_OK) and os.path.exists(os.path.join(d, "memory.limit_in_bytes")):
                return d, "memory.limit_in_bytes"
    for line in lines:
        if line.startswith("0::"):
            d = "/sys/fs/cgroup" + line[3:]
            try:
                with open(os.path.join(d, "cgroup.subtree_control")) as f:
                    if "memory" in f.read().split() and os.access(d, os.W_OK):
                        return d, "memory.max"
            except OSError:
                pass
    return None


def rss_shmem(pid):
    """Bytes of shared memory mapped in pid's page tables."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssShmem:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no RssShmem in /proc/PID/status")


class Master:
    def __init__(self, logdir):
        self.port = free_port()
        self.addr = f"127.0.0.1:{self.port}"
        self.log = open(os.path.join(logdir, "master.log"), "wb")
        self.proc = subprocess.Popen(
            [os.path.join(BUILD, "tools", "mooncake_master"), f"--rpc_port={self.port}",
             f"--metrics_port={free_port()}", "--rpc_address=127.0.0.1",
             "--metrics_host=127.0.0.1"],
            stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent)
        wait_port(self.port, self.proc)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
        self.log.close()


class Client:
    """A mooncake_client with a segment of `size` bytes and the given MC_SEGMENT_PREFAULT* env."""

    def __init__(self, master, logdir, size, env, name="client", extra=()):
        self.path = os.path.join(logdir, name + ".log")
        self.log = open(self.path, "wb")
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("MC_SEGMENT_")}
        full_env.update(env)
        self.proc = subprocess.Popen(
            [os.path.join(BUILD, "tools", "mooncake_client"), f"--global_segment_size={size}",
             "--host=127.0.0.1", f"--port={free_port()}", "--metadata_server=P2PHANDSHAKE",
             f"--master_server_address={master.addr}", *extra],
            stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL, env=full_env,
            preexec_fn=die_with_parent)

    def text(self):
        with open(self.path, "rb") as f:
            return f.read().decode(errors="replace")

    def wait_log(self, pattern, timeout=WAIT_S):
        """Waits until the log has a line matching pattern; returns the match."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = re.search(pattern, self.text())
            if m:
                return m
            if self.proc.poll() is not None:
                break
            time.sleep(0.02)
        raise AssertionError(f"no /{pattern}/ in the client log (exit {self.proc.poll()}):\n"
                             + self.text()[-3000:])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=60)
        self.log.close()
        return rc


class PrefaultTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="mc_prefault_")
        self.master = Master(self.dir.name)
        self.clients = []
        self.stores = []

    def tearDown(self):
        for s in self.stores:
            s.close()
        for c in self.clients:
            if c.proc.poll() is None:
                c.stop()
        self.master.stop()
        self.dir.cleanup()

    def client(self, size, env, **kw):
        c = Client(self.master, self.dir.name, size, env, **kw)
        self.clients.append(c)
        return c

    def store(self, segment=0, buffer=64 * MiB):
        s = mcs.MooncakeDistributedStore()
        rc = s.setup("127.0.0.1", "P2PHANDSHAKE", segment, buffer, "tcp", "", self.master.addr)
        self.assertEqual(rc, 0)
        self.stores.append(s)
        return s

    def assert_clean_exit(self, c):
        self.assertEqual(c.stop(), 0, c.text()[-3000:])
        self.assertIsNone(SANITIZER.search(c.text()), c.text()[-3000:])

    def puts_during_pass(self, method):
        """Objects written while the pass runs over the same pages read back exactly, during
        and after the pass."""
        size = 256 * MiB
        c = self.client(size, {"MC_SEGMENT_PREFAULT_METHOD": method,
                               # slow (32 s) so that puts land ahead of the pass
                               "MC_SEGMENT_PREFAULT_RATE": "8 MiB"})
        c.wait_log(r"mooncake_client ready")
        s = self.store()
        rnd = random.Random(16)
        values = {}
        for i in range(160):  # 160 MiB of the 256 MiB segment
            key = f"prefault/{method}/{i}"
            v = rnd.randbytes(MiB)
            self.assertEqual(s.put(key, v), 0, key)
            values[key] = v
            probe = rnd.choice(list(values))
            self.assertEqual(s.get(probe), values[probe], probe)
            if i == 31:  # these puts overlapped the pass: it had not finished when they did
                self.assertNotIn("segment pre-fault done", c.text())
                self.assertLess(rss_shmem(c.proc.pid), size)
        c.wait_log(r"segment pre-fault done: 256\.0 MiB of 256\.0 MiB")
        for key, v in values.items():
            self.assertEqual(s.get(key), v, key)
        self.assert_clean_exit(c)

    def test_puts_during_populate_pass_read_back_exactly(self):
        self.puts_during_pass("populate")

    def test_puts_during_touch_pass_read_back_exactly(self):
        self.puts_during_pass("touch")

    def test_sigterm_while_prefaulting_exits_cleanly(self):
        for method in ("populate", "touch"):
            c = self.client(1024 * MiB, {"MC_SEGMENT_PREFAULT_METHOD": method,
                                         "MC_SEGMENT_PREFAULT_RATE": "64 MiB"},
                            name=f"client_{method}")
            c.wait_log(r"mooncake_client ready")
            c.wait_log(r"segment pre-fault progress")  # under way
            self.assert_clean_exit(c)
            self.assertRegex(c.text(), r"segment pre-fault stopped at close")
            self.assertNotIn("segment pre-fault done", c.text())

    def test_close_while_prefaulting_in_process(self):
        os.environ["MC_SEGMENT_PREFAULT_RATE"] = "64 MiB"
        try:
            s = mcs.MooncakeDistributedStore()
            rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 1024 * MiB, 16 * MiB, "tcp", "",
                         self.master.addr)
        finally:
            del os.environ["MC_SEGMENT_PREFAULT_RATE"]
        self.assertEqual(rc, 0)
        self.assertEqual(s.put("prefault/inproc", b"x" * MiB), 0)
        self.assertEqual(s.get("prefault/inproc"), b"x" * MiB)
        self.assertEqual(s.close(), 0)  # joins the pass before unmapping its memory

    def test_floor_stops_the_pass(self):
        # A floor above any MemAvailable (a floor just under today's MemAvailable is not
        # deterministic here: other processes on the machine free and take memory meanwhile).
        size = 2048 * MiB
        c = self.client(size, {}, extra=["--segment_prefault_floor=1TiB"])
        c.wait_log(r"mooncake_client ready")
        c.wait_log(r"segment pre-fault (done|stopped[^:]*):")  # the pass ended
        self.assertRegex(c.text(), r"segment pre-fault stopped at the free-memory floor: "
                                   r"MemAvailable .*, floor 1\.0 TiB")
        self.assertRegex(c.text(), r"segment pre-fault stopped at the floor: 0 B of 2\.0 GiB")
        self.assertLess(rss_shmem(c.proc.pid), 64 * MiB)
        s = self.store()  # still serves: the rest faults on first use
        self.assertEqual(s.put("prefault/floor", b"y" * MiB), 0)
        self.assertEqual(s.get("prefault/floor"), b"y" * MiB)
        self.assert_clean_exit(c)

    def test_sync_mode_commits_before_ready(self):
        size = 256 * MiB
        c = self.client(size, {}, extra=["--segment_prefault=sync"])
        c.wait_log(r"mooncake_client ready")
        text = c.text()
        self.assertLess(text.index("segment pre-fault done"), text.index("mooncake_client ready"))
        self.assertGreaterEqual(rss_shmem(c.proc.pid), size)
        self.assert_clean_exit(c)

    def test_sigterm_during_a_sync_pass_ends_the_process_at_once(self):
        # A sync pass runs inside setup (before the segment is mounted); a signal then must not
        # wait for the whole pass (32 s here at the capped rate).
        c = self.client(1024 * MiB, {"MC_SEGMENT_PREFAULT_RATE": "32 MiB"},
                        extra=["--segment_prefault=sync"])
        c.wait_log(r"segment pre-fault: synchronously")
        start = time.monotonic()
        c.proc.send_signal(signal.SIGTERM)
        rc = c.proc.wait(timeout=60)
        self.assertLess(time.monotonic() - start, 10)  # the pass alone would take ~30 s more
        self.assertEqual(rc, 1)
        self.assertIn("during setup: exiting before serving", c.text())
        self.assertNotIn("mooncake_client ready", c.text())

    def test_the_floor_counts_a_memory_cgroup_limit(self):
        # A 1 GiB segment in a 512 MiB cgroup: the pass must stop at the floor under the
        # cgroup's limit (before this, it read only the host's MemAvailable and the OOM killer
        # ended the client).
        found = memory_cgroup_dir()
        if not found:
            self.skipTest("no writable memory cgroup here (needs root and the memory controller)")
        parent, limit_file = found
        cg = os.path.join(parent, f"mc_prefault_{os.getpid()}")
        os.mkdir(cg)
        try:
            with open(os.path.join(cg, limit_file), "w") as f:
                f.write(str(512 * MiB))
            procs = os.path.join(cg, "cgroup.procs")

            def join_cgroup():
                die_with_parent()
                with open(procs, "w") as f:
                    f.write(str(os.getpid()))

            log = os.path.join(self.dir.name, "cg.log")
            with open(log, "wb") as out:
                proc = subprocess.Popen(
                    [os.path.join(BUILD, "tools", "mooncake_client"), "--global_segment_size=1GiB",
                     "--host=127.0.0.1", f"--port={free_port()}", "--metadata_server=P2PHANDSHAKE",
                     f"--master_server_address={self.master.addr}",
                     "--segment_prefault_floor=64MiB"],
                    stdout=out, stderr=out, stdin=subprocess.DEVNULL, preexec_fn=join_cgroup,
                    env={k: v for k, v in os.environ.items() if not k.startswith("MC_SEGMENT_")})
            try:
                deadline = time.monotonic() + WAIT_S
                text = ""
                while time.monotonic() < deadline and proc.poll() is None:
                    with open(log, "rb") as f:
                        text = f.read().decode(errors="replace")
                    if re.search(r"segment pre-fault (done|stopped at the floor)", text):
                        break
                    time.sleep(0.05)
                self.assertIsNone(proc.poll(), "the client died (OOM?):\n" + text[-2000:])
                self.assertRegex(text, r"segment pre-fault stopped at the floor")
            finally:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                self.assertEqual(proc.wait(timeout=60), 0)
        finally:
            for _ in range(100):  # the cgroup empties once its process is reaped
                try:
                    os.rmdir(cg)
                    break
                except OSError:
                    time.sleep(0.05)

    def test_off_leaves_pages_to_first_use(self):
        size = 256 * MiB
        c = self.client(size, {"MC_SEGMENT_PREFAULT": "off"})
        c.wait_log(r"mooncake_client ready")
        self.assertNotIn("segment pre-fault", c.text())
        self.assertLess(rss_shmem(c.proc.pid), 8 * MiB)
        self.assert_clean_exit(c)

    def test_bad_settings_refused(self):
        c = self.client(64 * MiB, {"MC_SEGMENT_PREFAULT": "sometimes"}, name="bad_mode")
        self.assertNotEqual(c.proc.wait(timeout=60), 0)
        self.assertIn('MC_SEGMENT_PREFAULT="sometimes"', c.text())
        c = self.client(64 * MiB, {"MC_SEGMENT_PREFAULT_FLOOR": "lots"}, name="bad_floor")
        self.assertNotEqual(c.proc.wait(timeout=60), 0)
        self.assertIn('MC_SEGMENT_PREFAULT_FLOOR="lots"', c.text())
        os.environ["MC_SEGMENT_PREFAULT_METHOD"] = "scribble"
        try:
            s = mcs.MooncakeDistributedStore()
            rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 64 * MiB, 0, "tcp", "", self.master.addr)
        finally:
            del os.environ["MC_SEGMENT_PREFAULT_METHOD"]
        self.assertEqual(rc, INVALID_PARAMS)


if __name__ == "__main__":
    unittest.main()
