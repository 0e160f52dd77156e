"""Device memory: a Buffer, its copies in and out ordered on a stream, and its fills."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from harness.errors import HarnessError
from harness.gpu import host_pool
from harness.gpu.check import check
from harness.gpu.context import context_resource
from harness.gpu.devices import cu

if TYPE_CHECKING:
    from harness.gpu.streams import Stream


class Buffer:
    """Device memory of ``nbytes``; freed when closed or garbage-collected."""

    def __init__(self, nbytes: int):
        if nbytes <= 0:
            raise HarnessError(f"a device buffer needs a positive size, got {nbytes} bytes")
        self.nbytes = nbytes
        self.dptr = check(cu.cuMemAlloc(nbytes), "cuMemAlloc", f"{nbytes} bytes")
        self._free = context_resource(self, cu.cuMemFree, self.dptr)

    @classmethod
    def view(cls, dptr, nbytes: int) -> Buffer:
        """Device memory something else owns (a module's ``.global``): never freed here."""
        buffer = cls.__new__(cls)
        buffer.nbytes, buffer.dptr, buffer._free = nbytes, dptr, lambda: None
        return buffer

    @property
    def address(self) -> int:
        return int(self.dptr)

    def close(self) -> None:
        self._free()

    def upload(self, array: np.ndarray, stream: Stream) -> None:
        """Copy ``array`` in, ordered on ``stream``, and wait for it (a plain cuMemcpyHtoD
        from pageable memory may return before its DMA lands, and a non-blocking stream
        would not wait for it)."""
        array = np.ascontiguousarray(array)
        if array.nbytes != self.nbytes:
            raise HarnessError(f"upload of {array.nbytes} bytes into a {self.nbytes}-byte buffer")
        check(cu.cuMemcpyHtoDAsync(self.dptr, array.ctypes.data, array.nbytes, stream.handle),
              "cuMemcpyHtoDAsync")
        stream.synchronize("upload")

    def download(self, dtype, shape: Sequence[int], stream: Stream) -> np.ndarray:
        """Copy out after the work queued on ``stream``, into host memory used again
        (host_pool.py: a copy into fresh pages ran at a quarter of the speed)."""
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if nbytes != self.nbytes:
            raise HarnessError(f"download of {nbytes} bytes from a {self.nbytes}-byte buffer")
        out = host_pool.array(shape, dtype)
        check(cu.cuMemcpyDtoHAsync(out.ctypes.data, self.dptr, out.nbytes, stream.handle),
              "cuMemcpyDtoHAsync")
        stream.synchronize("download")
        return out

    def download_at(self, offset_bytes: int, dtype, count: int, stream: Stream) -> np.ndarray:
        """``count`` elements of ``dtype`` from ``offset_bytes`` on, after the work queued on
        ``stream``."""
        out = np.empty(count, dtype=dtype)
        if offset_bytes < 0 or offset_bytes + out.nbytes > self.nbytes:
            raise HarnessError(f"download of {out.nbytes} bytes at {offset_bytes} from a "
                               f"{self.nbytes}-byte buffer")
        check(cu.cuMemcpyDtoHAsync(out.ctypes.data, self.address + offset_bytes, out.nbytes,
                                   stream.handle), "cuMemcpyDtoHAsync")
        stream.synchronize("download")
        return out

    def download_lines(self, offsets_bytes: Sequence[int], dtype, count: int,
                       stream: Stream) -> np.ndarray:
        """``count`` elements of ``dtype`` from each of ``offsets_bytes`` on, one line each (a
        (len, count) array), after the work queued on ``stream``: enqueued together, one
        synchronisation for all."""
        out = np.empty((len(offsets_bytes), count), dtype=dtype)
        line = out.itemsize * count
        for i, offset in enumerate(offsets_bytes):
            if offset < 0 or offset + line > self.nbytes:
                raise HarnessError(f"download of {line} bytes at {offset} from a "
                                   f"{self.nbytes}-byte buffer")
            check(cu.cuMemcpyDtoHAsync(out[i].ctypes.data, self.address + offset, line,
                                       stream.handle), "cuMemcpyDtoHAsync")
        stream.synchronize("download")
        return out

    def fill_u32(self, word: int, stream: Stream) -> None:
        """Write the 32-bit pattern ``word`` over the whole buffer (poison, L2 flush)."""
        check(cu.cuMemsetD32Async(self.dptr, word, self.nbytes // 4, stream.handle),
              "cuMemsetD32Async")

    def fill(self, word: int, word_bytes: int, stream: Stream) -> None:
        """Write the 16- or 32-bit pattern ``word`` over the whole buffer."""
        if word_bytes == 4:
            self.fill_u32(word, stream)
        elif word_bytes == 2:
            check(cu.cuMemsetD16Async(self.dptr, word, self.nbytes // 2, stream.handle),
                  "cuMemsetD16Async")
        else:
            raise HarnessError(f"fill takes 2- or 4-byte words, got {word_bytes}")

    def copy_from(self, source: Buffer, stream: Stream) -> None:
        """Copy ``source``'s bytes over the start of this buffer, ordered on ``stream`` (a
        device-to-device copy: no wait, capturable in a graph)."""
        if source.nbytes > self.nbytes:
            raise HarnessError(f"copy of {source.nbytes} bytes into a {self.nbytes}-byte buffer")
        check(cu.cuMemcpyDtoDAsync(self.dptr, source.dptr, source.nbytes, stream.handle),
              "cuMemcpyDtoDAsync")

    def upload_at(self, array: np.ndarray, offset_bytes: int, stream: Stream) -> None:
        """Copy ``array`` in at ``offset_bytes`` and wait for it."""
        array = np.ascontiguousarray(array)
        if offset_bytes + array.nbytes > self.nbytes:
            raise HarnessError(f"upload of {array.nbytes} bytes at {offset_bytes} into a "
                               f"{self.nbytes}-byte buffer")
        check(cu.cuMemcpyHtoDAsync(self.address + offset_bytes, array.ctypes.data,
                                   array.nbytes, stream.handle), "cuMemcpyHtoDAsync")
        stream.synchronize("upload")
