#!/usr/bin/env python3
"""test_daos_adapter_bench.py — scripts/daos_adapter_bench.sh and daos_adapter_bench end to end.

Registered in ctest (tests/integration/storage.cmake) with MC_BUILD_DIR and MC_SOURCE_DIR set.
What it proves:
  * DRYRUN=1 output for one local host and for several hosts (pre-flight checks per host, the
    generated MPICH and Open MPI command lines, RSH_USER, environment forwarding);
  * every validation error of the script, each with its message and exit status 2;
  * the sudo -E re-execution when the user cannot write DFS_PATH (as nobody, via setpriv);
  * real NPROCS=2 runs on localhost with fs type posix and, when built with -DUSE_DAOS=ON
    -DDAOS_TEST_DOUBLE=ON, fs type daos on the libdfs test double, the SUMMARY JSON checked
    field by field;
  * a WR_ONLY=1 run then an RD_ONLY=1 run (files kept, then read, verified and removed), a
    read-only run refused when the data set is missing or does not match, and a corrupted
    object reported as a failed operation.
Standard library only; runs under /usr/bin/python3.
"""
import csv
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
import unittest

BUILD = os.environ.get("MC_BUILD_DIR", os.path.join(os.path.dirname(__file__), "../../build"))
SOURCE = os.environ.get("MC_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "../.."))
SCRIPT = os.path.join(SOURCE, "scripts", "daos_adapter_bench.sh")
BIN = os.path.join(BUILD, "tools", "daos_adapter_bench")
MKCONT = os.path.join(BUILD, "dfs_double", "dfs_double_mkcont")
MIB = 1024 * 1024

# Variables of the caller's environment that would change the script's behaviour.
SCRIPT_VARS = ["NPROCS", "SUMMARY", "HOSTS", "DFS_PATH", "DIR", "NR", "SIZE", "XFER",
               "READ_XFER", "CHUNK", "THREADS", "READ_ROUNDS", "WR_ONLY", "RD_ONLY", "CLEANUP",
               "RSH_USER", "DAOS_AGENT_DRPC_DIR", "MPIRUN", "EXTRA_ARGS", "DRYRUN",
               "DFS_DOUBLE_FAULT", "PROGRESS", "PLOT_PYTHON", "OP_TIMEOUT"]


def build_info(binary=BIN):
    out = subprocess.run([binary, "--build_info"], check=True, capture_output=True, text=True)
    return dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)


INFO = build_info()
HAVE_DOUBLE = INFO.get("daos_library") == "test-double" and os.access(MKCONT, os.X_OK)
# On a DAOS host (built with -DUSE_DAOS=ON, real libdfs): MC_TEST_DFS_PATH=<dfuse path> runs the
# daos cases on the real container.
REAL_DFS_PATH = os.environ.get("MC_TEST_DFS_PATH") if INFO.get("daos_library") == "libdfs" else None
HAVE_DAOS = HAVE_DOUBLE or bool(REAL_DFS_PATH)


class ScriptTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="mc_dab_test.")
        self.data = os.path.join(self.tmp, "data")
        os.mkdir(self.data)
        self.summary = os.path.join(self.tmp, "summary.json")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def run_script(self, env, expect_rc=0, timeout=300):
        full = {k: v for k, v in os.environ.items() if k not in SCRIPT_VARS}
        full["DAOS_ADAPTER_BENCH_BIN"] = BIN
        # MPI_Init loads hwloc's pci plugin, whose libpciaccess leaks ~1 KiB that LeakSanitizer
        # reports from an unloaded module (also in a bare MPI_Init/MPI_Finalize program). The
        # benchmark needs no PCI topology, so the ASan build keeps leak checking this way.
        full.setdefault("HWLOC_COMPONENTS", "-pci")
        full.update(env)
        p = subprocess.run(["bash", SCRIPT], env=full, capture_output=True, text=True,
                           timeout=timeout)
        if expect_rc is not None and p.returncode != expect_rc:
            self.fail(f"rc {p.returncode} != {expect_rc}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}")
        return p

    def base_env(self, **kw):
        env = {"NPROCS": "2", "SUMMARY": self.summary, "DFS_PATH": self.data}
        env.update({k: str(v) for k, v in kw.items()})
        return env

    def fake_binary(self, family="openmpi", fs_types="posix,daos", library="libdfs"):
        """A stand-in binary: --build_info as given, --help from the real one."""
        path = os.path.join(self.tmp, "fake_bench")
        with open(path, "w") as f:
            f.write("#!/bin/bash\n"
                    "case \"$1\" in\n"
                    "  --build_info) printf '%s\\n' mpi_family=" + family +
                    " mpi_launcher=/usr/bin/mpirun." + family + " fs_types=" + fs_types +
                    " default_fs_type=" + fs_types.split(",")[-1] +
                    " daos_library=" + library + " ;;\n"
                    "  --help) exec " + BIN + " --help ;;\n"
                    "  *) exit 0 ;;\n"
                    "esac\n")
        os.chmod(path, 0o755)
        return path


class DryRunTest(ScriptTest):
    def test_single_host_prints_the_command_and_runs_nothing(self):
        p = self.run_script(self.base_env(DRYRUN=1, NR=4, SIZE="1m"))
        self.assertIn("DRYRUN=1", p.stdout)
        self.assertIn("preflight: none needed", p.stdout)
        cmd = [l for l in p.stdout.splitlines() if l.startswith("command: ")]
        self.assertEqual(len(cmd), 1)
        c = cmd[0]
        self.assertIn(" -np 2 ", c)
        self.assertIn(BIN, c)
        for arg in ("--dfs_path=" + self.data, "--dir=adapterbench", "--nr=4", "--size=1m",
                    "--xfer=0", "--read_xfer=8m", "--chunk=8m", "--threads=8",
                    "--read_rounds=1", "--wr_only=0", "--rd_only=0", "--cleanup=1",
                    "--summary=" + self.summary, "--hosts=localhost", "--nprocs_per_host=2",
                    "--expect_ranks=2", "--progress_interval=10", "--op_timeout=0s"):
            self.assertIn(arg, c)
        if INFO["mpi_family"] == "mpich":
            self.assertIn("mpirun.mpich", c)
            self.assertIn("-genvall", c)
        self.assertFalse(os.path.exists(self.summary))
        self.assertEqual(os.listdir(self.data), [])

    def test_defaults_follow_the_guide(self):
        p = self.run_script(self.base_env(DRYRUN=1, WR_ONLY=1))
        c = p.stdout
        for arg in ("--nr=512", "--size=16m", "--threads=8", "--cleanup=0", "--wr_only=1"):
            self.assertIn(arg, c)
        self.assertIn("16.00 GiB per write pass", p.stderr)

    def test_extra_args_pass_verbatim(self):
        p = self.run_script(self.base_env(DRYRUN=1, EXTRA_ARGS="--fs-type=posix --align=0 --iovcnt=4"))
        self.assertRegex(p.stdout, r"--expect_ranks=2 --progress_interval=10 --op_timeout=0s --fs-type=posix --align=0 --iovcnt=4")
        self.assertIn("fs type posix", p.stderr)

    def test_multi_host_lists_preflight_checks_for_every_host(self):
        p = self.run_script(self.base_env(DRYRUN=1, HOSTS="client01,client02", NPROCS=4,
                                          RSH_USER="bob"))
        out = p.stdout
        for h in ("client01", "client02"):
            self.assertRegex(out, rf"preflight: ssh access to {h}: ssh .*-l bob {h} true")
            self.assertRegex(out, rf"preflight: benchmark binary on {h}: .* {h} test -x ")
            self.assertRegex(out, rf"preflight: same MPI build on {h}: .*--build_info")
            self.assertRegex(out, rf"preflight: DFS_PATH on {h}: .* {h} test -d ")
            self.assertRegex(out, rf"preflight: passwordless sudo on {h}: .* sudo -n true")
        self.assertRegex(out, r"preflight: SUMMARY directory on client01: .* client01 test -d ")
        self.assertRegex(out, r"preflight: MPI launch on every host: .*--mpi_check --expect_ranks=2")
        cmd = [l for l in out.splitlines() if l.startswith("command: ")][0]
        self.assertIn("--expect_ranks=8", cmd)
        if INFO["mpi_family"] == "mpich":
            self.assertRegex(cmd, r"-np 8 -genvall -hosts client01\\?,client02 -ppn 4 -launcher ssh")
            self.assertIn("HYDRA_LAUNCHER_EXTRA_ARGS=-l\\ bob", cmd)
        # Nothing remote ran: no ssh was attempted, nothing written.
        self.assertFalse(os.path.exists(self.summary))

    def test_multi_host_as_root_uses_root_and_skips_the_sudo_check(self):
        if os.getuid() != 0:
            self.skipTest("needs root")
        p = self.run_script(self.base_env(DRYRUN=1, HOSTS="client01,client02"))
        self.assertNotIn("-l root", p.stdout)
        self.assertNotIn("passwordless sudo", p.stdout)

    def test_open_mpi_command_has_root_and_oversubscribe_flags(self):
        if not shutil.which("mpirun.openmpi"):
            self.skipTest("Open MPI not installed")
        fake = self.fake_binary("openmpi", "posix", "none")
        p = self.run_script(self.base_env(DRYRUN=1, DAOS_ADAPTER_BENCH_BIN=fake,
                                          HOSTS="client01,client02", NPROCS=3,
                                          UCX_TLS="tcp", D_LOG_MASK="ERR"))
        cmd = [l for l in p.stdout.splitlines() if l.startswith("command: ")][0]
        self.assertIn("mpirun.openmpi", cmd)
        self.assertIn("-np 6 --oversubscribe", cmd)
        if os.getuid() == 0:
            self.assertIn("--allow-run-as-root", cmd)
        self.assertRegex(cmd, r"--host client01:3\\?,client02:3 --map-by ppr:3:node")
        self.assertIn("-x UCX_TLS", cmd)
        self.assertIn("-x D_LOG_MASK", cmd)
        self.assertRegex(p.stdout, r"MPI launch on every host: .*mpirun.openmpi -np 2 --oversubscribe")

    def test_daos_agent_directory_is_discovered(self):
        fake = self.fake_binary("mpich", "posix,daos", "libdfs")
        agent = tempfile.mkdtemp(prefix="boostx-agent-", dir="/tmp")
        try:
            s = socket.socket(socket.AF_UNIX)
            s.bind(os.path.join(agent, "daos_agent.sock"))
            p = self.run_script(self.base_env(DRYRUN=1, DAOS_ADAPTER_BENCH_BIN=fake))
            self.assertIn("DAOS_AGENT_DRPC_DIR=" + agent, p.stderr)
            s.close()
        finally:
            shutil.rmtree(agent, ignore_errors=True)


class SudoTest(ScriptTest):
    NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]

    def run_as_nobody(self, env):
        full = {k: v for k, v in os.environ.items() if k not in SCRIPT_VARS}
        full.update({"DAOS_ADAPTER_BENCH_BIN": BIN, "HWLOC_COMPONENTS": "-pci"})
        full.update(env)
        return subprocess.run(self.NOBODY + ["bash", SCRIPT], env=full, capture_output=True,
                              text=True, timeout=120)

    def test_reexecutes_with_sudo_when_dfs_path_is_not_writable(self):
        if os.getuid() != 0 or not shutil.which("setpriv"):
            self.skipTest("needs root and setpriv")
        if subprocess.run(self.NOBODY + ["test", "-x", BIN]).returncode != 0:
            self.skipTest("the build tree is not readable by nobody")
        os.chmod(self.tmp, 0o755)
        os.chmod(self.data, 0o755)  # root's, not writable by nobody
        env = self.base_env(EXTRA_ARGS="--fs-type=posix")
        p = self.run_as_nobody(dict(env, DRYRUN="1"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("DRYRUN: would re-execute with sudo -E (DFS_PATH=" + self.data +
                      " is not writable by nobody)", p.stderr)
        if subprocess.run(self.NOBODY + ["sudo", "-n", "true"], capture_output=True).returncode == 0:
            self.skipTest("nobody has passwordless sudo here")
        p = self.run_as_nobody(env)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("passwordless sudo is not available: run as root or configure sudo",
                      p.stderr)


class ValidationTest(ScriptTest):
    def assert_refused(self, env, message, drop=()):
        full = self.base_env(DRYRUN=1)
        full.update({k: str(v) for k, v in env.items()})
        for k in drop:
            full.pop(k, None)
        p = self.run_script(full, expect_rc=2)
        self.assertIn(message, p.stderr)
        self.assertNotIn("command:", p.stdout)

    def test_nprocs_is_mandatory_and_positive(self):
        self.assert_refused({}, "NPROCS is mandatory", drop=["NPROCS"])
        self.assert_refused({"NPROCS": "0"}, "NPROCS=0 is not a positive integer")
        self.assert_refused({"NPROCS": "two"}, "NPROCS=two is not a positive integer")

    def test_summary_is_mandatory_and_its_directory_must_exist(self):
        self.assert_refused({}, "SUMMARY is mandatory", drop=["SUMMARY"])
        self.assert_refused({"SUMMARY": os.path.join(self.tmp, "missing", "s.json")},
                            "its parent directory " + os.path.join(self.tmp, "missing") +
                            " does not exist")
        self.assert_refused({"SUMMARY": self.data}, "is a directory")

    def test_flags_must_be_0_or_1(self):
        for var in ("WR_ONLY", "RD_ONLY", "CLEANUP", "DRYRUN"):
            self.assert_refused({var: "yes"}, f"{var}=yes must be 0 or 1")

    def test_write_only_and_read_only_exclude_each_other(self):
        self.assert_refused({"WR_ONLY": 1, "RD_ONLY": 1}, "WR_ONLY=1 and RD_ONLY=1 exclude")
        self.assert_refused({"RD_ONLY": 1, "READ_ROUNDS": 0}, "RD_ONLY=1 needs READ_ROUNDS >= 1")

    def test_counts_must_be_numbers(self):
        self.assert_refused({"NR": "0"}, "NR=0 must be a positive integer")
        self.assert_refused({"NR": "-5"}, "NR=-5 must be a positive integer")
        self.assert_refused({"THREADS": "0"}, "THREADS=0 must be a positive integer")
        self.assert_refused({"READ_ROUNDS": "x"}, "READ_ROUNDS=x must be a non-negative integer")

    def test_sizes_accept_only_bytes_or_kmg(self):
        self.assert_refused({"SIZE": "16x"}, "SIZE=16x is not a size")
        self.assert_refused({"SIZE": "1.5g"}, "SIZE=1.5g is not a size")
        self.assert_refused({"SIZE": "0"}, "SIZE=0 must be larger than 0")
        self.assert_refused({"XFER": "abc"}, "XFER=abc is not a size")
        self.assert_refused({"READ_XFER": "8q"}, "READ_XFER=8q is not a size")
        self.assert_refused({"CHUNK": "-1"}, "CHUNK=-1 is not a size")

    def test_paths(self):
        self.assert_refused({"DFS_PATH": "relative/path"}, "must be an absolute path")
        self.assert_refused({"DFS_PATH": "/nonexistent/mooncake-vol"},
                            "DFS_PATH=/nonexistent/mooncake-vol does not exist")
        self.assert_refused({"DIR": "../escape"}, "DIR=../escape must be a relative")
        self.assert_refused({"DIR": "/abs"}, "DIR=/abs must be a relative")

    def test_hosts(self):
        self.assert_refused({"HOSTS": "a,,b"}, "has an empty entry")
        self.assert_refused({"HOSTS": "a,a"}, "HOSTS lists a twice")
        self.assert_refused({"HOSTS": "bad host"}, "is not a host name")
        self.assert_refused({"RSH_USER": "bad user"}, "RSH_USER=bad user is not a user name")

    def test_launcher_of_the_other_mpi_is_refused(self):
        other = "mpirun.openmpi" if INFO["mpi_family"] == "mpich" else "mpirun.mpich"
        if not shutil.which(other):
            self.skipTest(other + " not installed")
        self.assert_refused({"MPIRUN": other}, "every rank would run alone as rank 0")
        self.assert_refused({"MPIRUN": "/nonexistent/mpirun"}, "is not an executable command")

    def test_op_timeout_must_be_seconds(self):
        self.assert_refused({"OP_TIMEOUT": "1m"}, "OP_TIMEOUT=1m must be a number of seconds")
        self.assert_refused({"OP_TIMEOUT": "-1"}, "OP_TIMEOUT=-1 must be a number of seconds")
        p = self.run_script(self.base_env(DRYRUN=1, OP_TIMEOUT="1.5"))
        self.assertIn("--op_timeout=1.5s", p.stdout)

    def test_extra_args_are_checked(self):
        self.assert_refused({"EXTRA_ARGS": "--fs-type=ext4"}, "expected daos or posix")
        self.assert_refused({"EXTRA_ARGS": "--bogus=1"}, "EXTRA_ARGS: unknown flag --bogus=1")

    def test_fs_type_not_built_is_refused(self):
        fake = self.fake_binary(INFO["mpi_family"], "posix", "none")
        self.assert_refused({"DAOS_ADAPTER_BENCH_BIN": fake, "EXTRA_ARGS": "--fs-type=daos"},
                            "fs type daos is not built into")

    def test_missing_binary(self):
        self.assert_refused({"DAOS_ADAPTER_BENCH_BIN": "/nonexistent/daos_adapter_bench"},
                            "daos_adapter_bench not found")

    def test_agent_directory_without_socket(self):
        fake = self.fake_binary(INFO["mpi_family"], "posix,daos", "libdfs")
        self.assert_refused({"DAOS_ADAPTER_BENCH_BIN": fake, "DAOS_AGENT_DRPC_DIR": self.tmp},
                            "has no daos_agent.sock")

    def test_arguments_are_refused(self):
        full = {k: v for k, v in os.environ.items() if k not in SCRIPT_VARS}
        full.update(self.base_env(DRYRUN=1))
        p = subprocess.run(["bash", SCRIPT, "--nr=5"], env=full, capture_output=True, text=True)
        self.assertEqual(p.returncode, 2)
        self.assertIn("no arguments expected", p.stderr)


class RunHelpers(ScriptTest):
    """What the run tests share (no tests of its own, so subclasses do not repeat them)."""
    NR = 6
    SIZE = 256 * 1024 + 3

    def setup_fs(self, fs_type):
        """Returns (DFS_PATH, extra env incl. DIR, where the root's files are visible)."""
        if fs_type == "posix":
            return self.data, {"DIR": "adapterbench"}, os.path.join(self.data, "adapterbench")
        if REAL_DFS_PATH:  # the container's files are visible through the dfuse mount
            sub = "mc_dab_test.%d.%s" % (os.getpid(), os.path.basename(self.tmp))
            self.addCleanup(shutil.rmtree, os.path.join(REAL_DFS_PATH, sub), True)
            return REAL_DFS_PATH, {"DIR": sub}, os.path.join(REAL_DFS_PATH, sub)
        store = os.path.join(self.tmp, "store")
        mount = os.path.join(self.tmp, "mnt")
        env = {"DFS_DOUBLE_ROOT": store, "DIR": "adapterbench"}
        subprocess.run([MKCONT, mount, "benchpool", "benchcont"], check=True,
                       env=dict(os.environ, **env))
        return mount, env, os.path.join(store, "benchpool", "benchcont", "adapterbench")

    def objects_in(self, visible):
        n = 0
        for d in os.listdir(visible) if os.path.isdir(visible) else []:
            if re.fullmatch(r"[0-9a-f]{2}", d):
                n += len([f for f in os.listdir(os.path.join(visible, d)) if not f.startswith(".")])
        return n

    def check_round(self, r, op, number, ranks, nr, size):
        self.assertEqual(r["op"], op)
        self.assertEqual(r["round"], number)
        self.assertEqual(r["objects"], ranks * nr)
        self.assertEqual(r["ok_objects"], ranks * nr)
        self.assertEqual(r["failed_ops"], 0)
        self.assertEqual(r["verify_failures"], 0)
        self.assertEqual(r["skipped_ops"], 0)
        self.assertEqual(r["timeouts"], 0)
        self.assertIsNone(r["first_error"])
        self.assertEqual(r["stopped_ranks"], [])
        self.assertEqual(r["bytes"], ranks * nr * size)
        self.assertGreater(r["wall_s"], 0)
        self.assertAlmostEqual(r["mib_s"], r["bytes"] / MIB / r["wall_s"], delta=r["mib_s"] * 1e-6)
        self.assertAlmostEqual(r["objects_s"], r["ok_objects"] / r["wall_s"],
                               delta=r["objects_s"] * 1e-6)
        lat = r["latency_ms"]
        self.assertEqual(sorted(lat), ["max", "mean", "p50", "p95", "p99"])
        self.assertTrue(0 < lat["p50"] <= lat["p95"] <= lat["p99"] <= lat["max"])
        self.assertTrue(0 < lat["mean"] <= lat["max"])
        self.assertEqual([p["rank"] for p in r["per_rank"]], list(range(ranks)))
        for p in r["per_rank"]:
            self.assertEqual(p["host"], socket.gethostname()[:63])
            self.assertEqual(p["objects"], nr)
            self.assertEqual(p["failed_ops"], 0)
            self.assertEqual(p["skipped_ops"], 0)
            self.assertIsNone(p["stopped"])
            self.assertIsNone(p["first_error"])
            self.assertEqual(p["bytes"], nr * size)
            self.assertTrue(0 < p["wall_s"] <= r["wall_s"])
            self.assertAlmostEqual(p["mib_s"], p["bytes"] / MIB / p["wall_s"],
                                   delta=p["mib_s"] * 1e-6)
            self.assertAlmostEqual(p["objects_s"], nr / p["wall_s"], delta=p["objects_s"] * 1e-6)
        self.assertAlmostEqual(max(p["wall_s"] for p in r["per_rank"]), r["wall_s"])



class RunTest(RunHelpers):
    def full_run(self, fs_type):
        dfs_path, env, visible = self.setup_fs(fs_type)
        p = self.run_script(self.base_env(DFS_PATH=dfs_path, NR=self.NR, SIZE=self.SIZE,
                                          THREADS=3, READ_ROUNDS=2, XFER="64k", READ_XFER="100000",
                                          CHUNK="1m", EXTRA_ARGS=f"--fs-type={fs_type} --iovcnt=4",
                                          **env))
        for op, n in (("write", 1), ("read", 1), ("read", 2)):
            for rank in range(2):
                self.assertRegex(p.stdout, rf"\[{op} {n}\] rank {rank} \(.*\): {self.NR} objects")
            self.assertRegex(p.stdout, rf"\[AGG\] {op} {n}: 2 ranks, {2 * self.NR} objects, .* MiB/s")
        self.assertRegex(p.stdout, r"\[AGG\] cleanup: 2 ranks, 12 objects removed")
        with open(self.summary) as f:
            s = json.load(f)
        self.assertEqual(s["benchmark"], "daos_adapter_bench")
        self.assertEqual(s["version"], INFO["version"])
        self.assertEqual(s["result"], "ok")
        self.assertRegex(s["started_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertRegex(s["finished_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        self.assertEqual(s["mpi"]["family"], INFO["mpi_family"])
        self.assertEqual(s["mpi"]["ranks"], 2)
        self.assertTrue(s["mpi"]["library"])
        self.assertEqual(s["hosts"], [socket.gethostname()[:63]])
        c = s["config"]
        expect = {
            "fs_type": fs_type, "dfs_path": dfs_path, "dir": env["DIR"],
            "root_dir": dfs_path + "/" + env["DIR"], "hosts_arg": "localhost",
            "nprocs_per_host": 2, "ranks": 2, "nr": self.NR, "size_bytes": self.SIZE,
            "xfer_bytes": 65536, "read_xfer_bytes": 100000, "chunk_bytes": MIB, "threads": 3,
            "read_rounds": 2, "wr_only": False, "rd_only": False, "cleanup": True, "iovcnt": 4,
            "align_bytes": os.sysconf("SC_PAGESIZE"), "oclass": "", "verify": True,
            "dataset_bytes": 2 * self.NR * self.SIZE, "op_timeout_ms": 30000,
            "stop_after_failures": 100,
        }
        self.assertEqual(c, expect)
        self.assertEqual([r["op"] for r in s["rounds"]], ["write", "read", "read"])
        self.check_round(s["rounds"][0], "write", 1, 2, self.NR, self.SIZE)
        self.check_round(s["rounds"][1], "read", 1, 2, self.NR, self.SIZE)
        self.check_round(s["rounds"][2], "read", 2, 2, self.NR, self.SIZE)
        cl = s["cleanup"]
        self.assertEqual(cl["performed"], True)
        self.assertEqual(cl["removed"], 2 * self.NR)
        self.assertEqual(cl["failed_ops"], 0)
        self.assertEqual(cl["skipped_ops"], 0)
        self.assertIsNone(cl["first_error"])
        self.assertIsNone(s["stopped"])
        self.assertGreater(cl["wall_s"], 0)
        self.assertEqual(self.objects_in(visible), 0)

    def test_posix_run_on_localhost(self):
        self.full_run("posix")

    @unittest.skipUnless(HAVE_DAOS, "built without -DUSE_DAOS=ON -DDAOS_TEST_DOUBLE=ON")
    def test_daos_run_on_the_test_double(self):
        self.full_run("daos")

    def write_only_then_read_only(self, fs_type):
        dfs_path, env, visible = self.setup_fs(fs_type)
        common = dict(DFS_PATH=dfs_path, NR=self.NR, SIZE=self.SIZE, THREADS=2,
                      EXTRA_ARGS=f"--fs-type={fs_type}", **env)
        self.run_script(self.base_env(WR_ONLY=1, **common))
        with open(self.summary) as f:
            w = json.load(f)
        self.assertEqual([r["op"] for r in w["rounds"]], ["write"])
        self.assertEqual(w["config"]["wr_only"], True)
        self.assertEqual(w["config"]["cleanup"], False)
        self.assertEqual(w["cleanup"], {"performed": False})
        self.assertEqual(self.objects_in(visible), 2 * self.NR + 1)  # + the manifest

        # A read-only run with other values is refused and leaves the data set alone.
        p = self.run_script(self.base_env(RD_ONLY=1, **dict(common, NR=self.NR + 1)),
                            expect_rc=None)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("does not match this run", p.stdout + p.stderr)
        self.assertIn("NR=6", p.stdout + p.stderr)
        self.assertEqual(self.objects_in(visible), 2 * self.NR + 1)

        os.unlink(self.summary)
        self.run_script(self.base_env(RD_ONLY=1, **common))
        with open(self.summary) as f:
            r = json.load(f)
        self.assertEqual([x["op"] for x in r["rounds"]], ["read"])
        self.check_round(r["rounds"][0], "read", 1, 2, self.NR, self.SIZE)
        self.assertEqual(r["config"]["rd_only"], True)
        self.assertEqual(r["cleanup"]["performed"], True)
        self.assertEqual(r["cleanup"]["removed"], 2 * self.NR)
        self.assertEqual(self.objects_in(visible), 0)

        # Nothing left: a read-only run says what to do.
        p = self.run_script(self.base_env(RD_ONLY=1, **common), expect_rc=None)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("run the same command with WR_ONLY=1 first", p.stdout + p.stderr)

    def test_write_only_then_read_only_posix(self):
        self.write_only_then_read_only("posix")

    @unittest.skipUnless(HAVE_DAOS, "built without -DUSE_DAOS=ON -DDAOS_TEST_DOUBLE=ON")
    def test_write_only_then_read_only_daos(self):
        self.write_only_then_read_only("daos")

    def test_corrupted_object_is_a_failed_read(self):
        dfs_path, env, visible = self.setup_fs("posix")
        common = dict(DFS_PATH=dfs_path, NR=3, SIZE=8192, THREADS=1,
                      EXTRA_ARGS="--fs-type=posix")
        self.run_script(self.base_env(WR_ONLY=1, **common))
        victim = None
        for d in sorted(os.listdir(visible)):
            if re.fullmatch(r"[0-9a-f]{2}", d):
                for f in os.listdir(os.path.join(visible, d)):
                    if f.startswith("r1%2Fo"):
                        victim = os.path.join(visible, d, f)
        self.assertIsNotNone(victim)
        with open(victim, "r+b") as f:
            f.seek(-100, os.SEEK_END)
            b = f.read(1)
            f.seek(-100, os.SEEK_END)
            f.write(bytes([b[0] ^ 0xFF]))
        p = self.run_script(self.base_env(RD_ONLY=1, **common), expect_rc=1)
        self.assertIn("CHECKSUM_MISMATCH", p.stderr)
        with open(self.summary) as f:
            s = json.load(f)
        self.assertEqual(s["result"], "failed")
        self.assertEqual(s["rounds"][0]["failed_ops"], 1)
        self.assertEqual(s["rounds"][0]["ok_objects"], 5)
        self.assertEqual(s["rounds"][0]["per_rank"][1]["failed_ops"], 1)
        self.assertEqual(s["rounds"][0]["first_error"],
                         {"code": -801, "name": "CHECKSUM_MISMATCH", "rank": 1})
        self.assertEqual(s["rounds"][0]["skipped_ops"], 0)  # one failure stops nothing
        self.assertIsNone(s["stopped"])


PLOTTER = os.path.join(SOURCE, "bench", "plot_daos_bench.py")
PROGRESS_RE = re.compile(r"^\[progress\] (write|read) (\d+): (\d+)/(\d+) objects, ([0-9.]+) MiB, "
                         r"ranks running (\d+)/(\d+), ([0-9.]+) MiB/s now, ([0-9.]+) MiB/s avg, "
                         r"elapsed ([0-9.]+) s((?:; .*)?)$")
PROGRESS_CLEANUP_RE = re.compile(r"^\[progress\] cleanup: (\d+)/(\d+) objects, ranks running "
                                 r"(\d+)/(\d+), ([0-9.]+) objects/s now, ([0-9.]+) objects/s "
                                 r"avg, elapsed ([0-9.]+) s((?:; .*)?)$")


@unittest.skipUnless(HAVE_DAOS, "built without -DUSE_DAOS=ON -DDAOS_TEST_DOUBLE=ON")
class OutputsTest(RunTest):
    """--plot, the CSV next to the JSON and the [progress] lines, on the DAOS test double."""

    def csv_rows(self):
        csv_path = self.summary[:-len(".json")] + ".csv"
        with open(csv_path, newline="") as f:
            return list(csv.DictReader(f))

    def test_plot_and_csv_from_a_real_run(self):
        dfs_path, env, _ = self.setup_fs("daos")
        png = os.path.join(self.tmp, "run.png")
        env = self.base_env(DFS_PATH=dfs_path, NR=self.NR, SIZE=self.SIZE, THREADS=2,
                            READ_ROUNDS=2, **env)
        full = {k: v for k, v in os.environ.items() if k not in SCRIPT_VARS}
        full.update(env, DAOS_ADAPTER_BENCH_BIN=BIN, HWLOC_COMPONENTS="-pci")
        p = subprocess.run(["bash", SCRIPT, "--plot", png], env=full, capture_output=True,
                           text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("plot: " + png, p.stderr)
        with open(png, "rb") as f:
            data = f.read()
        self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n")
        self.assertGreater(len(data), 20000)  # three panels with axes, bars and text
        # The CSV: one row per round and rank plus an "all" row, equal to the JSON's figures.
        with open(self.summary) as f:
            s = json.load(f)
        self.assertIn("CSV written to " + self.summary[:-5] + ".csv", p.stdout)
        rows = self.csv_rows()
        expect = []
        for r in s["rounds"]:
            for pr in r["per_rank"]:
                expect.append((r["op"], str(r["round"]), str(pr["rank"]), pr["host"],
                               pr["objects"], pr["failed_ops"], pr["bytes"], pr["wall_s"],
                               pr["mib_s"], pr["objects_s"], None))
            expect.append((r["op"], str(r["round"]), "all", "", r["ok_objects"], r["failed_ops"],
                           r["bytes"], r["wall_s"], r["mib_s"], r["objects_s"], r["latency_ms"]))
        data_rows = [x for x in rows if x["op"] != "cleanup"]
        self.assertEqual(len(data_rows), len(expect))
        self.assertEqual(len(expect), 3 * 3)  # write 1, read 1, read 2 x (2 ranks + all)
        for row, e in zip(data_rows, expect):
            self.assertEqual((row["op"], row["round"], row["rank"], row["host"]), e[:4])
            for col, v in zip(("objects", "failed_ops", "bytes"), e[4:7]):
                self.assertEqual(int(row[col]), v, col)
            for col, v in zip(("wall_s", "mib_s", "objects_s"), e[7:10]):
                self.assertAlmostEqual(float(row[col]), v, delta=abs(v) * 1e-6, msg=col)
            lat = e[10]
            for p_ in ("p50", "p95", "p99", "max", "mean"):
                if lat is None:
                    self.assertEqual(row[f"lat_{p_}_ms"], "")
                else:
                    self.assertAlmostEqual(float(row[f"lat_{p_}_ms"]), lat[p_],
                                           delta=lat[p_] * 1e-6)
        cleanup = [x for x in rows if x["op"] == "cleanup"]
        self.assertEqual([x["rank"] for x in cleanup], ["0", "1", "all"])
        self.assertEqual(int(cleanup[-1]["objects"]), s["cleanup"]["removed"])
        self.assertEqual(int(cleanup[-1]["failed_ops"]), s["cleanup"]["failed_ops"])
        self.assertAlmostEqual(float(cleanup[-1]["wall_s"]), s["cleanup"]["wall_s"],
                               delta=s["cleanup"]["wall_s"] * 1e-6)
        # The standalone plotter takes several summaries.
        png2 = os.path.join(self.tmp, "two.png")
        p = subprocess.run([sys.executable, PLOTTER, self.summary, self.summary, "-o", png2],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(png2, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_progress_lines_inside_a_long_round(self):
        dfs_path, env, _ = self.setup_fs("daos")
        interval = 0.02
        size = 256 * 1024
        # The premise: the write round lasts several intervals. How many objects that takes
        # depends on the machine's speed: grow the round until it does (a state, not a time).
        for nr in (150, 600, 2400, 9600):
            common = dict(DFS_PATH=dfs_path, NR=nr, SIZE=size, THREADS=1, **env)
            p = self.run_script(self.base_env(PROGRESS=interval, **common))
            with open(self.summary) as f:
                s = json.load(f)
            write = s["rounds"][0]
            if write["wall_s"] > 3 * interval:
                break
            os.unlink(self.summary)
        self.assertGreater(write["wall_s"], 3 * interval, "round too short for this test")
        progress = [l for l in p.stdout.splitlines() if l.startswith("[progress]")]
        lines = [PROGRESS_RE.match(l) for l in progress if not l.startswith("[progress] cleanup")]
        self.assertTrue(lines, p.stdout)
        self.assertTrue(all(lines), p.stdout)  # every progress line has the documented form
        for l in progress:
            if l.startswith("[progress] cleanup"):
                self.assertRegex(l, PROGRESS_CLEANUP_RE)
        writes = [m for m in lines if m.group(1) == "write"]
        self.assertTrue(writes, p.stdout)
        done = [int(m.group(3)) for m in writes]
        self.assertEqual(done, sorted(done))
        for m in writes:
            self.assertNotIn("failed", m.group(11))  # only a slow rank may be named
            self.assertEqual(int(m.group(4)), 2 * nr)
            self.assertLessEqual(int(m.group(3)), 2 * nr)
            self.assertAlmostEqual(float(m.group(5)), int(m.group(3)) * size / MIB, delta=0.06)
            self.assertEqual(m.group(7), "2")
            self.assertTrue(1 <= int(m.group(6)) <= 2)
        # Progress lines come before the round's table, which is unchanged.
        out = p.stdout
        self.assertLess(out.index("[progress] write 1"), out.index("[write 1] rank 0"))
        self.assertRegex(out, rf"\[AGG\] write 1: 2 ranks, {2 * nr} objects, ")
        # PROGRESS=0: none.
        os.unlink(self.summary)
        p = self.run_script(self.base_env(PROGRESS=0, **common))
        self.assertNotIn("[progress]", p.stdout)
        self.assertRegex(p.stdout, rf"\[AGG\] write 1: 2 ranks, {2 * nr} objects, ")

    def test_plot_without_matplotlib_is_refused_before_the_run(self):
        fake = os.path.join(self.tmp, "python-without-site")
        with open(fake, "w") as f:
            f.write("#!/bin/sh\nexec /usr/bin/python3 -S \"$@\"\n")  # no dist-packages
        os.chmod(fake, 0o755)
        env = self.base_env(NR=2, SIZE="4k", PLOT_PYTHON=fake)
        full = {k: v for k, v in os.environ.items() if k not in SCRIPT_VARS}
        full.update(env, DAOS_ADAPTER_BENCH_BIN=BIN)
        p = subprocess.run(["bash", SCRIPT, "--plot", os.path.join(self.tmp, "x.png")],
                           env=full, capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--plot needs matplotlib", p.stderr)
        self.assertIn(fake, p.stderr)
        self.assertFalse(os.path.exists(self.summary))  # nothing ran
        self.assertNotIn("running:", p.stderr)

    def test_plotter_refuses_other_json(self):
        bad = os.path.join(self.tmp, "bad.json")
        with open(bad, "w") as f:
            json.dump({"benchmark": "store_kv_bench"}, f)
        p = subprocess.run([sys.executable, PLOTTER, bad, "-o", os.path.join(self.tmp, "y.png")],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 2)
        self.assertIn("is not a daos_adapter_bench summary", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "y.png")))

@unittest.skipUnless(HAVE_DOUBLE, "needs the libdfs test double (-DUSE_DAOS=ON -DDAOS_TEST_DOUBLE=ON)")
class EngineDiesTest(RunHelpers):
    """A DAOS engine that stops answering mid-run: the run ends with exit status 3 within its
    deadline, the summary counting the failed and skipped operations; a healthy run with the
    same OP_TIMEOUT still exits 0 with failed_ops 0."""

    OP_TIMEOUT = 1.0
    # From the engine's death to the end of the run: the deadline of the calls in flight, the
    # adapter's close waiting for calls still inside DAOS (2 s), MPI's teardown, a loaded CI
    # machine. Without deadlines the run never ends; with the adapter's default it takes 30 s.
    AFTER_DEATH_S = OP_TIMEOUT + 12

    def setUp(self):
        super().setUp()
        self.dfs_path, self.env, _ = self.setup_fs("daos")
        self.engine_down = os.path.join(self.env["DFS_DOUBLE_ROOT"], ".engine_down")
        self.addCleanup(self.restart_engine)

    def restart_engine(self):
        try:
            os.unlink(self.engine_down)
        except FileNotFoundError:
            pass

    def start(self, env):
        """The script started with its stdout piped (line by line) and its stderr in a file."""
        full = {k: v for k, v in os.environ.items() if k not in SCRIPT_VARS}
        full.update(DAOS_ADAPTER_BENCH_BIN=BIN, HWLOC_COMPONENTS="-pci")
        full.update(env)
        err = open(os.path.join(self.tmp, "stderr.txt"), "w+")
        self.addCleanup(err.close)
        p = subprocess.Popen(["bash", SCRIPT], env=full, stdout=subprocess.PIPE, stderr=err,
                             text=True, bufsize=1, start_new_session=True)
        self.addCleanup(self.kill, p)
        return p, err

    @staticmethod
    def kill(p):
        if p.poll() is None:
            os.killpg(p.pid, 9)
            p.wait()
        p.stdout.close()

    def read_lines(self, p, until, deadline):
        """Yields stdout lines until EOF; fails (and kills the run) past deadline[0] (monotonic
        seconds; a list, so the caller may move it while reading)."""
        import select
        while True:
            left = deadline[0] - time.monotonic()
            if left <= 0:
                self.kill(p)
                self.fail(f"the run did not end by its deadline ({until}): it hangs")
            ready, _, _ = select.select([p.stdout], [], [], left)
            if not ready:
                continue
            line = p.stdout.readline()
            if not line:
                return
            yield line.rstrip("\n")

    def check_failed_summary(self, rc, lines, err):
        err.seek(0)
        stderr = err.read()
        out = "\n".join(lines)
        self.assertEqual(rc, 3, out + stderr)
        self.assertIn("the storage stopped answering", out)
        self.assertIn("its summary, with the failed operations: " + self.summary, stderr)
        with open(self.summary) as f:
            s = json.load(f)
        self.assertEqual(s["result"], "failed")
        self.assertEqual(s["config"]["op_timeout_ms"], int(self.OP_TIMEOUT * 1000))
        w = s["rounds"][0]
        self.assertEqual(w["op"], "write")
        self.assertGreater(w["failed_ops"], 0)
        self.assertGreater(w["timeouts"], 0)  # the calls in flight met their deadline
        self.assertGreater(w["skipped_ops"], 0)  # and the rest were not attempted
        self.assertEqual(w["ok_objects"] + w["failed_ops"] + w["skipped_ops"], w["objects"])
        self.assertIn(w["first_error"]["name"], ("DFS_NETWORK_TIMEOUT", "DFS_SERVICE_UNAVAILABLE"))
        self.assertEqual(w["stopped_ranks"], [0, 1])
        for pr in w["per_rank"]:
            self.assertGreater(pr["failed_ops"], 0)
            self.assertEqual(pr["stopped"], "storage not answering")
            self.assertIsNotNone(pr["first_error"])
        self.assertEqual(sum(pr["failed_ops"] for pr in w["per_rank"]), w["failed_ops"])
        self.assertEqual(sum(pr["skipped_ops"] for pr in w["per_rank"]), w["skipped_ops"])
        # [AGG] still divides by the slowest rank's wall time.
        self.assertAlmostEqual(w["wall_s"], max(pr["wall_s"] for pr in w["per_rank"]))
        self.assertAlmostEqual(w["mib_s"], w["bytes"] / MIB / w["wall_s"], delta=1e-6 + w["mib_s"] * 1e-6)
        self.assertRegex(out, r"\[AGG\] write 1: 2 ranks, .*, failed \d+, skipped \d+, "
                              r"ranks stopped early \[0,1\]")
        for rank in (0, 1):
            self.assertRegex(out, rf"\[write 1\] rank {rank} .* failed [1-9]\d*, skipped \d+, "
                                  r"stopped \(storage not answering\), first error DFS_")
            self.assertRegex(stderr, rf"\[rank {rank} on .*\] write: stopping this round")
        # Later rounds and the cleanup were not run: each would only wait for deadlines.
        self.assertEqual([r["op"] for r in s["rounds"]], ["write"])
        self.assertEqual(s["stopped"]["op"], "write")
        self.assertEqual(s["stopped"]["rounds_not_run"], ["read 1", "cleanup"])
        self.assertEqual(s["cleanup"], {"performed": False, "skipped": True})
        return s, out

    def healthy_run_still_passes(self):
        self.restart_engine()
        os.unlink(self.summary)
        env = self.base_env(DFS_PATH=self.dfs_path, NR=8, SIZE="4k", THREADS=2, PROGRESS=0.1,
                            OP_TIMEOUT=self.OP_TIMEOUT, **dict(self.env, DIR="healthy"))
        p = self.run_script(env, expect_rc=0)
        with open(self.summary) as f:
            s = json.load(f)
        self.assertEqual(s["result"], "ok")
        self.assertIsNone(s["stopped"])
        for r in s["rounds"]:
            self.assertEqual((r["failed_ops"], r["skipped_ops"]), (0, 0))
        self.assertEqual(s["cleanup"]["failed_ops"], 0)
        self.assertNotIn("failed", "".join(l for l in p.stdout.splitlines()
                                           if l.startswith("[progress]")))

    def test_engine_dies_at_the_first_write(self):
        env = self.base_env(DFS_PATH=self.dfs_path, NR=200, SIZE="4k", THREADS=2, PROGRESS=0.2,
                            OP_TIMEOUT=self.OP_TIMEOUT, DFS_DOUBLE_FAULT="engine_dies@write",
                            **self.env)
        t0 = time.monotonic()
        p, err = self.start(env)
        lines = list(self.read_lines(p, "engine dead from the first write",
                                     [t0 + 60 + self.AFTER_DEATH_S]))
        rc = p.wait()
        wall = time.monotonic() - t0
        self.assertTrue(os.path.exists(self.engine_down))  # the engine really died
        self.check_failed_summary(rc, lines, err)
        # Started with a dead engine: the script's own start (MPI, adapters) plus the bound.
        self.assertLess(wall, 5 + self.AFTER_DEATH_S, f"took {wall:.1f} s")
        print(f"\nengine dies at the first write: run took {wall:.2f} s", file=sys.stderr)
        self.healthy_run_still_passes()

    def test_engine_stops_in_the_middle_of_a_round(self):
        # Enough objects that the write round outlasts the first progress line by far (each is
        # a few file operations on the double); the engine is stopped after that line.
        env = self.base_env(DFS_PATH=self.dfs_path, NR=20000, SIZE="4k", THREADS=2,
                            PROGRESS=0.1, OP_TIMEOUT=self.OP_TIMEOUT, **self.env)
        p, err = self.start(env)
        lines, died_at, after = [], None, []
        deadline = [time.monotonic() + 120]
        for line in self.read_lines(p, "engine stopped mid-round", deadline):
            lines.append(line)
            m = PROGRESS_RE.match(line)
            if died_at is None and m and m.group(1) == "write" and int(m.group(3)) > 0:
                open(self.engine_down, "w").close()  # the engine stops answering
                died_at = time.monotonic()
                deadline[0] = died_at + self.AFTER_DEATH_S
            elif died_at is not None:
                after.append(line)
        rc = p.wait()
        self.assertIsNotNone(died_at, "no [progress] line with objects done:\n" + "\n".join(lines))
        after_death = time.monotonic() - died_at
        s, out = self.check_failed_summary(rc, lines, err)
        w = s["rounds"][0]
        self.assertGreater(w["ok_objects"], 0)  # written before the engine stopped
        self.assertLess(w["ok_objects"], w["objects"])
        self.assertLess(after_death, self.AFTER_DEATH_S)
        # Progress lines went on while the ranks' I/O was stuck, naming the ranks.
        stuck = [l for l in after if l.startswith("[progress] write 1") and "; rank " in l]
        self.assertTrue(stuck, "\n".join(after))
        self.assertTrue(any(re.search(r"; rank [01] \(.*\): (failed \d+|no operation returned)",
                                      l) for l in stuck), "\n".join(stuck))
        print(f"\nengine stopped mid-round: run ended {after_death:.2f} s after it",
              file=sys.stderr)
        self.healthy_run_still_passes()


if __name__ == "__main__":
    unittest.main(verbosity=2)
