#!/usr/bin/env python3
"""crosshost_bench.py — the store across two "hosts": two network namespaces joined by a veth.

Everything in one run, so every figure has its limit measured next to it:
  1. iperf3, one TCP stream each way across the veth, at the start and at the end; and one stream
     in the row's direction right before every row: the row's limit (this machine's load changes
     by the minute, so each ratio is to the figure taken next to it).
  2. A mooncake_master and a mooncake_client (the memory holder) in namespace A; the reader/writer
     in namespace B:
       - tools/mooncake_store_bench put/get (protocol tcp, and rdma = UCX forced onto its tcp
         transport with UCX_TLS=tcp), one thread, batch 1, at each --sizes value;
       - mooncake-store/benchmarks/store_kv_bench.py write_perf/read_perf, io-api plain and
         zcopy, one lane, batch 1, at each size, over each protocol; one payload for every
         object (--pattern), and the holder's memory faulted in first (see --no-pretouch).

Bytes really cross the veth: shared memory is off (MC_DISABLE_SHM=1 in every process; the shm
socket is an abstract unix socket, which is per network namespace anyway) and each row reports
the veth's byte counters (in the op's direction) over the run divided by the payload bytes the
bench reported moving (`wire/payload`: >= 1.0 when every reported byte crossed; a short-cut
shows as ~0; C rows also carry the C bench's warm-up and first-touch passes, so they read 1.3-4).

Namespaces, the veth and the addresses (--subnet, default 10.231.77.0/24) exist only inside the
namespaces this script creates; everything is removed at the end, on failure and on Ctrl-C.
Needs root, iproute2, iperf3 and a build tree (--build, default ./build) with the tools and the
Python module. Prints a table (path, op, size, GB/s = 1e9 bytes/s, ratio to iperf3 in the same
direction) and writes JSON (--json) and CSV (--csv).
"""
import argparse
import csv
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
KV_BENCH = os.path.join(REPO, "mooncake-store", "benchmarks", "store_kv_bench.py")
MiB = 1 << 20


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)(i?[bB])?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"bad size {text!r} (e.g. 1MiB, 16MiB)")
    return int(m.group(1)) * {"": 1, "k": 1 << 10, "m": MiB, "g": 1 << 30}[m.group(2).lower()]


def size_name(n):
    return f"{n // MiB}MiB" if n % MiB == 0 else f"{n}B"


class Net:
    """Two namespaces joined by a veth; removed by close() (idempotent)."""

    def __init__(self, subnet):
        tag = os.getpid() % 100000
        self.ns = (f"mcxh{tag}a", f"mcxh{tag}b")
        self.dev = (f"mcxh{tag}a", f"mcxh{tag}b")  # one end per namespace (<= 15 chars)
        base = subnet.split("/")[0].rsplit(".", 1)[0]
        self.addr = (base + ".1", base + ".2")
        self.created = []

    def sh(self, *argv):
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def up(self):
        for ns in self.ns:
            self.sh("ip", "netns", "add", ns)
            self.created.append(ns)
        # created inside A, one end moved to B: nothing ever appears in the caller's namespace
        self.sh("ip", "-n", self.ns[0], "link", "add", self.dev[0], "type", "veth", "peer", "name",
                self.dev[1], "netns", self.ns[1])
        for i in (0, 1):
            self.sh("ip", "-n", self.ns[i], "link", "set", "lo", "up")
            self.sh("ip", "-n", self.ns[i], "addr", "add", self.addr[i] + "/24", "dev", self.dev[i])
            self.sh("ip", "-n", self.ns[i], "link", "set", self.dev[i], "up")

    def exec(self, i):
        return ["ip", "netns", "exec", self.ns[i]]

    def counters(self):
        """(bytes A sent, bytes B sent) on the veth."""
        out = []
        for i in (0, 1):
            r = subprocess.run(self.exec(i) + ["cat", f"/sys/class/net/{self.dev[i]}/statistics/tx_bytes"],
                               check=True, capture_output=True, text=True)
            out.append(int(r.stdout))
        return tuple(out)

    def close(self):
        while self.created:
            ns = self.created.pop()
            subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)


class Procs:
    """Started processes, each in its own process group; stop_all() kills what is left."""

    def __init__(self, logdir):
        self.logdir = logdir
        self.procs = []

    def start(self, name, argv, env=None, stdout=None):
        log = open(os.path.join(self.logdir, name + ".log"), "ab")
        p = subprocess.Popen(argv, stdout=stdout or log, stderr=log, stdin=subprocess.DEVNULL,
                             env=env, start_new_session=True)
        p.name = name
        self.procs.append(p)
        return p

    def stop(self, p):
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def stop_all(self):
        for p in list(self.procs):
            self.stop(p)

    def log_tail(self, name, n=15):
        try:
            with open(os.path.join(self.logdir, name + ".log"), errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


def base_env(extra=None):
    env = dict(os.environ)
    env["MC_DISABLE_SHM"] = "1"
    env.update(extra or {})
    return env


def proto_env(proto, net, i):
    """rdma: UCX on its tcp transport only, over the veth (not shm/cma, not lo)."""
    if proto != "rdma":
        return {}
    return {"UCX_TLS": "tcp", "UCX_NET_DEVICES": net.dev[i], "MC_RDMA_REQUIRE_DEVICE": "0"}


class Run:
    def __init__(self, args):
        self.a = args
        self.build = os.path.abspath(args.build)
        self.tools = os.path.join(self.build, "tools")
        self.logdir = tempfile.mkdtemp(prefix="mc_crosshost_")
        self.net = Net(args.subnet)
        self.procs = Procs(self.logdir)
        self.rows = []
        self.limits = {"b_to_a": [], "a_to_b": []}
        self.port = 20000

    def next_port(self):
        self.port += 1
        return self.port

    # ---- the limit ----

    def iperf3(self, only=None):
        """One stream each way (or only `only`: "b_to_a"/"a_to_b"); appends GB/s to self.limits
        and returns the last figure."""
        gbps = None
        for reverse, key in ((False, "b_to_a"), (True, "a_to_b")):
            if only and key != only:
                continue
            port = self.next_port()
            srv = self.procs.start("iperf3_server", self.net.exec(0) + [
                "iperf3", "-s", "-1", "-B", self.net.addr[0], "-p", str(port)])
            argv = self.net.exec(1) + ["iperf3", "-c", self.net.addr[0], "-p", str(port), "-P", "1",
                                       "-t", str(self.a.duration), "-J"] + (["-R"] if reverse else [])
            out = None
            for _ in range(50):  # the server may not listen yet
                r = subprocess.run(argv, capture_output=True, text=True)
                try:
                    doc = json.loads(r.stdout)
                except ValueError:
                    doc = {}
                if r.returncode == 0 and "sum_received" in doc.get("end", {}):
                    out = doc
                    break
                time.sleep(0.1)
            self.procs.stop(srv)
            if out is None:
                raise RuntimeError("iperf3 failed: " + r.stdout[-500:] + r.stderr[-500:])
            gbps = out["end"]["sum_received"]["bits_per_second"] / 8e9
            self.limits[key].append(gbps)
            if not only:
                print(f"iperf3 one stream {'A->B' if reverse else 'B->A'}: {gbps:.3f} GB/s", flush=True)
        return gbps

    def limit_before(self, writes):
        """iperf3 one stream in the row's direction, right before the row (the machine's load
        changes by the minute: the row's ratio is to this figure)."""
        return self.iperf3("b_to_a" if writes else "a_to_b")

    # ---- the cluster in A ----

    def start_cluster(self, proto):
        self.rpc_port = self.next_port()
        master = self.procs.start("master", self.net.exec(0) + [
            os.path.join(self.tools, "mooncake_master"), f"--rpc_port={self.rpc_port}",
            f"--rpc_address={self.net.addr[0]}", f"--metrics_port={self.next_port()}",
            f"--metrics_host={self.net.addr[0]}"], env=base_env())
        client = self.procs.start("holder", self.net.exec(0) + [
            os.path.join(self.tools, "mooncake_client"), f"--global_segment_size={self.a.segment}",
            f"--host={self.net.addr[0]}", f"--port={self.next_port()}", "--metadata_server=P2PHANDSHAKE",
            f"--master_server_address={self.net.addr[0]}:{self.rpc_port}", f"--protocol={proto}",
            "--enable_http_server=false"], env=base_env(proto_env(proto, self.net, 0)),
            stdout=subprocess.PIPE)
        ready = threading.Event()

        def reader():
            for raw in client.stdout:
                if raw.startswith(b"mooncake_client ready"):
                    ready.set()

        threading.Thread(target=reader, daemon=True).start()
        deadline = time.monotonic() + 30
        while not ready.wait(0.05):
            if client.poll() is not None or master.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the cluster did not start:\n" + self.procs.log_tail("master")
                                   + self.procs.log_tail("holder"))
        self.cluster = (master, client)

    def stop_cluster(self):
        for p in self.cluster:
            self.procs.stop(p)

    def measured(self, fn):
        """Runs fn() and returns (its result, bytes A sent, bytes B sent) on the veth."""
        c0 = self.net.counters()
        res = fn()
        c1 = self.net.counters()
        return res, c1[0] - c0[0], c1[1] - c0[1]

    def add_row(self, path, proto, op, size, gbps, payload, wire, limit, extra=None):
        row = {"path": path, "protocol": proto, "op": op, "size": size, "gbps": gbps,
               "limit_gbps": limit, "ratio_to_iperf3": gbps / limit if limit else None,
               "payload_bytes": payload, "wire_bytes": wire,
               "wire_per_payload": (wire / payload) if payload else None}
        row.update(extra or {})
        self.rows.append(row)
        print(f"  {path:<7} {proto:<5} {op:<12} {size_name(size):>6}  {gbps:7.3f} GB/s  iperf3 "
              f"{limit or 0:.3f}  wire/payload {row['wire_per_payload'] or 0:.3f}", flush=True)

    # ---- the C bench in B ----

    def c_bench(self, proto, op, size):
        out = os.path.join(self.logdir, f"c_{proto}_{op}_{size}.json")
        argv = self.net.exec(1) + [
            os.path.join(self.tools, "mooncake_store_bench"),
            f"--master_server_address={self.net.addr[0]}:{self.rpc_port}",
            f"--local_hostname={self.net.addr[1]}", "--metadata_server=P2PHANDSHAKE",
            f"--protocol={'tcp_forced' if proto == 'tcp' else 'rdma'}", f"--operation={op}",
            f"--value_size={size}", "--threads=1", "--batch_size=1", f"--duration={self.a.duration}",
            "--limits=false", f"--json={out}"]
        env = base_env(proto_env(proto, self.net, 1))

        def go():
            r = subprocess.run(argv, env=env, capture_output=True, text=True)
            with open(os.path.join(self.logdir, "c_bench.log"), "a") as f:
                f.write(" ".join(argv) + "\n" + r.stdout + r.stderr)
            if r.returncode != 0:
                raise RuntimeError(f"mooncake_store_bench failed ({r.returncode}):\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
            with open(out) as f:
                return json.load(f)

        limit = self.limit_before(op == "put")
        doc, a_sent, b_sent = self.measured(go)
        rows = [r for r in doc["rows"] if r.get("operation", r.get("op")) == op]
        r = rows[0]
        ops = r.get("ops") or r.get("total_ops")
        payload = int(ops) * size if ops else 0
        # the whole run moves bytes (warm-up, first touch): report the rate the bench measured and
        # the wire bytes of the direction the op uses
        wire = b_sent if op == "put" else a_sent
        self.add_row("C", proto, op, size, float(r["gbps"]), payload, wire, limit,
                     {"errors": r.get("errors", r.get("failed", 0)), "bench_row": r})

    def pretouch(self, proto, total):
        """Puts and removes `total` bytes through the holder (mooncake_store_bench's first-touch
        pass), so a Python write lands in memory already faulted in: the row measures the path
        across the link, not the holder's first-touch speed on fresh segment memory."""
        argv = self.net.exec(1) + [
            os.path.join(self.tools, "mooncake_store_bench"),
            f"--master_server_address={self.net.addr[0]}:{self.rpc_port}",
            f"--local_hostname={self.net.addr[1]}", "--metadata_server=P2PHANDSHAKE",
            f"--protocol={'tcp_forced' if proto == 'tcp' else 'rdma'}", "--operation=get",
            "--value_size=16MiB", "--num_keys=1", "--duration=1", "--limits=false",
            f"--first_touch_bytes={total}"]
        r = subprocess.run(argv, env=base_env(proto_env(proto, self.net, 1)), capture_output=True,
                           text=True)
        if r.returncode != 0:
            raise RuntimeError(f"pre-touch failed ({r.returncode}):\n{r.stdout[-1500:]}{r.stderr[-1500:]}")

    # ---- the Python bench in B ----

    def py_bench(self, proto, scenario, api, size):
        summary = os.path.join(self.logdir, f"py_{proto}_{scenario}_{api}_{size}.json")
        total = self.a.py_bytes
        objects = max(4, total // size)
        argv = self.net.exec(1) + [
            sys.executable, KV_BENCH, f"--scenario={scenario}", f"--io-api={api}",
            f"--local-hostname={self.net.addr[1]}:{self.next_port()}",
            "--metadata-server=P2PHANDSHAKE", f"--master-server={self.net.addr[0]}:{self.rpc_port}",
            f"--protocol={proto}", "--global-segment-size=0", f"--local-buffer-size={max(64 * MiB, 4 * size)}",
            "--numjobs=1", "--iodepth=1", "--batch-size=1", f"--value-size={size}",
            "--key-size=40", f"--key-prefix=xh{self.next_port()}",
            f"--nr-objects={objects}", f"--summary-json={summary}", "--log-level=WARNING",
            # one payload for every object, made once: otherwise each object's 16 MiB value is
            # made fresh in Python (first-touch page faults, ~0.5 GB/s here) inside the phase, and
            # the row measures that instead of the store
            "--pattern=crosshost"]
        if scenario == "read_perf":
            argv += [f"--runtime={self.a.duration}", f"--prepare-objects={max(4, (256 * MiB) // size)}"]
        env = base_env(proto_env(proto, self.net, 1))
        env["PYTHONPATH"] = os.path.join(self.build, "python") + os.pathsep + env.get("PYTHONPATH", "")

        def go():
            r = subprocess.run(argv, env=env, capture_output=True, text=True)
            with open(os.path.join(self.logdir, "py_bench.log"), "a") as f:
                f.write(" ".join(argv) + "\n" + r.stdout + r.stderr)
            if r.returncode != 0:
                raise RuntimeError(f"store_kv_bench.py failed ({r.returncode}):\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
            with open(summary) as f:
                return json.load(f)

        limit = self.limit_before(scenario == "write_perf")
        doc, a_sent, b_sent = self.measured(go)
        ph = doc["phases"][scenario]
        payload = int(ph["bytes"])  # successful kvs x value size
        gbps = payload / float(ph["duration_sec"]) / 1e9
        if scenario == "read_perf":  # the prepare phase wrote B->A; the reads came A->B
            wire = a_sent
        else:
            wire = b_sent
        self.add_row("Python", proto, f"{scenario.split('_')[0]}_{api}", size, gbps, payload, wire, limit,
                     {"failed_kvs": ph.get("failed_kvs", 0), "misses": ph.get("misses", 0),
                      "lat_p50_ms": ph.get("lat_p50_ms")})

    # ---- all of it ----

    def run(self):
        self.net.up()
        print(f"namespaces {self.net.ns[0]} ({self.net.addr[0]}, holder) and {self.net.ns[1]} "
              f"({self.net.addr[1]}, reader/writer); logs in {self.logdir}", flush=True)
        self.iperf3()
        for proto in self.a.protocols:
            if "c" in self.a.paths:
                self.start_cluster(proto)
                for size in self.a.sizes:
                    for op in ("put", "get"):
                        self.c_bench(proto, op, size)
                self.stop_cluster()
            if "python" in self.a.paths:
                for size in self.a.sizes:
                    for api in self.a.apis:
                        for scenario in ("write_perf", "read_perf"):
                            self.start_cluster(proto)  # a fresh pool: nothing left from earlier runs
                            if self.a.pretouch:
                                self.pretouch(proto, self.a.py_bytes + 256 * MiB)
                            self.py_bench(proto, scenario, api, size)
                            self.stop_cluster()
        self.iperf3()

    def report(self):
        rng = {k: (min(v), max(v)) for k, v in self.limits.items() if v}
        print(f"\niperf3 one stream (GB = 1e9 bytes), every run: B->A {rng.get('b_to_a')}, "
              f"A->B {rng.get('a_to_b')}; each row's ratio is to the run just before it")
        print(f"{'path':<8} {'proto':<5} {'op':<12} {'size':>6} {'GB/s':>8} {'iperf3':>8} "
              f"{'x iperf3':>9} {'wire/payload':>13}")
        for r in self.rows:
            print(f"{r['path']:<8} {r['protocol']:<5} {r['op']:<12} {size_name(r['size']):>6} "
                  f"{r['gbps']:8.3f} {r['limit_gbps'] or 0:8.3f} {r['ratio_to_iperf3'] or 0:9.2f} "
                  f"{r['wire_per_payload'] or 0:13.3f}")
        doc = {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "uptime": open("/proc/loadavg").read().split()[:3],
               "nproc": os.cpu_count(), "kernel": os.uname().release, "config": vars(self.a),
               "iperf3_one_stream_gbps": self.limits, "rows": self.rows}
        if self.a.json:
            with open(self.a.json, "w") as f:
                json.dump(doc, f, indent=1, default=str)
        if self.a.csv:
            cols = ["path", "protocol", "op", "size", "gbps", "limit_gbps", "ratio_to_iperf3",
                    "payload_bytes", "wire_bytes", "wire_per_payload"]
            with open(self.a.csv, "w", newline="") as f:
                w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
                w.writeheader()
                w.writerows(self.rows)

    def close(self):
        self.procs.stop_all()
        self.net.close()


def main():
    p = argparse.ArgumentParser(
        description=__doc__.split("\n", 2)[2], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default=os.path.join(REPO, "build"), help="build tree (default ./build)")
    p.add_argument("--sizes", default="1MiB,4MiB,16MiB", help="value sizes, comma list")
    p.add_argument("--protocols", default="tcp,rdma", help="tcp and/or rdma (UCX_TLS=tcp)")
    p.add_argument("--paths", default="c,python", help="c and/or python")
    p.add_argument("--apis", default="plain,zcopy", help="Python io-api: plain and/or zcopy")
    p.add_argument("--duration", type=int, default=3, help="seconds per iperf3 / timed row (default 3)")
    p.add_argument("--py-bytes", type=parse_size, default=parse_size("1GiB"),
                   help="bytes a Python write_perf row writes (default 1GiB)")
    p.add_argument("--no-pretouch", dest="pretouch", action="store_false",
                   help="Python rows: skip faulting in the holder's memory first (then writes "
                        "measure the holder's first-touch speed too)")
    p.add_argument("--segment", default="4GB", help="the holder's global_segment_size (default 4GB)")
    p.add_argument("--subnet", default="10.231.77.0/24", help="addresses inside the namespaces (/24)")
    p.add_argument("--json", default="crosshost_bench.json", help="JSON output ('' = none)")
    p.add_argument("--csv", default="crosshost_bench.csv", help="CSV output ('' = none)")
    a = p.parse_args()
    a.sizes = [parse_size(s) for s in a.sizes.split(",")]
    a.protocols = [x for x in a.protocols.split(",") if x]
    a.paths = [x for x in a.paths.split(",") if x]
    a.apis = [x for x in a.apis.split(",") if x]
    if os.geteuid() != 0:
        sys.exit("crosshost_bench: needs root (ip netns)")
    for tool in ("mooncake_master", "mooncake_client", "mooncake_store_bench"):
        if not os.access(os.path.join(a.build, "tools", tool), os.X_OK):
            sys.exit(f"crosshost_bench: {a.build}/tools/{tool} not built")
    if subprocess.run(["sh", "-c", "command -v iperf3"], capture_output=True).returncode != 0:
        sys.exit("crosshost_bench: iperf3 not installed (dependencies.sh)")
    run = Run(a)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        run.run()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (RuntimeError, subprocess.CalledProcessError) as e:
        print(f"crosshost_bench: {e} {getattr(e, 'stderr', '') or ''}", file=sys.stderr)
        run.report()
        return 1
    finally:
        run.close()
    run.report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
