#!/usr/bin/env python3
"""store_kv_bench.py — end-to-end KV benchmark and validator for the Mooncake Store Python API.

Drives one MooncakeDistributedStore (from the module named by $MOONCAKE_STORE_MODULE, default
`mooncake.store`) from `numjobs x iodepth` Python threads ("lanes") through one scenario, prints
per-phase results and writes a summary JSON. Flags, keys, payloads, phases, console lines, the
summary schema, the journal/replay format and the exit codes follow upstream Mooncake's script of
the same name, so the MASS guide's "Storage KV" section documents it. Beyond upstream:

  * error counts always serialise: summary keys are strings ("-704", "MISS");
  * a progress line every --progress-interval seconds while a phase runs;
  * --payload-mode unique gives every object bytes derived from its key and id, so verification
    catches an object returned under the wrong key (with --pattern all objects are identical);
  * a lane whose thread raises fails the run: exit 1, "ok": false, the error in the summary's
    "error" and in its phase's "lane_errors"; the lane's partial stats are still counted;
  * each phase records its wall-clock span ("start_time", "end_time", epoch seconds) and, with
    --save-latency-samples, its raw latencies ("latency_samples_ms"), so that
    `store_kv_bench.py --aggregate a.json b.json ... --summary-json all.json` combines the
    summaries of concurrent processes (the guide's multi-process recipe);
  * --prepare-mode none makes read_perf/mixed_rw/remove_perf use the ids an earlier run wrote
    (object-id-start .. +prepare-objects) instead of silently doing nothing;
  * zero-copy reads zero their slots only when verifying (the zeroing exists to make
    verification meaningful, and costs a memset per byte read);
  * no run looks successful for work it did not do. A put of a key that already exists returns
    0 and keeps the old value (as upstream), moving no bytes: a batch_is_exist over the phase's
    ids, outside every request's latency, finds the keys already there (ExistingKeys); the
    puts that hit them are counted as "existing_keys" (per phase and overall, console and
    JSON), their bytes are not counted in "bytes", and the run warns on stderr, sets "ok":
    false and exits 23. The count is exact unless another client creates the same keys while
    the phase runs;
  * a --key-prefix is never cut: --key-size defaults to what the prefix needs (at least 20,
    upstream's default), an explicit --key-size too short for the prefix is refused (exit 2),
    and so are prefixes ending in "_" (the padding character) and ids of more than 16 digits,
    so two distinct accepted prefixes never make the same key;
  * verify_write and write_perf remove the objects they wrote once done (untimed; keys that
    existed before the run are never removed), so that the guide's sequence verify_write,
    write_perf, read_perf on one cluster writes fresh keys in every phase; --keep-objects keeps
    them (fill always keeps them: it exists to leave data for --prepare-mode none);
  * --plot FILE.png draws throughput per phase (and per job) and latency percentiles with
    matplotlib; a CSV with one row per phase is written next to the summary JSON (.csv).
Extra summary keys (the upstream ones are unchanged): "phase_order" (the JSON's keys are sorted),
"error", "exit_code", "config", "cleanup", and per record "start_time", "end_time",
"lane_errors", "existing_keys" and "jobs" (per-job throughput when numjobs > 1).

Layout: helpers (sizes, keys, payloads) -> statistics -> metadata model and journal files ->
zero-copy buffer slots -> StoreSession (the store calls and their accounting) -> Benchmark (lanes,
phases, scenarios) -> console/summary output -> --aggregate -> command line.

Threads: every lane is a thread sharing the one store (the binding releases the GIL during I/O);
lanes share only the id allocators, read cursors and prepared-id list, each behind a lock, and
write their own LaneStats, which the main thread merges after joining them.

Needs only the standard library (matplotlib only for --plot); `--help` and `--aggregate` work
without the store module.
"""
import argparse
import collections
import ctypes
import hashlib
import importlib
import json
import logging
import math
import os
import random
import select
import sys
import threading
import time

LOG = logging.getLogger("store_kv_bench")

KiB = 1 << 10
MiB = 1 << 20
GiB = 1 << 30
SCHEMA_VERSION = 1
KEY_ID_DIGITS = 16  # a key ends with the object id, zero-padded to this many decimal digits
WRITE_ALIGNMENT = 512  # bytes: write scenarios need value sizes that are a multiple of this
UNIQUE_TILE_BYTES = 4096  # period of the hash-derived body of a --payload-mode unique value
ID_BYTE_CACHE_LIMIT = 64 * MiB  # cache the 256 "id & 0xFF" payloads when they fit in this
LANE_DRAIN_TIMEOUT_S = 5.0  # after Ctrl-C, how long lanes get to finish their current request

SCENARIOS = ("verify_write", "fill", "write_perf", "read_perf", "mixed_rw", "metadata_smoke",
             "mixed_metadata", "remove_perf", "replay")
METADATA_OPS = ("put", "get", "exist", "remove")
JOURNALED_SCENARIOS = ("metadata_smoke", "mixed_metadata", "replay")
EXIT22_SCENARIOS = ("metadata_smoke", "mixed_metadata", "remove_perf", "replay")

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_VERIFY_FAILURE = 20
EXIT_VERIFY_MISS = 21
EXIT_METADATA_FAILURE = 22
EXIT_EXISTING_KEYS = 23  # a write phase found keys already stored: it wrote nothing for them
EXIT_FAILED_KVS = 24  # operations failed (or read misses) in a phase that exits 0 upstream
EXIT_INTERRUPTED = 130

OBJECT_HAS_LEASE = -706  # store code: a remove refused while a read lease is held

# Error-count keys that are not store return codes.
MISS = "MISS"
VERIFY_FAIL = "VERIFY_FAIL"
VERIFY_SIZE_MISMATCH = "VERIFY_SIZE_MISMATCH"
PRESENCE_MISMATCH = "PRESENCE_MISMATCH"

COUNT_FIELDS = ("requests", "successful_requests", "failed_requests", "kvs", "successful_kvs",
                "failed_kvs", "misses", "verify_failures", "bytes", "existing_keys")
KEY_SIZE_DEFAULT = 20  # upstream's --key-size default; grown when --key-prefix needs more
MAX_OBJECT_ID = 10 ** KEY_ID_DIGITS - 1  # a longer id would run into the prefix's characters
EXIST_CHECK_CHUNK = 1024  # keys per untimed batch_is_exist before a write phase
CLEANUP_CHUNK = 1024  # keys per batch_remove when a run removes what it wrote
CSV_FIELDS = ("phase", "requests", "successful_requests", "failed_requests", "kvs",
              "successful_kvs", "failed_kvs", "existing_keys", "misses", "verify_failures",
              "bytes", "duration_sec", "req_per_sec", "kv_per_sec", "MiB_per_sec", "lat_mean_ms",
              "lat_p50_ms", "lat_p95_ms", "lat_p99_ms", "latency_samples", "dataset_exhausted")

_SIZE_UNITS = {"": 1, "b": 1, "k": KiB, "kb": KiB, "kib": KiB, "m": MiB, "mb": MiB, "mib": MiB,
               "g": GiB, "gb": GiB, "gib": GiB, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}


# ---- sizes, keys, payloads ------------------------------------------------------------------


def parse_size(text):
    """Bytes from "4096", "16MiB", "1g", "2 GB" (binary multiples). Raises ValueError."""
    s = str(text).strip().lower().replace(" ", "")
    digits = s.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = s[len(digits):]
    if not digits or unit not in _SIZE_UNITS:
        raise ValueError(f"not a size: {text!r}")
    try:
        value = float(digits) if "." in digits else int(digits)
    except ValueError:
        raise ValueError(f"not a size: {text!r}") from None
    return int(value * _SIZE_UNITS[unit])


def _size_arg(text):
    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def key_size_needed(prefix):
    """The smallest --key-size that keeps every character of `prefix`."""
    return len(prefix) + KEY_ID_DIGITS


def resolve_key_size(args):
    """Sets args.key_size when it was not given: max(20, what --key-prefix needs)."""
    if args.key_size is None:
        args.key_size = max(KEY_SIZE_DEFAULT, key_size_needed(args.key_prefix))
    return args.key_size


def check_key_prefix(prefix, key_size):
    """Raises ValueError unless make_key keeps all of `prefix` at `key_size` and no other
    accepted prefix can give the same keys (the padding "_" must not end a prefix)."""
    if key_size < key_size_needed(prefix):
        raise ValueError(
            f"--key-prefix {prefix!r} ({len(prefix)} characters) would be cut to "
            f"{prefix[:max(0, key_size - KEY_ID_DIGITS)]!r} by --key-size {key_size}: keys are "
            f"the prefix then a {KEY_ID_DIGITS}-digit id, so this prefix needs --key-size "
            f"{key_size_needed(prefix)} or more (or omit --key-size)")
    if prefix.endswith("_"):
        raise ValueError(
            f"--key-prefix {prefix!r} ends with '_', the padding character: its keys would be "
            f"those of {prefix.rstrip('_')!r}; choose a prefix that does not end with '_'")


def make_key(prefix, key_size, object_id):
    """The object's key: `prefix` cut or right-padded with "_" to key_size-16 characters, then
    the id as 16 zero-padded decimal digits ("veri0000000000000007" for "verify", 20, 7), as
    upstream's make_key. The command line never lets it cut (check_key_prefix)."""
    head = key_size - KEY_ID_DIGITS
    return prefix[:head].ljust(head, "_") + f"{object_id:0{KEY_ID_DIGITS}d}"


def parse_pattern(text):
    """--pattern bytes: "0x..." is hex (an even number of digits), anything else UTF-8."""
    if text[:2].lower() == "0x":
        digits = text[2:]
        if not digits or len(digits) % 2:
            raise ValueError(f"--pattern {text!r}: hex needs an even, non-zero number of digits")
        try:
            return bytes.fromhex(digits)
        except ValueError:
            raise ValueError(f"--pattern {text!r}: not hex") from None
    data = text.encode("utf-8")
    if not data:
        raise ValueError("--pattern is empty")
    return data


def _repeat_to(unit, size):
    return (unit * (size // len(unit) + 1))[:size]


class PayloadFactory:
    """The bytes of each object and the check of bytes read back.

    Modes: "pattern" (--pattern repeated to value_size: the same bytes for every object),
    "id_byte" (value_size bytes of object_id & 0xFF: upstream's default), "unique" (the key and id
    as text, then a 4 KiB tile hashed from them, repeated: no two objects share their bytes).
    Thread-safe: the caches are filled under a lock and never change afterwards.
    """

    def __init__(self, mode, value_size, key_prefix, key_size, pattern=None):
        if mode not in ("pattern", "id_byte", "unique"):
            raise ValueError(f"unknown payload mode {mode!r}")
        if mode == "pattern" and not pattern:
            raise ValueError("pattern payloads need a pattern")
        self.mode = mode
        self.value_size = value_size
        self.key_prefix = key_prefix
        self.key_size = key_size
        self._fixed = _repeat_to(pattern, value_size) if mode == "pattern" else None
        self._by_byte = {}
        self._cache_bytes = mode == "id_byte" and 256 * value_size <= ID_BYTE_CACHE_LIMIT
        self._lock = threading.Lock()

    @classmethod
    def from_args(cls, args):
        pattern = parse_pattern(args.pattern) if args.pattern else None
        resolve_key_size(args)
        if args.payload_mode == "unique":
            mode = "unique"
        else:
            mode = "pattern" if pattern else "id_byte"
        return cls(mode, args.value_size, args.key_prefix, args.key_size, pattern)

    def payload(self, object_id):
        """The value_size bytes stored as object `object_id`."""
        if self._fixed is not None:
            return self._fixed
        if self.mode == "unique":
            return self._unique(object_id)
        byte = object_id & 0xFF
        if not self._cache_bytes:
            return bytes((byte,)) * self.value_size
        data = self._by_byte.get(byte)
        if data is None:
            with self._lock:
                data = self._by_byte.setdefault(byte, bytes((byte,)) * self.value_size)
        return data

    def _unique(self, object_id):
        key = make_key(self.key_prefix, self.key_size, object_id)
        header = f"{key}#{object_id}#".encode()
        tile = hashlib.shake_256(header).digest(UNIQUE_TILE_BYTES)
        return (header + _repeat_to(tile, self.value_size))[:self.value_size]

    def check(self, object_id, data):
        """None if `data` (bytes-like) is object `object_id`'s value, else the error key."""
        if len(data) != self.value_size:
            return VERIFY_SIZE_MISMATCH
        return None if data == self.payload(object_id) else VERIFY_FAIL


# ---- statistics -----------------------------------------------------------------------------


class LatencySampler:
    """Keeps every `every`-th latency offered (the 0th, every-th, 2*every-th, ...), in seconds."""

    def __init__(self, every=1):
        if every < 1:
            raise ValueError("LatencySampler: every must be >= 1")
        self.every = every
        self.offered = 0
        self.samples = []

    def add(self, seconds):
        if self.offered % self.every == 0:
            self.samples.append(seconds)
        self.offered += 1


def percentile(sorted_values, pct):
    """Linear interpolation between the closest ranks of an ascending list; 0.0 when empty."""
    if not sorted_values:
        return 0.0
    rank = (len(sorted_values) - 1) * pct / 100.0
    lo = math.floor(rank)
    hi = math.ceil(rank)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (rank - lo)


def union_length(spans):
    """Total length covered by (start, end) intervals, overlaps counted once."""
    total = 0.0
    cur_start = cur_end = None
    for start, end in sorted(spans):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


class LaneStats:
    """One lane's counters for one phase. Written only by its lane thread; read by the main
    thread for progress lines (plain int reads) and merged after the lane has been joined."""

    def __init__(self, sample_every, value_size):
        self.value_size = value_size
        for name in COUNT_FIELDS:
            setattr(self, name, 0)
        self.errors = collections.Counter()
        self.latency = LatencySampler(sample_every)
        self.dataset_exhausted = False
        self.error = None  # "ExceptionType: message" when the lane died
        self.start = self.end = None  # perf_counter seconds
        self.wall_start = self.wall_end = None  # epoch seconds
        # Set when the lane has finished. The main thread waits on this rather than on
        # Thread.join: in CPython 3.11.2 a join interrupted by Ctrl-C marks the still-running
        # thread as stopped, so later joins return early.
        self.done = threading.Event()

    def begin(self):
        self.wall_start = time.time()
        self.start = time.perf_counter()

    def finish(self):
        self.end = time.perf_counter()
        self.wall_end = time.time()
        self.done.set()

    def record(self, latency_s, outcomes, existing=0):
        """One request: `outcomes` has one entry per KV, None for success or the error key;
        `existing` of the successful puts found their key already stored (no bytes moved)."""
        failed = sum(1 for o in outcomes if o is not None)
        self.requests += 1
        self.kvs += len(outcomes)
        self.successful_kvs += len(outcomes) - failed
        self.failed_kvs += failed
        self.bytes += (len(outcomes) - failed - existing) * self.value_size
        self.existing_keys += existing
        if failed:
            self.failed_requests += 1
            for o in outcomes:
                if o is None:
                    continue
                self.errors[o] += 1
                if o == MISS:
                    self.misses += 1
                elif o in (VERIFY_FAIL, VERIFY_SIZE_MISMATCH):
                    self.verify_failures += 1
        else:
            self.successful_requests += 1
        self.latency.add(latency_s)


def stringify_error_counts(counter):
    """error Counter -> {str(key): count}; keys mix ints (return codes) and strings."""
    out = {}
    for key, count in counter.items():
        out[str(key)] = out.get(str(key), 0) + int(count)
    return dict(sorted(out.items()))


def summarize(counts, samples_s, duration, dataset_exhausted, error_counts):
    """The summary record S of the JSON schema from merged counters (samples in seconds)."""
    ordered = sorted(samples_s)
    s = {name: int(counts.get(name, 0)) for name in COUNT_FIELDS}
    rate = (lambda n: n / duration) if duration > 0 else (lambda n: 0.0)
    s.update({
        "duration_sec": duration,
        "req_per_sec": rate(s["requests"]),
        "kv_per_sec": rate(s["kvs"]),
        "MiB_per_sec": rate(s["bytes"] / MiB),
        "lat_mean_ms": (sum(ordered) / len(ordered) * 1e3) if ordered else 0.0,
        "lat_p50_ms": percentile(ordered, 50) * 1e3,
        "lat_p95_ms": percentile(ordered, 95) * 1e3,
        "lat_p99_ms": percentile(ordered, 99) * 1e3,
        "latency_samples": len(ordered),
        "dataset_exhausted": bool(dataset_exhausted),
        "error_counts": stringify_error_counts(error_counts),
    })
    return s


class PhaseResult:
    """A finished phase: its summary record plus what the overall record is merged from."""

    def __init__(self, name, lanes, save_samples, lanes_per_job=1):
        self.name = name
        started = [lane for lane in lanes if lane.start is not None]
        # a lane still running (only after an interrupt) counts as ending now
        now, wall_now = time.perf_counter(), time.time()
        ends = [lane.end if lane.end is not None else now for lane in started]
        wall_ends = [lane.wall_end if lane.wall_end is not None else wall_now
                     for lane in started]
        self.duration = max(ends) - min(lane.start for lane in started) if started else 0.0
        self.counts = {f: sum(getattr(lane, f) for lane in lanes) for f in COUNT_FIELDS}
        self.errors = collections.Counter()
        self.samples = []
        for lane in lanes:
            self.errors.update(lane.errors)
            self.samples.extend(lane.latency.samples)
        self.dataset_exhausted = any(lane.dataset_exhausted for lane in lanes)
        self.lane_errors = [{"lane": i, "error": lane.error}
                            for i, lane in enumerate(lanes) if lane.error]
        self.start_time = min((lane.wall_start for lane in started), default=None)
        self.end_time = max(wall_ends, default=None)
        self.save_samples = save_samples
        self.jobs = []  # per job (lanes_per_job consecutive lanes), when there are several
        if lanes_per_job >= 1 and len(lanes) > lanes_per_job:
            for j in range(0, len(lanes), lanes_per_job):
                job = [lane for lane in lanes[j:j + lanes_per_job] if lane.start is not None]
                dur = (max(lane.end if lane.end is not None else now for lane in job)
                       - min(lane.start for lane in job)) if job else 0.0
                nbytes = sum(lane.bytes for lane in lanes[j:j + lanes_per_job])
                self.jobs.append({"job": j // lanes_per_job, "bytes": nbytes,
                                  "duration_sec": dur,
                                  "MiB_per_sec": nbytes / MiB / dur if dur > 0 else 0.0})

    def record(self):
        s = summarize(self.counts, self.samples, self.duration, self.dataset_exhausted,
                      self.errors)
        s["start_time"] = self.start_time
        s["end_time"] = self.end_time
        s["lane_errors"] = self.lane_errors
        if self.jobs:
            s["jobs"] = self.jobs
        if self.save_samples:
            s["latency_samples_ms"] = [round(x * 1e3, 6) for x in self.samples]
        return s


def overall_record(results):
    """The "overall" record: every phase merged; duration = sum of the (sequential) phases."""
    counts = collections.Counter()
    errors = collections.Counter()
    samples = []
    for r in results:
        counts.update(r.counts)
        errors.update(r.errors)
        samples.extend(r.samples)
    s = summarize(counts, samples, sum(r.duration for r in results),
                  any(r.dataset_exhausted for r in results), errors)
    s["start_time"] = min((r.start_time for r in results if r.start_time is not None),
                          default=None)
    s["end_time"] = max((r.end_time for r in results if r.end_time is not None), default=None)
    s["lane_errors"] = [dict(e, phase=r.name) for r in results for e in r.lane_errors]
    return s


# ---- metadata operations, model, journal files ----------------------------------------------


def validate_op_percentages(put_pct, get_pct, exist_pct, remove_pct):
    """Raises ValueError unless all four are in 0..100 and sum to 100."""
    pcts = (put_pct, get_pct, exist_pct, remove_pct)
    for name, value in zip(METADATA_OPS, pcts):
        if not isinstance(value, int) or value < 0 or value > 100:
            raise ValueError(f"--{name}-pct must be an integer in 0..100, got {value!r}")
    if sum(pcts) != 100:
        raise ValueError(f"--put-pct/--get-pct/--exist-pct/--remove-pct must sum to 100, "
                         f"got {sum(pcts)}")


def choose_metadata_operations(percentages, rand_seed, lane, count):
    """`count` operation names for one lane, drawn from random.Random(rand_seed + lane) with the
    (put, get, exist, remove) percentages: the same arguments always give the same list."""
    validate_op_percentages(*percentages)
    rng = random.Random(rand_seed + lane)
    bounds = []
    total = 0
    for op, pct in zip(METADATA_OPS, percentages):
        total += pct
        bounds.append((total, op))
    ops = []
    for _ in range(count):
        draw = rng.randrange(100)
        ops.append(next(op for bound, op in bounds if draw < bound))
    return ops


class MetadataLaneModel:
    """A lane's belief of which of its object ids exist, changed only by successful operations:
    a put makes the id present, a remove absent; get and exist change nothing."""

    def __init__(self, present=()):
        self.present = set(present)

    def expected_present(self, object_id):
        return object_id in self.present

    def apply(self, op, object_id, ok):
        if op not in METADATA_OPS:
            raise ValueError(f"unknown metadata operation {op!r}")
        if not ok:
            return
        if op == "put":
            self.present.add(object_id)
        elif op == "remove":
            self.present.discard(object_id)


REPLAY_REQUIRED_FIELDS = ("schema_version", "op_id", "lane", "op", "object_id", "key",
                          "invoke_ns", "return_ns", "result")


def write_jsonl(path, records):
    """One JSON object per line (sorted keys), written via `path`.tmp and renamed into place."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, sort_keys=True))
            f.write("\n")
    os.replace(tmp, path)


def read_replay(path):
    """The records of a journal file (the --replay-file format), validated; blank lines skipped.
    Raises ValueError naming the line of the first bad record."""
    records = []
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{where}: not JSON: {e}") from None
            if not isinstance(rec, dict):
                raise ValueError(f"{where}: a record must be a JSON object")
            missing = [k for k in REPLAY_REQUIRED_FIELDS if k not in rec]
            if missing:
                raise ValueError(f"{where}: missing field(s) {', '.join(missing)}")
            if rec["schema_version"] != SCHEMA_VERSION:
                raise ValueError(f"{where}: schema_version {rec['schema_version']!r}, "
                                 f"expected {SCHEMA_VERSION}")
            if rec["op"] not in METADATA_OPS:
                raise ValueError(f"{where}: op {rec['op']!r} is not one of "
                                 f"{', '.join(METADATA_OPS)}")
            for field in ("op_id", "lane", "object_id", "invoke_ns", "return_ns"):
                value = rec[field]
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise ValueError(f"{where}: {field} must be an integer >= 0, got {value!r}")
            records.append(rec)
    return records


def write_json_atomic(path, obj):
    """`obj` as JSON (sorted keys, trailing newline) written via `path`.tmp and renamed."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, sort_keys=True, indent=2)
        f.write("\n")
    os.replace(tmp, path)


# ---- zero-copy buffer slots ----------------------------------------------------------------


class ZcopyBufferPool:
    """One BufferPool lease of value_size x batch_size x lanes bytes; lane i owns the batch_size
    slots [i*batch_size, (i+1)*batch_size). Created by the main thread, closed once by it."""

    def __init__(self, module, store, value_size, batch_size, lane_count, local_buffer_size):
        self.value_size = value_size
        self.batch_size = batch_size
        self.lane_count = lane_count
        self.total = value_size * batch_size * lane_count
        if self.total > local_buffer_size:
            raise ValueError(
                f"zcopy needs value_size x batch_size x numjobs x iodepth = {self.total} bytes of "
                f"registered buffer, more than --local-buffer-size {local_buffer_size}: "
                f"increase --local-buffer-size")
        pool_class = getattr(module, "BufferPool", None)
        if pool_class is None:
            raise RuntimeError(f"{module.__name__} has no BufferPool: this build cannot run "
                               f"--io-api zcopy")
        self.pool = pool_class(store, max_bytes=local_buffer_size, max_regions=1)
        self.lease = None
        try:
            self.lease = self.pool.acquire(self.total, block=False)
        except BaseException:
            self.pool.close()
            self.pool = None
            raise
        self.base = int(self.lease.ptr)

    def slot_ptr(self, lane, index):
        if not (0 <= lane < self.lane_count and 0 <= index < self.batch_size):
            raise IndexError(f"slot ({lane}, {index}) outside {self.lane_count} lanes x "
                             f"{self.batch_size} slots")
        return self.base + (lane * self.batch_size + index) * self.value_size

    def close(self):
        """Releases the lease and closes the pool; idempotent."""
        lease, self.lease = self.lease, None
        pool, self.pool = self.pool, None
        try:
            if lease is not None:
                lease.release()
        finally:
            if pool is not None:
                pool.close()


# ---- store calls and their accounting -----------------------------------------------------


def load_store_module(name=None):
    """The store module: `name`, else $MOONCAKE_STORE_MODULE, else mooncake.store."""
    name = name or os.environ.get("MOONCAKE_STORE_MODULE") or "mooncake.store"
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise RuntimeError(
            f"cannot import the store module {name!r} ({e}); put the directory holding it on "
            f"PYTHONPATH or point MOONCAKE_STORE_MODULE at another module") from e


def _exist_function(store):
    """upstream's script calls isExist; bindings that only have is_exist work too."""
    fn = getattr(store, "isExist", None) or getattr(store, "is_exist", None)
    if fn is not None:
        return fn

    def missing(_key):
        raise AttributeError(f"{type(store).__name__} has neither isExist nor is_exist")
    return missing


class StoreSession:
    """The store calls of every scenario, each recorded into the calling lane's LaneStats.

    `store` is set up already; `module` supplies ReplicateConfig (one per lane, replica_num =
    --memory-replica-num, nof_replica_num = --nof-replica-num; None = call without config).
    Lanes call concurrently; lane i touches only configs[i] and its own zero-copy slots.
    """

    def __init__(self, store, args, module=None, lane_count=1):
        self.store = store
        self.args = args
        resolve_key_size(args)
        self.value_size = args.value_size
        self.batch_size = args.batch_size
        self.payloads = PayloadFactory.from_args(args)
        self.exist = _exist_function(store)
        self.configs = [self._make_config(module) for _ in range(lane_count)]
        self.zcopy = None  # a ZcopyBufferPool in --io-api zcopy data phases

    def _make_config(self, module):
        cls = getattr(module, "ReplicateConfig", None) if module is not None else None
        if cls is None:
            return None
        cfg = cls()
        cfg.replica_num = self.args.memory_replica_num
        cfg.nof_replica_num = self.args.nof_replica_num
        return cfg

    def key(self, object_id):
        return make_key(self.args.key_prefix, self.args.key_size, object_id)

    def _with_cfg(self, fn, lane, *call_args):
        cfg = self.configs[lane]
        return fn(*call_args) if cfg is None else fn(*call_args, cfg)

    @staticmethod
    def _per_key(name, results, n):
        results = list(results)
        if len(results) != n:
            raise RuntimeError(f"{name} returned {len(results)} results for {n} keys")
        return results

    # -- data path --

    def write(self, lane, ids, stats, existing=frozenset()):
        """Writes objects `ids` as one request; returns the ids written successfully.
        `existing`: ids found stored before the phase (their puts move no bytes)."""
        keys = [self.key(i) for i in ids]
        vs = self.value_size
        if self.zcopy is not None:
            ptrs = [self.zcopy.slot_ptr(lane, j) for j in range(len(ids))]
            for ptr, object_id in zip(ptrs, ids):
                ctypes.memmove(ptr, self.payloads.payload(object_id), vs)
            t0 = time.perf_counter()
            if self.batch_size == 1:
                rcs = [self._with_cfg(self.store.put_from, lane, keys[0], ptrs[0], vs)]
            else:
                rcs = self._per_key("batch_put_from", self._with_cfg(
                    self.store.batch_put_from, lane, keys, ptrs, [vs] * len(ids)), len(ids))
        else:
            values = [self.payloads.payload(i) for i in ids]
            t0 = time.perf_counter()
            if self.batch_size == 1:
                rcs = [self._with_cfg(self.store.put, lane, keys[0], values[0])]
            else:  # put_batch answers one code for the whole batch
                rcs = [self._with_cfg(self.store.put_batch, lane, keys, values)] * len(ids)
        latency = time.perf_counter() - t0
        outcomes = [None if rc == 0 else rc for rc in rcs]
        ok_ids = [i for i, o in zip(ids, outcomes) if o is None]
        stats.record(latency, outcomes,
                     sum(1 for i in ok_ids if i in existing) if existing else 0)
        return ok_ids

    def existing_ids(self, ids):
        """The subset of `ids` whose keys are stored now (untimed: called before a write phase).
        Raises RuntimeError when the store cannot say for a key."""
        fn = getattr(self.store, "batch_is_exist", None)
        ids = list(ids)
        found = set()
        for at in range(0, len(ids), EXIST_CHECK_CHUNK):
            chunk = ids[at:at + EXIST_CHECK_CHUNK]
            keys = [self.key(i) for i in chunk]
            codes = (self._per_key("batch_is_exist", fn(keys), len(keys)) if fn is not None
                     else [self.exist(k) for k in keys])
            for object_id, key, code in zip(chunk, keys, codes):
                if code not in (0, 1):
                    raise RuntimeError(f"cannot tell whether {key!r} is stored before writing it "
                                       f"(is_exist returned {code})")
                if code == 1:
                    found.add(object_id)
        return found

    def remove_ids(self, ids):
        """Removes objects `ids` (force: a read lease of our own verify_read does not block);
        returns (removed, failed). Untimed: the cleanup after a phase."""
        ids = list(ids)
        removed = failed = 0
        batch_remove = getattr(self.store, "batch_remove", None)
        for at in range(0, len(ids), CLEANUP_CHUNK):
            keys = [self.key(i) for i in ids[at:at + CLEANUP_CHUNK]]
            codes = None
            if batch_remove is not None:
                try:
                    codes = self._per_key("batch_remove", batch_remove(keys, force=True),
                                          len(keys))
                except TypeError:  # a module whose batch_remove has no force
                    codes = None
            if codes is None:
                codes = []
                for k in keys:
                    try:
                        codes.append(self.store.remove(k, force=True))
                    except TypeError:
                        codes.append(self.store.remove(k))
            for code in codes:
                if code == 0:
                    removed += 1
                else:
                    failed += 1
        return removed, failed

    def read(self, lane, ids, stats, verify):
        """Reads objects `ids` as one request, checking their bytes when `verify`."""
        keys = [self.key(i) for i in ids]
        if self.zcopy is not None:
            self._read_zcopy(lane, ids, keys, stats, verify)
            return
        t0 = time.perf_counter()
        if self.batch_size == 1:
            values = [self.store.get(keys[0])]
        else:
            values = self._per_key("get_batch", self.store.get_batch(keys), len(ids))
        latency = time.perf_counter() - t0
        outcomes = []
        for object_id, data in zip(ids, values):
            if data is None or len(data) == 0:
                outcomes.append(MISS)
            else:
                outcomes.append(self.payloads.check(object_id, data) if verify else None)
        stats.record(latency, outcomes)

    def _read_zcopy(self, lane, ids, keys, stats, verify):
        vs = self.value_size
        ptrs = [self.zcopy.slot_ptr(lane, j) for j in range(len(ids))]
        if verify:  # so that bytes the store did not write cannot pass verification
            for ptr in ptrs:
                ctypes.memset(ptr, 0, vs)
        t0 = time.perf_counter()
        if self.batch_size == 1:
            rcs = [self.store.get_into(keys[0], ptrs[0], vs)]
        else:
            rcs = self._per_key("batch_get_into",
                                self.store.batch_get_into(keys, ptrs, [vs] * len(ids)), len(ids))
        latency = time.perf_counter() - t0
        outcomes = []
        for object_id, key, ptr, rc in zip(ids, keys, ptrs, rcs):
            if rc < 0:
                outcomes.append(MISS if self.exist(key) == 0 else rc)
            elif not verify:
                outcomes.append(None)
            elif rc != vs:
                outcomes.append(VERIFY_SIZE_MISMATCH)
            else:
                outcomes.append(self.payloads.check(object_id, ctypes.string_at(ptr, rc)))
        stats.record(latency, outcomes)

    def remove(self, lane, object_id, stats):
        key = self.key(object_id)
        t0 = time.perf_counter()
        rc = self.store.remove(key)
        stats.record(time.perf_counter() - t0, [None if rc == 0 else rc])

    # -- metadata path --

    def metadata_operation(self, lane, op, object_id, model, op_id=0, stats=None):
        """One put/get/exist/remove judged against the lane's model; returns its journal record.

        put: success iff put returns 0, or it fails but the object was expected and is present.
        get: success iff "returned bytes" equals the expected presence and the bytes verify.
        exist: success iff the code is >= 0 and (code == 1) equals the expected presence.
        remove: success iff the object is absent afterwards and remove returned 0 (or the object
        was not expected to exist).
        """
        key = self.key(object_id)
        expected = model.expected_present(object_id)
        invoke_ns = time.time_ns()
        t0 = time.perf_counter()
        actual = None
        error = None
        if op == "put":
            result = self._with_cfg(self.store.put, lane, key, self.payloads.payload(object_id))
            if result == 0:
                actual = True
            else:
                actual = self.exist(key) == 1
                if not (expected and actual):
                    error = result
        elif op == "get":
            data = self.store.get(key)
            actual = data is not None and len(data) > 0
            result = len(data) if data is not None else 0
            if actual != expected:
                error = PRESENCE_MISMATCH
            elif actual:
                error = self.payloads.check(object_id, data)
        elif op == "exist":
            result = self.exist(key)
            if result < 0:
                error = result
            else:
                actual = result == 1
                if actual != expected:
                    error = PRESENCE_MISMATCH
        elif op == "remove":
            result = self.store.remove(key)
            after = self.exist(key)
            actual = after == 1 if after >= 0 else None
            if after < 0:
                error = after
            elif actual:
                error = result if result < 0 else PRESENCE_MISMATCH
            elif result != 0 and expected:
                error = result
        else:
            raise ValueError(f"unknown metadata operation {op!r}")
        latency = time.perf_counter() - t0
        return_ns = time.time_ns()
        ok = error is None
        model.apply(op, object_id, ok)
        if stats is not None:
            stats.record(latency, [error])
        return {"schema_version": SCHEMA_VERSION, "op_id": op_id, "lane": lane, "op": op,
                "object_id": object_id, "key": key, "invoke_ns": invoke_ns,
                "return_ns": return_ns, "result": result, "ok": ok,
                "expected_present": expected, "actual_present": actual,
                "error": None if ok else str(error)}


# ---- lanes and phases -------------------------------------------------------------------------


class LaneFailure(RuntimeError):
    """A lane thread raised: the phase's stats are recorded, the run fails."""


class IdAllocator:
    """Hands out consecutive object ids [start, start+count) in chunks; thread-safe."""

    def __init__(self, start, count):
        self.next = start
        self.end = start + count
        self._lock = threading.Lock()

    def reserve(self, n):
        """Up to `n` fresh ids as a range, or None once all are handed out."""
        with self._lock:
            if self.next >= self.end:
                return None
            lo = self.next
            self.next = min(self.end, lo + n)
            return range(lo, self.next)


class ExistingKeys:
    """Which ids of [start, end) were stored before this run wrote them, found with
    batch_is_exist in chunks of EXIST_CHECK_CHUNK ids, each chunk checked once, before any of
    its ids is written (check_through). Thread-safe; `in` after check_through covered the id."""

    def __init__(self, session, start, end):
        self.session = session
        self.checked_to = start
        self.end = end
        self.found = set()
        self.seconds = 0.0  # time spent checking
        self._lock = threading.Lock()

    def check_through(self, stop):
        """Checks every unchecked chunk below `stop` (capped at the end of the range)."""
        stop = min(stop, self.end)
        if self.checked_to >= stop:
            return
        with self._lock:
            while self.checked_to < stop:
                hi = min(self.checked_to + EXIST_CHECK_CHUNK, self.end)
                t0 = time.perf_counter()
                self.found |= self.session.existing_ids(range(self.checked_to, hi))
                self.seconds += time.perf_counter() - t0
                self.checked_to = hi

    def __contains__(self, object_id):
        return object_id in self.found

    def __bool__(self):
        return bool(self.found)


class SharedCursor:
    """Consecutive batches of a list of ids, shared by all lanes; with wrap=True it starts over
    at the end (never repeating an id inside one batch). Thread-safe."""

    def __init__(self, ids, wrap):
        self.ids = ids
        self.wrap = wrap
        self.pos = 0
        self._lock = threading.Lock()

    def take(self, n):
        with self._lock:
            if not self.ids:
                return []
            if not self.wrap:
                batch = self.ids[self.pos:self.pos + n]
                self.pos += len(batch)
                return batch
            n = min(n, len(self.ids))
            batch = self.ids[self.pos:self.pos + n]
            self.pos += len(batch)
            if len(batch) < n:
                self.pos = n - len(batch)
                batch = batch + self.ids[:self.pos]
            self.pos %= len(self.ids)
            return batch


class Benchmark:
    """One run: the store session, the phases in order, the journal and the exit code."""

    def __init__(self, args):
        self.args = args
        self.lane_count = args.numjobs * args.iodepth
        self.sample_every = 1 if args.runtime == 0 else args.latency_sample_rate
        self.write_count = args.write_objects or args.nr_objects
        self.prepare_count = args.prepare_objects or args.nr_objects
        self.results = []  # PhaseResult, in the order the phases ran
        self.journal = []
        self.prepared = []  # ids written by a prepare/verify write, in completion order
        self._prepared_lock = threading.Lock()
        self.next_id = args.object_id_start
        self.session = None
        self.error = None
        self.interrupted = False
        self.fresh_written = []  # ids this run wrote that were not stored before: its cleanup
        self._fresh_lock = threading.Lock()
        self.cleanup = None  # {"removed": n, "failed": n} once the run removed what it wrote

    # -- lanes --

    def run_phase(self, name, worker, finalize=None):
        """Runs worker(lane, stats, stop_event) on every lane thread and records the phase;
        finalize(PhaseResult), if given, may adjust the result before it is recorded.

        A lane that raises sets the stop event (the other lanes end early), its error is kept
        with its stats, and LaneFailure is raised after the phase is recorded and printed.
        """
        lane_count = self.lane_count
        stats = [LaneStats(self.sample_every, self.args.value_size) for _ in range(lane_count)]
        stop = threading.Event()

        def body(lane):
            st = stats[lane]
            st.begin()
            try:
                worker(lane, st, stop)
            except BaseException as e:  # noqa: B902 - a dying lane must be reported, whatever
                st.error = f"{type(e).__name__}: {e}"
                LOG.exception("phase %s: lane %d died", name, lane)
                stop.set()
            finally:
                st.finish()

        threads = [threading.Thread(target=body, args=(lane,), daemon=True,
                                    name=f"kvbench-{name}-{lane}") for lane in range(lane_count)]
        t_start = time.perf_counter()
        try:
            for t in threads:
                t.start()
            self._wait_lanes(name, stats, t_start)
        except KeyboardInterrupt:
            stop.set()
            self._drain_lanes(name, stats)
            self._record(PhaseResult(name, stats, self.args.save_latency_samples,
                                      self.args.iodepth))
            raise
        result = PhaseResult(name, stats, self.args.save_latency_samples,
                                      self.args.iodepth)
        if finalize is not None:
            finalize(result)
        self._record(result)
        if result.lane_errors:
            raise LaneFailure(f"phase {name}: " + "; ".join(
                f"lane {e['lane']} died: {e['error']}" for e in result.lane_errors))
        return result

    def _wait_lanes(self, name, stats, t_start):
        interval = self.args.progress_interval
        next_report = t_start + interval
        for st in stats:
            while not st.done.wait(0.2):
                now = time.perf_counter()
                if interval > 0 and now >= next_report:
                    self._progress(name, stats, now - t_start)
                    next_report = now + interval

    def _drain_lanes(self, name, stats):
        """After Ctrl-C: gives the started lanes LANE_DRAIN_TIMEOUT_S to see the stop event."""
        deadline = time.monotonic() + LANE_DRAIN_TIMEOUT_S
        running = [st for st in stats if st.start is not None]
        for st in running:
            st.done.wait(max(0.0, deadline - time.monotonic()))
        stuck = sum(1 for st in running if not st.done.is_set())
        if stuck:
            LOG.warning("phase %s: %d lane(s) still inside a store call after the interrupt",
                        name, stuck)

    def _progress(self, name, stats, elapsed):
        kvs = sum(s.kvs for s in stats)
        ok_kvs = sum(s.successful_kvs for s in stats)
        LOG.info("progress phase=%s elapsed=%.1fs requests=%d kvs=%d successful_kvs=%d "
                 "failed_kvs=%d MiB/s=%.2f", name, elapsed, sum(s.requests for s in stats), kvs,
                 ok_kvs, kvs - ok_kvs, ok_kvs * self.args.value_size / MiB / max(elapsed, 1e-9))

    def _record(self, result):
        self.results.append(result)
        log_block(result.record(), header=f"=== phase {result.name} ===")

    # -- phase gaps --

    def phase_gap(self, next_phase):
        mode = self.args.phase_gap_mode
        if mode == "none":
            return
        if mode == "sleep":
            LOG.info("phase gap before %s: sleeping %.3fs", next_phase, self.args.phase_gap_sec)
            time.sleep(self.args.phase_gap_sec)
        elif mode == "file":
            self._gap_file(next_phase)
        else:
            self._gap_manual(next_phase)

    def _gap_file(self, next_phase):
        path = self.args.phase_gap_file
        timeout = self.args.phase_gap_timeout_sec
        LOG.info("phase gap before %s: waiting up to %.0fs for %s to exist", next_phase,
                 timeout, path)
        deadline = time.monotonic() + timeout
        while not os.path.exists(path):
            if time.monotonic() >= deadline:
                raise RuntimeError(f"phase gap before {next_phase}: {path} did not appear "
                                   f"within {timeout}s")
            time.sleep(0.1)

    def _gap_manual(self, next_phase):
        timeout = self.args.phase_gap_timeout_sec
        LOG.info("phase gap before %s: press Enter to continue (timeout %.0fs)", next_phase,
                 timeout)
        try:
            ready, _, _ = select.select([sys.stdin], [], [], timeout)
        except (OSError, ValueError, TypeError):  # no selectable stdin
            ready = [sys.stdin]
        if not ready:
            raise RuntimeError(f"phase gap before {next_phase}: no Enter within {timeout}s")
        try:
            line = sys.stdin.readline()
        except (OSError, ValueError):
            line = ""
        if not line:
            LOG.warning("phase gap before %s: stdin is closed or unreadable, continuing",
                        next_phase)

    # -- building blocks --

    def check_existing(self, name, start, count, time_based):
        """Before write phase `name`: an ExistingKeys over [start, start+count). Count-based
        phases check every id now (untimed); time-based ones, whose ids are not known ahead,
        check each chunk of EXIST_CHECK_CHUNK ids when a lane first reserves from it (outside
        any request's latency, inside the phase's duration: one batch_is_exist per chunk)."""
        existing = ExistingKeys(self.session, start, start + count)
        if not time_based:
            existing.check_through(start + count)
            LOG.info("%s: checked %d keys before writing (%.3fs, untimed): %d already stored",
                     name, count, existing.seconds, len(existing.found))
        return existing

    def warn_existing(self, result):
        """The loud warning of a write phase that found keys already stored."""
        n = result.counts["existing_keys"]
        if not n:
            return
        a = self.args
        LOG.warning(
            "!!! phase %s: %d of %d puts found their key already stored (prefix %r, key size "
            "%d, ids from %d): put keeps the first value, so these moved NO bytes; their bytes "
            "are not counted and the run is NOT ok (exit %d). Avoid it with a distinct "
            "--key-prefix or --object-id-start, or remove the keys first (e.g. "
            "store.remove_by_regex('^%s'))", result.name, n, result.counts["kvs"],
            a.key_prefix, a.key_size, a.object_id_start, EXIT_EXISTING_KEYS,
            a.key_prefix.replace(".", "\\."))

    def _note_fresh(self, ids, existing):
        fresh = [i for i in ids if i not in existing]
        if fresh:
            with self._fresh_lock:
                self.fresh_written.extend(fresh)

    def write_phase(self, name, count, strict, mark_prepared, runtime=0):
        """Writes up to `count` fresh ids. strict: anything short of all of them raises."""
        existing = self.check_existing(name, self.next_id, count, runtime > 0)
        alloc = IdAllocator(self.next_id, count)
        batch = self.args.batch_size
        deadline = time.perf_counter() + runtime if runtime > 0 else None

        def worker(lane, st, stop):
            while not stop.is_set():
                if deadline is not None and time.perf_counter() >= deadline:
                    return
                ids = alloc.reserve(batch)
                if ids is None:
                    st.dataset_exhausted = deadline is not None
                    return
                existing.check_through(ids.stop)
                written = self.session.write(lane, ids, st, existing)
                self._note_fresh(written, existing)
                if mark_prepared and written:
                    with self._prepared_lock:
                        self.prepared.extend(written)

        def finalize(result):
            if deadline is None and result.counts["successful_kvs"] < count:
                result.dataset_exhausted = True

        try:
            result = self.run_phase(name, worker, finalize)
        finally:
            self.next_id = alloc.next
        self.warn_existing(result)
        if strict and (result.counts["failed_kvs"] or result.counts["successful_kvs"] < count):
            raise RuntimeError(
                f"{name}: wrote {result.counts['successful_kvs']} of {count} objects "
                f"(errors {stringify_error_counts(result.errors)})")
        return result

    def read_phase(self, name, ids, verify, runtime):
        """Reads `ids` in order through one shared cursor: one pass, or until the runtime ends."""
        cursor = SharedCursor(list(ids), wrap=runtime > 0)
        batch = self.args.batch_size
        deadline = time.perf_counter() + runtime if runtime > 0 else None

        def worker(lane, st, stop):
            while not stop.is_set():
                if deadline is not None and time.perf_counter() >= deadline:
                    return
                chunk = cursor.take(batch)
                if not chunk:
                    return
                self.session.read(lane, chunk, st, verify)

        return self.run_phase(name, worker)

    def prepare(self):
        """The readable dataset: written by a strict "prepare_write" (then a gap), or with
        --prepare-mode none assumed written by an earlier run."""
        start = self.args.object_id_start
        count = self.prepare_count
        if self.args.prepare_mode == "none":
            LOG.info("prepare-mode none: using objects %d..%d written by an earlier run",
                     start, start + count - 1)
            self.prepared = list(range(start, start + count))
            self.next_id = start + count
            return
        self.write_phase("prepare_write", count, strict=True, mark_prepared=True)
        self.phase_gap("main_run")

    def _use_zcopy(self):
        if self.args.io_api != "zcopy" or self.session.zcopy is not None:
            return
        self.session.zcopy = ZcopyBufferPool(
            self.module, self.session.store, self.args.value_size, self.args.batch_size,
            self.lane_count, self.args.local_buffer_size)

    # -- scenarios --

    def scenario_verify_write(self):
        self._use_zcopy()
        self.write_phase("write_verify", self.write_count, strict=True, mark_prepared=True)
        self.phase_gap("verify_read")
        self.read_phase("verify_read", self.prepared, verify=True, runtime=0)
        self.remove_written()

    def scenario_fill(self):
        self._use_zcopy()
        self.write_phase("fill_write", self.write_count, strict=False, mark_prepared=False)

    def scenario_write_perf(self):
        self._use_zcopy()
        self.write_phase("write_perf", self.write_count, strict=False, mark_prepared=False,
                         runtime=self.args.runtime)
        self.remove_written()

    def remove_written(self):
        """Untimed, after the phases of verify_write/write_perf: removes the objects this run
        wrote (never keys that were stored before it), unless --keep-objects. A failure to
        remove is a warning: the run's figures stand; a later run would count those keys."""
        if self.args.keep_objects:
            LOG.info("--keep-objects: the %d objects written stay in the store",
                     len(self.fresh_written))
            return
        t0 = time.perf_counter()
        removed, failed = self.session.remove_ids(self.fresh_written)
        self.cleanup = {"removed": removed, "failed": failed}
        LOG.info("cleanup: removed the %d objects this run wrote (%.3fs, untimed; "
                 "--keep-objects keeps them)", removed, time.perf_counter() - t0)
        if failed:
            LOG.warning("cleanup: %d of the objects this run wrote could not be removed",
                        failed)

    def scenario_read_perf(self):
        self._use_zcopy()
        self.prepare()
        self.read_phase("read_perf", self.prepared, verify=self.args.verify,
                        runtime=self.args.runtime)

    def scenario_mixed_rw(self):
        self._use_zcopy()
        self.prepare()
        readable = list(self.prepared)
        existing = self.check_existing("mixed_rw", self.next_id, self.write_count, True)
        writes = IdAllocator(self.next_id, self.write_count)
        args = self.args
        deadline = time.perf_counter() + args.runtime

        def worker(lane, st, stop):
            rng = random.Random(args.rand_seed + lane)
            while not stop.is_set() and time.perf_counter() < deadline:
                if readable and rng.randrange(100) < args.rwmixread:
                    chunk = rng.sample(readable, min(args.batch_size, len(readable)))
                    self.session.read(lane, chunk, st, args.verify)
                    continue
                ids = writes.reserve(args.batch_size)
                if ids is None:  # the write budget is spent: the phase ends
                    st.dataset_exhausted = True
                    stop.set()
                    return
                existing.check_through(ids.stop)
                self._note_fresh(self.session.write(lane, ids, st, existing), existing)

        try:
            result = self.run_phase("mixed_rw", worker)
        finally:
            self.next_id = writes.next
        self.warn_existing(result)

    def _metadata_phase(self, name, plan):
        """Runs plan(lane) -> [(op, object_id), ...] on every lane; journals the records."""
        per_lane = [[] for _ in range(self.lane_count)]

        def worker(lane, st, stop):
            model = MetadataLaneModel()
            for op_id, (op, object_id) in enumerate(plan(lane)):
                if stop.is_set():
                    return
                per_lane[lane].append(self.session.metadata_operation(
                    lane, op, object_id, model, op_id, st))

        def finalize(result):
            if result.errors.get(OBJECT_HAS_LEASE):
                LOG.warning("%s: remove refused with %d (OBJECT_HAS_LEASE): exist/get grant a "
                            "read lease; run mooncake_master with --default_kv_lease_ttl=0 for "
                            "the metadata scenarios", name, OBJECT_HAS_LEASE)

        try:
            return self.run_phase(name, worker, finalize)
        finally:
            self._journal(per_lane)

    def _journal(self, per_lane):
        mode = self.args.journal
        if mode == "none":
            return
        for records in per_lane:
            self.journal.extend(r for r in records if mode == "all" or not r["ok"])

    def scenario_metadata_smoke(self):
        start = self.args.object_id_start
        nr = self.args.nr_objects

        def plan(lane):
            if lane >= nr:
                return []
            return [(op, start + lane) for op in ("put", "exist", "get", "remove", "exist")]

        result = self._metadata_phase("metadata_smoke", plan)
        if result.counts["failed_kvs"]:
            raise RuntimeError(f"metadata_smoke: {result.counts['failed_kvs']} of "
                               f"{result.counts['kvs']} operations failed "
                               f"(errors {stringify_error_counts(result.errors)})")

    def scenario_mixed_metadata(self):
        a = self.args
        pcts = (a.put_pct, a.get_pct, a.exist_pct, a.remove_pct)

        def plan(lane):
            owned = range(a.object_id_start + lane, a.object_id_start + a.nr_objects,
                          self.lane_count)
            return list(zip(choose_metadata_operations(pcts, a.rand_seed, lane, len(owned)),
                            owned))

        self._metadata_phase("mixed_metadata", plan)

    def scenario_remove_perf(self):
        self._use_zcopy()
        self.prepare()
        ids = list(self.prepared)
        lanes = self.lane_count

        def worker(lane, st, stop):
            for index in range(lane, len(ids), lanes):
                if stop.is_set():
                    return
                self.session.remove(lane, ids[index], st)

        self.run_phase("remove_perf", worker)

    def scenario_replay(self):
        records = read_replay(self.args.replay_file)
        by_lane = [[] for _ in range(self.lane_count)]
        ignored = 0
        for rec in records:
            if rec["lane"] < self.lane_count:
                by_lane[rec["lane"]].append((rec["op"], rec["object_id"]))
            else:
                ignored += 1
        LOG.info("replay: %d records from %s (%d ignored: lane >= %d lanes)", len(records),
                 self.args.replay_file, ignored, self.lane_count)
        self._metadata_phase("replay", lambda lane: by_lane[lane])

    # -- the run --

    def open_store(self):
        a = self.args
        self.module = load_store_module()
        store = self.module.MooncakeDistributedStore()
        rc = store.setup(a.local_hostname, a.metadata_server, a.global_segment_size,
                         a.local_buffer_size, a.protocol, a.device_name, a.master_server)
        if rc != 0:
            raise RuntimeError(f"store.setup(local_hostname={a.local_hostname!r}, "
                               f"metadata_server={a.metadata_server!r}, master_server="
                               f"{a.master_server!r}, protocol={a.protocol!r}) returned {rc}")
        self.session = StoreSession(store, a, self.module, self.lane_count)

    def close_store(self):
        """Releases the zero-copy buffer and closes the store. Never raises: a failure is
        logged and, when the run had no error yet, becomes its error."""
        session, self.session = self.session, None
        if session is None:
            return
        steps = []
        if session.zcopy is not None:
            steps.append(("zero-copy buffer release", session.zcopy.close))
        close = getattr(session.store, "close", None) or getattr(session.store, "tearDownAll",
                                                                 None)
        if close is not None:
            steps.append(("store close", close))
        for what, step in steps:
            try:
                step()
            except Exception as e:  # noqa: B902 - reported, the other steps still run
                LOG.error("%s failed: %s: %s", what, type(e).__name__, e)
                self.error = self.error or f"{what} failed: {type(e).__name__}: {e}"

    def run(self):
        """Runs the scenario, prints the overall block, writes summary and journal; returns the
        exit code."""
        a = self.args
        LOG.info("scenario=%s io_api=%s numjobs=%d iodepth=%d lanes=%d batch_size=%d "
                 "value_size=%d nr_objects=%d prepare_objects=%d write_objects=%d "
                 "memory_replica_num=%d nof_replica_num=%d verify=%s", a.scenario, a.io_api,
                 a.numjobs, a.iodepth, self.lane_count, a.batch_size, a.value_size, a.nr_objects,
                 self.prepare_count, self.write_count, a.memory_replica_num, a.nof_replica_num,
                 a.verify)
        try:
            self.open_store()
            try:
                getattr(self, "scenario_" + a.scenario)()
            finally:
                self.close_store()
        except KeyboardInterrupt:
            self.interrupted = True
            self.error = "KeyboardInterrupt: interrupted"
            LOG.error("interrupted")
        except Exception as e:  # noqa: B902 - every failure becomes exit 1 with its message
            self.error = f"{type(e).__name__}: {e}"
            LOG.debug("run failed", exc_info=True)
        overall = overall_record(self.results)
        log_block(overall, header="=== overall summary ===")
        code = self.exit_code(overall)
        if self.error:
            LOG.error("run failed: %s", self.error)
        try:
            self.write_outputs(overall, code)
        except OSError as e:
            LOG.error("cannot write the results: %s", e)
            code = code or EXIT_ERROR
        LOG.info("exit code %d", code)
        return code

    def exit_code(self, overall):
        if self.interrupted:
            return EXIT_INTERRUPTED
        if self.error:
            return EXIT_ERROR
        if overall["verify_failures"]:
            return EXIT_VERIFY_FAILURE
        if self.args.verify and any("read" in r.name and r.counts["misses"]
                                    for r in self.results):
            return EXIT_VERIFY_MISS
        if self.args.scenario in EXIT22_SCENARIOS and overall["failed_kvs"]:
            return EXIT_METADATA_FAILURE
        if overall["existing_keys"]:
            return EXIT_EXISTING_KEYS
        if overall["failed_kvs"] and self.args.scenario != "fill":  # fill ends at a full pool
            return EXIT_FAILED_KVS
        return EXIT_OK

    def summary(self, overall, code):
        ok = (self.error is None and overall["failed_kvs"] == 0
              and overall["verify_failures"] == 0 and overall["existing_keys"] == 0
              and code == EXIT_OK)
        return {"schema_version": SCHEMA_VERSION, "scenario": self.args.scenario, "ok": ok,
                "phases": {r.name: r.record() for r in self.results},
                "phase_order": [r.name for r in self.results], "overall": overall,
                "journal_records": len(self.journal), "error": self.error or (
                    f"write phases found {overall['existing_keys']} keys already stored"
                    if overall["existing_keys"] else None), "exit_code": code,
                "config": config_record(self.args), "cleanup": self.cleanup}

    def write_outputs(self, overall, code):
        a = self.args
        summary_path = a.summary_json or (os.path.join(a.output_dir, "summary.json")
                                          if a.output_dir else "")
        if a.output_dir:
            os.makedirs(a.output_dir, exist_ok=True)
            if a.scenario in JOURNALED_SCENARIOS and a.journal != "none":
                self.journal.sort(key=lambda r: (r["invoke_ns"], r["lane"], r["op_id"]))
                path = os.path.join(a.output_dir, "journal.jsonl")
                write_jsonl(path, self.journal)
                LOG.info("journal: %d records in %s", len(self.journal), path)
        summary = self.summary(overall, code)
        if summary_path:
            write_json_atomic(summary_path, summary)
            LOG.info("summary: %s", summary_path)
            csv_path = csv_path_for(summary_path)
            write_csv(csv_path, summary)
            LOG.info("csv: %s", csv_path)
        if a.plot:
            write_plot(a.plot, summary)
            LOG.info("plot: %s", a.plot)


def config_record(args):
    """The effective command line, for the summary's "config"."""
    skip = {"aggregate"}
    return {k: v for k, v in sorted(vars(args).items()) if k not in skip}


# ---- CSV and plot ------------------------------------------------------------------------------


def csv_path_for(summary_path):
    """The CSV written next to a summary JSON: same path, .csv instead of .json (or added)."""
    root, ext = os.path.splitext(summary_path)
    return (root if ext.lower() == ".json" else summary_path) + ".csv"


def write_csv(path, summary):
    """One row per phase of `summary` (in phase order), CSV_FIELDS as columns, written via
    `path`.tmp and renamed; the figures are the JSON's, unrounded."""
    import csv
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for name in summary.get("phase_order") or sorted(summary["phases"]):
            rec = summary["phases"][name]
            w.writerow([name] + [repr(rec.get(k)) if isinstance(rec.get(k), float)
                                 else rec.get(k, "") for k in CSV_FIELDS[1:]])
    os.replace(tmp, path)


def check_plot_path(path):
    """Raises RuntimeError unless a PNG can be written at path: checked before the run, so a
    finished run never ends in a plot error after its summary said it succeeded."""
    if os.path.isdir(path):
        raise RuntimeError(f"--plot {path}: is a directory; give a file name (e.g. {path}/run.png)")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise RuntimeError(f"--plot {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise RuntimeError(f"--plot {path}: directory {parent} is not writable")


def require_matplotlib():
    """Raises RuntimeError (naming the Debian package) unless matplotlib imports."""
    try:
        importlib.import_module("matplotlib")
    except ImportError as e:
        raise RuntimeError(f"--plot needs matplotlib ({e}): install it, e.g. "
                           f"`apt-get install python3-matplotlib`") from None


def write_plot(path, summary):
    """A PNG of `summary`: MiB/s per phase (with each job's when there are several) and the
    latency percentiles the JSON has (p50/p95/p99, ms) per phase. matplotlib, Agg backend."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [n for n in (summary.get("phase_order") or sorted(summary["phases"]))
             if n in summary["phases"]]
    recs = [summary["phases"][n] for n in names]
    has_jobs = any(r.get("jobs") for r in recs)
    fig, axes = plt.subplots(1, 3 if has_jobs else 2, figsize=(15 if has_jobs else 11, 4.5))
    title = f"store_kv_bench {summary.get('scenario')}"
    cfg = summary.get("config") or {}
    if cfg:
        title += (f": value {cfg.get('value_size')} B, {cfg.get('numjobs')} jobs x "
                  f"{cfg.get('iodepth')} iodepth, batch {cfg.get('batch_size')}, "
                  f"{cfg.get('io_api')}")
    if not summary.get("ok"):
        title += "  [NOT OK]"
    fig.suptitle(title)
    ax = axes[0]
    bars = ax.bar(names, [r["MiB_per_sec"] for r in recs], color="tab:blue")
    for bar, r in zip(bars, recs):
        note = f"{r['MiB_per_sec']:.0f}"
        if r.get("existing_keys"):
            note += f"\n{r['existing_keys']} existing!"
        ax.annotate(note, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                    ha="center", va="bottom", fontsize=8)
    ax.set_ylabel("MiB/s")
    ax.set_title("throughput per phase")
    ax = axes[1]
    pcts = (("lat_p50_ms", "p50"), ("lat_p95_ms", "p95"), ("lat_p99_ms", "p99"))
    width = 0.8 / len(pcts)
    for k, (field, label) in enumerate(pcts):
        ax.bar([i + (k - 1) * width for i in range(len(names))], [r[field] for r in recs],
               width, label=label)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names)
    ax.set_ylabel("latency per request, ms")
    ax.set_title("latency percentiles")
    ax.legend()
    if has_jobs:
        ax = axes[2]
        njobs = max(len(r.get("jobs") or ()) for r in recs)
        width = 0.8 / max(njobs, 1)
        for j in range(njobs):
            ax.bar([i + (j - (njobs - 1) / 2) * width for i in range(len(names))],
                   [(r.get("jobs") or [])[j]["MiB_per_sec"] if j < len(r.get("jobs") or [])
                    else 0.0 for r in recs], width, label=f"job {j}")
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names)
        ax.set_ylabel("MiB/s")
        ax.set_title("throughput per job")
        if njobs <= 16:
            ax.legend(fontsize=7)
    fig.tight_layout()
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---- console output ---------------------------------------------------------------------------


def log_block(s, header):
    LOG.info("%s", header)
    LOG.info("requests=%d successful_requests=%d failed_requests=%d kvs=%d successful_kvs=%d "
             "failed_kvs=%d", s["requests"], s["successful_requests"], s["failed_requests"],
             s["kvs"], s["successful_kvs"], s["failed_kvs"])
    LOG.info("existing_keys=%d misses=%d verify_failures=%d bytes=%d duration=%.3fs "
             "req/s=%.2f kv/s=%.2f MiB/s=%.2f", s.get("existing_keys", 0), s["misses"],
             s["verify_failures"], s["bytes"], s["duration_sec"], s["req_per_sec"],
             s["kv_per_sec"], s["MiB_per_sec"])
    if s.get("existing_keys"):
        LOG.warning("existing_keys=%d: puts that found their key already stored and moved no "
                    "bytes (not counted in bytes or MiB/s)", s["existing_keys"])
    LOG.info("lat_mean=%.3fms lat_p50=%.3fms lat_p95=%.3fms lat_p99=%.3fms dataset_exhausted=%s",
             s["lat_mean_ms"], s["lat_p50_ms"], s["lat_p95_ms"], s["lat_p99_ms"],
             s["dataset_exhausted"])
    if s["error_counts"]:
        LOG.info("errors=%s", json.dumps(s["error_counts"], sort_keys=True))
    if s.get("lane_errors"):
        LOG.error("lane_errors=%s", json.dumps(s["lane_errors"], sort_keys=True))


def configure_logging(level):
    """Console lines on stderr: "%(asctime)s %(levelname)s %(name)s %(message)s"."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s",
                                           datefmt="%Y-%m-%d %H:%M:%S"))
    handler.kvbench = True
    for old in [h for h in LOG.handlers if getattr(h, "kvbench", False)]:
        LOG.removeHandler(old)
    LOG.addHandler(handler)
    LOG.setLevel(getattr(logging, level.upper()))
    LOG.propagate = False


# ---- --aggregate ------------------------------------------------------------------------------


def _merge_records(records, spans):
    """Combines summary records of one phase from several processes. Duration: the union of
    `spans` (wall-clock) when every record has one, else the longest duration. Latency: merged
    raw samples when every record has them, else the sample-weighted mean and the largest
    percentiles (an upper bound), flagged by "latency_source"."""
    counts = collections.Counter()
    errors = collections.Counter()
    for r in records:
        counts.update({f: int(r.get(f, 0)) for f in COUNT_FIELDS})
        errors.update({k: int(v) for k, v in (r.get("error_counts") or {}).items()})
    if spans is not None:
        duration = union_length(spans)
    else:
        duration = max((float(r.get("duration_sec", 0.0)) for r in records), default=0.0)
    have_samples = all("latency_samples_ms" in r for r in records)
    samples = [x / 1e3 for r in records for x in r.get("latency_samples_ms", ())]
    s = summarize(counts, samples if have_samples else [], duration,
                  any(r.get("dataset_exhausted") for r in records), errors)
    if have_samples:
        s["latency_source"] = "samples"
    else:
        weight = sum(int(r.get("latency_samples", 0)) for r in records)
        if weight:
            s["lat_mean_ms"] = sum(float(r.get("lat_mean_ms", 0.0)) * int(
                r.get("latency_samples", 0)) for r in records) / weight
        for p in ("lat_p50_ms", "lat_p95_ms", "lat_p99_ms"):
            s[p] = max((float(r.get(p, 0.0)) for r in records), default=0.0)
        s["latency_samples"] = weight
        s["latency_source"] = "max_of_processes"
    s["start_time"] = min((sp[0] for sp in spans), default=None) if spans else None
    s["end_time"] = max((sp[1] for sp in spans), default=None) if spans else None
    s["duration_source"] = "union_of_spans" if spans is not None else "max_of_processes"
    s["lane_errors"] = [e for r in records for e in r.get("lane_errors") or ()]
    return s


def _spans(records):
    """The (start_time, end_time) of every record, or None unless all of them have one."""
    spans = []
    for r in records:
        start, end = r.get("start_time"), r.get("end_time")
        if not (isinstance(start, (int, float)) and isinstance(end, (int, float))
                and end >= start):
            return None
        spans.append((float(start), float(end)))
    return spans


def aggregate_summaries(summaries, sources=None):
    """One summary (same schema) from the summaries of processes that ran side by side: counts
    and bytes summed per phase name, rates over the union of the phases' wall-clock spans,
    latency percentiles from the merged raw samples when present."""
    sources = sources or [f"#{i}" for i in range(len(summaries))]
    for src, s in zip(sources, summaries):
        if not isinstance(s, dict) or s.get("schema_version") != SCHEMA_VERSION \
                or not isinstance(s.get("phases"), dict):
            raise ValueError(f"{src}: not a store_kv_bench summary (schema_version "
                             f"{SCHEMA_VERSION} with phases)")
    names = []
    for s in summaries:  # "phase_order": the JSON's phases are sorted by name
        order = s.get("phase_order") or sorted(s["phases"])
        names.extend(n for n in order + sorted(s["phases"]) if n in s["phases"]
                     and n not in names)
    phases = {}
    for name in names:
        records = [s["phases"][name] for s in summaries if name in s["phases"]]
        phases[name] = _merge_records(records, _spans(records))
    # overall: every phase record of every process, as one population
    records = [r for s in summaries for r in s["phases"].values()]
    spans = _spans(records)
    overall = _merge_records(records, spans)
    if spans is None:  # unknown overlap: each process ran its phases one after another
        dur = sum(p["duration_sec"] for p in phases.values())
        overall["duration_sec"] = dur
        overall["req_per_sec"] = overall["requests"] / dur if dur > 0 else 0.0
        overall["kv_per_sec"] = overall["kvs"] / dur if dur > 0 else 0.0
        overall["MiB_per_sec"] = overall["bytes"] / MiB / dur if dur > 0 else 0.0
    overall.pop("latency_samples_ms", None)
    scenarios = sorted({str(s.get("scenario")) for s in summaries})
    ok = (all(s.get("ok") for s in summaries) and overall["failed_kvs"] == 0
          and overall["verify_failures"] == 0 and overall["existing_keys"] == 0)
    return {"schema_version": SCHEMA_VERSION, "scenario": ",".join(scenarios), "ok": ok,
            "phases": phases, "phase_order": names, "overall": overall,
            "journal_records": sum(int(s.get("journal_records", 0)) for s in summaries),
            "error": None if ok else "; ".join(
                f"{src}: {s.get('error') or 'not ok'}"
                for src, s in zip(sources, summaries) if not s.get("ok")) or "not ok",
            "aggregated_from": [{"path": src, "scenario": s.get("scenario"), "ok": s.get("ok")}
                                for src, s in zip(sources, summaries)]}


def run_aggregate(args):
    """--aggregate: reads the summaries, prints the blocks, writes --summary-json; exit 0 when
    the aggregate is ok, 1 when an input is unreadable or any process was not ok."""
    summaries = []
    try:
        for path in args.aggregate:
            with open(path, encoding="utf-8") as f:
                summaries.append(json.load(f))
        result = aggregate_summaries(summaries, args.aggregate)
    except (OSError, ValueError) as e:
        LOG.error("aggregate: %s", e)
        return EXIT_ERROR
    LOG.info("aggregate of %d summaries: %s", len(summaries), " ".join(args.aggregate))
    for name, s in result["phases"].items():
        log_block(s, header=f"=== phase {name} ===")
    log_block(result["overall"], header="=== overall summary ===")
    if not result["ok"]:
        LOG.error("aggregate not ok: %s", result["error"])
    path = args.summary_json or (os.path.join(args.output_dir, "summary.json")
                                 if args.output_dir else "")
    if path:
        try:
            write_json_atomic(path, result)
        except OSError as e:
            LOG.error("cannot write %s: %s", path, e)
            return EXIT_ERROR
        LOG.info("summary: %s", path)
        try:
            write_csv(csv_path_for(path), result)
        except OSError as e:
            LOG.error("cannot write %s: %s", csv_path_for(path), e)
            return EXIT_ERROR
    if args.plot:
        write_plot(args.plot, result)
        LOG.info("plot: %s", args.plot)
    return EXIT_OK if result["ok"] else EXIT_ERROR


# ---- command line -----------------------------------------------------------------------------

EPILOG = """\
scenarios (phase names in quotes):
  verify_write    strict write ("write_verify"), then read all back verified ("verify_read")
  fill            write --write-objects (else --nr-objects) objects ("fill_write")
  write_perf      writes: count based, or until --runtime ends ("write_perf")
  read_perf       "prepare_write", then sequential reads: one pass or for --runtime ("read_perf")
  mixed_rw        "prepare_write", then --rwmixread % random reads, else new writes ("mixed_rw")
  metadata_smoke  per lane put/exist/get/remove/exist of one object ("metadata_smoke")
  mixed_metadata  one put/get/exist/remove per object, by --*-pct ("mixed_metadata")
  remove_perf     "prepare_write", then remove every object ("remove_perf")
  replay          re-run the operations of a journal.jsonl (--replay-file) ("replay")

exit codes: 0 ok; 1 error (setup, strict write, smoke failure, a lane died, bad replay file);
  2 bad command line; 20 verification failures; 21 --verify and misses in a read phase;
  22 failed operations in metadata_smoke/mixed_metadata/remove_perf/replay; 23 a write phase
  found keys already stored; 24 failed KVs (failed puts or gets, read misses) in any other
  scenario (upstream exits 0 there; the guide counts a run with failed KVs as failed);
  130 interrupted. The summary's "ok" is true exactly when the exit code is 0, but for fill,
  which stops when the pool is full (failed puts, "dataset_exhausted": true, "ok" false, exit 0).

work not done is never success: a put of a key that already exists returns 0 but keeps the
  old value (as upstream) and moves no bytes. Before writing (write_verify, fill_write,
  write_perf, prepare_write, mixed_rw's writes) a batch_is_exist outside every request's
  latency finds the keys already stored (count-based phases: all ids before the phase starts;
  time-based ones: each chunk of 1024 ids when first reached); the puts that hit them are
  counted as existing_keys (console, JSON, CSV), left out of bytes and MiB/s, warned about on
  stderr, and make "ok" false and the exit code 23.
  Avoid them with a distinct --key-prefix or --object-id-start, or remove the keys first.
  verify_write and write_perf remove the objects they wrote when done (untimed; never keys that
  were there before), so the guide's verify_write, write_perf, read_perf sequence writes fresh
  keys in every phase; --keep-objects keeps them (fill always keeps what it wrote).

keys: the --key-prefix, padded with "_" to --key-size - 16 characters, then the object id as 16
  digits. A prefix is never cut: without --key-size the size is max(20, len(prefix) + 16); an
  explicit --key-size too small for the prefix, a prefix ending in "_" and ids above 10^16 - 1
  are refused (exit 2), so distinct prefixes never share keys.

outputs: --summary-json FILE.json also writes FILE.csv (one row per phase, the JSON's figures);
  --plot FILE.png draws throughput per phase (and per job) and p50/p95/p99 latency (needs
  matplotlib: apt-get install python3-matplotlib; checked before the run starts).

environment: MOONCAKE_STORE_MODULE picks the store module (default mooncake.store).
aggregate: store_kv_bench.py --aggregate p0.json p1.json --summary-json all.json
"""


def build_parser():
    p = argparse.ArgumentParser(
        prog="store_kv_bench.py", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Mooncake Store KV benchmark: puts, gets and metadata operations through "
                    "the Python store API from numjobs x iodepth threads sharing one store.",
        epilog=EPILOG)
    add = p.add_argument
    add("--scenario", choices=SCENARIOS, help="workload to run (required unless --aggregate)")
    g = p.add_argument_group("cluster")
    g.add_argument("--local-hostname", default="127.0.0.1:50071",
                   help="this store client's address; unique per process (default %(default)s)")
    g.add_argument("--metadata-server", default="http://127.0.0.1:8080/metadata",
                   help="transfer-engine metadata URL or P2PHANDSHAKE (default %(default)s)")
    g.add_argument("--master-server", default="127.0.0.1:50051",
                   help="mooncake_master address (default %(default)s)")
    g.add_argument("--protocol", default="tcp", help="transfer protocol (default %(default)s)")
    g.add_argument("--device-name", default="", help="rdma device override (default: automatic)")
    g.add_argument("--global-segment-size", type=_size_arg, default=64 * MiB,
                   help="bytes this process contributes to the store (default 64 MiB)")
    g.add_argument("--local-buffer-size", type=_size_arg, default=32 * MiB,
                   help="bytes of local transfer buffer (default 32 MiB)")
    g.add_argument("--tenant-id", default="default", help="only 'default' is supported")
    g.add_argument("--memory-replica-num", type=int, default=1,
                   help="memory replicas per object (default %(default)s)")
    g.add_argument("--nof-replica-num", type=int, default=0,
                   help="NoF replicas per object (default %(default)s)")
    g = p.add_argument_group("workload")
    g.add_argument("--io-api", choices=("plain", "zcopy"), default="plain",
                   help="plain: put/get with bytes; zcopy: put_from/get_into on a registered "
                        "buffer (default %(default)s)")
    g.add_argument("--numjobs", type=int, default=1, help="jobs (default %(default)s)")
    g.add_argument("--iodepth", type=int, default=1,
                   help="lanes per job; lanes = numjobs x iodepth threads (default %(default)s)")
    g.add_argument("--batch-size", type=int, default=1,
                   help="KV objects per request (default %(default)s)")
    g.add_argument("--runtime", type=float, default=0,
                   help="seconds; 0 = object-count based (required by mixed_rw)")
    g.add_argument("--nr-objects", type=int, default=128,
                   help="objects of a count-based phase (default %(default)s)")
    g.add_argument("--write-objects", type=int, default=0,
                   help="ids available to writes (default: --nr-objects)")
    g.add_argument("--prepare-objects", type=int, default=0,
                   help="objects prepared for reads (default: --nr-objects)")
    g.add_argument("--object-id-start", type=int, default=0,
                   help="first object id; give concurrent processes distinct ranges")
    g.add_argument("--key-prefix", default="kvbench", help="key prefix (default %(default)s)")
    g.add_argument("--key-size", type=int, default=None,
                   help="key length: the prefix padded with '_' + a 16-digit id; a size that "
                        "would cut --key-prefix is refused (default: max(20, len(prefix)+16))")
    g.add_argument("--value-size", type=_size_arg, default=4096,
                   help="value bytes; writes need a multiple of 512 (default %(default)s)")
    g.add_argument("--rand-seed", type=int, default=1,
                   help="seed; lane L uses seed+L (default %(default)s)")
    g.add_argument("--rwmixread", type=int, default=70,
                   help="mixed_rw: percent of requests that read (default %(default)s)")
    g.add_argument("--put-pct", type=int, default=40, help="mixed_metadata put %% (40)")
    g.add_argument("--get-pct", type=int, default=40, help="mixed_metadata get %% (40)")
    g.add_argument("--exist-pct", type=int, default=10, help="mixed_metadata exist %% (10)")
    g.add_argument("--remove-pct", type=int, default=10, help="mixed_metadata remove %% (10)")
    g.add_argument("--keep-objects", action="store_true",
                   help="verify_write/write_perf: keep the objects written (default: remove "
                        "them when done, untimed)")
    g.add_argument("--prepare-mode", choices=("auto", "none", "write"), default="auto",
                   help="read_perf/mixed_rw/remove_perf dataset: auto|write = write it first; "
                        "none = use the objects an earlier run wrote (default %(default)s)")
    g = p.add_argument_group("payload and verification")
    g.add_argument("--pattern", default="",
                   help="payload: 0x-hex bytes or text, repeated to value-size (same for every "
                        "object); empty = each object is value-size bytes of (id & 0xFF)")
    g.add_argument("--verify", action="store_true",
                   help="check the bytes read back (needs --pattern or --payload-mode unique)")
    g.add_argument("--payload-mode", choices=("auto", "unique"), default="auto",
                   help="auto: as above; unique: bytes derived from each object's key and id, "
                        "so verification catches key mix-ups (costs payload generation time)")
    g = p.add_argument_group("phase gaps (before verify_read / main_run)")
    g.add_argument("--phase-gap-mode", choices=("none", "sleep", "manual", "file"),
                   default="none", help="none|sleep|manual (Enter)|file (wait for it to exist)")
    g.add_argument("--phase-gap-sec", type=float, default=0, help="sleep seconds")
    g.add_argument("--phase-gap-file", default="", help="file to wait for")
    g.add_argument("--phase-gap-timeout-sec", type=float, default=600,
                   help="longest manual/file wait (default %(default)s)")
    g = p.add_argument_group("output")
    g.add_argument("--latency-sample-rate", type=int, default=100,
                   help="time-based runs keep every Nth latency per lane (default %(default)s)")
    g.add_argument("--output-dir", default="",
                   help="directory for summary.json and journal.jsonl")
    g.add_argument("--journal", choices=("none", "failures", "all"), default="failures",
                   help="metadata scenarios: which operations go to journal.jsonl")
    g.add_argument("--summary-json", default="", help="summary path (default "
                   "<output-dir>/summary.json); a .csv with one row per phase is written "
                   "beside it")
    g.add_argument("--plot", default="", metavar="FILE.png",
                   help="draw throughput per phase/job and latency percentiles (matplotlib)")
    g.add_argument("--replay-file", default="", help="journal.jsonl to replay")
    g.add_argument("--save-latency-samples", action="store_true",
                   help="store raw latency samples in the summary (for --aggregate)")
    g.add_argument("--progress-interval", type=float, default=5.0,
                   help="seconds between progress lines during a phase; 0 = none")
    g.add_argument("--log-level", default="INFO", type=str.upper,
                   choices=("DEBUG", "INFO", "WARNING", "ERROR"), help="console log level")
    g.add_argument("--aggregate", nargs="+", metavar="SUMMARY_JSON",
                   help="combine the summaries of processes that ran together, then exit")
    return p


def validate_args(args):
    """Raises ValueError with the first problem of the parsed command line."""
    a = args
    resolve_key_size(a)
    for name in ("numjobs", "iodepth", "batch_size", "value_size", "key_size", "nr_objects",
                 "latency_sample_rate"):
        if getattr(a, name) <= 0:
            raise ValueError(f"--{name.replace('_', '-')} must be > 0")
    for name in ("write_objects", "prepare_objects", "object_id_start", "runtime",
                 "memory_replica_num", "nof_replica_num", "global_segment_size",
                 "local_buffer_size", "progress_interval", "phase_gap_sec"):
        if getattr(a, name) < 0:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 0")
    if a.key_size < KEY_ID_DIGITS:
        raise ValueError(f"--key-size must be >= {KEY_ID_DIGITS}")
    check_key_prefix(a.key_prefix, a.key_size)
    last_id = a.object_id_start + max(a.nr_objects, a.write_objects, a.prepare_objects) * 2 - 1
    if last_id > MAX_OBJECT_ID:
        raise ValueError(f"--object-id-start {a.object_id_start}: object ids of this run reach "
                         f"{last_id}, more than the {KEY_ID_DIGITS} digits of a key")
    if a.pattern:
        parse_pattern(a.pattern)
    if a.verify and not a.pattern and a.payload_mode != "unique":
        raise ValueError("--verify requires --pattern (or --payload-mode unique)")
    if a.memory_replica_num == 0 and a.nof_replica_num == 0:
        raise ValueError("--memory-replica-num and --nof-replica-num cannot both be 0")
    if a.phase_gap_mode == "sleep" and a.phase_gap_sec <= 0:
        raise ValueError("--phase-gap-mode sleep needs --phase-gap-sec > 0")
    if a.phase_gap_mode == "file" and not a.phase_gap_file:
        raise ValueError("--phase-gap-mode file needs --phase-gap-file")
    if a.phase_gap_timeout_sec <= 0:
        raise ValueError("--phase-gap-timeout-sec must be > 0")
    if a.scenario == "mixed_rw" and a.runtime <= 0:
        raise ValueError("mixed_rw needs --runtime > 0")
    if a.scenario == "replay" and not a.replay_file:
        raise ValueError("replay needs --replay-file")
    if a.scenario != "read_perf" and a.value_size % WRITE_ALIGNMENT:
        raise ValueError(f"--value-size must be a multiple of {WRITE_ALIGNMENT} for "
                         f"{a.scenario}")
    if a.tenant_id != "default":
        raise ValueError("--tenant-id: only 'default' is supported")
    if not 0 <= a.rwmixread <= 100:
        raise ValueError("--rwmixread must be in 0..100")
    validate_op_percentages(a.put_pct, a.get_pct, a.exist_pct, a.remove_pct)


def main(argv=None):
    """Runs the command line; returns the exit code (2 for a bad command line via SystemExit)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    if args.aggregate:
        if args.plot:
            try:
                check_plot_path(args.plot)
                require_matplotlib()
            except RuntimeError as e:
                parser.error(str(e))
        return run_aggregate(args)
    if not args.scenario:
        parser.error("--scenario is required (unless --aggregate)")
    try:
        validate_args(args)
        if args.plot:
            check_plot_path(args.plot)
            require_matplotlib()
    except (ValueError, RuntimeError) as e:
        parser.error(str(e))
    return Benchmark(args).run()


if __name__ == "__main__":
    sys.exit(main())
