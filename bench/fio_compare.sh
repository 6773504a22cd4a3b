#!/usr/bin/env bash
# bench/fio_compare.sh — the FS adapter (fs type posix) against fio on the same local directory
# in the same run: daos_adapter_bench through scripts/daos_adapter_bench.sh (a WR_ONLY=1 run,
# then an RD_ONLY=1 run that reads, verifies and deletes) and fio with the same shape:
#   one file per object (--nrfiles = NR / THREADS per job, --filesize = SIZE),
#   --numjobs = THREADS x NPROCS, --bs = XFER for writes (SIZE when XFER=0, i.e. unsplit) and
#   READ_XFER for reads, --ioengine=psync, --end_fsync=1 for writes, files created during the
#   timed write (--create_on_open=1, --fallocate=none, as the adapter creates its objects),
#   each file written/read start to end (--file_service_type=sequential).
# Before every read phase the files are dropped from the page cache (bench/drop_page_cache.py:
# fsync + posix_fadvise(DONTNEED) per file), so both read from the device.
# Each of REPEAT repetitions runs both tools (alternating which goes first), after one warm-up
# repetition that is not counted; every write phase starts after `sync` and a 1 s settle. The
# medians are compared (also printed: the median of the per-repetition ratios). Target: the
# adapter's aggregate write and read MiB/s >= 0.85 x fio's.
# (Small VMs are noisy: fresh page-cache pages can cost a host-side fault each, so single runs of
# either tool vary by 2-3x; look at the per-repetition lines before trusting one number.)
#
#   bash bench/fio_compare.sh                       # defaults below, about a minute
#   NR=128 SIZE=64m REPEAT=5 bash bench/fio_compare.sh
#
# Variables (default): WORK (/var/tmp/mc_fio_compare) the directory used and removed,
# NPROCS (2) THREADS (2) NR (16, a multiple of THREADS) SIZE (16m) XFER (0) READ_XFER (8m)
# REPEAT (9) OUT ($WORK/../mc_fio_compare.json) BUILD_DIR (<repo>/build)
# DAOS_ADAPTER_BENCH_BIN (BUILD_DIR/tools/daos_adapter_bench).
# Prints a table and writes OUT (JSON: machine, config, every repetition, medians, ratios).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$repo/build}
export DAOS_ADAPTER_BENCH_BIN=${DAOS_ADAPTER_BENCH_BIN:-$BUILD_DIR/tools/daos_adapter_bench}
WORK=${WORK:-/var/tmp/mc_fio_compare}
NPROCS=${NPROCS:-2}
THREADS=${THREADS:-2}
NR=${NR:-16}
SIZE=${SIZE:-16m}
XFER=${XFER:-0}
READ_XFER=${READ_XFER:-8m}
REPEAT=${REPEAT:-9}
OUT=${OUT:-$(dirname "$WORK")/mc_fio_compare.json}
export NPROCS THREADS NR SIZE XFER READ_XFER # recorded in OUT

die() {
  echo "fio_compare.sh: $*" >&2
  exit 2
}
command -v fio >/dev/null || die "fio not found (sudo bash dependencies.sh)"
[ -x "$DAOS_ADAPTER_BENCH_BIN" ] || die "no $DAOS_ADAPTER_BENCH_BIN: build first (cmake --build build)"
[ $((NR % THREADS)) -eq 0 ] || die "NR=$NR must be a multiple of THREADS=$THREADS (fio --nrfiles per job)"
fio_bs() { if [ "$1" = 0 ]; then echo "$SIZE"; else echo "$1"; fi; }
bs_w=$(fio_bs "$XFER")
bs_r=$(fio_bs "$READ_XFER")

rm -rf "$WORK"
mkdir -p "$WORK/adapter" "$WORK/fio" "$WORK/results"
trap 'rm -rf "$WORK"' EXIT
res=$WORK/results

settle() { sync; sleep 1; }

run_adapter() { # rep
  settle
  local common=(NPROCS="$NPROCS" THREADS="$THREADS" NR="$NR" SIZE="$SIZE" XFER="$XFER"
    READ_XFER="$READ_XFER" DFS_PATH="$WORK/adapter" EXTRA_ARGS=--fs-type=posix)
  env "${common[@]}" WR_ONLY=1 SUMMARY="$res/adapter_w$1.json" \
    bash "$repo/scripts/daos_adapter_bench.sh" >"$res/adapter_w$1.log" 2>&1 ||
    die "adapter write failed: $(tail -5 "$res/adapter_w$1.log")"
  python3 "$repo/bench/drop_page_cache.py" "$WORK/adapter" >/dev/null
  env "${common[@]}" RD_ONLY=1 SUMMARY="$res/adapter_r$1.json" \
    bash "$repo/scripts/daos_adapter_bench.sh" >"$res/adapter_r$1.log" 2>&1 ||
    die "adapter read failed: $(tail -5 "$res/adapter_r$1.log")"
}

fio_args=(--directory="$WORK/fio" --nrfiles=$((NR / THREADS)) --filesize="$SIZE"
  --numjobs=$((THREADS * NPROCS)) --ioengine=psync --file_service_type=sequential
  --group_reporting --output-format=json)
fio_write=(fio --name=mc_compare --rw=write --bs="$bs_w" --end_fsync=1 --create_on_open=1
  --fallocate=none "${fio_args[@]}")
fio_read=(fio --name=mc_compare --rw=read --bs="$bs_r" "${fio_args[@]}")

run_fio() { # rep
  rm -rf "$WORK/fio" && mkdir -p "$WORK/fio"
  settle
  "${fio_write[@]}" --output="$res/fio_w$1.json" >/dev/null || die "fio write failed"
  python3 "$repo/bench/drop_page_cache.py" "$WORK/fio" >/dev/null
  "${fio_read[@]}" --output="$res/fio_r$1.json" >/dev/null || die "fio read failed"
  rm -rf "$WORK/fio"
}

echo "fio_compare: $NPROCS ranks x $THREADS threads, $NR objects/rank of $SIZE (xfer $XFER -> fio bs $bs_w, read_xfer $READ_XFER -> fio bs $bs_r), $REPEAT repetitions, in $WORK"
run_adapter warmup
run_fio warmup
echo "  warm-up done"
for ((rep = 1; rep <= REPEAT; rep++)); do
  if ((rep % 2)); then run_adapter "$rep"; run_fio "$rep"; else run_fio "$rep"; run_adapter "$rep"; fi
  echo "  repetition $rep done"
done

python3 - "$res" "$REPEAT" "$OUT" <<PYEOF
import json, os, platform, statistics, subprocess, sys, time
res, repeat, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
MIB = 1024 * 1024
def load(name):
    with open(os.path.join(res, name)) as f:
        return json.load(f)
reps = []
for r in range(1, repeat + 1):
    aw, ar = load(f"adapter_w{r}.json"), load(f"adapter_r{r}.json")
    fw, fr = load(f"fio_w{r}.json"), load(f"fio_r{r}.json")
    assert aw["result"] == "ok" and ar["result"] == "ok", "adapter run reported failures"
    reps.append({
        "adapter_write_mib_s": aw["rounds"][0]["mib_s"],
        "adapter_read_mib_s": ar["rounds"][0]["mib_s"],
        "fio_write_mib_s": fw["jobs"][0]["write"]["bw_bytes"] / MIB,
        "fio_read_mib_s": fr["jobs"][0]["read"]["bw_bytes"] / MIB,
        "adapter_write_p50_ms": aw["rounds"][0]["latency_ms"]["p50"],
        "adapter_read_p50_ms": ar["rounds"][0]["latency_ms"]["p50"],
    })
med = {k: statistics.median(r[k] for r in reps) for k in reps[0]}
ratio = {"write": med["adapter_write_mib_s"] / med["fio_write_mib_s"],
         "read": med["adapter_read_mib_s"] / med["fio_read_mib_s"]}
paired = {op: statistics.median(r[f"adapter_{op}_mib_s"] / r[f"fio_{op}_mib_s"] for r in reps)
          for op in ("write", "read")}
target = 0.85
df = subprocess.run(["df", "-T", os.path.dirname(res)], capture_output=True, text=True).stdout.splitlines()[-1].split()
summary = {
    "benchmark": "fio_compare",
    "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    "machine": {"nproc": os.cpu_count(), "kernel": platform.release(),
                "filesystem": df[1] if len(df) > 1 else "", "device": df[0] if df else ""},
    "config": {k: os.environ.get(k) for k in ("NPROCS", "THREADS", "NR", "SIZE", "XFER", "READ_XFER")},
    "fio_write_cmd": "${fio_write[*]}", "fio_read_cmd": "${fio_read[*]}",
    "repetitions": reps, "median": med, "ratio": ratio, "paired_ratio_median": paired,
    "target": target,
    "pass": {k: v >= target for k, v in ratio.items()},
}
with open(out, "w") as f:
    json.dump(summary, f, indent=2)
print(f"{'':8}{'adapter MiB/s':>15}{'fio MiB/s':>12}{'ratio':>8}{'paired':>8}   (medians of {repeat})")
for op in ("write", "read"):
    a, b = med[f"adapter_{op}_mib_s"], med[f"fio_{op}_mib_s"]
    print(f"{op:8}{a:15.1f}{b:12.1f}{ratio[op]:8.2f}{paired[op]:8.2f}   "
          f"{'ok' if ratio[op] >= target else 'BELOW'} (target {target})")
for i, r in enumerate(reps, 1):
    print(f"  rep {i}: write {r['adapter_write_mib_s']:.1f} vs {r['fio_write_mib_s']:.1f}, "
          f"read {r['adapter_read_mib_s']:.1f} vs {r['fio_read_mib_s']:.1f} MiB/s")
print(f"written to {out}")
PYEOF
