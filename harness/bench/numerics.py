"""Numerical checks against a float64 numpy reference (pure numpy, no GPU).

Inputs are drawn fresh for every check, rounded to the kernel's input precision first, and the
reference multiplies those rounded values in float64, so the check measures only the kernel's own
arithmetic (accumulation order, TF32 truncation), not the input rounding.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from harness.errors import HarnessError

NAN_WORD = 0x7FC00000
"""Quiet-NaN bit pattern poured over outputs before a checked launch."""

# Relative error-norm bound ||out - ref|| / ||ref|| at K = 1024; it grows as sqrt(K / 1024)
# because rounding errors of a length-K sum add like a random walk. FP32 accumulation with
# eps = 2^-24 sits near 1e-7 at K = 1024 in practice; TF32 inputs lose 13 mantissa bits
# (eps = 2^-11) so its bound is looser. BF16/FP16 inputs are rounded before the reference,
# so only FP32 accumulation error remains for them (design.md asks 1e-3..1e-2 at most).
_NORM_TOL_AT_1K = {"fp32": 2e-6, "tf32": 2e-3, "bf16": 5e-3, "fp16": 5e-3}
_ELEMENT_FACTOR = 10.0


@dataclass(frozen=True)
class Tolerance:
    norm_rel: float
    """Bound on ||out - ref||_F / ||ref||_F."""
    atol: float
    rtol: float

    @classmethod
    def for_gemm(cls, precision: str, k: int, ref_rms: float) -> Tolerance:
        try:
            base = _NORM_TOL_AT_1K[precision]
        except KeyError:
            raise HarnessError(f"no tolerance for precision {precision!r}; expected one of "
                               f"{', '.join(_NORM_TOL_AT_1K)}") from None
        norm = base * max(1.0, math.sqrt(k / 1024))
        # per element: an error of ten times the norm bound relative to a typical element
        return cls(norm, _ELEMENT_FACTOR * norm * ref_rms, _ELEMENT_FACTOR * norm)


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

    def as_dict(self) -> dict:
        return asdict(self)


def input_dtype(precision: str) -> np.dtype:
    """The host dtype of A and B for a precision (BF16 travels as its uint16 bit pattern)."""
    return {"fp32": np.dtype(np.float32), "tf32": np.dtype(np.float32),
            "fp16": np.dtype(np.float16), "bf16": np.dtype(np.uint16)}[precision]


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (round to nearest even) and return the 16-bit patterns."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    return ((bits + rounding) >> 16).astype(np.uint16)


def bf16_to_float(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def random_operand(rng: np.random.Generator, shape: tuple[int, int], precision: str):
    """A random operand in the device's storage format and its exact float64 value."""
    values = rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    if precision == "bf16":
        stored = bf16_bits(values)
        return stored, bf16_to_float(stored).astype(np.float64)
    stored = values.astype(input_dtype(precision))
    return stored, stored.astype(np.float64)


def reference(a64: np.ndarray, b64: np.ndarray, alpha: float, beta: float,
              c64: np.ndarray | None) -> np.ndarray:
    """alpha * A @ B + beta * C in float64, A and B given in row-major logical shape."""
    out = alpha * (a64 @ b64)
    if beta != 0.0:
        out += beta * c64
    return out


def compare(out: np.ndarray, ref: np.ndarray, precision: str, *, k: int, seed: int,
            alpha: float, beta: float) -> CheckResult:
    """Check ``out`` against ``ref``: error norm, per-element bound, no NaN/Inf anywhere."""
    m, n = ref.shape
    out64 = out.astype(np.float64)
    finite = np.isfinite(out64)
    nan_elements = int(out64.size - np.count_nonzero(finite))
    ref_norm = float(np.linalg.norm(ref))
    ref_rms = ref_norm / math.sqrt(ref.size) if ref.size else 0.0
    tol = Tolerance.for_gemm(precision, k, ref_rms)
    diff = np.where(finite, np.abs(out64 - ref), np.inf)
    rel = float(np.linalg.norm(np.where(finite, out64 - ref, 0.0)) / ref_norm) if ref_norm else 0.0
    if nan_elements:
        rel = math.inf
    bad = int(np.count_nonzero(diff > tol.atol + tol.rtol * np.abs(ref)))
    max_abs = float(diff.max()) if diff.size else 0.0
    passed = nan_elements == 0 and bad == 0 and rel <= tol.norm_rel
    if passed:
        message = "ok"
    elif nan_elements:
        first = np.argwhere(~finite)[0]
        message = (f"{nan_elements} of {out.size} outputs are NaN/Inf (first at row {first[0]}, "
                   f"col {first[1]}): unwritten or overflowed elements")
    else:
        where = np.unravel_index(int(np.argmax(diff - tol.rtol * np.abs(ref))), diff.shape)
        message = (f"{bad} elements outside atol {tol.atol:.2e} + rtol {tol.rtol:.2e}*|ref|, "
                   f"rel error norm {rel:.2e} (bound {tol.norm_rel:.2e}); worst at row "
                   f"{where[0]}, col {where[1]}: got {out64[where]:.6g}, want {ref[where]:.6g}")
    return CheckResult(passed, m, n, k, seed, alpha, beta, rel, max_abs, bad, nan_elements,
                       tol.norm_rel, message)
