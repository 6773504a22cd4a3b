"""test_store_offload.py — upstream's SSD-offload arguments of setup() through mooncake.store.

setup(..., enable_ssd_offload=True, ssd_offload_path=DIR) against a real mooncake_master started
with --enable_offload: an object put into this store's own segment gets a local-disk replica
(files under DIR), and it still reads back byte-exact after its memory replica is gone.
Binaries come from MC_BUILD_DIR (default <repo>/build), the module from PYTHONPATH.
"""
import os
import subprocess
import tempfile
import time
import unittest

from test_store import BUILD, die_with_parent, free_port, wait_port  # noqa: E402

import mooncake.store as mcs  # noqa: E402

MiB = 1024 * 1024


class SsdOffloadTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.log = open(os.path.join(self.tmp.name, "master.log"), "wb")
        self.rpc_port = free_port()
        self.master = subprocess.Popen(
            [os.path.join(BUILD, "tools", "mooncake_master"), f"--rpc_port={self.rpc_port}",
             f"--metrics_port={free_port()}", "--rpc_address=127.0.0.1",
             "--metrics_host=127.0.0.1", "--enable_offload=true"],
            stdout=self.log, stderr=self.log, stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent)
        wait_port(self.rpc_port, self.master)
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

    def test_enable_ssd_offload_writes_local_disk_replicas(self):
        path = os.path.join(self.tmp.name, "offload")
        os.mkdir(path)
        store = mcs.MooncakeDistributedStore()
        rc = store.setup("127.0.0.1", "P2PHANDSHAKE", 64 * MiB, 16 * MiB, "tcp", "",
                         f"127.0.0.1:{self.rpc_port}", enable_ssd_offload=True,
                         ssd_offload_path=path)
        self.assertEqual(rc, 0)
        try:
            value = os.urandom(MiB)
            self.assertEqual(store.put("ssd/one", value), 0)
            disk = []
            deadline = time.monotonic() + 20
            while not disk and time.monotonic() < deadline:
                disk = [r for r in store.get_replica_desc("ssd/one")
                        if r.is_local_disk_replica()]
                time.sleep(0.2)
            self.assertTrue(disk, "no local-disk replica appeared within 20 s")
            files = [f for _, _, names in os.walk(path) for f in names]
            self.assertTrue(files, "enable_ssd_offload wrote nothing under ssd_offload_path")
            self.assertEqual(store.get("ssd/one"), value)
        finally:
            self.assertEqual(store.close(), 0)


if __name__ == "__main__":
    unittest.main()
