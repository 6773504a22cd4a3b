"""test_store_kv_bench.py — mooncake-store/benchmarks/store_kv_bench.py against a fake store.

No cluster: the benchmark imports its store module by the name in MOONCAKE_STORE_MODULE, so the
tests register a fake module (an in-memory dict behind upstream's method names) under
FAKE_MODULE_NAME and run `store_kv_bench.main([...])` in this process. The fake's hooks
(`FAKE.fail`, `FAKE.swap`) inject errors, exceptions and key mix-ups. This file is itself a
usable fake store module too (it exports MooncakeDistributedStore, ReplicateConfig and
BufferPool), which the subprocess tests use to run the script as a program.

Covers upstream's test list (import without BufferPool, op percentages, lane model, journal round
trip, atomic JSON, latency sampling, metadata operations, a full metadata_smoke run, zero-copy
slots) plus: every scenario, exit codes, dying lanes, error-count serialisation, unique payloads,
replay, progress lines, phase gaps and --aggregate.

Runs under /usr/bin/python3 -m pytest and python3 -m unittest (standard library only).
"""
import collections
import contextlib
import ctypes
import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import types
import unittest
from unittest import mock

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH_PATH = os.path.join(REPO, "mooncake-store", "benchmarks", "store_kv_bench.py")
FAKE_MODULE_NAME = "kvbench_fake_store"
OBJECT_NOT_FOUND = -704
NO_AVAILABLE_HANDLE = -200
TRANSFER_FAIL = -800


def load_bench():
    spec = importlib.util.spec_from_file_location("store_kv_bench", BENCH_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = load_bench()


# ---- the fake store ---------------------------------------------------------------------------


class FakeState:
    """What every FakeStore of this process shares, like stores of one cluster share objects.

    fail(method, key) -> None (go on) | int (that method fails with this code) | raises.
    swap: key -> the key whose value reads of `key` return (a key mix-up in the store).
    """

    def __init__(self):
        self.data = {}
        self.lock = threading.Lock()
        self.calls = collections.Counter()
        self.log = []  # (method, key), in call order
        self.setup_args = None
        self.setup_rc = 0
        self.closed = 0
        self.fail = None
        self.swap = {}
        self.pools = []
        self.pool_fail = None  # exception acquire() raises


FAKE = FakeState()


def reset_fake():
    global FAKE
    FAKE = FakeState()
    return FAKE


def _hook(method, key):
    with FAKE.lock:
        FAKE.calls[method] += 1
        FAKE.log.append((method, key))
    return FAKE.fail(method, key) if FAKE.fail else None


class ReplicateConfig:
    def __init__(self):
        self.replica_num = 1
        self.nof_replica_num = 0


class MooncakeDistributedStore:
    """Upstream's method names over FAKE.data; put keeps an existing value, as upstream does."""

    def setup(self, *args):
        FAKE.setup_args = args
        return FAKE.setup_rc

    def close(self):
        FAKE.closed += 1
        return 0

    def put(self, key, value, config=None):
        rc = _hook("put", key)
        if rc is not None:
            return rc
        with FAKE.lock:
            FAKE.data.setdefault(key, bytes(value))
        return 0

    def put_batch(self, keys, values, config=None):
        FAKE.calls["put_batch"] += 1
        rcs = [self.put(k, v, config) for k, v in zip(keys, values)]
        return next((rc for rc in rcs if rc != 0), 0)

    def _value(self, key):
        return FAKE.data.get(FAKE.swap.get(key, key))

    def get(self, key):
        if _hook("get", key) is not None:
            return b""
        return self._value(key) or b""

    def get_batch(self, keys):
        FAKE.calls["get_batch"] += 1
        return [self.get(k) for k in keys]

    def put_from(self, key, ptr, size, config=None):
        FAKE.calls["put_from"] += 1
        return self.put(key, ctypes.string_at(ptr, size), config)

    def batch_put_from(self, keys, ptrs, sizes, config=None):
        FAKE.calls["batch_put_from"] += 1
        return [self.put_from(k, p, s, config) for k, p, s in zip(keys, ptrs, sizes)]

    def get_into(self, key, ptr, size):
        rc = _hook("get_into", key)
        if rc is not None:
            return rc
        value = self._value(key)
        if value is None:
            return OBJECT_NOT_FOUND
        if len(value) > size:
            return -10
        ctypes.memmove(ptr, value, len(value))
        return len(value)

    def batch_get_into(self, keys, ptrs, sizes):
        FAKE.calls["batch_get_into"] += 1
        return [self.get_into(k, p, s) for k, p, s in zip(keys, ptrs, sizes)]

    def batch_is_exist(self, keys):
        FAKE.calls["batch_is_exist"] += 1
        return [self.isExist(k) for k in keys]

    def isExist(self, key):  # noqa: N802 - upstream's name
        rc = _hook("isExist", key)
        if rc is not None:
            return rc
        return 1 if key in FAKE.data else 0

    def remove(self, key):
        rc = _hook("remove", key)
        if rc is not None:
            return rc
        with FAKE.lock:
            return 0 if FAKE.data.pop(key, None) is not None else OBJECT_NOT_FOUND


class FakeLease:
    def __init__(self, pool, size):
        self.pool = pool
        self.size = size
        self.memory = ctypes.create_string_buffer(size)
        self.ptr = ctypes.addressof(self.memory)
        self.releases = 0

    def release(self):
        self.releases += 1


class BufferPool:
    def __init__(self, store, **kwargs):
        self.store = store
        self.kwargs = kwargs
        self.acquire_args = []
        self.leases = []
        self.closes = 0
        FAKE.pools.append(self)

    def acquire(self, size, block=True):
        self.acquire_args.append((size, block))
        if FAKE.pool_fail is not None:
            raise FAKE.pool_fail
        lease = FakeLease(self, size)
        self.leases.append(lease)
        return lease

    def close(self):
        self.closes += 1


def fake_module(with_buffer_pool=True):
    module = types.ModuleType(FAKE_MODULE_NAME)
    module.MooncakeDistributedStore = MooncakeDistributedStore
    module.ReplicateConfig = ReplicateConfig
    if with_buffer_pool:
        module.BufferPool = BufferPool
    return module


# ---- helpers ----------------------------------------------------------------------------------


class BenchTestCase(unittest.TestCase):
    """Runs the benchmark in-process against a fresh fake store; keeps outputs in a temp dir."""

    with_buffer_pool = True

    def setUp(self):
        reset_fake()
        self.tmp = tempfile.TemporaryDirectory(prefix="kvbench_test_")
        self.addCleanup(self.tmp.cleanup)
        sys.modules[FAKE_MODULE_NAME] = fake_module(self.with_buffer_pool)
        self.addCleanup(sys.modules.pop, FAKE_MODULE_NAME, None)
        env = mock.patch.dict(os.environ, {"MOONCAKE_STORE_MODULE": FAKE_MODULE_NAME})
        env.start()
        self.addCleanup(env.stop)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def run_bench(self, *argv, summary="summary.json"):
        """(exit code, summary dict or None, console text)."""
        args = list(argv)
        if "--progress-interval" not in argv:
            args += ["--progress-interval", "0"]
        if "--summary-json" in argv:
            summary_path = argv[argv.index("--summary-json") + 1]
        elif "--output-dir" in argv:
            summary_path = os.path.join(argv[argv.index("--output-dir") + 1], "summary.json")
        else:
            summary_path = self.path(summary)
            args += ["--summary-json", summary_path]
        stream = io.StringIO()
        with contextlib.redirect_stderr(stream):
            code = bench.main(args)
        result = None
        if os.path.exists(summary_path):
            with open(summary_path, encoding="utf-8") as f:
                result = json.load(f)
        return code, result, stream.getvalue()

    def assert_ok_run(self, *argv):
        code, summary, text = self.run_bench(*argv)
        self.assertEqual(code, 0, text)
        self.assertTrue(summary["ok"], text)
        self.assertIsNone(summary["error"])
        self.assertEqual(summary["schema_version"], 1)
        return summary, text


SMALL = ("--nr-objects", "16", "--value-size", "1024", "--numjobs", "2", "--iodepth", "2")


def parse(*argv):
    return bench.build_parser().parse_args(list(argv))


# ---- upstream's unit tests (§6.6) -------------------------------------------------------------


class ImportTest(BenchTestCase):
    with_buffer_pool = False

    def test_plain_run_needs_no_buffer_pool(self):
        self.assert_ok_run("--scenario", "verify_write", *SMALL)

    def test_zcopy_without_buffer_pool_fails_naming_it(self):
        code, summary, text = self.run_bench("--scenario", "fill", "--io-api", "zcopy", *SMALL)
        self.assertEqual(code, 1)
        self.assertFalse(summary["ok"])
        self.assertIn("BufferPool", summary["error"])
        self.assertIn("BufferPool", text)

    def test_help_needs_no_store_module(self):
        env = dict(os.environ, MOONCAKE_STORE_MODULE="no_such_store_module", PYTHONPATH="")
        proc = subprocess.run([sys.executable, BENCH_PATH, "--help"], env=env,
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        for flag in ("--scenario", "--io-api", "--numjobs", "--iodepth", "--batch-size",
                     "--nr-objects", "--runtime", "--value-size", "--pattern", "--verify",
                     "--summary-json", "--payload-mode", "--aggregate", "mixed_metadata"):
            self.assertIn(flag, proc.stdout)

    def test_missing_store_module_is_exit_1_with_a_clear_error(self):
        with mock.patch.dict(os.environ, {"MOONCAKE_STORE_MODULE": "no_such_store_module"}):
            code, summary, text = self.run_bench("--scenario", "fill")
        self.assertEqual(code, 1)
        self.assertIn("no_such_store_module", summary["error"])
        self.assertIn("PYTHONPATH", text)


class OpPercentageTest(unittest.TestCase):
    def test_percentages_must_sum_to_100(self):
        bench.validate_op_percentages(40, 40, 10, 10)
        bench.validate_op_percentages(100, 0, 0, 0)
        for bad in ((40, 40, 10, 5), (50, 50, 10, -10), (101, 0, 0, -1), (40, 40, 10, 10.0)):
            with self.assertRaises(ValueError, msg=bad):
                bench.validate_op_percentages(*bad)

    def test_command_line_rejects_bad_percentages(self):
        with self.assertRaises(SystemExit) as cm, contextlib.redirect_stderr(io.StringIO()):
            bench.main(["--scenario", "mixed_metadata", "--put-pct", "50"])
        self.assertEqual(cm.exception.code, 2)

    def test_choice_is_deterministic_per_lane(self):
        pcts = (40, 40, 10, 10)
        a = bench.choose_metadata_operations(pcts, 7, 0, 200)
        self.assertEqual(a, bench.choose_metadata_operations(pcts, 7, 0, 200))
        self.assertNotEqual(a, bench.choose_metadata_operations(pcts, 7, 1, 200))
        self.assertEqual(bench.choose_metadata_operations(pcts, 7, 1, 200),
                         bench.choose_metadata_operations(pcts, 8, 0, 200))  # seed + lane
        self.assertEqual(set(a), {"put", "get", "exist", "remove"})

    def test_zero_percent_operations_never_drawn(self):
        ops = bench.choose_metadata_operations((0, 100, 0, 0), 1, 3, 50)
        self.assertEqual(ops, ["get"] * 50)
        ops = bench.choose_metadata_operations((50, 0, 0, 50), 1, 0, 500)
        self.assertEqual(set(ops), {"put", "remove"})


class MetadataLaneModelTest(unittest.TestCase):
    def test_transitions_only_on_success(self):
        model = bench.MetadataLaneModel()
        self.assertFalse(model.expected_present(3))
        model.apply("put", 3, ok=False)
        self.assertFalse(model.expected_present(3))
        model.apply("put", 3, ok=True)
        self.assertTrue(model.expected_present(3))
        model.apply("get", 3, ok=True)
        model.apply("exist", 3, ok=False)
        self.assertTrue(model.expected_present(3))
        model.apply("remove", 3, ok=False)
        self.assertTrue(model.expected_present(3))
        model.apply("remove", 3, ok=True)
        self.assertFalse(model.expected_present(3))
        with self.assertRaises(ValueError):
            model.apply("rename", 3, ok=True)


def journal_record(**overrides):
    rec = {"schema_version": 1, "op_id": 0, "lane": 0, "op": "put", "object_id": 5,
           "key": "kvbe0000000000000005", "invoke_ns": 10, "return_ns": 20, "result": 0,
           "ok": True, "expected_present": False, "actual_present": True}
    rec.update(overrides)
    return rec


class JournalFileTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="kvbench_journal_")
        self.addCleanup(self.tmp.cleanup)
        self.file = os.path.join(self.tmp.name, "journal.jsonl")

    def test_round_trip(self):
        records = [journal_record(op_id=i, op=op, result=r)
                   for i, (op, r) in enumerate([("put", 0), ("get", 4096), ("exist", 1),
                                                ("remove", -706)])]
        bench.write_jsonl(self.file, records)
        self.assertFalse(os.path.exists(self.file + ".tmp"))
        self.assertEqual(bench.read_replay(self.file), records)

    def test_blank_lines_skipped(self):
        with open(self.file, "w", encoding="utf-8") as f:
            f.write("\n" + json.dumps(journal_record()) + "\n   \n")
        self.assertEqual(len(bench.read_replay(self.file)), 1)

    def test_bad_records_name_their_line(self):
        cases = [
            (journal_record(schema_version=2), "schema_version"),
            (journal_record(op="rename"), "op"),
            ({k: v for k, v in journal_record().items() if k != "invoke_ns"}, "invoke_ns"),
            (journal_record(lane=-1), "lane"),
            ("not json", "not JSON"),
        ]
        for rec, word in cases:
            with open(self.file, "w", encoding="utf-8") as f:
                f.write(json.dumps(journal_record()) + "\n")
                f.write((rec if isinstance(rec, str) else json.dumps(rec)) + "\n")
            with self.assertRaises(ValueError) as cm:
                bench.read_replay(self.file)
            self.assertIn(":2:", str(cm.exception))
            self.assertIn(word, str(cm.exception))

    def test_write_json_atomic(self):
        path = os.path.join(self.tmp.name, "sub", "summary.json")
        bench.write_json_atomic(path, {"b": 1, "a": {"d": 2, "c": 3}})
        with open(path, encoding="utf-8") as f:
            text = f.read()
        self.assertTrue(text.endswith("}\n"))
        self.assertLess(text.index('"a"'), text.index('"b"'))
        self.assertEqual(json.loads(text), {"a": {"c": 3, "d": 2}, "b": 1})
        self.assertEqual(os.listdir(os.path.dirname(path)), ["summary.json"])


class StatisticsTest(unittest.TestCase):
    def test_latency_sampler_keeps_every_third(self):
        sampler = bench.LatencySampler(3)
        for i in range(10):
            sampler.add(float(i))
        self.assertEqual(sampler.samples, [0.0, 3.0, 6.0, 9.0])
        self.assertEqual(sampler.offered, 10)

    def test_percentile_interpolates(self):
        values = [1.0, 2.0, 3.0, 4.0]
        self.assertEqual(bench.percentile(values, 50), 2.5)
        self.assertEqual(bench.percentile(values, 0), 1.0)
        self.assertEqual(bench.percentile(values, 100), 4.0)
        self.assertAlmostEqual(bench.percentile(values, 95), 3.85)
        self.assertEqual(bench.percentile([], 99), 0.0)

    def test_union_length(self):
        self.assertEqual(bench.union_length([(0, 10), (5, 12)]), 12)
        self.assertEqual(bench.union_length([(0, 1), (2, 3)]), 2)
        self.assertEqual(bench.union_length([(0, 10), (2, 3), (20, 21)]), 11)
        self.assertEqual(bench.union_length([]), 0)

    def test_mixed_error_keys_serialise(self):
        counter = collections.Counter({OBJECT_NOT_FOUND: 2, "MISS": 3, TRANSFER_FAIL: 1})
        record = bench.summarize({"kvs": 6, "failed_kvs": 6}, [], 1.0, False, counter)
        text = json.dumps({"overall": record}, sort_keys=True)
        self.assertEqual(json.loads(text)["overall"]["error_counts"],
                         {"-704": 2, "-800": 1, "MISS": 3})

    def test_make_key(self):
        self.assertEqual(bench.make_key("verify", 20, 7), "veri0000000000000007")
        self.assertEqual(bench.make_key("ab", 20, 12), "ab__0000000000000012")
        self.assertEqual(bench.make_key("kvbench", 16, 3), "0000000000000003")
        self.assertEqual(len(bench.make_key("kvbench", 40, 5)), 40)

    def test_payloads(self):
        pat = bench.PayloadFactory("pattern", 5, "p", 20, b"\xa5\x01")
        self.assertEqual(pat.payload(1), b"\xa5\x01\xa5\x01\xa5")
        self.assertEqual(pat.payload(1), pat.payload(2))
        ids = bench.PayloadFactory("id_byte", 4, "p", 20)
        self.assertEqual(ids.payload(0x1ff), b"\xff" * 4)
        uni = bench.PayloadFactory("unique", 10000, "p", 20)
        self.assertEqual(len(uni.payload(1)), 10000)
        self.assertNotEqual(uni.payload(1), uni.payload(2))
        self.assertIsNone(uni.check(1, uni.payload(1)))
        self.assertEqual(uni.check(1, uni.payload(2)), "VERIFY_FAIL")
        self.assertEqual(uni.check(1, uni.payload(1)[:-1]), "VERIFY_SIZE_MISMATCH")
        self.assertEqual(bench.parse_pattern("0xA5"), b"\xa5")
        self.assertEqual(bench.parse_pattern("ab"), b"ab")
        for bad in ("0xA", "0xZZ", "0x"):
            with self.assertRaises(ValueError):
                bench.parse_pattern(bad)


class MetadataOperationTest(unittest.TestCase):
    def setUp(self):
        reset_fake()
        self.args = parse("--scenario", "mixed_metadata")
        self.session = bench.StoreSession(MooncakeDistributedStore(), self.args,
                                          fake_module(), 1)
        self.model = bench.MetadataLaneModel()

    def op(self, op, object_id=1):
        return self.session.metadata_operation(0, op, object_id, self.model, op_id=9)

    def test_put_get_exist_remove_cycle(self):
        rec = self.op("put")
        self.assertTrue(rec["ok"])
        self.assertEqual((rec["expected_present"], rec["actual_present"]), (False, True))
        self.assertEqual(rec["key"], bench.make_key("kvbench", 23, 1))
        self.assertEqual(FAKE.data[rec["key"]], b"\x01" * 4096)
        self.assertTrue(self.op("get")["ok"])
        self.assertEqual(self.op("exist")["result"], 1)
        rec = self.op("remove")
        self.assertTrue(rec["ok"])
        self.assertEqual(rec["actual_present"], False)
        self.assertTrue(self.op("get")["ok"])  # expected absent, and absent
        self.assertTrue(self.op("remove")["ok"])  # removing an absent object is fine
        for field in bench.REPLAY_REQUIRED_FIELDS:
            self.assertIn(field, rec)
        self.assertEqual(rec["op_id"], 9)
        self.assertLessEqual(rec["invoke_ns"], rec["return_ns"])
        self.assertEqual([m for m, _ in FAKE.log],
                         ["put", "get", "isExist", "remove", "isExist", "get", "remove",
                          "isExist"])

    def test_presence_mismatch(self):
        FAKE.data[bench.make_key("kvbench", 23, 1)] = b"\x01" * 4096  # unknown to the model
        rec = self.op("exist")
        self.assertFalse(rec["ok"])
        self.assertEqual(rec["error"], "PRESENCE_MISMATCH")
        self.assertFalse(self.op("get")["ok"])

    def test_failed_put_leaves_model_unchanged(self):
        FAKE.fail = lambda method, key: NO_AVAILABLE_HANDLE if method == "put" else None
        rec = self.op("put")
        self.assertFalse(rec["ok"])
        self.assertEqual(rec["result"], NO_AVAILABLE_HANDLE)
        self.assertEqual(rec["error"], str(NO_AVAILABLE_HANDLE))
        self.assertFalse(self.model.expected_present(1))

    def test_get_verifies_bytes(self):
        self.op("put")
        FAKE.data[bench.make_key("kvbench", 23, 1)] = b"\x02" * 4096
        rec = self.op("get")
        self.assertFalse(rec["ok"])
        self.assertEqual(rec["error"], "VERIFY_FAIL")

    def test_remove_refused_by_lease(self):
        self.op("put")
        FAKE.fail = lambda method, key: -706 if method == "remove" else None
        rec = self.op("remove")
        self.assertFalse(rec["ok"])
        self.assertEqual(rec["error"], "-706")
        self.assertTrue(self.model.expected_present(1))


class MetadataSmokeTest(BenchTestCase):
    def test_full_run(self):
        out = self.path("out")
        code, summary, _ = self.run_bench("--scenario", "metadata_smoke", "--nr-objects", "1",
                                          "--journal", "all", "--output-dir", out)
        self.assertEqual(code, 0)
        self.assertTrue(summary["ok"])
        phase = summary["phases"]["metadata_smoke"]
        self.assertEqual((phase["requests"], phase["failed_requests"]), (5, 0))
        self.assertEqual(summary["journal_records"], 5)
        records = bench.read_replay(os.path.join(out, "journal.jsonl"))
        self.assertEqual([r["op"] for r in records], ["put", "exist", "get", "remove", "exist"])
        self.assertTrue(all(r["ok"] for r in records))

    def test_one_object_per_lane(self):
        summary, _ = self.assert_ok_run("--scenario", "metadata_smoke", "--numjobs", "3",
                                        "--iodepth", "2", "--nr-objects", "4")
        self.assertEqual(summary["phases"]["metadata_smoke"]["requests"], 4 * 5)

    def test_failure_is_exit_1_and_journaled(self):
        FAKE.fail = lambda method, key: -706 if method == "remove" else None
        out = self.path("out")
        code, summary, text = self.run_bench("--scenario", "metadata_smoke", "--nr-objects",
                                             "1", "--output-dir", out)
        self.assertEqual(code, 1)
        self.assertFalse(summary["ok"])
        self.assertIn("metadata_smoke", summary["error"])
        self.assertIn("--default_kv_lease_ttl=0", text)
        records = bench.read_replay(os.path.join(out, "journal.jsonl"))  # failures only
        # the refused remove fails; the exist after it agrees with the unchanged model
        self.assertEqual([r["op"] for r in records], ["remove"])
        self.assertEqual(summary["journal_records"], 1)


class ZcopyBufferPoolTest(unittest.TestCase):
    def setUp(self):
        reset_fake()
        self.module = fake_module()
        self.store = MooncakeDistributedStore()

    def test_one_lease_sliced_into_lane_slots(self):
        z = bench.ZcopyBufferPool(self.module, self.store, 8, 2, 2, 64)
        pool = FAKE.pools[0]
        self.assertEqual(pool.kwargs, {"max_bytes": 64, "max_regions": 1})
        self.assertIs(pool.store, self.store)
        self.assertEqual(pool.acquire_args, [(32, False)])
        base = pool.leases[0].ptr
        self.assertEqual(z.slot_ptr(0, 0), base)
        self.assertEqual(z.slot_ptr(0, 1), base + 8)
        self.assertEqual(z.slot_ptr(1, 0), base + 16)
        self.assertEqual(z.slot_ptr(1, 1), base + 24)
        with self.assertRaises(IndexError):
            z.slot_ptr(2, 0)
        z.close()
        z.close()
        self.assertEqual((pool.leases[0].releases, pool.closes), (1, 1))

    def test_size_limit(self):
        with self.assertRaises(ValueError) as cm:
            bench.ZcopyBufferPool(self.module, self.store, 8, 2, 2, 31)
        self.assertIn("increase --local-buffer-size", str(cm.exception))
        self.assertEqual(FAKE.pools, [])

    def test_pool_closed_when_acquire_fails(self):
        FAKE.pool_fail = RuntimeError("exhausted")
        with self.assertRaises(RuntimeError):
            bench.ZcopyBufferPool(self.module, self.store, 8, 2, 2, 64)
        self.assertEqual(FAKE.pools[0].closes, 1)


# ---- every scenario ---------------------------------------------------------------------------


class ScenarioTest(BenchTestCase):
    def test_verify_write(self):
        for api in ("plain", "zcopy"):
            for batch in ("1", "4"):
                with self.subTest(api=api, batch=batch):
                    reset_fake()
                    summary, _ = self.assert_ok_run(
                        "--scenario", "verify_write", "--io-api", api, "--batch-size", batch,
                        "--pattern", "0xA5", "--verify", "--local-buffer-size", "1MiB",
                        "--keep-objects", *SMALL)
                    self.assertEqual(summary["phase_order"], ["write_verify", "verify_read"])
                    for phase in summary["phases"].values():
                        self.assertEqual(phase["successful_kvs"], 16)
                        self.assertEqual(phase["bytes"], 16 * 1024)
                    self.assertEqual(summary["overall"]["kvs"], 32)
                    self.assertEqual(len(FAKE.data), 16)
                    self.assertTrue(all(v == b"\xa5" * 1024 for v in FAKE.data.values()))
                    calls = {("plain", "1"): ("put", "get"),
                             ("plain", "4"): ("put_batch", "get_batch"),
                             ("zcopy", "1"): ("put_from", "get_into"),
                             ("zcopy", "4"): ("batch_put_from", "batch_get_into")}[api, batch]
                    for method in calls:
                        self.assertGreater(FAKE.calls[method], 0, method)
                    if batch == "4":
                        self.assertEqual(FAKE.calls[calls[0]], 4)  # 16 ids in batches of 4

    def test_verify_write_without_pattern_uses_id_bytes(self):
        self.assert_ok_run("--scenario", "verify_write", "--keep-objects", *SMALL)
        self.assertEqual(FAKE.data[bench.make_key("kvbench", 23, 3)], b"\x03" * 1024)

    def test_fill(self):
        summary, _ = self.assert_ok_run("--scenario", "fill", "--write-objects", "10", *SMALL)
        self.assertEqual(summary["phases"]["fill_write"]["successful_kvs"], 10)
        self.assertFalse(summary["phases"]["fill_write"]["dataset_exhausted"])

    def test_fill_short_is_dataset_exhausted(self):
        FAKE.fail = lambda m, k: NO_AVAILABLE_HANDLE if m == "put" and k.endswith("9") else None
        code, summary, _ = self.run_bench("--scenario", "fill", *SMALL)
        self.assertEqual(code, 0)  # fill is not strict
        phase = summary["phases"]["fill_write"]
        self.assertTrue(phase["dataset_exhausted"])
        self.assertEqual(phase["error_counts"], {"-200": 1})
        self.assertFalse(summary["ok"])

    def test_write_perf_count_and_time_based(self):
        summary, _ = self.assert_ok_run("--scenario", "write_perf", "--batch-size", "4", *SMALL)
        self.assertEqual(summary["phases"]["write_perf"]["requests"], 4)
        summary, _ = self.assert_ok_run("--scenario", "write_perf", "--runtime", "0.3",
                                        "--nr-objects", "1000000", "--io-api", "zcopy",
                                        "--key-prefix", "timed")
        phase = summary["phases"]["write_perf"]
        self.assertGreater(phase["kvs"], 0)
        self.assertFalse(phase["dataset_exhausted"])
        self.assertGreaterEqual(phase["duration_sec"], 0.25)

    def test_write_perf_time_based_budget_exhausted(self):
        summary, _ = self.assert_ok_run("--scenario", "write_perf", "--runtime", "5",
                                        "--nr-objects", "8")
        phase = summary["phases"]["write_perf"]
        self.assertEqual(phase["kvs"], 8)
        self.assertTrue(phase["dataset_exhausted"])
        self.assertLess(phase["duration_sec"], 4)

    def test_read_perf(self):
        for api in ("plain", "zcopy"):
            with self.subTest(api=api):
                reset_fake()
                summary, _ = self.assert_ok_run("--scenario", "read_perf", "--io-api", api,
                                                "--batch-size", "3", "--pattern", "xyz",
                                                "--verify", *SMALL)
                self.assertEqual(summary["phase_order"], ["prepare_write", "read_perf"])
                self.assertEqual(summary["phases"]["read_perf"]["successful_kvs"], 16)

    def test_read_perf_time_based_wraps(self):
        summary, _ = self.assert_ok_run("--scenario", "read_perf", "--runtime", "0.3", *SMALL)
        self.assertGreater(summary["phases"]["read_perf"]["kvs"], 16)

    def test_read_perf_prepare_none_reads_an_earlier_dataset(self):
        self.assert_ok_run("--scenario", "fill", *SMALL)
        summary, _ = self.assert_ok_run("--scenario", "read_perf", "--prepare-mode", "none",
                                        *SMALL)
        self.assertEqual(summary["phase_order"], ["read_perf"])
        self.assertEqual(summary["phases"]["read_perf"]["successful_kvs"], 16)

    def test_read_perf_value_size_need_not_be_512_aligned(self):
        FAKE.data.update({bench.make_key("kvbench", 23, i): bytes([i]) * 100 for i in range(4)})
        self.assert_ok_run("--scenario", "read_perf", "--prepare-mode", "none",
                           "--nr-objects", "4", "--value-size", "100")

    def test_mixed_rw(self):
        summary, _ = self.assert_ok_run("--scenario", "mixed_rw", "--runtime", "0.3",
                                        "--rwmixread", "70", "--prepare-objects", "8",
                                        "--write-objects", "100000", "--pattern", "0xA5",
                                        "--verify", "--batch-size", "2", *SMALL)
        phase = summary["phases"]["mixed_rw"]
        self.assertGreater(phase["kvs"], 0)
        reads = FAKE.calls["get"]
        writes = FAKE.calls["put"] - 8
        self.assertGreater(reads, writes)  # 70 % reads
        self.assertGreater(writes, 0)
        # writes use fresh ids after the prepared ones: reads only see prepared objects
        read_keys = {k for m, k in FAKE.log if m == "get"}
        self.assertTrue(read_keys <= {bench.make_key("kvbench", 23, i) for i in range(8)})

    def test_mixed_rw_stops_when_write_budget_spent(self):
        summary, _ = self.assert_ok_run("--scenario", "mixed_rw", "--runtime", "10",
                                        "--rwmixread", "0", "--nr-objects", "4",
                                        "--write-objects", "6")
        phase = summary["phases"]["mixed_rw"]
        self.assertEqual(phase["kvs"], 6)
        self.assertTrue(phase["dataset_exhausted"])
        self.assertLess(phase["duration_sec"], 5)

    def test_mixed_metadata(self):
        summary, _ = self.assert_ok_run("--scenario", "mixed_metadata", "--nr-objects", "40",
                                        "--numjobs", "3")
        phase = summary["phases"]["mixed_metadata"]
        self.assertEqual(phase["requests"], 40)  # one operation per object

    def test_remove_perf(self):
        summary, _ = self.assert_ok_run("--scenario", "remove_perf", *SMALL)
        self.assertEqual(summary["phases"]["remove_perf"]["successful_kvs"], 16)
        self.assertEqual(FAKE.data, {})

    def test_replay_round_trip(self):
        out = self.path("first")
        summary, _ = self.assert_ok_run("--scenario", "mixed_metadata", "--nr-objects", "30",
                                        "--numjobs", "2", "--journal", "all", "--output-dir",
                                        out)
        self.assertEqual(summary["journal_records"], 30)
        first = [(m, k) for m, k in FAKE.log]
        reset_fake()
        second_out = self.path("second")
        summary, _ = self.assert_ok_run("--scenario", "replay", "--replay-file",
                                        os.path.join(out, "journal.jsonl"), "--numjobs", "2",
                                        "--journal", "all", "--output-dir", second_out)
        self.assertEqual(summary["phases"]["replay"]["requests"], 30)
        self.assertEqual(sorted(first), sorted(FAKE.log))
        replayed = bench.read_replay(os.path.join(second_out, "journal.jsonl"))
        original = bench.read_replay(os.path.join(out, "journal.jsonl"))
        key = lambda r: (r["lane"], r["op_id"])  # noqa: E731
        self.assertEqual([(r["op"], r["object_id"], r["ok"]) for r in sorted(replayed, key=key)],
                         [(r["op"], r["object_id"], r["ok"]) for r in sorted(original, key=key)])

    def test_replay_ignores_lanes_beyond_lane_count(self):
        path = self.path("j.jsonl")
        bench.write_jsonl(path, [journal_record(lane=0, op="put", object_id=1),
                                 journal_record(lane=5, op="put", object_id=2)])
        summary, _ = self.assert_ok_run("--scenario", "replay", "--replay-file", path)
        self.assertEqual(summary["phases"]["replay"]["requests"], 1)

    def test_replay_bad_file_is_exit_1(self):
        path = self.path("bad.jsonl")
        with open(path, "w", encoding="utf-8") as f:
            f.write('{"schema_version": 1}\n')
        code, summary, _ = self.run_bench("--scenario", "replay", "--replay-file", path)
        self.assertEqual(code, 1)
        self.assertIn(":1:", summary["error"])

    def test_setup_arguments_and_replica_config(self):
        self.assert_ok_run("--scenario", "fill", "--local-hostname", "h:1",
                           "--metadata-server", "P2PHANDSHAKE", "--master-server", "m:2",
                           "--protocol", "tcp", "--device-name", "d0",
                           "--global-segment-size", "1GiB", "--local-buffer-size", "2048",
                           "--memory-replica-num", "2", "--nof-replica-num", "1")
        self.assertEqual(FAKE.setup_args, ("h:1", "P2PHANDSHAKE", 1 << 30, 2048, "tcp", "d0",
                                           "m:2"))
        self.assertEqual(FAKE.closed, 1)


class ConsoleAndSummaryTest(BenchTestCase):
    def test_console_lines(self):
        _, text = self.assert_ok_run("--scenario", "verify_write", "--pattern", "0xA5",
                                     "--verify", *SMALL)
        self.assertRegex(text, r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d INFO store_kv_bench scenario="
                               r"verify_write io_api=plain numjobs=2 iodepth=2 lanes=4 "
                               r"batch_size=1 value_size=1024 nr_objects=16 prepare_objects=16 "
                               r"write_objects=16 memory_replica_num=1 nof_replica_num=0 "
                               r"verify=True")
        for phase in ("=== phase write_verify ===", "=== phase verify_read ===",
                      "=== overall summary ==="):
            self.assertIn(phase, text)
        self.assertRegex(text, r"requests=16 successful_requests=16 failed_requests=0 kvs=16 "
                               r"successful_kvs=16 failed_kvs=0")
        self.assertRegex(text, r"misses=0 verify_failures=0 bytes=16384 duration=\d+\.\d{3}s "
                               r"req/s=\d+\.\d\d kv/s=\d+\.\d\d MiB/s=\d+\.\d\d")
        self.assertRegex(text, r"lat_mean=\d+\.\d{3}ms lat_p50=\d+\.\d{3}ms lat_p95=\d+\.\d{3}ms "
                               r"lat_p99=\d+\.\d{3}ms dataset_exhausted=False")

    def test_summary_schema(self):
        summary, _ = self.assert_ok_run("--scenario", "read_perf", *SMALL)
        for key in ("schema_version", "scenario", "ok", "phases", "overall", "journal_records"):
            self.assertIn(key, summary)
        fields = {"requests", "successful_requests", "failed_requests", "kvs", "successful_kvs",
                  "failed_kvs", "misses", "verify_failures", "bytes", "duration_sec",
                  "req_per_sec", "kv_per_sec", "MiB_per_sec", "lat_mean_ms", "lat_p50_ms",
                  "lat_p95_ms", "lat_p99_ms", "latency_samples", "dataset_exhausted",
                  "error_counts", "start_time", "end_time", "lane_errors"}
        for record in list(summary["phases"].values()) + [summary["overall"]]:
            self.assertTrue(fields <= set(record), fields - set(record))
        read = summary["phases"]["read_perf"]
        self.assertEqual(read["latency_samples"], 16)  # count based: every request
        self.assertLessEqual(read["start_time"], read["end_time"])
        self.assertNotIn("latency_samples_ms", read)
        self.assertEqual(summary["scenario"], "read_perf")
        self.assertEqual(summary["config"]["numjobs"], 2)

    def test_output_dir_summary(self):
        out = self.path("o")
        code, summary, _ = self.run_bench("--scenario", "fill", "--output-dir", out)
        self.assertEqual(code, 0)
        self.assertTrue(summary["ok"])
        self.assertFalse(os.path.exists(os.path.join(out, "journal.jsonl")))  # data scenario

    def test_mixed_error_keys_serialise_in_a_run(self):
        # objects 0..7 exist; 3 fails with a transfer error; 8..15 are missing (MISS)
        for i in range(8):
            FAKE.data[bench.make_key("kvbench", 23, i)] = bytes([i]) * 1024
        bad = bench.make_key("kvbench", 23, 3)
        FAKE.fail = lambda m, k: TRANSFER_FAIL if m == "get_into" and k == bad else None
        code, summary, text = self.run_bench("--scenario", "read_perf", "--prepare-mode", "none",
                                             "--io-api", "zcopy", *SMALL)
        self.assertEqual(code, bench.EXIT_FAILED_KVS)  # upstream exits 0; a failed KV is failure
        phase = summary["phases"]["read_perf"]
        self.assertEqual(phase["error_counts"], {"-800": 1, "MISS": 8})
        self.assertEqual(phase["misses"], 8)
        self.assertEqual(summary["overall"]["error_counts"], {"-800": 1, "MISS": 8})
        self.assertFalse(summary["ok"])
        self.assertIn('errors={"-800": 1, "MISS": 8}', text)

    def test_progress_lines(self):
        FAKE.fail = lambda m, k: time.sleep(0.002) if m == "put" else None
        # 2 s of 0.2 s intervals: two lines at least even when a loaded host (ASan, ctest -j2)
        # starves the progress thread for a second (0.7 s once gave a single line).
        code, _, text = self.run_bench("--scenario", "write_perf", "--runtime", "2.0",
                                       "--nr-objects", "100000", "--progress-interval", "0.2")
        self.assertEqual(code, 0)
        self.assertGreaterEqual(text.count("progress phase=write_perf elapsed="), 2, text)

    def test_save_latency_samples(self):
        summary, _ = self.assert_ok_run("--scenario", "fill", "--save-latency-samples", *SMALL)
        phase = summary["phases"]["fill_write"]
        self.assertEqual(len(phase["latency_samples_ms"]), 16)
        self.assertTrue(all(x >= 0 for x in phase["latency_samples_ms"]))
        self.assertNotIn("latency_samples_ms", summary["overall"])


class PlotWithoutMatplotlibTest(BenchTestCase):
    def test_missing_matplotlib_is_refused_before_the_run(self):
        with mock.patch.dict(sys.modules, {"matplotlib": None}):
            stream = io.StringIO()
            with contextlib.redirect_stderr(stream), self.assertRaises(SystemExit) as cm:
                bench.main(["--scenario", "fill", "--plot", self.path("p.png"), *SMALL])
        self.assertEqual(cm.exception.code, 2)
        self.assertIn("--plot needs matplotlib", stream.getvalue())
        self.assertIsNone(FAKE.setup_args)  # the store was never set up
        self.assertFalse(os.path.exists(self.path("p.png")))

    def test_a_plot_path_that_cannot_be_written_is_refused_before_the_run(self):
        for bad, why in ((self.path(""), "is a directory"),
                         (self.path("missing/p.png"), "does not exist")):
            with self.subTest(path=bad):
                stream = io.StringIO()
                with contextlib.redirect_stderr(stream), self.assertRaises(SystemExit) as cm:
                    bench.main(["--scenario", "fill", "--plot", bad, *SMALL])
                self.assertEqual(cm.exception.code, 2)
                self.assertIn(why, stream.getvalue())
                self.assertIsNone(FAKE.setup_args)  # the store was never set up


class ExitCodeTest(BenchTestCase):
    def test_verify_failure_is_20(self):
        FAKE.fail = lambda m, k: None
        self.assert_ok_run("--scenario", "fill", "--pattern", "0xA5", *SMALL)
        FAKE.data[bench.make_key("kvbench", 23, 2)] = b"\x00" * 1024
        code, summary, _ = self.run_bench("--scenario", "read_perf", "--prepare-mode", "none",
                                          "--pattern", "0xA5", "--verify", *SMALL)
        self.assertEqual(code, 20)
        self.assertEqual(summary["overall"]["verify_failures"], 1)
        self.assertEqual(summary["exit_code"], 20)
        self.assertFalse(summary["ok"])

    def test_verify_and_read_misses_is_21(self):
        code, summary, _ = self.run_bench("--scenario", "read_perf", "--prepare-mode", "none",
                                          "--pattern", "0xA5", "--verify", *SMALL)
        self.assertEqual(code, 21)
        self.assertEqual(summary["phases"]["read_perf"]["misses"], 16)

    def test_misses_without_verify_are_24_and_not_ok(self):
        # upstream exits 0 here; --help promises "ok" true exactly when the exit code is 0
        code, summary, _ = self.run_bench("--scenario", "read_perf", "--prepare-mode", "none",
                                          *SMALL)
        self.assertEqual(code, bench.EXIT_FAILED_KVS)
        self.assertFalse(summary["ok"])
        self.assertEqual(summary["exit_code"], bench.EXIT_FAILED_KVS)

    def test_metadata_failures_are_22(self):
        cases = (("mixed_metadata", "put", NO_AVAILABLE_HANDLE), ("remove_perf", "remove", -706))
        for scenario, method, rc in cases:
            with self.subTest(scenario=scenario):
                reset_fake()
                FAKE.fail = lambda m, k, method=method, rc=rc: rc if m == method else None
                code, summary, _ = self.run_bench("--scenario", scenario, *SMALL)
                self.assertEqual(code, 22)
                self.assertFalse(summary["ok"])
                self.assertIn(str(rc), summary["overall"]["error_counts"])

    def test_strict_write_failure_is_1(self):
        FAKE.fail = lambda m, k: NO_AVAILABLE_HANDLE if m == "put" and k.endswith("5") else None
        code, summary, _ = self.run_bench("--scenario", "verify_write", *SMALL)
        self.assertEqual(code, 1)
        self.assertIn("write_verify", summary["error"])
        self.assertEqual(summary["phase_order"], ["write_verify"])  # recorded, then stopped

    def test_setup_failure_is_1(self):
        FAKE.setup_rc = -900
        code, summary, _ = self.run_bench("--scenario", "fill")
        self.assertEqual(code, 1)
        self.assertIn("-900", summary["error"])
        self.assertEqual(summary["phases"], {})

    def test_interrupt_is_130(self):
        FAKE.fail = None
        with mock.patch.object(MooncakeDistributedStore, "setup",
                               side_effect=KeyboardInterrupt):
            code, summary, _ = self.run_bench("--scenario", "fill")
        self.assertEqual(code, 130)
        self.assertFalse(summary["ok"])

    def test_close_failure_is_1(self):
        with mock.patch.object(MooncakeDistributedStore, "close",
                               side_effect=RuntimeError("close broke")):
            code, summary, _ = self.run_bench("--scenario", "fill", "--io-api", "zcopy")
        self.assertEqual(code, 1)
        self.assertIn("store close failed: RuntimeError: close broke", summary["error"])
        self.assertEqual(FAKE.pools[0].closes, 1)  # the buffer was still released first

    def test_zcopy_buffer_too_small_is_1(self):
        code, summary, _ = self.run_bench("--scenario", "fill", "--io-api", "zcopy",
                                          "--value-size", "1MiB", "--batch-size", "8",
                                          "--numjobs", "8", "--local-buffer-size", "32MiB")
        self.assertEqual(code, 1)
        self.assertIn("increase --local-buffer-size", summary["error"])

    def test_bad_command_lines_are_2(self):
        bad = [
            [],  # no scenario
            ["--scenario", "fill", "--numjobs", "0"],
            ["--scenario", "fill", "--iodepth", "0"],
            ["--scenario", "fill", "--batch-size", "0"],
            ["--scenario", "fill", "--nr-objects", "0"],
            ["--scenario", "fill", "--key-size", "15"],
            ["--scenario", "fill", "--value-size", "1000"],
            ["--scenario", "fill", "--verify"],
            ["--scenario", "fill", "--memory-replica-num", "0"],
            ["--scenario", "fill", "--phase-gap-mode", "sleep"],
            ["--scenario", "fill", "--phase-gap-mode", "file"],
            ["--scenario", "mixed_rw"],
            ["--scenario", "replay"],
            ["--scenario", "fill", "--tenant-id", "other"],
            ["--scenario", "fill", "--pattern", "0xA"],
            ["--scenario", "fill", "--rwmixread", "101"],
            ["--scenario", "nope"],
            ["--scenario", "fill", "--value-size", "12XB"],
        ]
        for argv in bad:
            with self.subTest(argv=argv), self.assertRaises(SystemExit) as cm, \
                    contextlib.redirect_stderr(io.StringIO()):
                bench.main(argv)
            self.assertEqual(cm.exception.code, 2)

    def test_accepted_command_lines(self):
        for argv in (["--scenario", "read_perf", "--value-size", "1000"],
                     ["--scenario", "fill", "--verify", "--payload-mode", "unique"],
                     ["--scenario", "fill", "--memory-replica-num", "0",
                      "--nof-replica-num", "1"]):
            args = parse(*argv)
            bench.validate_args(args)


class DyingLaneTest(BenchTestCase):
    def test_dying_lane_fails_the_run(self):
        target = bench.make_key("kvbench", 23, 5)

        def fail(method, key):
            if method == "put" and key == target:
                raise RuntimeError("binding exploded")
            return None
        FAKE.fail = fail
        code, summary, text = self.run_bench("--scenario", "fill", *SMALL)
        self.assertEqual(code, 1)
        self.assertFalse(summary["ok"])
        self.assertIn("binding exploded", summary["error"])
        self.assertIn("lane", summary["error"])
        phase = summary["phases"]["fill_write"]
        self.assertEqual(len(phase["lane_errors"]), 1)
        self.assertEqual(phase["lane_errors"][0]["error"], "RuntimeError: binding exploded")
        self.assertGreater(phase["requests"], 0)  # the phase's stats are kept
        self.assertEqual(summary["overall"]["lane_errors"][0]["phase"], "fill_write")
        self.assertIn("binding exploded", text)
        self.assertIn("lane_errors=", text)

    def test_dying_lane_in_time_based_phase_stops_the_phase(self):
        calls = [0]

        def fail(method, key):
            calls[0] += 1
            if calls[0] == 20:
                raise ValueError("boom")
            return None
        FAKE.fail = fail
        t0 = time.monotonic()
        code, summary, _ = self.run_bench("--scenario", "write_perf", "--runtime", "30",
                                          "--nr-objects", "100000000", "--numjobs", "2")
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(code, 1)
        self.assertIn("ValueError: boom", summary["error"])

    def test_dying_lane_in_read_phase_after_good_prepare(self):
        def fail(method, key):
            if method == "get":
                raise MemoryError("no memory")
            return None
        FAKE.fail = fail
        code, summary, _ = self.run_bench("--scenario", "read_perf", *SMALL)
        self.assertEqual(code, 1)
        self.assertEqual(summary["phase_order"], ["prepare_write", "read_perf"])
        errors = summary["phases"]["read_perf"]["lane_errors"]
        self.assertGreaterEqual(len(errors), 1)  # the first death stops the other lanes
        self.assertEqual(errors[0]["error"], "MemoryError: no memory")

    def test_binding_returning_wrong_result_count_kills_the_lane(self):
        with mock.patch.object(MooncakeDistributedStore, "batch_put_from",
                               lambda self, keys, ptrs, sizes, cfg=None: [0]):
            code, summary, _ = self.run_bench("--scenario", "fill", "--io-api", "zcopy",
                                              "--batch-size", "4", *SMALL)
        self.assertEqual(code, 1)
        self.assertIn("batch_put_from returned 1 results for 4 keys", summary["error"])


class UniquePayloadTest(BenchTestCase):
    def swap_two_keys(self):
        a, b = bench.make_key("kvbench", 23, 1), bench.make_key("kvbench", 23, 2)
        FAKE.swap = {a: b, b: a}

    def test_pattern_cannot_see_a_key_mix_up(self):
        self.swap_two_keys()
        self.assert_ok_run("--scenario", "verify_write", "--pattern", "0xA5", "--verify", *SMALL)

    def test_unique_payload_catches_a_key_mix_up(self):
        for api in ("plain", "zcopy"):
            with self.subTest(api=api):
                reset_fake()
                self.swap_two_keys()
                code, summary, _ = self.run_bench("--scenario", "verify_write", "--payload-mode",
                                                  "unique", "--verify", "--io-api", api, *SMALL)
                self.assertEqual(code, 20)
                self.assertEqual(summary["phases"]["verify_read"]["verify_failures"], 2)
                self.assertEqual(summary["phases"]["verify_read"]["error_counts"],
                                 {"VERIFY_FAIL": 2})

    def test_unique_payload_bytes_differ_per_object(self):
        self.assert_ok_run("--scenario", "fill", "--payload-mode", "unique", *SMALL)
        values = list(FAKE.data.values())
        self.assertEqual(len(set(values)), len(values))
        key = bench.make_key("kvbench", 23, 4)
        self.assertTrue(FAKE.data[key].startswith(key.encode()))


class PhaseGapTest(BenchTestCase):
    def test_sleep_gap(self):
        summary, text = self.assert_ok_run("--scenario", "verify_write", "--phase-gap-mode",
                                           "sleep", "--phase-gap-sec", "0.3", *SMALL)
        gap = summary["phases"]["verify_read"]["start_time"] - \
            summary["phases"]["write_verify"]["end_time"]
        self.assertGreaterEqual(gap, 0.25)
        self.assertIn("phase gap before verify_read", text)

    def test_file_gap(self):
        flag = self.path("go")
        timer = threading.Timer(0.3, lambda: open(flag, "w").close())
        timer.start()
        self.addCleanup(timer.cancel)
        summary, text = self.assert_ok_run("--scenario", "read_perf", "--phase-gap-mode", "file",
                                           "--phase-gap-file", flag, *SMALL)
        self.assertIn("phase gap before main_run", text)

    def test_manual_gap_reads_a_line(self):
        with mock.patch("sys.stdin", io.StringIO("\n")):
            _, text = self.assert_ok_run("--scenario", "verify_write", "--phase-gap-mode",
                                         "manual", *SMALL)
        self.assertIn("press Enter", text)
        self.assertNotIn("stdin is closed", text)

    def test_manual_gap_with_closed_stdin_continues(self):
        with mock.patch("sys.stdin", io.StringIO("")):
            _, text = self.assert_ok_run("--scenario", "verify_write", "--phase-gap-mode",
                                         "manual", *SMALL)
        self.assertIn("stdin is closed", text)

    def test_file_gap_timeout_is_1(self):
        code, summary, _ = self.run_bench("--scenario", "read_perf", "--phase-gap-mode", "file",
                                          "--phase-gap-file", self.path("never"),
                                          "--phase-gap-timeout-sec", "0.3", *SMALL)
        self.assertEqual(code, 1)
        self.assertIn("did not appear", summary["error"])


class AggregateTest(BenchTestCase):
    def test_aggregate_two_runs(self):
        a, b = self.path("a.json"), self.path("b.json")
        self.assert_ok_run("--scenario", "read_perf", "--save-latency-samples",
                           "--summary-json", a, *SMALL)
        self.assert_ok_run("--scenario", "read_perf", "--save-latency-samples",
                           "--object-id-start", "1000", "--summary-json", b, *SMALL)
        out = self.path("all.json")
        stream = io.StringIO()
        with contextlib.redirect_stderr(stream):
            code = bench.main(["--aggregate", a, b, "--summary-json", out])
        self.assertEqual(code, 0, stream.getvalue())
        with open(out, encoding="utf-8") as f:
            agg = json.load(f)
        runs = []
        for p in (a, b):
            with open(p, encoding="utf-8") as f:
                runs.append(json.load(f))
        self.assertTrue(agg["ok"])
        self.assertEqual(agg["phase_order"], ["prepare_write", "read_perf"])
        read = agg["phases"]["read_perf"]
        self.assertEqual(read["kvs"], 32)
        self.assertEqual(read["bytes"], 32 * 1024)
        self.assertEqual(read["latency_source"], "samples")
        self.assertEqual(read["latency_samples"], 32)
        merged = sorted(x for r in runs for x in r["phases"]["read_perf"]["latency_samples_ms"])
        self.assertAlmostEqual(read["lat_p99_ms"], bench.percentile(merged, 99), places=6)
        spans = [(r["phases"]["read_perf"]["start_time"], r["phases"]["read_perf"]["end_time"])
                 for r in runs]
        self.assertAlmostEqual(read["duration_sec"], bench.union_length(spans), places=6)
        self.assertEqual(agg["overall"]["kvs"], 64)
        text = stream.getvalue()
        self.assertIn("=== phase read_perf ===", text)
        self.assertIn("=== overall summary ===", text)
        self.assertIn("requests=32 successful_requests=32", text)

    def synthetic(self, start, end, kvs, samples=None, p99=1.0, ok=True, errors=None):
        phase = bench.summarize({"requests": kvs, "successful_requests": kvs, "kvs": kvs,
                                 "successful_kvs": kvs, "bytes": kvs * MiB_},
                                [], end - start, False, collections.Counter(errors or {}))
        phase.update(start_time=start, end_time=end, lat_p99_ms=p99, latency_samples=kvs,
                     lat_mean_ms=p99 / 2)
        if samples is not None:
            phase["latency_samples_ms"] = samples
        return {"schema_version": 1, "scenario": "write_perf", "ok": ok,
                "phases": {"write_perf": phase}, "overall": dict(phase), "journal_records": 0}

    def test_bandwidth_over_union_of_spans(self):
        agg = bench.aggregate_summaries([self.synthetic(100.0, 110.0, 100),
                                         self.synthetic(105.0, 120.0, 200)])
        phase = agg["phases"]["write_perf"]
        self.assertEqual(phase["duration_sec"], 20.0)
        self.assertEqual(phase["MiB_per_sec"], 300 / 20.0)
        self.assertEqual(phase["kvs"], 300)
        self.assertEqual(phase["latency_source"], "max_of_processes")
        self.assertEqual(phase["lat_p99_ms"], 1.0)
        self.assertEqual(agg["overall"]["duration_sec"], 20.0)

    def test_percentiles_from_merged_samples(self):
        agg = bench.aggregate_summaries([self.synthetic(0.0, 1.0, 2, samples=[1.0, 2.0]),
                                         self.synthetic(0.5, 2.0, 2, samples=[3.0, 4.0])])
        phase = agg["phases"]["write_perf"]
        self.assertEqual(phase["lat_p50_ms"], 2.5)
        self.assertEqual(phase["lat_mean_ms"], 2.5)
        self.assertEqual(phase["duration_sec"], 2.0)

    def test_error_counts_summed_and_not_ok_propagates(self):
        agg = bench.aggregate_summaries(
            [self.synthetic(0, 1, 1, errors={"-704": 2, "MISS": 1}),
             self.synthetic(0, 1, 1, ok=False, errors={"-704": 1})], ["p0.json", "p1.json"])
        self.assertEqual(agg["phases"]["write_perf"]["error_counts"], {"-704": 3, "MISS": 1})
        self.assertFalse(agg["ok"])
        self.assertIn("p1.json", agg["error"])

    def test_bad_input_is_exit_1(self):
        path = self.path("x.json")
        with open(path, "w", encoding="utf-8") as f:
            f.write('{"hello": 1}')
        with contextlib.redirect_stderr(io.StringIO()):
            self.assertEqual(bench.main(["--aggregate", path]), 1)
            self.assertEqual(bench.main(["--aggregate", self.path("missing.json")]), 1)


MiB_ = 1 << 20


class ProgramTest(unittest.TestCase):
    """The script as a program, with this file as its store module."""

    def run_program(self, *argv):
        here = os.path.dirname(os.path.abspath(__file__))
        env = dict(os.environ, MOONCAKE_STORE_MODULE="test_store_kv_bench",
                   PYTHONPATH=here + os.pathsep + os.environ.get("PYTHONPATH", ""))
        return subprocess.run([sys.executable, BENCH_PATH, *argv, "--progress-interval", "0"],
                              env=env, capture_output=True, text=True, timeout=120)

    def test_verify_write_program(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "s.json")
            proc = self.run_program("--scenario", "verify_write", "--pattern", "0xA5",
                                    "--verify", "--summary-json", path, *SMALL)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with open(path, encoding="utf-8") as f:
                self.assertTrue(json.load(f)["ok"])
        self.assertIn("=== overall summary ===", proc.stderr)

    def test_ctrl_c_is_130_and_keeps_the_phase(self):
        here = os.path.dirname(os.path.abspath(__file__))
        env = dict(os.environ, MOONCAKE_STORE_MODULE="test_store_kv_bench",
                   PYTHONPATH=here + os.pathsep + os.environ.get("PYTHONPATH", ""))
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "s.json")
            proc = subprocess.Popen(
                [sys.executable, BENCH_PATH, "--scenario", "write_perf", "--runtime", "60",
                 "--nr-objects", "100000000", "--numjobs", "2", "--summary-json", path,
                 "--progress-interval", "0.2"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
            for line in proc.stderr:  # until the phase runs (or the program ended)
                if "progress phase=write_perf" in line:
                    break
            proc.send_signal(signal.SIGINT)
            err = proc.communicate(timeout=60)[1]
            self.assertEqual(proc.returncode, 130, err)
            with open(path, encoding="utf-8") as f:
                summary = json.load(f)
        self.assertFalse(summary["ok"])
        self.assertIn("KeyboardInterrupt", summary["error"])
        self.assertGreater(summary["phases"]["write_perf"]["kvs"], 0)

    def test_metadata_failure_exit_code_program(self):
        proc = self.run_program("--scenario", "remove_perf", "--prepare-mode", "none", *SMALL)
        self.assertEqual(proc.returncode, 22, proc.stderr)


if __name__ == "__main__":
    unittest.main()
