"""mooncake.tensor — upstream Mooncake's tensor API of MooncakeDistributedStore, in Python.

The methods (put_tensor, get_tensor, their batch, `_into`, `_from`, tensor-parallel and
parallelism forms, safetensors files) live in `TensorStoreMixin`; `mooncake.store` mixes it into
MooncakeDistributedStore. They are written on top of the store's plain methods (put_parts,
put_from, get_buffer, get_into, batch_get_into, ...), so they behave the same on any client that
has those methods. The stored value is upstream's format (docs/tensor-format.md): a 304-byte
little-endian header followed by the tensor's raw bytes in C order, so upstream Mooncake and this
store read each other's tensor objects.

Return conventions (upstream's, mooncake-integration/store/store_py.cpp): writers return 0 or a
negative store code (-600 INVALID_PARAMS for every invalid argument), batch writers a list of
codes; readers return a torch.Tensor or None and never raise for a missing or malformed object.
Arguments of a wrong Python type for the underlying store call (a key that is not str/bytes, a
pointer that is not an int, batch keys that are not a list or tuple, a file name that is not a
str/bytes/os.PathLike path) raise TypeError as the plain methods and upstream's argument
conversion do. A tensor is refused (-600) before it is copied when its object would exceed the
store's 2^40-byte value limit or it cannot be brought into CPU memory (meta device).

Thread-safety: every method only calls the store's thread-safe methods and builds local objects,
so one store may be shared by threads as for the plain methods. The blocking calls are the
store's own, which release the GIL.

Torch is optional at import: without torch the module still imports, and every tensor method
returns -600 / None (the log says why). Torch 1.13 (Debian bookworm) has no uint16,
uint32, uint64 and float8 dtypes: tensors of those kinds cannot exist there, and stored objects
with those dtype codes (5, 7, 9, 13, 14) read as None with a log line.
"""
import ctypes
import json
import logging
import math
import os
import struct

try:
    import torch
except ImportError:  # the module stays importable; tensor methods refuse
    torch = None

_log = logging.getLogger("mooncake.tensor")

# ---- store codes (mooncake/errors.h; upstream ErrorCode) ---------------------------------------
OK = 0
INVALID_PARAMS = -600
FILE_NOT_FOUND = -1100

# ---- the object format (upstream integration_utils.h TensorMetadata; docs/tensor-format.md) ----
TENSOR_MAGIC = 0x4D4F4F4E
TENSOR_VERSION = 1
HEADER_SIZE = 304
MAX_DIMS = 8
MAX_AXES = 4
# Ours, not upstream's: the most shards one call writes or reassembles (a TP size, a writer
# partition count, a manifest's shard count), so a request's cost is bounded.
MAX_SHARDS = 4096
# The largest object the store takes (include/mooncake/store.h MC_MAX_VALUE_SIZE): a tensor whose
# object would be larger is refused before it is made contiguous or copied.
MAX_VALUE_SIZE = 1 << 40
# Upstream holds ranks, sizes, split dims, expert and stage ids in C `int`s (a larger Python int
# cannot be set on its ParallelAxis); the header stores them as int32.
_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_I64_MAX = (1 << 63) - 1
LAYOUT_FULL = 0
LAYOUT_SHARD = 1
# magic, version, header_size, dtype, ndim, layout_kind, reserved_flags, data_offset, data_bytes,
# global_shape[8], local_shape[8], axis_count, reserved0  (176 bytes), then 4 axes of 32 bytes.
_HEAD = struct.Struct("<IHHiiIIQQ8q8qII")
# kind, axis_index, shard_rank, shard_count, split_dim, reserved0, reserved1
_AXIS = struct.Struct("<iiiiiiq")
assert _HEAD.size + MAX_AXES * _AXIS.size == HEADER_SIZE

# The 96-byte shard manifest (upstream WriterShardManifest): magic, version, header_size, dtype,
# ndim, split_dim, shard_count, reserved0, 4 bytes padding, global_shape[8].
MANIFEST_MAGIC = 0x574D414E
MANIFEST_VERSION = 1
_MANIFEST = struct.Struct("<IHHiiiii4x8q")
MANIFEST_SIZE = _MANIFEST.size
assert MANIFEST_SIZE == 96

# Axis kinds as stored (upstream LayoutAxisKind) and the canonical key order DP, TP, EP, PP.
AXIS_DP, AXIS_TP, AXIS_EP, AXIS_PP = 0, 1, 2, 3
_AXIS_KIND = {"dp": AXIS_DP, "tp": AXIS_TP, "ep": AXIS_EP, "pp": AXIS_PP}
_AXIS_NAME = {v: k for k, v in _AXIS_KIND.items()}

# dtype code -> (torch attribute name, element size, safetensors name)
_DTYPES = (
    ("float32", 4, "F32"),
    ("float64", 8, "F64"),
    ("int8", 1, "I8"),
    ("uint8", 1, "U8"),
    ("int16", 2, "I16"),
    ("uint16", 2, "U16"),
    ("int32", 4, "I32"),
    ("uint32", 4, "U32"),
    ("int64", 8, "I64"),
    ("uint64", 8, "U64"),
    ("bool", 1, "BOOL"),
    ("float16", 2, "F16"),
    ("bfloat16", 2, "BF16"),
    ("float8_e4m3fn", 1, "F8_E4M3"),
    ("float8_e5m2", 1, "F8_E5M2"),
)
_ELEM_SIZE = tuple(d[1] for d in _DTYPES)
_TORCH_OF_CODE = {}
_CODE_OF_TORCH = {}
if torch is not None:
    for _code, (_name, _size, _st) in enumerate(_DTYPES):
        _dt = getattr(torch, _name, None)
        if isinstance(_dt, torch.dtype):
            _TORCH_OF_CODE[_code] = _dt
            _CODE_OF_TORCH[_dt] = _code


def _torch_dtype(code):
    """The torch dtype of a stored dtype code, or None (logged) when this torch lacks it."""
    dt = _TORCH_OF_CODE.get(code)
    if dt is None:
        _log.warning("tensor dtype code %d (%s) is not available in torch %s; object not read",
                     code, _DTYPES[code][0], torch.__version__ if torch else "(absent)")
    return dt


# ---- building objects -------------------------------------------------------------------------


def _prepare(tensor):
    """A contiguous CPU tensor with the data of `tensor`, or None when upstream refuses it
    (not a torch tensor, not strided, dtype outside the table, more than 8 dims)."""
    if torch is None:
        _log.error("torch is not installed: tensor methods are unavailable")
        return None
    if not isinstance(tensor, torch.Tensor):
        _log.error("expected a torch.Tensor, got %s (numpy: pass torch.from_numpy(a))",
                   type(tensor).__name__)
        return None
    if tensor.layout != torch.strided:
        _log.error("tensor layout %s is not supported (dense tensors only)", tensor.layout)
        return None
    if tensor.dtype not in _CODE_OF_TORCH:
        _log.error("tensor dtype %s is not supported", tensor.dtype)
        return None
    if tensor.dim() > MAX_DIMS:
        _log.error("tensor has %d dims, at most %d are supported", tensor.dim(), MAX_DIMS)
        return None
    if tensor.device.type == "meta":
        _log.error("tensor on the meta device has no data")
        return None
    nbytes = tensor.numel() * tensor.element_size()
    if HEADER_SIZE + nbytes > MAX_VALUE_SIZE:
        _log.error("tensor of %d bytes: objects are at most %d bytes with the %d-byte header",
                   nbytes, MAX_VALUE_SIZE, HEADER_SIZE)
        return None
    try:
        t = tensor.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        return t.contiguous()
    except (RuntimeError, NotImplementedError, MemoryError) as e:
        # a device that cannot copy to the CPU, or no memory for the contiguous copy
        _log.error("tensor on %s cannot be read into CPU memory: %s", tensor.device, e)
        return None


def _shape8(shape):
    s = list(shape)
    return s + [-1] * (MAX_DIMS - len(s))


def _pack_header(code, global_shape, local_shape, data_bytes, layout=LAYOUT_FULL, axes=()):
    """The 304-byte header. axes: tuples (kind, axis_index, rank, count, split_dim, reserved0,
    reserved1)."""
    head = _HEAD.pack(TENSOR_MAGIC, TENSOR_VERSION, HEADER_SIZE, code, len(local_shape), layout, 0,
                      HEADER_SIZE, data_bytes, *_shape8(global_shape), *_shape8(local_shape),
                      len(axes), 0)
    body = b"".join(_AXIS.pack(*a) for a in axes)
    return head + body + bytes(HEADER_SIZE - len(head) - len(body))


def _full_header(t):
    shape = tuple(t.shape)
    return _pack_header(_CODE_OF_TORCH[t.dtype], shape, shape, t.numel() * t.element_size())


def _data_view(t):
    """A buffer over the bytes of contiguous CPU tensor `t` (no copy; `t` must stay alive while
    the buffer is used)."""
    n = t.numel() * t.element_size()
    if n == 0:
        return b""
    return memoryview((ctypes.c_ubyte * n).from_address(t.data_ptr())).cast("B")


def _pack_manifest(code, global_shape, split_dim, shard_count):
    return _MANIFEST.pack(MANIFEST_MAGIC, MANIFEST_VERSION, MANIFEST_SIZE, code, len(global_shape),
                          split_dim, shard_count, 0, *_shape8(global_shape))


# ---- reading objects --------------------------------------------------------------------------


class TensorMeta:
    """A validated header: dtype code, ndim, layout, data offset/bytes, shapes, axes."""

    __slots__ = ("dtype", "ndim", "layout", "data_offset", "data_bytes", "global_shape",
                 "local_shape", "axes")


def _parse_header(header, total):
    """Validates a header (bytes-like of >= 304 bytes) of an object of `total` bytes by every rule
    of docs/tensor-format.md; a TensorMeta, or None with the reason logged."""
    if total < HEADER_SIZE or len(header) < HEADER_SIZE:
        _log.warning("tensor object of %d bytes is shorter than its %d-byte header", total,
                     HEADER_SIZE)
        return None
    f = _HEAD.unpack_from(header, 0)
    magic, version, hsize, code, ndim, layout, _flags, off, nbytes = f[:9]
    gshape, lshape = f[9:17], f[17:25]
    axis_count = f[25]

    def bad(why):
        _log.warning("not a valid tensor object: %s", why)
        return None

    if magic != TENSOR_MAGIC or version != TENSOR_VERSION or hsize != HEADER_SIZE:
        return bad("magic/version/header_size %#x/%d/%d" % (magic, version, hsize))
    if not 0 <= code < len(_DTYPES):
        return bad("dtype code %d" % code)
    if not 0 <= ndim <= MAX_DIMS:
        return bad("ndim %d" % ndim)
    if axis_count > MAX_AXES or layout > LAYOUT_SHARD:
        return bad("axis_count %d / layout_kind %d" % (axis_count, layout))
    if not HEADER_SIZE <= off <= total:
        return bad("data_offset %d for %d bytes" % (off, total))
    for shape in (gshape, lshape):
        if any(d < 0 for d in shape[:ndim]) or any(d != -1 for d in shape[ndim:]):
            return bad("shape %s for ndim %d" % (shape, ndim))
    want = math.prod(lshape[:ndim]) * _ELEM_SIZE[code]
    if nbytes != total - off or nbytes != want:
        return bad("data_bytes %d, object holds %d, shape needs %d" % (nbytes, total - off, want))
    axes = []
    for i in range(axis_count):
        a = _AXIS.unpack_from(header, _HEAD.size + i * _AXIS.size)
        kind, _idx, rank, count, sd = a[:5]
        if not 0 <= kind <= 4 or count <= 0 or not 0 <= rank < count or not -1 <= sd < ndim:
            return bad("axis %d = %s" % (i, a))
        axes.append(a)
    m = TensorMeta()
    m.dtype, m.ndim, m.layout, m.data_offset, m.data_bytes = code, ndim, layout, off, nbytes
    m.global_shape, m.local_shape, m.axes = gshape[:ndim], lshape[:ndim], tuple(axes)
    return m


def _tensor_from_buffer(buf, total):
    """The tensor an object held in buffer-protocol object `buf` (`total` bytes) encodes, sharing
    `buf`'s memory (the tensor keeps `buf` alive), or None."""
    if torch is None:
        return None
    meta = _parse_header(memoryview(buf)[:HEADER_SIZE], total)
    if meta is None:
        return None
    return _tensor_of(meta, buf)


def _tensor_of(meta, buf):
    dt = _torch_dtype(meta.dtype)
    if dt is None:
        return None
    shape = tuple(meta.local_shape)
    if meta.data_bytes == 0:
        return torch.empty(shape, dtype=dt)
    t = torch.frombuffer(buf, dtype=torch.uint8, count=meta.data_bytes, offset=meta.data_offset)
    return t.view(dt).reshape(shape)


def _tensor_at(ptr, total):
    """The tensor of an object that get_into placed at address `ptr` (`total` bytes): a view
    aliasing that memory from the data offset (no copy), or None."""
    if torch is None or total < HEADER_SIZE:
        _log.warning("tensor object of %d bytes is shorter than its header", total)
        return None
    meta = _parse_header(ctypes.string_at(ptr, HEADER_SIZE), total)
    if meta is None:
        return None
    window = (ctypes.c_ubyte * total).from_address(ptr)
    return _tensor_of(meta, window)


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)
_vm_readv = getattr(_libc, "process_vm_readv", None)
if _vm_readv is not None:
    _vm_readv.restype = ctypes.c_ssize_t
    _vm_readv.argtypes = [ctypes.c_int, ctypes.POINTER(_IoVec), ctypes.c_ulong,
                          ctypes.POINTER(_IoVec), ctypes.c_ulong, ctypes.c_ulong]


def _read_memory(ptr, size):
    """A bytearray copy of `size` bytes at address `ptr`, or None when the range is not
    readable (checked by the kernel, process_vm_readv: a bad pointer is an error, not a crash)."""
    if _int(ptr) is None or _int(size) is None or ptr <= 0 or size < 0 or ptr + size >= 1 << 64:
        return None
    out = bytearray(size)
    if size == 0:
        return out
    if _vm_readv is None:
        return None
    window = (ctypes.c_char * size).from_buffer(out)
    local = _IoVec(ctypes.addressof(window), size)
    remote = _IoVec(ptr, size)
    got = _vm_readv(os.getpid(), ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    del window  # releases the export of `out`
    return out if got == size else None


def _serialized_at(ptr, size):
    """(meta, tensor copy) of a serialized tensor `[header][data]` of `size` bytes at `ptr`, or
    None. The header is validated and the last byte probed before the copy is allocated."""
    if _int(ptr) is None or _int(size) is None or size < HEADER_SIZE:
        return None
    head = _read_memory(ptr, HEADER_SIZE)
    if head is None or _read_memory(ptr + size - 1, 1) is None:
        _log.error("buffer %#x of %d bytes is not readable", ptr, size)
        return None
    if _parse_header(head, size) is None:
        return None
    try:
        raw = _read_memory(ptr, size)
    except MemoryError:
        raw = None
    meta = _parse_header(raw, size) if raw is not None else None
    if meta is None:
        return None
    t = _tensor_of(meta, raw)
    return None if t is None else (meta, t)


# ---- module functions upstream exports (used by structured_object_store.py) -------------------


def _serialize_tensor(tensor):
    """(header: bytes of 304, data_ptr: int, nbytes: int, owner) for `tensor`; `owner` is the
    contiguous CPU tensor whose memory data_ptr points to (keep it alive while using data_ptr).
    ValueError if the tensor is not supported. Matches upstream `_serialize_tensor`."""
    t = _prepare(tensor)
    if t is None:
        raise ValueError("unsupported tensor (torch.Tensor of a supported dtype, <= 8 dims)")
    return _full_header(t), t.data_ptr(), t.numel() * t.element_size(), t


def _tensor_metadata_size():
    """304, the header size. Matches upstream `_tensor_metadata_size`."""
    return HEADER_SIZE


def _deserialize_tensor(payload):
    """The tensor a serialized object (bytes-like: header + data) encodes, as an owning copy.
    ValueError if the payload is not a valid tensor object. Matches upstream
    `_deserialize_tensor`."""
    raw = bytearray(payload)
    t = _tensor_from_buffer(raw, len(raw))
    if t is None:
        raise ValueError("payload is not a valid tensor object")
    return t


# ---- parallelism description classes (upstream store_py.cpp) ----------------------------------


class ParallelAxis:
    """One axis of a parallel layout: kind "tp" | "dp" | "ep" | "pp" (case-insensitive), rank
    (0 <= rank < size), size, split_dim (TP: required; DP/EP/PP: must be None), expert_id (EP:
    required), stage_id (PP: required). Read-write attributes; matches upstream ParallelAxis."""

    def __init__(self, kind="tp", rank=0, size=1, split_dim=None, expert_id=None, stage_id=None):
        self.kind, self.rank, self.size = kind, rank, size
        self.split_dim, self.expert_id, self.stage_id = split_dim, expert_id, stage_id

    def __repr__(self):
        return ("ParallelAxis(kind=%r, rank=%r, size=%r, split_dim=%r, expert_id=%r, "
                "stage_id=%r)" % (self.kind, self.rank, self.size, self.split_dim,
                                  self.expert_id, self.stage_id))


class TensorParallelism:
    """A parallel layout: `axes`, a list of at most 4 ParallelAxis of distinct kinds. Matches
    upstream TensorParallelism."""

    def __init__(self, axes=None):
        self.axes = list(axes) if axes is not None else []

    def __repr__(self):
        return "TensorParallelism(axes=%r)" % (self.axes,)


class ReadTarget:
    """What a parallelism read returns: mode "as_stored" (default; the object under the key),
    "shard" (the shard `parallelism` names), or "full" (the whole tensor reassembled from its
    shards). Matches upstream ReadTarget."""

    def __init__(self, mode="as_stored", parallelism=None):
        self.mode, self.parallelism = mode, parallelism

    def __repr__(self):
        return "ReadTarget(mode=%r, parallelism=%r)" % (self.mode, self.parallelism)


def _int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _i32(v):
    """v when it is an int that fits a C int (upstream's type for ranks, sizes, split dims,
    expert and stage ids), else None."""
    v = _int(v)
    return v if v is not None and _I32_MIN <= v <= _I32_MAX else None


def _key_list(keys):
    """Raises TypeError unless `keys` is a list or tuple (upstream's std::vector<std::string>
    takes a sequence, not a str, bytes, generator or None)."""
    if not isinstance(keys, (list, tuple)):
        raise TypeError("keys must be a list of str, not %s" % type(keys).__name__)


def _canon_axes(parallelism):
    """The validated axes of a TensorParallelism in canonical order (DP, TP, EP, PP) as tuples
    (kind, rank, size, split_dim|None, expert_id|None, stage_id|None); [] for None; None
    (logged) when a rule is broken (a parallelism without axes is one, as upstream)."""
    if parallelism is None:
        return []
    axes = getattr(parallelism, "axes", None)
    if axes is None or isinstance(axes, (str, bytes)):
        _log.error("parallelism has no axes list")
        return None
    axes = list(axes)
    if not 0 < len(axes) <= MAX_AXES:
        _log.error("parallelism has %d axes, 1 to %d are allowed", len(axes), MAX_AXES)
        return None
    out = []
    for a in axes:
        kind = getattr(a, "kind", None)
        kind = _AXIS_KIND.get(kind.lower()) if isinstance(kind, str) else None
        rank, size = _i32(getattr(a, "rank", None)), _i32(getattr(a, "size", None))
        sd = getattr(a, "split_dim", None)
        eid = getattr(a, "expert_id", None)
        sid = getattr(a, "stage_id", None)
        ok = kind is not None and rank is not None and size is not None and 0 <= rank < size
        ok = ok and all(v is None or _i32(v) is not None for v in (sd, eid, sid))
        if ok and kind == AXIS_TP:
            ok = sd is not None and sd >= 0
        elif ok:
            ok = sd is None
        if ok and kind == AXIS_EP:
            ok = eid is not None
        if ok and kind == AXIS_PP:
            ok = sid is not None
        if not ok or any(o[0] == kind for o in out):
            _log.error("invalid or duplicate parallel axis %r", a)
            return None
        out.append((kind, rank, size, sd, eid, sid))
    out.sort(key=lambda x: x[0])
    return out


def _axis_suffix(a):
    kind, rank, size, sd, eid, sid = a
    s = "%s_%dof%d" % (_AXIS_NAME[kind], rank, size)
    if sd is not None:
        s += "_sd%d" % sd
    if eid is not None:
        s += "_eid%d" % eid
    if sid is not None:
        s += "_sid%d" % sid
    return s


def _tp_index(axes):
    for i, a in enumerate(axes):
        if a[0] == AXIS_TP:
            return i
    return None


def _parallel_key(base, axes):
    """The shard key of `axes` (canonical): `<base>_tp_<r>` for one TP axis (upstream's legacy
    key), else `<base>__<axis>...`."""
    if len(axes) == 1 and axes[0][0] == AXIS_TP:
        return "%s_tp_%d" % (base, axes[0][1])
    return base + "".join("__" + _axis_suffix(a) for a in axes)


def _axes_match(meta, axes):
    """True when a header's axes are exactly the canonical `axes` (upstream
    parallelism_matches_metadata: kind, rank, size, split_dim, expert_id, stage_id)."""
    stored = tuple((a[0], a[2], a[3], None if a[4] == -1 else a[4],
                    a[5] if a[0] == AXIS_EP else None, a[5] if a[0] == AXIS_PP else None)
                   for a in meta.axes)
    if stored != tuple(tuple(a) for a in axes):
        _log.info("stored axes %s do not match the requested %s", stored, axes)
        return False
    return True


def _writer_key(base, rank, size, sd):
    return "%s__writer_%dof%d_sd%d" % (base, rank, size, sd)


def _writer_spec(w):
    """(rank, size, split_dim) of a writer partition object, or None."""
    vals = tuple(_i32(getattr(w, n, None)) for n in ("rank", "size", "split_dim"))
    if None in vals or not 0 <= vals[0] < vals[1] or vals[2] < 0:
        _log.error("invalid writer partition %r", w)
        return None
    return vals


def _uniform(t, sd, count):
    """True when dim `sd` of `t` splits into `count` equal shards."""
    if not 0 <= sd < t.dim() or not 0 < count <= MAX_SHARDS or t.shape[sd] % count:
        _log.error("cannot split dim %d of shape %s into %d equal shards", sd, tuple(t.shape),
                   count)
        return False
    return True


def _shard_of(t, sd, rank, count):
    n = t.shape[sd] // count
    return t.narrow(sd, rank * n, n).contiguous()


def _layout_axes(axes, local_shape):
    """Header axis tuples for canonical axes, with the local split extent in reserved1."""
    out = []
    for i, (kind, rank, size, sd, eid, sid) in enumerate(axes):
        r0 = eid if kind == AXIS_EP else sid if kind == AXIS_PP else 0
        out.append((kind, i, rank, size, -1 if sd is None else sd, r0 or 0,
                    local_shape[sd] if sd is not None else 0))
    return out


def _shard_header(code, global_shape, shard, axes):
    local = tuple(shard.shape)
    return _pack_header(code, global_shape, local, shard.numel() * shard.element_size(),
                        LAYOUT_SHARD, _layout_axes(axes, local))


def _parse_manifest(buf):
    """(dtype, global_shape, split_dim, shard_count) of a manifest object, or None."""
    if buf is None or len(buf) < MANIFEST_SIZE:
        return None
    f = _MANIFEST.unpack_from(memoryview(buf), 0)
    magic, version, hsize, code, ndim, sd, count = f[:7]
    shape = f[8:8 + ndim] if 0 <= ndim <= MAX_DIMS else ()
    if (magic != MANIFEST_MAGIC or version != MANIFEST_VERSION or hsize != MANIFEST_SIZE
            or not 0 <= ndim <= MAX_DIMS or count <= 0 or not 0 <= sd < ndim
            or any(d < 0 for d in shape)):
        _log.warning("invalid shard manifest")
        return None
    return code, tuple(shape), sd, count


# ---- safetensors files (format: 8-byte LE header length, JSON header, raw data) ---------------

_ST_HEADER_MAX = 100 << 20  # the safetensors reference limit for the JSON header


def _file_path(file_name):
    """`file_name` as a str or bytes path; TypeError for anything else. An int is refused
    in particular: open() would take it as a file descriptor and write over (then close) one of
    this process's descriptors, e.g. the store's segment memory or the engine's sockets.
    Upstream converts file_name to std::string (str or bytes); os.PathLike is ours."""
    if isinstance(file_name, (str, bytes)):
        return file_name
    if isinstance(file_name, os.PathLike):
        path = os.fspath(file_name)  # TypeError when __fspath__ returns neither str nor bytes
        if isinstance(path, (str, bytes)):
            return path
    raise TypeError("file_name must be a str, bytes or os.PathLike path, not %s"
                    % type(file_name).__name__)


def _write_safetensors(path, name, t):
    data = _data_view(t)
    head = {name: {"dtype": _DTYPES[_CODE_OF_TORCH[t.dtype]][2], "shape": list(t.shape),
                   "data_offsets": [0, len(data)]}}
    hj = json.dumps(head, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        f.write(data)


def _read_safetensors(path, want):
    """(name, tensor) of entry `want` of a safetensors file, or of its first entry (lowest data
    offset, the order of safetensors' own tensor_names) when `want` is None or absent; None
    (logged) on a malformed file. Every entry is validated as safetensors does: a known dtype,
    data_offsets [begin, end] with end - begin = numel x element size, the entries in offset order
    covering the data exactly (from 0, no holes, up to the end of the file)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        raw = f.read(8)
        if len(raw) != 8:
            _log.error("%s: not a safetensors file (shorter than 8 bytes)", path)
            return None
        (n,) = struct.unpack("<Q", raw)
        if n > _ST_HEADER_MAX or 8 + n > size:
            _log.error("%s: header length %d does not fit the file", path, n)
            return None
        try:
            head = json.loads(f.read(n))
        except (ValueError, RecursionError) as e:  # RecursionError: nesting deeper than Python's
            # recursion limit, e.g. 100000 '['
            _log.error("%s: bad JSON header: %s", path, e)
            return None
        if not isinstance(head, dict):
            _log.error("%s: the header is not a JSON object", path)
            return None
        names = [d[2] for d in _DTYPES]
        entries = []
        for name, e in head.items():
            if name == "__metadata__":
                continue
            ok = isinstance(e, dict) and e.get("dtype") in names
            shape, offs = (e.get("shape"), e.get("data_offsets")) if ok else (None, None)
            ok = (ok and isinstance(shape, list) and isinstance(offs, list) and len(offs) == 2
                  and all(_int(x) is not None and x >= 0 for x in shape + offs))
            if not ok or offs[1] - offs[0] != math.prod(shape) * _ELEM_SIZE[
                    names.index(e["dtype"])]:
                _log.error("%s: entry %r is malformed: %r", path, name, e)
                return None
            entries.append((offs[0], offs[1], name, names.index(e["dtype"]), tuple(shape)))
        entries.sort()
        end = 0
        for begin, stop, name, _c, _s in entries:
            if begin != end:
                _log.error("%s: entry %r does not start where the previous one ends", path, name)
                return None
            end = stop
        if not entries or end != size - 8 - n:
            _log.error("%s: the entries do not cover the %d data bytes", path, size - 8 - n)
            return None
        pick = [x for x in entries if x[2] == want] or entries[:1]
        begin, stop, name, code, shape = pick[0]
        if len(shape) > MAX_DIMS:
            _log.error("%s: entry %r has %d dims, at most %d", path, name, len(shape), MAX_DIMS)
            return None
        dt = _torch_dtype(code)
        if dt is None:
            return None
        f.seek(8 + n + begin)
        buf = bytearray(stop - begin)
        if f.readinto(buf) != len(buf):
            return None
        if not buf:
            return name, torch.empty(shape, dtype=dt)
        return name, torch.frombuffer(buf, dtype=torch.uint8).view(dt).reshape(shape)


# ---- the methods ------------------------------------------------------------------------------


def _bad_list(*lists):
    """True unless every argument is a list/tuple, all of the same length."""
    if not all(isinstance(x, (list, tuple)) for x in lists):
        return True
    return len({len(x) for x in lists}) != 1


def _n(keys):
    return len(keys) if isinstance(keys, (list, tuple)) else 0


def _first_error(codes):
    for c in codes:
        if c != 0:
            return c
    return 0


class TensorStoreMixin:
    """Upstream Mooncake's tensor methods of MooncakeDistributedStore (see the module doc and
    docs/tensor-format.md). Requires the plain store methods on `self`."""

    __slots__ = ()

    def _mc_ready(self):
        """True once setup() succeeded (get_hostname is "" before; no RPC)."""
        return bool(self.get_hostname())

    # -- internal writers --

    def _mc_write(self, key, header, t, config, upsert):
        """One object = header + the bytes of contiguous CPU tensor t, passed as two parts
        (put_parts / upsert_parts join them once, with the GIL released)."""
        fn = self.upsert_parts if upsert else self.put_parts
        return fn(key, header, _data_view(t), config=config)

    def _mc_put_full(self, key, tensor, config, upsert):
        t = _prepare(tensor)
        if t is None:
            return INVALID_PARAMS
        return self._mc_write(key, _full_header(t), t, config, upsert)

    def _mc_batch(self, fn, keys, *lists, config=None):
        _key_list(keys)
        if _bad_list(keys, *lists):
            return [INVALID_PARAMS] * _n(keys)
        gids = getattr(config, "group_ids", None) if config is not None else None
        if gids is not None and len(gids) != len(keys):
            return [INVALID_PARAMS] * len(keys)
        return [fn(k, *args) for k, *args in zip(keys, *lists)]

    def _mc_put_tp(self, key, tensor, config, tp_size, split_dim, upsert=False):
        """All tp_size shards of the full tensor (upstream writes every shard; tp_rank unused)."""
        if _int(tp_size) is None or _int(split_dim) is None:
            return INVALID_PARAMS
        if tp_size <= 1:
            return self._mc_put_full(key, tensor, config, upsert)
        t = _prepare(tensor)
        if t is None or not _uniform(t, split_dim, tp_size):
            return INVALID_PARAMS
        code, gshape = _CODE_OF_TORCH[t.dtype], tuple(t.shape)
        for r in range(tp_size):
            axes = [(AXIS_TP, r, tp_size, split_dim, None, None)]
            shard = _shard_of(t, split_dim, r, tp_size)
            rc = self._mc_write(_parallel_key(key, axes), _shard_header(code, gshape, shard, axes),
                                shard, config, upsert)
            if rc != 0:
                return rc
        return 0

    def _mc_write_manifest(self, key, data, config, upsert):
        return (self.upsert if upsert else self.put)(key, data, config=config)

    def _mc_put_parallel(self, key, tensor, parallelism, config, writer, upsert):
        if parallelism is not None and writer is not None:
            _log.error("pass either parallelism or writer_partition, not both")
            return INVALID_PARAMS
        # the arguments are checked before the tensor is made contiguous (which may copy it)
        spec = _writer_spec(writer) if writer is not None else None
        axes = _canon_axes(parallelism) if writer is None else None
        if spec is None and axes is None:
            return INVALID_PARAMS
        t = _prepare(tensor)
        if t is None:
            return INVALID_PARAMS
        code = _CODE_OF_TORCH[t.dtype]
        if writer is not None:
            if not _uniform(t, spec[2], spec[1]):
                return INVALID_PARAMS
            rank, size, sd = spec
            axes = [(AXIS_TP, rank, size, sd, None, None)]
            shard = _shard_of(t, sd, rank, size)
            rc = self._mc_write(_writer_key(key, rank, size, sd),
                                _shard_header(code, tuple(t.shape), shard, axes), shard, config,
                                upsert)
            if rc != 0:
                return rc
            return self._mc_write_manifest(key + "__writer_manifest",
                                           _pack_manifest(code, tuple(t.shape), sd, size), config,
                                           upsert)
        if not axes:  # no parallelism: a plain tensor object
            return self._mc_write(key, _full_header(t), t, config, upsert)
        tpi = _tp_index(axes)
        if tpi is None:  # DP/EP/PP only: the tensor is stored as given, tagged with its axes
            shape = tuple(t.shape)
            hdr = _pack_header(code, shape, shape, t.numel() * t.element_size(), LAYOUT_SHARD,
                               _layout_axes(axes, shape))
            return self._mc_write(_parallel_key(key, axes), hdr, t, config, upsert)
        _k, rank, size, sd, _e, _s = axes[tpi]
        if len(axes) == 1:  # the tensor is the shard; the full shape is inferred
            if not 0 <= sd < t.dim() or t.shape[sd] * size > _I64_MAX:
                _log.error("split dim %d of %s: not a dim, or x %d overflows int64", sd,
                           tuple(t.shape), size)
                return INVALID_PARAMS
            gshape = list(t.shape)
            gshape[sd] *= size
            shard = t
        else:  # the tensor is the full tensor; this writer's shard is cut from it
            if not _uniform(t, sd, size):
                return INVALID_PARAMS
            gshape, shard = list(t.shape), _shard_of(t, sd, rank, size)
        rc = self._mc_write(_parallel_key(key, axes), _shard_header(code, gshape, shard, axes),
                            shard, config, upsert)
        if rc != 0:
            return rc
        return self._mc_write_manifest(key + "__parallelism_manifest",
                                       _pack_manifest(code, gshape, sd, size), config, upsert)

    def _mc_put_parallel_from(self, key, buffer_ptr, size, parallelism, config, writer, upsert):
        if parallelism is None and writer is None:
            return self._mc_put_from(key, buffer_ptr, size, config, upsert)
        got = _serialized_at(buffer_ptr, size)
        if got is None:
            return INVALID_PARAMS
        return self._mc_put_parallel(key, got[1], parallelism, config, writer, upsert)

    def _mc_put_from(self, key, buffer_ptr, size, config, upsert):
        """Zero-copy put of an already serialized tensor after validating its header."""
        if _int(buffer_ptr) is None or _int(size) is None or size < HEADER_SIZE:
            return INVALID_PARAMS
        head = _read_memory(buffer_ptr, HEADER_SIZE)
        if head is None or _parse_header(head, size) is None:
            return INVALID_PARAMS
        fn = self.upsert_from if upsert else self.put_from
        return fn(key, buffer_ptr, size, config=config)

    # -- internal readers --

    def _mc_get(self, key):
        h = self.get_buffer(key)
        if h is None:
            return None
        return _tensor_from_buffer(h, len(h))

    def _mc_get_into(self, key, buffer_ptr, size):
        n = self.get_into(key, buffer_ptr, size)
        if n < 0:
            _log.info("get_tensor_into %r: code %d", key, n)
            return None
        return _tensor_at(buffer_ptr, n)

    def _mc_target(self, target):
        """(mode, canonical axes) of a ReadTarget, or None (logged) when it is invalid."""
        mode = getattr(target, "mode", "as_stored") if target is not None else "as_stored"
        par = getattr(target, "parallelism", None) if target is not None else None
        axes = _canon_axes(par)
        if axes is None or mode not in ("as_stored", "shard", "full"):
            _log.error("invalid read target %r", target)
            return None
        if mode == "as_stored" and axes:
            _log.error("read mode 'as_stored' takes no parallelism")
            return None
        if mode == "shard" and not axes:
            _log.error("read mode 'shard' needs a parallelism")
            return None
        if mode == "full" and axes and _tp_index(axes) is None:
            _log.error("read mode 'full' with a parallelism needs a TP axis")
            return None
        return mode, axes

    def _mc_get_checked(self, key, axes):
        """get_tensor of `key` if the object's axes are exactly `axes` (else None)."""
        h = self.get_buffer(key)
        if h is None:
            return None
        meta = _parse_header(memoryview(h)[:HEADER_SIZE], len(h))
        if meta is None or not _axes_match(meta, axes):
            return None
        return _tensor_of(meta, h)

    def _mc_cat(self, keys, axes_list, sd, want_shape=None):
        """The shards under `keys` (each with axes axes_list[i]) concatenated along `sd`, checked
        against the global shape (want_shape, else the shards' own), or None."""
        handles = self.batch_get_buffer(keys)
        parts, gshape, code = [], None, None
        for k, h, axes in zip(keys, handles, axes_list):
            if h is None:
                _log.info("shard %r is missing", k)
                return None
            meta = _parse_header(memoryview(h)[:HEADER_SIZE], len(h))
            if meta is None or not _axes_match(meta, axes):
                return None
            if meta.layout != LAYOUT_SHARD:
                _log.warning("object %r is not a shard", k)
                return None
            if gshape is None:
                gshape, code = tuple(meta.global_shape), meta.dtype
            elif tuple(meta.global_shape) != gshape or meta.dtype != code:
                _log.warning("shard %r has another global shape or dtype", k)
                return None
            t = _tensor_of(meta, h)
            if t is None or not 0 <= sd < t.dim():
                return None
            parts.append(t)
        want = want_shape if want_shape is not None else gshape
        full = torch.cat(parts, sd) if parts else None
        if full is None or tuple(full.shape) != tuple(want):
            _log.warning("reassembled shape does not match the stored global shape")
            return None
        return full

    def _mc_full(self, key, axes, count=None, want_shape=None):
        """The whole tensor reassembled from every TP rank of layout `axes` (TP size `count`, by
        default the one in `axes`), checked against want_shape if given, or None."""
        tpi = _tp_index(axes)
        _k, _r, size, sd, eid, sid = axes[tpi]
        size = size if count is None else count
        if size > MAX_SHARDS:
            _log.error("%d shards: at most %d are reassembled", size, MAX_SHARDS)
            return None
        keys, axes_list = [], []
        for r in range(size):
            ax = list(axes)
            ax[tpi] = (AXIS_TP, r, size, sd, eid, sid)
            keys.append(_parallel_key(key, ax))
            axes_list.append(ax)
        return self._mc_cat(keys, axes_list, sd, want_shape)

    def _mc_full_writers(self, key):
        """The whole tensor reassembled from the writer partitions `<key>__writer_manifest`
        names; None without a valid manifest or when a partition is missing."""
        m = _parse_manifest(self.get_buffer(key + "__writer_manifest"))
        if m is None:
            return None
        _code, gshape, sd, count = m
        if count > MAX_SHARDS:
            _log.error("%d writer partitions: at most %d are reassembled", count, MAX_SHARDS)
            return None
        return self._mc_cat([_writer_key(key, r, count, sd) for r in range(count)],
                             [[(AXIS_TP, r, count, sd, None, None)] for r in range(count)], sd,
                             gshape)

    def _mc_full_legacy_tp(self, key, sd, size):
        """The whole tensor from legacy TP shards `<key>_tp_<r>` whatever TP size they were
        written with: the stored shard count and split dim come from `<key>_tp_0`'s header
        (upstream load_parallelism_full_reconstruction_sources, single-TP branch). None when
        that header names no TP layout, another split dim, a count that does not divide the
        global dim (or the requested `size` does not), or a shard does not match."""
        h = self.get_buffer(_parallel_key(key, [(AXIS_TP, 0, size, sd, None, None)])
                            if size > 1 else key)
        meta = _parse_header(memoryview(h)[:HEADER_SIZE], len(h)) if h is not None else None
        tp = [a for a in meta.axes if a[0] == AXIS_TP] if meta is not None else []
        if not tp or meta.layout != LAYOUT_SHARD:
            _log.info("%r has no legacy TP shard 0", key)
            return None
        count, ssd = tp[0][3], tp[0][4]
        if ssd != sd:
            _log.warning("%r: requested split dim %d, stored %d", key, sd, ssd)
            return None
        gshape = tuple(meta.global_shape)
        if (not 0 <= sd < len(gshape) or count > MAX_SHARDS or gshape[sd] % count
                or gshape[sd] % size):
            _log.warning("%r: dim %d of %s is not split evenly into %d stored / %d requested "
                         "shards (at most %d)", key, sd, gshape, count, size, MAX_SHARDS)
            return None
        axes_list = [[(AXIS_TP, r, count, sd, None, None)] for r in range(count)]
        keys = [_parallel_key(key, ax) if count > 1 else key for ax in axes_list]
        return self._mc_cat(keys, axes_list, sd, gshape)

    def _mc_reconstruct(self, key, axes):
        """The whole tensor of a layout with a TP axis, for a "full" read or to cut a shard
        that is not stored as such, or None. In upstream's order
        (load_parallelism_full_reconstruction_sources): the shards `<key>__parallelism_manifest`
        counts; for a single TP axis the legacy shards, whatever their TP size; else every rank
        of the requested TP size."""
        tpi = _tp_index(axes)
        _k, _rank, size, sd, _e, _s = axes[tpi]
        m = _parse_manifest(self.get_buffer(key + "__parallelism_manifest"))
        if m is not None:
            _code, gshape, msd, count = m
            if msd == sd and gshape[sd] % size == 0 and gshape[sd] % count == 0:
                full = self._mc_full(key, axes, count, gshape)
                if full is not None:
                    return full
        if len(axes) == 1:
            return self._mc_full_legacy_tp(key, sd, size)
        return self._mc_full(key, axes)

    def _mc_shard_rebuilt(self, key, axes):
        """The requested TP shard cut from the reassembled tensor (_mc_reconstruct; for a single
        TP axis then the writer partitions, which upstream does not try), or None."""
        tpi = _tp_index(axes)
        _k, rank, size, sd, _e, _s = axes[tpi]
        full = self._mc_reconstruct(key, axes)
        if full is None and len(axes) == 1:
            full = self._mc_full_writers(key)
        if full is None or not _uniform(full, sd, size):
            return None
        return _shard_of(full, sd, rank, size)

    def _mc_get_legacy_tp(self, key, axes):
        """Upstream's last resort for a single TP axis: the object under the legacy key
        (`<key>_tp_<rank>`, `key` itself for TP size 1), but
        only when its header names no layout (a plain object written there, which cannot be
        checked). A header whose axes contradict the request gives None: upstream returns that
        object as if it were the requested shard (docs/tensor-format.md)."""
        h = self.get_buffer(_parallel_key(key, axes) if axes[0][2] > 1 else key)
        meta = _parse_header(memoryview(h)[:HEADER_SIZE], len(h)) if h is not None else None
        if meta is None:
            return None
        if meta.axes or meta.layout != LAYOUT_FULL:
            _log.warning("%r holds another layout than the requested %s", key, axes)
            return None
        return _tensor_of(meta, h)

    def _mc_get_parallel(self, key, target):
        if torch is None:
            return None
        got = self._mc_target(target)
        if got is None:
            return None
        mode, axes = got
        if mode == "as_stored":
            return self._mc_get(key)
        if mode == "full":
            if axes:
                return self._mc_reconstruct(key, axes)
            if self.is_exist(key + "__writer_manifest") == 1:
                return self._mc_full_writers(key)
            return self._mc_get(key)
        # shard: the exact shard object, a writer partition of the same split, or a cut
        t = self._mc_get_checked(_parallel_key(key, axes), axes)
        if t is None and len(axes) == 1 and axes[0][0] == AXIS_TP:
            _k, rank, size, sd, _e, _s = axes[0]
            t = self._mc_get_checked(_writer_key(key, rank, size, sd), axes)
        if t is None and _tp_index(axes) is not None:
            t = self._mc_shard_rebuilt(key, axes)
        if t is None and len(axes) == 1 and axes[0][0] == AXIS_TP:
            t = self._mc_get_legacy_tp(key, axes)
        return t

    def _mc_get_into_checked(self, key, buffer_ptr, size, axes):
        t = self._mc_get_into(key, buffer_ptr, size)
        if t is None:
            return None
        meta = _parse_header(ctypes.string_at(buffer_ptr, HEADER_SIZE),
                             HEADER_SIZE + t.numel() * t.element_size())
        return t if meta is not None and _axes_match(meta, axes) else None

    def _mc_get_parallel_into(self, key, buffer_ptr, size, target):
        got = self._mc_target(target)
        if got is None or torch is None:
            return None
        mode, axes = got
        if mode == "as_stored":
            return self._mc_get_into(key, buffer_ptr, size)
        if mode == "shard":
            t = self._mc_get_into_checked(_parallel_key(key, axes), buffer_ptr, size, axes)
            if t is None and len(axes) == 1 and axes[0][0] == AXIS_TP:
                _k, rank, n, sd, _e, _s = axes[0]
                t = self._mc_get_into_checked(_writer_key(key, rank, n, sd), buffer_ptr, size,
                                              axes)
            if t is not None:
                return t
        elif not axes and self.is_exist(key + "__writer_manifest") != 1:
            return self._mc_get_into(key, buffer_ptr, size)
        full = self._mc_get_parallel(key, target)
        if full is None:
            return None
        t = full.contiguous()
        total = HEADER_SIZE + t.numel() * t.element_size()
        # Proves [buffer_ptr, buffer_ptr + size) is registered memory before writing into it.
        if (_int(size) is None or size < total
                or self.get_into(key + "__mc_probe__", buffer_ptr, size) == INVALID_PARAMS):
            _log.error("buffer of %r bytes cannot hold %d bytes or is not registered", size, total)
            return None
        ctypes.memmove(buffer_ptr, _full_header(t), HEADER_SIZE)
        if total > HEADER_SIZE:
            ctypes.memmove(buffer_ptr + HEADER_SIZE, t.data_ptr(), total - HEADER_SIZE)
        return _tensor_at(buffer_ptr, total)

    # ---- public: plain --------------------------------------------------------------------

    def put_tensor(self, key, tensor):
        """put_tensor(key, tensor) -> int

        Stores `tensor` (a torch.Tensor on the CPU, of a dtype of docs/tensor-format.md, at most
        8 dims; non-contiguous tensors are made contiguous) as one object: the 304-byte header
        followed by its bytes (header and data are passed as two parts of one put_parts, joined
        once in C with the GIL released; no copy in Python). For a numpy array pass torch.from_numpy(a). Objects are immutable: 0 also
        when the key exists. Returns 0 or a negative code: -600 not a supported tensor or store
        not set up, -200 no space, as put. Matches upstream `put_tensor`."""
        return self._mc_put_full(key, tensor, None, False)

    def pub_tensor(self, key, tensor, config=None):
        """pub_tensor(key, tensor, config=ReplicateConfig()) -> int

        put_tensor with a ReplicateConfig. Matches upstream `pub_tensor`."""
        return self._mc_put_full(key, tensor, config, False)

    def upsert_tensor(self, key, tensor):
        """upsert_tensor(key, tensor) -> int

        As put_tensor, replacing an existing object (one upsert_parts: header and data joined
        once in C, as put_tensor).
        Matches upstream `upsert_tensor`."""
        return self._mc_put_full(key, tensor, None, True)

    def upsert_pub_tensor(self, key, tensor, config=None):
        """upsert_pub_tensor(key, tensor, config=ReplicateConfig()) -> int

        upsert_tensor with a ReplicateConfig. Matches upstream `upsert_pub_tensor`."""
        return self._mc_put_full(key, tensor, config, True)

    def batch_put_tensor(self, keys, tensors_list):
        """batch_put_tensor(keys, tensors_list) -> list[int]

        put_tensor per key (one put each); one code per key. Lists of different lengths: -600
        for every key; [] for []. Matches upstream `batch_put_tensor`."""
        return self._mc_batch(lambda k, t: self._mc_put_full(k, t, None, False), keys,
                              tensors_list)

    def batch_pub_tensor(self, keys, tensors_list, config=None):
        """batch_pub_tensor(keys, tensors_list, config=ReplicateConfig()) -> list[int]

        batch_put_tensor with a ReplicateConfig (group_ids, if set, one per key, else -600 per
        key). Matches upstream `batch_pub_tensor`."""
        return self._mc_batch(lambda k, t: self._mc_put_full(k, t, config, False), keys,
                              tensors_list, config=config)

    def batch_upsert_tensor(self, keys, tensors_list):
        """batch_upsert_tensor(keys, tensors_list) -> list[int]

        upsert_tensor per key. Matches upstream `batch_upsert_tensor`."""
        return self._mc_batch(lambda k, t: self._mc_put_full(k, t, None, True), keys,
                              tensors_list)

    def batch_upsert_pub_tensor(self, keys, tensors_list, config=None):
        """batch_upsert_pub_tensor(keys, tensors_list, config=ReplicateConfig()) -> list[int]

        upsert_pub_tensor per key. Matches upstream `batch_upsert_pub_tensor`."""
        return self._mc_batch(lambda k, t: self._mc_put_full(k, t, config, True), keys,
                              tensors_list, config=config)

    def get_tensor(self, key):
        """get_tensor(key) -> torch.Tensor | None

        The tensor stored under `key` (an owning CPU tensor: the object is read once into
        memory the tensor keeps alive, no further copy). None when the key is missing, the
        store is not set up, or the object fails any rule of docs/tensor-format.md (never
        garbage, never an exception; the log says why). Matches upstream `get_tensor`."""
        return self._mc_get(key)

    def batch_get_tensor(self, keys):
        """batch_get_tensor(keys) -> list[torch.Tensor | None]

        get_tensor per key in one batch read; None for each key that fails. Matches upstream
        `batch_get_tensor`."""
        _key_list(keys)
        return [None if h is None else _tensor_from_buffer(h, len(h))
                for h in self.batch_get_buffer(keys)]

    def get_tensor_into(self, key, buffer_ptr, size):
        """get_tensor_into(key, buffer_ptr, size) -> torch.Tensor | None

        Reads the object into `size` bytes of registered memory at `buffer_ptr` (int) and returns
        a tensor that aliases that memory from the data offset (304): no copy; writing the
        buffer changes the tensor. The caller keeps the buffer alive while the tensor is used.
        None on a miss, a buffer that is too small or not registered, or an invalid object.
        Matches upstream `get_tensor_into`."""
        return self._mc_get_into(key, buffer_ptr, size)

    def batch_get_tensor_into(self, keys, buffer_ptrs, sizes):
        """batch_get_tensor_into(keys, buffer_ptrs, sizes) -> list

        get_tensor_into per key in one batch read: a tensor view or None per key. Invalid
        arguments (lists of different lengths, a null pointer, store not set up) give a list of
        -600 ints instead, as upstream. Matches upstream `batch_get_tensor_into`."""
        _key_list(keys)
        if (_bad_list(keys, buffer_ptrs, sizes) or not self._mc_ready()
                or any(p == 0 for p in buffer_ptrs)):
            return [INVALID_PARAMS] * _n(keys)
        codes = self.batch_get_into(keys, buffer_ptrs, sizes)
        return [None if n < 0 else _tensor_at(p, n) for n, p in zip(codes, buffer_ptrs)]

    def get_tensor_into_cuda(self, key, tensor):
        """get_tensor_into_cuda(key, tensor) -> int

        Always -600: this build has no CUDA (upstream also returns -600 except on a dummy
        client with CUDA). Kept so callers get upstream's code."""
        return INVALID_PARAMS

    def batch_get_tensor_into_cuda(self, keys, tensors_list):
        """batch_get_tensor_into_cuda(keys, tensors_list) -> list[int]

        Always -600 per key (no CUDA in this build; see get_tensor_into_cuda)."""
        _key_list(keys)
        return [INVALID_PARAMS] * _n(keys)

    def put_tensor_from(self, key, buffer_ptr, size):
        """put_tensor_from(key, buffer_ptr, size) -> int

        Zero-copy put of `size` bytes at `buffer_ptr` (registered memory) that already hold a
        serialized tensor ([304-byte header][data]); the header is validated first (read
        safely: an unreadable pointer is -600, not a crash). Returns 0 or a negative code: -600
        invalid header, size or buffer. Matches upstream `put_tensor_from`."""
        return self._mc_put_from(key, buffer_ptr, size, None, False)

    def upsert_tensor_from(self, key, buffer_ptr, size):
        """upsert_tensor_from(key, buffer_ptr, size) -> int

        As put_tensor_from, replacing an existing object. Matches upstream
        `upsert_tensor_from`."""
        return self._mc_put_from(key, buffer_ptr, size, None, True)

    def _mc_batch_from(self, keys, buffer_ptrs, sizes, upsert):
        _key_list(keys)
        if _bad_list(keys, buffer_ptrs, sizes) or not self._mc_ready():
            return [INVALID_PARAMS] * _n(keys)
        for p, n in zip(buffer_ptrs, sizes):
            if _int(p) is None or _int(n) is None or n < HEADER_SIZE:
                return [INVALID_PARAMS] * len(keys)
            head = _read_memory(p, HEADER_SIZE)
            if head is None or _parse_header(head, n) is None:
                return [INVALID_PARAMS] * len(keys)
        fn = self.batch_upsert_from if upsert else self.batch_put_from
        return fn(keys, buffer_ptrs, sizes)

    def batch_put_tensor_from(self, keys, buffer_ptrs, sizes):
        """batch_put_tensor_from(keys, buffer_ptrs, sizes) -> list[int]

        Validates every buffer as put_tensor_from does, then one zero-copy batch put. One
        invalid buffer (or lists of different lengths, store not set up) fails the whole batch
        with -600 per key, as upstream; [] for []. Matches upstream `batch_put_tensor_from`."""
        return self._mc_batch_from(keys, buffer_ptrs, sizes, False)

    def batch_upsert_tensor_from(self, keys, buffer_ptrs, sizes):
        """batch_upsert_tensor_from(keys, buffer_ptrs, sizes) -> list[int]

        As batch_put_tensor_from, replacing existing objects. Matches upstream
        `batch_upsert_tensor_from`."""
        return self._mc_batch_from(keys, buffer_ptrs, sizes, True)

    # ---- public: tensor parallel (legacy TP) -----------------------------------------------

    def put_tensor_with_tp(self, key, tensor, tp_rank=0, tp_size=1, split_dim=0):
        """put_tensor_with_tp(key, tensor, tp_rank=0, tp_size=1, split_dim=0) -> int

        Splits the full `tensor` into tp_size equal shards along split_dim and stores shard r
        under `<key>_tp_<r>` for every r (tp_rank is not used, as upstream). Each shard is a
        SHARD object with one TP axis and the full shape as global shape. tp_size <= 1: a plain
        put_tensor of `key`. Returns 0 or the first failing shard's code; -600 when
        shape[split_dim] % tp_size != 0 or split_dim is out of range. Matches upstream."""
        return self._mc_put_tp(key, tensor, None, tp_size, split_dim)

    def pub_tensor_with_tp(self, key, tensor, config=None, tp_rank=0, tp_size=1, split_dim=0):
        """pub_tensor_with_tp(key, tensor, config=ReplicateConfig(), tp_rank=0, tp_size=1,
        split_dim=0) -> int

        put_tensor_with_tp with a ReplicateConfig. Matches upstream `pub_tensor_with_tp`."""
        return self._mc_put_tp(key, tensor, config, tp_size, split_dim)

    def batch_put_tensor_with_tp(self, base_keys, tensors_list, tp_rank=0, tp_size=1,
                                 split_dim=0):
        """batch_put_tensor_with_tp(base_keys, tensors_list, tp_rank=0, tp_size=1, split_dim=0)
        -> list[int]

        put_tensor_with_tp per base key: per key 0 or its first failing shard's code."""
        return self._mc_batch(lambda k, t: self._mc_put_tp(k, t, None, tp_size, split_dim),
                              base_keys, tensors_list)

    def batch_pub_tensor_with_tp(self, base_keys, tensors_list, config=None, tp_rank=0,
                                 tp_size=1, split_dim=0):
        """batch_pub_tensor_with_tp(base_keys, tensors_list, config=ReplicateConfig(),
        tp_rank=0, tp_size=1, split_dim=0) -> list[int]

        batch_put_tensor_with_tp with a ReplicateConfig (each base key's group_ids entry
        applies to all its shards)."""
        return self._mc_batch(lambda k, t: self._mc_put_tp(k, t, config, tp_size, split_dim),
                              base_keys, tensors_list, config=config)

    def _mc_put_tp_from(self, key, buffer_ptr, size, tp_size, split_dim):
        if _int(tp_size) is None or _int(split_dim) is None:
            return INVALID_PARAMS
        if tp_size <= 1:
            return self._mc_put_from(key, buffer_ptr, size, None, False)
        got = _serialized_at(buffer_ptr, size)
        if got is None:
            return INVALID_PARAMS
        return self._mc_put_tp(key, got[1], None, tp_size, split_dim)

    def put_tensor_with_tp_from(self, key, buffer_ptr, size, tp_rank=0, tp_size=1, split_dim=0):
        """put_tensor_with_tp_from(key, buffer_ptr, size, tp_rank=0, tp_size=1, split_dim=0)
        -> int

        As put_tensor_with_tp for a full tensor already serialized at buffer_ptr (decoded,
        validated and split; tp_size <= 1: put_tensor_from). Matches upstream."""
        return self._mc_put_tp_from(key, buffer_ptr, size, tp_size, split_dim)

    def batch_put_tensor_with_tp_from(self, base_keys, buffer_ptrs, sizes, tp_rank=0, tp_size=1,
                                      split_dim=0):
        """batch_put_tensor_with_tp_from(base_keys, buffer_ptrs, sizes, tp_rank=0, tp_size=1,
        split_dim=0) -> list[int]

        put_tensor_with_tp_from per base key."""
        return self._mc_batch(lambda k, p, s: self._mc_put_tp_from(k, p, s, tp_size, split_dim),
                              base_keys, buffer_ptrs, sizes)

    @staticmethod
    def _mc_tp_key(key, tp_rank, tp_size):
        if _int(tp_size) is None or _int(tp_rank) is None:
            return None
        if tp_size <= 1:
            return key
        return "%s_tp_%d" % (key, tp_rank)

    def get_tensor_with_tp(self, key, tp_rank=0, tp_size=1, split_dim=0):
        """get_tensor_with_tp(key, tp_rank=0, tp_size=1, split_dim=0) -> torch.Tensor | None

        get_tensor of `<key>_tp_<tp_rank>` (of `key` when tp_size <= 1); split_dim is not
        used. The object is returned as stored under that key, whatever TP size its header
        names (shards written with tp_size=2 and read with tp_size=3 give the TP-2 shard), as
        upstream does; get_tensor_with_parallelism with ReadTarget("shard", ...) checks the
        layout and reshards. Matches upstream."""
        k = self._mc_tp_key(key, tp_rank, tp_size)
        return None if k is None else self._mc_get(k)

    def batch_get_tensor_with_tp(self, base_keys, tp_rank=0, tp_size=1):
        """batch_get_tensor_with_tp(base_keys, tp_rank=0, tp_size=1) -> list

        get_tensor_with_tp per base key (one batch read); None holes. Matches upstream (no
        split_dim)."""
        _key_list(base_keys)
        keys = [self._mc_tp_key(k, tp_rank, tp_size) for k in base_keys]
        if None in keys:
            return [None] * len(keys)
        return self.batch_get_tensor(keys)

    def get_tensor_with_tp_into(self, key, buffer_ptr, size, tp_rank=0, tp_size=1, split_dim=0):
        """get_tensor_with_tp_into(key, buffer_ptr, size, tp_rank=0, tp_size=1, split_dim=0)
        -> torch.Tensor | None

        get_tensor_into of the TP shard key (a view aliasing the buffer). Matches upstream."""
        k = self._mc_tp_key(key, tp_rank, tp_size)
        return None if k is None else self._mc_get_into(k, buffer_ptr, size)

    def batch_get_tensor_with_tp_into(self, base_keys, buffer_ptrs, sizes, tp_rank=0,
                                      tp_size=1):
        """batch_get_tensor_with_tp_into(base_keys, buffer_ptrs, sizes, tp_rank=0, tp_size=1)
        -> list

        batch_get_tensor_into of the TP shard keys (so invalid lists give -600 ints); store not
        set up: a list of None. Matches upstream (no split_dim)."""
        _key_list(base_keys)
        if not self._mc_ready():
            return [None] * _n(base_keys)
        keys = [self._mc_tp_key(k, tp_rank, tp_size) for k in base_keys]
        if None in keys:
            return [INVALID_PARAMS] * len(keys)
        return self.batch_get_tensor_into(keys, buffer_ptrs, sizes)

    # ---- public: unified parallelism ------------------------------------------------------

    def put_tensor_with_parallelism(self, key, tensor, parallelism=None, config=None,
                                    writer_partition=None):
        """put_tensor_with_parallelism(key, tensor, parallelism=None, config=ReplicateConfig(),
        writer_partition=None) -> int

        No parallelism: put_tensor. One TP axis: `tensor` is that shard, stored under
        `<key>_tp_<rank>` (global shape inferred: shape[split_dim] * size) plus the manifest
        `<key>__parallelism_manifest`. Several axes with TP: `tensor` is the full tensor; the
        shard of the TP axis is cut from it and stored under `<key>__<axis>...` (canonical
        order DP, TP, EP, PP, e.g. `w__dp_0of2__tp_1of4_sd0`) plus the manifest. Axes without
        TP: the tensor is stored as given under the suffixed key (no manifest).
        writer_partition (object with rank, size, split_dim): this writer's slice of the full
        tensor under `<key>__writer_<r>of<n>_sd<d>` plus `<key>__writer_manifest`.
        Returns 0 or a negative code: -600 for both parallelism and writer_partition, an axis
        rule broken (docs/tensor-format.md), a non-divisible split, an unsupported tensor.
        Matches upstream."""
        return self._mc_put_parallel(key, tensor, parallelism, config, writer_partition, False)

    def upsert_tensor_with_parallelism(self, key, tensor, parallelism=None, config=None,
                                       writer_partition=None):
        """upsert_tensor_with_parallelism(...) -> int: put_tensor_with_parallelism replacing
        existing objects."""
        return self._mc_put_parallel(key, tensor, parallelism, config, writer_partition, True)

    def _mc_batch_parallel(self, fn, keys, items, pars, config, writers):
        _key_list(keys)
        if pars is not None and writers is not None:
            return [INVALID_PARAMS] * _n(keys)
        n = _n(keys)
        pars = [None] * n if pars is None else pars
        writers = [None] * n if writers is None else writers
        return self._mc_batch(lambda k, it, p, w: fn(k, it, p, w), keys, items, pars, writers,
                              config=config)

    def batch_put_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None,
                                          config=None, writer_partitions=None):
        """batch_put_tensor_with_parallelism(keys, tensors_list, parallelisms=None,
        config=ReplicateConfig(), writer_partitions=None) -> list[int]

        put_tensor_with_parallelism per key (parallelisms / writer_partitions: one per key)."""
        return self._mc_batch_parallel(
            lambda k, t, p, w: self._mc_put_parallel(k, t, p, config, w, False), keys,
            tensors_list, parallelisms, config, writer_partitions)

    def batch_upsert_tensor_with_parallelism(self, keys, tensors_list, parallelisms=None,
                                             config=None, writer_partitions=None):
        """batch_upsert_tensor_with_parallelism(...) -> list[int]: the upsert form."""
        return self._mc_batch_parallel(
            lambda k, t, p, w: self._mc_put_parallel(k, t, p, config, w, True), keys,
            tensors_list, parallelisms, config, writer_partitions)

    def put_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None,
                                         config=None, writer_partition=None):
        """put_tensor_with_parallelism_from(key, buffer_ptr, size, parallelism=None,
        config=ReplicateConfig(), writer_partition=None) -> int

        put_tensor_with_parallelism of a tensor serialized at buffer_ptr (zero-copy when no
        parallelism is given; otherwise decoded, validated and cut)."""
        return self._mc_put_parallel_from(key, buffer_ptr, size, parallelism, config,
                                          writer_partition, False)

    def upsert_tensor_with_parallelism_from(self, key, buffer_ptr, size, parallelism=None,
                                            config=None, writer_partition=None):
        """upsert_tensor_with_parallelism_from(...) -> int: the upsert form."""
        return self._mc_put_parallel_from(key, buffer_ptr, size, parallelism, config,
                                          writer_partition, True)

    def _mc_batch_parallel_from(self, keys, buffer_ptrs, sizes, pars, config, writers, upsert):
        _key_list(keys)
        if _bad_list(keys, buffer_ptrs, sizes):
            return [INVALID_PARAMS] * _n(keys)
        items = list(zip(buffer_ptrs, sizes))
        return self._mc_batch_parallel(
            lambda k, it, p, w: self._mc_put_parallel_from(k, it[0], it[1], p, config, w, upsert),
            keys, items, pars, config, writers)

    def batch_put_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes, parallelisms=None,
                                               config=None, writer_partitions=None):
        """batch_put_tensor_with_parallelism_from(keys, buffer_ptrs, sizes, parallelisms=None,
        config=ReplicateConfig(), writer_partitions=None) -> list[int]"""
        return self._mc_batch_parallel_from(keys, buffer_ptrs, sizes, parallelisms, config,
                                            writer_partitions, False)

    def batch_upsert_tensor_with_parallelism_from(self, keys, buffer_ptrs, sizes,
                                                  parallelisms=None, config=None,
                                                  writer_partitions=None):
        """batch_upsert_tensor_with_parallelism_from(...) -> list[int]: the upsert form."""
        return self._mc_batch_parallel_from(keys, buffer_ptrs, sizes, parallelisms, config,
                                            writer_partitions, True)

    def get_tensor_with_parallelism(self, key, target=None):
        """get_tensor_with_parallelism(key, target=None) -> torch.Tensor | None

        target None / mode "as_stored" (no parallelism): get_tensor(key). "shard" (needs a
        parallelism), in upstream's order: the object under the shard key whose header axes are
        exactly the requested ones; for a single TP axis the writer partition of the same
        split; for a TP axis the shard cut from the whole tensor reassembled as for "full"
        (then, ours only, from the writer partitions); for a single TP axis finally the plain
        object under the legacy key `<key>_tp_<rank>` (`key` for TP size 1) if its header
        names no layout. "full" without parallelism: the writer partitions that
        `<key>__writer_manifest` names, concatenated (no manifest: get_tensor(key)); with a
        parallelism (needs a TP axis): the shards `<key>__parallelism_manifest` counts, else
        for a single TP axis the legacy shards `<key>_tp_<r>` of whatever TP size
        `<key>_tp_0`'s header names (so TP-2 shards are read as TP-3 or TP-1), else every rank
        of the requested TP size; split dim, dtype and global shape checked. None on any miss,
        mismatch or invalid target (as_stored with a parallelism, full without TP axis, an
        unknown mode, a rank/size/id outside a C int). Never a tensor of another shape than
        the one asked for: where upstream's last resort returns a stored shard of another
        layout (another split dim or TP size that cannot be resharded) this returns None.
        Matches upstream otherwise."""
        return self._mc_get_parallel(key, target)

    def batch_get_tensor_with_parallelism(self, keys, targets=None):
        """batch_get_tensor_with_parallelism(keys, targets=None) -> list

        get_tensor_with_parallelism per key (targets: one per key or None); None holes."""
        _key_list(keys)
        targets = [None] * _n(keys) if targets is None else targets
        if _bad_list(keys, targets):
            return [None] * _n(keys)
        return [self._mc_get_parallel(k, t) for k, t in zip(keys, targets)]

    def get_tensor_with_parallelism_into(self, key, buffer_ptr, size, target=None):
        """get_tensor_with_parallelism_into(key, buffer_ptr, size, target=None)
        -> torch.Tensor | None

        As get_tensor_with_parallelism, into registered memory: the result is a view aliasing
        the buffer from offset 304. A reassembled tensor is written there as a FULL object
        (header + data) after the buffer is proven registered."""
        return self._mc_get_parallel_into(key, buffer_ptr, size, target)

    def batch_get_tensor_with_parallelism_into(self, keys, buffer_ptrs, sizes, targets=None):
        """batch_get_tensor_with_parallelism_into(keys, buffer_ptrs, sizes, targets=None)
        -> list: get_tensor_with_parallelism_into per key; None holes."""
        _key_list(keys)
        targets = [None] * _n(keys) if targets is None else targets
        if _bad_list(keys, buffer_ptrs, sizes, targets):
            return [None] * _n(keys)
        return [self._mc_get_parallel_into(k, p, s, t)
                for k, p, s, t in zip(keys, buffer_ptrs, sizes, targets)]

    # ---- public: safetensors files ---------------------------------------------------------

    def save_tensor_to_safetensor(self, key, file_name=None):
        """save_tensor_to_safetensor(key, file_name=None) -> int

        Writes the tensor stored under `key` to a safetensors file (one entry named `key`;
        file_name defaults to the key). Returns 0, -1100 when the key holds no valid tensor,
        -600 when the store is not set up or the file cannot be written. file_name (and key
        when it names the file) must be a str, bytes or os.PathLike path: anything else raises
        TypeError before any file is opened (an int would be taken by open() as a descriptor).
        Matches upstream (its std::string conversion raises too; os.PathLike is ours)."""
        path = _file_path(key if file_name is None else file_name)
        if not self._mc_ready():
            return INVALID_PARAMS
        t = self._mc_get(key)
        if t is None:
            return FILE_NOT_FOUND
        try:
            _write_safetensors(path, key if isinstance(key, str) else key.decode(), t)
        except (OSError, TypeError, ValueError) as e:
            _log.error("save_tensor_to_safetensor %r: %s", path, e)
            return INVALID_PARAMS
        return 0

    def load_tensor_from_safetensor(self, key=None, file_name=None):
        """load_tensor_from_safetensor(key=None, file_name) -> torch.Tensor | None

        Reads entry `key` of the safetensors file `file_name` (its first entry when `key` is
        None or not in the file), put_tensor-s it under `key` (default: file_name) and returns
        it. None when the file is missing or malformed or the put fails. file_name must be a
        str, bytes or os.PathLike path, else TypeError (an int is never opened as a
        descriptor). Matches upstream (std::string file_name; os.PathLike is ours)."""
        if file_name is None:
            return None
        path = _file_path(file_name)
        if not self._mc_ready():
            return None
        try:
            got = _read_safetensors(path, key)
        except (OSError, ValueError) as e:  # ValueError: a NUL byte in the path
            _log.error("load_tensor_from_safetensor %r: %s", file_name, e)
            return None
        if got is None:
            return None
        rc = self._mc_put_full(path if key is None else key, got[1], None, False)
        return got[1] if rc == 0 else None
