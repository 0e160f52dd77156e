"""The check of an FP8 GEMM (issue 36): its reference from the operands' exact values and their
scales, the bound a right kernel stays within, and the findings that name what a wrong one did.

A right kernel multiplies FP8 operands on the tensor cores, which add each k32 step's products in
a 14-bit window (harness/kinds/gemm/fp8/formats.py, notes/fp8_accumulation.md), and applies
the scales in
FP32: per tensor, once in the epilogue; per block (1 x 128 for A, 128 x 128 for B), to each
block's partial sum as it is promoted into an FP32 accumulator on the CUDA cores. Its error is
a random walk of the window's truncations, each under 2^-13 of the largest term of its step:

    walk(m, n)^2 = sum over steps j of 11 (2^-13 M_j)^2,   M_j = max(|P_j-1|, max |products_j|)

(33 terms a step, each off by a uniform part of its unit, of either sign: variance unit^2 / 3),
with P the exact partial sums in k order, restarted at every promotion. The norm of the error
is held to NORM_SAFETY times the walk's norm, each element to ELEMENT_SAFETY times its walk,
plus the output's rounding. The model of the window, run on the check's own inputs, stays
within both by a wide margin; a window of FP16's width (11 bits) does not
(tests/test_fp8_check.py). Whether the outputs hold the tensor core's own sums
(:func:`accumulation`, issue 57) is judged on a sample: the window model (formats.window_step)
gives the H100's FP8 sums to the last bit (notes/verification.md, "FP8 against the hardware")."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from harness.kinds.gemm.fp8.accumulation import (
    HW_MISMATCH,
    LESS_ACCURATE,
    OTHERWISE,
    accumulation,
    model_output,
)
from harness.kinds.gemm.fp8.formats import K_STEP
from harness.kinds.gemm.fp8.gemm import (
    BLOCK_K,
    Fp8Gemm,
    _by_rows,
    block_scales,
    reference,
    subset,
)
from harness.kinds.gemm.fp8.walk import (
    WALK_CHUNK,
    _walk,
    walk,
    walk_of_sums,
    walk_sums,
    walk_with,
)
from harness.kinds.gemm.numerics import half_ulp, to_float64

__all__ = ["BLOCK_K", "HW_MISMATCH", "LESS_ACCURATE", "OTHERWISE", "WALK_CHUNK", "Fp8Gemm",
           "Fp8Verdict", "accumulation", "check", "judge", "model_output", "reference",
           "sample", "subset", "walk", "walk_of_sums", "walk_sums", "walk_with", "whole",
           "block_scales"]
"""The FP8 check's API: its own, and its parts' (gemm.py, walk.py, accumulation.py), which
the runs, tests and experiments import from here."""

NORM_SAFETY = 3.0
NORM_SAFETY = 3.0
ELEMENT_SAFETY = 8.0
FEWER_BITS = 16.0
"""An output within this many times the bounds everywhere, though outside them, accumulated
with fewer bits than the window (an FP16 accumulator: 3 bits, 8x, fewer); beyond, it is
wrong."""
OUTPUTS = ("bf16", "fp32")


@dataclass(frozen=True)
class Fp8Verdict:
    passed: bool
    finding: str
    """"ok", "wrong values", "ignores the scale of A" (or B), "reads A as e4m3" (and the
    like), "less accurate than the tensor core's FP8 accumulation", "non-finite"."""
    error_norm: float
    norm_bound: float
    bad_elements: int
    message: str


def _bounds(g: Fp8Gemm, ref: np.ndarray) -> tuple[np.ndarray, float]:
    """Each element's bound and the norm's, for ``g`` whose reference is ``ref``."""
    w = walk(g)
    element, rounding = _element_bounds(g, ref, w)
    return element, NORM_SAFETY * float(np.linalg.norm(w)) + 2.0 * float(np.linalg.norm(rounding))


def _element_bounds(g: Fp8Gemm, ref: np.ndarray, w: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Each element's bound from its walk ``w`` and reference ``ref``: ELEMENT_SAFETY walks,
    twice the output's rounding and the reference's own float64 error; and that rounding (0
    for an FP32 output, whose rounding the walk holds)."""
    rounding = (half_ulp(np.abs(ref) + ELEMENT_SAFETY * w, g.out) if g.out != "fp32"
                else np.zeros_like(ref))
    return ELEMENT_SAFETY * w + 2.0 * rounding + np.abs(ref) * 2.0 ** -24, rounding


def _within(g: Fp8Gemm, out: np.ndarray, widen: float = 1.0, ref: np.ndarray | None = None,
            walked: np.ndarray | None = None) -> tuple[bool, float, float, int]:
    """Whether ``out`` is what a right kernel computing ``g`` (reference ``ref``, made if not
    given) may give, its bounds ``widen`` times wider: (it is, the error norm, the norm's
    bound, elements outside their own). By blocks of rows (:func:`_by_rows`): each block's
    walk (``walked``'s rows where it is given: :func:`walk` of ``g``, made on the GPU), bounds
    and error, and the sums of squares the norms are made of."""
    ref = reference(g) if ref is None else ref
    arrays = (out, ref) if walked is None else (out, ref, walked)

    def block(gb: Fp8Gemm, out_b: np.ndarray, ref_b: np.ndarray,
              walked_b: np.ndarray | None = None) -> tuple[float, ...]:
        w = _walk(gb) if walked_b is None else walked_b
        element, rounding = _element_bounds(g, ref_b, w)
        err = out_b - ref_b
        finite = np.where(np.isfinite(err), err, 0.0)
        bad = int(np.count_nonzero(~(np.abs(err) <= widen * element)))
        return (float(np.square(w).sum()), float(np.square(rounding).sum()),
                float(np.square(finite).sum()), bad)

    w2, r2, e2, bad = (sum(x) for x in zip(*_by_rows(g, block, *arrays), strict=True))
    norm_bound = widen * (NORM_SAFETY * math.sqrt(w2) + 2.0 * math.sqrt(r2))
    norm = math.sqrt(e2)
    return bad == 0 and norm <= norm_bound, norm, norm_bound, int(bad)


def judge(g: Fp8Gemm, out: np.ndarray, ref: np.ndarray | None = None,
          walked: np.ndarray | None = None, seed: int = 0) -> Fp8Verdict:
    """``out`` (the output's exact values) against the reference (``ref``, made if not given)
    and the bound (from ``walked``, ``g``'s :func:`walk`, where it is given); a failure named
    by the mistaken GEMM that ``out`` passes as instead. Within the bound, its sums must be
    the tensor core's, or FP32's (:func:`accumulation`, on a sample drawn from ``seed``)."""
    if not np.isfinite(out).all():
        n = int(np.count_nonzero(~np.isfinite(out)))
        return Fp8Verdict(False, "non-finite", math.inf, math.nan, n,
                          f"non-finite: {n} of {out.size} outputs are NaN or Inf")
    ok, norm, norm_bound, bad = _within(g, out, ref=ref, walked=walked)
    if ok:
        summed, finding, story = accumulation(g, out, seed, ref)
        return Fp8Verdict(summed, finding, norm, norm_bound, 0, story)
    finding, story = _explain(g, out, walked)
    return Fp8Verdict(False, finding, norm, norm_bound, bad,
                      f"{finding}: error norm {norm:.3g} against a bound of {norm_bound:.3g}, "
                      f"{bad} of {out.size} outputs outside theirs; {story}")


def _explain(g: Fp8Gemm, out: np.ndarray, walked: np.ndarray | None = None
             ) -> tuple[str, str]:
    """What ``out`` is instead: the GEMM of a known mistake it passes as, else how far off
    (``walked``: ``g``'s walk, where it is made; each mistake's own is made here)."""
    other = {"e4m3": "e5m2", "e5m2": "e4m3"}
    one_a = np.ones_like(g.scale_a) if g.blocked else 1.0
    one_b = np.ones_like(g.scale_b) if g.blocked else 1.0
    mistakes = [
        ("ignores the scale of A", "it is the product without A's scales",
         replace(g, scale_a=one_a)),
        ("ignores the scale of B", "it is the product without B's scales",
         replace(g, scale_b=one_b)),
        (f"reads A as {other[g.a_format]}",
         f"it is the product with A's bytes read as {other[g.a_format]}, not {g.a_format}",
         replace(g, a_format=other[g.a_format])),
        (f"reads B as {other[g.b_format]}",
         f"it is the product with B's bytes read as {other[g.b_format]}, not {g.b_format}",
         replace(g, b_format=other[g.b_format])),
    ]
    for finding, story, mistaken in mistakes:
        av, bv = mistaken.values()
        if np.isfinite(av).all() and np.isfinite(bv).all() and _within(mistaken, out)[0]:
            return finding, story
    if _within(g, out, widen=FEWER_BITS, walked=walked)[0]:
        return (LESS_ACCURATE,
                "its error is a few times what the 14-bit window allows on these inputs "
                "(an FP16 accumulator keeps 11 bits), but near the product: it accumulates "
                "with fewer bits than the tensor core")
    return "wrong values", "it is none of the known mistakes (scales, formats, accumulator)"


WHOLE_BUDGET = 1 << 27
"""Outputs times k32 steps up to which the walk is taken over the whole output; past it (the
timed sizes), over :data:`SAMPLE` random rows by as many random columns."""
SAMPLE = 256
SAMPLED_NORM_SLACK = 1.5
"""The whole output's error norm may be this many times the sample's bound scaled to the
whole (sqrt of the outputs' ratio): the sample's norm estimates the whole's within a few
percent at 256 x 256, so only a kernel wrong outside the sample gets near it."""


def whole(m: int, n: int, k: int) -> bool:
    """Whether an m x n x k check takes its bound over the whole output (:func:`sample`)."""
    return m * n * -(-k // K_STEP) <= WHOLE_BUDGET


def sample(m: int, n: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The rows and columns the walk is taken over: all of them while the output is small
    enough (:data:`WHOLE_BUDGET`), else a random sample drawn from ``seed``."""
    if whole(m, n, k):
        return np.arange(m), np.arange(n)
    rng = np.random.default_rng([seed, m, n, k])
    return (np.sort(rng.choice(m, size=min(m, SAMPLE), replace=False)),
            np.sort(rng.choice(n, size=min(n, SAMPLE), replace=False)))


UNWRITTEN_CHECKED = 64
"""Outputs that kept C's bits checked against their own bounds (at random, where more did)."""


def _kept_and_wrong(out64: np.ndarray, a: np.ndarray, b: np.ndarray, fp8, scales, c_type: str,
                    same: np.ndarray, seed: int) -> tuple[tuple, int, int] | None:
    """Of the outputs at ``same`` (row, col pairs that kept C's bits), up to
    UNWRITTEN_CHECKED judged against their own bounds: (the first wrong one, how many were
    wrong, how many were checked), or None when none was wrong. An FP8 GEMM's outputs take
    few values (a BF16 C keeps 8 bits of sums of few distinct products), so a new output may
    equal the old one by chance; only a wrong one is unwritten."""
    if not len(same):
        return None
    if len(same) > UNWRITTEN_CHECKED:
        rng = np.random.default_rng([seed, len(same)])
        same = same[np.sort(rng.choice(len(same), UNWRITTEN_CHECKED, replace=False))]
    rows, cols = np.unique(same[:, 0]), np.unique(same[:, 1])
    g = Fp8Gemm(a[rows], b[:, cols], fp8.a, fp8.b, *subset(scales, rows, cols, b.shape[1]),
                out=c_type, promote=fp8.promote)
    ref = reference(g)
    element, _ = _bounds(g, ref)
    ri, ci = np.searchsorted(rows, same[:, 0]), np.searchsorted(cols, same[:, 1])
    wrong = ~(np.abs(out64[same[:, 0], same[:, 1]] - ref[ri, ci]) <= element[ri, ci])
    if not wrong.any():
        return None
    return tuple(int(i) for i in same[np.argmax(wrong)]), int(wrong.sum()), len(same)


def check(out: np.ndarray, a: np.ndarray, b: np.ndarray, fp8, scales: tuple,
          c_type: str, *, seed: int, initial: np.ndarray | None = None,
          ref: np.ndarray | None = None, walked: np.ndarray | None = None):
    """An FP8 GEMM's output ``out`` (M x N in ``c_type`` storage) as a check's result
    (numerics.CheckResult): A's (M x K) and B's (K x N) codes in ``fp8``'s formats (its
    kernels/fp8_spec.Fp8Spec), ``scales`` per tensor or per block (Fp8Gemm). Unwritten and
    non-finite outputs are found over the whole output; the bound and the findings (:func:`judge`)
    over all of it or a sample (:func:`sample`), and then, with ``ref`` (the whole float64
    reference), the whole output's error norm against the sample's bound scaled to it.
    ``walked``: the :func:`walk` over the rows and columns the bound is taken over (all, or
    :func:`sample`'s for ``seed``), made already (on the GPU: references.walk_of)."""
    from harness.kinds.gemm.numerics import CheckResult, bits

    m, n = out.shape
    k = a.shape[1]
    out64 = to_float64(out, c_type)

    def failed(finding: str, message: str, bad: int) -> CheckResult:
        return CheckResult(False, m, n, k, seed, 1.0, 0.0, math.inf, math.nan, bad,
                           int(np.count_nonzero(~np.isfinite(out64))), math.nan, message,
                           finding, unwritten_elements=bad if finding == "unwritten" else 0)

    if initial is not None:
        same = bits(out) == bits(np.broadcast_to(initial, out.shape).astype(out.dtype))
        kept = _kept_and_wrong(out64, a, b, fp8, scales, c_type, np.argwhere(same), seed)
        if kept is not None:
            first, wrong, checked = kept
            return failed("unwritten", f"unwritten: {int(same.sum())} of {out.size} outputs "
                          f"hold what C held before the launch, and {wrong} of the {checked} "
                          f"of them checked are outside their bounds, first at (row, col) = "
                          f"{first}", int(same.sum()))
    if not np.isfinite(out64).all():
        bad = int(np.count_nonzero(~np.isfinite(out64)))
        return failed("non-finite", f"non-finite: {bad} of {out.size} outputs are NaN or Inf",
                      bad)
    rows, cols = sample(m, n, k, seed)
    g = Fp8Gemm(a[rows], b[:, cols], fp8.a, fp8.b, *subset(scales, rows, cols, n),
                out=c_type, promote=fp8.promote)
    whole_output = len(rows) == m and len(cols) == n
    part = out64 if whole_output else out64[np.ix_(rows, cols)]
    # the whole output: the reference given (the GPU's, at the sizes where it computes one)
    ref_part = ref if whole_output and ref is not None else reference(g)
    if walked is not None and walked.shape != (len(rows), len(cols)):
        raise ValueError(f"a walk of {walked.shape} for a bound over {len(rows)} rows by "
                         f"{len(cols)} columns")
    verdict = judge(g, part, ref_part, walked, seed)
    ref_norm = float(np.linalg.norm(ref_part)) or 1.0
    norm, bound = verdict.error_norm, verdict.norm_bound
    finding, message, passed = verdict.finding, verdict.message, verdict.passed
    where = "" if whole_output else (
        f" (over {len(rows)} random rows by {len(cols)} random columns)")
    if passed and ref is not None and where:
        whole = float(np.linalg.norm(out64 - ref))
        allowed = bound * math.sqrt(m * n / part.size) * SAMPLED_NORM_SLACK
        if whole > allowed:
            passed, finding = False, "wrong values"
            message = (f"wrong values: the whole output's error norm {whole:.3g} is above "
                       f"{allowed:.3g}, the sample's bound scaled to all {m * n} outputs: "
                       "wrong outside the sampled rows and columns")
    diff = np.abs(part - ref_part)
    return CheckResult(passed, m, n, k, seed, 1.0, 0.0, norm / ref_norm,
                       float(diff.max()) if diff.size else 0.0, verdict.bad_elements, 0,
                       bound / ref_norm, message + where if not passed else "ok", finding)
