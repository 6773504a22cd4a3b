"""test_upstream_modules.py — upstream Mooncake's pure-Python modules as mooncake-c ships them,
against real processes on loopback:

  mooncake.http_metadata_server  KVBootstrapServer / KVPoll / `python -m`, on the C server; two
                                 stores whose Transfer Engines find each other through it
  mooncake.cli, cli_client, cli_bench   the console-script shims (exec / subprocess)
  mooncake.mooncake_config       MooncakeConfig parsing (file, environment, validation)
  mooncake.mooncake_store_service the REST front-end over a real store (`python -m`, HTTP)
  mooncake.async_store           MooncakeDistributedStoreAsync
"""
import asyncio
import http.client as httpclient
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import shutil
import urllib.error
import urllib.parse
import urllib.request

from test_store import BUILD, Cluster, die_with_parent, free_port, wait_port

import mooncake.store as mcs
from mooncake import http_metadata_server as hms
from mooncake import mooncake_config as mcfg
from mooncake import mooncake_store_service as rest
from mooncake.async_store import MooncakeDistributedStoreAsync

MiB = 1 << 20
CLUSTER = None
PYTHON_ENV = dict(os.environ, PYTHONPATH=os.pathsep.join(
    [os.path.join(BUILD, "python")] + [p for p in [os.environ.get("PYTHONPATH")] if p]))


def setUpModule():
    global CLUSTER
    CLUSTER = Cluster()


def tearDownModule():
    if CLUSTER:
        CLUSTER.stop()


def request(method, url, body=None, headers=None, timeout=10):
    """(status, body bytes) of one request; HTTP errors are answers, not exceptions."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Child:
    """A `python -m mooncake.<module>` child whose stdout line starting with `prefix` gives the
    port; stderr goes to a file (self.stderr() reads it)."""

    def __init__(self, module, args, prefix, env=None, timeout=30.0):
        self.errfile = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module] + args, stdout=subprocess.PIPE, stderr=self.errfile,
            stdin=subprocess.DEVNULL, env=env or PYTHON_ENV, preexec_fn=die_with_parent)
        self.port = None
        found = threading.Event()
        self.lines = []

        def reader():
            for raw in self.proc.stdout:
                line = raw.decode(errors="replace").strip()
                self.lines.append(line)
                if line.startswith(prefix) and not found.is_set():
                    self.port = int(line.rsplit(":", 1)[1])
                    found.set()

        threading.Thread(target=reader, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not found.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{module} did not start: {self.stderr()[-2000:]}")

    def stderr(self):
        if self.errfile.closed:
            return self.err_text
        self.errfile.seek(0)
        return self.errfile.read().decode(errors="replace")

    def stop(self, sig=signal.SIGTERM):
        """Sends `sig`, returns the exit status; stderr() stays readable."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        if not self.errfile.closed:
            self.err_text = self.stderr()
            self.errfile.close()
        self.proc.stdout.close()
        return rc


# ---- http_metadata_server -------------------------------------------------------------------


class MetadataServerTest(unittest.TestCase):
    def setUp(self):
        self.server = hms.KVBootstrapServer(0, host="127.0.0.1")
        self.addCleanup(self.server.close)

    def url(self, key=None):
        base = f"http://127.0.0.1:{self.server.port}/metadata"
        return base if key is None else f"{base}?key={key}"

    def test_poll_run_close(self):
        self.assertEqual(self.server.poll(), hms.KVPoll.Failed)  # upstream: Failed before run
        thread = self.server.run()
        self.assertTrue(thread.is_alive())
        self.assertNotEqual(self.server.port, 0)
        self.assertEqual(self.server.poll(), hms.KVPoll.Success)
        self.assertEqual(request("GET", f"http://127.0.0.1:{self.server.port}/health"),
                         (200, b"OK"))
        port = self.server.port
        self.server.close()
        self.assertEqual(self.server.poll(), hms.KVPoll.Failed)
        self.assertFalse(thread.is_alive())
        with socket.socket() as s:
            self.assertNotEqual(s.connect_ex(("127.0.0.1", port)), 0)
        self.server.close()  # idempotent
        self.assertEqual([m.value for m in hms.KVPoll], [0, 1, 2, 3, 4])

    def test_protocol_follows_the_cpp_server(self):
        self.server.run()
        self.assertEqual(request("GET", self.url("a"))[0], 404)
        self.assertEqual(request("PUT", self.url("a"), b"1")[0], 200)
        self.assertEqual(request("GET", self.url("a")), (200, b"1"))
        # rpc_meta: an identical re-PUT is accepted (C++ server; upstream's Python one: 400),
        # a different body refused (both)
        self.assertEqual(request("PUT", self.url("x/rpc_meta/1"), b"one")[0], 200)
        self.assertEqual(request("PUT", self.url("x/rpc_meta/1"), b"one")[0], 200)
        self.assertEqual(request("PUT", self.url("x/rpc_meta/1"), b"two")[0], 400)
        self.assertEqual(request("GET", self.url())[0], 400)  # no key
        self.assertEqual(request("POST", self.url("a"), b"1")[0], 405)
        self.assertEqual(request("DELETE", self.url("a"))[0], 200)
        self.assertEqual(request("DELETE", self.url("a"))[0], 404)

    def test_two_stores_find_each_other_through_it(self):
        self.server.run()
        meta = self.url()
        a, b = mcs.MooncakeDistributedStore(), mcs.MooncakeDistributedStore()
        for s in (a, b):
            self.assertEqual(s.setup("127.0.0.1", meta, 16 * MiB, 16 * MiB, "tcp", "",
                                     CLUSTER.master_addr), 0)
            self.addCleanup(s.close)
        self.assertGreater(self.server._server.size(), 0)  # both published their descriptors
        cfg = mcs.ReplicateConfig()
        cfg.preferred_segment = a.get_hostname()
        value = os.urandom(3 * MiB + 5)
        key = f"modules/te/{os.getpid()}"
        self.assertEqual(b.put(key, value, cfg), 0)  # b writes into a's segment over tcp
        reps = b.get_replica_desc(key)
        self.assertEqual([r.get_memory_descriptor().buffer_descriptor.transport_endpoint
                          for r in reps if r.is_memory_replica()], [a.get_hostname()])
        self.assertEqual(b.get(key), value)  # and reads it back from there
        self.assertEqual(a.get(key), value)

    def test_cluster_secret_guards_writes(self):
        with tempfile.NamedTemporaryFile("w") as f:
            f.write("a-random-enough-secret-of-32-bytes!\n")
            f.flush()
            server = hms.KVBootstrapServer(0, host="127.0.0.1", cluster_secret_file=f.name)
            server.run()
            try:
                url = f"http://127.0.0.1:{server.port}/metadata"
                self.assertEqual(request("PUT", url + "?key=k", b"v")[0], 401)
                self.assertEqual(request("GET", url + "?key=k")[0], 404)  # nothing stored
                self.assertEqual(request("GET", url + "/auth_challenge")[0], 200)
            finally:
                server.close()

    def test_bad_arguments(self):
        with self.assertRaises(ValueError):
            hms.KVBootstrapServer(70000)
        taken = hms.KVBootstrapServer(0, host="127.0.0.1")
        taken.run()
        self.addCleanup(taken.close)
        with self.assertRaises(OSError):
            hms.KVBootstrapServer(taken.port, host="127.0.0.1").run()

    def test_python_dash_m_serves_until_sigterm(self):
        child = Child("mooncake.http_metadata_server",
                      ["--port", "0", "--host", "127.0.0.1", "--log-level", "WARNING"],
                      "HTTP metadata server listening on")
        try:
            url = f"http://127.0.0.1:{child.port}/metadata?key=k"
            self.assertEqual(request("PUT", url, b"v")[0], 200)
            self.assertEqual(request("GET", url), (200, b"v"))
        finally:
            self.assertEqual(child.stop(), 0)
        self.assertNotIn("all interfaces", child.stderr())

    def test_wildcard_without_secret_warns_once(self):
        env = {k: v for k, v in PYTHON_ENV.items() if not k.startswith("MOONCAKE_CLUSTER")}
        child = Child("mooncake.http_metadata_server", ["--port", "0", "--host", "0.0.0.0"],
                      "HTTP metadata server listening on", env=env)
        self.assertEqual(child.stop(signal.SIGINT), 0)
        self.assertEqual(child.stderr().count("listens on all interfaces"), 1)


# ---- console-script shims -------------------------------------------------------------------


class CliShimTest(unittest.TestCase):
    def test_cli_execs_the_master_in_place(self):
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "mooncake.cli", f"--rpc_port={port}",
             f"--metrics_port={free_port()}", "--rpc_address=127.0.0.1",
             "--metrics_host=127.0.0.1"],
            env=PYTHON_ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        try:
            wait_port(port, proc)
            exe = os.path.realpath(f"/proc/{proc.pid}/exe")  # same PID: exec'd, not a child
            self.assertEqual(exe, os.path.realpath(os.path.join(BUILD, "tools",
                                                                "mooncake_master")))
        finally:
            proc.terminate()
            self.assertEqual(proc.wait(timeout=20), 0)

    def test_cli_client_passes_arguments_and_status(self):
        r = subprocess.run([sys.executable, "-m", "mooncake.cli_client", "--no_such_flag=1"],
                           env=PYTHON_ENV, capture_output=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn(b"no_such_flag", r.stderr)

    def test_cli_bench_runs_the_bench_as_a_child(self):
        r = subprocess.run([sys.executable, "-m", "mooncake.cli_bench", "--help"],
                           env=PYTHON_ENV, capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b"transfer_engine_bench", r.stdout + r.stderr)
        r = subprocess.run([sys.executable, "-m", "mooncake.cli_bench", "--no_such_flag=1"],
                           env=PYTHON_ENV, capture_output=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)

    def test_missing_program_is_a_clear_error(self):
        with tempfile.TemporaryDirectory() as empty:
            env = dict(PYTHON_ENV, MOONCAKE_BIN_DIR=empty, PATH=empty)
            # a copy of the package with no build tree or <prefix>/bin next to it
            pkg = os.path.join(empty, "lib", "python")
            shutil.copytree(os.path.join(BUILD, "python", "mooncake"),
                            os.path.join(pkg, "mooncake"))
            env["PYTHONPATH"] = pkg
            r = subprocess.run([sys.executable, "-m", "mooncake.cli"], env=env,
                               capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 127)
        self.assertIn(b"mooncake_master: program not found", r.stderr)


# ---- mooncake_config ------------------------------------------------------------------------


class MooncakeConfigTest(unittest.TestCase):
    REQUIRED = {"local_hostname": "node1", "metadata_server": "P2PHANDSHAKE",
                "master_server_address": "master:50051"}

    def from_json(self, **fields):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(dict(self.REQUIRED, **fields), f)
        self.addCleanup(os.unlink, f.name)
        return mcfg.MooncakeConfig.from_file(f.name)

    def test_fields_and_defaults(self):
        c = self.from_json()
        self.assertEqual([f for f in mcfg.MooncakeConfig.__dataclass_fields__], [
            "local_hostname", "metadata_server", "global_segment_size", "local_buffer_size",
            "protocol", "device_name", "master_server_address", "enable_ssd_offload",
            "ssd_offload_path", "tenant_id", "enable_client_http_server", "client_http_port"])
        self.assertEqual((c.global_segment_size, c.local_buffer_size), (3355443200, 1073741824))
        self.assertEqual((c.protocol, c.device_name, c.enable_ssd_offload, c.ssd_offload_path,
                          c.tenant_id, c.enable_client_http_server, c.client_http_port),
                         ("tcp", "", False, "", "default", False, 9300))

    def test_sizes(self):
        cases = {"16MB": 16 << 20, "16 mb": 16 << 20, "1.5GB": 3 << 29, "2k": 2048,
                 "512": 512, "1tb": 1 << 40, "3b": 3, "0.5 M": 1 << 19, 4096: 4096}
        for text, want in cases.items():
            self.assertEqual(self.from_json(global_segment_size=text).global_segment_size, want,
                             text)
        for bad in ("", "MB", "lots", "50%"):
            with self.assertRaises(ValueError, msg=bad):
                self.from_json(local_buffer_size=bad)

    def test_booleans(self):
        for word in ("true", "1", "YES", "on", "Enable", True, 1):
            self.assertTrue(self.from_json(enable_ssd_offload=word).enable_ssd_offload, word)
        for word in ("false", "0", "no", "OFF", "disable", False, 0, ""):
            self.assertFalse(self.from_json(enable_client_http_server=word)
                             .enable_client_http_server, word)
        with self.assertRaises(ValueError):
            self.from_json(enable_ssd_offload="maybe")

    def test_validation(self):
        for field in self.REQUIRED:
            fields = dict(self.REQUIRED)
            del fields[field]
            with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
                json.dump(fields, f)
                f.flush()
                with self.assertRaisesRegex(ValueError, field):
                    mcfg.MooncakeConfig.from_file(f.name)
            with self.assertRaisesRegex(ValueError, field):
                self.from_json(**{field: "  "})
        self.assertEqual(self.from_json(protocol=" RDMA ").protocol, "rdma")
        with self.assertLogs("mooncake.mooncake_config", "WARNING"):
            self.assertEqual(self.from_json(protocol="carrier-pigeon").protocol, "carrier-pigeon")
        with self.assertRaises(ValueError):
            self.from_json(protocol="")
        with self.assertRaisesRegex(ValueError, "non-negative"):
            self.from_json(global_segment_size=-1)

    def env(self, **values):
        keys = [k for k in os.environ if k.startswith("MOONCAKE_")]
        saved = {k: os.environ.pop(k) for k in keys}
        os.environ.update(values)

        def restore():
            for k in values:
                os.environ.pop(k, None)
            os.environ.update(saved)

        self.addCleanup(restore)

    def test_load_from_env(self):
        self.env()
        with self.assertRaisesRegex(ValueError, "MOONCAKE_MASTER"):
            mcfg.MooncakeConfig.load_from_env()
        self.env(MOONCAKE_MASTER="m:1", MOONCAKE_GLOBAL_SEGMENT_SIZE="1gb",
                 MOONCAKE_PROTOCOL="TCP", MOONCAKE_OFFLOAD_ENABLED="on",
                 MOONCAKE_TENANT_ID="t", MOONCAKE_CLIENT_HTTP_PORT="9400")
        c = mcfg.MooncakeConfig.load_from_env()
        self.assertEqual((c.master_server_address, c.local_hostname, c.metadata_server,
                          c.global_segment_size, c.local_buffer_size, c.protocol,
                          c.enable_ssd_offload, c.tenant_id, c.client_http_port),
                         ("m:1", "localhost", "P2PHANDSHAKE", 1 << 30, 1 << 30, "tcp", True,
                          "t", 9400))
        path = os.path.join(tempfile.mkdtemp(), "c.json")
        self.addCleanup(os.unlink, path)
        with open(path, "w") as f:
            json.dump(dict(self.REQUIRED, local_buffer_size="2mb"), f)
        self.env(MOONCAKE_CONFIG_PATH=path, MOONCAKE_MASTER="ignored:1")
        c = mcfg.MooncakeConfig.load_from_env()
        self.assertEqual((c.master_server_address, c.local_buffer_size), ("master:50051", 2 << 20))


# ---- mooncake_store_service -----------------------------------------------------------------


class StoreServiceTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.config = os.path.join(cls.tmp.name, "config.json")
        with open(cls.config, "w") as f:
            json.dump({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                       "global_segment_size": "32MB", "local_buffer_size": "32MB",
                       "protocol": "tcp", "device_name": "",
                       "master_server_address": CLUSTER.master_addr}, f)
        env = {k: v for k, v in PYTHON_ENV.items() if not k.startswith("MOONCAKE_CLUSTER")}
        # upstream's default host: every interface; no secret -> one warning line
        cls.child = Child("mooncake.mooncake_store_service",
                          ["--config", cls.config, "--port", "0", "--host", "0.0.0.0",
                           "--max-connections", "3"],
                          "REST API started on", env=env)
        cls.base = f"http://127.0.0.1:{cls.child.port}"

    @classmethod
    def tearDownClass(cls):
        cls.child.stop()
        cls.tmp.cleanup()

    def put(self, key, value):
        return request("PUT", self.base + "/api/put", json.dumps({"key": key, "value": value})
                    .encode(), {"Content-Type": "application/json"})

    def test_put_get_exist_remove(self):
        key = f"rest/{os.getpid()}/k é"
        quoted = urllib.parse.quote(key, safe="")
        self.assertEqual(self.put(key, "héllo"), (200, b'{"status": "success"}'))
        self.assertEqual(request("GET", f"{self.base}/api/get/{quoted}"), (200, "héllo".encode()))
        self.assertEqual(json.loads(request("GET", f"{self.base}/api/exist/{quoted}")[1]),
                         {"exists": True})
        # the REST service stores into the real cluster: another client reads it
        other = mcs.MooncakeDistributedStore()
        self.assertEqual(other.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 * MiB, "tcp", "",
                                     CLUSTER.master_addr), 0)
        self.addCleanup(other.close)
        self.assertEqual(other.get(key), "héllo".encode())
        # a key just read is leased: remove answers 500 (-706), as upstream's would
        self.assertEqual(request("DELETE", f"{self.base}/api/remove/{quoted}")[0], 500)
        fresh = urllib.parse.quote(key + "/fresh", safe="")
        self.assertEqual(self.put(key + "/fresh", "x")[0], 200)
        self.assertEqual(request("DELETE", f"{self.base}/api/remove/{fresh}")[0], 200)
        self.assertEqual(request("GET", f"{self.base}/api/get/{fresh}")[0], 404)
        self.assertEqual(json.loads(request("GET", f"{self.base}/api/exist/{fresh}")[1]),
                         {"exists": False})
        self.assertEqual(request("DELETE", f"{self.base}/api/remove/{fresh}")[0], 500)

    def test_remove_all(self):
        for i in range(3):
            self.assertEqual(self.put(f"rest/all/{i}", "x")[0], 200)
        status, body = request("DELETE", self.base + "/api/remove_all")
        self.assertEqual(status, 200)
        removed = int(json.loads(body)["status"].split()[2])
        self.assertGreaterEqual(removed, 3)
        self.assertEqual(request("GET", self.base + "/api/get/rest%2Fall%2F0")[0], 404)

    def test_bad_requests(self):
        def put_raw(body):
            return request("PUT", self.base + "/api/put", body)

        self.assertEqual(put_raw(b"{not json")[0], 400)
        self.assertEqual(put_raw(b"[1, 2]")[0], 400)
        self.assertEqual(put_raw(b'{"key": "k"}'), (400, b'{"error": "Missing key or value"}'))
        self.assertEqual(put_raw(b'{"key": "k", "value": 5}')[0], 400)
        self.assertEqual(request("GET", self.base + "/api/put")[0], 405)
        self.assertEqual(request("GET", self.base + "/api/nothing")[0], 404)
        status, body = request("POST", self.base + "/api/mount", b'{"size": 0}')
        self.assertEqual(status, 400)  # the mount routes themselves: test_segments.py
        self.assertIn(b"positive integer", body)

    def test_oversized_body_is_refused_unread(self):
        with socket.create_connection(("127.0.0.1", self.child.port), timeout=10) as s:
            s.sendall(b"PUT /api/put HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n{" % (100 * MiB + 1))
            reply = s.recv(65536)
        self.assertTrue(reply.startswith(b"HTTP/1.1 413"), reply[:100])
        conn = httpclient.HTTPConnection("127.0.0.1", self.child.port, timeout=10)
        conn.putrequest("PUT", "/api/put")
        conn.endheaders()  # no Content-Length
        self.assertEqual(conn.getresponse().status, 411)
        conn.close()

    def test_connections_beyond_the_limit_are_closed(self):
        idle = [socket.create_connection(("127.0.0.1", self.child.port), timeout=10)
                for _ in range(3)]
        try:
            # the three idle connections hold every slot (their handlers wait for a request)
            deadline = time.monotonic() + 10
            refused = False
            while not refused and time.monotonic() < deadline:
                with socket.create_connection(("127.0.0.1", self.child.port), timeout=10) as s:
                    s.sendall(b"GET /api/exist/x HTTP/1.1\r\nHost: x\r\n\r\n")
                    refused = s.recv(100) == b""
            self.assertTrue(refused, "a fourth connection was served")
        finally:
            for s in idle:
                s.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # the slots come back once the handlers see EOF
            try:
                if request("GET", self.base + "/api/exist/x")[0] == 200:
                    break
            except (ConnectionError, urllib.error.URLError):
                pass
            time.sleep(0.05)
        self.assertEqual(request("GET", self.base + "/api/exist/x")[0], 200)

    def test_wildcard_warning_printed_once(self):
        self.assertEqual(self.child.stderr().count("listens on all interfaces"), 1)


class StoreServiceLifecycleTest(unittest.TestCase):
    def config(self, tmp, **extra):
        path = os.path.join(tmp, "config.json")
        with open(path, "w") as f:
            json.dump(dict({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                            "global_segment_size": "16MB", "local_buffer_size": "16MB",
                            "master_server_address": CLUSTER.master_addr}, **extra), f)
        return path

    def test_sigterm_closes_the_store_and_exits_zero(self):
        with tempfile.TemporaryDirectory() as tmp:
            child = Child("mooncake.mooncake_store_service",
                          ["--config", self.config(tmp), "--port", "0", "--host", "127.0.0.1",
                           "-D", f"local_hostname=127.0.0.1:{free_port()}"],
                          "REST API started on")
            try:
                self.assertEqual(request("PUT", f"http://127.0.0.1:{child.port}/api/put",
                                      b'{"key": "rest/term", "value": "v"}')[0], 200)
            finally:
                self.assertEqual(child.stop(signal.SIGTERM), 0)
            self.assertIn("Mooncake store closed (0)", child.stderr())
            self.assertNotIn("all interfaces", child.stderr())
            with socket.socket() as s:
                self.assertNotEqual(s.connect_ex(("127.0.0.1", child.port)), 0)

    def test_setup_failure_exits_one_after_max_wait(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = self.config(tmp, global_segment_size="100")  # below 1 KiB: -600 each time
            r = subprocess.run([sys.executable, "-m", "mooncake.mooncake_store_service",
                                "--config", path, "--port", "0", "--host", "127.0.0.1",
                                "--max-wait-time", "1.5"],
                               env=PYTHON_ENV, capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 1)
        self.assertIn(b"Failed to start store service", r.stderr)
        self.assertGreaterEqual(r.stderr.count(b"Store setup failed (attempt"), 2)

    def test_cluster_secret_guards_every_route(self):
        with tempfile.TemporaryDirectory() as tmp:
            secret = b"another-secret-with-enough-bytes-0123"
            secret_file = os.path.join(tmp, "secret")
            with open(secret_file, "wb") as f:
                f.write(secret + b"\n")
            env = dict(PYTHON_ENV, MOONCAKE_CLUSTER_SECRET_FILE=secret_file)
            # the master of CLUSTER has no secret: the store would refuse it, so this service
            # gets its own secret-holding master
            master_port = free_port()
            master = subprocess.Popen(
                [os.path.join(BUILD, "tools", "mooncake_master"), f"--rpc_port={master_port}",
                 f"--metrics_port={free_port()}", "--rpc_address=127.0.0.1",
                 "--metrics_host=127.0.0.1"], env=env, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
            try:
                wait_port(master_port, master)
                path = self.config(tmp, master_server_address=f"127.0.0.1:{master_port}")
                # the secret reaches the service by its flag only: its store client must prove
                # it to the master too (a fresh-user attack found it did not)
                child = Child("mooncake.mooncake_store_service",
                              ["--config", path, "--port", "0", "--host", "0.0.0.0",
                               "--cluster-secret-file", secret_file],
                              "REST API started on", env=PYTHON_ENV)
                try:
                    base = f"http://127.0.0.1:{child.port}"
                    body = b'{"key": "rest/secret", "value": "v"}'
                    self.assertEqual(request("PUT", base + "/api/put", body)[0], 401)
                    self.assertEqual(request("GET", base + "/api/exist/rest%2Fsecret")[0], 401)

                    def signed(method, path, payload=b""):
                        nonce = json.loads(request("GET", base + "/api/auth_challenge")[1])["nonce"]
                        hdr = rest.auth_header(secret, method, path, nonce, payload)
                        return hdr, request(method, base + path, payload or None,
                                         {rest.AUTH_HEADER: hdr})

                    hdr, answer = signed("PUT", "/api/put", body)
                    self.assertEqual(answer[0], 200)
                    # a proof is single use
                    self.assertEqual(request("PUT", base + "/api/put", body,
                                          {rest.AUTH_HEADER: hdr})[0], 401)
                    self.assertEqual(signed("GET", "/api/get/rest%2Fsecret")[1], (200, b"v"))
                    # a proof for another body does not pass
                    nonce = json.loads(request("GET", base + "/api/auth_challenge")[1])["nonce"]
                    hdr = rest.auth_header(secret, "PUT", "/api/put", nonce, b"{}")
                    self.assertEqual(request("PUT", base + "/api/put", body,
                                          {rest.AUTH_HEADER: hdr})[0], 401)
                    wrong = rest.auth_header(b"wrong", "GET", "/api/exist/x", json.loads(
                        request("GET", base + "/api/auth_challenge")[1])["nonce"])
                    self.assertEqual(request("GET", base + "/api/exist/x",
                                          headers={rest.AUTH_HEADER: wrong})[0], 401)
                finally:
                    self.assertEqual(child.stop(), 0)
                self.assertNotIn("all interfaces", child.stderr())
            finally:
                master.terminate()
                master.wait(timeout=20)


# ---- async_store ----------------------------------------------------------------------------


class AsyncStoreTest(unittest.TestCase):
    def test_async_methods_run_the_sync_ones_in_the_executor(self):
        store = MooncakeDistributedStoreAsync()
        self.assertEqual(store.setup("127.0.0.1", "P2PHANDSHAKE", 16 * MiB, 16 * MiB, "tcp", "",
                                     CLUSTER.master_addr), 0)
        self.addCleanup(store.close)
        main_thread = threading.get_ident()
        seen = []
        original = store.get

        async def scenario():
            keys = [f"async/{os.getpid()}/{i}" for i in range(8)]
            values = [os.urandom(1000 + i) for i in range(8)]
            rcs = await asyncio.gather(*(store.async_put(k, v) for k, v in zip(keys, values)))
            self.assertEqual(rcs, [0] * 8)
            got = await asyncio.gather(*(store.async_get(k) for k in keys))
            self.assertEqual(got, values)
            self.assertEqual(await store.async_is_exist(keys[0]), 1)
            self.assertEqual(await store.async_remove(keys[0], True), 0)  # force: leased
            self.assertEqual(await store.async_get_batch(keys[:2]), [b"", values[1]])

            def probe():
                seen.append(threading.get_ident())
                return original(keys[1])

            store.probe = probe
            self.assertEqual(await store.async_probe(), values[1])

        asyncio.run(scenario())
        self.assertNotEqual(seen, [main_thread])  # ran on an executor thread
        self.assertIs(store.async_put, store.async_put)  # made once, kept on the instance
        with self.assertRaises(AttributeError):
            store.no_such_name
        with self.assertRaises(AttributeError):
            store.async_no_such_method
        store.not_callable = 5
        with self.assertRaisesRegex(AttributeError, "not callable"):
            store.async_not_callable


if __name__ == "__main__":
    unittest.main()
