"""An output compared with its float64 reference under the bound of numerics.py, and what a
failure shows named: unwritten outputs (their bits still C's before the launch), non-finite
ones, wrong values (and where they lie: a tile's edge, scattered), ignores beta, ignores
alpha, or less accurate than FP32. chunked.py passes a check faster and comes here for the
ones that may fail."""

from __future__ import annotations

import math

import numpy as np

from harness.kinds.gemm.numerics import CheckResult, Tolerance, _relative, bits, to_float64


def compare(out: np.ndarray, ref: np.ndarray, precision: str, *, scale: np.ndarray, k: int,
            seed: int, alpha: float, beta: float, c_type: str = "fp32",
            initial: np.ndarray | None = None, c64: np.ndarray | None = None,
            yardstick: float | None = None, max_multiple: float | None = None,
            input_unit: float = 0.0, input_norm: float = 0.0) -> CheckResult:
    """Check ``out`` (C as the kernel left it, in ``c_type`` storage) against ``ref``.

    ``scale``: the error scale of ``ref`` (:func:`numerics.error_scale` of the same operands,
    alpha, beta and C). ``initial``: C's bits before the launch (the sentinel, or the start
    values when beta != 0); elements whose bits did not change are unwritten. ``c64``: C's
    start values, which let a failure at beta != 0 be told apart as "ignores beta" or "ignores
    alpha". ``yardstick``: FP32 accumulation's error norm on the same inputs
    (:func:`numerics.fp32_yardstick`; with a 16-bit C, with the rounding to C added), which
    the error is reported as a multiple of; with ``max_multiple``, a multiple above it fails
    as "less accurate than FP32".
    ``input_unit``, ``input_norm``: inputs the kernel represents less exactly than given
    (:meth:`Tolerance.for_gemm`)."""
    m, n = ref.shape
    out64 = to_float64(out, c_type)
    finite = np.isfinite(out64)
    nan_elements = int(out64.size - np.count_nonzero(finite))
    tol = Tolerance.for_gemm(precision, k, ref, scale, c_type, input_unit, input_norm)
    limit = tol.element_limit(ref, scale)
    diff = np.where(finite, np.abs(out64 - ref), np.inf)
    bad_mask = diff > limit
    unwritten = np.zeros(ref.shape, dtype=bool)
    if initial is not None:
        unwritten = (bits(out) == bits(initial)) & bad_mask
    err_norm = float(np.linalg.norm(np.where(finite, out64 - ref, 0.0)))
    rel = math.inf if nan_elements else _relative(err_norm, tol.ref_norm)
    bad = int(np.count_nonzero(bad_mask))
    max_abs = float(diff.max()) if diff.size else 0.0
    n_unwritten = int(np.count_nonzero(unwritten))
    passed = nan_elements == 0 and bad == 0 and err_norm <= tol.norm_abs
    if yardstick:  # a 16-bit C: FP32 accumulation rounded to C, as a right kernel gives
        yardstick = math.hypot(yardstick, tol.c_rounding)
    multiple = err_norm / yardstick if yardstick and not nan_elements else math.nan
    finding, message = "ok", "ok"
    if n_unwritten:
        finding = "unwritten"
        message = (f"unwritten: {n_unwritten} of {out.size} outputs were never written (their "
                   f"bits are what C held before the launch), first at {_first(unwritten)}; "
                   f"{_region(unwritten)}: make the grid and the bounds checks cover every "
                   f"row < M = {m} and column < N = {n}")
    elif nan_elements:
        finding = "non-finite"
        message = (f"non-finite: {nan_elements} of {out.size} outputs are NaN/Inf where the "
                   "reference is "
                   f"finite, first at {_first(~finite)}; {_region(~finite)}: an overflow, or "
                   "arithmetic on memory nothing wrote (out-of-bounds reads of A or B, "
                   "uninitialised shared memory)")
    elif not passed:
        finding = "wrong values"
        message = _wrong(out64, ref, diff, limit, bad_mask, bad, rel, tol)
        if c64 is not None and beta != 0.0 and alpha != 0.0:
            finding, message = _alpha_beta(out64, ref, scale, precision, k, c_type, alpha, beta,
                                           c64, message)
    elif max_multiple is not None and multiple > max_multiple:
        passed, finding = False, "less accurate than FP32"
        message = (f"less accurate than FP32: its error norm is {multiple:.1f}x what FP32 "
                   f"accumulation gives on the same inputs (rel {rel:.2e}; at most "
                   f"{max_multiple:g}x for a kernel that claims FP32), though within the "
                   f"K-deep bound {tol.norm_rel:.2e}: it computes with fewer bits than FP32 "
                   "(BF16 or TF32 parts on tensor cores?); a kernel that does declares how "
                   "with fp32_via in its spec (tf32, bf16x3, ...)")
    return CheckResult(passed, m, n, k, seed, alpha, beta, rel, max_abs, bad, nan_elements,
                       tol.norm_rel, message, finding, n_unwritten, multiple)



def _alpha_beta(out64: np.ndarray, ref: np.ndarray, scale: np.ndarray, precision: str, k: int,
                c_type: str, alpha: float, beta: float, c64: np.ndarray, message: str
                ) -> tuple[str, str]:
    """The finding of a failed check at beta != 0: "ignores beta" or "ignores alpha" when the
    output passes the same bound against what that mistake computes, else "wrong values"."""
    product = (ref - beta * c64) / alpha  # A @ B
    c_part = abs(beta) * np.abs(c64)
    # the error scale of A @ B alone; clipped because scale is float32
    product_scale = np.maximum(scale - c_part, 0.0) / abs(alpha)
    detail = message.removeprefix("wrong values: ")
    if _matches(out64, alpha * product, abs(alpha) * product_scale, precision, k, c_type):
        return "ignores beta", (f"ignores beta: the output matches alpha * A @ B without "
                                f"beta * C (beta = {beta}); {detail}")
    if alpha != 1.0 and _matches(out64, product + beta * c64, product_scale + c_part, precision,
                                 k, c_type):
        return "ignores alpha", (f"ignores alpha: the output matches A @ B + beta * C without "
                                 f"alpha = {alpha}; {detail}")
    return "wrong values", message


def _matches(out64: np.ndarray, other: np.ndarray, other_scale: np.ndarray, precision: str,
             k: int, c_type: str) -> bool:
    """Whether ``out64`` passes the check's own bound (element and norm) against ``other``."""
    if not np.isfinite(out64).all():
        return False
    tol = Tolerance.for_gemm(precision, k, other, other_scale, c_type)
    if (np.abs(out64 - other) > tol.element_limit(other, other_scale)).any():
        return False
    return float(np.linalg.norm(out64 - other)) <= tol.norm_abs


def _first(mask: np.ndarray) -> str:
    row, col = np.argwhere(mask)[0]
    return f"row {row}, col {col}"


def _region(mask: np.ndarray) -> str:
    """Where the flagged elements lie: all rows/columns from some index on (a tile edge), or
    scattered."""
    rows, cols = np.nonzero(mask)
    m, n = mask.shape
    if rows.size == 1:
        return "that element alone"
    r0, c0 = int(rows.min()), int(cols.min())
    if mask[r0:, :].all() and r0 > 0:
        return f"every element of rows {r0}..{m - 1} (the last {m - r0} rows)"
    if mask[:, c0:].all() and c0 > 0:
        return f"every element of columns {c0}..{n - 1} (the last {n - c0} columns)"
    if r0 > 0 and c0 > 0:
        return (f"all in rows >= {r0} and columns >= {c0} (rows {r0}..{int(rows.max())}, "
                f"columns {c0}..{int(cols.max())})")
    if r0 > 0:
        return f"all in rows >= {r0} (of {m})"
    if c0 > 0:
        return f"all in columns >= {c0} (of {n})"
    return (f"spread over rows {r0}..{int(rows.max())} and columns {c0}..{int(cols.max())}")


def _wrong(out64, ref, diff, limit, bad_mask, bad, rel, tol) -> str:
    where = np.unravel_index(int(np.argmax(diff - limit)), diff.shape)
    c_part = "" if tol.c_type == "fp32" else f" + half an ulp of {tol.c_type}"
    text = (f"wrong values: {bad} of {diff.size} elements outside their bound "
            f"({tol.element_factor:.2e} x (|alpha| |A||B| + |beta| |C|){c_part}), "
            f"rel error norm {rel:.2e} (bound {tol.norm_rel:.2e}); worst at row "
            f"{where[0]}, col {where[1]}: got {out64[where]:.6g}, want {ref[where]:.6g}, "
            f"bound +-{limit[where]:.2e}")
    if bad:
        text += f"; {_region(bad_mask)}"
    return text
