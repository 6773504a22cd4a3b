"""test_master_flags.py — mooncake_master's upstream flags and upstream metric names, end to end.

Every flag of upstream's mooncake_master (mooncake-interfaces-2.md §6) that we refuse must stop the
master with exit 2 and one line naming it (command line and config file) unless given at its
default; the implemented ones must take effect (--rpc_port, --rpc_interface, --client_ttl,
validators); /metrics must be a well-formed Prometheus exposition holding every master family of
upstream's (§7.1) with upstream's type, and the counters must move with real puts and gets made
through mooncake.store against a real mooncake_client.

Real processes on loopback from MC_BUILD_DIR (default <repo>/build); the mooncake.store module
from PYTHONPATH or <MC_BUILD_DIR>/python. Run: python3 tests/integration/test_master_flags.py
"""
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
MASTER = os.path.join(BUILD, "tools", "mooncake_master")
CLIENT = os.path.join(BUILD, "tools", "mooncake_client")
try:
    import mooncake.store as mcs
except ImportError:
    sys.path.insert(0, os.path.join(BUILD, "python"))
    import mooncake.store as mcs  # noqa: E402
sys.path.insert(0, os.path.join(REPO, "tests", "python"))
import procstop  # noqa: E402

# Upstream flags we refuse, with a value that is not upstream's default, and the default.
REFUSED = [
    ("root_fs_dir", "/tmp/mc_root", ""),
    ("enable_cxl", "true", "false"),
    ("enable_kv_events", "true", "false"),
    ("enable_multi_tenants", "true", "false"),
    ("offload_force_evict", "true", "false"),
    ("dynamic_replication_mode", "enforce", "off"),
    ("memory_allocator", "cachelib", "offset"),
    ("allocation_strategy", "free_ratio_first", "random"),
    ("enable_metadata_cleanup_on_timeout", "true", "false"),
    ("flagfile", "/tmp/flags.txt", ""),
]

# Upstream flags accepted without effect (each must start the master, with one warning).
NOOP = [
    "enable_metric_reporting=false", "nof_eviction_ratio=0.5",
    "nof_eviction_high_watermark_ratio=0.8", "nof_heartbeat_interval_sec=5",
    "nof_heartbeat_probe_timeout_ms=10", "nof_heartbeat_failures_threshold=2",
    "offload_cap_ratio=0.3", "dynamic_replication_heat_window_seconds=3",
    "dynamic_replication_admission_qps_threshold=0.5",
    "dynamic_replication_max_memory_replicas=3", "kv_events_bind_endpoint=tcp://127.0.0.1:5557",
    "kv_events_model_name=m", "kv_events_backend_id=b", "kv_events_tenant_id=t",
    "kv_events_additional_salt=s", "kv_events_lora_name=l", "kv_events_block_size=16",
    "kv_events_dp_rank=1", "kv_events_emit_legacy_compat=false",
    "kv_events_emit_object_key=false", "kv_events_queue_capacity=10", "pod_name=p",
    "pod_namespace=n", "batch_oplog_retry_timeout_sec=10",
    "global_file_segment_size=1000", "enable_disk_eviction=false", "quota_bytes=10",
    "tenant_quota_connector_type=etcd", "tenant_quota_connector_uri=x",
    "snapshot_payload_store_type=local",
    "snapshot_payload_backend_type=local", "snapshot_catalog_store_type=embedded",
    "snapshot_catalog_backend_type=embedded", "snapshot_catalog_store_connstring=x",
    "snapshot_catalog_backend_connstring=x", "cxl_path=/dev/dax1.0",
    "cxl_size=1024", "rpc_enable_tcp_no_delay=false",
]

_OPS = ["put_start", "put_end", "put_revoke", "get_replica_list", "get_replica_list_by_regex",
        "exist_key", "remove", "remove_by_regex", "remove_all", "mount_segment",
        "unmount_segment", "remount_segment", "mount_nof_segment", "unmount_nof_segment",
        "remount_nof_segment", "ping", "copy_start", "copy_end", "copy_revoke", "move_start",
        "move_end", "move_revoke", "evict_disk_replica", "create_copy_task", "create_move_task",
        "query_task", "fetch_tasks", "update_task"]
_BATCH = ["exist_key", "query_ip", "replica_clear", "get_replica_list", "put_start", "put_end",
          "put_revoke"]

# Every master and HA family of upstream's (§7.1) with its type.
UPSTREAM = {n: "gauge" for n in [
    "master_allocated_bytes", "master_total_capacity_bytes", "segment_allocated_bytes",
    "segment_total_capacity_bytes", "master_nof_allocated_bytes",
    "master_total_nof_capacity_bytes", "nof_segment_allocated_bytes",
    "nof_segment_total_capacity_bytes", "master_allocated_file_size_bytes",
    "master_total_file_capacity_bytes", "master_key_count", "master_soft_pin_key_count",
    "master_active_clients", "mem_cache_nums_", "file_cache_nums_",
    "master_put_start_discarded_staging_size", "master_promotion_in_flight",
    "ha_oplog_last_sequence_id", "ha_oplog_applied_sequence_id", "ha_oplog_standby_lag",
    "ha_oplog_pending_entries", "ha_pending_mutation_queue_size",
    "ha_batch_record_committed_queue_depth", "ha_batch_record_callback_queue_depth",
    "ha_batch_record_last_batch_id", "ha_batch_record_durable_sequence", "ha_standby_state"]}
UPSTREAM.update({n: "histogram" for n in [
    "master_value_size_bytes", "master_nof_heartbeat_probe_latency_ms",
    "master_snapshot_duration_ms", "ha_oplog_etcd_write_latency_us", "ha_oplog_apply_latency_us",
    "ha_batch_record_batch_entries", "ha_batch_record_batch_bytes",
    "ha_batch_record_txn_latency_us", "ha_batch_record_commit_to_durable_us",
    "ha_batch_record_callback_latency_us"]})
_COUNTERS = [f"master_{op}_{k}_total" for op in _OPS for k in ("requests", "failures")]
_COUNTERS += [f"master_batch_{op}_{k}_total" for op in _BATCH
              for k in ("requests", "failures", "partial_successes", "items", "failed_items")]
_COUNTERS += [
    "master_put_start_alloc_failures_total", "master_put_start_partial_allocations_total",
    "master_nof_heartbeat_success_total", "master_nof_heartbeat_failure_total",
    "master_nof_heartbeat_timeout_total", "master_nof_segments_unmounted_by_heartbeat_total",
    "mem_cache_hit_nums_", "file_cache_hit_nums_", "mem_cache_hit_bytes_total",
    "file_cache_hit_bytes_total", "valid_get_nums_", "total_get_nums_",
    "master_successful_evictions_total", "master_attempted_evictions_total",
    "master_evicted_key_count", "master_evicted_size_bytes", "master_put_start_discard_cnt",
    "master_put_start_release_cnt", "master_promotion_admitted_total",
    "master_promotion_completed_total", "master_promotion_completed_bytes_total",
    "master_promotion_expired_total", "master_promotion_failed_total",
    "master_promotion_cancelled_total", "master_promotion_rejected_frequency_total",
    "master_promotion_rejected_watermark_total", "master_promotion_rejected_cap_total",
    "master_promotion_candidate_recorded_total", "master_promotion_candidate_admitted_total",
    "master_promotion_candidate_admission_rejected_total",
    "master_promotion_candidate_expired_evaluated_total",
    "master_promotion_candidate_expired_unevaluated_total",
    "master_promotion_candidate_dropped_limit_total", "mooncake_tenant_quota_reject_total",
    "mooncake_tenant_evict_bytes_total", "master_snapshot_success", "master_snapshot_fail",
    "ha_oplog_skipped_entries_total", "ha_oplog_checksum_failures_total",
    "ha_oplog_gap_resolve_attempts_total", "ha_oplog_gap_resolve_success_total",
    "ha_oplog_etcd_write_failures_total", "ha_oplog_etcd_write_retries_total",
    "ha_oplog_watch_disconnections_total", "ha_oplog_applied_entries_total",
    "ha_oplog_dropped_put_end_total", "ha_oplog_batch_commits_total",
    "ha_oplog_sync_batch_commits_total", "ha_batch_record_durable_batches_total",
    "ha_batch_record_durable_entries_total", "ha_batch_record_retry_total",
    "ha_state_transitions_total"]
_COUNTERS += [f"master_{a}_{t}" for t in ("mem", "nof") for a in (
    "successful_evictions", "attempted_evictions", "evicted_key_count", "evicted_size_bytes")]
UPSTREAM.update({n: "counter" for n in _COUNTERS})
VALUE_SIZE_BOUNDS = [4096, 65536, 262144, 1048576, 4194304, 16777216, 67108864]

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(,|$)')


def parse_prometheus(text):
    """{family: type}, {(sample name, frozenset(labels)): value}; fails on any malformed line."""
    types, samples = {}, {}
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            assert name not in types, f"family {name} declared twice"
            assert typ in ("counter", "gauge", "histogram", "summary", "untyped"), line
            types[name] = typ
            continue
        assert not line.startswith("#"), f"stray comment: {line!r}"
        m = _SAMPLE.match(line)
        assert m, f"malformed sample line: {line!r}"
        name, labels = m.group(1), {}
        if m.group(3):
            pos = 0
            body = m.group(3)
            while pos < len(body):
                lm = _LABEL.match(body, pos)
                assert lm, f"malformed labels: {line!r}"
                labels[lm.group(1)] = lm.group(2)
                pos = lm.end()
        family = name
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and types.get(name[:-len(suffix)]) == "histogram":
                family = name[:-len(suffix)]
        assert family in types, f"sample {name} has no # TYPE before it"
        key = (name, frozenset(labels.items()))
        assert key not in samples, f"duplicate sample {line!r}"
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


def run_master(args, timeout=20):
    """Runs a master that must exit on its own; returns (exit code, stderr)."""
    p = subprocess.run([MASTER] + args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stderr.decode(errors="replace")


class Master:
    """A running mooncake_master on loopback; the start-up line read from its log."""

    def __init__(self, *extra, rpc_address="127.0.0.1"):
        self.log = tempfile.NamedTemporaryFile(prefix="mc_master_", suffix=".log")
        self.rpc_port = free_port()
        self.metrics_port = free_port()
        args = [MASTER, f"--rpc_port={self.rpc_port}", f"--metrics_port={self.metrics_port}",
                "--metrics_host=127.0.0.1"]
        if rpc_address:
            args.append(f"--rpc_address={rpc_address}")
        self.proc = subprocess.Popen(args + list(extra), stdout=self.log, stderr=self.log,
                                     stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        self.started = self._wait_line("Master service started on port")

    def text(self):
        with open(self.log.name, "rb") as f:
            return f.read().decode(errors="replace")

    def _wait_line(self, needle, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in self.text().splitlines():
                if needle in line:
                    return line
            if self.proc.poll() is not None:
                raise AssertionError(f"master exited {self.proc.returncode}: {self.text()}")
            time.sleep(0.05)
        raise AssertionError(f"no {needle!r} in the master log: {self.text()}")

    def get(self, path):
        url = f"http://127.0.0.1:{self.metrics_port}{path}"
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()

    def metrics(self):
        status, body = self.get("/metrics")
        assert status == 200
        return parse_prometheus(body)

    def value(self, name, **labels):
        return self.metrics()[1].get((name, frozenset(labels.items())))

    def wait_value(self, name, pred, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = self.value(name)
            if v is not None and pred(v):
                return v
            time.sleep(0.05)
        raise AssertionError(f"{name} never satisfied the condition (last {self.value(name)})")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        rc = self.proc.wait(timeout=15)
        self.log.close()
        return rc


class Client:
    """A mooncake_client contributing a segment to `master`."""

    def __init__(self, master, size="64MB"):
        self.proc = subprocess.Popen(
            [CLIENT, f"--global_segment_size={size}", "--host=127.0.0.1", f"--port={free_port()}",
             "--metadata_server=P2PHANDSHAKE",
             f"--master_server_address=127.0.0.1:{master.rpc_port}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            preexec_fn=die_with_parent)
        self.ready = threading.Event()

        def reader():
            for raw in self.proc.stdout:
                if raw.startswith(b"mooncake_client ready"):
                    self.ready.set()

        threading.Thread(target=reader, daemon=True).start()
        if not self.ready.wait(20):
            self.stop()
            raise AssertionError("mooncake_client did not report ready")

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


class RefusedFlags(unittest.TestCase):
    def test_every_refused_flag_exits_2_naming_it(self):
        for name, bad, _ in REFUSED:
            with self.subTest(flag=name):
                rc, err = run_master([f"--{name}={bad}", "--rpc_port=0", "--metrics_port=0"])
                self.assertEqual(rc, 2, err)
                lines = [l for l in err.splitlines() if "is not supported" in l]
                self.assertEqual(len(lines), 1, err)
                self.assertIn(f"--{name}={bad} is not supported: ", lines[0])

    def test_ha_start_up_checks(self):
        # --enable_ha: upstream's fatal start-up checks, each with one clear line.
        cases = [
            (["--enable_ha"], 1, "--enable_ha needs the etcd endpoints"),
            (["--enable_ha", "--etcd_endpoints=127.0.0.1:2379"], 1,
             "must be an address clients reach, not 0.0.0.0"),
            (["--enable_ha", "--etcd_endpoints=127.0.0.1:2379", "--rpc_address=127.0.0.1",
              "--ha_backend_type=redis"], 2, "--ha_backend_type=redis is not supported"),
            (["--enable_oplog"], 1, "--enable_oplog needs --enable_ha"),
            (["--enable_ha", "--etcd_endpoints=127.0.0.1:2379", "--rpc_address=127.0.0.1",
              "--cluster_id=/"], 1, "--cluster_id=\"/\" is empty"),
        ]
        for args, code, text in cases:
            with self.subTest(args=args):
                rc, err = run_master(args + ["--rpc_port=0", "--metrics_port=0"]
                                     if "--rpc_address=127.0.0.1" not in args
                                     else args + ["--rpc_port=1", "--metrics_port=0"])
                self.assertEqual(rc, code, err)
                self.assertIn(text, err)

    def test_refused_in_the_config_file_exits_2(self):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write("enable_cxl: true\nrpc_port: 0\n")
            f.flush()
            rc, err = run_master([f"--config_path={f.name}", "--metrics_port=0"])
        self.assertEqual(rc, 2, err)
        self.assertIn("--enable_cxl=true is not supported", err)

    def test_refused_flags_at_their_default_start(self):
        args = [f"--{name}={default}" for name, _, default in REFUSED]
        m = Master(*args)
        try:
            self.assertIn("rpc_address=127.0.0.1", m.started)
        finally:
            self.assertEqual(m.stop(), 0)

    def test_noop_flags_start_with_one_warning_each(self):
        m = Master(*[f"--{a}" for a in NOOP])
        try:
            text = m.text()
            for a in NOOP:
                name = a.split("=")[0]
                with self.subTest(flag=name):
                    self.assertEqual(
                        len([l for l in text.splitlines() if l.startswith("W")
                             and (f"flag --{name} " in l or f"flag --{name}=" in l)
                             and "no effect" in l]), 1, text)
        finally:
            self.assertEqual(m.stop(), 0)


class ImplementedFlags(unittest.TestCase):
    def test_promotion_on_hit_without_enable_offload_warns_and_does_nothing(self):
        # As upstream: promotion needs --enable_offload; without it, one warning and no effect
        # (promotion itself: tests/integration/test_promotion.c).
        m = Master("--promotion_on_hit=true", "--promotion_admission_threshold=3",
                   "--promotion_queue_limit=9", "--promotion_max_per_heartbeat=2")
        try:
            warn = [l for l in m.text().splitlines() if l.startswith("W")
                    and "--promotion_on_hit=true has no effect without --enable_offload" in l]
            self.assertEqual(len(warn), 1, m.text())
            self.assertIn("promotion_on_hit=true, promotion_admission_threshold=3", m.started)
            self.assertIn("promotion_queue_limit=9, promotion_max_per_heartbeat=2", m.started)
            self.assertEqual(m.value("master_promotion_admitted_total"), 0)
        finally:
            self.assertEqual(m.stop(), 0)
        m = Master("--enable_offload=true", "--promotion_on_hit=true")
        try:
            self.assertEqual([l for l in m.text().splitlines() if "promotion_on_hit" in l
                              and l.startswith("W")], [], m.text())
        finally:
            self.assertEqual(m.stop(), 0)


    def test_validators_as_upstream(self):
        for args in (["--eviction_ratio=1.5"], ["--eviction_ratio=-0.1"],
                     ["--nof_eviction_ratio=1.01"], ["--offload_cap_ratio=2"],
                     ["--offloading_queue_limit=0"], ["--offloading_queue_limit=100000001"],
                     ["--default_kv_lease_ttl=5x"], ["--memory_allocator=jemalloc"],
                     ["--allocation_strategy=best"], ["--dynamic_replication_mode=on"],
                     ["--rpc_interface=mc_no_such_nic0"]):
            with self.subTest(args=args):
                rc, err = run_master(args + ["--rpc_port=0", "--metrics_port=0"])
                self.assertEqual(rc, 1, err)
                self.assertIn(args[0].split("=")[0], err)

    def test_rpc_port_serves_there(self):
        m = Master()
        try:
            self.assertIn(f"started on port {m.rpc_port},", m.started)
            with socket.create_connection(("127.0.0.1", m.rpc_port), timeout=5):
                pass
        finally:
            self.assertEqual(m.stop(), 0)

    def test_rpc_interface_replaces_rpc_address(self):
        m = Master("--rpc_interface=lo", rpc_address="192.0.2.1")
        try:
            self.assertIn("rpc_address=127.0.0.1,", m.started)
            with socket.create_connection(("127.0.0.1", m.rpc_port), timeout=5):
                pass
        finally:
            self.assertEqual(m.stop(), 0)

    def test_client_ttl_expires_a_stopped_client(self):
        m = Master("--client_ttl=2")
        c = None
        try:
            c = Client(m)
            m.wait_value("master_active_clients", lambda v: v == 1)
            self.assertGreater(m.value("master_total_capacity_bytes"), 0)
            procstop.freeze(c.proc.pid)
            t0 = time.monotonic()
            m.wait_value("master_active_clients", lambda v: v == 0, timeout=10)
            # the TTL is 2 s and the monitor sweeps every second (slack for a loaded machine;
            # a TTL taken 10x too long fails here)
            self.assertLess(time.monotonic() - t0, 6.0)
            self.assertEqual(m.value("master_total_capacity_bytes"), 0)
        finally:
            if c:
                c.stop()
            self.assertEqual(m.stop(), 0)


class UpstreamMetrics(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.m = Master()
        cls.c = Client(cls.m)

    @classmethod
    def tearDownClass(cls):
        cls.c.stop()
        cls.m.stop()

    def test_every_upstream_family_with_its_type(self):
        types, samples = self.m.metrics()
        for name, typ in UPSTREAM.items():
            with self.subTest(family=name):
                self.assertEqual(types.get(name), typ)
                if typ == "histogram":
                    self.assertIn((name + "_bucket", frozenset({("le", "+Inf")})), samples)
                    self.assertIn((name + "_count", frozenset()), samples)
                elif not name.startswith(("nof_segment_", "segment_", "mooncake_tenant_")):
                    self.assertIn((name, frozenset()), samples)

    def test_counters_move_with_real_puts_and_gets(self):
        m = self.m
        before = m.metrics()[1]

        def delta(after, name, **labels):
            k = (name, frozenset(labels.items()))
            return after.get(k, 0) - before.get(k, 0)

        store = mcs.MooncakeDistributedStore()
        rc = store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 64 << 20, "tcp", "",
                         f"127.0.0.1:{m.rpc_port}")
        self.assertEqual(rc, 0)
        try:
            sizes = [100, 5000, 300000]
            for i, n in enumerate(sizes):
                self.assertEqual(store.put(f"parity/{os.getpid()}/{i}", bytes([i]) * n), 0)
            after = m.metrics()[1]
            self.assertEqual(delta(after, "master_key_count"), 3)
            self.assertEqual(delta(after, "master_put_start_requests_total"), 3)
            self.assertEqual(delta(after, "master_put_end_requests_total"), 3)
            self.assertEqual(delta(after, "master_put_start_failures_total"), 0)
            self.assertEqual(delta(after, "mem_cache_nums_"), 3)
            # every GetReplicaList key the master answers from memory is a hit of that size
            for i, n in enumerate(sizes):
                b = m.metrics()[1]
                self.assertEqual(store.get(f"parity/{os.getpid()}/{i}"), bytes([i]) * n)
                a = m.metrics()[1]
                calls = (a[("master_get_replica_list_requests_total", frozenset())]
                         - b[("master_get_replica_list_requests_total", frozenset())])
                self.assertGreaterEqual(calls, 1)
                for name, want in (("mem_cache_hit_nums_", calls), ("valid_get_nums_", calls),
                                   ("total_get_nums_", calls),
                                   ("mem_cache_hit_bytes_total", calls * n),
                                   ("file_cache_hit_nums_", 0)):
                    k = (name, frozenset())
                    self.assertEqual(a[k] - b[k], want, name)
            b = m.metrics()[1]
            self.assertEqual(store.get(f"parity/{os.getpid()}/absent"), b"")
            a = m.metrics()[1]
            for name, want in (("master_get_replica_list_failures_total", 1),
                               ("total_get_nums_", 1), ("valid_get_nums_", 0),
                               ("mem_cache_hit_nums_", 0)):
                k = (name, frozenset())
                self.assertEqual(a[k] - b[k], want, name)
            after = m.metrics()[1]
            self.assertEqual(delta(after, "master_value_size_bytes_count"), 3)
            self.assertEqual(delta(after, "master_value_size_bytes_sum"), sum(sizes))
            for bound in VALUE_SIZE_BOUNDS:
                want = sum(1 for n in sizes if n <= bound)
                self.assertEqual(delta(after, "master_value_size_bytes_bucket", le=f"{bound}"),
                                 want, bound)
            # a batch of two keys counts as upstream's batch form
            keys = [f"parity/{os.getpid()}/b{i}" for i in range(2)]
            self.assertEqual(store.put_batch(keys, [b"x" * 10, b"y" * 10]), 0)
            after = m.metrics()[1]
            self.assertEqual(delta(after, "master_batch_put_start_requests_total"), 1)
            self.assertEqual(delta(after, "master_batch_put_start_items_total"), 2)
            self.assertEqual(delta(after, "master_batch_put_start_failed_items_total"), 0)
        finally:
            store.close()

    def test_segment_gauges_carry_the_segment_label(self):
        samples = self.m.metrics()[1]
        segs = {dict(k[1])["segment"]: v for k, v in samples.items()
                if k[0] == "segment_total_capacity_bytes"}
        self.assertEqual(len(segs), 1, samples)
        self.assertEqual(list(segs.values())[0], 64 << 20)
        status, body = self.m.get("/get_all_segments")
        self.assertEqual(body.split(), list(segs))

    def test_non_ha_admin_routes(self):
        m = self.m
        self.assertEqual(m.get("/role"), (200, "leader"))
        self.assertEqual(m.get("/ha_status"), (200, "serving"))
        self.assertEqual(m.get("/leader"), (200, '{"present":false}'))
        import json
        status, body = m.get("/health")
        h = json.loads(body)
        self.assertEqual((status, h["status"], h["role"], h["ha_state"], h["service_ready"]),
                         (200, "ok", "leader", "serving", True))
        status, body = m.get("/metrics/summary")
        self.assertTrue(body.startswith("role=leader, state=serving, service_ready=true, master={"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
