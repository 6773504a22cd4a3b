"""mooncake.buffer_pool — registered memory for the zero-copy store calls, handed out in leases.

A BufferPool owns a few large *regions* of host memory, each registered with one store
(``store.register_buffer``), and sub-allocates *leases* from them with a first-fit free list.
A lease is an address range (``.ptr``, ``.size``, ``.buffer`` a writable memoryview) that
``put_from`` / ``get_into`` / ``batch_*`` accept until it is released::

    pool = BufferPool(store, max_bytes=64 << 20, max_regions=1)
    with pool.acquire(4096) as lease:
        lease.buffer[:5] = b"hello"
        store.put_from("k", lease.ptr, 5)
    pool.close()

Regions are created lazily: the first acquire maps one of ``max_bytes // max_regions`` bytes (or
just enough, rounded up to ``alignment``, when there is no budget). When no free extent fits, a
new region is added while ``max_regions`` and ``max_bytes`` allow; an empty region may be dropped
to make room for a larger one. Otherwise ``acquire`` waits for a release (``block=True``, up to
``timeout`` seconds) or raises BufferPoolExhaustedError (``block=False``, as store_kv_bench.py
expects).

Upstream's rules (mooncake-integration/store/buffer_pool.cpp), all RuntimeError: the store must
be set up; min_size_class and alignment positive, alignment a power of two >= 8; a size above
max_bytes is refused; ``close()`` with live leases and ``release()`` while a memoryview from
``.buffer`` is alive are refused; a released lease's ``.ptr`` / ``.buffer`` raise. Sizes are
size_t (negative or non-int: TypeError); size 0 gives an empty lease; sizes above
max_size_class are served.

Memory safety: region memory is owned by a ``mooncake.store.BufferHandle``; every memoryview a
lease hands out keeps it alive. Leases are not released by garbage collection: release them.
Differs from upstream: leases come from regions the pool maps and registers itself (upstream
sub-allocates the store's local buffer); max_bytes 0 means no limit (upstream: twice the local
buffer).

Thread-safe: one lock guards the free lists; ``acquire`` may block while other threads release.
"""
import ctypes
import threading
import time
import weakref

from mooncake import _store

__all__ = ["BufferLease", "BufferPool", "BufferPoolExhaustedError", "RegisteredBufferPool"]

KiB = 1 << 10
MiB = 1 << 20
_GRANULE = 64  # bytes: every lease starts cache-line aligned


def _round_up(value, unit):
    return (value + unit - 1) // unit * unit


def _check_size_t(value, name):
    """An int >= 0 (upstream's size_t arguments): TypeError otherwise, as pybind11 raises."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise TypeError(f"BufferPool: {name} must be an int >= 0, got {value!r}")


class BufferPoolExhaustedError(RuntimeError):
    """acquire() could not find room (block=False, timeout, or a size that can never fit)."""


class BufferLease:
    """A range of registered memory: ``.ptr`` (int address), ``.size`` (bytes asked for),
    ``.buffer`` (a new writable memoryview of exactly ``size`` bytes per access, as upstream).
    ``release()`` returns it to the pool; idempotent; also on leaving a ``with`` block. As
    upstream: release() raises RuntimeError while a memoryview from ``.buffer`` (or a slice of
    one) is alive, and ``.ptr`` / ``.buffer`` raise RuntimeError once released."""

    __slots__ = ("size", "_ptr", "_pool", "_region", "_offset", "_reserved", "_released",
                 "_views", "__weakref__")

    def __init__(self, pool, region, offset, size, reserved):
        self._pool = pool
        self._region = region
        self._offset = offset
        self._reserved = reserved
        self._released = False
        self._ptr = region.ptr + offset
        self._views = []  # weak references to the exporters behind .buffer views
        self.size = size

    @property
    def ptr(self):
        if self._released:
            raise RuntimeError("buffer lease is closed")
        return self._ptr

    @property
    def buffer(self):
        """A writable memoryview (format "B") of the lease's bytes. Keeps the region's memory
        alive while it (or any slice of it) lives."""
        if self._released:
            raise RuntimeError("buffer lease is closed")
        exporter = (ctypes.c_ubyte * self.size).from_buffer(self._region.handle, self._offset)
        self._views = [v for v in self._views if v() is not None]
        self._views.append(weakref.ref(exporter))
        return memoryview(exporter).cast("B")

    def _exported(self):
        return any(v() is not None for v in self._views)

    def release(self):
        """Gives the range back to the pool. Idempotent. RuntimeError while views from .buffer
        are alive (release them first: ``del view`` or ``view.release()``)."""
        self._pool._release(self)

    @property
    def released(self):
        return self._released

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False

    def __len__(self):
        return self.size

    def __repr__(self):
        state = "released" if self._released else "live"
        return f"<BufferLease ptr={self._ptr:#x} size={self.size} {state}>"


class _Region:
    """One registered mapping and its free extents, kept sorted by offset and coalesced."""

    __slots__ = ("handle", "ptr", "size", "free", "leases")

    def __init__(self, handle):
        self.handle = handle
        self.ptr = handle.ptr()
        self.size = handle.size()
        self.free = [(0, self.size)]  # (offset, length)
        self.leases = 0

    def take(self, length):
        """First fit: the offset of `length` free bytes, or None."""
        for i, (off, free_len) in enumerate(self.free):
            if free_len >= length:
                if free_len == length:
                    del self.free[i]
                else:
                    self.free[i] = (off + length, free_len - length)
                self.leases += 1
                return off
        return None

    def give(self, offset, length):
        """Returns [offset, offset+length) and merges it with its free neighbours."""
        free = self.free
        i = 0
        while i < len(free) and free[i][0] < offset:
            i += 1
        free.insert(i, (offset, length))
        if i + 1 < len(free) and offset + length == free[i + 1][0]:
            free[i] = (offset, length + free[i + 1][1])
            del free[i + 1]
        if i > 0 and free[i - 1][0] + free[i - 1][1] == offset:
            free[i - 1] = (free[i - 1][0], free[i - 1][1] + free[i][1])
            del free[i]
        self.leases -= 1


class BufferPool:
    """Registered memory for zero-copy calls, leased out in ranges.

    store: the MooncakeDistributedStore (set up) the regions are registered with.
    max_bytes: total bytes the pool may register; 0 = no limit.
    min_size_class: smallest reservation per lease in bytes (a smaller lease still reserves it,
        unless max_bytes is smaller).
    max_size_class: largest lease in bytes (None = max_bytes or no limit); larger -> ValueError.
    alignment: region sizes are rounded up to this many bytes (within max_bytes).
    block_on_exhaustion: acquire()'s default for `block`.
    default_timeout: acquire()'s default timeout in seconds (None = wait forever).
    max_regions: most regions at once (None = no limit).
    prewarm_size, prewarm_count: if count > 0, prewarm(size, count) right away.
    """

    def __init__(self, store, max_bytes=0, min_size_class=64 * KiB, max_size_class=None,
                 alignment=8 * MiB, block_on_exhaustion=True, default_timeout=None,
                 max_regions=None, prewarm_size=None, prewarm_count=0):
        for name, value in (("max_bytes", max_bytes), ("min_size_class", min_size_class),
                            ("alignment", alignment), ("prewarm_count", prewarm_count)):
            _check_size_t(value, name)
        if max_size_class is not None:
            _check_size_t(max_size_class, "max_size_class")
        if max_regions is not None:
            _check_size_t(max_regions, "max_regions")
        # as upstream (RuntimeError, checked in this order)
        if store is None or not store.get_hostname():
            raise RuntimeError("MooncakeDistributedStore is not initialized")
        if min_size_class == 0 or alignment == 0:
            raise RuntimeError("min_size_class and alignment must be positive")
        if alignment < 8 or alignment & (alignment - 1):
            raise RuntimeError("alignment must be a power of two and at least sizeof(void*)")
        if max_regions == 0:
            raise RuntimeError("max_regions must be positive")
        self._store = store
        self._max_bytes = max_bytes
        self._min_size_class = min_size_class
        self._max_size_class = max_size_class
        self._alignment = alignment
        self._block = bool(block_on_exhaustion)
        self._default_timeout = default_timeout
        self._max_regions = max_regions
        self._regions = []
        self._registered = 0  # bytes in regions
        self._leased = 0  # bytes reserved by live leases
        self._live = 0  # live leases
        self._closed = False
        self._cond = threading.Condition()
        if prewarm_count:
            self.prewarm(prewarm_size if prewarm_size is not None else min_size_class,
                         prewarm_count)

    # ---- public ---------------------------------------------------------------------------

    def acquire(self, size, block=None, timeout=None):
        """A lease of `size` bytes (int >= 0; 0 gives an empty lease, as upstream).

        block: wait for releases when the pool is full (default: block_on_exhaustion).
        timeout: seconds to wait at most (default: default_timeout; None = forever).
        As upstream: TypeError for a size that is not a non-negative int; RuntimeError for a
        size above max_bytes ("requested buffer size exceeds pool capacity"), a negative
        timeout, a closed pool, or a failed registration of a new region;
        BufferPoolExhaustedError (a RuntimeError) when full and not blocking, on timeout, or
        when nothing is leased and the size still does not fit. A size above max_size_class
        is served (upstream counts it as an oversize allocation).
        """
        _check_size_t(size, "size")
        if self._max_bytes and size > self._max_bytes:
            raise RuntimeError("requested buffer size exceeds pool capacity")
        block = self._block if block is None else bool(block)
        timeout = self._default_timeout if timeout is None else timeout
        if timeout is not None and timeout < 0:
            raise RuntimeError("timeout must be non-negative")
        reserve = _round_up(max(size, self._min_size_class, 1), _GRANULE)
        if self._max_bytes and reserve > self._max_bytes:
            reserve = max(size, 1)
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._closed:
                    raise RuntimeError("BufferPool is closed")
                lease = self._try_acquire(size, reserve)
                if lease is not None:
                    return lease
                if not block:
                    raise BufferPoolExhaustedError(self._exhausted(size))
                if self._leased == 0:
                    raise BufferPoolExhaustedError(self._exhausted(size) + " (nothing to wait for)")
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise BufferPoolExhaustedError(self._exhausted(size) + " (timed out)")
                self._cond.wait(remaining)

    def prewarm(self, size, count):
        """Makes sure `count` leases of `size` bytes fit without registering more memory."""
        leases = []
        try:
            for _ in range(count):
                leases.append(self.acquire(size, block=False))
        finally:
            for lease in leases:
                lease.release()

    def close(self):
        """Unregisters every region. Idempotent. RuntimeError while leases are live (as
        upstream; the pool stays open): release them first."""
        with self._cond:
            if self._closed:
                return
            if self._live:
                raise RuntimeError("cannot close buffer pool with active leases")
            self._closed = True
            regions, self._regions = self._regions, []
            self._registered = 0
            self._cond.notify_all()
        for region in regions:
            self._store.unregister_buffer(region.ptr)

    @property
    def closed(self):
        return self._closed

    @property
    def registered_bytes(self):
        """Bytes currently registered with the store."""
        return self._registered

    @property
    def leased_bytes(self):
        """Bytes reserved by live leases (sizes rounded up to the lease granularity)."""
        return self._leased

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    # ---- internals (called with self._cond held) ------------------------------------------

    def _exhausted(self, size):
        return (f"BufferPool exhausted: no room for {size} bytes ({self._leased} of "
                f"{self._registered} registered bytes leased, {len(self._regions)} regions, "
                f"max_bytes={self._max_bytes}, max_regions={self._max_regions})")

    def _try_acquire(self, size, reserve):
        for region in self._regions:
            offset = region.take(reserve)
            if offset is not None:
                return self._lease(region, offset, size, reserve)
        region = self._add_region(reserve)
        if region is None:
            return None
        return self._lease(region, region.take(reserve), size, reserve)

    def _lease(self, region, offset, size, reserve):
        self._leased += reserve
        self._live += 1
        return BufferLease(self, region, offset, size, reserve)

    def _region_size(self, reserve):
        if self._max_bytes and self._max_regions:
            target = self._max_bytes // self._max_regions
        else:
            target = reserve
        size = _round_up(max(reserve, target), self._alignment)
        if self._max_bytes:
            size = min(size, self._max_bytes - self._registered)
        return size

    def _add_region(self, reserve):
        """A new registered region with room for `reserve`, dropping empty regions if that is
        what it takes; None when limits forbid it."""
        while True:
            room = self._max_regions is None or len(self._regions) < self._max_regions
            size = self._region_size(reserve)
            if room and size >= reserve:
                break
            empty = [r for r in self._regions if r.leases == 0]
            if not empty:
                return None
            self._drop_region(min(empty, key=lambda r: r.size))
        handle = _store._alloc_host_buffer(size)
        rc = self._store.register_buffer(handle.ptr(), size)
        if rc != 0:
            raise RuntimeError(f"BufferPool: register_buffer of {size} bytes failed ({rc})")
        region = _Region(handle)
        self._regions.append(region)
        self._registered += size
        return region

    def _drop_region(self, region):
        self._regions.remove(region)
        self._registered -= region.size
        self._store.unregister_buffer(region.ptr)

    def _release(self, lease):
        with self._cond:
            if lease._released:
                return
            if lease._exported():
                raise RuntimeError("cannot release buffer while exported views exist")
            lease._released = True
            self._live -= 1
            lease._region.give(lease._offset, lease._reserved)
            self._leased -= lease._reserved
            self._cond.notify_all()


RegisteredBufferPool = BufferPool
