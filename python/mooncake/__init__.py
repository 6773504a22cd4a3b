"""mooncake — Python package of mooncake-c, a C implementation of the Mooncake Store.

The store client is `mooncake.store` (MooncakeDistributedStore, ReplicateConfig, ...). As in
upstream Mooncake, the package itself re-exports the buffer pool used for zero-copy I/O.
"""
from mooncake.buffer_pool import (
    BufferLease,
    BufferPool,
    BufferPoolExhaustedError,
    RegisteredBufferPool,
)

__all__ = ["BufferLease", "BufferPool", "BufferPoolExhaustedError", "RegisteredBufferPool"]
