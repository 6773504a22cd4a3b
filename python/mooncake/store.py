"""mooncake.store — the Mooncake Store client API (upstream-compatible).

Everything is implemented in the C extension `mooncake._store` (MooncakeDistributedStore,
ReplicateConfig, the descriptors, BufferHandle, MooncakeHostMemAllocator, the enums); this module
re-exports it under the name users and tools import (store_kv_bench.py:
MOONCAKE_STORE_MODULE=mooncake.store) and adds the pure-Python BufferPool.
"""
from mooncake._store import (  # noqa: F401  (re-exports)
    BufferHandle,
    Descriptor,
    DiskDescriptor,
    MemoryDescriptor,
    MooncakeDistributedStore,
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
    "RegisteredBufferPool",
    "ReplicaDescriptor",
    "ReplicaStatus",
    "ReplicateConfig",
    "SoftPinAction",
]
