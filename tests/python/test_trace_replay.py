"""test_trace_replay.py — bench/trace_replay.py against real clusters on loopback.

Each test runs the tool as a user would (a subprocess; it starts its own mooncake_master and
mooncake_client holders from MC_BUILD_DIR, and lane processes driving mooncake.store) and reads
its --json output:
  * a trace written here whose prefix hits are known by construction: exact hits per request,
    puts, tokens saved and bytes served;
  * the same rules with a memory pool far smaller than the working set and the local offload tier
    on: every hit of an infinite cache is still served, part of them from disk;
  * the first 300 requests of each FAST'25 trace, checked request by request against an
    infinite-cache replay computed here from the same lines (the pool holds them all);
  * bad trace lines: exit status 2 and a message naming the file, the line and the fault.

The traces are read from $MC_FAST25_TRACES, else shared/data/fast25-traces in the repository's
parent directory, else /work/shared/data/fast25-traces; the slice test fails naming those places
when none has them.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from test_store import BUILD, REPO  # noqa: E402

TOOL = os.path.join(REPO, "bench", "trace_replay.py")
sys.path.insert(0, os.path.dirname(TOOL))
import trace_replay  # noqa: E402
TRACE_DIRS = [os.environ.get("MC_FAST25_TRACES", ""),
              os.path.join(os.path.dirname(REPO), "shared", "data", "fast25-traces"),
              "/work/shared/data/fast25-traces"]
TRACES = ("conversation_trace.jsonl", "synthetic_trace.jsonl")
SLICE = 300


def trace_dir():
    for d in TRACE_DIRS:
        if d and all(os.path.isfile(os.path.join(d, t)) for t in TRACES):
            return d
    raise AssertionError("FAST'25 traces (" + ", ".join(TRACES) + ") not found in any of: "
                         "$MC_FAST25_TRACES (" + (TRACE_DIRS[0] or "unset") + "), "
                         + ", ".join(TRACE_DIRS[1:]))


def reference(lines):
    """Prefix hits per request against a cache that never evicts: the leading ids already seen
    by an earlier request; then every id of the request is stored."""
    seen, hits = set(), []
    for obj in lines:
        n = 0
        for h in obj["hash_ids"]:
            if h not in seen:
                break
            n += 1
        hits.append(n)
        seen.update(obj["hash_ids"])
    return hits


class TraceReplayTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="mc_trace_test.")

    def tearDown(self):
        self.tmp.cleanup()

    def write_trace(self, name, lines):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            for obj in lines:
                f.write((obj if isinstance(obj, str) else json.dumps(obj)) + "\n")
        return path

    def run_tool(self, *argv, expect_rc=0, timeout=400):
        out = os.path.join(self.tmp.name, "out.json")
        p = subprocess.run([sys.executable, TOOL, "--build-dir", BUILD, "--json", out, *argv],
                           capture_output=True, text=True, timeout=timeout)
        if p.returncode != expect_rc:
            self.fail(f"trace_replay exited {p.returncode}, expected {expect_rc}\n"
                      f"stdout:\n{p.stdout[-3000:]}\nstderr:\n{p.stderr[-3000:]}")
        if expect_rc != 0:
            return p
        with open(out) as f:
            return json.load(f)["runs"]

    def assert_clean(self, run):
        self.assertEqual({k: v for k, v in run["errors"].items() if v}, {}, run["errors"])

    def test_constructed_trace_has_the_hits_it_was_built_with(self):
        reqs = [
            ([0, 1, 2, 3], 2048),         # all new: 0 hits, 4 puts
            ([0, 1, 2, 4], 2048),         # 0 1 2 stored: 3 hits, puts 4
            ([0, 1, 5, 2], 2000),         # the hit stops at 5 although 2 is stored: 2 hits
            ([5, 2, 9], 1500),            # 5 (put just before) and 2: 2 hits, puts 9
            ([7], 10),                    # new: 0
            ([0, 1, 2, 3, 4, 5, 9, 7], 7 * 512 + 100),  # all stored: 8 hits, last block partial
        ]
        lines = [{"timestamp": 10 * i, "input_length": n, "output_length": 1, "hash_ids": ids}
                 for i, (ids, n) in enumerate(reqs)]
        path = self.write_trace("made.jsonl", lines)
        kv = 16  # 8 KiB blocks
        (run,) = self.run_tool("--trace-file", path, "--kv-bytes-per-token", str(kv),
                               "--capacity-tokens", "100k", "--no-peer")
        self.assert_clean(run)
        self.assertEqual(run["hits_per_request"], [0, 3, 2, 2, 0, 8])
        self.assertEqual(run["max_hits_per_request"], [0, 3, 2, 2, 0, 8])
        self.assertEqual(run["hit_blocks"], 15)
        self.assertEqual(run["blocks"], 24)
        self.assertEqual(run["unique_blocks"], 8)
        self.assertEqual(run["put_blocks"], 8)  # each block once, when first missing
        self.assertEqual(run["memory_hit_blocks"], 15)
        self.assertEqual(run["disk_hit_blocks"], 0)
        self.assertEqual(run["bytes_from_memory"], 15 * 512 * kv)
        self.assertEqual(run["prefill_tokens_saved"], 3 * 512 + 2 * 512 + 2 * 512 + 7 * 512 + 100)

    def test_disk_tier_serves_what_memory_evicted(self):
        # 24 requests of 8 new blocks each (6 MiB of 32 KiB blocks), then each prefix again:
        # a 1 MiB pool holds under 32 blocks, so most of the second pass comes from disk.
        first = [{"timestamp": i, "input_length": 8 * 512, "output_length": 1,
                  "hash_ids": list(range(8 * i, 8 * i + 8))} for i in range(24)]
        again = [dict(o, timestamp=100 + o["timestamp"]) for o in first]
        path = self.write_trace("evict.jsonl", first + again)
        (run,) = self.run_tool("--trace-file", path, "--kv-bytes-per-token", "64",
                               "--capacity-tokens", "16k", "--offload", "local",
                               "--no-peer")
        self.assert_clean(run)
        self.assertEqual(run["hits_per_request"], [0] * 24 + [8] * 24)
        self.assertEqual(run["hit_blocks"], 8 * 24)
        self.assertEqual(run["memory_hit_blocks"] + run["disk_hit_blocks"], 8 * 24)
        self.assertGreaterEqual(run["disk_hit_blocks"], 8 * 24 - 32)
        self.assertEqual(run["bytes_from_offload"], run["disk_hit_blocks"] * 512 * 64)
        # The master counted those disk reads too (clients report them on their pings).
        self.assertGreaterEqual(run["master_metrics_delta"]["master_fallback_reads_total"],
                                run["disk_hit_blocks"])

    def test_real_trace_slices_match_an_infinite_cache(self):
        d = trace_dir()
        paths = [os.path.join(d, name) for name in TRACES]
        slices = []
        for path in paths:
            with open(path) as f:
                lines = [json.loads(next(f)) for _ in range(SLICE)]
            lines.sort(key=lambda o: o["timestamp"])  # the tool replays in timestamp order
            slices.append(lines)
        most = max(len({h for o in lines for h in o["hash_ids"]}) for lines in slices)
        # One run of the tool, a fresh cluster per trace, each pool twice what the slice needs.
        runs = self.run_tool(*[a for p in paths for a in ("--trace-file", p)],
                             "--limit", str(SLICE), "--kv-bytes-per-token", "8",
                             "--capacity-tokens", str(2 * 512 * most))
        # Per trace: the peer (the same loop against a dict in the lane), then the store.
        self.assertEqual([(r["trace_file"], r["offload"]) for r in runs],
                         [(p, o) for p in paths for o in ("peer", "none")])
        for path, lines, peer, run in zip(paths, slices, runs[0::2], runs[1::2]):
            with self.subTest(trace=path):
                want = reference(lines)
                unique = len({h for o in lines for h in o["hash_ids"]})
                self.assert_clean(run)
                self.assertEqual(run["requests"], SLICE)
                self.assertEqual(run["hits_per_request"], want)
                self.assertEqual(peer["hits_per_request"], want)
                self.assertGreater(sum(want), 0, "the slice has no reuse: a test that cannot fail")
                self.assertEqual(run["hit_blocks"], sum(want))
                self.assertEqual(run["unique_blocks"], unique)
                self.assertEqual(run["put_blocks"], unique)
                self.assertEqual(run["prefill_tokens_saved"],
                                 sum(min(512 * h, o["input_length"])
                                     for h, o in zip(want, lines)))

    def test_a_bad_line_is_named_with_what_is_wrong(self):
        good = json.dumps({"timestamp": 0, "input_length": 600, "output_length": 3,
                           "hash_ids": [1, 2]})
        cases = [
            ("{not json", "not valid JSON"),
            ('{"timestamp": 5, "input_length": 10, "output_length": 1}', "missing field 'hash_ids'"),
            ('{"timestamp": -1, "input_length": 10, "output_length": 1, "hash_ids": []}',
             "'timestamp' must be >= 0"),
            ('{"timestamp": 1, "input_length": "9", "output_length": 1, "hash_ids": []}',
             "'input_length' must be an integer"),
            ('{"timestamp": 1, "input_length": 9, "output_length": 1, "hash_ids": [3, -4]}',
             "hash_ids[1] must be an integer >= 0"),
            ('{"timestamp": 1, "input_length": 512, "output_length": 1, "hash_ids": [3, 4]}',
             "2 hash_ids for input_length 512"),
            ("[1, 2]", "not a JSON object"),
            (json.dumps({"timestamp": 1, "input_length": 512 * 16385, "output_length": 1,
                         "hash_ids": list(range(16385))}), "more than the 16384 blocks"),
            ("", "empty line"),
        ]
        # parse_trace in this process for each fault; the tool itself for the first (exit status
        # and the message on stderr, before any cluster is started).
        for n, (bad, what) in enumerate(cases):
            with self.subTest(line=bad):
                path = self.write_trace("bad.jsonl", [good, good, bad, good])
                with self.assertRaises(trace_replay.TraceError) as err:
                    trace_replay.parse_trace(path)
                self.assertTrue(str(err.exception).startswith(f"{path}:3: "), str(err.exception))
                self.assertIn(what, str(err.exception))
                if n == 0:
                    p = self.run_tool("--trace-file", path, expect_rc=2, timeout=60)
                    self.assertIn(f"trace_replay: {path}:3: ", p.stderr)
                    self.assertIn(what, p.stderr)
        missing = os.path.join(self.tmp.name, "absent.jsonl")
        p = self.run_tool("--trace-file", missing, expect_rc=2, timeout=60)
        self.assertIn(missing, p.stderr)


if __name__ == "__main__":
    unittest.main()
