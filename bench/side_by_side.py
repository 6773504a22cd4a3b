#!/usr/bin/env python3
"""side_by_side.py — the same store_kv_bench.py shapes against two `mooncake` modules, interleaved.

For users deciding between two installed Mooncake Python modules (e.g. ours and upstream's wheel):
every shape (scenario, io api, value size, jobs) runs as a separate store_kv_bench.py process
against each module in turn — ours, other, ours, other, ... for --repeats rounds, so both sides
see the same machine load — and the table gives min and median of each side and the ratio
ours/other. Nothing is vendored: each side is only a directory put first on PYTHONPATH (where
`import mooncake.store` must resolve) and that side's own mooncake_master.

    bench/side_by_side.py --other-pythonpath /path/to/site-packages [--other-master PATH]
                          [--repeats 3] [--shape write_perf:plain:16MiB:4 ...] [--json OUT.json]

Each run gets a fresh master of its own side (RPC, metrics and the embedded HTTP metadata server
on free 127.0.0.1 ports; started with flags both implementations share:
--rpc_address/--rpc_port, --metrics_host/--metrics_port, --enable_http_metadata_server with its
host and port), stopped after the run; the benchmark process contributes the memory segment
(--global-segment-size) and a local buffer, over tcp on loopback. Keys carry a per-run prefix.

Defaults:
  --ours-pythonpath   <repo>/build/python (this tree's build)
  --other-pythonpath  required
  --*-master          the first executable of DIR/mooncake/mooncake_master (upstream's wheel
                      ships its binary inside the package: mooncake/cli.py execs it), DIR/../../../bin/
                      mooncake_master (a prefix's console script, e.g. a venv's bin/), DIR/../tools/
                      mooncake_master (a mooncake-c build tree); an error names every path tried
  --python            this interpreter; --other-python the same unless given
  --bench             <repo>/mooncake-store/benchmarks/store_kv_bench.py, for both sides
  shapes              write_perf and read_perf x plain and zcopy x 4 KiB and 16 MiB x 1 and 4 jobs
                      (--shape SCENARIO:API:SIZE:JOBS[:BATCH], repeatable, replaces the matrix)
  objects per run     --objects, default 4096 for values <= 64 KiB, else 512 MiB / value size
                      (at least 8)

Figures: MiB/s (phase "MiB_per_sec") for values > 64 KiB, objects/s ("kv_per_sec") otherwise,
from the measured phase (write_perf or read_perf) of the summary JSON each run writes. A row is
FAILED — never a ratio — when any run of either side exited non-zero, wrote no summary, reported
"ok": false, failed or unverified objects, a write phase that found existing keys
("existing_keys" > 0), or no successful object. The console table, a JSON (--json, default
side_by_side.json) and a CSV next to it (.csv) hold the same rows; the JSON also keeps every
run's figures and the load average before and after.

Exit: 0 every row ok, 1 some row failed, 2 bad arguments or a side that cannot start (a clear
message naming what was not found). Standard library only.
"""
import argparse
import csv
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

PROG = "side_by_side.py"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KiB, MiB = 1 << 10, 1 << 20
SMALL_LIMIT = 64 * KiB  # values up to this are measured in objects/s, larger ones in MiB/s
SIDES = ("ours", "other")
START_TIMEOUT_S = 30.0


class UsageError(Exception):
    """A bad argument or a side that cannot be used: exit 2 with the message."""


def parse_size(text):
    s = text.strip().lower()
    for suffix, mult in (("kib", KiB), ("mib", MiB), ("gib", 1 << 30), ("k", KiB), ("m", MiB),
                         ("g", 1 << 30), ("b", 1), ("", 1)):
        if s.endswith(suffix) and s[:len(s) - len(suffix)].isdigit():
            return int(s[:len(s) - len(suffix)]) * mult
    raise UsageError(f"not a size: {text!r} (e.g. 4096, 4KiB, 16MiB)")


def fmt_size(n):
    for unit, mult in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", KiB)):
        if n >= mult and n % mult == 0:
            return f"{n // mult}{unit}"
    return str(n)


def parse_shape(text):
    parts = text.split(":")
    if len(parts) not in (4, 5):
        raise UsageError(f"--shape {text!r}: expected SCENARIO:API:SIZE:JOBS[:BATCH]")
    scenario, api = parts[0], parts[1]
    if scenario not in ("write_perf", "read_perf"):
        raise UsageError(f"--shape {text!r}: scenario must be write_perf or read_perf")
    if api not in ("plain", "zcopy"):
        raise UsageError(f"--shape {text!r}: api must be plain or zcopy")
    try:
        jobs = int(parts[3])
        batch = int(parts[4]) if len(parts) == 5 else 1
    except ValueError:
        raise UsageError(f"--shape {text!r}: JOBS and BATCH must be integers") from None
    size = parse_size(parts[2])
    if size <= 0 or size % 512 or jobs < 1 or batch < 1:
        raise UsageError(f"--shape {text!r}: SIZE must be a positive multiple of 512 "
                         "(store_kv_bench's write alignment), JOBS and BATCH >= 1")
    return {"scenario": scenario, "io_api": api, "value_size": size, "numjobs": jobs,
            "batch_size": batch}


def shape_name(s):
    name = f"{s['scenario']} {s['io_api']} {fmt_size(s['value_size'])} x{s['numjobs']}j"
    return name + (f" b{s['batch_size']}" if s["batch_size"] > 1 else "")


def default_shapes():
    return [{"scenario": sc, "io_api": api, "value_size": size, "numjobs": jobs, "batch_size": 1}
            for sc in ("write_perf", "read_perf") for size in (4 * KiB, 16 * MiB)
            for api in ("plain", "zcopy") for jobs in (1, 4)]


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_average():
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return None


def master_candidates(pythonpath):
    return [os.path.join(pythonpath, "mooncake", "mooncake_master"),
            os.path.normpath(os.path.join(pythonpath, "..", "..", "..", "bin", "mooncake_master")),
            os.path.normpath(os.path.join(pythonpath, "..", "tools", "mooncake_master"))]


def side_env(pythonpath):
    env = dict(os.environ)
    env["PYTHONPATH"] = pythonpath  # this side's directory only: no other mooncake leaks in
    env.pop("MOONCAKE_STORE_MODULE", None)
    env.pop("PYTHONHOME", None)
    return env


def resolve_side(name, pythonpath, master, python):
    """The side's settings after checking each exists; UsageError naming what is missing."""
    opt = f"--{name}-pythonpath"
    if not os.path.isdir(pythonpath):
        raise UsageError(f"{opt} {pythonpath}: no such directory")
    pythonpath = os.path.realpath(pythonpath)
    if not os.path.isdir(os.path.join(pythonpath, "mooncake")):
        raise UsageError(f"{opt} {pythonpath}: no mooncake package there "
                         f"({os.path.join(pythonpath, 'mooncake')} not found)")
    py = shutil.which(python)
    if not py:
        raise UsageError(f"--{'python' if name == 'ours' else 'other-python'} {python}: "
                         "not an executable")
    if master:
        if not (os.path.isfile(master) and os.access(master, os.X_OK)):
            raise UsageError(f"--{name}-master {master}: not an executable file")
    else:
        tried = master_candidates(pythonpath)
        master = next((p for p in tried if os.path.isfile(p) and os.access(p, os.X_OK)), None)
        if not master:
            raise UsageError(f"{name}: mooncake_master not found; looked for "
                             f"{', '.join(tried)}; give --{name}-master PATH")
    probe = subprocess.run(
        [py, "-c", "import mooncake.store as m; print(m.__file__); "
                   "print(m.MooncakeDistributedStore.__module__)"],
        env=side_env(pythonpath), capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["?"])[-1]
        raise UsageError(f"{name}: `import mooncake.store` fails with {py} and "
                         f"PYTHONPATH={pythonpath}: {last}")
    module_file = os.path.realpath(probe.stdout.splitlines()[0])
    if not module_file.startswith(pythonpath + os.sep):
        raise UsageError(f"{name}: mooncake.store was imported from {module_file}, not from "
                         f"under {opt} {pythonpath}")
    return {"pythonpath": pythonpath, "master": os.path.realpath(master), "python": py,
            "module_file": module_file}


class Master:
    """One side's mooncake_master on free loopback ports, with its HTTP metadata server."""

    def __init__(self, binary, logdir, tag):
        self.rpc_port, self.http_port = free_port(), free_port()
        self.log_path = os.path.join(logdir, tag + ".master.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [binary, f"--rpc_port={self.rpc_port}", "--rpc_address=127.0.0.1",
             f"--metrics_port={free_port()}", "--metrics_host=127.0.0.1",
             "--enable_http_metadata_server=true", "--http_metadata_server_host=127.0.0.1",
             f"--http_metadata_server_port={self.http_port}"],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            for port in (self.rpc_port, self.http_port):
                self._wait_port(port)
        except BaseException:
            self.stop()
            raise

    def _wait_port(self, port):
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mooncake_master exited with {self.proc.returncode}: "
                                   + self.tail())
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"mooncake_master: port {port} did not open in {START_TIMEOUT_S} s")

    def tail(self):
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read()[-600:].decode(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def objects_for(shape, args):
    if args.objects:
        return args.objects
    if shape["value_size"] <= SMALL_LIMIT:
        return 4096
    return max(8, (512 * MiB) // shape["value_size"])


def bench_argv(side, shape, nr, master, args, key_prefix, summary_path):
    size = shape["value_size"]
    data = nr * size
    segment = max(64 * MiB, data + data // 4 + 32 * MiB)
    lanes = shape["numjobs"] * shape["batch_size"]
    local_buffer = max(32 * MiB, 2 * lanes * size + 16 * MiB)
    return [side["python"], args.bench,
            "--local-hostname", f"127.0.0.1:{free_port()}",
            "--metadata-server", f"http://127.0.0.1:{master.http_port}/metadata",
            "--master-server", f"127.0.0.1:{master.rpc_port}", "--protocol", "tcp",
            "--scenario", shape["scenario"], "--io-api", shape["io_api"],
            "--numjobs", str(shape["numjobs"]), "--batch-size", str(shape["batch_size"]),
            "--nr-objects", str(nr), "--value-size", str(size),
            "--global-segment-size", str(segment), "--local-buffer-size", str(local_buffer),
            "--key-size", "64", "--key-prefix", key_prefix,
            "--summary-json", summary_path, "--progress-interval", "0"]


def judge(shape, code, summary):
    """(figures dict, None) for a good run, else (None, why it failed)."""
    if summary is None:
        return None, f"exit {code}, no summary written"
    phase = summary.get("phases", {}).get(shape["scenario"])
    if code != 0 or not summary.get("ok"):
        return None, f"exit {code}, ok {summary.get('ok')}: {summary.get('error') or 'failures'}"
    if phase is None:
        return None, f"no {shape['scenario']} phase in the summary"
    for key in ("failed_kvs", "verify_failures", "existing_keys"):
        if phase.get(key):
            return None, f"{key} {phase[key]}"
    if not phase.get("successful_kvs"):
        return None, "no successful object"
    return {"MiB_per_sec": phase["MiB_per_sec"], "kv_per_sec": phase["kv_per_sec"],
            "successful_kvs": phase["successful_kvs"], "bytes": phase["bytes"]}, None


def run_one(side_name, side, shape, nr, args, logdir, tag):
    summary_path = os.path.join(logdir, tag + ".json")
    run = {"side": side_name, "tag": tag}
    try:
        master = Master(side["master"], logdir, tag)
    except (OSError, RuntimeError) as e:
        run["failure"] = f"master did not start: {e}"
        return run
    try:
        argv = bench_argv(side, shape, nr, master, args, f"sbs-{os.getpid()}-{tag}",
                          summary_path)
        with open(os.path.join(logdir, tag + ".bench.log"), "wb") as log:
            try:
                proc = subprocess.run(argv, env=side_env(side["pythonpath"]), stdout=log,
                                      stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      timeout=args.timeout)
                code = proc.returncode
            except subprocess.TimeoutExpired:
                code = f"timeout after {args.timeout} s"
    finally:
        master.stop()
    summary = None
    try:
        with open(summary_path, encoding="utf-8") as f:
            summary = json.load(f)
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as e:
        run.update(exit_code=code, failure=f"unreadable summary {summary_path}: {e}")
        return run
    figures, why = judge(shape, code, summary)
    run["exit_code"] = code
    if figures:
        run.update(figures)
    else:
        run["failure"] = why
    return run


def summarize(shape, runs):
    metric = "kv_per_sec" if shape["value_size"] <= SMALL_LIMIT else "MiB_per_sec"
    row = {"shape": shape_name(shape), **shape, "metric": metric,
           "unit": "objects/s" if metric == "kv_per_sec" else "MiB/s"}
    failures = [f"{r['side']} {r['tag']}: {r['failure']}" for r in runs if "failure" in r]
    for side in SIDES:
        vals = [r[metric] for r in runs if r["side"] == side and "failure" not in r]
        row[side] = {"values": vals, "min": min(vals) if vals else None,
                     "median": statistics.median(vals) if vals else None}
    if failures:
        row.update(status="failed", failure="; ".join(failures), ratio_median=None,
                   ratio_min=None, ratio_max=None)
        return row
    pairs = [a[metric] / b[metric] for a, b in zip(
        [r for r in runs if r["side"] == "ours"], [r for r in runs if r["side"] == "other"])
        if b[metric] > 0]
    med_other = row["other"]["median"]
    row.update(status="ok", failure="",
               ratio_median=row["ours"]["median"] / med_other if med_other else None,
               ratio_min=min(pairs) if pairs else None, ratio_max=max(pairs) if pairs else None)
    return row


def fmt(v):
    if v is None:
        return "-"
    return f"{v:.0f}" if v >= 100 else f"{v:.2f}"


def print_table(rows, repeats):
    head = ("shape", "unit", "ours min/median", "other min/median", "ours/other (pairs)")
    lines = []
    for r in rows:
        o, t = r["ours"], r["other"]
        if r["status"] == "ok":
            ratio = (f"{r['ratio_median']:.2f} ({r['ratio_min']:.2f}-{r['ratio_max']:.2f})"
                     if r["ratio_median"] is not None else "-")
        else:
            ratio = "FAILED"
        lines.append((r["shape"], r["unit"], f"{fmt(o['min'])}/{fmt(o['median'])}",
                      f"{fmt(t['min'])}/{fmt(t['median'])}", ratio))
    widths = [max(len(x[i]) for x in [head] + lines) for i in range(len(head))]
    print(f"=== side by side: {repeats} interleaved repeat(s) per side; ratio = median ours / "
          "median other (range over the interleaved pairs) ===")
    for line in [head] + lines:
        print("  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip())
    for r in rows:
        if r["status"] != "ok":
            print(f"FAILED {r['shape']}: {r['failure']}")


def write_outputs(path, report):
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
        f.write("\n")
    os.replace(tmp, path)
    csv_path = (path[:-5] if path.endswith(".json") else path) + ".csv"
    tmp = f"{csv_path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["shape", "scenario", "io_api", "value_size", "numjobs", "batch_size",
                    "unit", "ours_min", "ours_median", "other_min", "other_median",
                    "ratio_median", "ratio_min", "ratio_max", "status", "failure"])
        for r in report["rows"]:
            w.writerow([r["shape"], r["scenario"], r["io_api"], r["value_size"], r["numjobs"],
                        r["batch_size"], r["unit"], r["ours"]["min"], r["ours"]["median"],
                        r["other"]["min"], r["other"]["median"], r["ratio_median"],
                        r["ratio_min"], r["ratio_max"], r["status"], r["failure"]])
    os.replace(tmp, csv_path)
    return csv_path


def parse_args(argv):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0],
                                epilog=__doc__.split("\n", 2)[2],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ours-pythonpath", default=os.path.join(REPO, "build", "python"))
    p.add_argument("--ours-master", default="")
    p.add_argument("--other-pythonpath", required=True,
                   help="directory holding the other `mooncake` package (e.g. site-packages)")
    p.add_argument("--other-master", default="")
    p.add_argument("--python", default=sys.executable, help="interpreter for ours")
    p.add_argument("--other-python", default="", help="interpreter for other (default --python)")
    p.add_argument("--bench", default=os.path.join(REPO, "mooncake-store", "benchmarks",
                                                   "store_kv_bench.py"))
    p.add_argument("--shape", action="append", default=[],
                   help="SCENARIO:API:SIZE:JOBS[:BATCH], repeatable (default: the matrix)")
    p.add_argument("--repeats", type=int, default=3, help="interleaved runs per side (3)")
    p.add_argument("--objects", type=int, default=0, help="objects per run (default by size)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per run (600)")
    p.add_argument("--json", default="side_by_side.json", help="JSON output (CSV next to it)")
    p.add_argument("--keep-logs", default="", help="keep every run's logs and summaries here")
    return p.parse_args(argv)


def main(argv=None):
    a = parse_args(argv)
    try:
        if a.repeats < 1 or a.objects < 0 or a.timeout <= 0:
            raise UsageError("--repeats must be >= 1, --objects >= 0, --timeout > 0")
        if not os.path.isfile(a.bench):
            raise UsageError(f"--bench {a.bench}: not found")
        out_dir = os.path.dirname(os.path.abspath(a.json))
        if not os.path.isdir(out_dir):
            raise UsageError(f"--json {a.json}: directory {out_dir} does not exist")
        shapes = [parse_shape(s) for s in a.shape] or default_shapes()
        sides = {"ours": resolve_side("ours", a.ours_pythonpath, a.ours_master, a.python),
                 "other": resolve_side("other", a.other_pythonpath, a.other_master,
                                       a.other_python or a.python)}
    except UsageError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    for name in SIDES:
        s = sides[name]
        print(f"{name}: module {s['module_file']} ({s['python']}), master {s['master']}")
    if a.keep_logs:
        os.makedirs(a.keep_logs, exist_ok=True)
        logdir, cleanup = a.keep_logs, None
    else:
        cleanup = tempfile.TemporaryDirectory(prefix="side_by_side.")
        logdir = cleanup.name
    report = {"tool": PROG, "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "loadavg_before": load_average(), "repeats": a.repeats, "bench": a.bench,
              "sides": sides, "rows": [], "runs": []}
    runs = {i: [] for i in range(len(shapes))}
    interrupted = False

    def on_term(signum, frame):  # SIGTERM as ctrl-c: the runs' masters are stopped on the way
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    try:
        # Interleaved: each repeat runs every shape on both sides; the side going first
        # alternates with the repeat so neither always runs on a warmer machine.
        for rep in range(a.repeats):
            order = SIDES if rep % 2 == 0 else SIDES[::-1]
            for i, shape in enumerate(shapes):
                nr = objects_for(shape, a)
                for side in order:
                    tag = f"r{rep}-s{i}-{side}"
                    run = run_one(side, sides[side], shape, nr, a, logdir, tag)
                    run.update(repeat=rep, shape=shape_name(shape), nr_objects=nr)
                    runs[i].append(run)
                    report["runs"].append(run)
                    state = run.get("failure") or (
                        f"{run['MiB_per_sec']:.1f} MiB/s, {run['kv_per_sec']:.0f} objects/s")
                    print(f"[{rep + 1}/{a.repeats}] {shape_name(shape)} {side}: {state}",
                          flush=True)
    except KeyboardInterrupt:
        interrupted = True
        print(f"{PROG}: interrupted; the pairs done so far follow", file=sys.stderr)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if cleanup:
            cleanup.cleanup()
    report["rows"] = [summarize(shape, runs[i]) for i, shape in enumerate(shapes)]
    report["loadavg_after"] = load_average()
    report["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    print_table(report["rows"], a.repeats)
    print(f"load average before {report['loadavg_before']}, after {report['loadavg_after']}")
    csv_path = write_outputs(a.json, report)
    print(f"{PROG}: wrote {a.json} and {csv_path}")
    if interrupted:
        return 130
    return 0 if all(r["status"] == "ok" for r in report["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
