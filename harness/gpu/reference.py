"""A check's float64 reference and its error scale computed on the GPU with cuBLAS DGEMM (issue
37): numpy's float64 product and float32 error scale of a 4096^3 check cost the host seconds,
on cores other work shares; an H100's FP64 tensor cores do both products in milliseconds, and
copying the operands in and the results out through pageable memory costs some tens more.

Exactness: DGEMM multiplies and adds in IEEE float64 as numpy does; only the order of the
additions differs (blocking, tensor-core fragments). The reference differs from numpy's by
float64 rounding, at most about K u64 |A||B| elementwise and typically sqrt(K) u64 (u64 = 2^-53,
1.1e-16): near 1e-16 relative, where the tightest tolerance is FP32 accumulation's, u32 sqrt(K)
with u32 = 2^-24 (6e-8). The error scale ``|alpha| |A||B| + |beta| |C0|`` (numerics.error_scale)
is computed in float64 on the absolute values and rounded to float32, the type numerics gives
it. Its terms are all positive, so its float64 sum is exact to K u64 relative and within one
float32 rounding of the exact scale; numpy's float32 product is within K u32 of it: the GPU's
scale is the more exact of the two, and both are far more exact than a bound needs.
"""

from __future__ import annotations

import numpy as np

from harness.errors import HarnessError
from harness.gpu.cublas import Cublas
from harness.gpu.driver import Buffer

MIN_MNK = 1 << 27
"""The checks compute a reference of M N K at least this (512^3) on the GPU, a smaller one on
the host. The host's float64 product and float32 scale grow as M N K (2^28 flops each at
512^3: 5 ms for both on two cores of a development host); the GPU's round trip grows only as
M K + K N + M N (at 512^3 12 MB copied through pageable memory, three allocations and six
waits: a few milliseconds, estimated), about what the host costs at this size. Below it the
host is as fast and the device is left alone (the check battery's many small shapes); above
it, for an n^3 GEMM, the host's cost grows as n^3 and the copies' as n^2 (at 4096^3 about 2 s
of two host cores against an estimated 0.1 s of copies and 6 ms of DGEMM)."""


def reference_and_scale(blas: Cublas, a64: np.ndarray, b64: np.ndarray, alpha: float,
                        beta: float, c64: np.ndarray | None
                        ) -> tuple[np.ndarray, np.ndarray]:
    """``alpha A B + beta C`` in float64 and its error scale ``|alpha| |A||B| + |beta| |C|``
    in float32, as numerics.reference and numerics.error_scale give them (C is used only at
    beta != 0), both products computed on the device with ``blas`` (cublasDgemm on its
    stream). A (M x K), B (K x N) and C (M x N, or None at beta = 0) are row-major float64 on
    the host, as the results are. The device memory (three float64 matrices, 512 MiB each at
    8192) is freed before it returns."""
    a64, b64 = (np.ascontiguousarray(x, dtype=np.float64) for x in (a64, b64))
    (m, k), (k_b, n) = a64.shape, b64.shape
    if k_b != k:
        raise HarnessError(f"a reference needs A's columns to be B's rows: A is {m} x {k}, "
                           f"B is {k_b} x {n}")
    if beta != 0.0:
        if c64 is None or c64.shape != (m, n):
            found = "none" if c64 is None else f"{c64.shape[0]} x {c64.shape[1]}"
            raise HarnessError(f"a reference at beta = {beta} needs C's start values, "
                               f"{m} x {n}; found {found}")
        c64 = np.ascontiguousarray(c64, dtype=np.float64)
    buffers = []
    try:
        for elements in (m * k, k * n, m * n):
            buffers.append(Buffer(elements * 8))
        ref = _product(blas, buffers, a64, b64, alpha, beta, c64)
        scale = _product(blas, buffers, np.abs(a64), np.abs(b64), abs(alpha), abs(beta),
                         None if beta == 0.0 else np.abs(c64))
    finally:
        for buffer in buffers:
            buffer.close()
    return ref, scale.astype(np.float32)


def _product(blas: Cublas, buffers: list[Buffer], a: np.ndarray, b: np.ndarray, alpha: float,
             beta: float, c: np.ndarray | None) -> np.ndarray:
    """``alpha a b + beta c`` on the device through ``buffers`` (A's, B's, C's), read back."""
    (m, k), n = a.shape, b.shape[1]
    a_buf, b_buf, c_buf = buffers
    a_buf.upload(a, blas.stream)
    b_buf.upload(b, blas.stream)
    if beta != 0.0:  # at beta = 0 cuBLAS only writes C
        c_buf.upload(c, blas.stream)
    blas.dgemm(m, n, k, alpha, a_buf.address, b_buf.address, beta, c_buf.address)
    return c_buf.download(np.float64, (m, n), blas.stream)
