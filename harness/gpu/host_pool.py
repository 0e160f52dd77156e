"""Host memory that downloads land in, used again (issue 37).

A download into memory numpy has just allocated pays for the pages as the copy first touches
them: on the H100's host a 64 MB output came back at 2.6-2.8 GB/s into fresh memory, 12.4-12.7
GB/s into memory touched before and 53-55 GB/s into page-locked memory
(reports/h100/d2h-probe-3759deb.log, experiments/d2h_probe.py). A default run reads back every
size's outputs (twice at the timed size), its references and its kept repetitions.

:func:`array` hands out an array over a block of host memory kept here, back in the pool when
nothing refers to the array any more (not its views, not arrays made from it by
``np.asarray``); the pool keeps at most :data:`KEPT_BYTES` of blocks nobody uses. The blocks
are not page-locked: locked memory belongs to a context, and a block freed while locked, or
locked by a context that is gone, is a copy into pages the driver no longer tracks; plain
memory is numpy's, whatever happens to the contexts."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Sequence

import numpy as np

MIN_BYTES = 1 << 20
"""Smaller arrays are plain numpy ones (their pages cost little)."""
KEPT_BYTES = 2 << 30
"""The most host memory the pool keeps in blocks that no array uses."""


class _Block:
    """One block of host memory (its pages are made by the first copy into it)."""

    def __init__(self, nbytes: int):
        self.memory = np.empty(nbytes, dtype=np.uint8)
        self.nbytes = nbytes


class _Lease:
    """What an array handed out refers to (its ``base``): while it lives, so does its block's
    use; when it goes, the block goes back to the pool."""

    def __init__(self, pool: HostPool, block: _Block, shape: tuple[int, ...], dtype: np.dtype):
        self.__array_interface__ = {"data": (block.memory.ctypes.data, False), "shape": shape,
                                    "typestr": dtype.str, "version": 3}
        self._keep = block.memory  # the memory lives while the lease does, pool or not
        weakref.finalize(self, pool._returned, block)


class HostPool:
    """Blocks of host memory by size, handed out as arrays (:meth:`array`)."""

    def __init__(self, kept_bytes: int = KEPT_BYTES, min_bytes: int = MIN_BYTES):
        self.kept_bytes, self.min_bytes = kept_bytes, min_bytes
        self._free: dict[int, list[_Block]] = {}
        self._free_bytes = 0
        self._lock = threading.Lock()
        self.made = 0
        """Blocks made so far (tests: how often a block was used again)."""

    def array(self, shape: Sequence[int], dtype) -> np.ndarray:
        """An uninitialised C-contiguous array of ``shape`` and ``dtype``: over a block of this
        pool where it is large enough, else a plain numpy one."""
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in shape)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if nbytes < self.min_bytes:
            return np.empty(shape, dtype=dtype)
        with self._lock:
            free = self._free.get(nbytes)
            block = free.pop() if free else None
            if block is not None:
                self._free_bytes -= nbytes
        if block is None:
            block = _Block(nbytes)
            self.made += 1
        return np.asarray(_Lease(self, block, shape, dtype))

    def _returned(self, block: _Block) -> None:
        """A block nobody uses any more (from a finalizer, on any thread): kept while the pool
        holds less than ``kept_bytes`` of them, else left to numpy."""
        with self._lock:
            if self._free_bytes + block.nbytes <= self.kept_bytes:
                self._free.setdefault(block.nbytes, []).append(block)
                self._free_bytes += block.nbytes

    def clear(self) -> None:
        """Let go of every block nobody uses."""
        with self._lock:
            self._free.clear()
            self._free_bytes = 0


POOL = HostPool()
"""The process's pool (Buffer.download)."""


def array(shape: Sequence[int], dtype) -> np.ndarray:
    """:meth:`HostPool.array` of the process's pool."""
    return POOL.array(shape, dtype)
