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
and the denominator alike), the division and the outputs' rounding. The rounding is not
unbiased: to nearest, a value rounds down more often than up where its density falls across
the ulp (by about (f'/f) h^2 / 24 for an ulp h), and a softmax's outputs, exponentials of
spread inputs, have a density like 1/y: a perfectly rounded BF16 softmax of the harness's
draws sums to 1 - 3e-6 to 1 - 4e-6 on average, which the bound below does not hold at 131072
rows (softmax_03_cached_bf16 and 04_pipelined_bf16 failed there at 67f770d on the H100,
-3.8e-6 and -4.2e-6 against +-3.7e-6: notes/verification.md). So a row's excess is taken
over the reference rounded to the output's type (:func:`rounded`), which carries that bias
too; what is left, the first two, is random with mean zero, so the mean excess over R rows is

    |mean_r (sum_j y_rj - 1)| <= BIAS + 6 sqrt(mean_r sigma_r^2 / R),
    sigma_r^2 = (u32^2 COLS + u_out^2 sum_v (sum_{j: x_rj = v} r_rj)^2) / 3,

the last sum over the distinct values v of the row: equal inputs give equal outputs, and so
one rounding error between them, not one each. With BF16 inputs a row of 32K columns holds
a few hundred values, each about fifty times: summed element by element (``sum_j r_rj^2``,
as before) sigma_r was 7x too small, and a right BF16 softmax failed at 2 x 32768 on the
H100 (+0.00014 against +-0.000109; reports/h100/softmax-bf16-17bb56b.log). Inputs of two
bytes are grouped by their bits (a radix sort a row, about 9 ms per 2^20 elements); FP32
inputs, drawn on a grid of 2^-24 of their span, repeat a handful of times a row at most, and
are taken one by one. A rounding error is uniform within half an ulp, at most u_out of the
value: its variance is at most u_out^2 y^2 / 3 (the 1/3 was left out before, and with it the
grouped bound would catch a BF16 normaliser 1e-5 off only past 24K rows of 32K; with it, from
about 6K).

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
        "|mean(sum y - sum r rounded)| <= 4 u32 + 2 u_exp + 6 sigma / sqrt(ROWS), equal "
        "inputs rounding alike")


def row_excess(got: np.ndarray, r: np.ndarray, out_dtype: str) -> np.ndarray:
    """Each row's sum of outputs less its reference's rounded to the outputs' type (float64,
    finite outputs only): round to nearest's own bias taken out (docstring)."""
    return np.where(np.isfinite(got), got, 0.0).sum(axis=1) - rounded(r, out_dtype).sum(axis=1)


def rounded(ref: np.ndarray, dtype: str) -> np.ndarray:
    """Float64 ``ref`` rounded to nearest (even) in ``dtype`` ("f32", "f16", "bf16"), as
    float64; other types as they are."""
    if dtype == "f32":
        return ref.astype(np.float32).astype(np.float64)
    if dtype == "f16":
        return ref.astype(np.float16).astype(np.float64)
    if dtype == "bf16":
        bits = ref.astype(np.float32).view(np.uint32)
        near = ((bits + ((bits >> np.uint32(16)) & np.uint32(1)) + np.uint32(0x7FFF))
                & np.uint32(0xFFFF0000))
        return near.view(np.float32).astype(np.float64)
    return ref


def row_variance(r: np.ndarray, out_unit: float, keys: np.ndarray | None = None
                 ) -> np.ndarray:
    """sigma_r^2 of each row's excess (docstring); ``keys``: the inputs' bits (uint16, the
    shape of ``r``) where equal inputs are grouped, None to take each element alone."""
    return (U32**2 * r.shape[1] + out_unit**2 * _grouped_squares(r, keys)) / 3.0


def _grouped_squares(r: np.ndarray, keys: np.ndarray | None) -> np.ndarray:
    """Per row, sum over the distinct keys of (the sum of r where the key is that)^2."""
    if keys is None:
        return np.square(r).sum(axis=1)
    rows, cols = r.shape
    order = np.argsort(keys, axis=1, kind="stable")  # 16-bit keys: a radix sort
    k, w = np.take_along_axis(keys, order, 1), np.take_along_axis(r, order, 1)
    starts = np.ones(k.shape, dtype=bool)
    starts[:, 1:] = k[:, 1:] != k[:, :-1]
    first = np.flatnonzero(starts.reshape(-1))
    sums = np.add.reduceat(w.reshape(-1), first)
    return np.bincount(first // cols, weights=sums * sums, minlength=rows)


def input_keys(x: np.ndarray, dtype: str) -> np.ndarray | None:
    """The bits that group equal inputs (float64 ``x`` drawn as ``dtype``): BF16's and FP16's
    16 bits; None for FP32 (its values seldom repeat in a row)."""
    if dtype == "bf16":
        return (x.astype(np.float32).view(np.uint32) >> np.uint32(16)).astype(np.uint16)
    if dtype == "f16":
        return x.astype(np.float16).view(np.uint16)
    return None


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
    return False, ratio, (f"misnormalised: over {rows} rows the outputs add up to "
                          f"{mean:+.3g} more than the reference rounded to their type, on "
                          f"average (bound +-{bound:.3g}: "
                          "4 u32 + 2 u_exp + 6 sigma / sqrt(ROWS)); every row is scaled "
                          f"by about {1.0 + mean:.8g}: its normalising sum is off")
