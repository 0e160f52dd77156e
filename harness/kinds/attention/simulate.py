"""Host simulations of attention kernels in FP32, right and wrong, for proving the verdicts
without a GPU: :func:`online` is FlashAttention-2's arithmetic (key tiles in any order and of
any size, the running maximum, P rounded to the input type before it meets V, FP32 sums); its
options make each named mistake.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.kinds.attention.reference import exact, stored

F32 = np.float32


@dataclass(frozen=True)
class Mistakes:
    """Which mistake a simulated kernel makes (none by default)."""

    no_running_max: bool = False
    """exp(x) without subtracting the row's maximum."""
    scale_factor: float = 1.0
    """Multiplies the softmax scale (log2 e: exp2 applied to natural-log logits)."""
    mask_offset: int = 0
    """Moves the causal diagonal (-1 leaves the diagonal out)."""
    top_left: bool = False
    """Aligns the causal mask to the top-left corner."""
    unwritten_row: int | None = None
    """A query row the kernel never writes (the poison stays)."""
    lse_log2: bool = False
    """Writes the log-sum-exp in log2 units."""
    accumulate_16: bool = False
    """Accumulates P V in the input type (an f16-accumulating mma)."""


def _round(x: np.ndarray, precision: str) -> np.ndarray:
    if precision == "fp32":
        return x.astype(F32)
    return exact(stored(x, precision), precision).astype(F32)


def online(q, k, v, scale: float, causal: bool, precision: str, *, p_type: str | None = None,
           rng: np.random.Generator | None = None, tile: int | None = None,
           mistakes: Mistakes | None = None):
    """(o, lse, o_unwritten) as a tiled online-softmax kernel would write them: ``o`` float64
    of the output type's values ``[B, H, S_q, D]``, ``lse`` FP32 values, ``o_unwritten`` True
    where the poison stayed. ``rng`` shuffles the key order and picks tile sizes; ``p_type``
    (default: ``precision``) is the type P is rounded to before P V."""
    rng = rng or np.random.default_rng(0)
    mistakes = mistakes or Mistakes()
    p_type = p_type or precision
    b, h, s_q, d = q.shape
    s_kv = k.shape[2]
    group = h // k.shape[1]
    o = np.zeros((b, h, s_q, d))
    lse = np.zeros((b, h, s_q))
    unwritten = np.zeros((b, h, s_q, d), dtype=bool)
    s = F32(scale * mistakes.scale_factor)
    diagonal = (0 if mistakes.top_left else s_kv - s_q) + mistakes.mask_offset
    rows = np.arange(s_q)[:, None]
    for bi in range(b):
        for hi in range(h):
            qq = q[bi, hi].astype(F32)
            kk, vv = k[bi, hi // group].astype(F32), v[bi, hi // group].astype(F32)
            order = rng.permutation(s_kv)
            size = tile or int(rng.choice([16, 32, 64, 128]))
            m = np.full(s_q, -np.inf, dtype=F32)
            lsum = np.zeros(s_q, dtype=F32)
            acc = np.zeros((s_q, d), dtype=F32)
            for start in range(0, s_kv, size):
                keys = order[start:start + size]
                x = (qq @ kk[keys].T) * s
                if causal:
                    x = np.where(keys[None, :] <= rows + diagonal, x, F32(-np.inf))
                if mistakes.no_running_max:
                    with np.errstate(over="ignore"):
                        p = np.exp(x).astype(F32)
                    alpha = np.ones(s_q, dtype=F32)
                else:
                    m_new = np.maximum(m, x.max(axis=1))
                    safe = np.where(np.isfinite(m_new), m_new, F32(0))
                    alpha = np.exp(np.where(np.isfinite(m), m - safe, -np.inf)).astype(F32)
                    p = np.exp(x - safe[:, None]).astype(F32)
                    m = m_new
                lsum = alpha * lsum + p.sum(axis=1, dtype=F32)
                pr = _round(p, p_type)
                with np.errstate(invalid="ignore", over="ignore"):
                    if mistakes.accumulate_16:
                        acc = alpha[:, None] * acc
                        for c in range(0, len(keys), 16):
                            part = pr[:, c:c + 16] @ vv[keys[c:c + 16]]
                            acc = _round(acc + part, precision)
                    else:
                        acc = alpha[:, None] * acc + pr @ vv[keys]
            with np.errstate(invalid="ignore", divide="ignore"):
                out = np.where(lsum[:, None] > 0, acc / np.where(lsum > 0, lsum, 1)[:, None],
                               F32(0))
                mm = m if not mistakes.no_running_max else np.zeros(s_q, dtype=F32)
                row_lse = np.where(lsum > 0, mm + np.log(np.where(lsum > 0, lsum, 1)),
                                   -np.inf).astype(F32)
            if mistakes.lse_log2:
                row_lse = (row_lse * F32(math.log2(math.e))).astype(F32)
            o[bi, hi] = _round(out, precision)
            lse[bi, hi] = row_lse
    if mistakes.unwritten_row is not None:
        unwritten[:, :, mistakes.unwritten_row] = True
    return o, lse, unwritten
