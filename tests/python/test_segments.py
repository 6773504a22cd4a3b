"""test_segments.py — segments mounted at run time: mount_segment,
allocate_and_mount_segment, unmount_segment, unmount_and_free_segment (with grace periods),
unmount_local_disk_segment, init_all, and the REST service's mount routes.

Against a real mooncake_master started here (no other client: the capacity each test sees is
the one its own stores mount) and store clients in this process. Upstream's behaviour checked:
mooncake-store/src/real_client.cpp (mountSegment, allocateAndMountSegment, unmountSegment,
unmountAndFreeSegment, drainLocalDiskSegment, initAll), mooncake-integration/store/store_py.cpp
(return shapes, defaults), mooncake-wheel/mooncake/mooncake_store_service.py (routes).
The master's segment_total_capacity_bytes{segment=...} gauge tells when a mount or unmount took
effect there; tests wait for states, not for time.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

from test_store import BUILD, die_with_parent, free_port, wait_port

import mooncake.store as mcs

MiB = 1 << 20
INVALID_PARAMS = -600
ID_FORM = re.compile(r"^\d+-\d+$")  # upstream's UuidToString


class Master:
    """A mooncake_master on loopback; restart() brings a new one up on the same ports."""

    def __init__(self, *extra):
        self.extra = list(extra)
        self.logdir = tempfile.TemporaryDirectory(prefix="mc_segments_")
        self.rpc_port, self.metrics_port = free_port(), free_port()
        self.addr = f"127.0.0.1:{self.rpc_port}"
        self.proc = None
        self.log = None
        self.start()

    def start(self):
        self.log = open(os.path.join(self.logdir.name, "master.log"), "ab")
        self.proc = subprocess.Popen(
            [os.path.join(BUILD, "tools", "mooncake_master"), f"--rpc_port={self.rpc_port}",
             f"--metrics_port={self.metrics_port}", "--rpc_address=127.0.0.1",
             "--metrics_host=127.0.0.1", "--default_kv_lease_ttl=2000"] + self.extra,
            stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent)
        wait_port(self.rpc_port, self.proc)
        wait_port(self.metrics_port, self.proc)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log:
            self.log.close()
            self.log = None

    def restart(self):
        self.stop()
        self.start()

    def capacity(self, name):
        """Bytes the master has mounted under segment name `name` (0 when none)."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        m = re.search(r'^segment_total_capacity_bytes\{segment="%s"\} (\d+)' % re.escape(name),
                      text, re.M)
        return int(m.group(1)) if m else 0

    def replica_types(self, key):
        """The key's replica types, from /query_key (which grants no read lease)."""
        url = (f"http://127.0.0.1:{self.metrics_port}/query_key?key="
               + urllib.parse.quote(key, safe=""))
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = r.read()
        except urllib.error.HTTPError as e:
            body = e.read()
        return [rep["type"] for rep in json.loads(body).get("replicas", [])]

    def metric(self, name):
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            m = re.search(rf"^{name} (\d+)$", r.read().decode(), re.M)
        return int(m.group(1)) if m else None

    def close(self):
        self.stop()
        self.logdir.cleanup()


MASTER = None


def setUpModule():
    global MASTER
    MASTER = Master()


def tearDownModule():
    if MASTER:
        MASTER.close()


def wait_for(cond, timeout=15.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def endpoints(store, key):
    """The endpoints ("host:port") of the memory replicas of key, as the master lists them."""
    return [d.get_memory_descriptor().buffer_descriptor.transport_endpoint
            for d in store.get_replica_desc(key) if d.is_memory_replica()]


def pattern(tag, size):
    """size bytes that differ for every tag (and within the value)."""
    seed = (tag * 2654435761) & 0xFFFFFFFF
    block = bytes((seed >> (8 * (i % 4)) ^ i) & 0xFF for i in range(251))
    return (block * (size // len(block) + 1))[:size]


class SegmentsTest(unittest.TestCase):
    def store(self, segment=0, buffer=16 * MiB, master=None):
        s = mcs.MooncakeDistributedStore()
        rc = s.setup("127.0.0.1", "P2PHANDSHAKE", segment, buffer, "tcp", "",
                     (master or MASTER).addr)
        self.assertEqual(rc, 0)
        self.addCleanup(s.close)
        return s

    def config_on(self, store):
        cfg = mcs.ReplicateConfig()
        cfg.preferred_segment = store.get_hostname()
        return cfg

    # ---- allocate_and_mount_segment -----------------------------------------------------

    def test_allocate_and_mount_adds_capacity_the_master_uses(self):
        owner = self.store(segment=16 * MiB)
        reader = self.store()
        name = owner.get_hostname()
        self.assertEqual(MASTER.capacity(name), 16 * MiB)
        r = owner.allocate_and_mount_segment(16 * MiB)
        self.assertEqual(r["ret"], 0)
        self.assertEqual(r["allocated_size"], 16 * MiB)
        self.assertEqual(len(r["segment_ids"]), 1)
        self.assertRegex(r["segment_ids"][0], ID_FORM)
        self.assertEqual(MASTER.capacity(name), 32 * MiB)
        # 24 MiB of objects: more than the first segment holds, none evicted
        values = {f"seg/cap/{i}": pattern(i, MiB) for i in range(24)}
        for k, v in values.items():
            self.assertEqual(reader.put(k, v), 0, k)
        for k, v in values.items():
            self.assertEqual(reader.get(k), v, k)
            self.assertEqual(owner.get(k), v, k)
        self.assertEqual(owner.unmount_and_free_segment(r["segment_ids"]), 0)
        self.assertEqual(MASTER.capacity(name), 16 * MiB)

    def test_allocated_size_is_rounded_to_4_mib_as_upstream(self):
        owner = self.store()
        r = owner.allocate_and_mount_segment(10 * MiB + 1, "tcp", "")
        self.assertEqual((r["ret"], r["allocated_size"]), (0, 12 * MiB))
        self.assertEqual(MASTER.capacity(owner.get_hostname()), 12 * MiB)
        self.assertEqual(owner.unmount_and_free_segment(r["segment_ids"][0:1], 0), 0)
        self.assertEqual(MASTER.capacity(owner.get_hostname()), 0)

    # ---- unmount ------------------------------------------------------------------------

    def test_unmount_drops_its_replicas_others_stay_readable(self):
        owner = self.store()
        other = self.store(segment=16 * MiB)
        reader = self.store()
        sid = owner.allocate_and_mount_segment(8 * MiB)["segment_ids"]
        only, both = {}, {}
        cfg1 = self.config_on(owner)
        cfg2 = self.config_on(owner)
        cfg2.replica_num = 2
        for i in range(6):
            only[f"seg/drop/only/{i}"] = pattern(100 + i, 256 * 1024)
            both[f"seg/drop/both/{i}"] = pattern(200 + i, 256 * 1024)
            self.assertEqual(reader.put(f"seg/drop/only/{i}", only[f"seg/drop/only/{i}"], cfg1), 0)
            self.assertEqual(reader.put(f"seg/drop/both/{i}", both[f"seg/drop/both/{i}"], cfg2), 0)
        for k in both:
            names = sorted(endpoints(reader, k))
            self.assertEqual(names, sorted([owner.get_hostname(), other.get_hostname()]), k)
        self.assertEqual(owner.unmount_and_free_segment(sid), 0)
        for k in only:
            self.assertEqual(reader.is_exist(k), 0, k)
            self.assertEqual(reader.get(k), b"", k)
        for k, v in both.items():
            self.assertEqual(reader.get(k), v, k)
            self.assertEqual(endpoints(reader, k),
                             [other.get_hostname()])

    def test_reader_during_unmount_gets_exact_bytes_or_errors(self):
        # checksums off in both stores: integrity must come from the unmount itself
        saved = os.environ.get("MC_STORE_CHECKSUM")
        os.environ["MC_STORE_CHECKSUM"] = "0"
        try:
            owner = self.store()
            reader = self.store()
        finally:
            if saved is None:
                os.environ.pop("MC_STORE_CHECKSUM")
            else:
                os.environ["MC_STORE_CHECKSUM"] = saved
        size = 8 * MiB
        sid = owner.allocate_and_mount_segment(size)["segment_ids"]
        keys = {f"seg/race/{i}": pattern(300 + i, 512 * 1024) for i in range(12)}
        for k, v in keys.items():
            self.assertEqual(owner.put(k, v), 0)
        stats = {"exact": 0, "errors": 0, "wrong": [], "stop": False}

        def read_loop():
            while not stats["stop"]:
                for k, v in keys.items():
                    got = reader.get(k)
                    if got == v:
                        stats["exact"] += 1
                    elif got == b"":
                        stats["errors"] += 1
                    else:
                        stats["wrong"].append(k)

        t = threading.Thread(target=read_loop)
        t.start()
        try:
            wait_for(lambda: stats["exact"] >= 24, what="reads before the unmount")
            self.assertEqual(owner.unmount_and_free_segment(sid), 0)
            # new memory, filled with other bytes: where a stale read would land
            for round_ in range(3):
                new = owner.allocate_and_mount_segment(size)
                self.assertEqual(new["ret"], 0)
                for i in range(12):
                    self.assertEqual(owner.put(f"seg/race/new/{round_}/{i}",
                                               pattern(900 + i, 512 * 1024)), 0)
                seen = stats["errors"] + len(stats["wrong"])
                wait_for(lambda: stats["errors"] + len(stats["wrong"]) >= seen + 24,
                         what="reads after the unmount")
                self.assertEqual(owner.unmount_and_free_segment(new["segment_ids"]), 0)
        finally:
            stats["stop"] = True
            t.join()
        self.assertEqual(stats["wrong"], [])
        self.assertGreater(stats["exact"], 0)
        for k in keys:
            self.assertEqual(reader.is_exist(k), 0)

    def test_grace_period_keeps_objects_readable_then_unmounts(self):
        owner = self.store()
        other = self.store(segment=16 * MiB)
        reader = self.store()
        sid = owner.allocate_and_mount_segment(8 * MiB)["segment_ids"]
        cfg = self.config_on(owner)
        values = {f"seg/grace/{i}": pattern(400 + i, 128 * 1024) for i in range(4)}
        for k, v in values.items():
            self.assertEqual(reader.put(k, v, cfg), 0)
            self.assertEqual(endpoints(reader, k),
                             [owner.get_hostname()])
        start = time.monotonic()
        self.assertEqual(owner.unmount_and_free_segment(sid, 3), 0)
        self.assertLess(time.monotonic() - start, 1.0)  # upstream returns at once
        # draining: readable, and no new object is placed there
        self.assertEqual(reader.put("seg/grace/new", b"n" * 4096, cfg), 0)
        self.assertEqual(endpoints(reader, "seg/grace/new"),
                         [other.get_hostname()])
        while time.monotonic() - start < 2.5:
            for k, v in values.items():
                self.assertEqual(reader.get(k), v, k)
            time.sleep(0.2)
        wait_for(lambda: all(reader.is_exist(k) == 0 for k in values), timeout=10,
                 what="the graceful unmount")
        self.assertGreaterEqual(time.monotonic() - start, 3.0)
        self.assertEqual(MASTER.capacity(owner.get_hostname()), 0)
        # the id is gone for good
        self.assertEqual(owner.unmount_and_free_segment(sid), -1)

    # ---- master restart ---------------------------------------------------------------------

    def test_master_restart_remounts_every_segment(self):
        master = Master()
        self.addCleanup(master.close)
        owner = self.store(segment=8 * MiB, master=master)
        reader = self.store(master=master)
        name = owner.get_hostname()
        ids = [owner.allocate_and_mount_segment(8 * MiB)["segment_ids"][0] for _ in range(2)]
        self.assertEqual(master.capacity(name), 24 * MiB)
        master.restart()
        wait_for(lambda: master.capacity(name) == 24 * MiB, timeout=20,
                 what="the re-mount of all three segments")
        # the re-mounted segments take objects and serve them (epochs agree)
        values = {f"seg/remount/{i}": pattern(500 + i, MiB) for i in range(18)}
        for k, v in values.items():
            self.assertEqual(reader.put(k, v), 0, k)
        for k, v in values.items():
            self.assertEqual(reader.get(k), v, k)
        self.assertEqual(owner.unmount_and_free_segment(ids), 0)
        self.assertEqual(master.capacity(name), 8 * MiB)

    # ---- mount_segment (file-backed) --------------------------------------------------------

    def shm_file(self, size):
        path = f"/dev/shm/mc_test_segments_{os.getpid()}_{time.monotonic_ns()}"
        with open(path, "wb") as f:
            f.truncate(size)
        self.addCleanup(os.unlink, path)
        return path

    def test_mount_segment_on_a_dev_shm_file(self):
        owner = self.store()
        reader = self.store()
        path = self.shm_file(8 * MiB)
        r = owner.mount_segment(path, 8 * MiB)
        self.assertEqual(r["ret"], 0)
        self.assertEqual(len(r["segment_ids"]), 1)
        self.assertRegex(r["segment_ids"][0], ID_FORM)
        self.assertNotIn("allocated_size", r)
        self.assertEqual(MASTER.capacity(owner.get_hostname()), 8 * MiB)
        value = pattern(600, 300 * 1024)
        self.assertEqual(reader.put("seg/shm/a", value, self.config_on(owner)), 0)
        self.assertEqual(reader.get("seg/shm/a"), value)
        with open(path, "rb") as f:  # the object's bytes are in the file
            self.assertIn(value, f.read())
        self.assertEqual(owner.unmount_segment(r["segment_ids"]), 0)
        self.assertEqual(reader.get("seg/shm/a"), b"")
        self.assertEqual(owner.unmount_segment(r["segment_ids"]), -1)
        # an offset: the segment starts there
        r = owner.mount_segment(path, 4 * MiB, 4 * MiB, "tcp", "")
        self.assertEqual(r["ret"], 0)
        self.assertEqual(owner.unmount_segment(r["segment_ids"], 0), 0)

    def test_mount_segment_bad_arguments(self):
        owner = self.store()
        path = self.shm_file(4 * MiB)
        failed = {"ret": -1, "segment_ids": []}
        self.assertEqual(owner.mount_segment("/nonexistent/mc_segment", MiB), failed)
        self.assertEqual(owner.mount_segment(path, 4 * MiB + 1), failed)  # beyond the end
        self.assertEqual(owner.mount_segment(path, MiB, 100), failed)  # offset not page-aligned
        self.assertEqual(owner.mount_segment(path, MiB, 4 * MiB), failed)
        self.assertEqual(owner.mount_segment(path, 0), failed)
        self.assertEqual(owner.mount_segment(path, MiB, 0, "rdma"), failed)
        self.assertRaises(TypeError, owner.mount_segment, path, "1MB")
        self.assertEqual(MASTER.capacity(owner.get_hostname()), 0)

    # ---- bad ids, not set up ----------------------------------------------------------------

    def test_bad_ids_and_kinds_are_refused(self):
        owner = self.store()
        path = self.shm_file(4 * MiB)
        file_id = owner.mount_segment(path, 4 * MiB)["segment_ids"]
        mem_id = owner.allocate_and_mount_segment(4 * MiB)["segment_ids"]
        self.assertEqual(owner.unmount_segment(["nope"]), -1)
        self.assertEqual(owner.unmount_and_free_segment(["1-2"]), -1)
        self.assertEqual(owner.unmount_segment(mem_id), -1)  # not a mount_segment id
        self.assertEqual(owner.unmount_and_free_segment(file_id), -1)
        self.assertEqual(owner.unmount_segment([]), 0)
        self.assertRaises(TypeError, owner.unmount_segment, "1-2")
        self.assertRaises(TypeError, owner.unmount_segment, [1])
        # a bad id in a list: the others are still unmounted, the first failure is returned
        self.assertEqual(owner.unmount_segment(["bad"] + file_id), -1)
        self.assertEqual(owner.unmount_and_free_segment(mem_id + ["bad"]), -1)
        self.assertEqual(MASTER.capacity(owner.get_hostname()), 0)
        self.assertEqual(owner.allocate_and_mount_segment(0),
                         {"ret": -1, "segment_ids": [], "allocated_size": 0})

    def test_calls_on_a_store_not_set_up_fail_as_upstream(self):
        s = mcs.MooncakeDistributedStore()
        self.assertEqual(s.mount_segment("/dev/shm/x", MiB), {"ret": -1, "segment_ids": []})
        self.assertEqual(s.allocate_and_mount_segment(MiB),
                         {"ret": -1, "segment_ids": [], "allocated_size": 0})
        self.assertEqual(s.unmount_segment(["1-2"]), -1)
        self.assertEqual(s.unmount_and_free_segment(["1-2"]), -1)
        self.assertEqual(s.unmount_local_disk_segment(), -1)

    def test_close_unmounts_run_time_segments(self):
        owner = mcs.MooncakeDistributedStore()
        self.assertEqual(owner.setup("127.0.0.1", "P2PHANDSHAKE", 4 * MiB, 4 * MiB, "tcp", "",
                                     MASTER.addr), 0)
        name = owner.get_hostname()
        path = self.shm_file(4 * MiB)
        self.assertEqual(owner.allocate_and_mount_segment(4 * MiB)["ret"], 0)
        self.assertEqual(owner.mount_segment(path, 4 * MiB)["ret"], 0)
        self.assertEqual(MASTER.capacity(name), 12 * MiB)
        self.assertEqual(owner.close(), 0)
        self.assertEqual(MASTER.capacity(name), 0)

    # ---- unmount_local_disk_segment, init_all -----------------------------------------------

    def test_unmount_local_disk_without_offload_returns_zero(self):
        owner = self.store(segment=4 * MiB)
        self.assertEqual(owner.unmount_local_disk_segment(), 0)  # upstream: warning, 0
        self.assertEqual(owner.unmount_local_disk_segment(grace_period_seconds=0), 0)
        self.assertEqual(owner.unmount_local_disk_segment(3601), -1)

    def test_unmount_local_disk_stops_offloading_and_drops_its_replicas(self):
        master = Master("--enable_offload=true")
        self.addCleanup(master.close)
        saved = os.environ.get("MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS")
        os.environ["MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS"] = "1"
        self.addCleanup(lambda: os.environ.pop("MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS")
                        if saved is None else os.environ.update(
                            MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS=saved))
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        owner = mcs.MooncakeDistributedStore()
        self.assertEqual(owner.setup("127.0.0.1", "P2PHANDSHAKE", 16 * MiB, 16 * MiB, "tcp", "",
                                     master.addr, enable_ssd_offload=True,
                                     ssd_offload_path=tmp.name), 0)
        self.addCleanup(owner.close)
        self.assertEqual(owner.put("seg/disk/a", pattern(700, 64 * 1024)), 0)
        wait_for(lambda: "LOCAL_DISK" in master.replica_types("seg/disk/a"), timeout=20,
                 what="the local-disk replica")
        start = time.monotonic()
        self.assertEqual(owner.unmount_local_disk_segment(1), 0)
        self.assertGreaterEqual(time.monotonic() - start, 1.0)  # the grace period is waited
        self.assertEqual(master.replica_types("seg/disk/a"), ["MEMORY"])
        self.assertEqual(owner.get("seg/disk/a"), pattern(700, 64 * 1024))
        # no more offloading: a new object keeps its memory replica only, across heartbeats
        self.assertEqual(owner.put("seg/disk/b", b"b" * 4096), 0)
        time.sleep(3)
        self.assertEqual(master.replica_types("seg/disk/b"), ["MEMORY"])
        self.assertEqual(owner.unmount_local_disk_segment(), 0)  # again: nothing to drain

    def test_an_offloading_client_offloads_its_setup_segment_only(self):
        # its worker reads objects from the segment of setup; one on a run-time segment gets no
        # offload task (else the task would fail: the worker cannot read it)
        master = Master("--enable_offload=true")
        self.addCleanup(master.close)
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        owner = mcs.MooncakeDistributedStore()
        self.assertEqual(owner.setup("127.0.0.1", "P2PHANDSHAKE", 4 * MiB, 16 * MiB, "tcp", "",
                                     master.addr, enable_ssd_offload=True,
                                     ssd_offload_path=tmp.name), 0)
        self.addCleanup(owner.close)
        self.assertEqual(owner.allocate_and_mount_segment(16 * MiB)["ret"], 0)
        keys = [f"seg/offload/{i}" for i in range(16)]
        for i, k in enumerate(keys):
            self.assertEqual(owner.put(k, pattern(800 + i, 512 * 1024)), 0)
        wait_for(lambda: master.metric("master_offload_queue_depth") == 0
                 and master.metric("master_offload_tasks_done_total") > 0, timeout=30,
                 what="the offload tasks to settle")
        self.assertEqual(master.metric("master_offload_tasks_failed_total"), 0)
        self.assertEqual(master.metric("master_offload_tasks_retried_total"), 0)
        on_disk = [k for k in keys if "LOCAL_DISK" in master.replica_types(k)]
        self.assertEqual(len(on_disk), master.metric("master_offload_tasks_done_total"))
        self.assertLess(len(on_disk), len(keys))  # the run-time segment took some

    def test_init_all_sets_up_as_upstream(self):
        # upstream's fixed addresses (localhost:12345, master 127.0.0.1:50051): in a private
        # network namespace, where nothing else can hold them
        script = f"""
import os, subprocess, sys, time, socket
sys.path.insert(0, {os.path.join(BUILD, 'python')!r})
import mooncake.store as mcs
m = subprocess.Popen([{os.path.join(BUILD, 'tools', 'mooncake_master')!r},
                      "--rpc_address=127.0.0.1", "--metrics_port=0"],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(200):
        with socket.socket() as c:
            if c.connect_ex(("127.0.0.1", 50051)) == 0:
                break
        time.sleep(0.05)
    s = mcs.MooncakeDistributedStore()
    print("init", s.init_all("tcp", "", 8 << 20))
    print("host", s.get_hostname())
    print("again", s.init_all("tcp", ""))
    print("put", s.put("init/k", b"v" * 100), s.get("init/k") == b"v" * 100)
    print("close", s.close())
finally:
    m.terminate()
    m.wait()
"""
        out = subprocess.run(["unshare", "-rn", "sh", "-c",
                              "ip link set lo up && exec " + sys.executable + " -c \"$0\"",
                              script], capture_output=True, text=True, timeout=120)
        if out.returncode != 0 and "unshare" in out.stderr and "Operation not permitted" in \
                out.stderr:
            self.skipTest("no user namespaces here: " + out.stderr.strip())
        self.assertEqual(out.returncode, 0, out.stderr[-2000:])
        lines = dict(line.split(" ", 1) for line in out.stdout.splitlines())
        self.assertEqual(lines["init"], "0")
        self.assertEqual(lines["host"], "localhost:12345")
        self.assertEqual(lines["again"], str(INVALID_PARAMS))
        self.assertEqual(lines["put"], "0 True")
        self.assertEqual(lines["close"], "0")


# ---- on a dummy client ------------------------------------------------------------------------


class DummyClientTest(unittest.TestCase):
    """Upstream refuses the segment methods on a dummy (store_py.cpp "requires RealClient"):
    mount -> {"ret": -1, ...}, unmounts and unmount_local_disk_segment -> -1, init_all -> -1."""

    def test_segment_methods_fail_on_a_dummy_as_upstream(self):
        port = free_port()
        log = tempfile.TemporaryFile()
        real = subprocess.Popen(
            [os.path.join(BUILD, "tools", "mooncake_client"), "--global_segment_size=16MB",
             "--host=127.0.0.1", f"--port={port}", "--metadata_server=P2PHANDSHAKE",
             f"--master_server_address={MASTER.addr}"],
            stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent)

        def stop():
            real.terminate()
            real.wait(timeout=10)
            real.stdout.close()
            log.close()

        self.addCleanup(stop)
        self.assertTrue(real.stdout.readline().startswith(b"mooncake_client ready"))
        d = mcs.MooncakeDistributedStore()
        self.assertEqual(d.setup_dummy(16 * MiB, 16 * MiB, f"127.0.0.1:{port}"), 0)
        self.addCleanup(d.close)
        path = f"/dev/shm/mc_test_segments_dummy_{os.getpid()}"
        with open(path, "wb") as f:
            f.truncate(4 * MiB)
        self.addCleanup(os.unlink, path)
        self.assertEqual(d.mount_segment(path, 4 * MiB), {"ret": -1, "segment_ids": []})
        self.assertEqual(d.allocate_and_mount_segment(4 * MiB),
                         {"ret": -1, "segment_ids": [], "allocated_size": 0})
        self.assertEqual(d.unmount_segment(["1-2"]), -1)
        self.assertEqual(d.unmount_and_free_segment(["1-2"]), -1)
        self.assertEqual(d.unmount_local_disk_segment(), -1)
        self.assertEqual(d.init_all("tcp", ""), -1)
        self.assertEqual(d.put("seg/dummy/k", b"works"), 0)  # the dummy itself is fine
        self.assertEqual(d.get("seg/dummy/k"), b"works")


# ---- the REST service's mount routes ----------------------------------------------------------


def rest(method, url, body=None):
    data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


class RestMountRoutesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        from mooncake.mooncake_store_service import MooncakeStoreService
        cls.tmp = tempfile.TemporaryDirectory()
        config = os.path.join(cls.tmp.name, "config.json")
        with open(config, "w") as f:
            json.dump({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                       "global_segment_size": 0, "local_buffer_size": "16MB",
                       "protocol": "tcp", "device_name": "",
                       "master_server_address": MASTER.addr}, f)
        saved = {k: os.environ.pop(k) for k in list(os.environ)
                 if k.startswith("MOONCAKE_CLUSTER_SECRET")}
        try:
            cls.service = MooncakeStoreService(config)
        finally:
            os.environ.update(saved)
        assert cls.service.start_store_service(10)
        port = cls.service.start_http_service(0, "127.0.0.1")
        cls.base = f"http://127.0.0.1:{port}/api"
        cls.name = cls.service.store.get_hostname()

    @classmethod
    def tearDownClass(cls):
        cls.service.stop()
        cls.tmp.cleanup()

    def test_mount_and_unmount(self):
        status, body = rest("POST", self.base + "/mount", {"size": 6 * MiB})
        self.assertEqual(status, 200)
        self.assertEqual((body["status"], body["allocated_size"]), ("success", 8 * MiB))
        self.assertEqual(MASTER.capacity(self.name), 8 * MiB)
        self.assertEqual(rest("POST", self.base + "/mount", {"size": 0})[0], 400)
        self.assertEqual(rest("POST", self.base + "/mount", {"size": "1MB"})[0], 400)
        self.assertEqual(rest("POST", self.base + "/unmount", {})[0], 400)
        self.assertEqual(rest("POST", self.base + "/unmount", {"segment_ids": ["1-2"]})[0], 500)
        self.assertEqual(rest("POST", self.base + "/unmount", b"{not json")[0], 500)
        self.assertEqual(rest("POST", self.base + "/unmount",
                              {"segment_ids": body["segment_ids"][0]}),
                         (200, {"status": "success"}))
        self.assertEqual(MASTER.capacity(self.name), 0)
        self.assertEqual(rest("GET", self.base + "/mount")[0], 405)

    def test_mount_shm_unmount_shm_and_reconfigure(self):
        name = f"mc_test_rest_{os.getpid()}"
        path = "/dev/shm/" + name
        with open(path, "wb") as f:
            f.truncate(8 * MiB)
        self.addCleanup(os.unlink, path)
        self.assertEqual(rest("POST", self.base + "/mount_shm", {"name": "../etc", "size": 1})[0],
                         400)
        self.assertEqual(rest("POST", self.base + "/mount_shm", {"name": name})[0], 400)
        self.assertEqual(rest("POST", self.base + "/mount_shm",
                              {"name": name, "size": 16 * MiB})[0], 500)
        status, body = rest("POST", self.base + "/mount_shm", {"name": "/" + name, "size": 4 * MiB})
        self.assertEqual(status, 200)
        self.assertEqual(MASTER.capacity(self.name), 4 * MiB)
        status, failed = rest("POST", self.base + "/unmount_shm",
                              {"segment_ids": body["segment_ids"] + ["9-9"]})
        self.assertEqual(status, 500)
        self.assertEqual(failed["failed_segment_ids"], ["9-9"])
        self.assertEqual(MASTER.capacity(self.name), 0)
        # reconfigure: decode mounts, a second decode replaces, prefill unmounts
        status, first = rest("POST", self.base + "/reconfigure",
                             {"mode": "decode", "path": path, "size": 4 * MiB})
        self.assertEqual((status, first["mode"]), (200, "decode"))
        status, second = rest("POST", self.base + "/reconfigure",
                              {"mode": "decode", "path": path, "size": 4 * MiB,
                               "offset": 4 * MiB})
        self.assertEqual(status, 200)
        self.assertNotEqual(first["segment_ids"], second["segment_ids"])
        self.assertEqual(MASTER.capacity(self.name), 4 * MiB)
        status, body = rest("POST", self.base + "/reconfigure",
                            {"mode": "decode", "path": "/nonexistent", "size": MiB})
        self.assertEqual((status, body["mode"]), (500, "decode"))  # previous kept
        self.assertEqual(MASTER.capacity(self.name), 4 * MiB)
        self.assertEqual(rest("POST", self.base + "/reconfigure", {"mode": "prefill"}),
                         (200, {"status": "success", "mode": "prefill"}))
        self.assertEqual(MASTER.capacity(self.name), 0)
        self.assertEqual(rest("POST", self.base + "/reconfigure", {"mode": "x"})[0], 400)
        self.assertEqual(rest("POST", self.base + "/reconfigure", {"mode": "decode"})[0], 400)

    def test_unmount_local_disk(self):
        url = self.base + "/unmount_local_disk"
        self.assertEqual(rest("POST", url, {"grace_period_seconds": 0}),
                         (200, {"status": "success"}))
        self.assertEqual(rest("POST", url, {})[0], 200)
        self.assertEqual(rest("POST", url, {"grace_period_seconds": 3601})[0], 400)
        self.assertEqual(rest("POST", url, {"grace_period_seconds": 1.5})[0], 400)
        self.assertEqual(rest("POST", url, b"[1]")[0], 400)
        self.assertEqual(rest("POST", url, b"{bad")[0], 400)


if __name__ == "__main__":
    unittest.main()
