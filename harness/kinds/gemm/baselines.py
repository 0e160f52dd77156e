"""The GEMM kind's baselines by name: cuBLAS (FP32, TF32, BF16, FP16 with FP32 accumulate, the
compute type named exactly) and cuBLASLt FP8 (an FP8 GEMM's scales and formats), each a
:class:`~harness.kinds.base.Baseline` on a GEMM's operands (kinds/gemm/operands.py)."""

from __future__ import annotations

from typing import Any

from harness.gpu.cublas import Cublas, baseline_precision
from harness.gpu.cublas import compute_name as cublas_compute_name
from harness.kinds.base import Baseline, Baselines
from harness.kinds.dims import Problem

CUBLAS = "cuBLAS"
CUBLASLT_FP8 = "cuBLASLt FP8"


class CublasGemm(Baseline):
    """cuBLAS (or cuBLASLt, for FP8) with a kernel's types and layouts on its operands, alpha
    1 and beta 0, writing the operands' own baseline output (``Operands.blas_out``)."""

    def __init__(self, spec: Any, problem: Problem, blas: Cublas | None = None,
                 plain: bool = False):
        self.spec, self.problem = spec, problem
        self.precision = (spec.precision if plain else
                          baseline_precision(spec.precision, getattr(spec, "fp32_via", "")))
        """What cuBLAS computes: the kernel's precision, or for an FP32 kernel on tensor cores
        (``fp32_via``) the same scheme (cublas.baseline_precision); ``plain``: plain SGEMM."""
        self.name = _choose(spec)
        self.compute = compute_name(spec)
        self._blas, self._own_blas, self._ops = blas, blas is None, None

    def version(self) -> str:
        return self._blas.version if self._blas is not None else ""

    def prepare(self, operands: Any) -> None:
        if self._blas is None:
            self._blas = Cublas(operands.stream)
        self._ops = operands

    def launch(self) -> None:
        ops, spec = self._ops, self.spec
        self._blas.gemm(self.precision, ops.m, ops.n, ops.k, 1.0, ops.a.address, ops.b.address,
                        0.0, ops.blas_out.address, spec.layout_b, spec.c_type,
                        layout_a=ops.layout_a, layout_c=ops.layout_c, fp8=ops.blas_fp8)

    def close(self) -> None:
        self._ops = None
        if self._own_blas and self._blas is not None:
            close = getattr(self._blas, "close", None)
            if close is not None:
                close()
            self._blas = None


def compute_name(spec: Any) -> str:
    """The compute type the baseline of ``spec`` runs, named exactly."""
    return cublas_compute_name(spec.precision, spec)


def _choose(spec: Any) -> str:
    return CUBLASLT_FP8 if spec.precision == "fp8" else CUBLAS


BASELINES = Baselines({CUBLAS: CublasGemm, CUBLASLT_FP8: CublasGemm}, choose=_choose)
"""Name -> factory ``(spec, problem) -> Baseline``; an FP8 kernel's is cuBLASLt FP8, any
other's cuBLAS."""
