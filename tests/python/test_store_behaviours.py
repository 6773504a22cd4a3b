"""test_store_behaviours.py — MooncakeDistributedStore behaviours made to match upstream,
against a real mooncake_master + mooncake_client on loopback
(test_store.Cluster).

Each test states upstream's behaviour it checks (mooncake-integration/store/store_py.cpp,
mooncake-store/src/real_client.cpp, mooncake-integration/store/buffer_pool.cpp):
setup(dict) answers -600 for bad values; local_hostname without a port takes a port in
[MC_STORE_CLIENT_MIN_PORT, MC_STORE_CLIENT_MAX_PORT] with MC_STORE_CLIENT_SETUP_RETRIES attempts;
get_into_ranges answers -600 per range for ragged lists; batch_get_into_multi_buffers answers
-600 for buffers too small; BufferPool's rules; tenant_id; upsert_batch / upsert_parts /
put_from_with_metadata; get_offload_rpc_read_count.
"""
import ctypes
import os
import platform
import socket
import threading
import unittest

from test_store import Cluster, free_port

import mooncake.store as mcs
from mooncake import _upstream_names as names
import test_store_offload

MiB = 1 << 20
INTERNAL_ERROR = -1
INVALID_PARAMS = -600
OBJECT_NOT_FOUND = -704
NOT_SUPPORTED = -1012
PORT_ENV = ("MC_STORE_CLIENT_MIN_PORT", "MC_STORE_CLIENT_MAX_PORT",
            "MC_STORE_CLIENT_SETUP_RETRIES")

UPSTREAM_METHODS = (  # upstream store_py.cpp at 3b5a594: MooncakeDistributedStore's 98 methods
    "_get_pyclient_capsule alloc_from_mem_pool allocate_and_mount_segment batch_get_buffer "
    "batch_get_into batch_get_into_multi_buffer_ranges batch_get_into_multi_buffers "
    "batch_get_replica_desc batch_get_session_end batch_get_session_start batch_get_tensor "
    "batch_get_tensor_into batch_get_tensor_into_cuda batch_get_tensor_with_parallelism "
    "batch_get_tensor_with_parallelism_into batch_get_tensor_with_tp "
    "batch_get_tensor_with_tp_into batch_is_exist batch_pub_tensor batch_pub_tensor_with_tp "
    "batch_put_from batch_put_from_multi_buffer_ranges batch_put_from_multi_buffers "
    "batch_put_session_end batch_put_session_revoke batch_put_session_start batch_put_tensor "
    "batch_put_tensor_from batch_put_tensor_with_parallelism "
    "batch_put_tensor_with_parallelism_from batch_put_tensor_with_tp "
    "batch_put_tensor_with_tp_from batch_remove batch_replica_clear batch_upsert_from "
    "batch_upsert_pub_tensor batch_upsert_tensor batch_upsert_tensor_from "
    "batch_upsert_tensor_with_parallelism batch_upsert_tensor_with_parallelism_from close "
    "create_copy_task create_move_task get get_batch get_buffer get_hostname get_into "
    "get_into_ranges get_offload_rpc_read_count get_replica_desc get_size get_tensor "
    "get_tensor_into get_tensor_into_cuda get_tensor_with_parallelism "
    "get_tensor_with_parallelism_into get_tensor_with_tp get_tensor_with_tp_into health_check "
    "init_all is_exist load_tensor_from_safetensor mount_segment pub_tensor pub_tensor_with_tp "
    "put put_batch put_from put_from_with_metadata put_parts put_tensor put_tensor_from "
    "put_tensor_with_parallelism put_tensor_with_parallelism_from put_tensor_with_tp "
    "put_tensor_with_tp_from query_task register_buffer remove remove_all remove_by_regex "
    "save_tensor_to_safetensor setup setup_dummy unmount_and_free_segment "
    "unmount_local_disk_segment unmount_segment unregister_buffer upsert upsert_batch "
    "upsert_from upsert_parts upsert_pub_tensor upsert_tensor upsert_tensor_from "
    "upsert_tensor_with_parallelism upsert_tensor_with_parallelism_from "
).split()

CLUSTER = None


def setUpModule():
    global CLUSTER
    CLUSTER = Cluster()


def tearDownModule():
    if CLUSTER:
        CLUSTER.stop()


def new_store(host="127.0.0.1", **kw):
    s = mcs.MooncakeDistributedStore()
    rc = s.setup(host, "P2PHANDSHAKE", 16 * MiB, 16 * MiB, "tcp", "", CLUSTER.master_addr, **kw)
    if rc != 0:
        raise RuntimeError(f"setup returned {rc}")
    return s


class PortEnv:
    """Sets the port-selection variables for a block and restores them after."""

    def __init__(self, **values):
        self.values = values

    def __enter__(self):
        self.saved = {k: os.environ.get(k) for k in PORT_ENV}
        for k, v in self.values.items():
            os.environ[k] = str(v)
        return self

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class SetupTest(unittest.TestCase):
    def base(self, **extra):
        return dict({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                     "global_segment_size": "16MB", "local_buffer_size": "16MB",
                     "master_server_addr": CLUSTER.master_addr}, **extra)

    def test_dict_with_invalid_size_returns_invalid_params(self):
        # upstream's own test (test_distributed_object_store.py): setup(dict) with "50%" != 0,
        # no exception; RealClient::setup_internal returns INVALID_PARAMS.
        s = mcs.MooncakeDistributedStore()
        for extra in ({"global_segment_size": "50%"}, {"local_buffer_size": "100"},
                      {"local_buffer_size": "2 TiB"}, {"client_http_port": "port"}):
            self.assertEqual(s.setup(self.base(**extra)), INVALID_PARAMS, extra)
        self.assertEqual(s.setup({"local_hostname": "127.0.0.1"}), INVALID_PARAMS)
        self.assertEqual(s.setup({"metadata_server": "P2PHANDSHAKE"}), INVALID_PARAMS)
        # text with a NUL cannot be any option's value: -600 too, no exception
        self.assertEqual(s.setup(self.base(local_hostname="\0")), INVALID_PARAMS)
        self.assertEqual(s.health_check(), 1)  # nothing was set up

    def test_dict_ignores_unknown_keys_as_upstream(self):
        s = mcs.MooncakeDistributedStore()
        self.assertEqual(s.setup(self.base(no_such_key=1)), 0)
        self.assertEqual(s.put("behaviours/unknown-key", b"v"), 0)
        self.assertEqual(s.close(), 0)

    def test_hostname_without_port_gets_one_in_the_default_range(self):
        with PortEnv():
            for k in PORT_ENV:
                os.environ.pop(k, None)
            s = new_store("localhost")
        try:
            host, _, port = s.get_hostname().rpartition(":")
            self.assertEqual(host, "localhost")
            self.assertTrue(12300 <= int(port) <= 14300, port)
            self.assertEqual(s.put("behaviours/port", b"x"), 0)
            self.assertEqual(s.get("behaviours/port"), b"x")
        finally:
            s.close()

    def test_hostname_without_port_honours_the_range_variables(self):
        port = free_port()
        with PortEnv(MC_STORE_CLIENT_MIN_PORT=port, MC_STORE_CLIENT_MAX_PORT=port):
            s = new_store("localhost")
        try:
            self.assertEqual(s.get_hostname(), f"localhost:{port}")
        finally:
            s.close()

    def test_busy_ports_are_retried_then_setup_fails_with_minus_one(self):
        busy = socket.socket()
        busy.bind(("0.0.0.0", 0))
        busy.listen()
        port = busy.getsockname()[1]
        try:
            with PortEnv(MC_STORE_CLIENT_MIN_PORT=port, MC_STORE_CLIENT_MAX_PORT=port,
                         MC_STORE_CLIENT_SETUP_RETRIES=3):
                s = mcs.MooncakeDistributedStore()
                rc = s.setup("localhost", "P2PHANDSHAKE", 16 * MiB, 16 * MiB, "tcp", "",
                             CLUSTER.master_addr)
            self.assertEqual(rc, INTERNAL_ERROR)  # upstream: -1 after the retries
            self.assertEqual(s.get_hostname(), "")
        finally:
            busy.close()

    def test_explicit_port_is_kept(self):
        port = free_port()
        s = new_store(f"127.0.0.1:{port}")
        try:
            self.assertEqual(s.get_hostname(), f"127.0.0.1:{port}")
        finally:
            s.close()

    def test_tenant_id_is_accepted_and_keys_stay_in_the_default_tenant(self):
        # upstream against a master without --enable_multi_tenants (ours has no tenants): the
        # master resolves every request to the default tenant (rpc_service.cpp), so a client
        # with another tenant_id sets up and shares its keys with everyone.
        a = new_store(tenant_id="team-a")
        self.addCleanup(a.close)
        b = mcs.MooncakeDistributedStore()
        self.assertEqual(b.setup(self.base(tenant_id="team-b")), 0)
        self.addCleanup(b.close)
        key = f"behaviours/tenant/{os.getpid()}"
        self.assertEqual(a.put(key, b"shared"), 0)
        self.assertEqual(b.get(key), b"shared")
        self.assertEqual(new_store().get(key), b"shared")


class ReadWriteTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.store = new_store()
        cls.alloc = mcs.MooncakeHostMemAllocator()
        cls.ptr = cls.alloc.alloc(4 * MiB)
        assert cls.store.register_buffer(cls.ptr, 4 * MiB) == 0

    @classmethod
    def tearDownClass(cls):
        cls.store.unregister_buffer(cls.ptr)
        cls.store.close()
        cls.alloc.free(cls.ptr)

    def put_key(self, name, value):
        key = f"behaviours/{name}/{os.getpid()}"
        self.assertEqual(self.store.put(key, value), 0)
        return key

    def test_get_into_ranges_ragged_lists_answer_minus_600_per_range(self):
        key = self.put_key("ranges", b"0123456789")
        s, base = self.store, self.ptr
        # top level of different lengths: shaped by all_keys / all_dst_offsets, as upstream
        self.assertEqual(s.get_into_ranges([base, base + 64], [[key]], [[[0, 4]]], [[[0]]],
                                           [[[2]]]),
                         [[[INVALID_PARAMS, INVALID_PARAMS]], [[INVALID_PARAMS]]])
        # per buffer: keys and offsets of different lengths
        self.assertEqual(s.get_into_ranges([base], [[key, key]], [[[0], [1, 2]]], [[[0]]],
                                           [[[1]]]),
                         [[[INVALID_PARAMS], [INVALID_PARAMS, INVALID_PARAMS]]])
        # per key: dst, src and size lists of different lengths; the other key still reads
        self.assertEqual(s.get_into_ranges([base], [[key, key]], [[[0, 4], [8]]],
                                           [[[0], [5]]], [[[1], [3]]]),
                         [[[INVALID_PARAMS, INVALID_PARAMS], [3]]])
        self.assertEqual(ctypes.string_at(base + 8, 3), b"567")

    def test_multi_buffers_too_small_is_invalid_params(self):
        key = self.put_key("multi", b"x" * 100)
        got = self.store.batch_get_into_multi_buffers(
            [key, key], [[self.ptr, self.ptr + 64], [self.ptr + 256]], [[10, 10], [100]])
        self.assertEqual(got, [INVALID_PARAMS, 100])

    def test_upsert_batch_and_parts(self):
        keys = [f"behaviours/upsert/{os.getpid()}/{i}" for i in range(3)]
        self.assertEqual(self.store.upsert_batch(keys, [b"a", b"bb", b"ccc"]), 0)
        self.assertEqual(self.store.get_batch(keys), [b"a", b"bb", b"ccc"])
        self.assertEqual(self.store.upsert_batch(keys, [b"1", b"22", b"333"]), 0)
        self.assertEqual(self.store.get_batch(keys), [b"1", b"22", b"333"])
        self.assertEqual(self.store.upsert_batch(keys, [b"1"]), INVALID_PARAMS)
        self.assertEqual(self.store.upsert_batch(["", keys[0]], [b"x", b"y"]), -400)
        self.assertEqual(self.store.get(keys[0]), b"y")  # the valid key was still upserted
        self.assertEqual(self.store.upsert_parts(keys[1], b"he", b"llo"), 0)
        self.assertEqual(self.store.get(keys[1]), b"hello")
        self.assertEqual(self.store.upsert_parts(keys[1], b"new"), 0)
        self.assertEqual(self.store.get(keys[1]), b"new")

    def test_put_from_with_metadata(self):
        ctypes.memmove(self.ptr + MiB, b"HEAD", 4)
        ctypes.memmove(self.ptr + 2 * MiB, b"payload", 7)
        key = f"behaviours/meta/{os.getpid()}"
        self.assertEqual(self.store.put_from_with_metadata(key, self.ptr + 2 * MiB, self.ptr + MiB,
                                                           7, 4), 0)
        self.assertEqual(self.store.get(key), b"HEADpayload")
        unreg = ctypes.create_string_buffer(16)
        self.assertEqual(self.store.put_from_with_metadata(
            key + "x", ctypes.addressof(unreg), self.ptr, 4, 4), INVALID_PARAMS)
        self.assertEqual(self.store.is_exist(key + "x"), 0)

    def test_offload_read_count_is_zero_without_disk_reads(self):
        self.assertEqual(self.store.get_offload_rpc_read_count(), 0)
        self.assertEqual(mcs.MooncakeDistributedStore().get_offload_rpc_read_count(), 0)


def unmapped_address(size):
    """An address range that is certainly not mapped in this process: mapped, then unmapped."""
    import ctypes
    import mmap
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    addr = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE,
                     mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, -1, 0)
    assert addr not in (None, ctypes.c_void_p(-1).value)
    assert libc.munmap(addr, size) == 0
    return addr


class BogusPointerTest(unittest.TestCase):
    """A pointer to memory that is not there is refused at registration, so no later transfer
    into it can crash the process (a fresh-user attack: register_buffer of an unmapped range
    returned 0, then get_into segfaulted)."""

    def test_register_buffer_of_unmapped_memory_is_refused(self):
        store = new_store()
        try:
            addr = unmapped_address(1 * MiB)
            self.assertEqual(store.register_buffer(addr, 1 * MiB), INVALID_PARAMS)
            key = f"behaviours/bogus/{os.getpid()}"
            self.assertEqual(store.put(key, b"x" * 4096), 0)
            self.assertEqual(store.get_into(key, addr, 4096), INVALID_PARAMS)
        finally:
            store.close()

    def test_engine_refuses_unmapped_memory_and_huge_reads(self):
        from mooncake.engine import TransferEngine
        te = TransferEngine()
        self.assertEqual(te.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", ""), 0)
        addr = unmapped_address(1 * MiB)
        self.assertNotEqual(te.register_memory(addr, 1 * MiB), 0)
        self.assertEqual(te.write_bytes_to_buffer(addr, b"x" * 10, 10), -1)
        buf = te.allocate_managed_buffer(1 * MiB)
        self.assertNotEqual(buf, 0)
        # the length is checked before anything is allocated: no MemoryError
        self.assertEqual(te.read_bytes_from_buffer(buf, 2 ** 62), -1)
        self.assertEqual(len(te.read_bytes_from_buffer(buf, 4096)), 4096)
        self.assertEqual(te.free_managed_buffer(buf, 1 * MiB), 0)


class BufferPoolRulesTest(unittest.TestCase):
    """upstream buffer_pool.cpp: every refusal is a RuntimeError; sizes are size_t."""

    @classmethod
    def setUpClass(cls):
        cls.store = new_store()

    @classmethod
    def tearDownClass(cls):
        cls.store.close()

    def test_constructor_rules(self):
        with self.assertRaisesRegex(RuntimeError, "not initialized"):
            mcs.BufferPool(mcs.MooncakeDistributedStore())
        for kw in ({"alignment": 0}, {"min_size_class": 0}):
            with self.assertRaisesRegex(RuntimeError, "must be positive"):
                mcs.BufferPool(self.store, **kw)
        for alignment in (4, 24, 3 * MiB):
            with self.assertRaisesRegex(RuntimeError, "power of two"):
                mcs.BufferPool(self.store, alignment=alignment)
        with self.assertRaises(TypeError):
            mcs.BufferPool(self.store, max_bytes=-1)
        mcs.BufferPool(self.store, alignment=8).close()

    def test_sizes(self):
        pool = mcs.BufferPool(self.store, max_bytes=MiB, max_size_class=4096)
        empty = pool.acquire(0)  # upstream serves size 0
        self.assertEqual(empty.size, 0)
        self.assertEqual(len(empty.buffer), 0)
        empty.release()
        big = pool.acquire(8192)  # above max_size_class: served (an "oversize" allocation)
        self.assertEqual(big.size, 8192)
        big.release()
        with self.assertRaisesRegex(RuntimeError, "exceeds pool capacity"):
            pool.acquire(MiB + 1)
        with self.assertRaises(TypeError):
            pool.acquire(-1)
        with self.assertRaisesRegex(RuntimeError, "timeout must be non-negative"):
            pool.acquire(10, timeout=-1)
        pool.close()

    def test_close_with_live_leases_raises_and_pool_stays_usable(self):
        pool = mcs.BufferPool(self.store, max_bytes=MiB)
        lease = pool.acquire(100)
        with self.assertRaisesRegex(RuntimeError, "active leases"):
            pool.close()
        other = pool.acquire(100)  # still open
        other.release()
        lease.release()
        pool.close()
        with self.assertRaisesRegex(RuntimeError, "closed"):
            pool.acquire(10)

    def test_release_with_exported_views_raises(self):
        pool = mcs.BufferPool(self.store, max_bytes=MiB)
        lease = pool.acquire(64)
        view = lease.buffer
        part = view[8:16]
        del view
        with self.assertRaisesRegex(RuntimeError, "exported views"):
            lease.release()  # a slice keeps the export alive
        part[:] = b"12345678"
        del part
        lease.release()
        lease.release()  # idempotent
        with self.assertRaisesRegex(RuntimeError, "lease is closed"):
            lease.ptr
        with self.assertRaisesRegex(RuntimeError, "lease is closed"):
            lease.buffer
        pool.close()

    def test_views_reach_the_registered_bytes(self):
        pool = mcs.BufferPool(self.store, max_bytes=MiB)
        with pool.acquire(5) as lease:
            lease.buffer[:] = b"bytes"
            key = f"behaviours/pool/{os.getpid()}"
            self.assertEqual(self.store.put_from(key, lease.ptr, 5), 0)
            self.assertEqual(self.store.get(key), b"bytes")
        pool.close()


class ReadmeTableTest(unittest.TestCase):
    """python/README.md has a row for each of upstream's methods, and each row that does not say
    "absent" or "in progress" names methods this build has, documented."""

    def test_every_upstream_method_has_a_row(self):
        readme = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))), "python", "README.md")
        with open(readme) as f:
            text = f.read()
        table = text[text.index("## Upstream's `MooncakeDistributedStore`"):
                     text.index("## The module's other names")]
        rows = {}
        for line in table.splitlines():
            if line.startswith("| `"):
                first, verdict = line[2:].split(" | ", 1)
                for name in first.split("`")[1::2]:
                    rows[name.split("(")[0]] = verdict
        self.assertEqual(len(UPSTREAM_METHODS), 98)
        missing = [m for m in UPSTREAM_METHODS if m not in rows]
        self.assertEqual(missing, [])
        for name, verdict in rows.items():
            if verdict.startswith(("same", "differs")):
                doc = getattr(mcs.MooncakeDistributedStore, name).__doc__ or ""
                self.assertIn("->", doc, name)


def mempolicy():
    """(mode, nodemask word 0) of the calling thread (get_mempolicy(2), x86_64)."""
    libc = ctypes.CDLL(None, use_errno=True)
    mode = ctypes.c_int(-1)
    mask = (ctypes.c_ulong * 16)()
    if libc.syscall(ctypes.c_long(239), ctypes.byref(mode), mask, ctypes.c_ulong(16 * 64),
                    None, ctypes.c_ulong(0)) != 0:
        raise OSError(ctypes.get_errno(), "get_mempolicy")
    return mode.value, mask[0]


class UpstreamNamesTest(unittest.TestCase):
    """The names mooncake.store re-exports from mooncake._upstream_names."""

    def test_task_enums_have_upstream_values(self):
        self.assertEqual([(m.name, m.value) for m in names.TaskType],
                         [("REPLICA_COPY", 0), ("REPLICA_MOVE", 1)])
        self.assertEqual([(m.name, m.value) for m in names.TaskStatus],
                         [("PENDING", 0), ("PROCESSING", 1), ("FAILED", 2), ("SUCCESS", 3)])

    @unittest.skipUnless(platform.machine() == "x86_64" and
                         os.path.exists("/sys/devices/system/node/node0/cpulist"),
                         "needs x86_64 Linux with NUMA node 0")
    def test_bind_to_numa_node(self):
        with open("/sys/devices/system/node/node0/cpulist") as f:
            cpus = names._cpulist(f.read())
        seen = {}

        def bind(node):
            seen["before"] = mempolicy()
            names.bind_to_numa_node(node)
            seen["after"] = mempolicy()
            seen["cpus"] = os.sched_getaffinity(0)

        t = threading.Thread(target=bind, args=(0,))
        t.start()
        t.join()
        self.assertEqual(seen["before"][0], 0)  # MPOL_DEFAULT
        self.assertEqual(seen["after"], (1, 1))  # MPOL_PREFERRED, node 0
        self.assertEqual(seen["cpus"], cpus)
        self.assertEqual(mempolicy()[0], 0)  # only the calling thread changed
        with self.assertLogs("mooncake.store", "WARNING"):
            t = threading.Thread(target=bind, args=(4095,))
            t.start()
            t.join()
        self.assertEqual(seen["after"], seen["before"])  # nothing applied
        with self.assertRaises(TypeError):
            names.bind_to_numa_node("0")


class OffloadReadCountTest(test_store_offload.SsdOffloadTest):
    """get_offload_rpc_read_count counts this client's reads from disk replicas (upstream: the
    offload-RPC reads of its real client; pybind_client_test expects +1 for one read)."""

    test_object_evicted_from_memory_is_read_from_its_local_disk_file = None  # run there

    def test_a_read_from_the_local_disk_counts_once(self):
        path = os.path.join(self.tmp.name, "offload")
        os.mkdir(path)
        store = mcs.MooncakeDistributedStore()
        self.assertEqual(store.setup("127.0.0.1", "P2PHANDSHAKE", test_store_offload.SEGMENT,
                                     16 * MiB, "tcp", "", f"127.0.0.1:{self.rpc_port}",
                                     enable_ssd_offload=True, ssd_offload_path=path), 0)
        try:
            value = os.urandom(MiB)
            self.assertEqual(store.put("count/victim", value), 0)
            self.wait_for("no local-disk replica of count/victim appeared",
                          lambda: "LOCAL_DISK" in self.replica_types("count/victim"))
            rounds = 0
            while self.replica_types("count/victim") != ["LOCAL_DISK"] and rounds < 20:
                for i in range(8):
                    self.assertEqual(store.put(f"count/filler{rounds}/{i}", os.urandom(MiB)), 0)
                rounds += 1
            self.assertEqual(self.replica_types("count/victim"), ["LOCAL_DISK"])
            before = store.get_offload_rpc_read_count()
            self.assertEqual(store.get("count/victim"), value)
            self.assertEqual(store.get_offload_rpc_read_count(), before + 1)
        finally:
            self.assertEqual(store.close(), 0)




if __name__ == "__main__":
    unittest.main()
