"""The cuBLAS baseline through nvmath-python, on raw device pointers, row-major.

Row-major C = A B is column-major C^T = B^T A^T: the operands are swapped, not the data. A
column-major C is computed directly (A first). :func:`gemm_ex_operands` maps the layouts of A, B
and C to cublasGemmEx's operands; with A and C row-major it is the call this module always made.
The compute type is named exactly: FP32 is ``CUBLAS_COMPUTE_32F`` with the default math mode
(no TF32); TF32 is ``CUBLAS_COMPUTE_32F_FAST_TF32``; BF16/FP16 inputs accumulate in FP32.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.errors import DeviceError, HarnessError
from harness.gpu.driver import Buffer, Stream, context_resource
from harness.gpu.nvmath_libs import nvmath_bindings


def _lib():
    return nvmath_bindings("the cuBLAS baseline", "cublas")


def available() -> bool:
    """Whether nvmath-python's cuBLAS bindings import (the baseline and the GPU references
    need them)."""
    try:
        _lib()
    except HarnessError:
        return False
    return True


# C's element type -> its data type name
_C_TYPES = {"fp32": "CUDA_R_32F", "bf16": "CUDA_R_16BF", "fp16": "CUDA_R_16F"}
# precision -> (A/B data type name, compute type name)
_TYPES = {
    "fp32": ("CUDA_R_32F", "COMPUTE_32F"),
    "tf32": ("CUDA_R_32F", "COMPUTE_32F_FAST_TF32"),
    "bf16": ("CUDA_R_16BF", "COMPUTE_32F"),
    "fp16": ("CUDA_R_16F", "COMPUTE_32F"),
    "fp32_fast_bf16": ("CUDA_R_32F", "COMPUTE_32F_FAST_16BF"),
    "fp32_bf16x9": ("CUDA_R_32F", "COMPUTE_32F_EMULATED_16BFX9"),
}
SCHEMES = {"tf32": "tf32", "tf32x3": "tf32", "bf16": "fp32_fast_bf16",
           "bf16x3": "fp32_fast_bf16", "bf16x6": "fp32_fast_bf16", "bf16x9": "fp32_bf16x9"}
"""An FP32 kernel's ``fp32_via`` -> the cuBLAS scheme it is compared with (a key of _TYPES): FP32
data on tensor cores with the same rounding of the inputs. cuBLAS has no split (x3, x6) form of
TF32 or BF16: a split kernel is held to cuBLAS's one pass of the same rounding, the fastest
cuBLAS computes FP32 data that way (its figure is never flattered by the split's extra passes);
BF16x9 has cuBLAS's own emulation (``COMPUTE_32F_EMULATED_16BFX9``, cuBLAS 12.9 on)."""


def scheme_via(fp32_via: str) -> str:
    """The ``fp32_via`` cuBLAS's like-for-like GEMM computes as (its peak is that one's):
    one pass of the split's rounding, BF16x9 its own."""
    return fp32_via if fp32_via in ("", "bf16x9") else fp32_via.split("x")[0]


def baseline_precision(precision: str, fp32_via: str = "") -> str:
    """The precision key of the cuBLAS GEMM a kernel is compared with like for like: its own,
    or for an FP32 kernel on tensor cores (``fp32_via``) cuBLAS in the same scheme
    (:data:`SCHEMES`)."""
    return SCHEMES[fp32_via] if precision == "fp32" and fp32_via else precision


def library_name(precision: str) -> str:
    """The library a precision's baseline is: cuBLASLt for FP8 (through :attr:`Cublas.lt`)."""
    return "cuBLASLt" if precision == "fp8" else "cuBLAS"


def compute_name(precision: str, spec=None) -> str:
    """The cuBLAS compute type used as the baseline for ``precision`` (FP8: with the kernel's
    ``spec``'s scales, per tensor or in blocks of 1 x 128 (A) and 128 x 128 (B))."""
    if precision == "fp8":
        scales = getattr(getattr(spec, "fp8", None), "scales", "tensor")
        return ("cuBLASLt FP8, CUBLAS_COMPUTE_32F" if scales == "tensor" else
                "cuBLASLt FP8 with 1 x 128 / 128 x 128 block scales, CUBLAS_COMPUTE_32F")
    via = getattr(spec, "fp32_via", "") if precision == "fp32" else ""
    return "CUBLAS_" + _TYPES[baseline_precision(precision, via)][1]


@dataclass(frozen=True)
class GemmExOperands:
    """The layout-dependent arguments of one cublasGemmEx call (column-major semantics:
    C[m x n] = alpha op(X)[m x k] op(Y)[k x n] + beta C, X and Y the first and second
    pointer)."""

    transa: str
    """``"N"`` or ``"T"``: the operation on the first pointer."""
    transb: str
    """``"N"`` or ``"T"``: the operation on the second pointer."""
    m: int
    n: int
    k: int
    first: str
    """``"A"`` or ``"B"``: which operand is passed as cuBLAS's A (the other is its B)."""
    lda: int
    ldb: int
    ldc: int


def gemm_ex_operands(m: int, n: int, k: int, layout_a: str = "row", layout_b: str = "row",
                     layout_c: str = "row") -> GemmExOperands:
    """cublasGemmEx's operands for the logical C (M x N) = A (M x K) B (K x N), each stored in
    its layout (``"row"`` or ``"col"``, packed: leading dimension the stored row's length).

    A row-major array is its transpose in column-major, so a row-major C is computed as
    column-major C^T = B^T A^T (B first, cuBLAS sizes N, M, K, ldc = N); a column-major C as
    C = A B (A first, sizes M, N, K, ldc = M). Each input is transposed by cuBLAS exactly when
    its column-major view is not the matrix that product needs."""
    for name, layout in (("layout_a", layout_a), ("layout_b", layout_b),
                         ("layout_c", layout_c)):
        if layout not in ("row", "col"):
            raise ValueError(f"{name} must be 'row' or 'col', not {layout!r}")
    # column-major view of each stored operand: (is it the logical matrix itself, its ld)
    a_plain, ld_a = (layout_a == "col", m if layout_a == "col" else k)
    b_plain, ld_b = (layout_b == "col", k if layout_b == "col" else n)
    if layout_c == "row":  # C^T (N x M) = B^T (N x K) A^T (K x M)
        return GemmExOperands("T" if b_plain else "N", "T" if a_plain else "N", n, m, k, "B",
                              ld_b, ld_a, n)
    # C (M x N) = A (M x K) B (K x N)
    return GemmExOperands("N" if a_plain else "T", "N" if b_plain else "T", m, n, k, "A",
                          ld_a, ld_b, m)


WORKSPACE_BYTES = 32 << 20
"""cuBLAS's workspace, the handle's own: the size the cuBLAS documentation recommends for
Hopper (cublasSetWorkspace). Without one, cuBLAS allocates its workspace in the stream while a
graph is captured, and a graph with allocations has one instance at a time: the timed batches
of cuBLAS's FP32 GEMM at 512 and 1024 could not be copied (gpu/graph.py)."""


class Cublas:
    """A cuBLAS handle bound to one stream."""

    def __init__(self, stream: Stream):
        nvmath, cublas = _lib()
        self._nvmath, self._cublas = nvmath, cublas
        self.handle = cublas.create()
        self._workspace = Buffer(WORKSPACE_BYTES)
        self._destroy = context_resource(self, cublas.destroy, self.handle)
        cublas.set_stream(self.handle, int(stream.handle))
        cublas.set_workspace(self.handle, self._workspace.address, WORKSPACE_BYTES)
        cublas.set_math_mode(self.handle, cublas.Math.DEFAULT_MATH)
        self.version = cublas.get_version(self.handle)
        self._scalars = np.zeros(2, dtype=np.float32)
        self._doubles = np.zeros(2, dtype=np.float64)
        self._stream, self._lt = stream, None

    @property
    def stream(self) -> Stream:
        """The stream every call of this handle is ordered on."""
        return self._stream

    @property
    def lt(self):
        """cuBLASLt on the same stream (gpu/cublaslt.py), made the first time an FP8 GEMM
        asks for it."""
        if self._lt is None:
            from harness.gpu.cublaslt import CublasLt

            self._lt = CublasLt(self._stream)
        return self._lt

    def close(self) -> None:
        if self._lt is not None:
            self._lt.close()
        self._destroy()
        self._workspace.close()

    def gemm(self, precision: str, m: int, n: int, k: int, alpha: float, a: int, b: int,
             beta: float, c: int, layout_b: str = "row", c_type: str = "fp32", *,
             layout_a: str = "row", layout_c: str = "row", fp8: tuple | None = None) -> None:
        """Enqueue C = alpha A B + beta C (A MxK in ``layout_a``, B KxN in ``layout_b``, C MxN
        in ``layout_c`` of ``c_type``; FP32 alpha and beta, FP32 compute for every 16-bit
        input). An FP8 GEMM (``precision = "fp8"``) goes to cuBLASLt with ``fp8`` = (A's
        format, B's format, the address of A's scale, of B's[, "block"]): C = scale_a scale_b
        A B, A row-major, B K-major (``layout_b = "col"``), alpha 1, beta 0; with "block", the
        scales' addresses are of 1 x 128 / 128 x 128 block scales (CublasLt.gemm_fp8)."""
        if precision == "fp8":
            if fp8 is None or (alpha, beta) != (1.0, 0.0) or layout_a != "row" \
                    or layout_b != "col" or layout_c != "row":
                raise HarnessError("the FP8 baseline takes A row-major, B K-major, C row-major, "
                                   "alpha 1, beta 0 and both formats and scales")
            a_format, b_format, scale_a, scale_b, *mode = fp8
            self.lt.gemm_fp8(m, n, k, a, b, c, scale_a, scale_b, a_format, b_format, c_type,
                             scales=mode[0] if mode else "tensor")
            return
        cublas, dtypes = self._cublas, self._nvmath.CudaDataType
        data_type, compute = _TYPES[precision]
        ab, c_data = getattr(dtypes, data_type), getattr(dtypes, _C_TYPES[c_type])
        self._scalars[:] = (alpha, beta)
        ops = gemm_ex_operands(m, n, k, layout_a, layout_b, layout_c)
        first, second = (a, b) if ops.first == "A" else (b, a)
        try:
            cublas.gemm_ex(
                self.handle, getattr(cublas.Operation, ops.transa),
                getattr(cublas.Operation, ops.transb), ops.m, ops.n, ops.k,
                self._scalars.ctypes.data, first, ab, ops.lda, second, ab, ops.ldb,
                self._scalars.ctypes.data + 4, c, c_data, ops.ldc,
                getattr(cublas.ComputeType, compute), cublas.GemmAlgo.DEFAULT,
            )
        except Exception as exc:
            raise DeviceError(f"cublasGemmEx failed for {precision} {m}x{n}x{k} "
                               f"({compute_name(precision)}, C {c_type}): {exc}") from None

    def dgemm(self, m: int, n: int, k: int, alpha: float, a: int, b: int, beta: float,
              c: int) -> None:
        """Enqueue C = alpha A B + beta C in float64 (cublasDgemm, float64 alpha and beta): A
        M x K, B K x N and C M x N, all row-major and packed (:func:`gemm_ex_operands`: B
        first). At beta = 0 C is only written. The float64 references (gpu/reference.py)."""
        cublas = self._cublas
        self._doubles[:] = (alpha, beta)
        ops = gemm_ex_operands(m, n, k)
        first, second = (a, b) if ops.first == "A" else (b, a)
        try:
            cublas.dgemm(
                self.handle, getattr(cublas.Operation, ops.transa),
                getattr(cublas.Operation, ops.transb), ops.m, ops.n, ops.k,
                self._doubles.ctypes.data, first, ops.lda, second, ops.ldb,
                self._doubles.ctypes.data + 8, c, ops.ldc,
            )
        except Exception as exc:
            raise DeviceError(f"cublasDgemm failed for {m}x{n}x{k} (float64 reference): "
                               f"{exc}") from None
