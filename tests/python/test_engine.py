"""test_engine.py — mooncake.engine (upstream's Python Transfer Engine) between real processes.

Each test spawns peer processes (this interpreter, PEER_SRC below) that create a TransferEngine,
initialize it ("127.0.0.1", "P2PHANDSHAKE", protocol, ""), allocate a managed buffer and register
a plain (ctypes) buffer, fill both with seeded random bytes, then run the TransferEngine calls
the test sends them over a pipe (one JSON line per call). The test keeps a model of every
region's bytes and compares it with the SHA-256 of each peer's memory after every step, so a
byte moved wrongly, or an error that still moved bytes, fails. Transports: tcp (MC_DISABLE_SHM=1),
shm (same host, the default) and rdma (protocol "rdma" with MC_DISABLE_SHM=1: UCX, over its
tcp/shm transports on a host without an RDMA device). The last class shares an engine with a
MooncakeDistributedStore against a real mooncake_master (setup(..., engine=...)).

Runs under pytest and unittest; the module is found on PYTHONPATH, else in <MC_BUILD_DIR>/python.
"""
import gc
import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("MC_BUILD_DIR", os.path.join(REPO, "build"))
try:
    import mooncake.engine as me
except ImportError:
    sys.path.insert(0, os.path.join(BUILD, "python"))
    import mooncake.engine as me  # noqa: E402
import mooncake.store as mcs  # noqa: E402
import procstop  # noqa: E402  (tests/python, beside this file)

REGION = 6 << 20  # bytes per peer region: a transfer of 5 MiB crosses the 4 MiB slice size

PEER_SRC = r"""
import ctypes, hashlib, json, random, signal, sys
try:
    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: die with the test
except Exception:
    pass
import mooncake.engine as me
proto, size, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
metadata, local_hostname = sys.argv[4], sys.argv[5]
te = me.TransferEngine()
rc = te.initialize(local_hostname, metadata, proto, "")
if rc != 0:
    print(json.dumps({"error": rc}), flush=True)
    sys.exit(1)
managed = te.allocate_managed_buffer(size)
plain_buf = ctypes.create_string_buffer(size)
plain = ctypes.addressof(plain_buf)
assert managed != 0 and te.register_memory(plain, size) == 0
rng = random.Random(seed)
for addr in (managed, plain):
    assert te.write_bytes_to_buffer(addr, rng.randbytes(size), size) == 0
# the segment name as the engine serves it: "<mooncake.engine.InnerTransferEngine NAME>"
name = repr(te.get_engine()).rstrip(">").split()[-1]
print(json.dumps({"segment": name, "port": te.get_rpc_port(),
                  "managed": managed, "plain": plain}), flush=True)
for line in sys.stdin:
    cmd = json.loads(line)
    if cmd["op"] == "hash":
        data = te.read_bytes_from_buffer(cmd["addr"], cmd["len"])
        out = hashlib.sha256(data).hexdigest() if isinstance(data, bytes) else data
    elif cmd["op"] == "call":
        out = getattr(te, cmd["method"])(*cmd["args"])
        if isinstance(out, bytes):
            out = out.hex()
    else:
        break
    print(json.dumps({"result": out}), flush=True)
"""


def die_with_parent():
    """In a child before exec: SIGTERM when the test process dies, even by a crash."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha(b):
    return hashlib.sha256(b).hexdigest()


class Peer:
    """A process with an initialized TransferEngine and two filled regions."""

    def __init__(self, proto="tcp", env=None, seed=None, metadata="P2PHANDSHAKE",
                 local_hostname="127.0.0.1"):
        self.seed = random.randrange(1 << 30) if seed is None else seed
        e = dict(os.environ)
        e.update(env or {})
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PEER_SRC, proto, str(REGION), str(self.seed), metadata,
             local_hostname],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=e, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("peer died at start:\n" + self.stderr())
        info = json.loads(line)
        if "error" in info:
            self.close()
            raise RuntimeError(f"peer initialize returned {info['error']}:\n" + self.stderr())
        self.segment, self.port = info["segment"], info["port"]
        self.managed, self.plain = info["managed"], info["plain"]
        rng = random.Random(self.seed)
        # the model: what each region must hold
        self.model = {self.managed: bytearray(rng.randbytes(REGION)),
                      self.plain: bytearray(rng.randbytes(REGION))}

    def stderr(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]

    def _ask(self, cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("peer died:\n" + self.stderr())
        return json.loads(line)["result"]

    def call(self, method, *args):
        return self._ask({"op": "call", "method": method, "args": list(args)})

    def region_hash(self, base):
        return self._ask({"op": "hash", "addr": base, "len": REGION})

    def check(self, tc):
        for base, data in self.model.items():
            tc.assertEqual(self.region_hash(base), sha(data),
                           f"peer {self.segment} region {base:#x} differs from the model")

    def bytes_at(self, addr, n):
        for base, data in self.model.items():
            if base <= addr and addr + n <= base + REGION:
                return data[addr - base:addr - base + n]
        raise AssertionError("address outside the model")

    def put(self, addr, b):
        for base, data in self.model.items():
            if base <= addr and addr + len(b) <= base + REGION:
                data[addr - base:addr - base + len(b)] = b
                return
        raise AssertionError("address outside the model")

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.flush()
            except (BrokenPipeError, OSError):
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        self.log.close()


class PeersCase(unittest.TestCase):
    PROTO = "tcp"
    ENV = {"MC_DISABLE_SHM": "1"}

    def spawn(self, env=None, proto=None, **kw):
        e = dict(self.ENV)
        e.update(env or {})
        p = Peer(proto or self.PROTO, e, **kw)
        self.addCleanup(p.close)
        return p


class TransfersMixin:
    """Every transfer form, both ways, checked against the model on both peers."""

    def write(self, src, dst, s_addr, d_addr, n):
        dst.put(d_addr, src.bytes_at(s_addr, n))

    def read(self, src, dst, s_addr, d_addr, n):  # src reads dst's bytes into s_addr
        src.put(s_addr, dst.bytes_at(d_addr, n))

    def test_all_forms_both_ways(self):
        a, b = self.spawn(), self.spawn()
        for p in (a, b):  # upstream's P2PHANDSHAKE naming: "<host>:<rpc port in 15000..17000>"
            self.assertEqual(p.segment, f"127.0.0.1:{p.port}")
            self.assertTrue(15000 <= p.port <= 17000, p.port)
        for x, y in ((a, b), (b, a)):
            # single sync write (crosses a slice boundary) and read
            n = (5 << 20) + 3
            self.assertEqual(x.call("transfer_sync_write", y.segment, x.managed, y.plain + 17, n), 0)
            self.write(x, y, x.managed, y.plain + 17, n)
            self.assertEqual(x.call("transfer_sync_read", y.segment, x.plain + 5, y.managed, 4099), 0)
            self.read(x, y, x.plain + 5, y.managed, 4099)
            # transfer_sync with an opcode
            self.assertEqual(x.call("transfer_sync", y.segment, x.plain, y.managed + 64, 1000,
                                    int(me.Write)), 0)
            self.write(x, y, x.plain, y.managed + 64, 1000)
            self.assertEqual(x.call("transfer_sync", y.segment, x.managed + 999, y.plain, 333,
                                    int(me.Read)), 0)
            self.read(x, y, x.managed + 999, y.plain, 333)
            x.check(self)
            y.check(self)
            # batch sync write / read / opcode form
            srcs = [x.plain + i * 70000 for i in range(4)]
            dsts = [y.managed + (1 << 20) + i * 90000 for i in range(4)]
            lens = [1, 4096, 65537, 12345]
            self.assertEqual(x.call("batch_transfer_sync_write", y.segment, srcs, dsts, lens), 0)
            for s, d, n in zip(srcs, dsts, lens):
                self.write(x, y, s, d, n)
            local = [x.managed + 2100000, x.managed + 2200000]
            self.assertEqual(x.call("batch_transfer_sync_read", y.segment, local,
                                    [y.plain + 100, y.plain + 900000], [5000, 6000]), 0)
            self.read(x, y, local[0], y.plain + 100, 5000)
            self.read(x, y, local[1], y.plain + 900000, 6000)
            self.assertEqual(x.call("batch_transfer_sync", y.segment, [x.managed + 7],
                                    [y.plain + 3000000], [777], int(me.Write)), 0)
            self.write(x, y, x.managed + 7, y.plain + 3000000, 777)
            # async batches collected with get_batch_transfer_status
            ids = [x.call("batch_transfer_async_write", y.segment, [x.plain + 2000000],
                          [y.managed + 2000000], [300000]),
                   x.call("batch_transfer_async_read", y.segment, [x.managed + 4000000],
                          [y.plain + 4000000], [200000]),
                   x.call("batch_transfer_async", y.segment, [x.plain + 5000000],
                          [y.managed + 5000000], [100000], int(me.Write))]
            self.assertTrue(all(i > 0 for i in ids), ids)
            self.assertEqual(len(set(ids)), 3)
            self.assertEqual(x.call("get_batch_transfer_status", ids), 0)
            self.write(x, y, x.plain + 2000000, y.managed + 2000000, 300000)
            self.read(x, y, x.managed + 4000000, y.plain + 4000000, 200000)
            self.write(x, y, x.plain + 5000000, y.managed + 5000000, 100000)
            # the ids were freed
            self.assertEqual(x.call("get_batch_transfer_status", ids[:1]), -1)
            self.assertEqual(x.call("transfer_check_status", ids[1]), -1)
            # transfer_submit_write polled with transfer_check_status (wait for a state)
            bid = x.call("transfer_submit_write", y.segment, x.managed + 123, y.plain + 5500000,
                         400000)
            self.assertGreater(bid, 0)
            deadline = time.monotonic() + 30
            st = 0
            while st == 0 and time.monotonic() < deadline:
                st = x.call("transfer_check_status", bid)
            self.assertEqual(st, 1)
            self.assertEqual(x.call("transfer_check_status", bid), -1)  # freed
            self.write(x, y, x.managed + 123, y.plain + 5500000, 400000)
            x.check(self)
            y.check(self)

    def test_unregistered_peer_range_moves_nothing(self):
        a, b = self.spawn(), self.spawn()
        # straddles the end of b's plain region: refused before any byte moves
        self.assertEqual(a.call("transfer_sync_write", b.segment, a.plain,
                                b.plain + REGION - 10, 100), -1)
        self.assertEqual(a.call("batch_transfer_sync_write", b.segment, [a.plain, a.managed],
                                [b.plain, b.plain + REGION - 1], [64, 2]), -1)
        self.assertEqual(a.call("transfer_sync_read", b.segment, a.plain, 4096, 100), -1)
        bid = a.call("batch_transfer_async_write", b.segment, [a.managed], [4096], [1])
        if bid:
            self.assertEqual(a.call("get_batch_transfer_status", [bid]), -1)
        # the first request of the batch above may have run (upstream's batch semantics);
        # apply it to the model, everything else must be untouched
        self.write(a, b, a.plain, b.plain, 64)
        a.check(self)
        b.check(self)


class TcpTransfers(TransfersMixin, PeersCase):
    PROTO = "tcp"
    ENV = {"MC_DISABLE_SHM": "1"}


class ShmTransfers(TransfersMixin, PeersCase):
    PROTO = "tcp"
    ENV = {}


class RdmaTransfers(TransfersMixin, PeersCase):
    PROTO = "rdma"
    ENV = {"MC_DISABLE_SHM": "1"}

    def setUp(self):
        if not me._engine._RDMA_TRANSPORT:
            self.skipTest("this build has no rdma transport (USE_RDMA=OFF)")


class ErrorPaths(PeersCase):
    def test_killed_peer_fails_within_the_timeout(self):
        env = {"MC_TRANSFER_TIMEOUT": "5"}
        a, b = self.spawn(env), self.spawn(env)
        self.assertEqual(a.call("transfer_sync_write", b.segment, a.plain, b.plain, 1 << 20), 0)
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait()
        t0 = time.monotonic()
        self.assertEqual(a.call("transfer_sync_write", b.segment, a.plain, b.plain, 1 << 20), -1)
        self.assertEqual(a.call("transfer_sync_read", b.segment, a.plain, b.plain, 1 << 20), -1)
        bid = a.call("batch_transfer_async_write", b.segment, [a.plain], [b.plain], [4096])
        if bid:
            self.assertEqual(a.call("get_batch_transfer_status", [bid]), -1)
        self.assertEqual(a.call("send_probe", b.segment), -1)
        self.assertLess(time.monotonic() - t0, 4 * 5 + 5)
        a.check(self)

    def test_stalled_peer_fails_after_mc_transfer_timeout(self):
        env = {"MC_TRANSFER_TIMEOUT": "5"}
        a, b = self.spawn(env), self.spawn(env)
        self.assertEqual(a.call("transfer_sync_write", b.segment, a.plain, b.plain, 4096), 0)
        self.write(a, b, a.plain, b.plain, 4096)
        procstop.freeze(b.proc.pid)
        try:
            t0 = time.monotonic()
            self.assertEqual(a.call("transfer_sync_write", b.segment, a.plain, b.plain + 8192,
                                    4 << 20), -1)
            took = time.monotonic() - t0
            self.assertTrue(procstop.is_frozen(b.proc.pid))  # stopped for the whole write
        finally:
            procstop.thaw(b.proc.pid)
        # bounded by MC_TRANSFER_TIMEOUT=5 s (not the default 30 s)
        self.assertGreater(took, 3.0)
        self.assertLess(took, 15.0)
        a.check(self)

    def test_http_metadata_segment_names(self):
        from urllib.parse import quote
        from urllib.request import urlopen
        http_port, rpc_port, master_port = free_port(), free_port(), free_port()
        master = os.path.join(BUILD, "tools", "mooncake_master")
        log = tempfile.TemporaryFile()
        proc = subprocess.Popen(
            [master, f"--rpc_port={master_port}", "--rpc_address=127.0.0.1",
             f"--metrics_port={free_port()}", "--metrics_host=127.0.0.1",
             "--enable_http_metadata_server",
             "--http_metadata_server_host=127.0.0.1",
             f"--http_metadata_server_port={http_port}"],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        self.addCleanup(log.close)
        self.addCleanup(proc.wait)
        self.addCleanup(proc.terminate)
        url = f"http://127.0.0.1:{http_port}/metadata"
        deadline = time.monotonic() + 20
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", http_port)) == 0:
                    break
            self.assertIsNone(proc.poll(), "master exited")
            self.assertLess(time.monotonic(), deadline, "metadata server did not start")
            time.sleep(0.05)
        a = self.spawn(metadata=url, local_hostname=f"127.0.0.1:{rpc_port}")
        b = self.spawn(metadata=url, local_hostname="127.0.0.1")
        self.assertEqual(a.segment, f"127.0.0.1:{rpc_port}")  # local_hostname verbatim
        self.assertEqual(a.port, rpc_port)
        self.assertEqual(b.segment, f"127.0.0.1:{b.port}")  # no port given: one in the range
        self.assertTrue(15000 <= b.port <= 17000, b.port)
        for p in (a, b):  # published at the metadata service under the segment name
            with urlopen(f"{url}?key={quote('mooncake/ram/' + p.segment, safe='')}") as r:
                self.assertEqual(r.status, 200)
        self.assertEqual(b.call("transfer_sync_write", a.segment, b.managed, a.plain, 65536), 0)
        self.write(b, a, b.managed, a.plain, 65536)
        self.assertEqual(a.call("transfer_sync_read", b.segment, a.managed, b.plain, 65536), 0)
        a.put(a.managed, b.bytes_at(b.plain, 65536))
        a.check(self)
        b.check(self)

    def test_list_mismatch_and_unknown_ids(self):
        a, b = self.spawn(), self.spawn()
        self.assertEqual(a.call("batch_transfer_sync_write", b.segment, [a.plain, a.plain],
                                [b.plain], [8, 8]), -1)
        self.assertEqual(a.call("batch_transfer_sync_read", b.segment, [a.plain], [b.plain],
                                []), -1)
        self.assertEqual(a.call("batch_transfer_async_write", b.segment, [a.plain], [b.plain],
                                [8, 8]), 0)
        self.assertEqual(a.call("batch_register_memory", [a.plain], []), -1)
        self.assertEqual(a.call("transfer_check_status", 424242), -1)
        self.assertEqual(a.call("get_batch_transfer_status", [424242]), -1)
        self.assertEqual(a.call("transfer_check_status", 0), -1)
        a.check(self)
        b.check(self)

    def test_cluster_secret(self):
        secret = {"MOONCAKE_CLUSTER_SECRET": "engine-test-secret-0123456789"}
        a, b, c = self.spawn(secret), self.spawn(secret), self.spawn()
        # c has no secret: a refuses it, and c refuses a (a cannot prove to c... c asks nothing,
        # but a demands c prove it, which c cannot)
        self.assertEqual(c.call("transfer_sync_write", a.segment, c.plain, a.plain, 4096), -1)
        self.assertEqual(c.call("transfer_sync_read", a.segment, c.plain, a.plain, 4096), -1)
        self.assertEqual(a.call("transfer_sync_write", c.segment, a.plain, c.plain, 4096), -1)
        self.assertEqual(c.call("send_probe", a.segment), -1)
        # peers with the secret work
        self.assertEqual(a.call("transfer_sync_write", b.segment, a.plain, b.plain, 4096), 0)
        self.write(a, b, a.plain, b.plain, 4096)
        for p in (a, b, c):
            p.check(self)

    def write(self, src, dst, s_addr, d_addr, n):
        dst.put(d_addr, src.bytes_at(s_addr, n))


class InProcess(unittest.TestCase):
    """One engine in this process: types, conventions, local paths."""

    def setUp(self):
        self.te = me.TransferEngine()
        self.assertEqual(self.te.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", ""), 0)

    def test_module_contents(self):
        self.assertEqual((int(me.Read), int(me.Write)), (0, 1))
        self.assertIs(me.TransferEngine.TransferOpcode, me.TransferOpcode)
        self.assertEqual(me.TransferOpcode.Write + 0, 1)
        for f in ("SUPPORT_EFA", "SUPPORT_HIP", "SUPPORT_MNNVL", "SUPPORT_MUSA",
                  "SUPPORT_INTRA_NVLINK", "SUPPORT_CUDA"):
            self.assertIs(getattr(me, f), False)
        n = me.TransferNotify("a", "b")
        self.assertEqual((n.name, n.msg), ("a", "b"))
        n.msg = "c"
        self.assertEqual(me.TransferNotify().name, "")
        with self.assertRaises(TypeError):
            n.name = 3
        from mooncake.engine import TransferEngine  # noqa: F401
        self.assertTrue(me.TransferEngine.__doc__ and me.TransferEngine.initialize.__doc__)

    def test_rpc_port_and_segment_name(self):
        port = self.te.get_rpc_port()
        self.assertTrue(15000 <= port <= 17000, port)
        self.assertEqual(repr(self.te.get_engine()),
                         f"<mooncake.engine.InnerTransferEngine 127.0.0.1:{port}>")
        self.assertEqual(self.te.send_probe(f"127.0.0.1:{port}"), 0)
        self.assertEqual(self.te.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", ""), -1)
        # the range comes from MC_MIN_RPC_PORT / MC_MAX_RPC_PORT
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            free = s.getsockname()[1]
        old = {k: os.environ.get(k) for k in ("MC_MIN_RPC_PORT", "MC_MAX_RPC_PORT")}
        os.environ["MC_MIN_RPC_PORT"] = os.environ["MC_MAX_RPC_PORT"] = str(free)
        try:
            t2 = me.TransferEngine()
            self.assertEqual(t2.initialize("127.0.0.1:1", "P2PHANDSHAKE", "tcp", ""), 0)
            self.assertEqual(t2.get_rpc_port(), free)
            t3 = me.TransferEngine()  # the only port is taken
            self.assertEqual(t3.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", ""), -1)
            self.assertEqual(t3.get_rpc_port(), -1)
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def test_initialize_refusals(self):
        t = me.TransferEngine()
        self.assertEqual(t.initialize("127.0.0.1", "127.0.0.1:2379", "tcp", ""), -1)  # etcd
        self.assertEqual(t.initialize("127.0.0.1", "etcd://127.0.0.1:2379", "tcp", ""), -1)
        self.assertEqual(t.initialize_ext("127.0.0.1", "127.0.0.1:2379", "tcp", "", "etcd"), -1)
        self.assertEqual(t.initialize("127.0.0.1", "P2PHANDSHAKE", "xgmi", ""), -1)
        self.assertEqual(t.initialize("127.0.0.1", "P2PHANDSHAKE", "efa", ""), -1)
        # not initialized: everything answers its failure value
        self.assertEqual(t.get_rpc_port(), -1)
        self.assertEqual(t.get_engine_ptr(), 0)
        self.assertEqual(t.allocate_managed_buffer(4096), 0)
        self.assertEqual(t.transfer_sync_write("127.0.0.1:1", 1, 2, 3), -1)
        self.assertEqual(t.batch_transfer_async_read("127.0.0.1:1", [1], [2], [3]), 0)
        self.assertLess(t.register_memory(self.te.get_engine_ptr(), 8), 0)
        self.assertEqual(t.initialize_ext("127.0.0.1", "P2PHANDSHAKE", "tcp", "", "http"), 0)

    def test_type_errors(self):
        te = self.te
        bad = [
            lambda: te.transfer_sync_write(1, 2, 3, 4),
            lambda: te.transfer_sync_write("h:1", "2", 3, 4),
            lambda: te.transfer_sync_write("h:1", 2, 3, -4),
            lambda: te.transfer_sync_write("h:1", 2, 3, 4.0),
            lambda: te.batch_transfer_sync_write("h:1", 2, [3], [4]),
            lambda: te.batch_transfer_sync_write("h:1", [2], ["3"], [4]),
            lambda: te.batch_transfer_async_write("h:1", [2], [3], [None]),
            lambda: te.transfer_sync("h:1", 2, 3, 4, 7),
            lambda: te.transfer_sync("h:1", 2, 3, 4, 1, "notify"),
            lambda: te.register_memory("x", 1),
            lambda: te.register_memory(1, 1, 5),
            lambda: te.get_batch_transfer_status(5),
            lambda: te.transfer_check_status("5"),
            lambda: te.write_bytes_to_buffer(1, "str", 3),
            lambda: te.initialize(1, "P2PHANDSHAKE", "tcp", ""),
            lambda: te.initialize(local_hostname="127.0.0.1", metadata_server="P2PHANDSHAKE",
                                  protocol="tcp", device_name=""),  # pos-only
            lambda: te.unregister_memory(buffer_addr=1),  # pos-only
            lambda: te.get_first_buffer_address(5),
            lambda: te.send_probe(5),
            lambda: me.TransferEngine(1),
        ]
        for i, f in enumerate(bad):
            with self.assertRaises(TypeError, msg=f"case {i}"):
                f()
        # keywords where upstream names them
        self.assertEqual(te.transfer_sync_write(target_hostname="127.0.0.1:1", buffer=1,
                                                peer_buffer_address=2, length=0,
                                                transport_hint=""), -1)

    def test_managed_buffers_and_byte_access(self):
        te = self.te
        addr = te.allocate_managed_buffer(1 << 20)
        self.assertNotEqual(addr, 0)
        data = os.urandom(1 << 20)
        self.assertEqual(te.write_bytes_to_buffer(addr, data, len(data)), 0)
        self.assertEqual(te.read_bytes_from_buffer(addr, len(data)), data)
        # outside any registered/managed range, or more than given: -1, nothing copied
        self.assertEqual(te.write_bytes_to_buffer(addr + (1 << 20) - 4, b"12345678", 8), -1)
        self.assertEqual(te.write_bytes_to_buffer(addr, b"abc", 4), -1)
        self.assertEqual(te.read_bytes_from_buffer(addr + 1, 1 << 20), -1)
        self.assertEqual(te.read_bytes_from_buffer(8, 8), -1)
        self.assertEqual(te.read_bytes_from_buffer(addr, len(data)), data)
        # a local transfer (own segment) between two managed buffers
        other = te.allocate_managed_buffer(1 << 20)
        seg = f"127.0.0.1:{te.get_rpc_port()}"
        self.assertEqual(te.get_first_buffer_address(seg), min(addr, other))
        self.assertEqual(te.transfer_sync_write(seg, addr, other, 1 << 20), 0)
        self.assertEqual(te.read_bytes_from_buffer(other, 1 << 20), data)
        self.assertEqual(te.unregister_memory(other), -600)  # managed: free_managed_buffer
        self.assertEqual(te.free_managed_buffer(other, 4096), -1)  # wrong length
        self.assertEqual(te.free_managed_buffer(other, 1 << 20), 0)
        self.assertEqual(te.free_managed_buffer(other, 1 << 20), -1)  # already freed
        self.assertEqual(te.transfer_sync_write(seg, addr, other, 1 << 20), -1)
        self.assertEqual(te.read_bytes_from_buffer(other, 8), -1)
        self.assertEqual(te.allocate_managed_buffer(0), 0)
        self.assertEqual(te.free_managed_buffer(addr, 1 << 20), 0)

    def test_register_memory_and_limits(self):
        import ctypes
        te = self.te
        bufs = [ctypes.create_string_buffer(8192) for _ in range(3)]
        addrs = [ctypes.addressof(b) for b in bufs]
        self.assertEqual(te.batch_register_memory(addrs, [8192] * 3), 0)
        self.assertEqual(te.register_memory(addrs[0] + 100, 100), -600)  # overlaps
        # all or nothing: the second overlaps, so the first is not left registered
        extra = ctypes.create_string_buffer(8192)
        self.assertEqual(te.batch_register_memory([ctypes.addressof(extra), addrs[1]],
                                                  [8192, 8192]), -600)
        self.assertEqual(te.register_memory(ctypes.addressof(extra), 8192, "cpu:0"), 0)
        self.assertEqual(te.unregister_memory(ctypes.addressof(extra)), 0)
        self.assertEqual(te.write_bytes_to_buffer(addrs[2], b"x" * 8192, 8192), 0)
        self.assertEqual(bufs[2].raw, b"x" * 8192)
        self.assertEqual(te.batch_unregister_memory(addrs), 0)
        self.assertLess(te.unregister_memory(addrs[0]), 0)
        self.assertEqual(te.write_bytes_to_buffer(addrs[2], b"y", 1), -1)
        # the bound on uncollected async batches, then all collected
        src = te.allocate_managed_buffer(4096)
        seg = f"127.0.0.1:{te.get_rpc_port()}"
        ids = [te.transfer_submit_write(seg, src, src + 2048, 16) for _ in range(1024)]
        self.assertTrue(all(ids), "a batch below the bound was refused")
        self.assertEqual(te.transfer_submit_write(seg, src, src + 2048, 16), 0)
        self.assertEqual(te.get_batch_transfer_status(ids), 0)
        self.assertGreater(te.transfer_submit_write(seg, src, src + 2048, 16), 0)

    def test_threads_share_one_engine(self):
        import threading
        dst_te = me.TransferEngine()
        self.assertEqual(dst_te.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", ""), 0)
        seg = f"127.0.0.1:{dst_te.get_rpc_port()}"
        chunk, nthreads = 256 << 10, 8
        dst = dst_te.allocate_managed_buffer(chunk * nthreads)
        src = self.te.allocate_managed_buffer(chunk * nthreads)
        data = os.urandom(chunk * nthreads)
        self.assertEqual(self.te.write_bytes_to_buffer(src, data, len(data)), 0)
        results = []

        def worker(i):
            rcs = []
            for k in range(10):
                off = i * chunk
                if k % 2:
                    rcs.append(self.te.transfer_sync_write(seg, src + off, dst + off, chunk))
                else:
                    bid = self.te.batch_transfer_async_write(seg, [src + off], [dst + off],
                                                             [chunk])
                    rcs.append(self.te.get_batch_transfer_status([bid]) if bid else -99)
            results.append(rcs)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(nthreads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(results, [[0] * 10] * nthreads)
        self.assertEqual(dst_te.read_bytes_from_buffer(dst, len(data)), data)

    def test_notify_and_topology(self):
        te = self.te
        self.assertEqual(te.get_notifies(), [])
        seg = f"127.0.0.1:{te.get_rpc_port()}"
        buf = te.allocate_managed_buffer(4096)
        self.assertEqual(te.transfer_sync(seg, buf, buf + 1024, 8, me.Write,
                                          me.TransferNotify("n", "m")), -1)
        self.assertEqual(te.transfer_sync(seg, buf, buf + 1024, 8, me.Write, None), 0)
        self.assertEqual(te.warmup_efa_segment(seg), 0)
        topo = json.loads(te.get_local_topology())
        self.assertTrue(topo and all(k.startswith("cpu:") for k in topo), topo)
        ib = sorted(os.listdir("/sys/class/infiniband")) if os.path.isdir(
            "/sys/class/infiniband") else []
        for v in topo.values():
            self.assertEqual(v, [ib, []])
        self.assertEqual(json.loads(te.get_local_topology("no_such_dev"))["cpu:0"][0]
                         if "cpu:0" in topo else [], [])


# ---- setup(engine=...) -----------------------------------------------------------------------

def listening_addresses(pid):
    """Local addresses of the TCP sockets process `pid` listens on (from /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    found = []
    for table, v6 in (("/proc/net/tcp", False), ("/proc/net/tcp6", True)):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] != "0A" or cols[9] not in inodes:  # 0A: LISTEN
                    continue
                hexaddr = cols[1].split(":")[0]
                raw = bytes.fromhex(hexaddr)
                if v6:
                    raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                    found.append(socket.inet_ntop(socket.AF_INET6, raw))
                else:
                    found.append(socket.inet_ntop(socket.AF_INET, raw[::-1]))
    return found


class ListensWhereTold(unittest.TestCase):
    """An engine given an address listens there only: UCX's tcp transport (protocol rdma on a
    host without RDMA devices) included, which by default opens a listener on every interface."""

    def test_rdma_engine_listens_on_its_address_only(self):
        if not me._engine._RDMA_TRANSPORT:
            self.skipTest("this build has no rdma transport (USE_RDMA=OFF)")
        te = me.TransferEngine()
        self.assertEqual(te.initialize("127.0.0.1", "P2PHANDSHAKE", "rdma", ""), 0)
        addrs = listening_addresses(os.getpid())
        self.assertIn("127.0.0.1", addrs)
        self.assertEqual([a for a in addrs if a != "127.0.0.1"], [], addrs)


class StoreSharesEngine(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from test_store import Cluster
        cls.cluster = Cluster()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def test_put_get_through_a_shared_engine(self):
        te = me.TransferEngine()
        self.assertEqual(te.initialize("127.0.0.1", "P2PHANDSHAKE", "tcp", ""), 0)
        seg = f"127.0.0.1:{te.get_rpc_port()}"
        store = mcs.MooncakeDistributedStore()
        with self.assertRaises(TypeError):
            store.setup("127.0.0.1", "P2PHANDSHAKE", 16 << 20, 16 << 20, "tcp", "",
                        self.cluster.master_addr, "not an engine")
        self.assertEqual(store.setup("127.0.0.1", "P2PHANDSHAKE", 16 << 20, 16 << 20, "tcp",
                                     "", self.cluster.master_addr,
                                     me.TransferEngine().get_engine()), -600)  # not initialized
        rc = store.setup("127.0.0.1", "P2PHANDSHAKE", 32 << 20, 32 << 20, "tcp", "",
                         self.cluster.master_addr, te.get_engine())
        self.assertEqual(rc, 0)
        self.assertEqual(store.get_hostname(), seg)  # the store serves through te's segment
        values = {f"engine-shared-{i}": os.urandom(random.randrange(1, 3 << 20))
                  for i in range(24)}
        for k, v in values.items():
            self.assertEqual(store.put(k, v), 0)
        for k, v in values.items():
            self.assertEqual(sha(store.get(k)), sha(v), k)
        # the engine still serves its own transfers while the store uses it
        buf = te.allocate_managed_buffer(1 << 20)
        self.assertEqual(te.write_bytes_to_buffer(buf, b"q" * 100, 100), 0)
        self.assertEqual(te.transfer_sync_write(seg, buf, buf + 4096, 100), 0)
        self.assertEqual(te.read_bytes_from_buffer(buf + 4096, 100), b"q" * 100)
        # close leaves the engine working (the store only frees what it registered), and
        # another store can set up on it again
        self.assertEqual(store.close(), 0)
        self.assertEqual(te.transfer_sync_write(seg, buf + 4096, buf + 8192, 100), 0)
        self.assertEqual(te.read_bytes_from_buffer(buf + 8192, 100), b"q" * 100)
        store2 = mcs.MooncakeDistributedStore()
        self.assertEqual(store2.setup("127.0.0.1", "P2PHANDSHAKE", 32 << 20, 32 << 20, "tcp",
                                      "", self.cluster.master_addr, te.get_engine()), 0)
        del te  # the store keeps the engine alive
        gc.collect()
        # (objects in the first store's segment left with it at close: fresh ones)
        values = {f"engine-shared-2-{i}": os.urandom(random.randrange(1, 3 << 20))
                  for i in range(24)}
        for k, v in values.items():
            self.assertEqual(store2.put(k, v), 0)
        for k, v in values.items():
            self.assertEqual(sha(store2.get(k)), sha(v), k)
        self.assertEqual(store2.close(), 0)
        del store, store2
        gc.collect()


if __name__ == "__main__":
    unittest.main()
