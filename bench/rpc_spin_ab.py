#!/usr/bin/env python3
"""rpc_spin_ab.py — small puts and gets with the RPC spin off and on, interleaved.

For each round and each setting (spin off: master --rpc_spin_us=0 and clients MC_RPC_SPIN_US=0;
spin on: both at --spin-us), starts a fresh mooncake_master and a mooncake_client holding the
values on 127.0.0.1, runs tools/mooncake_store_bench put and get rows (one per --threads value)
against them, and stops them. Prints one line per row and the on/off ratio per round and row;
--json writes every row (the store bench's own JSON rows, with the round and setting).

The machine's loopback round-trip limit is in every store bench row (round_trips_per_s) when
--limits is on. Needs a build tree (--build, default ./build).
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.05)
    raise RuntimeError(f"{what} not ready within {timeout} s")


def port_open(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


def run_setting(a, spin_us, tmp, tag):
    tools = os.path.join(a.build, "tools")
    env = dict(os.environ, MC_RPC_SPIN_US=str(spin_us))
    rpc, metrics, holder = free_port(), free_port(), free_port()
    procs = []
    try:
        procs.append(subprocess.Popen(
            [os.path.join(tools, "mooncake_master"), f"--rpc_port={rpc}",
             f"--metrics_port={metrics}", "--rpc_address=127.0.0.1", "--metrics_host=127.0.0.1",
             f"--rpc_spin_us={spin_us}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=env))
        wait_for(lambda: port_open(rpc), 30, "mooncake_master")
        out = os.path.join(tmp, tag + ".client.out")
        with open(out, "wb") as f:
            procs.append(subprocess.Popen(
                [os.path.join(tools, "mooncake_client"), f"--master_server_address=127.0.0.1:{rpc}",
                 "--metadata_server=P2PHANDSHAKE", "--host=127.0.0.1", f"--port={holder}",
                 "--protocol=tcp", f"--global_segment_size={a.segment}"], stdout=f,
                stderr=subprocess.DEVNULL, env=env))
        wait_for(lambda: b"ready" in open(out, "rb").read(), 60, "mooncake_client")
        js = os.path.join(tmp, tag + ".json")
        subprocess.run(
            [os.path.join(tools, "mooncake_store_bench"),
             f"--master_server_address=127.0.0.1:{rpc}", "--operation=put,get",
             f"--value_size={a.value_size}", f"--threads={a.threads}",
             f"--duration={a.duration}", f"--limits={'true' if a.limits else 'false'}",
             "--first_touch_bytes=64MB", f"--json={js}"], check=True, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
        with open(js) as f:
            return json.load(f)["rows"]
    finally:
        for p in reversed(procs):
            p.terminate()
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", default="build", help="build tree (default ./build)")
    p.add_argument("--spin-us", type=int, default=50, help="the 'on' setting, µs (default 50)")
    p.add_argument("--rounds", type=int, default=2, help="off/on pairs (default 2)")
    p.add_argument("--threads", default="1,8", help="store bench --threads list (default 1,8)")
    p.add_argument("--value-size", default="4096", help="bytes per value (default 4096)")
    p.add_argument("--duration", type=int, default=4, help="seconds per row (default 4)")
    p.add_argument("--segment", default="1GiB", help="the holder's segment (default 1GiB)")
    p.add_argument("--limits", action="store_true", help="measure the store bench's limits too")
    p.add_argument("--json", default="", help="write every row here")
    a = p.parse_args(argv)
    if a.rounds < 1 or not 0 < a.spin_us <= 1000:
        p.error("--rounds >= 1 and --spin-us in (0, 1000]")
    for tool in ("mooncake_master", "mooncake_client", "mooncake_store_bench"):
        if not os.access(os.path.join(a.build, "tools", tool), os.X_OK):
            p.error(f"{os.path.join(a.build, 'tools', tool)} not found: build first or --build")
    rows = []
    with tempfile.TemporaryDirectory(prefix="rpc_spin_ab.") as tmp:
        for r in range(a.rounds):
            for spin in (0, a.spin_us):
                for row in run_setting(a, spin, tmp, f"r{r}-s{spin}"):
                    row.update(round=r, spin_us=spin)
                    rows.append(row)
                    print(f"round {r} spin {spin:4d} us  {row['operation']:3s} "
                          f"threads {row['threads']:2d}  {row['ops_per_s']:9.0f} ops/s  "
                          f"p50 {row['lat_p50_us']:7.1f} us  p99 {row['lat_p99_us']:8.1f} us  "
                          f"errors {row['errors']}  bad {row['verify_failures']}", flush=True)
    print("on/off ops/s per round:")
    for r in range(a.rounds):
        for op in ("put", "get"):
            for t in sorted({row["threads"] for row in rows}):
                pick = {row["spin_us"]: row["ops_per_s"] for row in rows
                        if row["round"] == r and row["operation"] == op and row["threads"] == t}
                if pick.get(0):
                    print(f"  round {r} {op} threads {t}: {pick.get(a.spin_us, 0) / pick[0]:.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"tool": "rpc_spin_ab.py", "date": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                        time.gmtime()),
                       "loadavg": os.getloadavg(), "config": vars(a), "rows": rows}, f, indent=1)
    bad = sum(row["errors"] + row["verify_failures"] for row in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
