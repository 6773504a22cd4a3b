"""test_side_by_side.py — bench/side_by_side.py with our own mooncake module as both sides.

No other `mooncake` module is installed here, so "other" is this build's module too: the runs
are real (a fresh mooncake_master per run, store_kv_bench.py processes contributing their
segments over tcp on loopback), the ratios only show the mechanics (near 1 up to noise). Covers:
a table, JSON and CSV with a ratio for every shape and the runs interleaved (ours, other, then
other, ours); a side whose runs fail (its master demands a cluster secret the benchmark lacks)
shown as FAILED, never as a ratio; bad paths refused with exit 2 naming what was not found.

Skips, with the reason, when mooncake_master is not built or mooncake.store does not import.
Runs under pytest and unittest; standard library only.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("MC_BUILD_DIR", os.path.join(REPO, "build"))
SCRIPT = os.path.join(REPO, "bench", "side_by_side.py")
MODULE_DIR = os.path.join(BUILD, "python")
MASTER = os.path.join(BUILD, "tools", "mooncake_master")
SHAPES = ("write_perf:plain:4KiB:1", "read_perf:zcopy:1MiB:2")
SHAPE_NAMES = ("write_perf plain 4KiB x1j", "read_perf zcopy 1MiB x2j")


def setUpModule():
    if not os.access(MASTER, os.X_OK):
        raise unittest.SkipTest(f"{MASTER} is not built (set MC_BUILD_DIR)")
    env = dict(os.environ, PYTHONPATH=MODULE_DIR)
    p = subprocess.run([sys.executable, "-c", "import mooncake.store"], env=env,
                       capture_output=True, text=True, timeout=60)
    if p.returncode != 0:  # a broken extension is a failure, never a skip that reads as a pass
        raise ImportError(f"mooncake.store does not import from {MODULE_DIR}: "
                          + (p.stderr.strip().splitlines() or ["?"])[-1])


class SideBySideTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="sbs_test_")
        self.addCleanup(self._tmp.cleanup)
        self.tmp = self._tmp.name
        self.json = os.path.join(self.tmp, "out.json")

    def run_sbs(self, *argv, timeout=600):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("MOONCAKE_CLUSTER_SECRET")}
        return subprocess.run([sys.executable, SCRIPT, "--ours-pythonpath", MODULE_DIR,
                               "--json", self.json, *argv], env=env, capture_output=True,
                              text=True, timeout=timeout)

    def load(self):
        with open(self.json) as f:
            report = json.load(f)
        with open(self.json[:-5] + ".csv", newline="") as f:
            rows = list(csv.DictReader(f))
        return report, rows

    def check_csv(self, report, rows):
        self.assertEqual([r["shape"] for r in rows], [r["shape"] for r in report["rows"]])
        for c, j in zip(rows, report["rows"]):
            self.assertEqual(c["status"], j["status"])
            for key, v in (("ours_median", j["ours"]["median"]),
                           ("other_median", j["other"]["median"]),
                           ("ratio_median", j["ratio_median"])):
                if v is None:
                    self.assertEqual(c[key], "")
                else:
                    self.assertAlmostEqual(float(c[key]), v, delta=abs(v) * 1e-9)

    def test_our_module_as_both_sides(self):
        args = ["--other-pythonpath", MODULE_DIR, "--repeats", "2", "--objects", "24"]
        for s in SHAPES:
            args += ["--shape", s]
        p = self.run_sbs(*args)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        report, rows = self.load()
        self.assertEqual([r["shape"] for r in report["rows"]], list(SHAPE_NAMES))
        for r in report["rows"]:
            self.assertEqual(r["status"], "ok", r)
            for side in ("ours", "other"):
                self.assertEqual(len(r[side]["values"]), 2)
                self.assertGreater(r[side]["min"], 0)
            self.assertGreater(r["ratio_median"], 0)
            self.assertAlmostEqual(r["ratio_median"],
                                   r["ours"]["median"] / r["other"]["median"])
            self.assertLessEqual(r["ratio_min"], r["ratio_max"])
        self.assertEqual(report["rows"][0]["unit"], "objects/s")
        self.assertEqual(report["rows"][1]["unit"], "MiB/s")
        # Interleaved: repeat 0 runs ours then other, repeat 1 other then ours, shape by shape.
        order = [(r["repeat"], r["shape"], r["side"]) for r in report["runs"]]
        self.assertEqual(order, [
            (0, SHAPE_NAMES[0], "ours"), (0, SHAPE_NAMES[0], "other"),
            (0, SHAPE_NAMES[1], "ours"), (0, SHAPE_NAMES[1], "other"),
            (1, SHAPE_NAMES[0], "other"), (1, SHAPE_NAMES[0], "ours"),
            (1, SHAPE_NAMES[1], "other"), (1, SHAPE_NAMES[1], "ours")])
        for run in report["runs"]:
            self.assertEqual(run["successful_kvs"], 24)
            self.assertEqual(run["exit_code"], 0)
        # Both sides really are the module given.
        for side in ("ours", "other"):
            self.assertTrue(report["sides"][side]["module_file"].startswith(
                os.path.realpath(MODULE_DIR) + os.sep))
        self.check_csv(report, rows)
        table = p.stdout[p.stdout.index("=== side by side"):]
        for name in SHAPE_NAMES:
            line = next(l for l in table.splitlines() if l.startswith(name))
            self.assertRegex(line, r"\d+\.\d\d \(\d+\.\d\d-\d+\.\d\d\)$")
        self.assertNotIn("FAILED", p.stdout)

    def test_failing_side_is_shown_failed_not_as_a_ratio(self):
        # The other side's master demands a cluster secret the benchmark does not have: every
        # one of its runs fails at setup.
        wrapper = os.path.join(self.tmp, "master_with_secret")
        with open(wrapper, "w") as f:
            f.write(f"#!/bin/sh\nexec {MASTER} --cluster_secret=not-the-benchmarks \"$@\"\n")
        os.chmod(wrapper, 0o755)
        p = self.run_sbs("--other-pythonpath", MODULE_DIR, "--other-master", wrapper,
                         "--shape", SHAPES[0], "--repeats", "1", "--objects", "16",
                         "--timeout", "120")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        report, rows = self.load()
        r = report["rows"][0]
        self.assertEqual(r["status"], "failed")
        self.assertIsNone(r["ratio_median"])
        self.assertIn("other r0-s0-other: exit 1", r["failure"])
        self.assertEqual(len(r["ours"]["values"]), 1)  # ours ran fine
        self.assertEqual(r["other"]["values"], [])
        line = next(l for l in p.stdout.splitlines() if l.startswith(SHAPE_NAMES[0]))
        self.assertTrue(line.endswith("FAILED"), line)
        self.assertIn("FAILED " + SHAPE_NAMES[0], p.stdout)
        self.check_csv(report, rows)

    def assert_refused(self, args, *fragments):
        p = self.run_sbs(*args, timeout=120)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        for frag in fragments:
            self.assertIn(frag, p.stderr)
        self.assertFalse(os.path.exists(self.json))

    def test_bad_paths_are_refused(self):
        missing = os.path.join(self.tmp, "nowhere")
        self.assert_refused(["--other-pythonpath", missing],
                            f"--other-pythonpath {missing}: no such directory")
        empty = os.path.join(self.tmp, "empty")
        os.mkdir(empty)
        self.assert_refused(["--other-pythonpath", empty], "no mooncake package there",
                            os.path.join(empty, "mooncake"))
        # A package but no master anywhere it is looked for: every path tried is named.
        pkg = os.path.join(self.tmp, "pkg")
        os.makedirs(os.path.join(pkg, "mooncake"))
        self.assert_refused(["--other-pythonpath", pkg], "other: mooncake_master not found",
                            os.path.join(pkg, "mooncake", "mooncake_master"),
                            "give --other-master PATH")
        # A master given explicitly that is not there.
        self.assert_refused(["--other-pythonpath", MODULE_DIR, "--other-master", missing],
                            f"--other-master {missing}: not an executable file")
        # A directory whose mooncake package is not importable as mooncake.store.
        self.assert_refused(["--other-pythonpath", pkg, "--other-master", MASTER],
                            "other: `import mooncake.store` fails")


if __name__ == "__main__":
    unittest.main(verbosity=2)
