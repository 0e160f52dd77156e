"""One FP8 GEMM's inputs (codes, formats, scales, output type, promotion), its exact reference,
and the walks of its outputs taken in blocks of rows on several threads."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from harness.bench.threads import host_threads
from harness.kinds.gemm.chunked import pool
from harness.kinds.gemm.fp8.formats import FORMATS, K_STEP

BLOCK_K = 128
"""The k extent of a block scale (A: 1 x 128 per row, B: 128 x 128)."""
@dataclass(frozen=True)
class Fp8Gemm:
    """One FP8 GEMM's inputs: codes, formats, scales, output type and how the kernel promotes.

    ``scale_a`` and ``scale_b``: floats (per tensor), or arrays of shape (M, K / 128) and (K / 128,
    N / 128) (per block; B's also (K / 128, N), one per column: :func:`subset`). ``promote``: the
    products a kernel adds on the tensor core before it promotes into FP32 (a multiple of 32; None:
    all of K, as per-tensor kernels do; block scales need a promotion at least every 128)."""

    a: np.ndarray
    b: np.ndarray
    a_format: str
    b_format: str
    scale_a: float | np.ndarray
    scale_b: float | np.ndarray
    out: str = "bf16"
    promote: int | None = None

    @property
    def blocked(self) -> bool:
        return np.ndim(self.scale_a) > 0

    def values(self) -> tuple[np.ndarray, np.ndarray]:
        """A and B's exact values, unscaled."""
        return FORMATS[self.a_format].decode(self.a), FORMATS[self.b_format].decode(self.b)

    def steps(self) -> int:
        """Products per run on the tensor core between promotions."""
        k = self.a.shape[1]
        run = self.promote or k
        if self.blocked:
            run = min(run, BLOCK_K)
        return run


def block_scales(g: Fp8Gemm, start: int, stop: int, rows: slice = slice(None)
                  ) -> np.ndarray:
    """The scale of each output (of ``rows`` only) for the products of k in [start, stop) (one
    block's)."""
    if not g.blocked:
        return np.asarray(float(g.scale_a) * float(g.scale_b))
    blk = start // BLOCK_K
    sa = np.asarray(g.scale_a, dtype=np.float64)[rows, blk][:, None]
    sb = np.asarray(g.scale_b, dtype=np.float64)[blk]
    if sb.shape[0] != g.b.shape[1]:  # one per 128 columns, not one per column
        sb = np.repeat(sb, BLOCK_K)[:g.b.shape[1]]
    return sa * sb[None, :]


def reference(g: Fp8Gemm, a: np.ndarray | None = None, b: np.ndarray | None = None
              ) -> np.ndarray:
    """D = (A x scales) @ (B x scales) in float64 from the exact values (``a``, ``b``: other
    values of the operands, for the findings)."""
    av, bv = g.values()
    av, bv = (av if a is None else a), (bv if b is None else b)
    if not g.blocked:
        return (av @ bv) * float(g.scale_a) * float(g.scale_b)
    k = av.shape[1]
    out = np.zeros((av.shape[0], bv.shape[1]))
    for start in range(0, k, BLOCK_K):
        stop = min(k, start + BLOCK_K)
        out += (av[:, start:stop] @ bv[start:stop]) * block_scales(g, start, stop)
    return out


SPLIT_WORK = 1 << 21
"""Outputs times k steps from which a walk is taken in blocks of rows on several threads."""

def _rows(g: Fp8Gemm, lo: int, hi: int) -> Fp8Gemm:
    """Rows [lo, hi) of ``g``'s output: A's rows and, per block, their scales."""
    return replace(g, a=g.a[lo:hi], scale_a=g.scale_a[lo:hi] if g.blocked else g.scale_a)


def _by_rows(g: Fp8Gemm, work, *arrays: np.ndarray) -> list:
    """``work(rows of g, rows of each array)`` over blocks of the output's rows, on chunked.py's
    threads where the output is large enough (one block otherwise), in row order."""
    m, k = g.a.shape
    blocks = min(host_threads(), m // 32)
    if m * g.b.shape[1] * -(-k // K_STEP) < SPLIT_WORK or blocks < 2:
        return [work(g, *arrays)]
    edges = np.linspace(0, m, blocks + 1).astype(int)
    spans = list(zip(edges[:-1], edges[1:], strict=True))
    return list(pool().map(lambda span: work(_rows(g, *span),
                                             *(x[span[0]:span[1]] for x in arrays)), spans))



def subset(scales: tuple, rows: np.ndarray, cols: np.ndarray, n: int) -> tuple:
    """The scales of the outputs at ``rows`` x ``cols`` of an N-wide output: per tensor as
    they are; per block, A's rows and B's per column (K / 128 x len(cols))."""
    sa, sb = scales
    if not np.ndim(sa):
        return sa, sb
    sb = np.asarray(sb, dtype=np.float64)
    if sb.shape[1] != n:
        sb = np.repeat(sb, BLOCK_K, axis=1)[:, :n]
    return np.asarray(sa, dtype=np.float64)[rows], sb[:, cols]
