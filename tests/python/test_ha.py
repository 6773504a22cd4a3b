"""test_ha.py — mooncake.store following the elected master, on a real etcd.

A one-member etcd (Debian's /usr/bin/etcd, free 127.0.0.1 ports, data in a temp dir, killed with
the test), two mooncake_master with --enable_ha --enable_oplog (--oplog_sync_ack default: true)
and a short election lease (TTL), and one mooncake_client holder that follows the leader; all
from the build tree (MC_BUILD_DIR, default <repo>/build). The store under test is a
MooncakeDistributedStore in this process set up with master_server_addr="etcd://127.0.0.1:<port>"
and MC_STORE_CLUSTER_ID = the masters' --cluster_id, as upstream's HA spec.

 - the store puts and reads back exact bytes; the leader is SIGKILLed; the same store object puts
   again within 2 x TTL + slack (waited as a state: the first put that succeeds), and every
   object put before the kill reads back exact;
 - a bad HA spec (redis://...) makes setup return non-zero at once;
 - etcd:// where no master leads makes setup fail within its wait bound (MC_MASTER_WAIT_TIMEOUT).

The leader is read through etcd's own v3 JSON gateway (urllib), not through our code.
Runs under pytest and unittest; the module is found on PYTHONPATH, else in <MC_BUILD_DIR>/python.
"""
import base64
import json
import os
import shutil
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

ETCD = "/usr/bin/etcd"
MASTER_BIN = os.path.join(BUILD, "tools", "mooncake_master")
CLIENT_BIN = os.path.join(BUILD, "tools", "mooncake_client")
TTL = 3  # --ha_lease_ttl_seconds of the masters
SLACK = 10.0  # seconds on top of 2 x TTL for the first put after a failover (a loaded 2-CPU VM)
MiB = 1 << 20
OK = 0
INVALID_PARAMS = -600
OBJECT_NOT_FOUND = -704


def die_with_parent():
    """In a child before exec: SIGKILL when the test process dies, even by a crash."""
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def b64(s):
    return base64.b64encode(s.encode()).decode()


def wait_until(what, cond, timeout, period=0.05):
    """Polls cond() until it returns a true value (returned) or timeout seconds pass (fails)."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(period)


def value_of(i):
    """The bytes of object i: length and content derive from i."""
    n = 1000 + (i * 7919) % 60000
    return bytes((i * 31 + k * 17) & 0xFF for k in range(n))


class Cluster:
    """One etcd member, two HA masters and one holder, each logging into a temp dir."""

    def __init__(self):
        for b in (ETCD, MASTER_BIN, CLIENT_BIN):
            if not os.access(b, os.X_OK):
                raise RuntimeError(f"{b} not found (set MC_BUILD_DIR to the build directory)")
        self.dir = tempfile.mkdtemp(prefix="mc-ha-py-")
        self.procs = {}
        self.logs = []
        self.cluster_id = f"py_ha_{os.getpid()}"
        self.etcd_port, peer = free_port(), free_port()
        client = f"http://127.0.0.1:{self.etcd_port}"
        self.spawn("etcd", [
            ETCD, "--name", "m0", "--data-dir", os.path.join(self.dir, "m0"),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"m0=http://127.0.0.1:{peer}",
            "--logger", "zap", "--log-outputs", "stderr"])
        wait_until("etcd answers a put", self.etcd_ready, 30)
        self.ha_addr = f"etcd://127.0.0.1:{self.etcd_port}"
        self.masters = {}  # name -> "127.0.0.1:port"
        for name in ("master0", "master1"):
            self.start_master(name)
        wait_until("a master is elected", self.leader, 30)
        self.holder_segment = self.start_holder()

    def spawn(self, name, argv, stdout=None, env=None):
        log = open(os.path.join(self.dir, name + ".log"), "ab")
        self.logs.append(log)
        self.procs[name] = subprocess.Popen(
            argv, stdout=stdout or log, stderr=log, stdin=subprocess.DEVNULL, env=env,
            preexec_fn=die_with_parent)
        return self.procs[name]

    def etcd_call(self, path, body):
        req = urllib.request.Request(f"http://127.0.0.1:{self.etcd_port}{path}",
                                     data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def etcd_ready(self):
        if self.procs["etcd"].poll() is not None:
            raise RuntimeError("etcd exited: " + self.log_tail("etcd"))
        try:
            self.etcd_call("/v3/kv/put", {"key": b64("mc-test/ready"), "value": b64("up")})
            return True
        except OSError:
            return False

    def leader(self):
        """The name of the master the etcd view names, or None."""
        key = f"mooncake-store/{self.cluster_id}/master_view"
        kvs = self.etcd_call("/v3/kv/range", {"key": b64(key)}).get("kvs", [])
        if not kvs:
            return None
        addr = base64.b64decode(kvs[0].get("value", "")).decode()
        for name, a in self.masters.items():
            if a == addr and self.procs[name].poll() is None:
                return name
        return None

    def start_master(self, name):
        port = free_port()
        self.masters[name] = f"127.0.0.1:{port}"
        proc = self.spawn(name, [
            MASTER_BIN, f"--rpc_port={port}", f"--metrics_port={free_port()}",
            "--rpc_address=127.0.0.1", "--metrics_host=127.0.0.1", "--enable_ha=true",
            f"--etcd_endpoints=127.0.0.1:{self.etcd_port}", f"--cluster_id={self.cluster_id}",
            f"--ha_lease_ttl_seconds={TTL}", "--enable_oplog=true",
            "--oplog_poll_interval_ms=200"])

        def listening():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited: " + self.log_tail(name))
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        wait_until(f"{name} listens", listening, 30)

    def start_holder(self):
        env = dict(os.environ, MC_STORE_CLUSTER_ID=self.cluster_id)
        proc = self.spawn("holder", [
            CLIENT_BIN, "--global_segment_size=256MB", "--host=127.0.0.1",
            f"--port={free_port()}", "--metadata_server=P2PHANDSHAKE",
            f"--master_server_address={self.ha_addr}"], stdout=subprocess.PIPE, env=env)
        prefix = "mooncake_client ready: segment "
        found = []

        def reader():
            for raw in proc.stdout:  # drained until the process exits
                line = raw.decode(errors="replace").strip()
                if line.startswith(prefix) and not found:
                    found.append(line[len(prefix):].split()[0])

        threading.Thread(target=reader, daemon=True).start()

        def ready():
            if proc.poll() is not None:
                raise RuntimeError("holder exited: " + self.log_tail("holder"))
            return bool(found)

        wait_until("the holder reports ready", ready, 60)
        return found[0]

    def log_tail(self, name, n=3000):
        try:
            with open(os.path.join(self.dir, name + ".log"), "rb") as f:
                return f.read()[-n:].decode(errors="replace")
        except OSError:
            return "(no log)"

    def close(self):
        for name, p in reversed(list(self.procs.items())):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM if name != "etcd" else signal.SIGKILL)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            if p.stdout:
                p.stdout.close()
        for log in self.logs:
            log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class StoreFollowsElectedMasterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()
        cls.saved_env = {k: os.environ.get(k)
                         for k in ("MC_STORE_CLUSTER_ID", "MC_MASTER_WAIT_TIMEOUT")}
        os.environ["MC_STORE_CLUSTER_ID"] = cls.cluster.cluster_id

    @classmethod
    def tearDownClass(cls):
        for k, v in cls.saved_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        cls.cluster.close()

    def new_store(self, addr):
        store = mcs.MooncakeDistributedStore()
        rc = store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 * MiB, "tcp", "", addr)
        return store, rc

    def get_exact(self, store, key, want, timeout):
        """Waits (as a state) until key reads back; asserts the bytes are exactly want."""
        def readable():
            got = store.get(key)
            return got if got else None  # b"" while absent (upstream's convention)

        got = wait_until(f"{key} reads back", readable, timeout)
        self.assertEqual(len(got), len(want), key)
        self.assertTrue(got == want, f"{key}: other bytes")

    def test_store_follows_the_leader_through_a_failover(self):
        c = self.cluster
        store, rc = self.new_store(c.ha_addr)
        self.assertEqual(rc, OK)
        try:
            keys = [f"py-ha-{i}" for i in range(40)]
            for i, k in enumerate(keys):
                self.assertEqual(store.put(k, value_of(i)), OK, k)
            for i, k in enumerate(keys):
                self.assertEqual(store.get(k), value_of(i), k)

            old = c.leader()
            self.assertIsNotNone(old)
            killed = time.monotonic()
            c.procs[old].send_signal(signal.SIGKILL)
            c.procs[old].wait()

            # The same store object: the first put that succeeds through the new leader, waited
            # as a state, within 2 x TTL + slack of the kill.
            bound = 2 * TTL + SLACK
            after = value_of(1000)
            attempts = []

            def put_succeeds():
                rc = store.put(f"py-ha-after-{len(attempts)}", after)
                attempts.append(rc)
                return rc == OK

            wait_until("a put through the new leader", put_succeeds, bound)
            took = time.monotonic() - killed
            new = c.leader()
            self.assertIsNotNone(new)
            self.assertNotEqual(new, old)
            print(f"\nfailover: {old} SIGKILLed, {new} leads; first put after {took:.2f} s "
                  f"(TTL {TTL} s, {len(attempts)} attempts, codes {sorted(set(attempts))})")
            self.assertEqual(store.get(f"py-ha-after-{len(attempts) - 1}"), after)

            # Every object put before the kill reads back exact (its holder re-mounts on the
            # new leader within a ping or two; until then a get may miss).
            for i, k in enumerate(keys):
                self.get_exact(store, k, value_of(i), 15)
            # and new objects keep working
            for i in range(5):
                k = f"py-ha-new-{i}"
                self.assertEqual(store.put(k, value_of(2000 + i)), OK, k)
                self.assertEqual(store.get(k), value_of(2000 + i), k)
        finally:
            store.close()

    def test_bad_ha_spec_fails_setup_at_once(self):
        started = time.monotonic()
        store, rc = self.new_store("redis://127.0.0.1:6379")
        took = time.monotonic() - started
        self.assertEqual(rc, INVALID_PARAMS)
        self.assertLess(took, 5.0)  # no wait for a master at all
        store.close()

    def test_no_elected_master_fails_setup_within_its_wait(self):
        os.environ["MC_MASTER_WAIT_TIMEOUT"] = "2"
        os.environ["MC_STORE_CLUSTER_ID"] = f"py_ha_nobody_{os.getpid()}"  # no master there
        try:
            started = time.monotonic()
            store, rc = self.new_store(self.cluster.ha_addr)
            took = time.monotonic() - started
        finally:
            os.environ["MC_STORE_CLUSTER_ID"] = self.cluster.cluster_id
            os.environ.pop("MC_MASTER_WAIT_TIMEOUT", None)
        self.assertNotEqual(rc, OK)
        self.assertLess(took, 2 + 10.0)  # the wait (2 s) plus one etcd read and RPC attempt
        store.close()


if __name__ == "__main__":
    unittest.main()
