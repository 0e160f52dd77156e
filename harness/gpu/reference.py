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

import ctypes
from dataclasses import dataclass

import numpy as np

from harness.errors import HarnessError
from harness.gpu import own_kernels
from harness.gpu.cublas import Cublas
from harness.gpu.driver import Buffer, LaunchShape

MIN_MNK = 1 << 27
"""The checks compute a reference of M N K at least this (512^3) on the GPU, a smaller one on
the host. The host's float64 product and float32 scale grow as M N K (2^28 flops each at
512^3: 5 ms for both on two cores of a development host); the GPU's round trip grows only as
M K + K N + M N (at 512^3 12 MB copied through pageable memory, three allocations and six
waits: a few milliseconds, estimated), about what the host costs at this size. Below it the
host is as fast and the device is left alone (the check battery's many small shapes); above
it, for an n^3 GEMM, the host's cost grows as n^3 and the copies' as n^2 (at 4096^3 about 2 s
of two host cores against an estimated 0.1 s of copies and 6 ms of DGEMM)."""


_SOURCE = rb"""
// |x| in place: the sign bit of each float64 cleared
extern "C" __global__ void magnitudes(unsigned long long* x, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n; i += (unsigned long long)gridDim.x * blockDim.x)
        x[i] &= 0x7fffffffffffffffull;
}
// storage codes to float64, exactly: kind 0 float32, 1 float16, 2 bfloat16 (a float32's high half)
extern "C" __global__ void widened(const void* codes, double* x, unsigned long long n, int kind) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n; i += (unsigned long long)gridDim.x * blockDim.x) {
        float f;
        if (kind == 0) {
            f = ((const float*)codes)[i];
        } else if (kind == 1) {
            unsigned short h = ((const unsigned short*)codes)[i];
            asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
        } else {
            f = __uint_as_float((unsigned int)((const unsigned short*)codes)[i] << 16);
        }
        x[i] = (double)f;
    }
}
// float64 to float32, rounded to nearest even (numpy's astype)
extern "C" __global__ void narrowed(const double* x, float* y, unsigned long long n) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n; i += (unsigned long long)gridDim.x * blockDim.x)
        y[i] = __double2float_rn(x[i]);
}
"""
THREADS = 256
WIDENED = {"fp32": 0, "tf32": 0, "fp16": 1, "bf16": 2}
"""The storage kinds the device widens to float64 (:class:`Stored`), by the kernel's code."""


@dataclass(frozen=True)
class Stored:
    """An operand in its storage form, whose exact values are a reference's input: float32
    (FP32 and TF32), float16, or bfloat16 bits (uint16). Uploaded as it is and widened to
    float64 on the device: half float64's bytes for FP32, a quarter for 16-bit inputs (at 4096
    A and B in float64 are 268 MB through pageable memory, about 30 ms a reference; issue
    37)."""

    codes: np.ndarray
    kind: str

    @property
    def shape(self) -> tuple[int, ...]:
        return self.codes.shape

    def values(self) -> np.ndarray:
        """The codes' exact float64 values (the host's way)."""
        if self.kind == "bf16":
            return (self.codes.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        return self.codes.astype(np.float64)


SOURCE = own_kernels.Source(_SOURCE, "reference_kernels.cu", "the reference's kernels")


class ReferenceKernels:
    """The scale's element-wise steps on the device: A's and B's magnitudes made in the
    buffers that hold them (not drawn again on the host and uploaded a second time) and the
    scale narrowed to float32 before it is read back (half the bytes)."""

    def __init__(self, sm_count: int):
        self.module = own_kernels.module(SOURCE, "reference kernels")
        self._magnitudes = self.module.function("magnitudes")
        self._narrowed = self.module.function("narrowed")
        self._widened = self.module.function("widened")
        self.most_blocks = 8 * sm_count

    def _shape(self, n: int):
        return LaunchShape((max(1, min(-(-n // THREADS), self.most_blocks)), 1, 1),
                           (THREADS, 1, 1), 0)

    def magnitudes(self, x: Buffer, n: int, stream) -> None:
        self._magnitudes.launch(self._shape(n), stream,
                                (ctypes.c_uint64(x.address), ctypes.c_uint64(n)))

    def widened(self, stored: Stored, x: Buffer, stream) -> None:
        """``stored``'s exact values into ``x`` as float64 (its codes uploaded through a
        buffer of their own, freed here)."""
        codes = np.ascontiguousarray(stored.codes)
        staging = Buffer(codes.nbytes)
        try:
            staging.upload(codes, stream)
            self._widened.launch(self._shape(codes.size), stream, (
                ctypes.c_uint64(staging.address), ctypes.c_uint64(x.address),
                ctypes.c_uint64(codes.size), ctypes.c_int32(WIDENED[stored.kind])))
            stream.synchronize("widening an operand")
        finally:
            staging.close()

    def narrowed(self, x: Buffer, y: Buffer, n: int, stream) -> None:
        self._narrowed.launch(self._shape(n), stream, (ctypes.c_uint64(x.address),
                                                       ctypes.c_uint64(y.address),
                                                       ctypes.c_uint64(n)))


def reference_and_scale(blas: Cublas, a64: np.ndarray, b64: np.ndarray, alpha: float,
                        beta: float, c64: np.ndarray | None,
                        kernels: ReferenceKernels | None = None,
                        twins: list | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``alpha A B + beta C`` in float64 and its error scale ``|alpha| |A||B| + |beta| |C|``
    in float32, as numerics.reference and numerics.error_scale give them (C is used only at
    beta != 0), both products computed on the device with ``blas`` (cublasDgemm on its
    stream). A (M x K), B (K x N) and C (M x N, or None at beta = 0) are row-major float64 on
    the host, as the results are, or A and B :class:`Stored` (widened on the device with
    ``kernels``). With ``kernels`` the magnitudes of A and B are made, and the scale narrowed,
    on the device; without, on the host. The device memory (three float64
    matrices, 512 MiB each at 8192) is freed before it returns, except, where ``twins`` is a
    list and ``kernels`` are given, the reference's and the scale's buffers, appended to it
    (their device copies: compare_sums.py)."""
    stored = [x if isinstance(x, Stored) and kernels is not None else None for x in (a64, b64)]
    a64, b64 = (x if s is not None else
                np.ascontiguousarray(x.values() if isinstance(x, Stored) else x,
                                     dtype=np.float64)
                for x, s in zip((a64, b64), stored, strict=True))
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
    abs_c = None if beta == 0.0 else np.abs(c64)
    buffers = []
    try:
        for elements in (m * k, k * n, m * n):
            buffers.append(Buffer(elements * 8))
        for x, buffer in zip(stored, buffers, strict=False):
            if x is not None:
                kernels.widened(x, buffer, blas.stream)
        ref = _product(blas, buffers, (m, n, k), *(None if s is not None else x for x, s in
                                                   zip((a64, b64), stored, strict=True)),
                       alpha, beta, c64)
        if kernels is None:
            scale = _product(blas, buffers, (m, n, k), np.abs(a64), np.abs(b64), abs(alpha),
                             abs(beta), abs_c).astype(np.float32)
        else:
            a_buf, b_buf, c_buf = buffers
            if twins is not None:  # the reference kept before its buffer holds the scale
                buffers.append(Buffer(m * n * 8))
                buffers[-1].copy_from(c_buf, blas.stream)
            kernels.magnitudes(a_buf, m * k, blas.stream)
            kernels.magnitudes(b_buf, k * n, blas.stream)
            _product(blas, buffers, (m, n, k), None, None, abs(alpha), abs(beta), abs_c, read=False)
            buffers.append(Buffer(m * n * 4))
            kernels.narrowed(c_buf, buffers[-1], m * n, blas.stream)
            scale = buffers[-1].download(np.float32, (m, n), blas.stream)
            if twins is not None:
                twins.append((buffers[-2], buffers[-1]))
                del buffers[-2:]
    finally:
        for buffer in buffers:
            buffer.close()
    return ref, scale


def _product(blas: Cublas, buffers: list[Buffer], shape: tuple[int, int, int],
             a: np.ndarray | None, b: np.ndarray | None, alpha: float, beta: float,
             c: np.ndarray | None, read: bool = True) -> np.ndarray | None:
    """``alpha a b + beta c`` on the device through ``buffers`` (A's, B's, C's), read back
    unless ``read`` is False; an operand given as None is in its buffer already."""
    a_buf, b_buf, c_buf = buffers[:3]
    m, n, k = shape
    if a is not None:
        a_buf.upload(a, blas.stream)
    if b is not None:
        b_buf.upload(b, blas.stream)
    if beta != 0.0:  # at beta = 0 cuBLAS only writes C
        c_buf.upload(c, blas.stream)
    blas.dgemm(m, n, k, alpha, a_buf.address, b_buf.address, beta, c_buf.address)
    return c_buf.download(np.float64, (m, n), blas.stream) if read else None
