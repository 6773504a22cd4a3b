"""test_tensor.py — the tensor API of mooncake.store.MooncakeDistributedStore, real cluster.

setUpModule starts a mooncake_master and a mooncake_client (test_store.Cluster) from the build
tree (MC_BUILD_DIR) on free loopback ports; the tests drive a MooncakeDistributedStore in this
process. Stored objects are checked byte by byte against upstream's format as the spec states it
(docs/tensor-format.md; headers are built here independently with struct, not with the module's
code), in both directions: what put_tensor stores is read with plain get, and objects stored with
plain put are read with get_tensor.

Needs torch (python3-torch); the whole module is skipped on an interpreter without it.
"""
import ctypes
import json
import os
import struct
import sys
import tempfile
import unittest

try:
    import torch
except ImportError:  # e.g. the pyenv interpreter of python_store_unittest
    raise unittest.SkipTest("torch is not installed")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_store as ts  # noqa: E402  (cluster helpers; its tests are not collected from here)

mcs = ts.mcs

INVALID_PARAMS = -600
OBJECT_NOT_FOUND = -704
FILE_NOT_FOUND = -1100
MiB = 1 << 20

CLUSTER = None
STORE = None

# ---- the format, from the spec (mooncake-interfaces-2.md section 3.3), written out by hand ----
MAGIC = 0x4D4F4F4E
SPEC_CODES = {torch.float32: 0, torch.float64: 1, torch.int8: 2, torch.uint8: 3,
              torch.int16: 4, torch.int32: 6, torch.int64: 8, torch.bool: 10,
              torch.float16: 11, torch.bfloat16: 12}


def spec_header(code, gshape, lshape, data_bytes, layout=0, axes=(), ndim=None, magic=MAGIC,
                version=1, header_size=304, data_offset=304):
    """The 304-byte header built field by field at the offsets of the spec table."""
    h = bytearray(304)
    struct.pack_into("<I", h, 0, magic)
    struct.pack_into("<H", h, 4, version)
    struct.pack_into("<H", h, 6, header_size)
    struct.pack_into("<i", h, 8, code)
    struct.pack_into("<i", h, 12, len(lshape) if ndim is None else ndim)
    struct.pack_into("<I", h, 16, layout)
    struct.pack_into("<I", h, 20, 0)
    struct.pack_into("<Q", h, 24, data_offset)
    struct.pack_into("<Q", h, 32, data_bytes)
    for i in range(8):
        struct.pack_into("<q", h, 40 + 8 * i, gshape[i] if i < len(gshape) else -1)
        struct.pack_into("<q", h, 104 + 8 * i, lshape[i] if i < len(lshape) else -1)
    struct.pack_into("<I", h, 168, len(axes))
    struct.pack_into("<I", h, 172, 0)
    for j, a in enumerate(axes):
        off = 176 + 32 * j
        for k in range(6):
            struct.pack_into("<i", h, off + 4 * k, a[k])
        struct.pack_into("<q", h, off + 24, a[6])
    return bytes(h)


def raw(t):
    """The C-order bytes of a CPU tensor."""
    t = t.contiguous()
    n = t.numel() * t.element_size()
    return ctypes.string_at(t.data_ptr(), n) if n else b""


def spec_object(t):
    shape = list(t.shape)
    return spec_header(SPEC_CODES[t.dtype], shape, shape, t.numel() * t.element_size()) + raw(t)


def bit_equal(a, b):
    return (a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape) and raw(a) == raw(b))


def setUpModule():
    global CLUSTER, STORE
    CLUSTER = ts.Cluster()
    ts.CLUSTER = CLUSTER
    try:
        STORE = ts.new_store(segment=128 * MiB, buffer=64 * MiB)
    except Exception:
        CLUSTER.stop()
        raise


def tearDownModule():
    global CLUSTER, STORE
    if STORE is not None:
        STORE.close()
        STORE = None
    if CLUSTER is not None:
        CLUSTER.stop()
        CLUSTER = None
    ts.CLUSTER = None


_n = [0]


def key(prefix):
    _n[0] += 1
    return f"tensor/{prefix}/{os.getpid()}/{_n[0]}"


def samples():
    """A tensor of every supported dtype with varied bits."""
    g = torch.Generator().manual_seed(7)
    out = [torch.randn(3, 5, generator=g, dtype=torch.float32),
           torch.randn(4, 2, generator=g, dtype=torch.float64),
           torch.randint(-128, 127, (17,), generator=g, dtype=torch.int8),
           torch.randint(0, 255, (2, 3, 4), generator=g, dtype=torch.uint8),
           torch.randint(-30000, 30000, (6,), generator=g, dtype=torch.int16),
           torch.randint(-2**31, 2**31 - 1, (5, 1), generator=g, dtype=torch.int32),
           torch.randint(-2**62, 2**62, (3,), generator=g, dtype=torch.int64),
           torch.rand(9, generator=g) > 0.5,
           torch.randn(2, 7, generator=g).to(torch.float16),
           torch.randn(3, 3, generator=g).to(torch.bfloat16)]
    out[1][0, 0] = float("nan")
    out[8][0, 0] = float("-inf")
    return out


class RegisteredBuffer:
    """ctypes memory registered with the store for the *_into / *_from calls."""

    def __init__(self, size):
        self.mem = ctypes.create_string_buffer(size)
        self.ptr, self.size = ctypes.addressof(self.mem), size
        if STORE.register_buffer(self.ptr, size) != 0:
            raise RuntimeError("register_buffer failed")

    def close(self):
        STORE.unregister_buffer(self.ptr)


# ---- tests --------------------------------------------------------------------------------


class ModuleTest(unittest.TestCase):
    def test_store_class_is_the_c_type_with_tensor_methods(self):
        import mooncake._store as cext
        self.assertTrue(issubclass(mcs.MooncakeDistributedStore, cext.MooncakeDistributedStore))
        self.assertIsInstance(STORE, cext.MooncakeDistributedStore)
        for name in ("put_tensor get_tensor batch_put_tensor batch_get_tensor pub_tensor "
                     "batch_pub_tensor upsert_tensor batch_upsert_tensor upsert_pub_tensor "
                     "batch_upsert_pub_tensor get_tensor_into batch_get_tensor_into "
                     "get_tensor_into_cuda batch_get_tensor_into_cuda put_tensor_from "
                     "batch_put_tensor_from upsert_tensor_from batch_upsert_tensor_from "
                     "put_tensor_with_tp batch_put_tensor_with_tp pub_tensor_with_tp "
                     "batch_pub_tensor_with_tp put_tensor_with_tp_from "
                     "batch_put_tensor_with_tp_from get_tensor_with_tp batch_get_tensor_with_tp "
                     "get_tensor_with_tp_into batch_get_tensor_with_tp_into "
                     "put_tensor_with_parallelism batch_put_tensor_with_parallelism "
                     "put_tensor_with_parallelism_from batch_put_tensor_with_parallelism_from "
                     "upsert_tensor_with_parallelism batch_upsert_tensor_with_parallelism "
                     "upsert_tensor_with_parallelism_from "
                     "batch_upsert_tensor_with_parallelism_from get_tensor_with_parallelism "
                     "batch_get_tensor_with_parallelism get_tensor_with_parallelism_into "
                     "batch_get_tensor_with_parallelism_into save_tensor_to_safetensor "
                     "load_tensor_from_safetensor").split():
            doc = getattr(mcs.MooncakeDistributedStore, name).__doc__ or ""
            self.assertIn("->", doc, name)
        for name in ("ParallelAxis", "TensorParallelism", "ReadTarget"):
            self.assertTrue(hasattr(mcs, name))
        self.assertEqual(mcs._tensor_metadata_size(), 304)

    def test_serialize_and_deserialize_functions(self):
        t = torch.arange(12, dtype=torch.int16).reshape(3, 4).t()
        header, ptr, nbytes, owner = mcs._serialize_tensor(t)
        self.assertEqual(header, spec_header(4, [4, 3], [4, 3], 24))
        self.assertEqual(nbytes, 24)
        self.assertEqual(ctypes.string_at(ptr, nbytes), raw(t))
        self.assertTrue(bit_equal(mcs._deserialize_tensor(header + raw(t)), t))
        with self.assertRaises(ValueError):
            mcs._serialize_tensor(torch.zeros(2, dtype=torch.complex64))
        with self.assertRaises(ValueError):
            mcs._deserialize_tensor(header + raw(t)[:-1])
        del owner


class RoundTripTest(unittest.TestCase):
    def test_every_dtype_round_trips_bit_exact(self):
        for t in samples():
            with self.subTest(dtype=t.dtype):
                k = key("dtype")
                self.assertEqual(STORE.put_tensor(k, t), 0)
                got = STORE.get_tensor(k)
                self.assertTrue(bit_equal(got, t), (got, t))

    def test_shapes_zero_dim_empty_non_contiguous_and_eight_dims(self):
        cases = [torch.tensor(3.5), torch.tensor(True), torch.empty(0, 3),
                 torch.empty(0, dtype=torch.bfloat16),
                 torch.arange(24, dtype=torch.float32).reshape(4, 6).t(),
                 torch.arange(40, dtype=torch.int64)[::3],
                 torch.arange(256, dtype=torch.int32).reshape([2] * 8)]
        for t in cases:
            with self.subTest(shape=tuple(t.shape), dtype=t.dtype):
                k = key("shape")
                self.assertEqual(STORE.put_tensor(k, t), 0)
                got = STORE.get_tensor(k)
                self.assertTrue(bit_equal(got, t))
                self.assertTrue(torch.equal(got, t))

    def test_unsupported_inputs_are_refused_with_minus_600(self):
        import numpy
        k = key("bad")
        for bad in (torch.zeros(2, dtype=torch.complex64), torch.zeros([1] * 9), [1.0],
                    numpy.zeros(3, dtype=numpy.float32), None,
                    torch.zeros(3).to_sparse()):
            self.assertEqual(STORE.put_tensor(k, bad), INVALID_PARAMS, repr(bad))
        self.assertEqual(STORE.is_exist(k), 0)
        # numpy goes through torch.from_numpy, as the docstring says
        a = numpy.arange(6, dtype=numpy.float64)
        self.assertEqual(STORE.put_tensor(k, torch.from_numpy(a)), 0)
        self.assertTrue(numpy.array_equal(STORE.get_tensor(k).numpy(), a))

    def test_put_keeps_first_value_upsert_replaces(self):
        k = key("ups")
        self.assertEqual(STORE.put_tensor(k, torch.ones(4)), 0)
        self.assertEqual(STORE.put_tensor(k, torch.zeros(4)), 0)
        self.assertTrue(torch.equal(STORE.get_tensor(k), torch.ones(4)))
        self.assertEqual(STORE.upsert_tensor(k, torch.arange(7)), 0)
        self.assertTrue(torch.equal(STORE.get_tensor(k), torch.arange(7)))
        cfg = mcs.ReplicateConfig()
        cfg.replica_num = 1
        self.assertEqual(STORE.upsert_pub_tensor(k, torch.tensor([5]), cfg), 0)
        self.assertTrue(torch.equal(STORE.get_tensor(k), torch.tensor([5])))
        k2 = key("pub")
        self.assertEqual(STORE.pub_tensor(k2, torch.tensor([1, 2]), cfg), 0)
        self.assertTrue(torch.equal(STORE.get_tensor(k2), torch.tensor([1, 2])))

    def test_missing_key_and_unset_store_give_none_and_minus_600(self):
        self.assertIsNone(STORE.get_tensor(key("missing")))
        s = mcs.MooncakeDistributedStore()
        self.assertEqual(s.put_tensor("k", torch.ones(1)), INVALID_PARAMS)
        self.assertIsNone(s.get_tensor("k"))

    def test_batch_forms_with_holes_and_mismatches(self):
        ks = [key("b") for _ in range(3)]
        ts_ = [torch.arange(3), torch.zeros(2, 2, dtype=torch.bfloat16), torch.tensor(False)]
        self.assertEqual(STORE.batch_put_tensor(ks, ts_), [0, 0, 0])
        got = STORE.batch_get_tensor([ks[0], key("hole"), ks[2], ks[1]])
        self.assertTrue(bit_equal(got[0], ts_[0]))
        self.assertIsNone(got[1])
        self.assertTrue(bit_equal(got[2], ts_[2]))
        self.assertTrue(bit_equal(got[3], ts_[1]))
        self.assertEqual(STORE.batch_put_tensor(ks, ts_[:2]), [INVALID_PARAMS] * 3)
        self.assertEqual(STORE.batch_put_tensor([], []), [])
        self.assertEqual(STORE.batch_get_tensor([]), [])
        k4 = key("b")
        self.assertEqual(STORE.batch_put_tensor([k4, key("b")], [torch.ones(1), "x"]),
                         [0, INVALID_PARAMS])
        self.assertEqual(STORE.batch_upsert_tensor([k4], [torch.zeros(1)]), [0])
        self.assertTrue(torch.equal(STORE.get_tensor(k4), torch.zeros(1)))
        cfg = mcs.ReplicateConfig()
        self.assertEqual(STORE.batch_pub_tensor([key("b")], [torch.ones(1)], cfg), [0])
        self.assertEqual(STORE.batch_upsert_pub_tensor([k4], [torch.ones(2)], cfg), [0])
        self.assertTrue(torch.equal(STORE.get_tensor(k4), torch.ones(2)))
        cfg.group_ids = ["a", "b"]
        self.assertEqual(STORE.batch_pub_tensor([key("b")], [torch.ones(1)], cfg),
                         [INVALID_PARAMS])

    def test_cuda_methods_return_minus_600(self):
        self.assertEqual(STORE.get_tensor_into_cuda("k", torch.ones(1)), INVALID_PARAMS)
        self.assertEqual(STORE.batch_get_tensor_into_cuda(["a", "b"], [None, None]),
                         [INVALID_PARAMS] * 2)


class FormatTest(unittest.TestCase):
    def test_stored_bytes_match_the_spec_field_by_field(self):
        t = torch.arange(30, dtype=torch.float16).reshape(2, 3, 5)
        k = key("fmt")
        self.assertEqual(STORE.put_tensor(k, t), 0)
        stored = STORE.get(k)
        self.assertEqual(len(stored), 304 + 60)
        self.assertEqual(stored[:4], bytes([0x4E, 0x4F, 0x4F, 0x4D]))
        self.assertEqual(stored[:304], spec_header(11, [2, 3, 5], [2, 3, 5], 60))
        self.assertEqual(stored[304:], raw(t))

    def test_spec_built_objects_written_by_plain_put_are_read(self):
        for t in samples() + [torch.tensor(1, dtype=torch.int8), torch.empty(2, 0, 3)]:
            with self.subTest(dtype=t.dtype, shape=tuple(t.shape)):
                k = key("interop")
                self.assertEqual(STORE.put(k, spec_object(t)), 0)
                self.assertTrue(bit_equal(STORE.get_tensor(k), t))

    def test_shard_object_with_axes_is_read(self):
        t = torch.arange(6, dtype=torch.int32)
        hdr = spec_header(6, [12], [6], 24, layout=1, axes=[(1, 0, 1, 2, 0, 0, 6)])
        k = key("shardobj")
        self.assertEqual(STORE.put(k, hdr + raw(t)), 0)
        self.assertTrue(torch.equal(STORE.get_tensor(k), t))

    def test_invalid_objects_read_as_none(self):
        t = torch.arange(8, dtype=torch.int32).reshape(2, 4)
        good = spec_header(6, [2, 4], [2, 4], 32)
        data = raw(t)
        bad = {
            "magic": spec_header(6, [2, 4], [2, 4], 32, magic=0x4D4F4F4F) + data,
            "version": spec_header(6, [2, 4], [2, 4], 32, version=2) + data,
            "header_size": spec_header(6, [2, 4], [2, 4], 32, header_size=296) + data,
            "data_bytes": spec_header(6, [2, 4], [2, 4], 28) + data,
            "truncated": good + data[:-1],
            "header_only_part": good[:200],
            "extra_byte": good + data + b"\0",
            "ndim9": spec_header(6, [2, 4], [2, 4], 32, ndim=9) + data,
            "shape_mismatch": spec_header(6, [2, 4], [4, 4], 32) + data,
            "dtype_15": spec_header(15, [2, 4], [2, 4], 32) + data,
            "dtype_neg": spec_header(-1, [2, 4], [2, 4], 32) + data,
            "unused_dim_not_-1": good[:40 + 16] + struct.pack("<q", 5) + good[64:] + data,
            "negative_dim": spec_header(6, [2, 4], [2, -4], 32) + data,
            "axis_count5": good[:168] + struct.pack("<I", 5) + good[172:] + data,
            "layout2": spec_header(6, [2, 4], [2, 4], 32, layout=2) + data,
            "axis_rank_ge_count": spec_header(6, [2, 4], [2, 4], 32, layout=1,
                                              axes=[(1, 0, 2, 2, 0, 0, 2)]) + data,
            "axis_split_dim_ge_ndim": spec_header(6, [2, 4], [2, 4], 32, layout=1,
                                                  axes=[(1, 0, 0, 2, 2, 0, 2)]) + data,
            "data_offset_past_end": spec_header(6, [2, 4], [2, 4], 32, data_offset=400) + data,
            "empty": b"",
        }
        ks = []
        for name, obj in bad.items():
            k = key("corrupt")
            ks.append(k)
            self.assertEqual(STORE.put(k, obj), 0, name)
            self.assertIsNone(STORE.get_tensor(k), name)
        self.assertEqual(STORE.batch_get_tensor(ks), [None] * len(ks))
        k = key("corrupt")
        self.assertEqual(STORE.put(k, good + data), 0)  # the control is accepted
        self.assertTrue(torch.equal(STORE.get_tensor(k), t))

    def test_dtypes_this_torch_lacks_read_as_none(self):
        for code in (5, 7, 9, 13, 14):
            if code in (13, 14) and hasattr(torch, "float8_e4m3fn"):
                continue
            size = {5: 2, 7: 4, 9: 8, 13: 1, 14: 1}[code]
            k = key("nodtype")
            self.assertEqual(STORE.put(k, spec_header(code, [3], [3], 3 * size) +
                                       bytes(3 * size)), 0)
            with self.assertLogs("mooncake.tensor", "WARNING"):
                self.assertIsNone(STORE.get_tensor(k), code)


class IntoFromTest(unittest.TestCase):
    def setUp(self):
        self.buf = RegisteredBuffer(1 << 20)

    def tearDown(self):
        self.buf.close()

    def test_get_tensor_into_aliases_the_buffer(self):
        t = torch.arange(16, dtype=torch.float32).reshape(4, 4)
        k = key("into")
        self.assertEqual(STORE.put_tensor(k, t), 0)
        got = STORE.get_tensor_into(k, self.buf.ptr, self.buf.size)
        self.assertTrue(torch.equal(got, t))
        self.assertEqual(got.data_ptr(), self.buf.ptr + 304)
        ctypes.memmove(self.buf.ptr + 304, struct.pack("<f", 99.0), 4)
        self.assertEqual(got[0, 0].item(), 99.0)
        got[3, 3] = -1.0
        self.assertEqual(struct.unpack("<f", ctypes.string_at(self.buf.ptr + 304 + 60, 4))[0],
                         -1.0)

    def test_get_tensor_into_failures_are_none(self):
        k = key("into")
        self.assertEqual(STORE.put_tensor(k, torch.ones(100)), 0)
        self.assertIsNone(STORE.get_tensor_into(k, self.buf.ptr, 304 + 399))  # too small
        self.assertIsNone(STORE.get_tensor_into(key("nokey"), self.buf.ptr, self.buf.size))
        other = ctypes.create_string_buffer(4096)
        self.assertIsNone(STORE.get_tensor_into(k, ctypes.addressof(other), 4096))
        k2 = key("into")
        self.assertEqual(STORE.put(k2, b"not a tensor" * 40), 0)
        self.assertIsNone(STORE.get_tensor_into(k2, self.buf.ptr, self.buf.size))

    def test_batch_get_tensor_into(self):
        ks = [key("binto"), key("binto"), key("binto")]
        self.assertEqual(STORE.put_tensor(ks[0], torch.arange(5)), 0)
        self.assertEqual(STORE.put_tensor(ks[2], torch.tensor([True, False])), 0)
        ptrs = [self.buf.ptr, self.buf.ptr + 4096, self.buf.ptr + 8192]
        got = STORE.batch_get_tensor_into(ks, ptrs, [4096] * 3)
        self.assertTrue(torch.equal(got[0], torch.arange(5)))
        self.assertIsNone(got[1])
        self.assertTrue(torch.equal(got[2], torch.tensor([True, False])))
        self.assertEqual(got[2].data_ptr(), ptrs[2] + 304)
        self.assertEqual(STORE.batch_get_tensor_into(ks, ptrs[:2], [4096] * 3),
                         [INVALID_PARAMS] * 3)
        self.assertEqual(STORE.batch_get_tensor_into(ks, [0] + ptrs[1:], [4096] * 3),
                         [INVALID_PARAMS] * 3)
        self.assertEqual(STORE.batch_get_tensor_with_tp_into(ks, ptrs[:1], [4096] * 3, 0, 2),
                         [INVALID_PARAMS] * 3)
        s = mcs.MooncakeDistributedStore()
        self.assertEqual(s.batch_get_tensor_into(ks, ptrs, [4096] * 3), [INVALID_PARAMS] * 3)
        self.assertEqual(s.batch_get_tensor_with_tp_into(ks, ptrs, [4096] * 3, 0, 2),
                         [None] * 3)
        self.assertEqual(s.save_tensor_to_safetensor(ks[0], "/nonexistent/x"), INVALID_PARAMS)

    def test_put_tensor_from_validates_then_stores_zero_copy(self):
        t = torch.randn(3, 7, dtype=torch.float64)
        obj = spec_object(t)
        ctypes.memmove(self.buf.ptr, obj, len(obj))
        k = key("from")
        self.assertEqual(STORE.put_tensor_from(k, self.buf.ptr, len(obj)), 0)
        self.assertTrue(bit_equal(STORE.get_tensor(k), t))
        self.assertEqual(STORE.get(k), obj)
        # wrong size (data_bytes mismatch), garbage header, unreadable and unregistered memory
        self.assertEqual(STORE.put_tensor_from(key("from"), self.buf.ptr, len(obj) - 8),
                         INVALID_PARAMS)
        self.assertEqual(STORE.put_tensor_from(key("from"), self.buf.ptr + 8, len(obj) - 8),
                         INVALID_PARAMS)
        self.assertEqual(STORE.put_tensor_from(key("from"), 16, 400), INVALID_PARAMS)
        self.assertEqual(STORE.put_tensor_from(key("from"), self.buf.ptr, 100), INVALID_PARAMS)
        plain = ctypes.create_string_buffer(obj, len(obj))
        self.assertEqual(STORE.put_tensor_from(key("from"), ctypes.addressof(plain), len(obj)),
                         INVALID_PARAMS)
        # upsert and batch forms
        t2 = torch.ones(2, 2, dtype=torch.int8)
        obj2 = spec_object(t2)
        ctypes.memmove(self.buf.ptr + 8192, obj2, len(obj2))
        self.assertEqual(STORE.upsert_tensor_from(k, self.buf.ptr + 8192, len(obj2)), 0)
        self.assertTrue(bit_equal(STORE.get_tensor(k), t2))
        ks = [key("bfrom"), key("bfrom")]
        # one invalid buffer fails the whole batch (upstream), nothing is written
        self.assertEqual(STORE.batch_put_tensor_from(ks, [self.buf.ptr, self.buf.ptr + 8],
                                                     [len(obj), len(obj)]),
                         [INVALID_PARAMS] * 2)
        self.assertEqual(STORE.is_exist(ks[0]), 0)
        self.assertEqual(STORE.batch_put_tensor_from(ks, [self.buf.ptr, self.buf.ptr + 8192],
                                                     [len(obj), len(obj2)]), [0, 0])
        self.assertTrue(bit_equal(STORE.get_tensor(ks[0]), t))
        self.assertTrue(bit_equal(STORE.get_tensor(ks[1]), t2))
        self.assertEqual(STORE.batch_upsert_tensor_from(ks[:1], [self.buf.ptr + 8192],
                                                        [len(obj2)]), [0])
        self.assertTrue(bit_equal(STORE.get_tensor(ks[0]), t2))
        self.assertEqual(STORE.batch_put_tensor_from(ks, [self.buf.ptr], [len(obj)]),
                         [INVALID_PARAMS] * 2)


class TensorParallelTest(unittest.TestCase):
    def test_tp_writes_every_shard_with_spec_headers(self):
        t = torch.arange(48, dtype=torch.float32).reshape(4, 12)
        k = key("tp")
        self.assertEqual(STORE.put_tensor_with_tp(k, t, tp_rank=2, tp_size=4, split_dim=1), 0)
        self.assertEqual(STORE.is_exist(k), 0)
        for r in range(4):
            shard = t.narrow(1, 3 * r, 3).contiguous()
            stored = STORE.get(f"{k}_tp_{r}")
            self.assertEqual(stored[:304], spec_header(0, [4, 12], [4, 3], 48, layout=1,
                                                       axes=[(1, 0, r, 4, 1, 0, 3)]))
            self.assertEqual(stored[304:], raw(shard))
            self.assertTrue(torch.equal(STORE.get_tensor_with_tp(k, r, 4), shard))
        self.assertIsNone(STORE.get_tensor_with_tp(k, 4, 4))  # reads <key>_tp_4 (absent)
        got = STORE.batch_get_tensor_with_tp([k, key("none")], tp_rank=1, tp_size=4)
        self.assertTrue(torch.equal(got[0], t[:, 3:6]))
        self.assertIsNone(got[1])

    def test_tp_rules(self):
        t = torch.zeros(5, 6)
        k = key("tp")
        self.assertEqual(STORE.put_tensor_with_tp(k, t, 0, 4, 0), INVALID_PARAMS)
        self.assertEqual(STORE.put_tensor_with_tp(k, t, 0, 2, 2), INVALID_PARAMS)
        self.assertEqual(STORE.put_tensor_with_tp(k, torch.tensor(1.0), 0, 2, 0), INVALID_PARAMS)
        # a request's cost is bounded: at most 4096 shards (an empty dim divides by anything)
        self.assertEqual(STORE.put_tensor_with_tp(k, torch.zeros(0, 2), 0, 4097, 0),
                         INVALID_PARAMS)
        self.assertIsNone(STORE.get_tensor_with_parallelism(
            k, mcs.ReadTarget("full", mcs.TensorParallelism([tp_axis(0, 10**9, 0)]))))
        self.assertEqual(STORE.is_exist(f"{k}_tp_0"), 0)
        # tp_size 1: a plain object under the key itself
        self.assertEqual(STORE.put_tensor_with_tp(k, t, 0, 1, 0), 0)
        self.assertEqual(STORE.get(k)[:304], spec_header(0, [5, 6], [5, 6], 120))
        self.assertTrue(torch.equal(STORE.get_tensor_with_tp(k), t))

    def test_tp_pub_batch_from_and_into(self):
        cfg = mcs.ReplicateConfig()
        t = torch.arange(8, dtype=torch.int64).reshape(2, 4)
        ks = [key("tpb"), key("tpb")]
        self.assertEqual(STORE.pub_tensor_with_tp(ks[0], t, cfg, 0, 2, 0), 0)
        self.assertTrue(torch.equal(STORE.get_tensor_with_tp(ks[0], 1, 2), t[1:]))
        self.assertEqual(STORE.batch_put_tensor_with_tp(ks, [t, torch.zeros(3, 4)], 0, 2, 1),
                         [0, 0])
        self.assertEqual(STORE.batch_pub_tensor_with_tp([key("tpb")], [torch.zeros(3)], cfg,
                                                        0, 2, 0), [INVALID_PARAMS])
        buf = RegisteredBuffer(1 << 16)
        try:
            obj = spec_object(t)
            ctypes.memmove(buf.ptr, obj, len(obj))
            k = key("tpfrom")
            self.assertEqual(STORE.put_tensor_with_tp_from(k, buf.ptr, len(obj), 0, 2, 1), 0)
            self.assertTrue(torch.equal(STORE.get_tensor_with_tp(k, 1, 2), t[:, 2:]))
            self.assertEqual(STORE.batch_put_tensor_with_tp_from([key("tpfrom")], [buf.ptr],
                                                                 [len(obj)], 0, 4, 1), [0])
            self.assertEqual(STORE.put_tensor_with_tp_from(key("tpfrom"), buf.ptr, len(obj),
                                                           0, 3, 1), INVALID_PARAMS)
            # an unreadable pointer is an error, not a crash (the buffer is read to split it)
            self.assertEqual(STORE.put_tensor_with_tp_from(key("tpfrom"), 16, len(obj), 0, 2, 1),
                             INVALID_PARAMS)
            self.assertEqual(STORE.put_tensor_with_tp_from(key("tpfrom"), buf.ptr, 10**12, 0, 2,
                                                           1), INVALID_PARAMS)
            self.assertEqual(STORE.put_tensor_with_parallelism_from(
                key("tpfrom"), 16, len(obj), mcs.TensorParallelism([tp_axis(0, 2, 1)])),
                INVALID_PARAMS)
            got = STORE.get_tensor_with_tp_into(k, buf.ptr + 4096, 4096, 0, 2)
            self.assertTrue(torch.equal(got, t[:, :2]))
            self.assertEqual(got.data_ptr(), buf.ptr + 4096 + 304)
            got = STORE.batch_get_tensor_with_tp_into([k, key("none")],
                                                      [buf.ptr + 8192, buf.ptr + 12288],
                                                      [4096, 4096], 1, 2)
            self.assertTrue(torch.equal(got[0], t[:, 2:]))
            self.assertIsNone(got[1])
        finally:
            buf.close()


def tp_axis(rank, size, sd):
    return mcs.ParallelAxis(kind="tp", rank=rank, size=size, split_dim=sd)


class ParallelismTest(unittest.TestCase):
    def manifest(self, k):
        m = STORE.get(k)
        self.assertEqual(len(m), 96)
        f = struct.unpack("<IHHiiiii4x8q", m)
        return f

    def test_multi_axis_keys_headers_manifest_and_full_read(self):
        t = torch.arange(64, dtype=torch.bfloat16).reshape(8, 8)
        k = key("par")
        for r in range(4):
            p = mcs.TensorParallelism([tp_axis(r, 4, 0), mcs.ParallelAxis("DP", 0, 2)])
            self.assertEqual(STORE.put_tensor_with_parallelism(k, t, p), 0)
        skey = f"{k}__dp_0of2__tp_1of4_sd0"
        stored = STORE.get(skey)
        self.assertEqual(stored[:304], spec_header(
            12, [8, 8], [2, 8], 32, layout=1,
            axes=[(0, 0, 0, 2, -1, 0, 0), (1, 1, 1, 4, 0, 0, 2)]))
        self.assertEqual(stored[304:], raw(t[2:4]))
        self.assertEqual(self.manifest(f"{k}__parallelism_manifest"),
                         (0x574D414E, 1, 96, 12, 2, 0, 4, 0, 8, 8, -1, -1, -1, -1, -1, -1))
        p = mcs.TensorParallelism([mcs.ParallelAxis("dp", 0, 2), tp_axis(0, 4, 0)])
        full = STORE.get_tensor_with_parallelism(k, mcs.ReadTarget("full", p))
        self.assertTrue(bit_equal(full, t))
        shard = STORE.get_tensor_with_parallelism(
            k, mcs.ReadTarget("shard", mcs.TensorParallelism(
                [mcs.ParallelAxis("dp", 0, 2), tp_axis(3, 4, 0)])))
        self.assertTrue(bit_equal(shard, t[6:8]))
        # dp rank 1 was never written
        p1 = mcs.TensorParallelism([mcs.ParallelAxis("dp", 1, 2), tp_axis(0, 4, 0)])
        self.assertIsNone(STORE.get_tensor_with_parallelism(k, mcs.ReadTarget("full", p1)))

    def test_single_tp_axis_keeps_legacy_key_and_infers_global_shape(self):
        t = torch.arange(12, dtype=torch.int32).reshape(3, 4)
        k = key("par1")
        for r in range(2):
            shard = t.narrow(1, 2 * r, 2)
            p = mcs.TensorParallelism([tp_axis(r, 2, 1)])
            self.assertEqual(STORE.put_tensor_with_parallelism(k, shard, p), 0)
        self.assertEqual(STORE.get(f"{k}_tp_1")[:304], spec_header(
            6, [3, 4], [3, 2], 24, layout=1, axes=[(1, 0, 1, 2, 1, 0, 2)]))
        self.assertEqual(self.manifest(f"{k}__parallelism_manifest")[:8],
                         (0x574D414E, 1, 96, 6, 2, 1, 2, 0))
        target = mcs.ReadTarget("full", mcs.TensorParallelism([tp_axis(0, 2, 1)]))
        self.assertTrue(torch.equal(STORE.get_tensor_with_parallelism(k, target), t))
        self.assertTrue(torch.equal(STORE.get_tensor_with_tp(k, 0, 2), t[:, :2]))
        # a TP-4 shard that was not stored is cut from the stored TP-2 layout
        cut = STORE.get_tensor_with_parallelism(
            k, mcs.ReadTarget("shard", mcs.TensorParallelism([tp_axis(3, 4, 1)])))
        self.assertTrue(torch.equal(cut, t[:, 3:4]))
        # <key>_tp_1 holds a TP-2 shard: its header does not match a TP-4 rank-1 request
        cut = STORE.get_tensor_with_parallelism(
            k, mcs.ReadTarget("shard", mcs.TensorParallelism([tp_axis(1, 4, 1)])))
        self.assertTrue(torch.equal(cut, t[:, 1:2]))
        # as_stored takes no parallelism; full needs a TP axis
        self.assertIsNone(STORE.get_tensor_with_parallelism(
            k, mcs.ReadTarget("as_stored", mcs.TensorParallelism([tp_axis(1, 2, 1)]))))
        self.assertIsNone(STORE.get_tensor_with_parallelism(
            k, mcs.ReadTarget("full", mcs.TensorParallelism([mcs.ParallelAxis("dp", 0, 1)]))))
        # as_stored: the plain key (absent here)
        self.assertIsNone(STORE.get_tensor_with_parallelism(k))

    def test_full_read_checks_the_global_shape(self):
        k = key("gshape")
        row = torch.ones(1, 2, dtype=torch.float32)
        for r in range(2):  # shards claiming a global shape of [4, 2] but holding 1 row each
            hdr = spec_header(0, [4, 2], [1, 2], 8, layout=1, axes=[(1, 0, r, 2, 0, 0, 1)])
            self.assertEqual(STORE.put(f"{k}_tp_{r}", hdr + raw(row)), 0)
        target = mcs.ReadTarget("full", mcs.TensorParallelism([tp_axis(0, 2, 0)]))
        self.assertIsNone(STORE.get_tensor_with_parallelism(k, target))
        k2 = key("gshape")  # the consistent variant is read
        for r in range(2):
            hdr = spec_header(0, [2, 2], [1, 2], 8, layout=1, axes=[(1, 0, r, 2, 0, 0, 1)])
            self.assertEqual(STORE.put(f"{k2}_tp_{r}", hdr + raw(row * r)), 0)
        self.assertTrue(torch.equal(STORE.get_tensor_with_parallelism(k2, target),
                                    torch.tensor([[0.0, 0.0], [1.0, 1.0]])))

    def test_writer_partitions_and_full_read_without_parallelism(self):
        class W:
            def __init__(self, rank, size, split_dim):
                self.rank, self.size, self.split_dim = rank, size, split_dim

        t = torch.randn(6, 4, dtype=torch.float64)
        k = key("wp")
        for r in range(3):
            self.assertEqual(STORE.put_tensor_with_parallelism(
                k, t, writer_partition=W(r, 3, 0)), 0)
        stored = STORE.get(f"{k}__writer_2of3_sd0")
        self.assertEqual(stored[:304], spec_header(1, [6, 4], [2, 4], 64, layout=1,
                                                   axes=[(1, 0, 2, 3, 0, 0, 2)]))
        self.assertEqual(self.manifest(f"{k}__writer_manifest")[:10],
                         (0x574D414E, 1, 96, 1, 2, 0, 3, 0, 6, 4))
        self.assertTrue(bit_equal(STORE.get_tensor_with_parallelism(k, mcs.ReadTarget("full")),
                                  t))
        # a TP shard read falls back to the writer partition of the same rank/size/split_dim
        got = STORE.get_tensor_with_parallelism(
            k, mcs.ReadTarget("shard", mcs.TensorParallelism([tp_axis(1, 3, 0)])))
        self.assertTrue(bit_equal(got, t[2:4]))
        # ... and other shard counts are cut from the writer partitions
        got = STORE.get_tensor_with_parallelism(
            k, mcs.ReadTarget("shard", mcs.TensorParallelism([tp_axis(1, 2, 0)])))
        self.assertTrue(bit_equal(got, t[3:6]))
        # full of a plain object is the object
        k2 = key("wp")
        self.assertEqual(STORE.put_tensor_with_parallelism(k2, t), 0)
        self.assertTrue(bit_equal(STORE.get_tensor_with_parallelism(k2, mcs.ReadTarget("full")),
                                  t))
        self.assertTrue(bit_equal(STORE.get_tensor_with_parallelism(k2), t))

    def test_axis_rules_and_argument_errors(self):
        t = torch.zeros(4, 4)
        k = key("rules")
        A = mcs.ParallelAxis
        bad = [
            [A("tp", 0, 2)],  # TP without split_dim
            [A("dp", 0, 2, split_dim=0)],  # DP with split_dim
            [A("ep", 0, 2)],  # EP without expert_id
            [A("pp", 0, 2)],  # PP without stage_id
            [A("tp", 2, 2, 0)],  # rank >= size
            [A("tp", -1, 2, 0)],
            [A("dp", 0, 2), A("DP", 1, 2)],  # duplicate kind
            [A("xx", 0, 1)],
            [A("dp", 0, 1), A("tp", 0, 1, 0), A("ep", 0, 1, expert_id=0),
             A("pp", 0, 1, stage_id=0), A("dp", 0, 1)],  # 5 axes
            [A("tp", 0, 3, 0), A("dp", 0, 2)],  # non-divisible
        ]
        bad.append([])  # a parallelism must have axes
        for axes in bad:
            self.assertEqual(STORE.put_tensor_with_parallelism(
                k, t, mcs.TensorParallelism(axes)), INVALID_PARAMS, axes)

        class W:
            rank, size, split_dim = 0, 2, 0

        self.assertEqual(STORE.put_tensor_with_parallelism(
            k, t, mcs.TensorParallelism([A("tp", 0, 2, 0)]), writer_partition=W()),
            INVALID_PARAMS)
        self.assertEqual(STORE.batch_put_tensor_with_parallelism(
            [k], [t], [None], writer_partitions=[W()]), [INVALID_PARAMS])
        self.assertEqual(STORE.batch_put_tensor_with_parallelism([k, k], [t]),
                         [INVALID_PARAMS] * 2)
        self.assertIsNone(STORE.get_tensor_with_parallelism(k, mcs.ReadTarget("bogus")))
        self.assertIsNone(STORE.get_tensor_with_parallelism(k, mcs.ReadTarget("shard")))
        self.assertIsNone(STORE.get_tensor_with_parallelism(
            k, mcs.ReadTarget("full", mcs.TensorParallelism([]))))
        self.assertEqual(STORE.is_exist(k), 0)

    def test_ep_pp_keys_and_batch_upsert_from_into(self):
        t = torch.arange(6, dtype=torch.int16)
        k = key("ep")
        p = mcs.TensorParallelism([mcs.ParallelAxis("pp", 1, 2, stage_id=1),
                                   mcs.ParallelAxis("ep", 3, 8, expert_id=11)])
        self.assertEqual(STORE.batch_put_tensor_with_parallelism([k], [t], [p]), [0])
        skey = f"{k}__ep_3of8_eid11__pp_1of2_sid1"
        self.assertEqual(STORE.get(skey)[:304], spec_header(
            4, [6], [6], 12, layout=1, axes=[(2, 0, 3, 8, -1, 11, 0), (3, 1, 1, 2, -1, 1, 0)]))
        self.assertEqual(STORE.is_exist(f"{k}__parallelism_manifest"), 0)
        self.assertTrue(torch.equal(STORE.get_tensor_with_parallelism(
            k, mcs.ReadTarget("shard", p)), t))
        self.assertEqual(STORE.upsert_tensor_with_parallelism(k, t + 1, p), 0)
        self.assertTrue(torch.equal(STORE.batch_get_tensor_with_parallelism(
            [k, k], [mcs.ReadTarget("shard", p), None])[0], t + 1))
        buf = RegisteredBuffer(1 << 16)
        try:
            full = torch.arange(16, dtype=torch.float32).reshape(4, 4)
            obj = spec_object(full)
            ctypes.memmove(buf.ptr, obj, len(obj))
            k2 = key("pfrom")
            pt = [mcs.TensorParallelism([tp_axis(r, 2, 1), mcs.ParallelAxis("dp", 0, 1)])
                  for r in range(2)]
            self.assertEqual(STORE.batch_put_tensor_with_parallelism_from(
                [k2, k2], [buf.ptr, buf.ptr], [len(obj)] * 2, pt), [0, 0])
            self.assertEqual(STORE.put_tensor_with_parallelism_from(k2 + "p", buf.ptr, len(obj)),
                             0)
            self.assertEqual(STORE.get(k2 + "p"), obj)
            self.assertEqual(STORE.upsert_tensor_with_parallelism_from(
                k2, buf.ptr, len(obj), pt[0]), 0)
            self.assertEqual(STORE.batch_upsert_tensor_with_parallelism_from(
                [k2], [buf.ptr], [len(obj)], [pt[1]]), [0])
            target = mcs.ReadTarget("full", pt[0])
            got = STORE.get_tensor_with_parallelism_into(k2, buf.ptr + 4096, 4096, target)
            self.assertTrue(torch.equal(got, full))
            self.assertEqual(got.data_ptr(), buf.ptr + 4096 + 304)
            self.assertEqual(ctypes.string_at(buf.ptr + 4096, 304),
                             spec_header(0, [4, 4], [4, 4], 64))
            got = STORE.batch_get_tensor_with_parallelism_into(
                [k2, k2], [buf.ptr + 8192, buf.ptr + 12288], [4096, 4096],
                [mcs.ReadTarget("shard", pt[1]), mcs.ReadTarget("full", pt[0])])
            self.assertTrue(torch.equal(got[0], full[:, 2:]))
            self.assertEqual(got[0].data_ptr(), buf.ptr + 8192 + 304)
            self.assertTrue(torch.equal(got[1], full))
            # a reassembled tensor is never written into memory that is not registered
            plain = ctypes.create_string_buffer(4096)
            self.assertIsNone(STORE.get_tensor_with_parallelism_into(
                k2, ctypes.addressof(plain), 4096, target))
            self.assertEqual(plain.raw, bytes(4096))
            self.assertIsNone(STORE.get_tensor_with_parallelism_into(
                k2, buf.ptr + 4096, 304 + 63, target))
        finally:
            buf.close()


class SafetensorsTest(unittest.TestCase):
    def test_save_then_load_round_trip(self):
        with tempfile.TemporaryDirectory() as d:
            t = torch.randn(3, 4).to(torch.bfloat16)
            k = key("st")
            self.assertEqual(STORE.put_tensor(k, t), 0)
            path = os.path.join(d, "a.safetensors")
            self.assertEqual(STORE.save_tensor_to_safetensor(k, path), 0)
            with open(path, "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                head = json.loads(f.read(n))
                data = f.read()
            self.assertEqual(head, {k: {"dtype": "BF16", "shape": [3, 4],
                                        "data_offsets": [0, 24]}})
            self.assertEqual(n % 8, 0)
            self.assertEqual(data, raw(t))
            k2 = key("st")
            got = STORE.load_tensor_from_safetensor(k2, path)
            self.assertTrue(bit_equal(got, t))
            self.assertTrue(bit_equal(STORE.get_tensor(k2), t))
            self.assertEqual(STORE.save_tensor_to_safetensor(key("none"), path), FILE_NOT_FOUND)
            self.assertEqual(STORE.save_tensor_to_safetensor(k, os.path.join(d, "no", "x")),
                             INVALID_PARAMS)

    def test_load_of_an_independently_written_file(self):
        a = torch.arange(6, dtype=torch.int64).reshape(2, 3)
        b = torch.tensor([1.5, -2.0], dtype=torch.float32)
        blob = raw(b) + raw(a)
        head = {"__metadata__": {"format": "pt"},
                "a": {"dtype": "I64", "shape": [2, 3], "data_offsets": [8, 56]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
        hj = json.dumps(head).encode()
        hole = json.dumps({"a": {"dtype": "I64", "shape": [2, 3], "data_offsets": [16, 64]},
                           "b": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "w.safetensors")
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", len(hj)) + hj + blob)
            k = key("st")
            self.assertTrue(torch.equal(STORE.load_tensor_from_safetensor(k, path), b))
            self.assertTrue(torch.equal(STORE.get_tensor(k), b))  # first entry: offset 0
            self.assertTrue(torch.equal(STORE.load_tensor_from_safetensor("a", path), a))
            self.assertTrue(torch.equal(STORE.get_tensor("a"), a))
            STORE.remove("a")
            # default key: the file name
            self.assertTrue(torch.equal(STORE.load_tensor_from_safetensor(file_name=path), b))
            self.assertTrue(torch.equal(STORE.get_tensor(path), b))
            STORE.remove(path)
            # malformed files
            for content in (b"", struct.pack("<Q", 1 << 40) + b"{}",
                            struct.pack("<Q", 2) + b"{]",
                            struct.pack("<Q", len(hj)) + hj + blob[:-1],
                            struct.pack("<Q", len(hj)) + hj + blob + b"\0",
                            struct.pack("<Q", len(hole)) + hole + blob + bytes(8)):
                with open(path, "wb") as f:
                    f.write(content)
                self.assertIsNone(STORE.load_tensor_from_safetensor("a", path))
            self.assertIsNone(STORE.load_tensor_from_safetensor(k, os.path.join(d, "missing")))


class AttackFindingsTest(unittest.TestCase):
    """The findings of a fresh-user attack on the tensor API, one test each."""

    def test_an_int_file_name_is_never_opened_as_a_descriptor(self):
        t = torch.arange(6, dtype=torch.float32)
        k = key("fd")
        self.assertEqual(STORE.put_tensor(k, t), 0)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "victim")
            with open(path, "wb") as f:
                f.write(b"precious")
            fd = os.open(path, os.O_RDWR)
            try:
                for bad in (fd, True, 1.5, ["x"], object()):
                    with self.assertRaises(TypeError, msg=repr(bad)):
                        STORE.save_tensor_to_safetensor(k, bad)
                    with self.assertRaises(TypeError, msg=repr(bad)):
                        STORE.load_tensor_from_safetensor(k, bad)
                os.fstat(fd)  # still open
                self.assertEqual(os.pread(fd, 64, 0), b"precious")
            finally:
                os.close(fd)
            # a path with a NUL byte cannot be opened: an error code / None, not an exception
            for p in ("a\0b", b"a\0b"):
                self.assertEqual(STORE.save_tensor_to_safetensor(k, p), INVALID_PARAMS)
                self.assertIsNone(STORE.load_tensor_from_safetensor(k, p))
            # the key names the file when file_name is None: an int key is refused the same way
            with self.assertRaises(TypeError):
                STORE.save_tensor_to_safetensor(0)
            # str, bytes and os.PathLike paths are files
            import pathlib
            for p in (os.path.join(d, "s.st"), os.path.join(d, "b.st").encode(),
                      pathlib.Path(d) / "p.st"):
                self.assertEqual(STORE.save_tensor_to_safetensor(k, p), 0, p)
                k2 = key("fd")
                self.assertTrue(bit_equal(STORE.load_tensor_from_safetensor(k2, p), t), p)
                self.assertTrue(bit_equal(STORE.get_tensor(k2), t), p)

    def test_legacy_tp_shards_are_resharded_to_the_requested_size(self):
        t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
        k = key("reshard")
        self.assertEqual(STORE.put_tensor_with_tp(k, t, tp_size=2, split_dim=1), 0)
        self.assertEqual(STORE.is_exist(f"{k}__parallelism_manifest"), 0)

        def read(mode, rank, size, sd):
            return STORE.get_tensor_with_parallelism(
                k, mcs.ReadTarget(mode, mcs.TensorParallelism([tp_axis(rank, size, sd)])))

        for r in range(3):  # TP-3 shards cut from the stored TP-2 layout
            self.assertTrue(bit_equal(read("shard", r, 3, 1), t.narrow(1, 2 * r, 2)), r)
        for r in range(6):
            self.assertTrue(bit_equal(read("shard", r, 6, 1), t.narrow(1, r, 1)), r)
        self.assertTrue(bit_equal(read("shard", 1, 2, 1), t.narrow(1, 3, 3)))
        for size in (2, 3, 6):  # full: reassembled from the stored shards whatever size asked
            self.assertTrue(bit_equal(read("full", 0, size, 1), t), size)
        buf = RegisteredBuffer(4096)
        try:
            target = mcs.ReadTarget("shard", mcs.TensorParallelism([tp_axis(2, 3, 1)]))
            got = STORE.get_tensor_with_parallelism_into(k, buf.ptr, buf.size, target)
            self.assertTrue(bit_equal(got, t.narrow(1, 4, 2)))
        finally:
            buf.close()
        # never another shape than asked for: another split dim, a size that does not divide
        # the stored dim, sizes beyond a C int
        for mode, rank, size, sd in (("shard", 0, 2, 0), ("shard", 0, 3, 0), ("full", 0, 2, 0),
                                     ("shard", 0, 4, 1), ("full", 0, 4, 1),
                                     ("shard", 0, 2**31 - 1, 1), ("shard", 0, 2**31, 1),
                                     ("shard", 0, 2**40, 1), ("full", 0, 2**40, 1),
                                     ("shard", 2**31, 2**31 + 1, 1)):
            self.assertIsNone(read(mode, rank, size, sd), (mode, rank, size, sd))

    def test_full_read_refuses_shards_of_different_dtypes(self):
        k = key("dtypes")
        a, b = torch.ones(1, 2, dtype=torch.float32), torch.ones(1, 2, dtype=torch.int32)
        for r, (code, x) in enumerate(((0, a), (6, b))):
            hdr = spec_header(code, [2, 2], [1, 2], 8, layout=1, axes=[(1, 0, r, 2, 0, 0, 1)])
            self.assertEqual(STORE.put(f"{k}_tp_{r}", hdr + raw(x)), 0)
        target = mcs.ReadTarget("full", mcs.TensorParallelism([tp_axis(0, 2, 0)]))
        self.assertIsNone(STORE.get_tensor_with_parallelism(k, target))

    def test_legacy_key_holding_a_plain_object_is_read_as_upstream(self):
        t = torch.arange(4, dtype=torch.int64)
        k = key("plainlegacy")
        self.assertEqual(STORE.put_tensor(f"{k}_tp_1", t), 0)
        got = STORE.get_tensor_with_parallelism(
            k, mcs.ReadTarget("shard", mcs.TensorParallelism([tp_axis(1, 2, 0)])))
        self.assertTrue(bit_equal(got, t))

    def test_out_of_range_axis_values_are_minus_600(self):
        t = torch.zeros(4, 4)
        k = key("big")
        A = mcs.ParallelAxis
        for axes in ([A("dp", 0, 2**40)], [A("dp", 2**31, 2**31 + 1)],
                     [A("tp", 0, 2**31, 0)], [A("tp", 2**31, 2**31 + 1, 0)],
                     [A("tp", 0, 2, 2**31)], [A("tp", 0, 2, 0), A("dp", 0, 2**40)],
                     [A("ep", 0, 2, expert_id=2**31)], [A("pp", 0, 2, stage_id=2**31)],
                     [A("ep", 0, 2, expert_id=-2**31 - 1)]):
            p = mcs.TensorParallelism(axes)
            self.assertEqual(STORE.put_tensor_with_parallelism(k, t, p), INVALID_PARAMS, axes)
            self.assertEqual(STORE.upsert_tensor_with_parallelism(k, t, p), INVALID_PARAMS)
            self.assertEqual(STORE.batch_put_tensor_with_parallelism([k], [t], [p]),
                             [INVALID_PARAMS])
            self.assertEqual(STORE.batch_upsert_tensor_with_parallelism([k], [t], [p]),
                             [INVALID_PARAMS])
            self.assertIsNone(STORE.get_tensor_with_parallelism(k, mcs.ReadTarget("shard", p)))

        class W:
            rank, size, split_dim = 0, 2**31, 0

        self.assertEqual(STORE.put_tensor_with_parallelism(k, t, writer_partition=W()),
                         INVALID_PARAMS)
        self.assertEqual(STORE.put_tensor_with_tp(k, t, tp_size=2**40), INVALID_PARAMS)
        self.assertEqual(STORE.put_tensor_with_tp(k, t, tp_size=2, split_dim=2**40),
                         INVALID_PARAMS)
        self.assertEqual(STORE.is_exist(k), 0)

    def test_deeply_nested_safetensors_header_is_none(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "deep.safetensors")
            head = b"[" * 100000
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", len(head)) + head)
            self.assertIsNone(STORE.load_tensor_from_safetensor(key("deep"), path))

    def test_meta_and_oversized_tensors_are_refused_before_copying(self):
        k = key("huge")
        self.assertEqual(STORE.put_tensor(k, torch.empty(3, device="meta")), INVALID_PARAMS)
        self.assertEqual(STORE.upsert_tensor(k, torch.empty(3, device="meta")), INVALID_PARAMS)
        self.assertEqual(STORE.batch_put_tensor([k], [torch.empty(3, device="meta")]),
                         [INVALID_PARAMS])
        big = torch.zeros(1).expand(2**40)  # 4 TiB once contiguous
        self.assertEqual(STORE.put_tensor(k, big), INVALID_PARAMS)
        self.assertEqual(STORE.put_tensor_with_tp(k, big, tp_size=2), INVALID_PARAMS)
        # the limit: header + data <= 2^40 bytes
        edge = torch.zeros(1, dtype=torch.uint8).expand(2**40 - 303)
        self.assertEqual(STORE.put_tensor(k, edge), INVALID_PARAMS)
        self.assertEqual(STORE.is_exist(k), 0)
        with self.assertRaises(ValueError):
            mcs._serialize_tensor(torch.empty(3, device="meta"))

    def test_batch_keys_must_be_a_list_or_tuple(self):
        t = torch.ones(2)
        for keys in ("ab", b"ab", (x for x in ["a", "b"]), None, {"a": 1, "b": 2}):
            for call in (lambda: STORE.batch_put_tensor(keys, [t, t]),
                         lambda: STORE.batch_upsert_tensor(keys, [t, t]),
                         lambda: STORE.batch_pub_tensor(keys, [t, t]),
                         lambda: STORE.batch_get_tensor(keys),
                         lambda: STORE.batch_put_tensor_with_tp(keys, [t, t]),
                         lambda: STORE.batch_get_tensor_with_tp(keys),
                         lambda: STORE.batch_put_tensor_from(keys, [1, 1], [304, 304]),
                         lambda: STORE.batch_get_tensor_into(keys, [1, 1], [304, 304]),
                         lambda: STORE.batch_put_tensor_with_parallelism(keys, [t, t]),
                         lambda: STORE.batch_get_tensor_with_parallelism(keys),
                         lambda: STORE.batch_get_tensor_into_cuda(keys, [t, t])):
                with self.assertRaises(TypeError, msg=repr(keys)):
                    call()
        k = key("tuple")
        self.assertEqual(STORE.batch_put_tensor((k,), (t,)), [0])
        self.assertTrue(bit_equal(STORE.batch_get_tensor((k,))[0], t))


if __name__ == "__main__":
    unittest.main()
