"""test_tasks.py — replica copy/move tasks and batch_replica_clear against a real cluster.

setUpModule starts a mooncake_master (client TTL 2 s, lease 2 s, a pending-task bound of 3) and
five mooncake_client processes holding segments on loopback:
  SLOW  the source of most tasks; its task executor waits MC_TASK_EXECUTOR_DELAY_MS = 1500 ms
        after taking a task, so PROCESSING can be observed and a target killed mid-task;
  B, C  targets;
  KSRC  a source killed (SIGKILL) once its value was copied;
  KTGT  a target killed mid-task;
  KEXEC a slow source (and so executor) killed mid-task.
A pure Python client (no segment) writes the objects, placing them with preferred segments, and
creates and queries the tasks. Every wait polls a state with a deadline; nothing sleeps for time.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("MC_BUILD_DIR", os.path.join(REPO, "build"))
try:
    import mooncake.store as mcs
except ImportError:
    sys.path.insert(0, os.path.join(BUILD, "python"))
    import mooncake.store as mcs  # noqa: E402
import procstop  # noqa: E402  (tests/python, beside this file)

MiB = 1 << 20
INVALID_PARAMS = -600
OBJECT_NOT_FOUND = -704
TASK_NOT_FOUND = -1400
TASK_PENDING_LIMIT_EXCEEDED = -1401
NIL_ID = "00000000-0000-0000-0000-000000000000"
PENDING_LIMIT = 3

CL = None  # the Cluster
W = None  # the writer: a pure client


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent():
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (ImportError, OSError, AttributeError):
        pass


def wait_until(cond, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class Cluster:
    def __init__(self, master_flags=("--client_ttl=2", "--default_kv_lease_ttl=2000",
                                     f"--max_total_pending_tasks={PENDING_LIMIT}"),
                 clients=(("slow", 1500), ("b", 0), ("c", 0), ("ksrc", 0), ("ktgt", 0),
                          ("kexec", 1500))):
        self.logdir = tempfile.TemporaryDirectory(prefix="mc_tasks_")
        self.procs, self.logs = [], []
        self.rpc_port, self.metrics_port = free_port(), free_port()
        self.master_addr = f"127.0.0.1:{self.rpc_port}"
        master = self._spawn("master", [
            os.path.join(BUILD, "tools", "mooncake_master"), f"--rpc_port={self.rpc_port}",
            f"--metrics_port={self.metrics_port}", "--rpc_address=127.0.0.1",
            "--metrics_host=127.0.0.1", *master_flags])
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.rpc_port)) == 0:
                    break
            if master.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("master did not start: " + self.log_tail("master"))
            time.sleep(0.05)
        self.clients = {}
        for name, delay in clients:
            self.clients[name] = self._start_client(name, delay)

    def _spawn(self, name, argv, env=None, stdout=None):
        log = open(os.path.join(self.logdir.name, name + ".log"), "wb")
        self.logs.append(log)
        proc = subprocess.Popen(argv, stdout=stdout or log, stderr=log, stdin=subprocess.DEVNULL,
                                env=env, preexec_fn=die_with_parent)
        self.procs.append(proc)
        return proc

    def _start_client(self, name, delay):
        env = dict(os.environ, MC_TASK_EXECUTOR_DELAY_MS=str(delay))
        proc = self._spawn(name, [
            os.path.join(BUILD, "tools", "mooncake_client"), "--global_segment_size=32MB",
            "--host=127.0.0.1", f"--port={free_port()}", "--metadata_server=P2PHANDSHAKE",
            f"--master_server_address={self.master_addr}"], env=env, stdout=subprocess.PIPE)
        prefix, found = "mooncake_client ready: segment ", []

        def reader():
            for raw in proc.stdout:
                line = raw.decode(errors="replace").strip()
                if line.startswith(prefix) and not found:
                    found.append(line[len(prefix):].split()[0])

        threading.Thread(target=reader, daemon=True).start()
        wait_until(lambda: found or proc.poll() is not None, f"client {name} ready")
        if not found:
            raise RuntimeError(f"client {name} failed: " + self.log_tail(name))
        return proc, found[0]

    def seg(self, name):
        return self.clients[name][1]

    def proc(self, name):
        return self.clients[name][0]

    def log_tail(self, name):
        try:
            with open(os.path.join(self.logdir.name, name + ".log"), "rb") as f:
                return f.read()[-3000:].decode(errors="replace")
        except OSError:
            return ""

    def metrics(self):
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                parts = line.rsplit(" ", 1)
                if len(parts) == 2:
                    out[parts[0]] = float(parts[1])
        return out

    def stop(self):
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.kill(proc.pid, signal.SIGCONT)
                except OSError:
                    pass
                proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout:
                proc.stdout.close()
        for log in self.logs:
            log.close()
        self.logdir.cleanup()


def setUpModule():
    global CL, W
    CL = Cluster()
    try:
        W = mcs.MooncakeDistributedStore()
        rc = W.setup("127.0.0.1", "P2PHANDSHAKE", 0, 64 * MiB, "tcp", "", CL.master_addr)
        if rc != 0:
            raise RuntimeError(f"setup: {rc}")
    except Exception:
        CL.stop()
        raise


def tearDownModule():
    global CL, W
    if W is not None:
        W.close()
        W = None
    if CL is not None:
        CL.stop()
        CL = None


_n = [0]


def unique(prefix):
    _n[0] += 1
    return f"tasks/{prefix}/{os.getpid()}/{_n[0]}"


def value(n, seed):
    return bytes((i * 31 + seed) & 0xFF for i in range(n))


def put_on(key, data, *segments, store=None):
    store = store or W
    cfg = mcs.ReplicateConfig()
    cfg.replica_num = len(segments)
    cfg.preferred_segments = list(segments)
    rc = store.put(key, data, cfg)
    assert rc == 0, rc
    assert sorted(segments_of(key, store)) == sorted(segments), segments_of(key, store)


def segments_of(key, store=None):
    return [d.get_memory_descriptor().buffer_descriptor.transport_endpoint
            for d in (store or W).get_replica_desc(key) if d.is_memory_replica()]


def status_of(task_id, store=None):
    resp, rc = (store or W).query_task(task_id)
    assert rc == 0, rc
    return resp


def wait_status(task_id, status, timeout=30.0, store=None):
    return wait_until(
        lambda: (lambda r: r if r.status == status else None)(status_of(task_id, store)),
        f"task {task_id} {status.name}", timeout)


class CopyMove(unittest.TestCase):
    def test_copy_adds_replica_that_serves_reads_after_the_source_dies(self):
        key, data = unique("copy"), value(3 * MiB + 17, 1)
        put_on(key, data, CL.seg("ksrc"))
        task_id, rc = W.create_copy_task(key, [CL.seg("b")])
        self.assertEqual(rc, 0)
        self.assertNotEqual(task_id, NIL_ID)
        done = wait_status(task_id, mcs.TaskStatus.SUCCESS)
        self.assertEqual(done.type, mcs.TaskType.REPLICA_COPY)
        self.assertEqual(sorted(segments_of(key)), sorted([CL.seg("ksrc"), CL.seg("b")]))
        os.kill(CL.proc("ksrc").pid, signal.SIGKILL)
        CL.proc("ksrc").wait()
        # the master drops the dead holder's replica (client TTL): only the copy is left
        wait_until(lambda: segments_of(key) == [CL.seg("b")], "the source replica to expire")
        self.assertEqual(W.get(key), data)

    def test_query_task_goes_through_pending_processing_success(self):
        key, data = unique("states"), value(MiB, 2)
        put_on(key, data, CL.seg("slow"))
        slow = CL.proc("slow").pid
        procstop.freeze(slow)  # its executor cannot take the task yet
        try:
            task_id, rc = W.create_copy_task(key, [CL.seg("c")])
            self.assertEqual(rc, 0)
            first = status_of(task_id)
        finally:
            procstop.thaw(slow)
        self.assertEqual(first.status, mcs.TaskStatus.PENDING)
        self.assertEqual(first.id, task_id)
        self.assertGreater(first.created_at_ms_epoch, 1_600_000_000_000)
        self.assertTrue(first.assigned_client)
        wait_status(task_id, mcs.TaskStatus.PROCESSING)
        self.assertEqual(segments_of(key), [CL.seg("slow")])  # not visible before it is done
        done = wait_status(task_id, mcs.TaskStatus.SUCCESS)
        self.assertGreaterEqual(done.last_updated_at_ms_epoch, first.created_at_ms_epoch)
        self.assertIn("QueryTaskResponse(id=" + task_id, repr(done))
        self.assertEqual(sorted(segments_of(key)), sorted([CL.seg("slow"), CL.seg("c")]))
        self.assertEqual(W.get(key), data)
        m = CL.metrics()
        self.assertGreaterEqual(m.get("master_create_copy_task_requests_total", 0), 1)
        self.assertGreaterEqual(m.get("master_copy_end_requests_total", 0), 1)
        self.assertGreaterEqual(m.get("master_query_task_requests_total", 0), 1)

    def test_move_drops_the_source_and_keeps_the_bytes(self):
        key, data = unique("move"), value(2 * MiB + 5, 3)
        put_on(key, data, CL.seg("b"))
        task_id, rc = W.create_move_task(key, CL.seg("b"), CL.seg("c"))
        self.assertEqual(rc, 0)
        done = wait_status(task_id, mcs.TaskStatus.SUCCESS)
        self.assertEqual(done.type, mcs.TaskType.REPLICA_MOVE)
        self.assertEqual(segments_of(key), [CL.seg("c")])
        self.assertEqual(W.get(key), data)
        m = CL.metrics()
        self.assertGreaterEqual(m.get("master_move_end_requests_total", 0), 1)


class Failures(unittest.TestCase):
    def test_missing_key_unknown_target_and_bad_ids(self):
        key = unique("bad")
        self.assertEqual(W.create_copy_task(key, [CL.seg("b")]), (NIL_ID, OBJECT_NOT_FOUND))
        put_on(key, b"x" * 100, CL.seg("b"))
        self.assertEqual(W.create_copy_task(key, ["127.0.0.1:1"]), (NIL_ID, INVALID_PARAMS))
        self.assertEqual(W.create_copy_task(key, []), (NIL_ID, INVALID_PARAMS))
        self.assertEqual(W.create_move_task(key, CL.seg("b"), CL.seg("b")),
                         (NIL_ID, INVALID_PARAMS))
        self.assertEqual(W.create_move_task(key, CL.seg("c"), CL.seg("b")),
                         (NIL_ID, INVALID_PARAMS))  # no replica on the source
        self.assertEqual(W.query_task("not-a-uuid"), (None, INVALID_PARAMS))
        self.assertEqual(W.query_task(12), (None, INVALID_PARAMS))
        self.assertEqual(W.query_task("zzzzzzzz-zzzz-zzzz-zzzz-zzzzzzzzzzzz"),
                         (None, INVALID_PARAMS))  # refused by the master
        self.assertEqual(W.query_task("0123abcd-0000-4000-8000-000000000000"),
                         (None, TASK_NOT_FOUND))
        self.assertEqual(W.query_task((1, 2)), (None, TASK_NOT_FOUND))

    def test_target_killed_mid_task_fails_without_a_replica(self):
        key, data = unique("ktgt"), value(4 * MiB, 4)
        put_on(key, data, CL.seg("slow"))
        task_id, rc = W.create_copy_task(key, [CL.seg("ktgt")])
        self.assertEqual(rc, 0)
        wait_status(task_id, mcs.TaskStatus.PROCESSING)
        os.kill(CL.proc("ktgt").pid, signal.SIGKILL)
        CL.proc("ktgt").wait()
        failed = wait_status(task_id, mcs.TaskStatus.FAILED)
        self.assertTrue(failed.message)
        self.assertEqual(segments_of(key), [CL.seg("slow")])
        self.assertEqual(W.get(key), data)

    def test_executor_killed_mid_task_fails_it(self):
        key, data = unique("kexec"), value(MiB, 9)
        put_on(key, data, CL.seg("kexec"))
        task_id, rc = W.create_copy_task(key, [CL.seg("b")])
        self.assertEqual(rc, 0)
        running = wait_status(task_id, mcs.TaskStatus.PROCESSING)
        os.kill(CL.proc("kexec").pid, signal.SIGKILL)
        CL.proc("kexec").wait()
        failed = wait_status(task_id, mcs.TaskStatus.FAILED)  # the master expires the executor
        self.assertIn("executor", failed.message)
        self.assertEqual(failed.assigned_client, running.assigned_client)
        self.assertEqual(W.get_replica_desc(key), [])  # its only replica died with it

    def test_key_removed_during_the_task_fails_it(self):
        key, data = unique("removed"), value(MiB, 5)
        put_on(key, data, CL.seg("slow"))
        task_id, rc = W.create_copy_task(key, [CL.seg("b")])
        self.assertEqual(rc, 0)
        wait_status(task_id, mcs.TaskStatus.PROCESSING)
        self.assertEqual(W.remove(key, True), 0)
        failed = wait_status(task_id, mcs.TaskStatus.FAILED)
        self.assertIn("removed", failed.message)
        self.assertEqual(W.get_replica_desc(key), [])
        self.assertEqual(W.is_exist(key), 0)

    def test_upsert_during_a_copy_never_leaves_old_bytes(self):
        key, old, new = unique("upsert"), value(MiB, 6), value(MiB + 3, 7)
        put_on(key, old, CL.seg("slow"))
        task_id, rc = W.create_copy_task(key, [CL.seg("b")])
        self.assertEqual(rc, 0)
        wait_status(task_id, mcs.TaskStatus.PROCESSING)
        cfg = mcs.ReplicateConfig()
        cfg.preferred_segment = CL.seg("c")
        self.assertEqual(W.upsert(key, new, cfg), 0)
        failed = wait_status(task_id, mcs.TaskStatus.FAILED)
        self.assertIn("replaced", failed.message)
        self.assertEqual(segments_of(key), [CL.seg("c")])
        self.assertEqual(W.get(key), new)

    def test_pending_task_table_is_bounded(self):
        keys = [unique("bound") for _ in range(PENDING_LIMIT + 1)]
        for k in keys:
            put_on(k, b"y" * 4096, CL.seg("slow"))
        slow = CL.proc("slow").pid
        procstop.freeze(slow)
        try:
            made = [W.create_copy_task(k, [CL.seg("b")]) for k in keys]
        finally:
            procstop.thaw(slow)
        self.assertEqual([rc for _, rc in made[:PENDING_LIMIT]], [0] * PENDING_LIMIT)
        self.assertEqual(made[-1], (NIL_ID, TASK_PENDING_LIMIT_EXCEEDED))
        for task_id, _ in made[:PENDING_LIMIT]:
            wait_status(task_id, mcs.TaskStatus.SUCCESS, timeout=60)


class ReplicaClear(unittest.TestCase):
    def test_clears_only_own_unleased_objects_on_the_named_segment(self):
        mine, other = unique("clear"), unique("clear-other")
        data = value(MiB, 8)
        w2 = mcs.MooncakeDistributedStore()
        self.assertEqual(w2.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 * MiB, "tcp", "",
                                  CL.master_addr), 0)
        try:
            cfg = mcs.ReplicateConfig()
            cfg.preferred_segment = CL.seg("b")
            self.assertEqual(w2.put(other, data, cfg), 0)
            put_on(mine, data, CL.seg("b"), CL.seg("c"))
            # put_on's replica listing leased `mine` for 2 s: refused until that ran out
            batch = [mine, other, unique("absent")]
            self.assertEqual(W.batch_replica_clear(batch, CL.seg("b")), [])
            cleared = wait_until(lambda: W.batch_replica_clear(batch, CL.seg("b")),
                                 "the lease to run out")
            self.assertEqual(cleared, [mine])
            self.assertEqual(segments_of(mine), [CL.seg("c")])
            self.assertEqual(segments_of(other), [CL.seg("b")])  # another client's object
            self.assertEqual(W.get(mine), data)  # grants a lease (2 s)
            self.assertEqual(W.batch_replica_clear([mine]), [])  # leased
            wait_until(lambda: W.batch_replica_clear([mine]) == [mine], "the lease to run out")
            self.assertEqual(W.is_exist(mine), 0)
            self.assertEqual(w2.get(other), data)
            self.assertEqual(W.batch_replica_clear([]), [])
        finally:
            w2.close()


class Timeouts(unittest.TestCase):
    """A second cluster: task timeouts 3 s pending and 1 s processing (the executor polls every
    second, so a task is fetched well before it could time out pending), 2 finished tasks kept,
    a 4 s executor delay."""

    @classmethod
    def setUpClass(cls):
        cls.cl = Cluster(master_flags=("--client_ttl=10", "--pending_task_timeout_sec=3",
                                       "--processing_task_timeout_sec=1",
                                       "--max_total_finished_tasks=2"),
                         clients=(("src", 4000), ("dst", 0)))
        cls.w = mcs.MooncakeDistributedStore()
        rc = cls.w.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 * MiB, "tcp", "", cls.cl.master_addr)
        if rc != 0:
            cls.cl.stop()
            raise RuntimeError(f"setup: {rc}")

    @classmethod
    def tearDownClass(cls):
        cls.w.close()
        cls.cl.stop()

    def test_pending_timeout_processing_timeout_and_finished_pruning(self):
        w, cl = self.w, self.cl
        keys = [unique("timeout") for _ in range(3)]
        data = value(MiB, 10)
        for k in keys:
            put_on(k, data, cl.seg("src"), store=w)
        src = cl.proc("src").pid
        procstop.freeze(src)  # nobody fetches: the task times out PENDING
        try:
            first, rc = w.create_copy_task(keys[0], [cl.seg("dst")])
            self.assertEqual(rc, 0)
            failed = wait_status(first, mcs.TaskStatus.FAILED, store=w)
        finally:
            procstop.thaw(src)
        self.assertIn("pending timeout", failed.message)
        # fetched, then not reported within 1 s (the executor waits 4 s): FAILED, but the target
        # extent stays reserved until the executor reports (it may still be writing into it);
        # the late report changes nothing else
        base = cl.metrics()["master_allocated_bytes"]
        second, rc = w.create_copy_task(keys[1], [cl.seg("dst")])
        self.assertEqual(rc, 0)
        failed = wait_status(second, mcs.TaskStatus.FAILED, store=w)
        self.assertIn("processing timeout", failed.message)
        self.assertGreaterEqual(cl.metrics()["master_allocated_bytes"] - base, MiB)
        wait_until(lambda: cl.metrics()["master_allocated_bytes"] == base,
                   "the late report to give the extent back")
        self.assertEqual(status_of(second, w).status, mcs.TaskStatus.FAILED)
        third, rc = w.create_copy_task(keys[2], [cl.seg("dst")])
        self.assertEqual(rc, 0)
        wait_status(third, mcs.TaskStatus.FAILED, store=w)
        wait_until(lambda: cl.metrics()["master_allocated_bytes"] == base,
                   "the third task to drain")
        self.assertEqual(segments_of(keys[1], w), [cl.seg("src")])
        self.assertEqual(w.get(keys[1]), data)
        # three finished tasks, two kept: the oldest is pruned
        self.assertEqual(w.query_task(first), (None, TASK_NOT_FOUND))
        self.assertEqual(status_of(second, w).status, mcs.TaskStatus.FAILED)


if __name__ == "__main__":
    unittest.main()
