"""A 64 MB download into memory numpy has just allocated, into memory touched before and into
page-locked memory; and an upload from pageable memory (issue 37: harness/gpu/host_pool.py).

    python3 experiments/d2h_probe.py
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable

import numpy as np
from cuda.bindings import driver as cu

MB64 = 64 << 20


def ok(result: tuple):
    """The call's value; an error raised with the driver's own code."""
    if result[0] != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver call failed: {result[0]}")
    return result[1] if len(result) > 1 else None


def rate(label: str, copy: Callable[[], None]) -> None:
    t0 = time.perf_counter()
    copy()
    seconds = time.perf_counter() - t0
    print(f"{label}: {MB64 / seconds / 1e9:.1f} GB/s, {seconds * 1e3:.1f} ms")


def main() -> None:
    ok(cu.cuInit(0))
    context = ok(cu.cuDevicePrimaryCtxRetain(ok(cu.cuDeviceGet(0))))
    ok(cu.cuCtxSetCurrent(context))
    device = ok(cu.cuMemAlloc(MB64))
    ok(cu.cuMemsetD32(device, 1, MB64 // 4))
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as thp:
        print("transparent huge pages:", thp.read().strip())
    for label in ("fresh", "fresh", "touched", "touched"):
        out = np.empty(MB64, np.uint8)
        if label == "touched":
            out[:] = 0
        rate(f"download into {label} memory",
             lambda out=out: ok(cu.cuMemcpyDtoH(out.ctypes.data, device, MB64)))
    t0 = time.perf_counter()
    pinned = ok(cu.cuMemHostAlloc(MB64, 0))
    print(f"page-locked allocation: {(time.perf_counter() - t0) * 1e3:.1f} ms")
    for _ in range(2):
        rate("download into page-locked memory",
             lambda: ok(cu.cuMemcpyDtoH(pinned, device, MB64)))
    fresh = np.empty(MB64, np.uint8)
    view = np.ctypeslib.as_array((ctypes.c_uint8 * MB64).from_address(int(pinned)))
    rate("page-locked memory copied into fresh numpy memory", lambda: fresh.__setitem__(
        slice(None), view))
    source = np.ones(MB64, np.uint8)
    for _ in range(2):
        rate("upload from pageable memory",
             lambda: ok(cu.cuMemcpyHtoD(device, source.ctypes.data, MB64)))


if __name__ == "__main__":
    main()
