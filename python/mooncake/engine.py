"""mooncake.engine — upstream Mooncake's Python Transfer Engine on mooncake-c.

`TransferEngine` moves bytes between registered memory of processes (tcp, same-host shared
memory, rdma over UCX), with upstream's methods and int return conventions; see
`help(TransferEngine)` and python/README.md for where it differs from upstream.

Module contents (match upstream `mooncake.engine`):
  TransferEngine, InnerTransferEngine (from TransferEngine.get_engine(), for
  MooncakeDistributedStore.setup(..., engine=...)), TransferOpcode (IntEnum Read=0, Write=1;
  Read/Write also at module level and as TransferEngine.TransferOpcode), TransferNotify,
  SUPPORT_EFA / SUPPORT_HIP / SUPPORT_MNNVL / SUPPORT_MUSA / SUPPORT_INTRA_NVLINK / SUPPORT_CUDA
  (all False: this build has none of that hardware support).

The C part lives in the same library as `mooncake._store` (so a store and an engine share one
Transfer Engine implementation); it is loaded from there as `mooncake._engine`.
"""
import importlib.machinery
import importlib.util
import sys

from mooncake import _store


def _load_engine():
    name = "mooncake._engine"
    if name in sys.modules:
        return sys.modules[name]
    # One shared library, two modules: CPython's documented way is a custom loader
    # (PyInit__engine is exported next to PyInit__store).
    loader = importlib.machinery.ExtensionFileLoader(name, _store.__file__)
    spec = importlib.util.spec_from_file_location(name, _store.__file__, loader=loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    sys.modules[name] = mod
    return mod


_engine = _load_engine()

TransferEngine = _engine.TransferEngine
InnerTransferEngine = _engine.InnerTransferEngine
TransferOpcode = _engine.TransferOpcode
Read = _engine.Read
Write = _engine.Write
SUPPORT_EFA = _engine.SUPPORT_EFA
SUPPORT_HIP = _engine.SUPPORT_HIP
SUPPORT_MNNVL = _engine.SUPPORT_MNNVL
SUPPORT_MUSA = _engine.SUPPORT_MUSA
SUPPORT_INTRA_NVLINK = _engine.SUPPORT_INTRA_NVLINK
SUPPORT_CUDA = _engine.SUPPORT_CUDA


class TransferNotify:
    """TransferNotify() / TransferNotify(name, msg): a notification sent with a transfer
    (matches upstream's class: read-write str attributes `name` and `msg`).

    mooncake-c's Transfer Engine has no notify channel: passing one to transfer_sync /
    batch_transfer_sync returns -1 and get_notifies() is always []."""

    __slots__ = ("_name", "_msg")

    def __init__(self, name="", msg=""):
        self.name = name
        self.msg = msg

    @property
    def name(self):
        return self._name

    @name.setter
    def name(self, value):
        if not isinstance(value, str):
            raise TypeError(f"name must be str, not {type(value).__name__}")
        self._name = value

    @property
    def msg(self):
        return self._msg

    @msg.setter
    def msg(self, value):
        if not isinstance(value, str):
            raise TypeError(f"msg must be str, not {type(value).__name__}")
        self._msg = value

    def __repr__(self):
        return f"TransferNotify(name={self._name!r}, msg={self._msg!r})"


__all__ = [
    "TransferEngine", "InnerTransferEngine", "TransferOpcode", "TransferNotify", "Read", "Write",
    "SUPPORT_EFA", "SUPPORT_HIP", "SUPPORT_MNNVL", "SUPPORT_MUSA", "SUPPORT_INTRA_NVLINK",
    "SUPPORT_CUDA",
]
