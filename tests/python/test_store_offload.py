"""test_store_offload.py — upstream's SSD-offload arguments of setup() through mooncake.store.

setup(..., enable_ssd_offload=True, ssd_offload_path=DIR) against a real mooncake_master started
with --enable_offload: an object put into this store's own (small) segment gets a local-disk
replica (a file under DIR); filler objects then push its memory replica out, and a get reads it
back from that file, byte-exact. That the bytes came from the disk is shown three ways: the
replica list before the get holds the local-disk replica alone (master and Python API), the
object's file under DIR holds the value, and the master's count of reads served from disk
replicas (master_fallback_reads_total, reported by the client) goes up by the get.

Progress is watched on the master's /query_key, which grants no read lease (get_replica_desc
does, and a leased object is never evicted). Binaries come from MC_BUILD_DIR (default
<repo>/build), the module from PYTHONPATH.
"""
import json
import os
import re
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.parse
import urllib.request

from test_store import BUILD, die_with_parent, free_port, wait_port  # noqa: E402

import mooncake.store as mcs  # noqa: E402

MiB = 1024 * 1024
SEGMENT = 16 * MiB  # small: a few 1 MiB fillers push the victim's memory replica out


class SsdOffloadTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.log = open(os.path.join(self.tmp.name, "master.log"), "wb")
        self.rpc_port = free_port()
        self.metrics_port = free_port()
        self.master = subprocess.Popen(
            [os.path.join(BUILD, "tools", "mooncake_master"), f"--rpc_port={self.rpc_port}",
             f"--metrics_port={self.metrics_port}", "--rpc_address=127.0.0.1",
             "--metrics_host=127.0.0.1", "--enable_offload=true"],
            stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent)
        wait_port(self.rpc_port, self.master)
        wait_port(self.metrics_port, self.master)
        self.saved_env = {k: os.environ.get(k) for k in
                          ("MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS",)}
        os.environ["MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS"] = "1"

    def tearDown(self):
        for k, v in self.saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        self.master.terminate()
        self.master.wait(timeout=10)
        self.log.close()
        self.tmp.cleanup()

    def http_get(self, path):
        url = f"http://127.0.0.1:{self.metrics_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.read().decode()
        except urllib.error.HTTPError as e:
            return e.read().decode()

    def replica_types(self, key):
        """The key's replica types in the master's order, without taking a lease."""
        body = self.http_get("/query_key?key=" + urllib.parse.quote(key, safe=""))
        return [r["type"] for r in json.loads(body).get("replicas", [])]

    def metric(self, name):
        m = re.search(rf"^{name} (\d+)$", self.http_get("/metrics"), re.M)
        self.assertIsNotNone(m, f"metric {name} missing")
        return int(m.group(1))

    def wait_for(self, what, pred, seconds=20):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if pred():
                return
            time.sleep(0.2)
        self.fail(f"{what} within {seconds} s")

    def test_object_evicted_from_memory_is_read_from_its_local_disk_file(self):
        path = os.path.join(self.tmp.name, "offload")
        os.mkdir(path)
        store = mcs.MooncakeDistributedStore()
        rc = store.setup("127.0.0.1", "P2PHANDSHAKE", SEGMENT, 16 * MiB, "tcp", "",
                         f"127.0.0.1:{self.rpc_port}", enable_ssd_offload=True,
                         ssd_offload_path=path)
        self.assertEqual(rc, 0)
        try:
            value = os.urandom(MiB)
            self.assertEqual(store.put("ssd/victim", value), 0)
            self.wait_for("no local-disk replica of ssd/victim appeared",
                          lambda: "LOCAL_DISK" in self.replica_types("ssd/victim"))

            # Fillers take the segment: the oldest object with a disk replica leaves memory first.
            rounds = 0
            while self.replica_types("ssd/victim") != ["LOCAL_DISK"] and rounds < 20:
                for i in range(8):
                    self.assertEqual(store.put(f"ssd/filler{rounds}/{i}", os.urandom(MiB)), 0)
                rounds += 1
            self.assertEqual(self.replica_types("ssd/victim"), ["LOCAL_DISK"],
                             "the fillers never pushed the victim's memory replica out")

            # Through the Python API too: one replica, on this client's disk.
            reps = store.get_replica_desc("ssd/victim")
            self.assertEqual(len(reps), 1)
            self.assertTrue(reps[0].is_local_disk_replica())
            self.assertFalse(reps[0].is_memory_replica())
            disk = reps[0].get_disk_descriptor()
            self.assertEqual(disk.object_size, len(value))
            self.assertTrue(disk.file_path.endswith("/ssd/victim"), disk.file_path)
            # And on the disk: one file under ssd_offload_path holds the object (header + value).
            files = [os.path.join(d, f) for d, _, names in os.walk(path) for f in names
                     if "victim" in f]
            self.assertEqual(len(files), 1, f"victim files under {path}: {files}")
            with open(files[0], "rb") as f:
                stored = f.read()
            self.assertGreater(len(stored), len(value))
            self.assertEqual(stored[-len(value):], value)

            before = self.metric("master_fallback_reads_total")
            self.assertEqual(store.get("ssd/victim"), value)
            # The client reports its disk reads on its next ping (every second).
            self.wait_for("master_fallback_reads_total did not count the get",
                          lambda: self.metric("master_fallback_reads_total") > before)
            self.assertEqual(self.replica_types("ssd/victim"), ["LOCAL_DISK"])
        finally:
            self.assertEqual(store.close(), 0)


if __name__ == "__main__":
    unittest.main()
