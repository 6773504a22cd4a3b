#!/usr/bin/env bash
# scripts/run_main.sh — the README's "main job": on a fresh machine, install dependencies, build,
# start a mooncake_master (with its embedded HTTP metadata server) and a mooncake_client that
# contributes a memory segment, run the store benchmarks on real data with byte verification
# (mooncake_store_bench from C, then the guide's store_kv_bench.py phases through the Python
# module), print the results, and stop every process it started.
# Honest by construction: every write phase really writes. The benches count puts that found
# their key already stored (they move no bytes) and exit non-zero when there are any (set -e
# stops here then); verify_write and write_perf remove what they wrote, so the guide's sequence
# on one cluster with one key prefix writes fresh keys each time. A final check reads every
# summary JSON and fails unless each is "ok" with existing_keys 0.
#
#   bash scripts/run_main.sh                      # about 2 minutes on 2 cores
#   MC_MAIN_DURATION=10 bash scripts/run_main.sh  # longer rows
#   MC_MAIN_SEGMENT=8GB bash scripts/run_main.sh  # a bigger segment
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
jobs=$(nproc 2>/dev/null || echo 2)
duration=${MC_MAIN_DURATION:-3}
segment=${MC_MAIN_SEGMENT:-4GB}
out=${MC_MAIN_OUT:-$root/build/main-job}

step() { printf '\n==== %s ====\n' "$*"; }

step "dependencies and build"
if [ "$(id -u)" -eq 0 ]; then bash dependencies.sh; else sudo -E bash dependencies.sh; fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DWITH_STORE=ON -DWITH_PYTHON=ON -DMC_SANITIZE=OFF >/dev/null
cmake --build build -j"$jobs" >/dev/null
bin=$root/build/tools
mkdir -p "$out"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rpc_port=$(free_port); metrics_port=$(free_port); meta_port=$(free_port); client_port=$(free_port)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

step "mooncake_master on 127.0.0.1:$rpc_port (HTTP metadata on :$meta_port, metrics on :$metrics_port)"
"$bin/mooncake_master" --rpc_port="$rpc_port" --metrics_port="$metrics_port" \
  --enable_http_metadata_server=true --http_metadata_server_port="$meta_port" \
  >"$out/master.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$metrics_port/health" >/dev/null 2>&1 && break
  sleep 0.1
done
grep -m1 "Master service started" "$out/master.log" || { cat "$out/master.log"; exit 1; }

step "mooncake_client contributing a $segment segment on 127.0.0.1:$client_port"
"$bin/mooncake_client" --master_server_address="127.0.0.1:$rpc_port" \
  --metadata_server="http://127.0.0.1:$meta_port/metadata" --host=127.0.0.1 \
  --port="$client_port" --protocol=tcp --global_segment_size="$segment" \
  >"$out/client.out" 2>"$out/client.log" &
pids+=($!)
for _ in $(seq 200); do grep -q "ready" "$out/client.out" 2>/dev/null && break; sleep 0.1; done
cat "$out/client.out"
echo "segments at the master: $(curl -s "http://127.0.0.1:$metrics_port/get_all_segments" | tr -d '\n' | cut -c1-200)"

step "store benchmark: put and get with byte verification (4 KiB and 16 MiB values, 1 and 8 threads)"
"$bin/mooncake_store_bench" --master_server_address="127.0.0.1:$rpc_port" \
  --metadata_server="http://127.0.0.1:$meta_port/metadata" \
  --operation=put,get --value_size=4096,16777216 --threads=1,8 --duration="$duration" \
  --first_touch_bytes=1GB --json "$out/store_bench.json"

kvbench=(env PYTHONPATH="$root/build/python" python3 "$root/mooncake-store/benchmarks/store_kv_bench.py"
  --local-hostname 127.0.0.1 --metadata-server "http://127.0.0.1:$meta_port/metadata"
  --master-server "127.0.0.1:$rpc_port" --protocol tcp)
# --plot needs matplotlib in the interpreter that runs the bench (Debian's python3-matplotlib
# serves /usr/bin/python3; another python3 first on PATH may not have it): plot only when it
# imports, else say so.
plot() { :; }
if python3 -c 'import matplotlib' 2>/dev/null; then
  plot() { echo --plot "$out/store-kv-$1.png"; }
else
  echo "matplotlib does not import for $(command -v python3): no PNG plots (CSV and JSON only)"
fi

step "store_kv_bench.py verify_write (the guide's validation run: 64 x 1 MiB, pattern 0xA5, verified)"
"${kvbench[@]}" --scenario verify_write --global-segment-size 1073741824 \
  --local-buffer-size 268435456 --nr-objects 64 --value-size 1048576 --pattern 0xA5 --verify \
  --summary-json "$out/store-kv-verify.json"

step "store_kv_bench.py write_perf (16 MiB values, 8 jobs, batch 8; the guide's shape scaled to this machine)"
"${kvbench[@]}" --scenario write_perf --global-segment-size 0 --local-buffer-size 2147483648 \
  --io-api plain --numjobs 8 --iodepth 1 --batch-size 8 --nr-objects 128 \
  --value-size 16777216 --pattern 0xA5 --summary-json "$out/store-kv-write.json" \
  $(plot write)

step "store_kv_bench.py read_perf --verify (prepare_write, then read_perf)"
"${kvbench[@]}" --scenario read_perf --global-segment-size 0 --local-buffer-size 2147483648 \
  --numjobs 8 --iodepth 1 --batch-size 8 --nr-objects 128 --value-size 16777216 \
  --pattern 0xA5 --verify --object-id-start 1000 --summary-json "$out/store-kv-read.json" \
  $(plot read)

step "every write phase wrote: ok, existing_keys 0 (JSON, CSV and PNG next to each other)"
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
bad = []
with open(f"{out}/store_bench.json", encoding="utf-8") as f:
    s = json.load(f)
if not s.get("ok") or s.get("existing"):
    bad.append(f"store_bench.json: ok={s.get('ok')} existing={s.get('existing')}")
for name in ("verify", "write", "read"):
    with open(f"{out}/store-kv-{name}.json", encoding="utf-8") as f:
        s = json.load(f)
    for phase, rec in s["phases"].items():
        print(f"store-kv-{name}: {phase:14s} existing_keys={rec['existing_keys']} "
              f"bytes={rec['bytes']} MiB/s={rec['MiB_per_sec']:.1f}")
        if rec["existing_keys"] or ("write" in phase and rec["bytes"] == 0):
            bad.append(f"store-kv-{name}.json {phase}: existing_keys={rec['existing_keys']} "
                       f"bytes={rec['bytes']}")
    if not s["ok"]:
        bad.append(f"store-kv-{name}.json: not ok ({s.get('error')})")
if bad:
    sys.exit("not honest: " + "; ".join(bad))
PY

step "master metrics after the run"
curl -s "http://127.0.0.1:$metrics_port/metrics/summary" | head -20

step "stopping"
cleanup
trap - EXIT
echo "results (JSON and logs): $out/"
