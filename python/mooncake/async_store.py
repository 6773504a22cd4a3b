"""mooncake.async_store — upstream's MooncakeDistributedStoreAsync: asyncio forms of every method.

``store.async_<name>(...)`` is a coroutine that runs ``store.<name>(...)`` in the running event
loop's default executor (a thread pool; every store call releases the GIL, so calls overlap) and
returns its result. Any other unknown attribute raises AttributeError, as does ``async_<name>``
when ``<name>`` is not a method. The coroutine function is made once per name and kept on the
instance. Matches upstream's ``mooncake-integration/store/async_store.py``.

    store = MooncakeDistributedStoreAsync()
    store.setup(...)
    await store.async_put("k", b"v")
    value = await store.async_get("k")
"""
import asyncio
import functools

from mooncake.store import MooncakeDistributedStore

__all__ = ["MooncakeDistributedStoreAsync"]

_PREFIX = "async_"


class MooncakeDistributedStoreAsync(MooncakeDistributedStore):
    """A MooncakeDistributedStore with ``async_<name>`` coroutine forms of its methods."""

    def __getattr__(self, name):
        # Only called for attributes not found normally.
        if not name.startswith(_PREFIX):
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")
        sync_name = name[len(_PREFIX):]
        try:
            method = getattr(self, sync_name)
        except AttributeError:
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}' "
                                 f"(nor '{sync_name}')") from None
        if not callable(method):
            raise AttributeError(f"'{sync_name}' is not callable")
        coroutine = self._make_async(method)
        setattr(self, name, coroutine)
        return coroutine

    @staticmethod
    def _make_async(method):
        @functools.wraps(method)
        async def run(*args, **kwargs):
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, functools.partial(method, *args, **kwargs))

        return run
