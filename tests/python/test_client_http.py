"""test_client_http.py — the client HTTP server of a real store client (upstream's
`enable_client_http_server` / `client_http_port`, `mooncake_client --enable_http_server`).

A mooncake_master and a mooncake_client (64 MB segment) from the build tree (MC_BUILD_DIR, default
<repo>/build) on free loopback ports; stores set up in this process with the server on. Checks
/health (200 while the master answers, 503 once it is stopped or gone), /metrics (a parsed
Prometheus exposition whose byte counters equal the bytes of real puts and gets), the
MC_STORE_CLIENT_METRIC switch, port validation (-600) and the bind address.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
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
LATENCY_BOUNDS = [50, 75, 125, 150, 200, 250, 300, 400, 500, 750, 1000, 1500, 2000, 3000, 5000,
                  7000, 15000, 20000, 50000, 100000, 200000, 500000, 1000000, 2000000, 5000000,
                  10000000, 20000000]
_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse_prometheus(text):
    """{family: type}, {(name, frozenset(labels)): value}; fails on any malformed line."""
    types, samples = {}, {}
    for line in text.splitlines():
        if not line or line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            assert name not in types, name
            types[name] = typ
            continue
        m = _SAMPLE.match(line)
        assert m, f"malformed sample line {line!r}"
        labels, pos, body = {}, 0, m.group(3) or ""
        while pos < len(body):
            lm = _LABEL.match(body, pos)
            assert lm, f"malformed labels {line!r}"
            labels[lm.group(1)] = lm.group(2)
            pos = lm.end()
        name = m.group(1)
        family = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and types.get(name[:-len(suffix)]) == "histogram":
                family = name[:-len(suffix)]
        assert family in types, f"{name} without # TYPE"
        key = (name, frozenset(labels.items()))
        assert key not in samples, f"duplicate {line!r}"
        samples[key] = float(m.group(4))
    return types, samples


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def die_with_parent():
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)
    except (ImportError, OSError, AttributeError):
        pass


def http_get(port, path, host="127.0.0.1"):
    """(status, body text)."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_for(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class Cluster:
    """A master and a mooncake_client with a 64 MB segment (optionally its HTTP server on)."""

    def __init__(self, client_args=()):
        self.logdir = tempfile.TemporaryDirectory(prefix="mc_http_")
        self.procs, self.logs = [], []
        self.rpc_port = free_port()
        self.addr = f"127.0.0.1:{self.rpc_port}"
        self.master = self._spawn("master", [
            os.path.join(BUILD, "tools", "mooncake_master"), f"--rpc_port={self.rpc_port}",
            f"--metrics_port={free_port()}", "--rpc_address=127.0.0.1",
            "--metrics_host=127.0.0.1"])
        deadline = time.monotonic() + 20
        while socket.socket().connect_ex(("127.0.0.1", self.rpc_port)) != 0:
            assert time.monotonic() < deadline and self.master.poll() is None, self.tail("master")
            time.sleep(0.05)
        self.client = self._spawn("client", [
            os.path.join(BUILD, "tools", "mooncake_client"), "--global_segment_size=64MB",
            "--host=127.0.0.1", f"--port={free_port()}", "--metadata_server=P2PHANDSHAKE",
            f"--master_server_address={self.addr}"] + list(client_args), stdout=subprocess.PIPE)
        ready = threading.Event()

        def reader():
            for raw in self.client.stdout:
                if raw.startswith(b"mooncake_client ready"):
                    ready.set()

        threading.Thread(target=reader, daemon=True).start()
        if not ready.wait(20):
            self.stop()
            raise RuntimeError("mooncake_client not ready: " + self.tail("client"))

    def _spawn(self, name, argv, stdout=None):
        log = open(os.path.join(self.logdir.name, name + ".log"), "wb")
        self.logs.append(log)
        p = subprocess.Popen(argv, stdout=stdout or log, stderr=log, stdin=subprocess.DEVNULL,
                             preexec_fn=die_with_parent)
        self.procs.append(p)
        return p

    def tail(self, name):
        with open(os.path.join(self.logdir.name, name + ".log"), "rb") as f:
            return f.read()[-3000:].decode(errors="replace")

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
                p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            if p.stdout:
                p.stdout.close()
        for log in self.logs:
            log.close()
        self.logdir.cleanup()


CLUSTER = None


def setUpModule():
    global CLUSTER
    CLUSTER = Cluster()


def tearDownModule():
    CLUSTER.stop()


def new_store(port, master=None, **kw):
    store = mcs.MooncakeDistributedStore()
    rc = store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 * MiB, "tcp", "",
                     master or CLUSTER.addr, enable_client_http_server=True,
                     client_http_port=port, **kw)
    return store, rc


class ClientHttp(unittest.TestCase):
    def setUp(self):
        self.port = free_port()
        self.store, rc = new_store(self.port)
        self.assertEqual(rc, 0)

    def tearDown(self):
        self.store.close()

    def metrics(self):
        status, body = http_get(self.port, "/metrics")
        self.assertEqual(status, 200, body)
        return parse_prometheus(body)

    def test_health_is_200_healthy(self):
        status, body = http_get(self.port, "/health")
        self.assertEqual((status, json.loads(body)), (200, {"status": "healthy", "code": 0}))

    def test_metrics_count_the_bytes_of_real_puts_and_gets(self):
        types, before = self.metrics()
        for name, typ in (("mooncake_transfer_read_bytes", "counter"),
                          ("mooncake_transfer_write_bytes", "counter"),
                          ("mooncake_transfer_get_latency", "histogram"),
                          ("mooncake_transfer_put_latency", "histogram"),
                          ("mooncake_transfer_batch_get_latency", "histogram"),
                          ("mooncake_transfer_batch_put_latency", "histogram"),
                          ("mooncake_transfer_read_operation_count", "counter"),
                          ("mooncake_transfer_read_operation_bytes", "counter"),
                          ("mooncake_transfer_read_operation_latency", "histogram"),
                          ("mooncake_transfer_write_operation_count", "counter"),
                          ("mooncake_transfer_write_operation_bytes", "counter"),
                          ("mooncake_transfer_write_operation_latency", "histogram")):
            self.assertEqual(types.get(name), typ, name)
        base = {("client_mode", "real")}
        sizes = [1, 4096, 300001, 2 * MiB]
        keys = [f"http/{os.getpid()}/{self.port}/{i}" for i in range(len(sizes))]
        for k, n in zip(keys, sizes):
            self.assertEqual(self.store.put(k, b"v" * n), 0)
        # a put of an existing key answers 0 (upstream) but stores nothing: no bytes
        self.assertEqual(self.store.put(keys[0], b"again"), 0)
        for k, n in zip(keys, sizes):
            self.assertEqual(len(self.store.get(k)), n)
        self.assertEqual(self.store.get(keys[0] + "/absent"), b"")
        _, after = self.metrics()

        def d(name, **labels):
            k = (name, frozenset(base | set(labels.items())))
            return after[k] - before[k]

        self.assertEqual(d("mooncake_transfer_write_bytes"), sum(sizes))
        self.assertEqual(d("mooncake_transfer_read_bytes"), sum(sizes))
        write_ops = sum(d("mooncake_transfer_write_operation_count", op_name=o)
                        for o in ("put", "put_from", "upsert", "upsert_from"))
        self.assertEqual(write_ops, len(sizes) + 1)
        self.assertEqual(d("mooncake_transfer_put_latency_count"), len(sizes) + 1)
        self.assertEqual(d("mooncake_transfer_put_latency_bucket", le="+Inf"), len(sizes) + 1)
        self.assertEqual(d("mooncake_transfer_write_operation_bytes", op_name="put"), sum(sizes))
        # every single-key read call (whichever C call the binding used) is a get
        reads = sum(d("mooncake_transfer_read_operation_count", op_name=o)
                    for o in ("get", "get_into", "get_batch", "batch_get_into"))
        self.assertGreaterEqual(reads, len(sizes) + 1)
        self.assertEqual(d("mooncake_transfer_get_latency_count"), reads)
        self.assertEqual(d("mooncake_transfer_batch_get_latency_count"), 0)
        # the buckets are upstream's, cumulative
        buckets = [after[("mooncake_transfer_put_latency_bucket",
                          frozenset(base | {("le", str(b))}))] for b in LATENCY_BOUNDS]
        self.assertEqual(buckets, sorted(buckets))
        # a batch
        _, before = self.metrics()
        bkeys = [f"{keys[0]}/b{i}" for i in range(3)]
        self.assertEqual(self.store.put_batch(bkeys, [b"a" * 10, b"b" * 20, b"c" * 30]), 0)
        _, after = self.metrics()
        self.assertEqual(d("mooncake_transfer_write_bytes"), 60)
        self.assertEqual(d("mooncake_transfer_batch_put_latency_count"), 1)
        self.assertEqual(d("mooncake_transfer_write_operation_count", op_name="put_batch"), 1)

    def test_summary(self):
        status, body = http_get(self.port, "/metrics/summary")
        self.assertEqual(status, 200)
        self.assertIn("Transfer: read", body)

    def test_bound_to_the_hosts_address_only(self):
        with socket.socket() as s:
            self.assertNotEqual(s.connect_ex(("127.0.0.2", self.port)), 0)
        self.assertEqual(http_get(self.port, "/nope")[0], 404)


class ClientHttpSetup(unittest.TestCase):
    def test_ports_outside_1_65535_fail_setup_with_600(self):
        for port in (0, 70000, -1):
            with self.subTest(port=port):
                store, rc = new_store(port)
                self.assertEqual(rc, INVALID_PARAMS)
                store.close()
            with self.subTest(port=port, form="dict"):
                store = mcs.MooncakeDistributedStore()
                rc = store.setup({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                                  "global_segment_size": 0, "master_server_addr": CLUSTER.addr,
                                  "enable_client_http_server": True, "client_http_port": port})
                self.assertEqual(rc, INVALID_PARAMS)
                store.close()

    def test_dict_form_starts_the_server(self):
        port = free_port()
        store = mcs.MooncakeDistributedStore()
        rc = store.setup({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                          "global_segment_size": 0, "master_server_addr": CLUSTER.addr,
                          "enable_client_http_server": "true", "client_http_port": str(port)})
        try:
            self.assertEqual(rc, 0)
            self.assertEqual(http_get(port, "/health")[0], 200)
        finally:
            store.close()
        with socket.socket() as s:  # close stops the server
            self.assertNotEqual(s.connect_ex(("127.0.0.1", port)), 0)

    def test_off_unless_asked(self):
        port = free_port()
        store = mcs.MooncakeDistributedStore()
        self.assertEqual(store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 * MiB, "tcp", "",
                                     CLUSTER.addr, client_http_port=port), 0)
        try:
            with socket.socket() as s:
                self.assertNotEqual(s.connect_ex(("127.0.0.1", port)), 0)
        finally:
            store.close()

    def test_port_in_use_only_warns(self):
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            store, rc = new_store(busy.getsockname()[1])
            try:
                self.assertEqual(rc, 0)
                self.assertEqual(store.put(f"http/busy/{os.getpid()}", b"x"), 0)
            finally:
                store.close()

    def test_metrics_off_answers_503(self):
        old = os.environ.get("MC_STORE_CLIENT_METRIC")
        os.environ["MC_STORE_CLIENT_METRIC"] = "0"
        try:
            port = free_port()
            store, rc = new_store(port)
        finally:
            if old is None:
                del os.environ["MC_STORE_CLIENT_METRIC"]
            else:
                os.environ["MC_STORE_CLIENT_METRIC"] = old
        try:
            self.assertEqual(rc, 0)
            self.assertEqual(http_get(port, "/metrics"), (503, "metrics not available"))
            self.assertEqual(http_get(port, "/metrics/summary")[0], 503)
            self.assertEqual(http_get(port, "/health")[0], 200)
        finally:
            store.close()

    def test_cluster_id_label(self):
        os.environ["MC_STORE_CLUSTER_ID"] = 'c"1'
        try:
            port = free_port()
            store, rc = new_store(port)
        finally:
            del os.environ["MC_STORE_CLUSTER_ID"]
        try:
            self.assertEqual(rc, 0)
            _, samples = parse_prometheus(http_get(port, "/metrics")[1])
            key = ("mooncake_transfer_write_bytes",
                   frozenset({("client_mode", "real"), ("cluster_id", 'c\\"1')}))
            self.assertIn(key, samples)
        finally:
            store.close()

    def test_mooncake_client_flags(self):
        port = free_port()
        c = Cluster(client_args=["--enable_http_server", f"--http_port={port}"])
        try:
            status, body = http_get(port, "/health")
            self.assertEqual((status, json.loads(body)["status"]), (200, "healthy"))
            self.assertEqual(http_get(port, "/metrics")[0], 200)
        finally:
            c.stop()

    def test_mooncake_client_refuses_a_bad_port(self):
        for port in (0, 70000):
            with self.subTest(port=port):
                p = subprocess.run(
                    [os.path.join(BUILD, "tools", "mooncake_client"), "--enable_http_server",
                     f"--http_port={port}", "--global_segment_size=16MB", "--host=127.0.0.1",
                     f"--port={free_port()}", "--metadata_server=P2PHANDSHAKE",
                     f"--master_server_address={CLUSTER.addr}"],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                    timeout=30)
                self.assertEqual(p.returncode, 1)
                self.assertIn(b"(-600)", p.stderr)

    def test_health_503_when_the_master_stops_or_dies(self):
        c = Cluster()
        port = free_port()
        store, rc = new_store(port, master=c.addr)
        try:
            self.assertEqual(rc, 0)
            self.assertEqual(http_get(port, "/health")[0], 200)
            procstop.freeze(c.master.pid)
            # the ping times out after the 10 s RPC timeout
            wait_for(lambda: http_get(port, "/health")[0] == 503, 40, "503 after SIGSTOP")
            self.assertEqual(json.loads(http_get(port, "/health")[1]),
                             {"status": "master_unreachable", "code": 2})
            self.assertTrue(procstop.is_frozen(c.master.pid))  # 503 while it was stopped
            procstop.thaw(c.master.pid)
            wait_for(lambda: http_get(port, "/health")[0] == 200, 40, "200 after SIGCONT")
            c.master.kill()
            c.master.wait()
            wait_for(lambda: http_get(port, "/health")[0] == 503, 40, "503 after kill")
        finally:
            store.close()
            c.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
