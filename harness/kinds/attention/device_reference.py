"""The device reference for timed shapes: chosen query rows in FP64 on the GPU
(reference_device.cu), keys streamed through shared memory so S_kv = 16K fits, giving what the
host reference gives (reference.Reference) for those rows. Built offline like the harness's
own kernels; tested against the host reference by tests/test_attention_gpu.py."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from harness.compiler import headers
from harness.gpu import own_kernels
from harness.kinds.attention.numerics import UNIT_ROUNDOFF
from harness.kinds.attention.reference import Reference

_TEXT = (Path(__file__).parent / "reference_device.cu").read_bytes()
ENTRY = "attention_reference"
THREADS = 128
MAX_D = 256


def source(precision: str, layout: str) -> own_kernels.Source:
    """The reference's source for inputs of ``precision`` held in ``layout``."""
    flags = (f"-DIS_FP16={int(precision == 'fp16')}", f"-DIS_BSHD={int(layout == 'bshd')}",
             "-std=c++17", *(f"--include-path={p}" for p in headers.include_paths()))
    return own_kernels.Source(_TEXT, "attention_reference.cu",
                              "the attention kind's device reference", flags)


def run(q, k, v, rows: np.ndarray, problem, scale: float, *, precision: str, layout: str,
        p_precision: str, stream) -> Reference:
    """The reference at ``rows`` (an int array of (b, h, i) triples) from device buffers
    ``q, k, v`` (harness.gpu.driver.Buffer) of ``problem``; needs a current context. The
    result's arrays are ``[1, 1, len(rows), ...]``: row r of the list."""
    from harness.gpu.driver import Buffer, LaunchShape

    d = problem["D"]
    if d > MAX_D:
        raise ValueError(f"the device reference takes D <= {MAX_D}, found {d}")
    rows = np.ascontiguousarray(rows, dtype=np.int32).reshape(-1, 3)
    n = len(rows)
    width = 3 * d + 3
    module = own_kernels.module(source(precision, layout))
    function = module.function(ENTRY)
    row_buffer, out = Buffer(rows.nbytes), Buffer(8 * n * width)
    try:
        row_buffer.upload(rows, stream)
        function.launch(LaunchShape((n, 1, 1), (THREADS, 1, 1), 0), stream, (
            ctypes.c_uint64(q.address), ctypes.c_uint64(k.address), ctypes.c_uint64(v.address),
            ctypes.c_uint64(row_buffer.address), ctypes.c_int32(n),
            ctypes.c_uint64(out.address), ctypes.c_int32(problem["H"]),
            ctypes.c_int32(problem["H_kv"]), ctypes.c_int32(problem["S_q"]),
            ctypes.c_int32(problem["S_kv"]), ctypes.c_int32(d), ctypes.c_double(scale),
            ctypes.c_int32(int(problem.causal)),
            ctypes.c_double(UNIT_ROUNDOFF[p_precision])))
        values = out.download(np.float64, (n, width), stream)
    finally:
        row_buffer.close()
        out.close()
        module.close()
    return unpack(values, d)


def unpack(values: np.ndarray, d: int) -> Reference:
    """The kernel's per-row records (o, abs_pv, spread_pv, lse, m, spread_p) as a Reference of
    shape [1, 1, rows, ...]."""
    def rows(a):
        return a[None, None]
    return Reference(rows(values[:, :d]), rows(values[:, 3 * d]), rows(values[:, 3 * d + 1]),
                     rows(values[:, d:2 * d]), rows(values[:, 2 * d:3 * d]),
                     rows(values[:, 3 * d + 2]))
