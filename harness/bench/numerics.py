"""Numerical checks against a float64 numpy reference (pure numpy, no GPU).

Inputs are drawn fresh for every check, rounded to the kernel's input precision first, and the
reference multiplies those rounded values in float64, so the check measures only the kernel's own
arithmetic (accumulation order, TF32 truncation, the rounding of a 16-bit C), not the input
rounding.

Before every checked launch C is filled with a finite sentinel (at beta = 0) or with random
start values (beta != 0), and an element is called unwritten when its bits are unchanged. The
sentinel is finite on purpose: a kernel written as ``alpha * acc + beta * C`` with no
``beta == 0`` branch computes ``0 * sentinel = 0`` and is judged on its math; with NaN in C it
would give NaN for elements it did write. Whether a kernel reads C at beta = 0 is a separate
finding (checks.py launches once with NaN in C for it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.errors import HarnessError

NAN_WORD = 0x7FC00000
"""Quiet-NaN bit pattern of a float32 (the reads-C probe and the ceiling's sink)."""
C_TYPES = ("fp32", "bf16", "fp16")
"""Element types a kernel may write C in (``c_type`` in its spec)."""
SENTINEL = {"fp32": 0x7F7F4B1D, "bf16": 0x7F1D, "fp16": 0x7B1D}
"""Finite bit patterns C is filled with before a launch at beta = 0 (about 3.4e38, 2.1e38 and
57k): no GEMM of inputs in [-1, 1] produces them, and 0 times them is 0."""
NAN_BITS = {"fp32": NAN_WORD, "bf16": 0x7FC0, "fp16": 0x7E00}

# Relative error-norm bound ||out - ref|| / ||ref|| at K = 1024; it grows as sqrt(K / 1024)
# because rounding errors of a length-K sum add like a random walk. FP32 accumulation with
# eps = 2^-24 sits near 1e-7 at K = 1024 in practice; TF32 inputs lose 13 mantissa bits
# (eps = 2^-11) so its bound is looser. BF16/FP16 inputs are rounded before the reference,
# so only FP32 accumulation error remains for them (design.md asks 1e-3..1e-2 at most).
_NORM_TOL_AT_1K = {"fp32": 2e-6, "tf32": 2e-3, "bf16": 5e-3, "fp16": 5e-3}
# A 16-bit C adds its own rounding, half an ulp per element: 2^-9 relative for bf16, 2^-12
# for fp16 (an rms of about a third of that); the norm bound is at least twice the worst case.
_C_ROUNDING = {"fp32": 0.0, "bf16": 2.0**-8, "fp16": 2.0**-10}
_ELEMENT_FACTOR = 10.0


@dataclass(frozen=True)
class Tolerance:
    norm_rel: float
    """Bound on ||out - ref||_F / ||ref||_F."""
    atol: float
    rtol: float

    @classmethod
    def for_gemm(cls, precision: str, k: int, ref_rms: float, c_type: str = "fp32"
                 ) -> Tolerance:
        try:
            base = _NORM_TOL_AT_1K[precision]
        except KeyError:
            raise HarnessError(f"no tolerance for precision {precision!r}; expected one of "
                               f"{', '.join(_NORM_TOL_AT_1K)}") from None
        norm = max(base * max(1.0, math.sqrt(k / 1024)), _C_ROUNDING[c_type])
        # per element: an error of ten times the norm bound relative to a typical element
        return cls(norm, _ELEMENT_FACTOR * norm * ref_rms, _ELEMENT_FACTOR * norm)


FINDINGS = ("ok", "unwritten", "non-finite", "wrong values", "ignores beta", "ignores alpha",
            "race", "writes outside C", "reads C when beta = 0", "nondeterministic")
"""What a check can find, each a different cause (the first failed check's is the row's; the
last two are notes unless BLAS strictness is asked for, and nondeterministic always is)."""


@dataclass(frozen=True)
class CheckResult:
    passed: bool
    m: int
    n: int
    k: int
    seed: int
    alpha: float
    beta: float
    rel_err_norm: float
    max_abs_err: float
    bad_elements: int
    nan_elements: int
    tolerance_norm: float
    message: str
    finding: str = "ok"
    """One of :data:`FINDINGS`."""
    unwritten_elements: int = 0

    @classmethod
    def finding_only(cls, finding: str, m: int, n: int, k: int, seed: int, alpha: float,
                     beta: float, message: str, bad: int = 0) -> CheckResult:
        """A failed check that is not an error measurement (race, writes outside C)."""
        return cls(False, m, n, k, seed, alpha, beta, math.nan, math.nan, bad, 0, 0.0,
                   message, finding)


def input_dtype(precision: str) -> np.dtype:
    """The host dtype of A and B for a precision (BF16 travels as its uint16 bit pattern)."""
    return {"fp32": np.dtype(np.float32), "tf32": np.dtype(np.float32),
            "fp16": np.dtype(np.float16), "bf16": np.dtype(np.uint16)}[precision]


def c_dtype(c_type: str) -> np.dtype:
    """The host dtype C travels in (BF16 as its uint16 bit pattern)."""
    return input_dtype(c_type)


def c_bytes(c_type: str) -> int:
    return c_dtype(c_type).itemsize


def bits(array: np.ndarray) -> np.ndarray:
    """The raw bit patterns of a float32/float16/bf16 array, for bit-exact comparison."""
    return array.view(np.uint32 if array.itemsize == 4 else np.uint16)


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (round to nearest even) and return the 16-bit patterns."""
    raw = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((raw >> 16) & 1) + 0x7FFF
    return ((raw + rounding) >> 16).astype(np.uint16)


def bf16_to_float(raw: np.ndarray) -> np.ndarray:
    return (raw.astype(np.uint32) << 16).view(np.float32)


def stored(values: np.ndarray, kind: str) -> np.ndarray:
    """float values in the device's storage format for ``kind`` (a precision or C type)."""
    values = np.asarray(values, dtype=np.float32)
    return bf16_bits(values) if kind == "bf16" else values.astype(input_dtype(kind))


def to_float64(array: np.ndarray, kind: str) -> np.ndarray:
    """The exact values of an array in storage format ``kind``."""
    return (bf16_to_float(array) if kind == "bf16" else array).astype(np.float64)


def random_operand(rng: np.random.Generator, shape: tuple[int, int], precision: str):
    """A random operand in the device's storage format and its exact float64 value."""
    store = stored(rng.uniform(-1.0, 1.0, size=shape), precision)
    return store, to_float64(store, precision)


def reference(a64: np.ndarray, b64: np.ndarray, alpha: float, beta: float,
              c64: np.ndarray | None) -> np.ndarray:
    """alpha * A @ B + beta * C in float64, A and B given in row-major logical shape."""
    out = alpha * (a64 @ b64)
    if beta != 0.0:
        out += beta * c64
    return out


def compare(out: np.ndarray, ref: np.ndarray, precision: str, *, k: int, seed: int,
            alpha: float, beta: float, c_type: str = "fp32", initial: np.ndarray | None = None,
            c64: np.ndarray | None = None) -> CheckResult:
    """Check ``out`` (C as the kernel left it, in ``c_type`` storage) against ``ref``.

    ``initial``: C's bits before the launch (the sentinel, or the start values when beta !=
    0); elements whose bits did not change are unwritten. ``c64``: C's start values, which let
    a failure at beta != 0 be told apart as "ignores beta" or "ignores alpha"."""
    m, n = ref.shape
    out64 = to_float64(out, c_type)
    finite = np.isfinite(out64)
    nan_elements = int(out64.size - np.count_nonzero(finite))
    ref_norm = float(np.linalg.norm(ref))
    ref_rms = ref_norm / math.sqrt(ref.size) if ref.size else 0.0
    tol = Tolerance.for_gemm(precision, k, ref_rms, c_type)
    limit = tol.atol + tol.rtol * np.abs(ref)
    diff = np.where(finite, np.abs(out64 - ref), np.inf)
    unwritten = np.zeros(ref.shape, dtype=bool)
    if initial is not None:
        unwritten = (bits(out) == bits(initial)) & (diff > limit)
    rel = float(np.linalg.norm(np.where(finite, out64 - ref, 0.0)) / ref_norm) if ref_norm else 0.0
    if nan_elements:
        rel = math.inf
    bad_mask = diff > limit
    bad = int(np.count_nonzero(bad_mask))
    max_abs = float(diff.max()) if diff.size else 0.0
    n_unwritten = int(np.count_nonzero(unwritten))
    passed = nan_elements == 0 and bad == 0 and rel <= tol.norm_rel
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
        finding, message = "wrong values", _wrong(out64, ref, diff, bad_mask, bad, rel, tol)
        if c64 is not None and beta != 0.0:
            product = (ref - beta * c64) / alpha  # A @ B
            if _matches(out64, alpha * product, precision, k, c_type):
                finding = "ignores beta"
                message = (f"ignores beta: the output matches alpha * A @ B without "
                           f"beta * C (beta = {beta}); {message.removeprefix('wrong values: ')}")
            elif alpha != 1.0 and _matches(out64, product + beta * c64, precision, k, c_type):
                finding = "ignores alpha"
                message = (f"ignores alpha: the output matches A @ B + beta * C without "
                           f"alpha = {alpha}; {message.removeprefix('wrong values: ')}")
    return CheckResult(passed, m, n, k, seed, alpha, beta, rel, max_abs, bad, nan_elements,
                       tol.norm_rel, message, finding, n_unwritten)


def _matches(out64: np.ndarray, other: np.ndarray, precision: str, k: int, c_type: str) -> bool:
    norm = float(np.linalg.norm(other))
    if not norm or not np.isfinite(out64).all():
        return False
    tol = Tolerance.for_gemm(precision, k, norm / math.sqrt(other.size), c_type)
    return float(np.linalg.norm(out64 - other)) / norm <= tol.norm_rel


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


def _wrong(out64, ref, diff, bad_mask, bad, rel, tol) -> str:
    where = np.unravel_index(int(np.argmax(diff - tol.rtol * np.abs(ref))), diff.shape)
    text = (f"wrong values: {bad} elements outside atol {tol.atol:.2e} + rtol "
            f"{tol.rtol:.2e}*|ref|, "
            f"rel error norm {rel:.2e} (bound {tol.norm_rel:.2e}); worst at row "
            f"{where[0]}, col {where[1]}: got {out64[where]:.6g}, want {ref[where]:.6g}")
    if bad:
        text += f"; {_region(bad_mask)}"
    return text
