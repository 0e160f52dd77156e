"""Kept timed outputs judged at sampled query rows (timed.py): which rows, how they are read
from either layout, and the kind's verdict on them against the reference at those rows."""

from __future__ import annotations

import numpy as np

from harness.kinds.attention import numerics
from harness.kinds.attention.problem import AttentionProblem

SAMPLED_ROWS = 48
"""Random query rows checked per kept output, beside each head's first and last row."""


def sampled_rows(problem: AttentionProblem, rng: np.random.Generator,
                 count: int = SAMPLED_ROWS) -> np.ndarray:
    """(b, h, i) triples: the first and last query row of every head, then ``count`` random
    rows, no repeats."""
    b, h, s = problem["B"], problem["H"], problem["S_q"]
    rows = {(bi, hi, i) for bi in range(b) for hi in range(h) for i in (0, s - 1)}
    total = b * h * s
    for flat in rng.choice(total, size=min(count, total), replace=False):
        flat = int(flat)
        rows.add((flat // (h * s), flat // s % h, flat % s))
    return np.array(sorted(rows), dtype=np.int32)


def rows_of(raw: np.ndarray, rows: np.ndarray, problem: AttentionProblem, layout: str
            ) -> np.ndarray:
    """The ``rows`` (b, h, i) of an output held flat in ``layout`` (bhsd or bshd), as
    ``[1, 1, len(rows), D]``."""
    b, h, s, d = problem["B"], problem["H"], problem["S_q"], problem["D"]
    if layout == "bhsd":
        shaped = raw.reshape(b, h, s, d)
        picked = shaped[rows[:, 0], rows[:, 1], rows[:, 2]]
    else:
        shaped = raw.reshape(b, s, h, d)
        picked = shaped[rows[:, 0], rows[:, 2], rows[:, 1]]
    return picked[None, None]


def judge_rows(spec, problem: AttentionProblem, raw_rows: np.ndarray, ref,
               lse_rows: np.ndarray | None = None) -> numerics.Verdict:
    """Sampled output rows (16-bit patterns, ``[1, 1, R, D]``) and, for a kernel that writes
    it, their log-sum-exp (FP32, ``[1, 1, R]``) against the reference at those rows."""
    from harness.kinds.attention.reference import exact
    poison = numerics.BF16_POISON if spec.precision == "bf16" else numerics.FP16_POISON
    unwritten = raw_rows == poison
    values = raw_rows if spec.precision == "bf16" else raw_rows.view(np.float16)
    o = exact(values, spec.precision)
    arithmetic = numerics.Arithmetic(spec.precision,
                                     spec.kind_spec.p_precision(spec.precision))
    lse = lse_unwritten = None
    if lse_rows is not None:
        lse_rows = np.asarray(lse_rows, dtype=np.float32)
        lse_unwritten = lse_rows.view(np.uint32) == np.uint32(numerics.LSE_POISON)
        lse = lse_rows.astype(np.float64)
    return numerics.judge(o, unwritten, ref, arithmetic, problem["S_kv"], lse=lse,
                          lse_unwritten=lse_unwritten)


def lse_rows_of(raw: np.ndarray, rows: np.ndarray, problem: AttentionProblem) -> np.ndarray:
    """The ``rows`` (b, h, i) of a log-sum-exp held as ``[B, H, S_q]`` FP32, as
    ``[1, 1, len(rows)]``."""
    shaped = np.asarray(raw, dtype=np.float32).reshape(problem["B"], problem["H"],
                                                       problem["S_q"])
    return shaped[rows[:, 0], rows[:, 1], rows[:, 2]][None, None]
