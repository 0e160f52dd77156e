"""Where a check's float64 reference is made, and an FP8 GEMM's walk: on the host, or on the
open session's GPU from gpu.reference.MIN_MNK on (where it costs less than numpy's). The
session sets its engine when it opens and takes it back when it closes; the checks ask here
(:func:`known_of`) on the device's thread before their comparisons run on others."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from harness.gpu import reference as gpu_reference
from harness.kinds.gemm import operands
from harness.kinds.gemm.fp8 import check as fp8_check
from harness.kinds.gemm.gemm import LoadedGemm

_GPU_REFERENCES: list[tuple[operands.ReferenceEngine, Callable[[], bool]] | None] = [None]
"""The engine the checks' large references go to, and what says whether it can take them."""
WalkSums = Callable[..., np.ndarray]  # an FP8 walk's sums: gpu/fp8_walk.Fp8WalkKernels.sums
_GPU_WALKS: list[WalkSums | None] = [None]


def set_gpu_references(engine: operands.ReferenceEngine | None,
                       ready: Callable[[], bool] = lambda: True,
                       walks: WalkSums | None = None) -> None:
    """From now on the references of checks of gpu.reference.MIN_MNK or more are computed by
    ``engine`` (BenchSession sets its cuBLAS DGEMM when it opens and takes it back when it
    closes) where ``ready()`` says it can, asked when the first such reference is wanted
    (whether cuBLAS's bindings import: the import may still run on another thread, and a
    battery's small checks need not wait for it); None: every one on the host. ``walks``: an
    FP8 check's walk (over all it bounds: the output, or its sample) is made by it where the
    reference is made on the GPU (:func:`walk_of`); None: on the host."""
    _GPU_REFERENCES[0] = None if engine is None else (engine, ready)
    _GPU_WALKS[0] = None if engine is None else walks


def release_gpu_references(engine: operands.ReferenceEngine) -> None:
    """Back to the host, unless another engine than ``engine`` has been set since."""
    if _GPU_REFERENCES[0] is not None and _GPU_REFERENCES[0][0] == engine:
        _GPU_REFERENCES[0] = None
        _GPU_WALKS[0] = None


def reference_engine(m: int, n: int, k: int) -> operands.ReferenceEngine | None:
    """What computes an m x n x k check's reference: the open session's GPU from
    gpu.reference.MIN_MNK on (where it costs less than numpy's), else None (the host)."""
    chosen = _GPU_REFERENCES[0]
    if chosen is None or m * n * k < gpu_reference.MIN_MNK:
        return None
    engine, ready = chosen
    return engine if ready() else None


def reference_of(gemm: LoadedGemm, ops: operands.Operands, seed: int, alpha: float,
                 beta: float) -> tuple[np.ndarray, np.ndarray]:
    """The float64 reference of ``ops`` at alpha, beta and its error scale, under the one key
    every caller shares (a large size's is computed once for every kernel on the same
    inputs), on the GPU where :func:`reference_engine` says so."""
    spec = gemm.kernel.spec
    # an FP8 GEMM's key names its scales' kind too: per tensor and per block draw the same
    # codes from a seed, and different scales (the values a64 and b64 hold)
    return operands.reference(ops, (ops.m, ops.n, ops.k, seed, spec.precision, spec.c_type,
                                     alpha, beta, ops.draw, ops.kinds, *operands.fp8_key(spec)),
                              alpha, beta, reference_engine(ops.m, ops.n, ops.k))


def walk_of(gemm: LoadedGemm, ops: operands.Operands, seed: int) -> np.ndarray | None:
    """An FP8 GEMM's walk (fp8_check.walk) over the rows and columns its check on ``seed``
    bounds (fp8_check.sample), made on the GPU where its reference is (:func:`reference_engine`;
    None: the check walks on the host). On the device's thread only, as references are."""
    walks = _GPU_WALKS[0]
    m, n, k = ops.m, ops.n, ops.k
    if ops.fp8 is None or walks is None or reference_engine(m, n, k) is None:
        return None
    a, b = ops.codes
    rows, cols = fp8_check.sample(m, n, k, seed)
    if not fp8_check.whole(m, n, k):
        a, b = a[rows], b[:, cols]
    g = fp8_check.Fp8Gemm(a, b, ops.fp8.a, ops.fp8.b,
                          *fp8_check.subset(ops.scales, rows, cols, n),
                          out=gemm.kernel.spec.c_type, promote=ops.fp8.promote)
    with operands.PHASES("references"):
        return fp8_check.walk_with(g, walks)


def known_of(gemm: LoadedGemm, ops: operands.Operands, seed: int, alpha: float, beta: float
             ) -> tuple:
    """What a check's comparisons on ``seed`` need made on the device's thread before they
    run on others: the reference and its error scale (:func:`reference_of`) and an FP8
    GEMM's walk (:func:`walk_of`, or None)."""
    return (*reference_of(gemm, ops, seed, alpha, beta), walk_of(gemm, ops, seed))
