"""test_engine_etcd.py — mooncake.engine with etcd metadata, against a real etcd.

A one-member etcd (Debian's /usr/bin/etcd, on free 127.0.0.1 ports, data in a temp dir, killed
with the test) serves as metadata: two TransferEngines initialized with "etcd://127.0.0.1:<port>"
(and the scheme-less form, and initialize_ext(..., "etcd")) publish their segment descriptors
under upstream's keys (mooncake/ram/<segment>, mooncake/rpc_meta/<segment>), find each other
through etcd and move exact bytes; an engine that is freed removes its keys. The keys are read
back through etcd's own v3 JSON gateway (urllib), not through our code.

Runs under pytest and unittest; the module is found on PYTHONPATH, else in <MC_BUILD_DIR>/python.
"""
import base64
import gc
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("MC_BUILD_DIR", os.path.join(REPO, "build"))
try:
    import mooncake.engine as me
except ImportError:
    sys.path.insert(0, os.path.join(BUILD, "python"))
    import mooncake.engine as me  # noqa: E402

ETCD = "/usr/bin/etcd"


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


class Etcd:
    """One etcd member on loopback; get(key) reads through its v3 JSON gateway."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="mc-etcd-py-")
        self.port, peer = free_port(), free_port()
        client = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(self.dir, "etcd.log"), "wb")
        self.proc = subprocess.Popen(
            [ETCD, "--name", "m0", "--data-dir", os.path.join(self.dir, "m0"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
             "--initial-cluster", f"m0=http://127.0.0.1:{peer}",
             "--logger", "zap", "--log-outputs", "stderr"],
            stdout=self.log, stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
        deadline = time.monotonic() + 30
        while True:  # ready when a real put answers
            try:
                self.call("/v3/kv/put", {"key": b64("mc-test/ready"), "value": b64("up")})
                break
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.close()
                    raise RuntimeError("etcd did not start")
                time.sleep(0.05)

    def call(self, path, body):
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}",
                                     data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())

    def get(self, key):
        """(value bytes, lease id) of key, or None when absent."""
        kvs = self.call("/v3/kv/range", {"key": b64(key)}).get("kvs", [])
        if not kvs:
            return None
        return base64.b64decode(kvs[0].get("value", "")), int(kvs[0].get("lease", "0"))

    def close(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class EngineOnEtcdTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.etcd = Etcd()

    @classmethod
    def tearDownClass(cls):
        cls.etcd.close()

    def engine(self, metadata, ext_type=None):
        te = me.TransferEngine()
        if ext_type:
            rc = te.initialize_ext("127.0.0.1", metadata, "tcp", "", ext_type)
        else:
            rc = te.initialize("127.0.0.1", metadata, "tcp", "")
        self.assertEqual(rc, 0)
        return te, f"127.0.0.1:{te.get_rpc_port()}"

    def test_engines_find_each_other_through_etcd(self):
        url = f"etcd://127.0.0.1:{self.etcd.port}"
        src_te, src_seg = self.engine(url)
        dst_te, dst_seg = self.engine(f"127.0.0.1:{self.etcd.port}")  # no scheme: etcd
        ext_te, ext_seg = self.engine(f"127.0.0.1:{self.etcd.port}", "etcd")
        for seg in (src_seg, dst_seg, ext_seg):
            got = self.etcd.get(f"mooncake/ram/{seg}")
            self.assertIsNotNone(got, seg)
            desc, lease = got
            self.assertEqual(json.loads(desc)["name"], seg)
            self.assertNotEqual(lease, 0)
            rpc, rpc_lease = self.etcd.get(f"mooncake/rpc_meta/{seg}")
            self.assertEqual(json.loads(rpc), {"ip_or_host_name": "127.0.0.1",
                                               "rpc_port": int(seg.split(":")[1])})
            self.assertEqual(rpc_lease, lease)

        n = 3 << 20
        src = src_te.allocate_managed_buffer(n)
        dst = dst_te.allocate_managed_buffer(n)
        self.assertTrue(src and dst)
        data = os.urandom(n)
        self.assertEqual(src_te.write_bytes_to_buffer(src, data, n), 0)
        self.assertEqual(src_te.transfer_sync_write(dst_seg, src, dst, n), 0)
        self.assertEqual(dst_te.read_bytes_from_buffer(dst, n), data)
        back = ext_te.allocate_managed_buffer(n)
        self.assertEqual(ext_te.transfer_sync_read(dst_seg, back, dst, n), 0)
        self.assertEqual(ext_te.read_bytes_from_buffer(back, n), data)

        # a freed engine takes its descriptor out of etcd
        del dst_te
        gc.collect()
        self.assertIsNone(self.etcd.get(f"mooncake/ram/{dst_seg}"))
        self.assertIsNone(self.etcd.get(f"mooncake/rpc_meta/{dst_seg}"))
        self.assertIsNotNone(self.etcd.get(f"mooncake/ram/{src_seg}"))

    def test_unreachable_or_malformed_etcd_is_refused(self):
        te = me.TransferEngine()
        self.assertEqual(te.initialize("127.0.0.1", f"etcd://127.0.0.1:{free_port()}", "tcp", ""),
                         -1)
        self.assertEqual(te.initialize("127.0.0.1", "etcd://no-port", "tcp", ""), -1)
        self.assertEqual(te.initialize("127.0.0.1", "redis://127.0.0.1:6379", "tcp", ""), -1)
        self.assertEqual(te.get_rpc_port(), -1)


if __name__ == "__main__":
    unittest.main()
