#!/usr/bin/env python3
"""trace_replay.py — replays Mooncake FAST'25 request traces through a real store.

Each trace line is one request: `timestamp` (ms), `input_length`, `output_length` (tokens) and
`hash_ids`, the ids of its 512-token prefix blocks (equal ids = the same reusable KV block). The
replay drives `mooncake.store.MooncakeDistributedStore` as a prefill node of a serving framework
would, request by request in timestamp order:

  1. lookup: `batch_is_exist` of all its blocks; the prefix hit is the leading run of present
     blocks (it stops at the first miss);
  2. load: `batch_get_into` of those blocks into registered memory, every block's bytes checked
     (a block that fails to load ends the hit there);
  3. store: `batch_put_from` of the blocks that were not present.

One key per block, `<run prefix>/<hash id>`; a block holds 512 x --kv-bytes-per-token bytes (the
paper's LLaMA3-70B is 320 KiB per block; the default here, 64 bytes per token = 32 KiB per block,
is scaled down for small machines). The bytes of a block are a pattern of its hash id and the run,
so every load is verified: a wrong byte is an error and the exit status is 1.

The cluster is either started by the tool (default: a mooncake_master and --holders
mooncake_client processes from --build-dir on loopback, their segments together being the pool
capacity asked for, with the offload tier --offload) or an existing one (--master host:port).
Several --lanes (processes, each its own store client) stand for prefill nodes; requests go to
lanes round-robin. Pacing: --speed 0 as fast as possible, 1 real time, k = k times faster.

Which tier served a hit: before the load, `batch_get_replica_desc` of the hit blocks (not timed)
says whether each block still has a memory replica (a get reads memory first, docs/offload.md) or
only disk replicas (LOCAL_DISK or DFS). The master's `master_fallback_reads_total` (reads served
from disk replicas, reported by clients on their 1 s ping) is given alongside as a cross-check.

Reported per workload and capacity: block hit rate and the trace's own maximum (an infinite cache
replayed with the same rules), prefill tokens saved, blocks and bytes served from memory and from
the offload tier, lookup+load latency per request (p50/p99) and per hit block by tier, store
throughput. Output: a console table, --json, and --plot (hit rate against capacity per workload;
latency CDF of hits by tier; needs Debian's python3-matplotlib).

Exit status: 0 ok, 1 a verification failure or store errors beyond the tolerated ones, 2 bad
arguments or a bad trace line (the message names the file, the line and what is wrong).
"""
import argparse
import ctypes
import json
import math
import mmap
import multiprocessing
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BLOCK_TOKENS = 512
MAX_BLOCKS = 16384  # blocks of one request (8 Mi tokens): bounds a lane's registered buffer
MiB = 1 << 20
# A put of a key another lane stored first, or is storing (tolerated, counted as put_exists).
OBJECT_ALREADY_EXISTS, REPLICA_IS_NOT_READY = -705, -703


class TraceError(Exception):
    """A trace that cannot be replayed; the message names the file and line."""


# ---- trace --------------------------------------------------------------------------------


def _nonneg_int(obj, field, where):
    v = obj.get(field)
    if v is None:
        raise TraceError(f"{where}: missing field '{field}'")
    if isinstance(v, bool) or not isinstance(v, int):
        raise TraceError(f"{where}: '{field}' must be an integer, got {json.dumps(v)[:40]}")
    if v < 0:
        raise TraceError(f"{where}: '{field}' must be >= 0, got {v}")
    return v


def parse_trace(path, limit=0):
    """The requests of a JSONL trace, as (timestamp_ms, input_length, output_length, hash_ids)
    tuples sorted by timestamp (stable). limit > 0 keeps the first `limit` lines. Raises
    TraceError naming `path:line` for a line that is not a JSON object with a numeric
    timestamp >= 0, integer lengths >= 0 and a list of integer hash ids >= 0 with at most
    ceil(input_length / 512) and MAX_BLOCKS entries; OSError when the file cannot be read."""
    reqs = []
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            if limit and len(reqs) >= limit:
                break
            where = f"{path}:{lineno}"
            line = raw.strip()
            if not line:
                raise TraceError(f"{where}: empty line")
            try:
                obj = json.loads(line)
            except (ValueError, UnicodeDecodeError) as e:
                raise TraceError(f"{where}: not valid JSON ({e})") from None
            if not isinstance(obj, dict):
                raise TraceError(f"{where}: not a JSON object")
            ts = obj.get("timestamp")
            if ts is None:
                raise TraceError(f"{where}: missing field 'timestamp'")
            if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
                raise TraceError(f"{where}: 'timestamp' must be a number (ms), got "
                                 f"{json.dumps(ts)[:40]}")
            if ts < 0:
                raise TraceError(f"{where}: 'timestamp' must be >= 0, got {ts}")
            inp = _nonneg_int(obj, "input_length", where)
            out = _nonneg_int(obj, "output_length", where)
            ids = obj.get("hash_ids")
            if ids is None:
                raise TraceError(f"{where}: missing field 'hash_ids'")
            if not isinstance(ids, list):
                raise TraceError(f"{where}: 'hash_ids' must be a list of integers")
            for i, h in enumerate(ids):
                if isinstance(h, bool) or not isinstance(h, int) or h < 0:
                    raise TraceError(f"{where}: hash_ids[{i}] must be an integer >= 0, got "
                                     f"{json.dumps(h)[:40]}")
            if len(ids) > MAX_BLOCKS:
                raise TraceError(f"{where}: {len(ids)} hash_ids, more than the {MAX_BLOCKS} "
                                 "blocks a request may have here")
            if len(ids) > -(-inp // BLOCK_TOKENS):
                raise TraceError(f"{where}: {len(ids)} hash_ids for input_length {inp} "
                                 f"(at most ceil({inp}/{BLOCK_TOKENS}) blocks)")
            reqs.append((ts, inp, out, ids))
    if not reqs:
        raise TraceError(f"{path}: no requests")
    reqs.sort(key=lambda r: r[0])
    return reqs


def tokens_saved(inp, hit_blocks):
    """Prefill tokens a prefix hit of `hit_blocks` blocks saves (the last block may be partial)."""
    return min(hit_blocks * BLOCK_TOKENS, inp)


def infinite_cache(reqs):
    """The replay's rules against a cache that never evicts: per request, its prefix hit."""
    seen = set()
    hits = []
    for _, _, _, ids in reqs:
        n = 0
        while n < len(ids) and ids[n] in seen:
            n += 1
        hits.append(n)
        seen.update(ids)
    return hits, len(seen)


# ---- cluster ------------------------------------------------------------------------------


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    try:
        ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Cluster:
    """A mooncake_master and `holders` mooncake_client processes on loopback, their segments
    summing to `pool_bytes`, with offload mode `offload` (none, local, posix, daos)."""

    def __init__(self, build, pool_bytes, holders, offload, workdir):
        self.procs, self.logs = [], []
        self.dir = workdir
        self.env = {}  # the offload variables every store client of the run needs
        master_bin = os.path.join(build, "tools", "mooncake_master")
        client_bin = os.path.join(build, "tools", "mooncake_client")
        for b in (master_bin, client_bin):
            if not os.access(b, os.X_OK):
                raise RuntimeError(f"{b} not built (give --build-dir or set MC_BUILD_DIR)")
        self.rpc_port, self.metrics_port = free_port(), free_port()
        self.master_addr = f"127.0.0.1:{self.rpc_port}"
        margv = [master_bin, f"--rpc_port={self.rpc_port}", f"--metrics_port={self.metrics_port}",
                 "--rpc_address=127.0.0.1", "--metrics_host=127.0.0.1"]
        if offload != "none":
            margv.append("--enable_offload=true")
            self.env["MOONCAKE_OFFLOAD_HEARTBEAT_INTERVAL_SECONDS"] = "1"
        if offload in ("posix", "daos"):
            root = os.path.join(workdir, "dfs-root")
            os.makedirs(root)
            self.env.update({"MOONCAKE_OFFLOAD_STORAGE_BACKEND_DESCRIPTOR": "distributed",
                             "MOONCAKE_DISTRIBUTED_FS_TYPE": offload,
                             "MOONCAKE_DISTRIBUTED_ROOT_DIR": root,
                             "MOONCAKE_OFFLOAD_FILE_STORAGE_PATH": os.path.join(workdir, "stub")})
            if offload == "daos":
                mkcont = os.path.join(build, "dfs_double", "dfs_double_mkcont")
                if not os.access(mkcont, os.X_OK):
                    raise RuntimeError(f"{mkcont} not built: daos runs on the libdfs test double "
                                       "(-DUSE_DAOS=ON -DDAOS_TEST_DOUBLE=ON)")
                store = os.path.join(workdir, "dfs-double-store")
                os.makedirs(os.path.join(store, "pool"))
                self.env["DFS_DOUBLE_ROOT"] = store
                subprocess.run([mkcont, root, "pool", "replay"], check=True,
                               env={**os.environ, **self.env}, capture_output=True)
        master = self._spawn("master", margv)
        self._wait_port(self.rpc_port, master)
        self._wait_port(self.metrics_port, master)
        seg = max(pool_bytes // holders, 1 << 20)
        self.pool_bytes = seg * holders
        for h in range(holders):
            env = dict(self.env)
            argv = [client_bin, f"--global_segment_size={seg}", "--host=127.0.0.1",
                    f"--port={free_port()}", "--metadata_server=P2PHANDSHAKE",
                    f"--master_server_address={self.master_addr}"]
            if offload != "none":
                argv.append("--enable_offload=true")
            if offload == "local":
                env["MOONCAKE_OFFLOAD_FILE_STORAGE_PATH"] = os.path.join(workdir, f"disk{h}")
            self._wait_ready(self._spawn(f"holder{h}", argv, env, stdout=subprocess.PIPE))

    def _spawn(self, name, argv, env=None, stdout=None):
        log = open(os.path.join(self.dir, name + ".log"), "wb")
        self.logs.append(log)
        p = subprocess.Popen(argv, stdout=stdout or log, stderr=log, stdin=subprocess.DEVNULL,
                             env={**os.environ, **(env or {})}, preexec_fn=_die_with_parent)
        p.mc_name = name
        self.procs.append(p)
        return p

    def log_tail(self, name):
        try:
            with open(os.path.join(self.dir, name + ".log"), "rb") as f:
                return f.read()[-1500:].decode(errors="replace")
        except OSError:
            return ""

    def _wait_port(self, port, proc, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.mc_name} exited with {proc.returncode}: "
                                   + self.log_tail(proc.mc_name))
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"{proc.mc_name}: port {port} not open within {timeout} s")

    def _wait_ready(self, proc, timeout=30.0):
        found = threading.Event()

        def reader():
            for raw in proc.stdout:  # drained until the process exits
                if raw.startswith(b"mooncake_client ready: segment "):
                    found.set()

        threading.Thread(target=reader, daemon=True).start()
        deadline = time.monotonic() + timeout
        while not found.wait(0.05):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{proc.mc_name} not ready: " + self.log_tail(proc.mc_name))

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
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


def scrape_metrics(host_port):
    """The master's /metrics as {name: value} (unlabelled samples only); {} when unreachable."""
    if not host_port:
        return {}
    try:
        with urllib.request.urlopen(f"http://{host_port}/metrics", timeout=5) as r:
            body = r.read().decode()
    except OSError:
        return {}
    out = {}
    for m in re.finditer(r"^([a-zA-Z_:][a-zA-Z0-9_:]*) ([-+0-9.eE]+)$", body, re.M):
        out[m.group(1)] = float(m.group(2))
    return out


# ---- a lane -------------------------------------------------------------------------------


def _import_store(build):
    try:
        import mooncake.store as mcs
    except ImportError:
        sys.path.insert(0, os.path.join(build, "python"))
        import mooncake.store as mcs
    return mcs


def block_bytes(hid, salt, size):
    return struct.pack("<QQ", hid, salt) * (size // 16)


class DictStore:
    """The peer of a replay, measured in the same run: the lane's loop against a Python dict in
    its own process (an infinite cache, no store), with the same calls, copies and checks. Its
    request rate is the most the replay loop itself can drive."""

    def __init__(self):
        self.d = {}

    def batch_is_exist(self, keys):
        return [1 if k in self.d else 0 for k in keys]

    def batch_get_into(self, keys, ptrs, sizes):
        out = []
        for k, p, n in zip(keys, ptrs, sizes):
            v = self.d.get(k)
            if v is None or len(v) > n:
                out.append(-704)
                continue
            ctypes.memmove(p, v, len(v))
            out.append(len(v))
        return out

    def batch_put_from(self, keys, ptrs, sizes):
        for k, p, n in zip(keys, ptrs, sizes):
            self.d[k] = ctypes.string_at(p, n)
        return [0] * len(keys)

    def close(self):
        self.d.clear()
        return 0


def memcpy_mib_per_s(size=64 * MiB, rounds=4):
    """memmove bandwidth of this host, taken in the same run as the replay it is compared to."""
    a, b = ctypes.create_string_buffer(size), ctypes.create_string_buffer(size)
    ctypes.memmove(b, a, size)  # fault the pages in
    t = time.perf_counter()
    for _ in range(rounds):
        ctypes.memmove(b, a, size)
    return round(rounds * size / MiB / (time.perf_counter() - t), 1)


def lane_main(cfg, lane, reqs, barrier, conn):
    """One prefill node: its own store client replays `reqs` [(index, request)] and sends back
    (records, counters, end time). Records: (index, hit, mem, disk, lookup_s, load_s, put_s,
    puts, late_s)."""
    _die_with_parent()  # a lane never outlives the tool
    try:
        os.environ.update(cfg["env"])
        bs = cfg["block_bytes"]
        most = max((len(r[3]) for _, r in reqs), default=1) or 1
        buf = mmap.mmap(-1, most * bs)
        base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
        view = memoryview(buf)
        if cfg["peer"]:
            store = DictStore()
        else:
            store = _import_store(cfg["build"]).MooncakeDistributedStore()
            rc = store.setup("127.0.0.1", "P2PHANDSHAKE", 0, 16 * MiB, "tcp", "", cfg["master"])
            if rc != 0:
                raise RuntimeError(f"lane {lane}: setup against {cfg['master']} returned {rc}")
            rc = store.register_buffer(base, most * bs)
            if rc != 0:
                raise RuntimeError(f"lane {lane}: register_buffer returned {rc}")
    except BaseException as e:  # reported to the parent, which stops the run
        barrier.abort()
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    prefix, salt, speed, tier = cfg["prefix"], cfg["salt"], cfg["speed"], cfg["tier"]
    c = dict(get_fail=0, put_fail=0, put_exists=0, verify_fail=0, exist_fail=0)
    recs = []
    barrier.wait()
    t0 = time.monotonic()
    ts0 = cfg["ts0"]
    for idx, (ts, _inp, _out, ids) in reqs:
        late = 0.0
        if speed > 0:
            due = t0 + (ts - ts0) / 1000.0 / speed
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            else:
                late = now - due
        keys = [f"{prefix}/{h}" for h in ids]
        t1 = time.perf_counter()
        ex = store.batch_is_exist(keys) if keys else []
        t2 = time.perf_counter()
        if len(ex) != len(keys):
            c["exist_fail"] += 1
            ex = [0] * len(keys)
        lead = 0
        while lead < len(keys) and ex[lead] == 1:
            lead += 1
        mem = disk = 0
        hit = 0
        load_s = 0.0
        if lead:
            hk = keys[:lead]
            kinds = None
            if tier:
                desc = store.batch_get_replica_desc(hk)
                kinds = [any(r.is_memory_replica() for r in desc.get(k, ())) for k in hk]
            t3 = time.perf_counter()
            rcs = store.batch_get_into(hk, [base + i * bs for i in range(lead)], [bs] * lead)
            load_s = time.perf_counter() - t3
            for i in range(lead):
                if rcs[i] != bs:
                    c["get_fail"] += 1
                    break
                if view[i * bs:(i + 1) * bs] != block_bytes(ids[i], salt, bs):
                    c["verify_fail"] += 1
                    break
                hit += 1
                if kinds is None or kinds[i]:
                    mem += 1
                else:
                    disk += 1
        missing = [i for i in range(len(keys)) if ex[i] != 1]
        put_s = 0.0
        if missing:
            for j, i in enumerate(missing):
                view[j * bs:(j + 1) * bs] = block_bytes(ids[i], salt, bs)
            t4 = time.perf_counter()
            rcs = store.batch_put_from([keys[i] for i in missing],
                                       [base + j * bs for j in range(len(missing))],
                                       [bs] * len(missing))
            put_s = time.perf_counter() - t4
            for r in rcs:
                if r in (OBJECT_ALREADY_EXISTS, REPLICA_IS_NOT_READY):
                    c["put_exists"] += 1
                elif r != 0:
                    c["put_fail"] += 1
        recs.append((idx, hit, mem, disk, t2 - t1, load_s, put_s, len(missing), late))
    end = time.monotonic()
    store.close()
    conn.send(("ok", recs, c, t0, end))


# ---- one run ------------------------------------------------------------------------------


def pct(values, q):
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(q / 100.0 * len(s)) - 1))]


def replay(args, name, reqs, capacity_tokens, offload, run_no):
    """One replay of `reqs` on a fresh cluster (or --master); the result dict."""
    bs = BLOCK_TOKENS * args.kv_bytes_per_token
    work = tempfile.mkdtemp(prefix="mc_trace_replay.")
    cluster = None
    try:
        if offload == "peer":
            master, metrics_addr, env, pool = "", "", {}, None
        elif args.master:
            master, metrics_addr, env = args.master, args.master_metrics, {}
            pool = None
        else:
            cluster = Cluster(args.build_dir, capacity_tokens * args.kv_bytes_per_token,
                              args.holders, offload, work)
            master, env = cluster.master_addr, cluster.env
            metrics_addr = f"127.0.0.1:{cluster.metrics_port}"
            pool = cluster.pool_bytes
        before = scrape_metrics(metrics_addr)
        cfg = dict(build=args.build_dir, env=env, master=master, block_bytes=bs,
                   prefix=f"{args.run_prefix}/{os.getpid()}/{run_no}/{name}",
                   salt=(os.getpid() << 16) ^ run_no, speed=args.speed, ts0=reqs[0][0],
                   tier=offload not in ("none", "peer") or bool(args.master),
                   peer=offload == "peer")
        ctx = multiprocessing.get_context("fork")
        barrier = ctx.Barrier(args.lanes + 1)
        procs, conns = [], []
        for lane in range(args.lanes):
            mine = [(i, r) for i, r in enumerate(reqs) if i % args.lanes == lane]
            rx, tx = ctx.Pipe(duplex=False)
            p = ctx.Process(target=lane_main, args=(cfg, lane, mine, barrier, tx), daemon=True)
            p.start()
            procs.append(p)
            conns.append(rx)
        try:
            barrier.wait(timeout=120)
        except threading.BrokenBarrierError:
            pass
        results = []
        for p, rx in zip(procs, conns):
            got = rx.recv() if rx.poll(None) else ("error", "lane sent nothing")
            results.append(got)
            p.join()
        errs = [r[1] for r in results if r[0] != "ok"]
        if errs:
            raise RuntimeError("; ".join(errs))
        # The clients report disk reads on their next ping (1 s): let the counter settle.
        after = scrape_metrics(metrics_addr)
        for _ in range(10):
            time.sleep(0.5)
            again = scrape_metrics(metrics_addr)
            if again.get("master_fallback_reads_total") == after.get("master_fallback_reads_total"):
                break
            after = again
    finally:
        if cluster:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    recs = sorted(r for res in results for r in res[1])
    counters = {}
    for res in results:
        for k, v in res[2].items():
            counters[k] = counters.get(k, 0) + v
    wall = max(r[4] for r in results) - min(r[3] for r in results)
    ref_hits, unique = infinite_cache(reqs)
    blocks = sum(len(r[3]) for r in reqs)
    hits = sum(r[1] for r in recs)
    mem = sum(r[2] for r in recs)
    disk = sum(r[3] for r in recs)
    puts = sum(r[7] for r in recs)
    hit_reqs = [r for r in recs if r[1]]
    lat = [r[4] + r[5] for r in recs]
    per_hit_mem = [r[5] / r[1] for r in hit_reqs if r[3] == 0]
    per_hit_disk = [r[5] / r[1] for r in hit_reqs if r[3] > 0]
    saved = sum(tokens_saved(reqs[r[0]][1], r[1]) for r in recs)
    ideal_saved = sum(tokens_saved(reqs[i][1], h) for i, h in enumerate(ref_hits))
    inp = sum(r[1] for r in reqs)
    moved = (hits + puts) * bs

    def ms(v):
        return None if v is None else round(v * 1000.0, 3)

    delta = {k: after.get(k, 0) - before.get(k, 0) for k in
             ("master_fallback_reads_total", "master_evicted_key_count",
              "master_offload_tasks_done_total", "master_offload_bytes_total")
             if k in after}
    return {
        "workload": name, "offload": offload, "capacity_tokens": capacity_tokens,
        "pool_bytes": pool, "block_bytes": bs, "requests": len(reqs), "lanes": args.lanes,
        "speed": args.speed, "blocks": blocks, "unique_blocks": unique,
        "hit_blocks": hits, "hit_rate": hits / blocks if blocks else 0.0,
        "max_hit_blocks": sum(ref_hits),
        "max_hit_rate": sum(ref_hits) / blocks if blocks else 0.0,
        "hits_per_request": [r[1] for r in recs],
        "max_hits_per_request": ref_hits,
        "memory_hit_blocks": mem, "disk_hit_blocks": disk,
        "bytes_from_memory": mem * bs, "bytes_from_offload": disk * bs,
        "put_blocks": puts, "input_tokens": inp, "prefill_tokens_saved": saved,
        "max_prefill_tokens_saved": ideal_saved,
        "lookup_load_ms_p50": ms(pct(lat, 50)), "lookup_load_ms_p99": ms(pct(lat, 99)),
        "load_ms_per_hit_block_memory_p50": ms(pct(per_hit_mem, 50)),
        "load_ms_per_hit_block_memory_p99": ms(pct(per_hit_mem, 99)),
        "load_ms_per_hit_block_offload_p50": ms(pct(per_hit_disk, 50)),
        "load_ms_per_hit_block_offload_p99": ms(pct(per_hit_disk, 99)),
        "per_hit_ms_memory": [round(v * 1000.0, 4) for v in per_hit_mem],
        "per_hit_ms_offload": [round(v * 1000.0, 4) for v in per_hit_disk],
        "put_ms_p50": ms(pct([r[6] for r in recs if r[7]], 50)),
        "put_ms_p99": ms(pct([r[6] for r in recs if r[7]], 99)),
        "late_ms_p99": ms(pct([r[8] for r in recs], 99)),
        "wall_s": round(wall, 3), "requests_per_s": round(len(recs) / wall, 1) if wall else None,
        "store_mib_per_s": round(moved / MiB / wall, 1) if wall else None,
        "errors": counters, "master_metrics_delta": delta,
        "memcpy_mib_per_s": memcpy_mib_per_s(),
    }


# ---- output -------------------------------------------------------------------------------


def fmt(v, nd=1):
    return "-" if v is None else f"{v:.{nd}f}"


def print_table(runs, out=sys.stdout):
    hdr = (f"{'workload':<14} {'offload':<7} {'cap(tok)':>10} {'hit%':>6} {'max%':>6} "
           f"{'mem blk':>8} {'disk blk':>8} {'saved%':>6} {'p50 ms':>7} {'p99 ms':>7} "
           f"{'hit/blk mem ms':>14} {'hit/blk disk ms':>15} {'req/s':>7} {'x peer':>6} {'MiB/s':>7} "
           f"{'x memcpy':>8}")
    print(hdr, file=out)
    print("-" * len(hdr), file=out)
    for r in runs:
        saved = 100.0 * r["prefill_tokens_saved"] / r["input_tokens"] if r["input_tokens"] else 0
        print(f"{r['workload']:<14} {r['offload']:<7} {r['capacity_tokens']:>10} "
              f"{100 * r['hit_rate']:>6.1f} {100 * r['max_hit_rate']:>6.1f} "
              f"{r['memory_hit_blocks']:>8} {r['disk_hit_blocks']:>8} {saved:>6.1f} "
              f"{fmt(r['lookup_load_ms_p50'], 2):>7} {fmt(r['lookup_load_ms_p99'], 2):>7} "
              f"{fmt(r['load_ms_per_hit_block_memory_p50'], 3):>14} "
              f"{fmt(r['load_ms_per_hit_block_offload_p50'], 3):>15} "
              f"{fmt(r['requests_per_s'], 0):>7} {fmt(r.get('requests_per_s_vs_peer'), 3):>6} "
              f"{fmt(r['store_mib_per_s'], 1):>7} "
              f"{fmt(r['store_mib_per_s'] / r['memcpy_mib_per_s'], 4):>8}", file=out)
        bad = {k: v for k, v in r["errors"].items() if v}
        if bad:
            print(f"  errors: {bad}", file=out)


def plot(runs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    groups = {}
    for r in runs:
        groups.setdefault((r["workload"], r["offload"]), []).append(r)
    for (w, off), rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: r["capacity_tokens"])
        a.plot([r["capacity_tokens"] for r in rs], [100 * r["hit_rate"] for r in rs], "o-",
               label=f"{w} ({off})")
        a.axhline(100 * rs[0]["max_hit_rate"], ls=":", lw=0.8, color=a.lines[-1].get_color())
    a.set_xscale("log")
    a.set_xlabel("memory pool capacity (tokens)")
    a.set_ylabel("block hit rate (%)  [dotted: infinite cache]")
    a.set_title("hit rate vs capacity")
    a.legend(fontsize=7)
    for r in runs:
        for tier in ("memory", "offload"):
            v = sorted(r[f"per_hit_ms_{tier}"])
            if v:
                b.plot(v, [(i + 1) / len(v) for i in range(len(v))],
                       "-" if tier == "memory" else "--",
                       label=f"{r['workload']} {r['offload']} cap={r['capacity_tokens']} {tier}")
    b.set_xscale("log")
    b.set_xlabel("load time per hit block (ms)")
    b.set_ylabel("CDF of requests with hits")
    b.set_title("hit latency by tier")
    b.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# ---- main ---------------------------------------------------------------------------------


def parse_tokens(s):
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([kKmMgG]?)\s*", s)
    if not m:
        raise argparse.ArgumentTypeError(f"not a token count: {s!r} (e.g. 200000, 500k, 2M)")
    v = float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2).lower()]
    if v < 1:
        raise argparse.ArgumentTypeError(f"capacity must be at least 1 token: {s!r}")
    return int(v)


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Replay FAST'25 Mooncake traces (JSONL: timestamp ms, input_length, "
        "output_length, hash_ids of 512-token blocks) through a real Mooncake store: prefix "
        "lookup (batch_is_exist, batch_get_into of the leading present blocks), then "
        "batch_put_from of the missing ones; reports hit rates against the trace's infinite-"
        "cache maximum, tiers, latency and throughput.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--trace-file", action="append", required=True, metavar="PATH",
                    help="a JSONL trace (repeat for several workloads)")
    ap.add_argument("--limit", type=int, default=0,
                    help="replay the first N lines of each trace (0 = all)")
    ap.add_argument("--kv-bytes-per-token", type=int, default=64,
                    help="KV bytes per token; a block is 512 x this (LLaMA3-70B: 640 = 320 KiB; "
                    "scaled down by default for small machines)")
    ap.add_argument("--capacity-tokens", default="",
                    help="comma-separated memory pool capacities in tokens (500k, 2M, ...), one "
                    "replay each; default: the --capacity-fractions of each trace's unique blocks")
    ap.add_argument("--capacity-fractions", default="0.1,0.25,0.5,1.25",
                    help="pool capacities as fractions of a trace's unique-block footprint "
                    "(when --capacity-tokens is not given)")
    ap.add_argument("--offload", default="none",
                    help="comma-separated offload tiers to run: none, local (posix files on each "
                    "holder), posix (distributed posix root), daos (libdfs; the test double in "
                    "a -DDAOS_TEST_DOUBLE build)")
    ap.add_argument("--lanes", type=int, default=1,
                    help="prefill nodes: processes, each with its own store client")
    ap.add_argument("--holders", type=int, default=1,
                    help="mooncake_client processes whose segments make the pool")
    ap.add_argument("--speed", type=float, default=0.0,
                    help="0: as fast as possible; 1: trace timestamps in real time; k: k x faster")
    ap.add_argument("--no-peer", dest="peer", action="store_false",
                    help="skip the peer run: with --lanes 1, each workload replayed first "
                    "against a Python dict in the lane (the loop's own ceiling; row 'peer')")
    ap.add_argument("--master", default="",
                    help="use this running master (host:port) instead of starting a cluster; "
                    "the pool is what its clients hold (no capacity sweep)")
    ap.add_argument("--master-metrics", default="",
                    help="with --master: its metrics host:port, for master_fallback_reads_total")
    ap.add_argument("--run-prefix", default="trace_replay",
                    help="key namespace; keys are <prefix>/<pid>/<run>/<workload>/<hash id>")
    ap.add_argument("--build-dir", default=os.environ.get("MC_BUILD_DIR",
                                                          os.path.join(REPO, "build")),
                    help="build tree with tools/mooncake_master, tools/mooncake_client, python/")
    ap.add_argument("--json", default="", help="write all results to this file")
    ap.add_argument("--plot", default="", help="write the plot (PNG) to this file")
    args = ap.parse_args(argv)
    # SIGTERM unwinds like an error: the cluster is stopped and its files removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    if args.kv_bytes_per_token < 1 or args.kv_bytes_per_token > 1 << 20:
        ap.error("--kv-bytes-per-token must be in 1..1048576")
    if args.lanes < 1 or args.lanes > 64:
        ap.error("--lanes must be in 1..64")
    if args.holders < 1 or args.holders > 16:
        ap.error("--holders must be in 1..16")
    if args.speed < 0 or not math.isfinite(args.speed):
        ap.error("--speed must be >= 0")
    if args.limit < 0:
        ap.error("--limit must be >= 0")
    offloads = [o.strip() for o in args.offload.split(",") if o.strip()]
    for o in offloads:
        if o not in ("none", "local", "posix", "daos"):
            ap.error(f"--offload: unknown tier {o!r} (none, local, posix, daos)")
    if args.master and offloads != ["none"]:
        ap.error("--offload applies to the cluster the tool starts, not to --master")
    try:
        caps = [parse_tokens(c) for c in args.capacity_tokens.split(",") if c.strip()]
        fracs = [float(f) for f in args.capacity_fractions.split(",") if f.strip()]
    except (argparse.ArgumentTypeError, ValueError) as e:
        ap.error(str(e))
    if any(f <= 0 for f in fracs):
        ap.error("--capacity-fractions must be > 0")

    workloads = []
    for path in args.trace_file:
        try:
            reqs = parse_trace(path, args.limit)
        except TraceError as e:
            print(f"trace_replay: {e}", file=sys.stderr)
            return 2
        except OSError as e:
            print(f"trace_replay: {path}: {e.strerror}", file=sys.stderr)
            return 2
        name = os.path.splitext(os.path.basename(path))[0]
        workloads.append((name, path, reqs))

    runs = []
    run_no = 0
    for name, path, reqs in workloads:
        _, unique = infinite_cache(reqs)
        peer = None
        if args.peer and args.lanes == 1:  # lanes' dicts would not be shared
            run_no += 1
            try:
                peer = replay(args, name, reqs, 0, "peer", run_no)
            except (RuntimeError, OSError) as e:
                print(f"trace_replay: {name}, peer run: {e}", file=sys.stderr)
                return 1
            peer["trace_file"] = path
            runs.append(peer)
        mine = caps or sorted({max(1, int(f * unique * BLOCK_TOKENS)) for f in fracs})
        if args.master:
            mine = [0]
        for off in offloads:
            for cap in mine:
                run_no += 1
                print(f"replaying {name} ({len(reqs)} requests, {unique} unique blocks), "
                      f"offload {off}, capacity {cap} tokens ...", file=sys.stderr, flush=True)
                try:
                    r = replay(args, name, reqs, cap, off, run_no)
                except (RuntimeError, OSError, subprocess.CalledProcessError) as e:
                    print(f"trace_replay: {name}, offload {off}, capacity {cap}: {e}",
                          file=sys.stderr)
                    return 1
                r["trace_file"] = path
                if peer and peer["requests_per_s"] and r["requests_per_s"]:
                    r["requests_per_s_vs_peer"] = round(r["requests_per_s"]
                                                        / peer["requests_per_s"], 3)
                runs.append(r)
    print_table(runs)
    info = {"date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "argv": sys.argv[1:],
            "kv_bytes_per_token": args.kv_bytes_per_token, "load": os.getloadavg(),
            "runs": runs}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(info, f, indent=1)
    if args.plot:
        plot(runs, args.plot)
    # A get may miss a block evicted after its lookup, and a put may find no room: both are
    # counted (get_fail, put_fail) and lower the hit rate. Wrong bytes or a failed lookup fail.
    bad = sum(r["errors"].get("verify_fail", 0) + r["errors"].get("exist_fail", 0) for r in runs)
    if bad:
        print(f"trace_replay: {bad} wrong blocks or failed lookups (see the table)",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
