"""The random walk of the tensor core's window truncations over an FP8 GEMM's K steps: each
output's bound (check.py's module docstring has the formula)."""

from __future__ import annotations

import numpy as np

from harness.kinds.gemm.fp8.formats import FORMATS, K_STEP, WINDOW_PLACES
from harness.kinds.gemm.fp8.gemm import BLOCK_K, Fp8Gemm, _by_rows, block_scales


def walk(g: Fp8Gemm) -> np.ndarray:
    """Each output's random walk of the window's truncations (module docstring), in the
    output's units (its scales applied). In float32, a bound's size needs no more; a large
    one in blocks of rows on chunked.py's threads (numpy lets go of the GIL): the walk over
    K / 32 steps of the whole output is most of a check's host time."""
    return np.vstack(_by_rows(g, _walk))

WALK_CHUNK = 1 << 15
"""Outputs per chunk of rows of a walk: its five working arrays (float32) stay in a core's
cache through the K steps, where a block of a thread's rows at once streamed them from memory
in every step (7 passes a step: 99 s of thread time over the two FP8 files' rows, issue 37)."""


def _walk(g: Fp8Gemm) -> np.ndarray:
    return walk_of_sums(g, walk_sums(g))


def walk_sums(g: Fp8Gemm) -> np.ndarray:
    """Each output's float32 sum over k32 steps of (scale M_j)^2 on the host, the scale
    applied per block (:func:`walk_of_sums` makes the walk of it); by chunks of rows that stay
    in a core's cache (:data:`WALK_CHUNK`)."""
    av, bv = (x.astype(np.float32) for x in g.values())
    (m, k), n = av.shape, bv.shape[1]
    run = g.steps()
    steps = -(-k // K_STEP)
    # each step's largest |A| per row and |B| per column, for all steps at once
    pad = steps * K_STEP - k
    a_max = np.abs(np.pad(av, ((0, 0), (0, pad)))).reshape(m, steps, K_STEP).max(axis=2)
    b_max = np.abs(np.pad(bv, ((0, pad), (0, 0)))).reshape(steps, K_STEP, n).max(axis=1)
    var = np.empty((m, n), dtype=np.float32)
    rows = max(1, WALK_CHUNK // max(n, 1))
    shape = (min(rows, m), n)
    partial, step, product = (np.empty(shape, dtype=np.float32) for _ in range(3))
    for lo in range(0, m, rows):
        hi = min(m, lo + rows)
        v, p, st, pr = var[lo:hi], partial[:hi - lo], step[:hi - lo], product[:hi - lo]
        v[:] = 0.0
        scale = None
        for j, start in enumerate(range(0, k, K_STEP)):
            stop = min(k, start + K_STEP)
            if start % run == 0:
                p[:] = 0.0  # promoted: the tensor core starts again from zero
            if g.blocked and start % BLOCK_K == 0:  # a block's scales, once per block
                scale = block_scales(g, start, stop, slice(lo, hi)).astype(np.float32)
            np.multiply(a_max[lo:hi, j, None], b_max[None, j], out=st)
            np.abs(p, out=pr)
            np.maximum(st, pr, out=st)
            if scale is not None:
                st *= scale
            np.multiply(st, st, out=st)
            v += st
            np.matmul(av[lo:hi, start:stop], bv[start:stop], out=pr)
            p += pr
    return var


def walk_of_sums(g: Fp8Gemm, var: np.ndarray) -> np.ndarray:
    """The walk from each output's sum over steps of (scale M_j)^2 (``var``, float32, the
    scale applied per block; per tensor, here): the module docstring's formula, its factor
    and square root in float64 (also the GPU's sums, harness/gpu/fp8_walk.py)."""
    factor = 11.0 * ((1 + 2.0 ** -6) * 2.0 ** -WINDOW_PLACES) ** 2
    if not g.blocked:
        factor *= float(block_scales(g, 0, g.a.shape[1])) ** 2
    return np.sqrt(var.astype(np.float64) * factor)


def walk_with(g: Fp8Gemm, sums) -> np.ndarray:
    """:func:`walk` of ``g`` with its sums made by ``sums`` (the GPU's:
    harness/gpu/fp8_walk.Fp8WalkKernels.sums), from the codes, each format's 256 values, the
    promotion run and, per block, the scales."""
    scales = (g.scale_a, g.scale_b) if g.blocked else (None, None)
    return walk_of_sums(g, sums(g.a, g.b, FORMATS[g.a_format].values,
                                FORMATS[g.b_format].values, g.steps(), *scales))
