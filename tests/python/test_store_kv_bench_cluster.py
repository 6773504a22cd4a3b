"""test_store_kv_bench_cluster.py — store_kv_bench.py against the real mooncake.store and cluster.

setUpModule starts, from the build tree (MC_BUILD_DIR, default <repo>/build), a mooncake_master
with its embedded HTTP metadata server (as the guide runs it) and `--default_kv_lease_ttl=0`
(the metadata scenarios remove right after exist/get, which grant leases), plus one
mooncake_client holding a 256 MB segment, all on free loopback ports. Every scenario then runs
small as a separate `python3 store_kv_bench.py` process (module from <build>/python, prepended to
PYTHONPATH) and must exit 0 with "ok": true; the guide's multi-process recipe is checked by two
concurrent processes and --aggregate.

Skips the whole module, with the reason, when the binaries are not built or `mooncake.store`
does not import for this interpreter. Runs under pytest and unittest; standard library only.
"""
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("MC_BUILD_DIR", os.path.join(REPO, "build"))
BENCH = os.path.join(REPO, "mooncake-store", "benchmarks", "store_kv_bench.py")
MODULE_DIR = os.path.join(BUILD, "python")
CLIENT_SEGMENT = "256MB"
RUN_TIMEOUT_S = 120

CLUSTER = None


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bench_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = MODULE_DIR + (os.pathsep + env["PYTHONPATH"]
                                      if env.get("PYTHONPATH") else "")
    env.pop("MOONCAKE_STORE_MODULE", None)
    return env


def module_import_problem():
    """None if mooncake.store imports in a child of this interpreter, else why not."""
    proc = subprocess.run([sys.executable, "-c", "import mooncake.store"], env=bench_env(),
                          capture_output=True, text=True, timeout=60)
    if proc.returncode == 0:
        return None
    last = (proc.stderr.strip().splitlines() or ["?"])[-1]
    return f"mooncake.store does not import from {MODULE_DIR} for {sys.executable}: {last}"


class Cluster:
    """mooncake_master (HTTP metadata server on, lease TTL 0) + one mooncake_client."""

    def __init__(self):
        self.logdir = tempfile.TemporaryDirectory(prefix="kvbench_cluster_")
        self.procs = []
        self.logs = []
        tools = os.path.join(BUILD, "tools")
        try:
            self._start(tools)
        except BaseException:
            self.stop()  # no process outlives a failed start
            raise

    def _start(self, tools):
        master_bin = os.path.join(tools, "mooncake_master")
        client_bin = os.path.join(tools, "mooncake_client")
        rpc_port, http_port = free_port(), free_port()
        self.master_addr = f"127.0.0.1:{rpc_port}"
        self.metadata_url = f"http://127.0.0.1:{http_port}/metadata"
        master = self._spawn("master", [
            master_bin, f"--rpc_port={rpc_port}", "--rpc_address=127.0.0.1",
            f"--metrics_port={free_port()}", "--metrics_host=127.0.0.1",
            "--enable_http_metadata_server=true", "--http_metadata_server_host=127.0.0.1",
            f"--http_metadata_server_port={http_port}", "--default_kv_lease_ttl=0"])
        self._wait_port(rpc_port, master, "master")
        self._wait_port(http_port, master, "master")
        client = self._spawn("client", [
            client_bin, f"--global_segment_size={CLIENT_SEGMENT}", "--host=127.0.0.1",
            f"--port={free_port()}", f"--metadata_server={self.metadata_url}",
            f"--master_server_address={self.master_addr}"], stdout=subprocess.PIPE)
        self._wait_ready(client)

    def _spawn(self, name, argv, stdout=None):
        log = open(os.path.join(self.logdir.name, name + ".log"), "wb")
        self.logs.append(log)
        proc = subprocess.Popen(argv, stdout=stdout or log, stderr=log, stdin=subprocess.DEVNULL)
        self.procs.append(proc)
        return proc

    def _wait_port(self, port, proc, name, timeout=20.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}: "
                                   + self.log_tail(name))
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"{name}: port {port} did not open within {timeout} s")

    def _wait_ready(self, proc, timeout=20.0):
        ready = threading.Event()

        def reader():  # drains stdout until the client exits
            for raw in proc.stdout:
                if raw.startswith(b"mooncake_client ready"):
                    ready.set()

        threading.Thread(target=reader, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.05):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("mooncake_client did not become ready: "
                                   + self.log_tail("client"))

    def log_tail(self, name):
        try:
            with open(os.path.join(self.logdir.name, name + ".log"), "rb") as f:
                return f.read()[-2000:].decode(errors="replace")
        except OSError:
            return ""

    def stop(self):
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout:
                proc.stdout.close()
        for log in self.logs:
            log.close()
        self.logdir.cleanup()


def setUpModule():
    global CLUSTER
    for name in ("mooncake_master", "mooncake_client"):
        if not os.access(os.path.join(BUILD, "tools", name), os.X_OK):
            raise unittest.SkipTest(f"{BUILD}/tools/{name} is not built (set MC_BUILD_DIR)")
    problem = module_import_problem()
    if problem:  # a broken extension is a failure, never a skip that reads as a pass
        raise ImportError(problem)
    CLUSTER = Cluster()


def tearDownModule():
    global CLUSTER
    if CLUSTER is not None:
        CLUSTER.stop()
        CLUSTER = None


class BenchProcess:
    """One `store_kv_bench.py` process against the module's cluster."""

    _serial = [0]

    def __init__(self, tmpdir, *argv, name=None, prefix=None):
        BenchProcess._serial[0] += 1
        self.name = name or f"run{BenchProcess._serial[0]}"
        prefix = prefix or f"kvb-{os.getpid()}-{self.name}"
        self.summary_path = os.path.join(tmpdir, self.name + ".json")
        self.argv = [sys.executable, BENCH,
                     "--local-hostname", f"127.0.0.1:{free_port()}",
                     "--metadata-server", CLUSTER.metadata_url,
                     "--master-server", CLUSTER.master_addr,
                     "--protocol", "tcp",
                     "--key-size", "48",
                     "--key-prefix", prefix,
                     "--summary-json", self.summary_path,
                     "--progress-interval", "0", *argv]
        self.proc = subprocess.Popen(self.argv, env=bench_env(), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def wait(self):
        """(exit code, summary dict or None, console text)."""
        try:
            out, _ = self.proc.communicate(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        summary = None
        if os.path.exists(self.summary_path):
            with open(self.summary_path, encoding="utf-8") as f:
                summary = json.load(f)
        return self.proc.returncode, summary, out.decode(errors="replace")


class ClusterBenchTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="kvbench_run_")
        self.addCleanup(self.tmp.cleanup)

    def run_ok(self, *argv, phases):
        code, summary, text = BenchProcess(self.tmp.name, *argv).wait()
        context = text[-4000:] + "\n--- master log ---\n" + CLUSTER.log_tail("master")
        self.assertEqual(code, 0, context)
        self.assertIsNotNone(summary, context)
        self.assertTrue(summary["ok"], context)
        self.assertEqual(summary["phase_order"], list(phases), context)
        for name in phases:
            phase = summary["phases"][name]
            self.assertGreater(phase["successful_kvs"], 0, name)
            self.assertEqual(phase["failed_kvs"], 0, name)
            self.assertEqual(phase["verify_failures"], 0, name)
        self.assertIn("=== overall summary ===", text)
        return summary

    # -- the guide's validation command, scaled down --

    def test_verify_write_guide_command(self):
        s = self.run_ok("--scenario", "verify_write", "--global-segment-size", "64MiB",
                        "--local-buffer-size", "32MiB", "--nr-objects", "16",
                        "--value-size", "1048576", "--pattern", "0xA5", "--verify",
                        phases=("write_verify", "verify_read"))
        self.assertEqual(s["phases"]["verify_read"]["successful_kvs"], 16)
        self.assertEqual(s["phases"]["verify_read"]["bytes"], 16 << 20)

    def test_verify_write_zcopy_unique_batched(self):
        self.run_ok("--scenario", "verify_write", "--io-api", "zcopy", "--payload-mode",
                    "unique", "--verify", "--numjobs", "2", "--batch-size", "4",
                    "--global-segment-size", "0", "--nr-objects", "32", "--value-size", "65536",
                    phases=("write_verify", "verify_read"))

    def test_fill(self):
        s = self.run_ok("--scenario", "fill", "--global-segment-size", "0", "--nr-objects", "32",
                        "--numjobs", "2", "--batch-size", "4", phases=("fill_write",))
        self.assertEqual(s["phases"]["fill_write"]["successful_kvs"], 32)

    def test_write_perf_plain_and_zcopy(self):
        for api in ("plain", "zcopy"):
            with self.subTest(api=api):
                s = self.run_ok("--scenario", "write_perf", "--io-api", api,
                                "--global-segment-size", "0", "--local-buffer-size", "16MiB",
                                "--numjobs", "2", "--batch-size", "4", "--nr-objects", "32",
                                "--value-size", "262144", "--pattern", "0xA5",
                                phases=("write_perf",))
                self.assertEqual(s["phases"]["write_perf"]["successful_kvs"], 32)

    def test_write_perf_time_based(self):
        s = self.run_ok("--scenario", "write_perf", "--runtime", "1", "--nr-objects", "100000",
                        "--global-segment-size", "0", "--value-size", "4096",
                        "--latency-sample-rate", "10", phases=("write_perf",))
        self.assertGreaterEqual(s["phases"]["write_perf"]["duration_sec"], 0.9)

    def test_read_perf_plain_and_zcopy(self):
        for api in ("plain", "zcopy"):
            with self.subTest(api=api):
                s = self.run_ok("--scenario", "read_perf", "--io-api", api,
                                "--global-segment-size", "0", "--local-buffer-size", "16MiB",
                                "--numjobs", "2", "--iodepth", "2", "--batch-size", "2",
                                "--nr-objects", "32", "--value-size", "131072",
                                "--pattern", "0xA5", "--verify",
                                phases=("prepare_write", "read_perf"))
                self.assertEqual(s["phases"]["read_perf"]["successful_kvs"], 32)

    def test_mixed_rw(self):
        s = self.run_ok("--scenario", "mixed_rw", "--runtime", "2", "--rwmixread", "70",
                        "--prepare-objects", "16", "--write-objects", "2000",
                        "--global-segment-size", "0", "--numjobs", "2", "--batch-size", "2",
                        "--nr-objects", "16", "--value-size", "65536", "--pattern", "0xA5",
                        "--verify", phases=("prepare_write", "mixed_rw"))
        self.assertGreater(s["phases"]["mixed_rw"]["requests"], 2)

    def test_metadata_smoke(self):
        out = os.path.join(self.tmp.name, "smoke")
        code, summary, text = BenchProcess(
            self.tmp.name, "--scenario", "metadata_smoke", "--numjobs", "2",
            "--nr-objects", "2", "--global-segment-size", "0", "--journal", "all",
            "--output-dir", out).wait()
        self.assertEqual(code, 0, text[-4000:])
        self.assertTrue(summary["ok"])
        self.assertEqual(summary["phases"]["metadata_smoke"]["requests"], 10)
        self.assertEqual(summary["journal_records"], 10)
        with open(os.path.join(out, "journal.jsonl"), encoding="utf-8") as f:
            ops = [json.loads(line)["op"] for line in f]
        self.assertEqual(sorted(ops), sorted(["put", "exist", "get", "remove", "exist"] * 2))

    def test_mixed_metadata_then_replay(self):
        out = os.path.join(self.tmp.name, "mm")
        bench = BenchProcess(self.tmp.name, "--scenario", "mixed_metadata", "--numjobs", "2",
                             "--nr-objects", "40", "--global-segment-size", "0",
                             "--journal", "all", "--output-dir", out, name="mm")
        code, summary, text = bench.wait()
        self.assertEqual(code, 0, text[-4000:])
        self.assertTrue(summary["ok"], text[-4000:])
        self.assertEqual(summary["phases"]["mixed_metadata"]["requests"], 40)
        journal = os.path.join(out, "journal.jsonl")
        self.run_ok("--scenario", "replay", "--replay-file", journal, "--numjobs", "2",
                    "--global-segment-size", "0", phases=("replay",))

    def test_remove_perf(self):
        s = self.run_ok("--scenario", "remove_perf", "--numjobs", "2", "--nr-objects", "32",
                        "--global-segment-size", "0", phases=("prepare_write", "remove_perf"))
        self.assertEqual(s["phases"]["remove_perf"]["successful_kvs"], 32)

    # -- the guide's multi-process recipe --

    def test_two_processes_then_aggregate(self):
        common = ("--scenario", "write_perf", "--global-segment-size", "0", "--numjobs", "2",
                  "--batch-size", "2", "--nr-objects", "32", "--value-size", "65536",
                  "--pattern", "0xA5", "--save-latency-samples")
        runs = [BenchProcess(self.tmp.name, *common, "--object-id-start", str(i * 1000),
                             name=f"p{i}") for i in range(2)]
        results = [r.wait() for r in runs]
        for code, summary, text in results:
            self.assertEqual(code, 0, text[-4000:])
            self.assertTrue(summary["ok"])
        out = os.path.join(self.tmp.name, "all.json")
        proc = subprocess.run([sys.executable, BENCH, "--aggregate",
                               *(r.summary_path for r in runs), "--summary-json", out],
                              capture_output=True, text=True, timeout=60, env=bench_env())
        self.assertEqual(proc.returncode, 0, proc.stderr)
        with open(out, encoding="utf-8") as f:
            agg = json.load(f)
        phase = agg["phases"]["write_perf"]
        self.assertTrue(agg["ok"])
        self.assertEqual(phase["successful_kvs"], 64)
        self.assertEqual(phase["bytes"], 64 * 65536)
        self.assertEqual(phase["latency_source"], "samples")
        spans = sorted((s["phases"]["write_perf"]["start_time"],
                        s["phases"]["write_perf"]["end_time"]) for _, s, _ in results)
        union = sum(end - start for start, end in spans)
        if spans[1][0] < spans[0][1]:  # the processes overlapped
            union = max(spans[0][1], spans[1][1]) - spans[0][0]
        self.assertAlmostEqual(phase["duration_sec"], union, places=6)
        self.assertIn("=== phase write_perf ===", proc.stderr)


class HonestBenchTest(unittest.TestCase):
    """A run never looks successful for work it did not do."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="kvbench_honest_")
        self.addCleanup(self.tmp.cleanup)

    def bench(self, *argv, **kw):
        code, summary, text = BenchProcess(self.tmp.name, *argv, **kw).wait()
        self.assertIsNotNone(summary, text[-4000:])
        return code, summary, text

    def test_second_write_perf_over_the_same_keys_is_not_ok(self):
        prefix = f"kvb-{os.getpid()}-again"
        common = ("--scenario", "write_perf", "--global-segment-size", "0", "--numjobs", "2",
                  "--batch-size", "4", "--nr-objects", "24", "--value-size", "65536",
                  "--pattern", "0xA5", "--keep-objects")
        code, first, text = self.bench(*common, prefix=prefix, name="first")
        self.assertEqual(code, 0, text[-4000:])
        self.assertTrue(first["ok"])
        self.assertEqual(first["phases"]["write_perf"]["existing_keys"], 0)
        self.assertEqual(first["overall"]["existing_keys"], 0)
        self.assertEqual(first["phases"]["write_perf"]["bytes"], 24 * 65536)
        code, second, text = self.bench(*common, prefix=prefix, name="second")
        self.assertEqual(code, 23, text[-4000:])
        self.assertFalse(second["ok"])
        self.assertEqual(second["exit_code"], 23)
        phase = second["phases"]["write_perf"]
        self.assertEqual(phase["existing_keys"], 24)
        self.assertEqual(second["overall"]["existing_keys"], 24)
        self.assertEqual(phase["successful_kvs"], 24)  # put answered 0 ...
        self.assertEqual(phase["bytes"], 0)  # ... but moved nothing
        self.assertIn("24 of 24 puts found their key already stored", text)
        self.assertIn(repr(prefix), text)
        self.assertIn("existing_keys=24", text)

    def test_guide_sequence_writes_fresh_keys_in_every_phase(self):
        """verify_write, write_perf, read_perf with one prefix on one cluster (the guide's
        order, scaled down): every write phase writes, every run is ok."""
        prefix = f"kvb-{os.getpid()}-guide"
        runs = [
            ("verify_write", "--nr-objects", "16", "--value-size", "1048576", "--verify"),
            ("write_perf", "--numjobs", "2", "--batch-size", "4", "--nr-objects", "32",
             "--value-size", "262144"),
            ("read_perf", "--numjobs", "2", "--batch-size", "4", "--nr-objects", "32",
             "--value-size", "262144", "--verify"),
        ]
        for scenario, *argv in runs:
            code, s, text = self.bench("--scenario", scenario, "--global-segment-size", "0",
                                       "--pattern", "0xA5", *argv, prefix=prefix)
            self.assertEqual(code, 0, text[-4000:])
            self.assertTrue(s["ok"], scenario)
            for name, phase in s["phases"].items():
                self.assertEqual(phase["existing_keys"], 0, (scenario, name))
                if "write" in name or name == "write_perf":
                    self.assertEqual(phase["bytes"], phase["successful_kvs"] * s["config"][
                        "value_size"], (scenario, name))
                    self.assertGreater(phase["bytes"], 0, (scenario, name))

    def test_cut_prefix_is_refused_before_connecting(self):
        proc = subprocess.run(
            [sys.executable, BENCH, "--scenario", "write_perf", "--key-prefix", "guide-run-a",
             "--key-size", "20", "--master-server", "127.0.0.1:1"],
            env=bench_env(), capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("needs --key-size 27", proc.stderr)
        self.assertNotIn("scenario=", proc.stderr)  # refused before the run started

    def test_plot_and_csv(self):
        png = os.path.join(self.tmp.name, "plot.png")
        code, s, text = self.bench("--scenario", "read_perf", "--global-segment-size", "0",
                                   "--numjobs", "2", "--batch-size", "2", "--nr-objects", "16",
                                   "--value-size", "65536", "--pattern", "0xA5", "--verify",
                                   "--plot", png, name="plotted")
        self.assertEqual(code, 0, text[-4000:])
        with open(png, "rb") as f:
            data = f.read()
        self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n")
        self.assertGreater(len(data), 10_000)
        import csv
        with open(os.path.join(self.tmp.name, "plotted.csv"), encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([r["phase"] for r in rows], s["phase_order"])
        self.assertEqual(s["phase_order"], ["prepare_write", "read_perf"])
        for row in rows:
            rec = s["phases"][row["phase"]]
            for field in ("kvs", "successful_kvs", "failed_kvs", "existing_keys", "bytes"):
                self.assertEqual(int(row[field]), rec[field], field)
            for field in ("duration_sec", "MiB_per_sec", "lat_p50_ms", "lat_p99_ms"):
                self.assertEqual(float(row[field]), rec[field], field)
        self.assertEqual(len(s["phases"]["read_perf"]["jobs"]), 2)



class StoreBenchExistingTest(unittest.TestCase):
    """mooncake_store_bench (C) counts puts that found their key stored."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="store_bench_existing_")
        self.addCleanup(self.tmp.cleanup)

    def run_bench(self, prefix, name):
        path = os.path.join(self.tmp.name, name + ".json")
        proc = subprocess.run(
            [os.path.join(BUILD, "tools", "mooncake_store_bench"),
             f"--master_server_address={CLUSTER.master_addr}",
             f"--metadata_server={CLUSTER.metadata_url}", "--protocol=tcp", "--operation=put",
             "--value_size=4096", "--threads=1", "--batch_size=4", "--num_keys=16",
             "--duration=1", "--first_touch_bytes=8MB", "--limits=false",
             f"--key_prefix={prefix}", f"--json={path}"],
            capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
        summary = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                summary = json.load(f)
        return proc, summary, os.path.join(self.tmp.name, name + ".csv")

    def test_put_row_over_stored_keys(self):
        prefix = f"mcb-{os.getpid()}-exist"
        proc, s, csv_path = self.run_bench(prefix + "-fresh", "fresh")
        self.assertEqual(proc.returncode, 0, proc.stderr[-4000:])
        self.assertTrue(s["ok"])
        self.assertEqual(s["existing"], 0)
        put = [r for r in s["rows"] if r["operation"] == "put"]
        self.assertEqual(len(put), 1)
        self.assertEqual(put[0]["existing"], 0)
        self.assertGreater(put[0]["ops"], 0)
        with open(csv_path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 1 + len(s["rows"]))
        self.assertIn("existing", lines[0].split(","))
        # The first generation of row 0, thread 0 is <prefix>/p/r0/t0/g0/k0..15: store 8 of
        # them first, so the row's first 8 puts find their key stored.
        keys = [f"{prefix}/p/r0/t0/g0/k{i}" for i in range(8)]
        script = (
            "import sys, mooncake.store as m\n"
            "s = m.MooncakeDistributedStore()\n"
            f"assert s.setup('127.0.0.1:{free_port()}', {CLUSTER.metadata_url!r}, 0, 16 << 20, "
            f"'tcp', '', {CLUSTER.master_addr!r}) == 0\n"
            f"for k in {keys!r}:\n"
            "    assert s.put(k, b'x' * 4096) == 0\n"
            "s.close()\n")
        pre = subprocess.run([sys.executable, "-c", script], env=bench_env(),
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(pre.returncode, 0, pre.stderr[-4000:])
        proc, s, _ = self.run_bench(prefix, "again")
        self.assertEqual(proc.returncode, 3, proc.stderr[-4000:])
        self.assertFalse(s["ok"])
        self.assertEqual(s["existing"], 8)
        put = [r for r in s["rows"] if r["operation"] == "put"][0]
        self.assertEqual(put["existing"], 8)
        self.assertEqual(put["bytes"], put["ops"] * 4096)
        self.assertIn("8 puts found their key already stored", proc.stderr)

    def test_long_prefix_is_refused(self):
        proc, s, _ = self.run_bench("p" * 64, "long")
        self.assertNotEqual(proc.returncode, 0)
        self.assertIsNone(s)
        self.assertIn("would be cut", proc.stderr)


if __name__ == "__main__":
    unittest.main()
