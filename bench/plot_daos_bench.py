#!/usr/bin/env python3
"""plot_daos_bench.py — draws daos_adapter_bench summaries (the SUMMARY JSON) into one PNG.

    bench/plot_daos_bench.py SUMMARY.json [MORE.json ...] -o FILE.png [--title TEXT]

Three panels, every figure taken from the JSON as written (docs/daos_adapter_bench.md has the
schema; nothing is recomputed but the axis scales):
  1. aggregate throughput per round ("write 1", "read 1", ...): the [AGG] line's MiB/s, one bar
     per input file;
  2. throughput per rank per round: each rank's MiB/s, one marker per rank (one colour per file);
  3. latency percentiles per round: p50, p95, p99 and max in ms (log scale), one group per file.
A run whose "result" is not "ok", or a round with failed operations, is labelled FAILED.
Several files side by side compare runs (e.g. fs type daos vs posix, or NPROCS=4 vs 8).

scripts/daos_adapter_bench.sh --plot FILE.png runs this after the benchmark.
Needs matplotlib (Debian: python3-matplotlib); exit 2 with a message when it is missing or an
input is not a daos_adapter_bench summary, 0 when the PNG was written.
"""
import argparse
import json
import os
import sys

PROG = "plot_daos_bench.py"
PERCENTILES = ("p50", "p95", "p99", "max")


def die(msg):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(2)


def load_summary(path):
    """The summary dict of a daos_adapter_bench JSON; dies with the reason when it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            s = json.load(f)
    except OSError as e:
        die(f"cannot read {path}: {e.strerror}")
    except ValueError as e:
        die(f"{path} is not JSON: {e}")
    if not isinstance(s, dict) or s.get("benchmark") != "daos_adapter_bench":
        die(f"{path} is not a daos_adapter_bench summary (no \"benchmark\": \"daos_adapter_bench\")")
    rounds = s.get("rounds")
    if not isinstance(rounds, list):
        die(f"{path} has no \"rounds\" list")
    for r in rounds:
        if not isinstance(r, dict) or not {"op", "round", "mib_s", "latency_ms"} <= r.keys():
            die(f"{path}: a round lacks op/round/mib_s/latency_ms: {str(r)[:200]}")
    return s


def label_of(path, s):
    c = s.get("config", {})
    label = os.path.basename(path)
    label += f" ({c.get('fs_type', '?')}, {s.get('mpi', {}).get('ranks', '?')} ranks)"
    if s.get("result") != "ok":
        label += " FAILED"
    return label


def round_name(r):
    return f"{r['op']} {r['round']}" + (" FAILED" if r.get("failed_ops") else "")


def plot(paths, summaries, out, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []  # round names in first-seen order across the files
    for s in summaries:
        for r in s["rounds"]:
            n = f"{r['op']} {r['round']}"
            if n not in names:
                names.append(n)
    nfiles = len(summaries)
    width = 0.8 / nfiles
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    fig, axes = plt.subplots(3, 1, figsize=(max(8, 2.2 * len(names) * max(1, nfiles)), 12))
    ax_agg, ax_rank, ax_lat = axes
    for fi, (path, s) in enumerate(zip(paths, summaries)):
        color = colors[fi % len(colors)]
        label = label_of(path, s)
        by_name = {f"{r['op']} {r['round']}": r for r in s["rounds"]}
        off = (fi - (nfiles - 1) / 2) * width
        xs = [i + off for i, n in enumerate(names) if n in by_name]
        rs = [by_name[n] for n in names if n in by_name]
        bars = ax_agg.bar(xs, [r["mib_s"] for r in rs], width, label=label, color=color)
        for bar, r in zip(bars, rs):
            text = f"{r['mib_s']:.0f}" + ("\nFAILED" if r.get("failed_ops") else "")
            ax_agg.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=8)
        first = True
        for x, r in zip(xs, rs):
            per_rank = r.get("per_rank", [])
            n = len(per_rank)
            for k, pr in enumerate(per_rank):
                px = x + (k - (n - 1) / 2) * (width * 0.8 / max(n, 1))
                ax_rank.plot(px, pr["mib_s"], "o", color=color, label=label if first else None)
                if n <= 16:
                    ax_rank.annotate(str(pr["rank"]), (px, pr["mib_s"]), fontsize=7,
                                     xytext=(0, 4), textcoords="offset points", ha="center")
                first = False
        pw = width / len(PERCENTILES)
        for pi, p in enumerate(PERCENTILES):
            px = [x + (pi - (len(PERCENTILES) - 1) / 2) * pw for x in xs]
            vals = [max(r["latency_ms"].get(p, 0.0), 1e-6) for r in rs]
            ax_lat.bar(px, vals, pw, color=color, alpha=0.4 + 0.6 * pi / len(PERCENTILES),
                       label=f"{label} {p}")
    ticks = list(range(len(names)))
    for ax in axes:
        ax.set_xticks(ticks)
        ax.set_xticklabels(names)
        ax.grid(axis="y", alpha=0.3)
    ax_agg.set_ylabel("MiB/s (all ranks)")
    ax_agg.set_title("aggregate throughput per round (value bytes / slowest rank's wall time)")
    ax_rank.set_ylabel("MiB/s (one rank)")
    ax_rank.set_title("throughput per rank (marker label = rank)")
    ax_lat.set_ylabel("ms per object operation")
    ax_lat.set_yscale("log")
    ax_lat.set_title("latency percentiles per round: " + ", ".join(PERCENTILES))
    for ax in axes:
        ax.legend(fontsize=7, loc="best")
    if title is None:
        c = summaries[0].get("config", {})
        title = (f"daos_adapter_bench: {c.get('nr', '?')} objects/rank x "
                 f"{c.get('size_bytes', 0) / (1 << 20):g} MiB, {c.get('threads', '?')} "
                 f"threads/rank, {summaries[0].get('started_at', '')}")
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("summaries", nargs="+", metavar="SUMMARY.json",
                   help="daos_adapter_bench SUMMARY JSON files (one series each)")
    p.add_argument("-o", "--output", required=True, metavar="FILE.png", help="PNG to write")
    p.add_argument("--title", default=None, help="figure title (default: from the first file)")
    a = p.parse_args(argv)
    out_dir = os.path.dirname(os.path.abspath(a.output))
    if not os.path.isdir(out_dir):
        die(f"-o {a.output}: directory {out_dir} does not exist")
    try:
        import matplotlib  # noqa: F401 - checked before reading anything
    except ImportError:
        die("matplotlib is not installed for this python3 (Debian: apt-get install "
            "python3-matplotlib)")
    summaries = [load_summary(path) for path in a.summaries]
    if not any(s["rounds"] for s in summaries):
        die("no write or read rounds in " + ", ".join(a.summaries))
    tmp = f"{a.output}.tmp{os.getpid()}"
    try:
        plot(a.summaries, summaries, tmp, a.title)
        os.replace(tmp, a.output)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(f"{PROG}: wrote {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
