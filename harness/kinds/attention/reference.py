"""The host reference: attention in float64 from the inputs exactly as stored, and the terms the
error bound is built from (numerics.py).

Arrays here are in the logical layout ``[B, heads, S, D]`` (BHSD); :func:`to_layout` and
:func:`from_layout` move between it and a kernel's declared layout. Inputs travel as 16-bit
patterns (BF16 as ``uint16``, FP16 as ``float16``); the reference reads their exact values, so
the only error left to judge is the kernel's arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.errors import HarnessError

LAYOUTS = ("bhsd", "bshd")
PRECISIONS = ("bf16", "fp16")
ROWS_PER_BLOCK = 256
"""Query rows the reference holds at once per head (bounds its memory at S_kv = 16K)."""


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 rounded to BF16 (to nearest, ties to even), as its 16-bit patterns."""
    raw = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((raw + ((raw >> 16) & 1) + 0x7FFF) >> 16).astype(np.uint16)


def bf16_to_float(raw: np.ndarray) -> np.ndarray:
    return (np.asarray(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def stored(values: np.ndarray, precision: str) -> np.ndarray:
    """float values rounded to ``precision``'s storage (BF16 as uint16 patterns, FP16 as
    float16), round to nearest even."""
    if precision == "bf16":
        return bf16_bits(np.asarray(values, dtype=np.float32))
    if precision == "fp16":
        return np.asarray(values, dtype=np.float32).astype(np.float16)
    raise HarnessError(f"attention inputs are {' or '.join(PRECISIONS)}, found {precision!r}")


def exact(raw: np.ndarray, precision: str) -> np.ndarray:
    """The float64 values of stored 16-bit inputs."""
    if precision == "bf16":
        return bf16_to_float(np.asarray(raw, dtype=np.uint16)).astype(np.float64)
    return np.asarray(raw, dtype=np.float16).astype(np.float64)


def to_layout(x: np.ndarray, layout: str) -> np.ndarray:
    """A logical ``[B, heads, S, D]`` array in ``layout``'s memory order (contiguous)."""
    if layout == "bhsd":
        return np.ascontiguousarray(x)
    if layout == "bshd":
        return np.ascontiguousarray(x.transpose(0, 2, 1, 3))
    raise HarnessError(f"layout must be one of {', '.join(LAYOUTS)}, found {layout!r}")


def from_layout(x: np.ndarray, layout: str) -> np.ndarray:
    """The logical ``[B, heads, S, D]`` view of an array held in ``layout``'s order."""
    if layout == "bhsd":
        return x
    if layout == "bshd":
        return x.transpose(0, 2, 1, 3)
    raise HarnessError(f"layout must be one of {', '.join(LAYOUTS)}, found {layout!r}")


def causal_mask(s_q: int, s_kv: int, rows: slice | None = None) -> np.ndarray:
    """True where query i may see key j: ``j <= i + S_kv - S_q`` (bottom-right aligned)."""
    rows = rows or slice(0, s_q)
    i = np.arange(rows.start, rows.stop)[:, None]
    j = np.arange(s_kv)[None, :]
    return j <= i + (s_kv - s_q)


@dataclass(frozen=True)
class Reference:
    """Attention's exact output and the magnitudes its error bound needs, all float64,
    ``[B, H, S_q, D]`` (``lse``, ``m`` and the per-row terms ``[B, H, S_q]``)."""

    o: np.ndarray
    lse: np.ndarray
    """Natural log of the row's sum of exp(logits): ``m + log(sum exp(x - m))``; -inf for a
    row that sees no key."""
    m: np.ndarray
    """The row's largest logit (after the scale)."""
    abs_pv: np.ndarray
    """``sum_j p_ij |v_jd|``: the size of what the output adds up."""
    spread_pv: np.ndarray
    """``sqrt(sum_j (p_ij rho_ij v_jd)^2)``: the spread of independent relative errors rho_ij
    on the probabilities (numerics.py)."""
    spread_p: np.ndarray
    """``sqrt(sum_j (p_ij rho_ij)^2)`` (the normaliser's share)."""


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, causal: bool,
              rho=None) -> Reference:
    """Attention of float64 ``q [B, H, S_q, D]``, ``k, v [B, H_kv, S_kv, D]``.

    ``rho(x, m, qk_spread)`` gives each probability's relative error scale for the bound (x the
    scaled logits, m the row maxima, qk_spread the logits' own rounding scale); None leaves
    the spread terms 0.
    """
    b, h, s_q, d = q.shape
    h_kv, s_kv = k.shape[1], k.shape[2]
    if h % h_kv or k.shape != v.shape or k.shape[0] != b or k.shape[3] != d:
        raise HarnessError(f"attention shapes disagree: q {q.shape}, k {k.shape}, v {v.shape}")
    group = h // h_kv
    o = np.zeros((b, h, s_q, d))
    abs_pv = np.zeros_like(o)
    spread_pv = np.zeros_like(o)
    lse = np.full((b, h, s_q), -np.inf)
    m_out = np.full((b, h, s_q), -np.inf)
    spread_p = np.zeros((b, h, s_q))
    for bi in range(b):
        for hi in range(h):
            kk, vv = k[bi, hi // group], v[bi, hi // group]
            for start in range(0, s_q, ROWS_PER_BLOCK):
                rows = slice(start, min(start + ROWS_PER_BLOCK, s_q))
                qq = q[bi, hi, rows]
                x = scale * (qq @ kk.T)
                if causal:
                    x = np.where(causal_mask(s_q, s_kv, rows), x, -np.inf)
                m = x.max(axis=1)
                seen = np.isfinite(m)
                shifted = np.where(seen[:, None], x - np.where(seen, m, 0)[:, None], -np.inf)
                e = np.exp(shifted)
                total = e.sum(axis=1)
                p = e / np.where(seen, total, 1.0)[:, None]
                o[bi, hi, rows] = p @ vv
                abs_pv[bi, hi, rows] = p @ np.abs(vv)
                lse[bi, hi, rows] = np.where(seen, m + np.log(np.where(seen, total, 1.0)),
                                             -np.inf)
                m_out[bi, hi, rows] = m
                if rho is not None:
                    qk = np.abs(scale) * np.sqrt((qq * qq) @ (kk * kk).T)
                    r = rho(np.where(np.isfinite(x), x, 0.0), np.where(seen, m, 0.0), qk)
                    pr = p * r
                    spread_pv[bi, hi, rows] = np.sqrt((pr * pr) @ (vv * vv))
                    spread_p[bi, hi, rows] = np.sqrt((pr * pr).sum(axis=1))
    return Reference(o, lse, m_out, abs_pv, spread_pv, spread_p)
