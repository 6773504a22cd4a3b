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

Memory safety: region memory is owned by a ``mooncake.store.BufferHandle``; every lease's
memoryview keeps it alive, so a lease used after ``close()`` touches valid (but unregistered)
memory rather than freed memory. Leases are not released by garbage collection: release them.

Thread-safe: one lock guards the free lists; ``acquire`` may block while other threads release.
"""
import threading
import time

from mooncake import _store

__all__ = ["BufferLease", "BufferPool", "BufferPoolExhaustedError", "RegisteredBufferPool"]

KiB = 1 << 10
MiB = 1 << 20
_GRANULE = 64  # bytes: every lease starts cache-line aligned


def _round_up(value, unit):
    return (value + unit - 1) // unit * unit


class BufferPoolExhaustedError(RuntimeError):
    """acquire() could not find room (block=False, timeout, or a size that can never fit)."""


class BufferLease:
    """A range of registered memory: ``.ptr`` (int address), ``.size`` (bytes asked for),
    ``.buffer`` (writable memoryview of exactly ``size`` bytes). ``release()`` returns it to the
    pool (idempotent; also on leaving a ``with`` block)."""

    __slots__ = ("ptr", "size", "buffer", "_pool", "_region", "_offset", "_reserved", "_released")

    def __init__(self, pool, region, offset, size, reserved):
        self._pool = pool
        self._region = region
        self._offset = offset
        self._reserved = reserved
        self._released = False
        self.ptr = region.ptr + offset
        self.size = size
        self.buffer = memoryview(region.handle)[offset:offset + size]

    def release(self):
        """Gives the range back to the pool. Idempotent; a no-op after the pool is closed."""
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
        return f"<BufferLease ptr={self.ptr:#x} size={self.size} {state}>"


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
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"BufferPool: {name} must be an int >= 0, got {value!r}")
        if alignment == 0:
            raise ValueError("BufferPool: alignment must be > 0")
        if max_regions is not None and (not isinstance(max_regions, int) or max_regions < 1):
            raise ValueError(f"BufferPool: max_regions must be None or >= 1, got {max_regions!r}")
        if max_size_class is not None and (not isinstance(max_size_class, int)
                                           or max_size_class < 1):
            raise ValueError("BufferPool: max_size_class must be None or an int >= 1")
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
        self._closed = False
        self._cond = threading.Condition()
        if prewarm_count:
            self.prewarm(prewarm_size if prewarm_size is not None else min_size_class,
                         prewarm_count)

    # ---- public ---------------------------------------------------------------------------

    def acquire(self, size, block=None, timeout=None):
        """A lease of `size` bytes (int > 0).

        block: wait for releases when the pool is full (default: block_on_exhaustion).
        timeout: seconds to wait at most (default: default_timeout; None = forever).
        Raises ValueError for a size the pool can never hold (> max_bytes or max_size_class),
        BufferPoolExhaustedError when full and not blocking, on timeout, or when nothing is
        leased and the size still does not fit; RuntimeError when closed or when registering
        a new region with the store fails.
        """
        if not isinstance(size, int) or isinstance(size, bool):
            raise TypeError(f"size must be an int, not {type(size).__name__}")
        if size <= 0:
            raise ValueError(f"size must be > 0, got {size}")
        if self._max_bytes and size > self._max_bytes:
            raise ValueError(f"lease of {size} bytes is larger than max_bytes {self._max_bytes}")
        if self._max_size_class is not None and size > self._max_size_class:
            raise ValueError(
                f"lease of {size} bytes is larger than max_size_class {self._max_size_class}")
        block = self._block if block is None else bool(block)
        timeout = self._default_timeout if timeout is None else timeout
        reserve = _round_up(max(size, self._min_size_class), _GRANULE)
        if self._max_bytes and reserve > self._max_bytes:
            reserve = size
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
        """Unregisters every region. Idempotent. Live leases stay readable and writable but are
        no longer registered, so the store's zero-copy calls refuse them (-600)."""
        with self._cond:
            if self._closed:
                return
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
            lease._released = True
            if self._closed:
                return
            lease._region.give(lease._offset, lease._reserved)
            self._leased -= lease._reserved
            self._cond.notify_all()


RegisteredBufferPool = BufferPool
