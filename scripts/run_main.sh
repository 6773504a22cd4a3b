#!/usr/bin/env bash
# scripts/run_main.sh — the README's "main job": on a fresh machine, install dependencies, build,
# and run the product's benchmark on real data, printing the results, then stop everything.
#
# Today (the store is being built) the main job is the Transfer Engine benchmark: a target and an
# initiator process on this host move real bytes over tcp and over shared memory, next to the
# machine's limits (memcpy, raw loopback TCP) measured in the same run.
#
#   bash scripts/run_main.sh               # ~1 minute
#   MC_MAIN_DURATION=10 bash scripts/run_main.sh   # longer rows
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=$(nproc 2>/dev/null || echo 2)
duration=${MC_MAIN_DURATION:-3}
out=${MC_MAIN_OUT:-$root/build/main-job}

if [ "$(id -u)" -eq 0 ]; then bash dependencies.sh; else sudo -E bash dependencies.sh; fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DWITH_STORE=ON >/dev/null
cmake --build build -j"$jobs" >/dev/null
mkdir -p "$out"
bench=build/tools/transfer_engine_bench

for proto in tcp shm; do
  for op in write read; do
    echo
    echo "== transfer_engine_bench --protocol=$proto --operation=$op =="
    "$bench" --mode=loopback --protocol="$proto" --operation="$op" \
      --block_size=65536,1048576,4194304,16777216 --batch_size=4 --threads=1 \
      --duration="$duration" --buffer_size=512MB --json "$out/te_${proto}_${op}.json"
  done
done
echo
echo "results (JSON): $out/"
