"""A softmax's bound, per element and per row (notes/verification.md, "Softmax: every row, a
fast exponential, a normaliser off by 1e-5").

Per element: a right kernel computes ``y_j = e_j (1 + d_j) / (S (1 + eta))`` rounded, where
``e_j = exp(x_j - m)``, ``d_j`` is its exponential's error (the function's own, at most
:data:`EXP_UNIT` relative, what ``__expf`` gives, plus the argument's rounding, ``|x_j - m|``
u32 amplified by exp) and ``eta`` the normaliser's error: the sum of the computed exponentials
(``sum_k r_k d_k``, at most EXP_UNIT + 1.2 u32 ln(COLS), since ``sum_k r_k |x_k - m| <=
ln(COLS)``: the softmax's entropy), its FP32 summation (a random walk, in any order at most
``2 sqrt(COLS) u32``), and the division (2 u32). Hence

    |y_j - r_j| <= r_j (u_out + 2 EXP_UNIT + (2 sqrt(COLS) + 4) u32
                        + 1.2 (|x_j - m| + ln COLS) u32) + the smallest normal.

That bound cannot see a normaliser a little off (1e-5 at 32K columns is 0.4 of its sqrt(COLS)
term), so the rows are judged together too. A row's outputs add up to one up to the
normaliser's summation error (the exponentials' own errors cancel: they are in the numerator
and the denominator alike), the division and the outputs' rounding. Over the rows the first
and last are random with mean zero (round to nearest), so the mean excess over R rows is

    |mean_r (sum_j y_rj - 1)| <= BIAS + 6 sqrt(mean_r sigma_r^2 / R),
    sigma_r^2 = u32^2 COLS / 3 + u_out^2 sum_j r_rj^2,

with BIAS = 4 u32 + 2 EXP_UNIT: a reciprocal or division biased by up to 2 ulp, and an online
kernel whose rescaled normaliser carries exponentials the outputs do not. A normaliser off by
1e-5 fails from about 20 rows at 32K columns (10 at 16K); the timed sizes have thousands.
"""

from __future__ import annotations

import math

import numpy as np

U32 = 2.0**-24
EXP_UNIT = 2.0**-21
"""The relative error of an exponential a right kernel may use (``__expf``: ex2.approx of a
rounded product)."""
BIAS = 4.0 * U32 + 2.0 * EXP_UNIT
"""What the mean excess of a row's sum over one may hold that is not random (docstring)."""
SIGMAS = 6.0
"""Standard deviations of the mean excess a right kernel stays within."""


def element_bound(x: np.ndarray, r: np.ndarray, out_unit: float) -> np.ndarray:
    """|y - r| allowed per element of rows ``x`` (float64) whose softmax is ``r``."""
    cols = x.shape[1]
    m = x.max(axis=1, keepdims=True)
    rel = (out_unit + 2.0 * EXP_UNIT + (2.0 * math.sqrt(cols) + 4.0) * U32
           + 1.2 * (np.abs(x - m) + math.log(cols)) * U32)
    return r * rel + 2.0**-126


RULE = ("r (u + 2 u_exp + (2 sqrt(COLS) + 4) u32 + 1.2 (|x - max| + ln COLS) u32); rows: "
        "|mean(sum y - 1)| <= 4 u32 + 2 u_exp + 6 sigma / sqrt(ROWS)")


def row_excess(got: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Each row's sum of outputs less its reference's (float64, finite outputs only)."""
    return np.where(np.isfinite(got), got, 0.0).sum(axis=1) - r.sum(axis=1)


def row_variance(r: np.ndarray, out_unit: float) -> np.ndarray:
    """sigma_r^2 of each row's excess (docstring)."""
    return U32**2 * r.shape[1] / 3.0 + out_unit**2 * np.square(r).sum(axis=1)


def rows_verdict(excess_sum: float, variance_sum: float, rows: int) -> tuple[bool, float, str]:
    """Whether ``rows`` rows whose excesses add up to ``excess_sum`` and whose variances to
    ``variance_sum`` are normalised as a right kernel's are; the mean excess as a multiple of
    its bound, and a story when not."""
    if rows == 0:
        return True, 0.0, ""
    mean = excess_sum / rows
    bound = BIAS + SIGMAS * math.sqrt(variance_sum / rows / rows)
    ratio = abs(mean) / bound
    if ratio <= 1.0:
        return True, ratio, ""
    return False, ratio, (f"misnormalised: over {rows} rows the outputs add up to 1 "
                          f"{mean:+.3g} on average (bound +-{bound:.3g}: "
                          "4 u32 + 2 u_exp + 6 sigma / sqrt(ROWS)); every row is scaled "
                          f"by about {1.0 + mean:.8g}: its normalising sum is off")
