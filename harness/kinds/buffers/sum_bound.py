"""A sum's bound from the statistics of its own inputs (notes/verification.md, "A sum bound
that sampling cannot meet").

FP32 summation in any order is a tree of additions; each rounds its partial sum S by at most
half an ulp, a variance of at most u32^2 S^2 / 3, independent from one to the next. The
partial sums that matter are those of the longest chain of additions: for a right kernel a
chain of ``c`` terms of ``n / c`` elements each (one thread's loop, or the atomics into one
address) has partial sums ``j (n / c) mean + sqrt(j n / c) rms`` at its j-th step, so

    var <= u32^2 / 3 * (r^2 c / 3 + n c m2 / 2),

``r`` the sum, ``m2`` the inputs' mean square. A single FP32 accumulator longer than
:data:`LONGEST_CHAIN` stalls (adds under half an ulp are lost: notes/sum.md), so c <=
min(n, LONGEST_CHAIN). The bound is u_out |r| (the output's rounding) plus six standard
deviations, plus ``4 sqrt(n) u32 max|x|`` for small n where six deviations of few roundings
are not enough, and never more than the bound it replaces, ``2 sqrt(n) u32 sum|x|``.

Skipping a fraction f of the elements costs ``f r + sqrt(f n) rms``: against the first term
2 u32 sqrt(c) |r| <= 4.9e-4 |r|, against the second sqrt(f) / (6 u32 sqrt(c / 6)) > 50 at f =
1e-3 and c = 2^24. What it cannot see: a sampler that scales up what it read errs by about
``sqrt(n / f) rms`` at random, which a draw with a large mean (r^2 c / 3 dominating) hides
from n ~ 2^26 on; a draw of mean zero catches it at every n.
"""

from __future__ import annotations

import math

import numpy as np

U32 = 2.0**-24
LONGEST_CHAIN = 1 << 24
"""The most FP32 additions in one chain a right sum makes (the ladder's sum_01_atomic at
2^24; sum_02_smem_tree's 2^20 block partials at 2^28)."""
SIGMAS = 6.0


def bound(x: np.ndarray, r: float, out_unit: float) -> float:
    """The bound on |out - r| for a sum of ``x`` (float64) whose exact value is ``r``."""
    n = x.size
    if n == 0:
        return out_unit * abs(r)
    return of_statistics(n, r, float(np.dot(x, x)) / n,  # no n-element temporary
                         max(float(x.max()), -float(x.min())),
                         float(np.abs(x).sum(dtype=np.float64)), out_unit)


def of_statistics(n: int, r: float, m2: float, max_abs: float, abs_sum: float,
                  out_unit: float) -> float:
    """:func:`bound` from the inputs' count, sum, mean square, largest magnitude and sum of
    magnitudes (what a simulation at 2^30 needs, without 2^30 elements)."""
    chain = min(n, LONGEST_CHAIN)
    variance = U32**2 / 3.0 * (r * r * chain / 3.0 + n * chain * m2 / 2.0)
    walk = SIGMAS * math.sqrt(variance) + 4.0 * math.sqrt(n) * U32 * max_abs
    old = 2.0 * math.sqrt(n) * U32 * abs_sum
    return out_unit * abs(r) + min(walk, old)


RULE = ("sum of {n}: u|r| + min(6 u32 sqrt((r^2 c/3 + n c m2/2)/3) + 4 sqrt(n) u32 max|x|, "
        "2 sqrt(n) u32 sum|x|), c = min(n, 2^24)")
