"""mooncake — Python package of mooncake-c, a C implementation of the Mooncake Store.

The store client is `mooncake.store` (MooncakeDistributedStore, ReplicateConfig, ...). As in
upstream Mooncake, the package itself re-exports the buffer pool used for zero-copy I/O, and is
extendable across directories (pkgutil.extend_path), so modules installed elsewhere on sys.path
under `mooncake/` are found too. Upstream's other modules: mooncake.http_metadata_server,
mooncake.mooncake_config, mooncake.mooncake_store_service, mooncake.async_store and the
console-script shims mooncake.cli, mooncake.cli_client, mooncake.cli_bench (python/README.md).
"""
from pkgutil import extend_path

from mooncake.buffer_pool import (
    BufferLease,
    BufferPool,
    BufferPoolExhaustedError,
    RegisteredBufferPool,
)

__path__ = extend_path(__path__, __name__)

__all__ = ["BufferLease", "BufferPool", "BufferPoolExhaustedError", "RegisteredBufferPool"]
