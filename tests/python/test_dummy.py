"""Dummy clients from Python: MooncakeDistributedStore.setup_dummy() against a real mooncake_master
and mooncake_client on loopback (upstream's dummy/real split, SGLang's standalone_storage mode).

Bytes are verified exactly through dummies (copying, batch and zero-copy calls on memory from
MooncakeHostMemAllocator and alloc_from_mem_pool, two dummies at once, one in another process);
the real client killed and restarted (calls fail with -900, then recover with the registered
buffers usable); a dummy process killed (the real client unmaps its shared memory).
"""
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_store import BUILD, free_port, die_with_parent, wait_port, mcs  # noqa: E402

MiB = 1 << 20
RPC_FAIL = -900
NO_AVAILABLE_HANDLE = -200


class RealClusterTest(unittest.TestCase):
    """A master and one mooncake_client on a known --port (its dummy socket)."""

    @classmethod
    def setUpClass(cls):
        cls.logdir = tempfile.TemporaryDirectory(prefix="mc_dummy_")
        cls.rpc_port = free_port()
        cls.master_addr = f"127.0.0.1:{cls.rpc_port}"
        cls.master = cls.spawn("master", [
            os.path.join(BUILD, "tools", "mooncake_master"), f"--rpc_port={cls.rpc_port}",
            f"--metrics_port={free_port()}", "--rpc_address=127.0.0.1",
            "--metrics_host=127.0.0.1"])
        wait_port(cls.rpc_port, cls.master)
        cls.port = free_port()
        cls.real = cls.start_real()

    @classmethod
    def spawn(cls, name, argv, stdout=None):
        log = open(os.path.join(cls.logdir.name, name + ".log"), "ab")
        proc = subprocess.Popen(argv, stdout=stdout or log, stderr=log, stdin=subprocess.DEVNULL,
                                preexec_fn=die_with_parent)
        log.close()
        return proc

    @classmethod
    def start_real(cls):
        proc = cls.spawn("client", [
            os.path.join(BUILD, "tools", "mooncake_client"), "--global_segment_size=128MB",
            "--host=127.0.0.1", f"--port={cls.port}", "--metadata_server=P2PHANDSHAKE",
            f"--master_server_address={cls.master_addr}"], stdout=subprocess.PIPE)
        line = proc.stdout.readline().decode()
        if not line.startswith("mooncake_client ready"):
            proc.kill()
            proc.wait()
            raise RuntimeError("mooncake_client did not start: " + line)
        return proc

    @classmethod
    def tearDownClass(cls):
        for proc in (cls.real, cls.master):
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout:
                proc.stdout.close()
        cls.logdir.cleanup()

    def dummy(self, buffer=16 * MiB):
        d = mcs.MooncakeDistributedStore()
        self.assertEqual(d.setup_dummy(64 * MiB, buffer, f"127.0.0.1:{self.port}"), 0)
        self.addCleanup(d.close)
        return d

    def shm_mappings(self):
        with open(f"/proc/{self.real.pid}/maps") as f:
            return sum("memfd:mooncake_shm" in line for line in f)


class DummyTest(RealClusterTest):
    def test_setup_dummy_without_a_real_client_returns_minus_one(self):
        d = mcs.MooncakeDistributedStore()
        self.assertEqual(d.setup_dummy(0, MiB, f"127.0.0.1:{free_port()}"), -1)
        self.assertEqual(d.health_check(), 1)
        self.assertEqual(d.setup_dummy(0, MiB, "no-port"), -1)
        self.assertEqual(d.alloc_from_mem_pool(4096), 0)  # not set up

    def test_put_get_batch_exist_remove_byte_exact(self):
        a, b = self.dummy(), self.dummy()
        self.assertEqual(a.health_check(), 0)
        self.assertEqual(a.get_hostname(), "")
        values = {f"py/dummy/{i}": os.urandom(n) for i, n in enumerate([1, 4096, 3 * MiB + 5])}
        for k, v in values.items():
            self.assertEqual(a.put(k, v), 0)
        for k, v in values.items():
            self.assertEqual(b.get(k), v)
            self.assertEqual(b.get_size(k), len(v))
            self.assertEqual(b.is_exist(k), 1)
        keys = [f"py/dummy/batch/{i}" for i in range(8)]
        vals = [os.urandom(100000 + i) for i in range(8)]
        self.assertEqual(b.put_batch(keys, vals), 0)
        self.assertEqual(a.get_batch(keys), vals)
        self.assertEqual(a.batch_is_exist(keys + ["py/dummy/none"]), [1] * 8 + [0])
        self.assertEqual(len(a.get_replica_desc(keys[0])), 1)
        self.assertEqual(a.remove(keys[0], force=True), 0)
        self.assertEqual(b.get(keys[0]), b"")
        self.assertEqual(a.remove_by_regex("^py/dummy/", force=True), 10)

    def test_put_larger_than_the_local_buffer_is_no_available_handle(self):
        d = self.dummy(buffer=MiB)
        self.assertEqual(d.put("py/dummy/big", b"x" * (2 * MiB)), NO_AVAILABLE_HANDLE)
        self.assertEqual(d.put("py/dummy/fits", b"x" * MiB), 0)
        self.assertEqual(d.remove("py/dummy/fits", force=True), 0)

    def test_zero_copy_on_host_allocator_and_mem_pool_memory(self):
        a, b = self.dummy(), self.dummy()
        alloc = mcs.MooncakeHostMemAllocator()
        src = alloc.alloc(4 * MiB)
        self.addCleanup(alloc.free, src)
        dst = b.alloc_from_mem_pool(4 * MiB)
        self.assertNotEqual(dst, 0)
        self.assertNotEqual(a.register_buffer(src, MiB), 0)  # not the allocation's size
        self.assertEqual(a.register_buffer(src, 4 * MiB), 0)
        self.assertEqual(b.register_buffer(dst, 4 * MiB), 0)
        data = os.urandom(4 * MiB)
        ctypes.memmove(src, data, len(data))
        keys = [f"py/dummy/zc/{i}" for i in range(4)]
        ptrs = [src + i * MiB for i in range(4)]
        self.assertEqual(a.batch_put_from(keys, ptrs, [MiB] * 4), [0] * 4)
        self.assertEqual(b.batch_get_into(keys, [dst + i * MiB for i in range(4)], [MiB] * 4),
                         [MiB] * 4)
        self.assertEqual(ctypes.string_at(dst, 4 * MiB), data)
        self.assertEqual(b.get_into(keys[1], dst, MiB), MiB)
        self.assertEqual(ctypes.string_at(dst, MiB), data[MiB:2 * MiB])
        self.assertEqual(a.unregister_buffer(src), 0)
        self.assertEqual(a.remove_by_regex("^py/dummy/zc/", force=True), 4)

    def test_a_killed_dummy_process_has_its_memory_unmapped(self):
        before = self.shm_mappings()
        code = textwrap.dedent(f"""
            import sys
            sys.path[:0] = {sys.path!r}
            import mooncake.store as mcs
            d = mcs.MooncakeDistributedStore()
            assert d.setup_dummy(0, 1 << 20, "127.0.0.1:{self.port}") == 0
            p = d.alloc_from_mem_pool(1 << 20)
            assert d.register_buffer(p, 1 << 20) == 0
            assert d.put("py/dummy/child", b"from the child") == 0
            print("ready", flush=True)
            sys.stdin.read()
        """)
        child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, preexec_fn=die_with_parent)
        try:
            self.assertEqual(child.stdout.readline().strip(), b"ready")
            self.assertEqual(self.shm_mappings(), before + 2)
            d = self.dummy()  # two dummies in two processes at once
            self.assertEqual(d.get("py/dummy/child"), b"from the child")
        finally:
            child.kill()
            child.wait()
            child.stdin.close()
            child.stdout.close()
        deadline = time.monotonic() + 5
        while self.shm_mappings() != before + 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual(self.shm_mappings(), before + 1)  # only this process's dummy is left
        self.assertEqual(d.remove("py/dummy/child", force=True), 0)


class RestartTest(RealClusterTest):
    def test_real_client_killed_then_restarted(self):
        d = self.dummy()
        buf = d.alloc_from_mem_pool(MiB)
        self.assertEqual(d.register_buffer(buf, MiB), 0)
        self.assertEqual(d.put("py/restart/before", b"1"), 0)
        type(self).real.kill()
        type(self).real.wait()
        type(self).real.stdout.close()
        t0 = time.monotonic()
        while d.put("py/restart/during", b"2") != RPC_FAIL and time.monotonic() - t0 < 5:
            time.sleep(0.02)
        self.assertLess(time.monotonic() - t0, 3)
        t1 = time.monotonic()
        self.assertEqual(d.put("py/restart/during", b"2"), RPC_FAIL)
        self.assertEqual(d.get("py/restart/before"), b"")
        self.assertLess(time.monotonic() - t1, 0.5)
        self.assertEqual(d.health_check(), 2)
        type(self).real = self.start_real()
        t0 = time.monotonic()
        while d.put("py/restart/after", b"3") != 0 and time.monotonic() - t0 < 10:
            time.sleep(0.1)
        self.assertEqual(d.get("py/restart/after"), b"3")
        self.assertEqual(d.health_check(), 0)
        data = os.urandom(MiB)
        ctypes.memmove(buf, data, MiB)
        # puts placed on the killed client's segment (same endpoint) fail until the master
        # expires it
        t0 = time.monotonic()
        while d.put_from("py/restart/zc", buf, MiB) != 0 and time.monotonic() - t0 < 20:
            time.sleep(0.1)
        ctypes.memset(buf, 0, MiB)
        self.assertEqual(d.get_into("py/restart/zc", buf, MiB), MiB)
        self.assertEqual(ctypes.string_at(buf, MiB), data)


if __name__ == "__main__":
    unittest.main()
