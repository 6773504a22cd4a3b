"""mooncake.store — the Mooncake Store client API (upstream-compatible).

The store is implemented in the C extension `mooncake._store` (MooncakeDistributedStore,
ReplicateConfig, the descriptors, BufferHandle, MooncakeHostMemAllocator, the enums); this module
re-exports it under the name users and tools import (store_kv_bench.py:
MOONCAKE_STORE_MODULE=mooncake.store) and adds the pure-Python BufferPool and the tensor API
(`mooncake.tensor`: MooncakeDistributedStore here is a Python subclass of the C type with
put_tensor, get_tensor, ... and the ParallelAxis / TensorParallelism / ReadTarget classes).
"""
from mooncake._store import MooncakeDistributedStore as _CStore
from mooncake._store import (  # noqa: F401  (re-exports)
    BufferHandle,
    Descriptor,
    DiskDescriptor,
    MemoryDescriptor,
    MooncakeHostMemAllocator,
    ObjectDataType,
    ReplicaDescriptor,
    ReplicaStatus,
    ReplicateConfig,
    SoftPinAction,
    __version__,
)
from mooncake.buffer_pool import (  # noqa: F401
    BufferLease,
    BufferPool,
    BufferPoolExhaustedError,
    RegisteredBufferPool,
)
from mooncake._upstream_names import *  # noqa: F401,F403  (TaskType, TaskStatus, bind_to_numa_node)
from mooncake._upstream_names import __all__ as _upstream_all
from mooncake.tensor import (  # noqa: F401
    ParallelAxis,
    ReadTarget,
    TensorParallelism,
    TensorStoreMixin,
    _deserialize_tensor,
    _serialize_tensor,
    _tensor_metadata_size,
)


class MooncakeDistributedStore(TensorStoreMixin, _CStore):
    __slots__ = ()
    __doc__ = _CStore.__doc__ + (
        "\n\nTensor methods (put_tensor, get_tensor, their batch, _into, _from, _with_tp and\n"
        "_with_parallelism forms, safetensors files) store upstream's tensor format; see\n"
        "mooncake.tensor and docs/tensor-format.md.")


__all__ = [
    "BufferHandle",
    "BufferLease",
    "BufferPool",
    "BufferPoolExhaustedError",
    "Descriptor",
    "DiskDescriptor",
    "MemoryDescriptor",
    "MooncakeDistributedStore",
    "MooncakeHostMemAllocator",
    "ObjectDataType",
    "ParallelAxis",
    "ReadTarget",
    "RegisteredBufferPool",
    "ReplicaDescriptor",
    "ReplicaStatus",
    "ReplicateConfig",
    "SoftPinAction",
    "TensorParallelism",
] + list(_upstream_all)
