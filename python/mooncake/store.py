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


class QueryTaskResponse:
    """What query_task answers (upstream `QueryTaskResponse`): read-only id (str), type
    (TaskType), status (TaskStatus), created_at_ms_epoch, last_updated_at_ms_epoch (int, ms since
    1970), assigned_client (str, the executing client's id) and message (str, why it failed)."""

    __slots__ = ("_f",)
    _names = ("id", "type", "status", "created_at_ms_epoch", "last_updated_at_ms_epoch",
              "assigned_client", "message")

    def __init__(self, fields=("", 0, 0, 0, 0, "", "")):
        object.__setattr__(self, "_f", tuple(fields))

    def __setattr__(self, name, value):
        raise AttributeError("QueryTaskResponse is read-only")

    id = property(lambda self: self._f[0])
    type = property(lambda self: TaskType(self._f[1]))  # noqa: F405
    status = property(lambda self: TaskStatus(self._f[2]))  # noqa: F405
    created_at_ms_epoch = property(lambda self: self._f[3])
    last_updated_at_ms_epoch = property(lambda self: self._f[4])
    assigned_client = property(lambda self: self._f[5])
    message = property(lambda self: self._f[6])

    def __repr__(self):
        f = self._f
        return ('QueryTaskResponse(id=%s, type=%d, status=%d, created_at=%d, last_updated_at=%d, '
                'assigned_client=%s, message="%s")' % (f[0], f[1], f[2], f[3], f[4], f[5], f[6]))


class MooncakeDistributedStore(TensorStoreMixin, _CStore):
    __slots__ = ()

    def query_task(self, task_id):
        """query_task(task_id) -> tuple[QueryTaskResponse | None, int]

        The state of a copy/move task: (QueryTaskResponse, 0), or (None, code): -1400 unknown
        task (or pruned past --max_total_finished_tasks), -600 not a task id. task_id is the
        text UUID create_copy_task/create_move_task returned, or upstream's (high, low) pair."""
        fields, rc = self._query_task(task_id)
        return (QueryTaskResponse(fields) if fields is not None else None), rc

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
    "QueryTaskResponse",
    "ReadTarget",
    "RegisteredBufferPool",
    "ReplicaDescriptor",
    "ReplicaStatus",
    "ReplicateConfig",
    "SoftPinAction",
    "TensorParallelism",
] + list(_upstream_all)
