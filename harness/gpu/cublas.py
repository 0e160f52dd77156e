"""The cuBLAS baseline through nvmath-python, on raw device pointers, row-major.

Row-major C = A B is column-major C^T = B^T A^T: the operands are swapped, not the data.
The compute type is named exactly: FP32 is ``CUBLAS_COMPUTE_32F`` with the default math mode
(no TF32); TF32 is ``CUBLAS_COMPUTE_32F_FAST_TF32``; BF16/FP16 inputs accumulate in FP32.
"""

from __future__ import annotations

import numpy as np

from harness.errors import HarnessError
from harness.gpu.driver import Stream, context_resource


def _lib():
    try:
        import nvmath
        from nvmath.bindings import cublas
    except ImportError as exc:
        raise HarnessError(
            f"the cuBLAS baseline needs nvmath-python ({exc}); install it with "
            "`python3 -m pip install nvmath-python` (offline: see README, 'GPU host without a "
            "package registry')"
        ) from None
    return nvmath, cublas


# C's element type -> its data type name
_C_TYPES = {"fp32": "CUDA_R_32F", "bf16": "CUDA_R_16BF", "fp16": "CUDA_R_16F"}
# precision -> (A/B data type name, compute type name)
_TYPES = {
    "fp32": ("CUDA_R_32F", "COMPUTE_32F"),
    "tf32": ("CUDA_R_32F", "COMPUTE_32F_FAST_TF32"),
    "bf16": ("CUDA_R_16BF", "COMPUTE_32F"),
    "fp16": ("CUDA_R_16F", "COMPUTE_32F"),
}


def compute_name(precision: str) -> str:
    """The cuBLAS compute type used as the baseline for ``precision``."""
    return "CUBLAS_" + _TYPES[precision][1]


class Cublas:
    """A cuBLAS handle bound to one stream."""

    def __init__(self, stream: Stream):
        nvmath, cublas = _lib()
        self._nvmath, self._cublas = nvmath, cublas
        self.handle = cublas.create()
        self._destroy = context_resource(self, cublas.destroy, self.handle)
        cublas.set_stream(self.handle, int(stream.handle))
        cublas.set_math_mode(self.handle, cublas.Math.DEFAULT_MATH)
        self.version = cublas.get_version(self.handle)
        self._scalars = np.zeros(2, dtype=np.float32)

    def close(self) -> None:
        self._destroy()

    def gemm(self, precision: str, m: int, n: int, k: int, alpha: float, a: int, b: int,
             beta: float, c: int, layout_b: str = "row", c_type: str = "fp32") -> None:
        """Enqueue C = alpha A B + beta C (A row-major MxK, B KxN in ``layout_b``, C of
        ``c_type``; FP32 alpha and beta, FP32 compute for every 16-bit input)."""
        cublas, dtypes = self._cublas, self._nvmath.CudaDataType
        data_type, compute = _TYPES[precision]
        ab, c_data = getattr(dtypes, data_type), getattr(dtypes, _C_TYPES[c_type])
        self._scalars[:] = (alpha, beta)
        op_b, ld_b = ((cublas.Operation.N, n) if layout_b == "row" else (cublas.Operation.T, k))
        try:
            cublas.gemm_ex(
                self.handle, op_b, cublas.Operation.N, n, m, k,
                self._scalars.ctypes.data, b, ab, ld_b, a, ab, k,
                self._scalars.ctypes.data + 4, c, c_data, n,
                getattr(cublas.ComputeType, compute), cublas.GemmAlgo.DEFAULT,
            )
        except Exception as exc:
            raise HarnessError(f"cublasGemmEx failed for {precision} {m}x{n}x{k} "
                               f"({compute_name(precision)}, C {c_type}): {exc}") from None
