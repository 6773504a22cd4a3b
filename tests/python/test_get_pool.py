"""test_get_pool.py — get / get_batch of large values through the pool of reusable bytes
objects (python/src/bytes_pool.c): every value returned is the object's exact bytes, a bytes
object like any other, and never bytes of an earlier value whose memory the pool reuses.

Against a real mooncake_master on loopback; the objects live in a segment one store of this
process mounts from a /dev/shm file (mount_segment), so a test can corrupt a stored value's bytes
in the file and watch the end-to-end CRC32C refuse it. A second store of this process reads.
Sizes: 3 MiB values are read at the size guessed from the previous read (get_hint), 5 MiB values
after get_size (above the guess's 4 MiB cap): both ways into the pool.

The pool is process-wide, so this file runs alone (tests/CMakeLists.txt) and expects the
default pool (MC_PY_GET_POOL_BYTES unset); a subprocess checks a small limit.
"""
import gc
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import unittest

from test_store import BUILD, die_with_parent, free_port, wait_port

import mooncake.store as mcs

MiB = 1 << 20
SEGMENT = 256 * MiB
SMALL = 3 * MiB  # read with the guessed size
LARGE = 5 * MiB  # read after get_size

MASTER = None
HOLDER = None  # the store whose mounted file holds every object
READER = None
SHM_PATH = None


def pattern(tag, size):
    """size bytes that differ for every tag and within the value (a 251-byte period)."""
    block = bytes(((tag * 131) + i * 7) & 0xFF for i in range(251))
    return (block * (size // len(block) + 1))[:size]


def start_master():
    logdir = tempfile.TemporaryDirectory(prefix="mc_get_pool_")
    log = open(os.path.join(logdir.name, "master.log"), "wb")
    port = free_port()
    proc = subprocess.Popen(
        [os.path.join(BUILD, "tools", "mooncake_master"), f"--rpc_port={port}",
         f"--metrics_port={free_port()}", "--rpc_address=127.0.0.1", "--metrics_host=127.0.0.1",
         "--default_kv_lease_ttl=1000"],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
    wait_port(port, proc)
    return proc, log, logdir, f"127.0.0.1:{port}"


def new_store(master_addr, buffer=64 * MiB):
    s = mcs.MooncakeDistributedStore()
    rc = s.setup("127.0.0.1", "P2PHANDSHAKE", 0, buffer, "tcp", "", master_addr)
    if rc != 0:
        raise RuntimeError(f"setup failed: {rc}")
    return s


def setUpModule():
    global MASTER, HOLDER, READER, SHM_PATH
    MASTER = start_master()
    fd, SHM_PATH = tempfile.mkstemp(prefix="mc_get_pool_", dir="/dev/shm")
    os.ftruncate(fd, SEGMENT)
    os.close(fd)
    HOLDER = new_store(MASTER[3])
    r = HOLDER.mount_segment(SHM_PATH, SEGMENT)
    if r["ret"] != 0:
        raise RuntimeError(f"mount_segment: {r}")
    READER = new_store(MASTER[3])


def tearDownModule():
    for s in (READER, HOLDER):
        if s is not None:
            s.close()
    if SHM_PATH:
        os.unlink(SHM_PATH)
    if MASTER:
        proc, log, logdir, _ = MASTER
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        logdir.cleanup()


class GetPoolTest(unittest.TestCase):
    """Each test puts its own keys (the segment holds them all) and removes them at the end
    (best effort: a key read in the last second keeps its lease)."""

    def setUp(self):
        self.keys = []

    def tearDown(self):
        for k in self.keys:
            READER.remove(k)

    def put(self, name, value):
        key = f"get_pool/{self.id()}/{name}"
        self.assertEqual(READER.put(key, value), 0)
        self.keys.append(key)
        return key

    def same(self, got, want, what=""):
        """got == want, reported without printing megabytes."""
        if got != want:
            first = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y),
                         min(len(got), len(want)))
            self.fail(f"{what}: {len(got)} bytes, want {len(want)}; first difference at {first}")

    def corrupt(self, value):
        """Flips one byte of the stored copy of `value` in the mounted file."""
        with open(SHM_PATH, "r+b") as f:
            data = f.read()
            at = data.find(value)
            self.assertGreaterEqual(at, 0, "the value is not in the segment file")
            f.seek(at + len(value) // 2)
            f.write(bytes([data[at + len(value) // 2] ^ 0xFF]))

    def test_a_value_dropped_then_another_read_into_its_memory_is_the_new_one(self):
        for size in (SMALL, LARGE):
            with self.subTest(size=size):
                va, vb = pattern(1, size), pattern(2, size)
                ka, kb = self.put(f"a{size}", va), self.put(f"b{size}", vb)
                a = READER.get(ka)
                self.same(a, va, "a")
                hash_a = hash(a)  # cached in the object: must not survive its reuse
                where = id(a)
                del a
                b = READER.get(kb)
                self.assertEqual(id(b), where, "the pool did not reuse the dropped value")
                self.same(b, vb, "b")
                self.assertEqual(hash(b), hash(bytes(bytearray(vb))))
                self.assertNotEqual(hash(b), hash_a)
                self.assertIn(b, {vb: 1})  # a dict finds it by its bytes' hash

    def test_a_value_still_held_is_never_reused(self):
        va, vb = pattern(3, LARGE), pattern(4, LARGE)
        ka, kb = self.put("a", va), self.put("b", vb)
        a = READER.get(ka)
        view = memoryview(READER.get(kb))  # only the view holds this one
        for _ in range(4):
            b = READER.get(kb)
            self.assertTrue(b is not a, "a held value was handed out again")
            self.same(b, vb, "b")
            self.same(a, va, "a")
            self.same(bytes(view), vb, "view")
            self.assertNotEqual(id(b), id(view.obj))
            del b

    def test_many_repeated_gets_return_exact_bytes(self):
        values = {self.put(f"k{i}", pattern(10 + i, SMALL if i % 2 else LARGE)): pattern(
            10 + i, SMALL if i % 2 else LARGE) for i in range(6)}
        keys = list(values)
        held = []
        for round_ in range(12):
            order = keys[round_ % len(keys):] + keys[:round_ % len(keys)]
            got = READER.get_batch(order)
            self.assertEqual(len(got), len(order))
            for k, v in zip(order, got):
                self.same(v, values[k], k)
            one = READER.get(order[0])
            self.same(one, values[order[0]], order[0])
            if round_ % 3 == 0:
                held.append((order[1], got[1]))  # some values outlive later rounds
            del got, one
        for k, v in held:
            self.same(v, values[k], k)

    def test_a_missing_key_in_a_batch_reads_as_empty_not_as_reused_bytes(self):
        for size in (SMALL, LARGE):
            with self.subTest(size=size):
                v1, v2 = pattern(20, size), pattern(21, size)
                k1, k2 = self.put(f"one{size}", v1), self.put(f"two{size}", v2)
                # fill the pool with objects holding these values, then drop them
                self.assertTrue(READER.get_batch([k1, k2, k1]) == [v1, v2, v1])
                gc.collect()
                missing = f"get_pool/{self.id()}/missing"
                got = READER.get_batch([k1, missing, k2, missing])
                self.assertEqual(len(got), 4)
                self.same(got[0], v1, "first")
                self.same(got[1], b"", "missing")
                self.same(got[2], v2, "third")
                self.same(got[3], b"", "missing again")
                self.same(READER.get(missing), b"", "get of the missing key")

    def test_a_checksum_mismatch_in_a_batch_reads_as_empty_not_as_reused_bytes(self):
        for size in (SMALL, LARGE):
            with self.subTest(size=size):
                v1, v2, v3 = pattern(30, size), pattern(31, size), pattern(32, size)
                k1, k2, k3 = (self.put(f"c1{size}", v1), self.put(f"c2{size}", v2),
                              self.put(f"c3{size}", v3))
                self.assertTrue(READER.get_batch([k1, k2, k3]) == [v1, v2, v3])
                self.assertTrue(READER.get_batch([k2, k2, k2]) == [v2, v2, v2])
                self.corrupt(v2)
                got = READER.get_batch([k1, k2, k3])
                self.same(got[0], v1, "first")
                self.same(got[1], b"", "corrupted")
                self.same(got[2], v3, "third")
                self.same(READER.get(k2), b"", "get of the corrupted key")

    def test_a_shorter_value_in_reused_memory_is_exactly_its_own_length(self):
        # SMALL: read into the guessed size (the longer value's), then cut to its own length;
        # LARGE: get_size gives its length, read into a longer object of the pool
        for size in (SMALL, LARGE):
            with self.subTest(size=size):
                full, shorter = pattern(40, size), pattern(41, size - 200 * 1024)
                kf, ks = self.put(f"full{size}", full), self.put(f"shorter{size}", shorter)
                a = READER.get(kf)
                where = id(a)
                del a
                b = READER.get(ks)
                self.assertEqual(id(b), where, "the pool did not reuse the dropped value")
                self.assertEqual(len(b), len(shorter))
                self.same(b, shorter, "shorter")
                self.assertEqual(b[-3:], shorter[-3:])
                self.same(b + b"x", shorter + b"x", "b + x")
                del b
                c = READER.get(kf)  # the longer value again, in the same memory
                self.assertEqual(id(c), where, "the pool did not reuse the dropped value")
                self.same(c, full, "full")

    def test_values_behave_as_bytes(self):
        v = pattern(50, LARGE)
        k = self.put("v", v)
        b = READER.get(k)
        self.assertIs(type(b), bytes)
        self.assertEqual(len(b), len(v))
        self.assertEqual(b[10:20], v[10:20])
        self.assertEqual(b[::-1][:5], v[::-1][:5])
        self.same(memoryview(b).tobytes(), v, "memoryview")
        self.same(pickle.loads(pickle.dumps(b)), v, "pickle")
        self.assertEqual(hash(b), hash(v))
        self.assertEqual(b.find(v[1000:1100]), v.find(v[1000:1100]))
        self.same(bytes(b), v, "bytes()")

    def test_threads_reading_concurrently_get_exact_bytes(self):
        values = {self.put(f"t{i}", pattern(60 + i, SMALL if i % 3 else LARGE)): pattern(
            60 + i, SMALL if i % 3 else LARGE) for i in range(8)}
        keys = list(values)
        errors = []

        def lane(n):
            for r in range(10):
                mine = [keys[(n + r + j) % len(keys)] for j in range(3)]
                for k, v in zip(mine, READER.get_batch(mine)):
                    if v != values[k]:
                        errors.append((n, r, k, len(v)))
                v = READER.get(mine[0])
                if v != values[mine[0]]:
                    errors.append((n, r, mine[0], len(v)))

        threads = [threading.Thread(target=lane, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(errors, [])

    def test_values_outlive_the_store_that_read_them(self):
        v = pattern(70, LARGE)
        k = self.put("outlive", v)
        other = new_store(MASTER[3])
        got = other.get(k)
        held = other.get_batch([k, k])
        self.assertEqual(other.close(), 0)  # the pool lets go of every object
        self.same(got, v, "get")
        self.assertTrue(held == [v, v])
        self.same(READER.get(k), v, "another store")

    def test_a_small_pool_limit_still_returns_exact_bytes(self):
        """MC_PY_GET_POOL_BYTES=8MiB holds one 5 MiB object: the rest are plain new objects."""
        for i in range(3):
            self.put(f"limit{i}", pattern(80 + i, LARGE))
        code = f"""
import mooncake.store as mcs
def pattern(tag, size):
    block = bytes(((tag * 131) + i * 7) & 0xFF for i in range(251))
    return (block * (size // len(block) + 1))[:size]
s = mcs.MooncakeDistributedStore()
assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 64 << 20, "tcp", "", {MASTER[3]!r}) == 0
keys = {self.keys!r}
want = [pattern(80 + i, {LARGE}) for i in range(3)]
for r in range(6):
    held = [s.get(k) for k in keys]
    assert held == want, r
    assert s.get_batch(keys) == want, r
    assert s.get_batch(keys[:1]) == want[:1], r
s.close()
print("OK")
"""
        env = dict(os.environ, MC_PY_GET_POOL_BYTES="8MiB")
        out = subprocess.run([sys.executable, "-X", "dev", "-c", code], env=env,
                             capture_output=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr.decode(errors="replace")[-2000:])
        self.assertIn(b"OK", out.stdout)


if __name__ == "__main__":
    unittest.main()
