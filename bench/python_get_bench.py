#!/usr/bin/env python3
"""python_get_bench.py — Python `get_batch` (new bytes) against `batch_get_into` (zero-copy into a
registered buffer) and a warm memcpy, interleaved in one process over the same objects.

It answers: how close does a plain get of large values come to the zero-copy read, once both
are past their first touch? Lanes are threads sharing one store (as store_kv_bench.py's
numjobs); each phase runs every lane for --seconds, the phases alternate (plain, zcopy, plain,
zcopy, ...) for --rounds rounds, so both see the same load. Before the rounds, a warm-up of
--warmup seconds of each API (the zero-copy buffer is touched once, as a prepare phase would).
Every value read is checked against the bytes put (its first and last 4 KiB and its length)
unless --no-check.

The objects are put first (key prefix --prefix, --objects of --value-size each) unless
--no-put says an earlier run put them. Needs a running mooncake_master and a store client holding
memory (mooncake_client), as store_kv_bench.py does:

    python3 bench/python_get_bench.py --master 127.0.0.1:50051 --value-size 16MiB --jobs 8

Prints one line per phase and a summary table (GB/s per API: min / median / max over rounds,
and plain / zcopy per round); --json FILE writes the rows. Memory: the zero-copy buffer is
jobs x batch x value-size bytes; plain gets keep up to as much live at once.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import threading
import time

try:
    import mooncake.store as mcs
except ImportError as e:  # --help must work, and the error must say what to do
    if "-h" in sys.argv or "--help" in sys.argv:
        mcs = None
    else:
        sys.exit(f"python_get_bench.py: cannot import mooncake.store ({e}); put the module's "
                 "directory on PYTHONPATH (a build tree: PYTHONPATH=build/python)")

MiB = 1 << 20
EDGE = 4096  # bytes checked at each end of a value


def parse_size(text):
    units = {"k": 1 << 10, "kib": 1 << 10, "m": MiB, "mib": MiB, "g": 1 << 30, "gib": 1 << 30}
    t = text.strip().lower()
    for u in sorted(units, key=len, reverse=True):
        if t.endswith(u):
            return int(float(t[: -len(u)]) * units[u])
    return int(t)


def value_of(i, size):
    """The bytes object i holds: a 251-byte period shifted by i (differs per object)."""
    block = bytes((i * 7 + j) & 0xFF for j in range(251))
    return (block * (size // 251 + 1))[:size]


def memcpy_gbps(size, seconds=0.5):
    src = ctypes.create_string_buffer(size)
    dst = ctypes.create_string_buffer(size)
    ctypes.memmove(dst, src, size)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        ctypes.memmove(dst, src, size)
        n += 1
    return n * size / (time.perf_counter() - t0) / 1e9


class Bench:
    def __init__(self, a):
        self.a = a
        self.store = mcs.MooncakeDistributedStore()
        rc = self.store.setup(a.local_hostname, "P2PHANDSHAKE", 0, 64 * MiB, "tcp", "",
                              a.master)
        if rc != 0:
            sys.exit(f"setup failed: {rc}")
        self.keys = [f"{a.prefix}-{i}" for i in range(a.objects)]
        self.heads = [value_of(i, a.value_size)[:EDGE] for i in range(a.objects)]
        self.tails = [value_of(i, a.value_size)[-EDGE:] for i in range(a.objects)]
        slot_bytes = a.jobs * a.batch * a.value_size
        self.region = ctypes.create_string_buffer(slot_bytes)
        ctypes.memset(self.region, 0, slot_bytes)  # first touch, as a prepare phase would
        self.base = ctypes.addressof(self.region)
        if self.store.register_buffer(self.base, slot_bytes) != 0:
            sys.exit("register_buffer failed")
        self.errors = []

    def put_all(self):
        for i, k in enumerate(self.keys):
            rc = self.store.put(k, value_of(i, self.a.value_size))
            if rc != 0:
                sys.exit(f"put {k}: {rc}")

    def check(self, i, data, n):
        if self.a.no_check:
            return
        if n != self.a.value_size or data[:EDGE] != self.heads[i] or \
                data[n - EDGE:n] != self.tails[i]:
            self.errors.append(self.keys[i])

    def lane(self, api, lane, stop, counts):
        a = self.a
        start = (lane * a.batch) % a.objects
        done = 0
        while not stop.is_set():
            ids = [(start + j) % a.objects for j in range(a.batch)]
            start = (start + a.batch * a.jobs) % a.objects
            keys = [self.keys[i] for i in ids]
            if api == "plain":
                values = self.store.get_batch(keys)
                for i, v in zip(ids, values):
                    self.check(i, v, len(v))
                    done += len(v)
                del values, v
            else:
                ptrs = [self.base + (lane * a.batch + j) * a.value_size for j in range(a.batch)]
                rcs = self.store.batch_get_into(keys, ptrs, [a.value_size] * a.batch)
                for i, p, rc in zip(ids, ptrs, rcs):
                    if rc < 0:
                        self.errors.append(f"{self.keys[i]}: {rc}")
                        continue
                    head = ctypes.string_at(p, EDGE)
                    tail = ctypes.string_at(p + rc - EDGE, EDGE)
                    if not a.no_check and (rc != a.value_size or head != self.heads[i] or
                                           tail != self.tails[i]):
                        self.errors.append(self.keys[i])
                    done += rc
        counts[lane] = done

    def phase(self, api, seconds):
        stop = threading.Event()
        counts = [0] * self.a.jobs
        threads = [threading.Thread(target=self.lane, args=(api, i, stop, counts))
                   for i in range(self.a.jobs)]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join()
        return sum(counts) / (time.perf_counter() - t0) / 1e9


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--master", default="127.0.0.1:50051",
                   help="a running mooncake_master host:port (a mooncake_client holds the values)")
    p.add_argument("--local-hostname", default="127.0.0.1", help="this client's address")
    p.add_argument("--value-size", type=parse_size, default=16 * MiB,
                   help="bytes per object (16MiB, 1MiB, ...)")
    p.add_argument("--objects", type=int, default=64, help="objects put and read")
    p.add_argument("--jobs", type=int, default=8, help="reader threads (lanes)")
    p.add_argument("--batch", type=int, default=8, help="keys per get_batch / batch_get_into")
    p.add_argument("--rounds", type=int, default=3, help="plain/zcopy pairs, interleaved")
    p.add_argument("--seconds", type=float, default=4.0, help="seconds per phase")
    p.add_argument("--warmup", type=float, default=4.0, help="warm-up seconds of each mode")
    p.add_argument("--prefix", default="pyget", help="key prefix")
    p.add_argument("--no-put", action="store_true", help="the objects are already stored")
    p.add_argument("--no-check", action="store_true",
                   help="do not check each value's first and last 4 KiB and length")
    p.add_argument("--json", default="", help="write the rows here")
    a = p.parse_args()
    b = Bench(a)
    if not a.no_put:
        b.put_all()
    for api in ("zcopy", "plain"):
        b.phase(api, a.warmup)
    rows = []
    for r in range(a.rounds):
        for api in ("plain", "zcopy") if r % 2 == 0 else ("zcopy", "plain"):
            gbps = b.phase(api, a.seconds)
            rows.append({"round": r, "api": api, "GBps": gbps})
            print(f"round {r} {api:5s} {gbps:6.2f} GB/s", flush=True)
    mc = memcpy_gbps(a.value_size)
    load = os.getloadavg()
    plain = [x["GBps"] for x in rows if x["api"] == "plain"]
    zc = [x["GBps"] for x in rows if x["api"] == "zcopy"]
    ratios = [pl / z for pl, z in zip(plain, zc) if z > 0]
    print(f"value {a.value_size} B, {a.jobs} lanes x batch {a.batch}, pool "
          f"{os.environ.get('MC_PY_GET_POOL_BYTES', 'default')}, load {load[0]:.1f}")
    for name, xs in (("plain", plain), ("zcopy", zc)):
        print(f"  {name:5s} GB/s min {min(xs):.2f} median {statistics.median(xs):.2f} "
              f"max {max(xs):.2f}")
    print(f"  plain/zcopy per round: {' '.join(f'{x:.2f}' for x in ratios)}")
    print(f"  memcpy (1 thread, warm) {mc:.2f} GB/s; errors {len(b.errors)}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"config": vars(a), "rows": rows, "ratios": ratios, "memcpy_GBps": mc,
                       "load": load, "errors": len(b.errors)}, f, indent=1)
    b.store.close()
    return 1 if b.errors else 0


if __name__ == "__main__":
    sys.exit(main())
