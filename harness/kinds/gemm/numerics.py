"""Numerical checks against a float64 numpy reference (pure numpy, no GPU).

Inputs are drawn fresh for every check and stored in the kernel's input precision: BF16/FP16
rounded, TF32 drawn already representable in TF32 (10 explicit mantissa bits, the low 13 bits
zero). The reference multiplies those stored values in float64, so a kernel's products are exact
and what the check judges is its arithmetic: FP32 accumulation (every precision claims it,
u = 2^-24) and the rounding of a 16-bit C.

The tolerance follows from that arithmetic. The error scale ``s = |alpha| |A||B| +
|beta| |C0|`` bounds every partial sum; FP32 rounding errors add like a random walk, of order
``u sqrt(K) s`` (:func:`error_scale`, :class:`Tolerance`):

- per element, ``|out - ref| <= S_E u sqrt(K) s + half_ulp_C(|ref| + S_E u sqrt(K) s)``,
  S_E = 10: catches local errors (one tile that misses one k step) the norm cannot see at
  large M x N; half_ulp_C is 0 for an FP32 C;
- on the Frobenius norm, ``||out - ref|| <= S_N u sqrt(K) ||s|| + (1 + DELTA)
  ||round_C(ref) - ref||``, S_N = 0.5, DELTA = 0.1: catches systematic errors (an accumulator
  narrower than FP32, inputs rounded further than stored); the second term, for a 16-bit C
  only, is the rounding a correct kernel's output cannot avoid.

For uniform [-1, 1] inputs ``||s|| / ||ref||`` is about 0.75 sqrt(K), so with an FP32 C the norm
bound is about 0.375 u K relative: 2.3e-5 at K = 1024, 9.2e-5 at 4096, 1.8e-4 at 8192. The margin
comes from the committed H100 reports (reports/h100/run-*.json and compare-*.json, max_rel_err
of the rows that passed): the tensor-core kernels' FP32 accumulation reaches about 0.02 u K
relative (9.7e-6 for 11_mma_sync_fp16 and 8.5e-6 for 11_mma_sync_bf16 at K = 8192), the FP32
SIMT kernels' about 0.3 u sqrt(K) (1.6e-6 for 01_naive at 8192): the bound is about 19x above
the worst. What it cannot see: errors that do not grow with K fall under it once 0.375 u K
exceeds them (FP32 inputs rounded to TF32, about 2.6e-4 relative, pass the fp32 check from K of
about 11,600 on), and with a 16-bit C an accumulation error much below C's own rounding hides
in it (the norms add in quadrature). tests/test_numerics.py proves both bounds on simulated
outputs, right and wrong, at K = 1024, 4096 and 8192.

Before every checked launch C is filled with a finite sentinel (at beta = 0) or with random
start values (beta != 0), and an element is called unwritten when its bits are unchanged. The
sentinel is finite on purpose: a kernel written as ``alpha * acc + beta * C`` with no
``beta == 0`` branch computes ``0 * sentinel = 0`` and is judged on its math; with NaN in C it
would give NaN for elements it did write. Whether a kernel reads C at beta = 0 is a separate
finding (checks.py launches once with NaN in C for it).

comparison.py compares an output with its reference under these bounds and names what a
failure shows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.errors import HarnessError
from harness.kinds.gemm.fp8.formats import FINDINGS as FP8_FINDINGS
from harness.kinds.gemm.fp8.formats import FORMATS as FP8_FORMATS

NAN_WORD = 0x7FC00000
"""Quiet-NaN bit pattern of a float32 (the reads-C probe and the ceiling's sink)."""
C_TYPES = ("fp32", "bf16", "fp16")
"""Element types a kernel may write C in (``c_type`` in its spec)."""
SENTINEL = {"fp32": 0x7F7F4B1D, "bf16": 0x7F1D, "fp16": 0x7B1D}
"""Finite bit patterns C is filled with before a launch at beta = 0 (about 3.4e38, 2.1e38 and
57k): no GEMM of inputs in [-1, 1] produces them, and 0 times them is 0."""
NAN_BITS = {"fp32": NAN_WORD, "bf16": 0x7FC0, "fp16": 0x7E00}

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
"""Input precisions held to FP32 accumulation (FP8's bound: fp8_check.py)."""
U32 = 2.0**-24
"""Unit roundoff of FP32, the accumulator every precision claims."""
ELEMENT_SAFETY = 10.0
"""S_E: an element may be off by ten random walks of FP32 roundings over its partial sums."""
NORM_SAFETY = 0.5
"""S_N: the norm bound's factor on u sqrt(K) ||s||: about 19x above the worst error of the
H100's tensor-core kernels (module docstring), while every simulated wrong kernel of
tests/test_numerics.py exceeds the bound at K = 1024..8192 (the closest, FP32 inputs rounded
to TF32, by 1.4x at 8192)."""
C_ROUNDING_SLACK = 0.1
"""DELTA: a correct kernel rounds the exact value, not the reference, to C's type; its
rounding's norm differs from the reference's by the few elements whose rounding the
accumulation error moves across a tie."""
FP32_SEQUENTIAL = 0.09
"""c in the expected error norm of FP32 accumulation, one FMA per k step in order:
``u sqrt(c K sum_k ||A_k||^2 ||B_k||^2)`` (:func:`fp32_yardstick`). Each FMA's rounding error
has variance 0.18 u^2 S^2 over the partial sum S (uniform within half an ulp, the significand
log-uniform), and the partial sums' squares average (K/2) sum (a_k b_k)^2: 0.18 / 2. A simulated
FP32 loop on uniform inputs meets it within 1% at K = 512..8192 (tests/test_numerics.py)."""
FP32_MULTIPLE_MAX = 2.0
"""The most an FP32 kernel's error may be, as a multiple of :func:`fp32_yardstick`, on the
deep checks (K >= 2048, uniform inputs) and at a timed size: a kernel accumulating in FP32 in
any order gives at most about 1 (sums in blocks or pairs give less), while BF16x3 (three BF16
products per FP32 one) gives about 4.7 at K = 2048 and 3.3 at 4096, TF32 about 100."""
TIMED_DEEP_K, TIMED_DEEP_OUTPUTS = 256, 4096
"""A timed size's check holds an FP32 claim to :data:`FP32_MULTIPLE_MAX` from this K and this
many outputs on (fewer, and the error norm of a right kernel scatters more around the
yardstick); the battery's deep check has K >= 2048 (plan.DEEP_TARGET)."""
FP32_VIA_UNIT = {"tf32": 2.0**-10, "tf32x3": 2.0**-19, "bf16": 2.0**-7, "bf16x3": 2.0**-15,
                 "bf16x6": 2.0**-21, "bf16x9": 2.0**-23}
"""Per input of an FP32 kernel that computes on tensor cores (spec ``fp32_via``), the most its
representation may be off, relative (one unit of the last place kept, rounded or truncated):
the tolerance adds what that costs a product (:meth:`Tolerance.for_gemm`)."""
TF32_UNROUNDED_UNIT = 2.0**-10
"""A TF32 kernel given FP32 values not representable in TF32 rounds or truncates them."""
_C_SIGNIFICAND_BITS = {"bf16": 8, "fp16": 11}
_C_MIN_SPACING = {"bf16": 2.0**-133, "fp16": 2.0**-24}  # subnormals' spacing: the least


def error_scale(a64: np.ndarray, b64: np.ndarray, alpha: float, beta: float,
                c64: np.ndarray | None) -> np.ndarray:
    """``|alpha| |A||B| + |beta| |C0|`` (float32): the size of every partial sum an element's
    accumulation passes through, so the unit its rounding errors are measured in. Float32 is
    precise enough for a bound and costs half a float64 product (seconds at 8192)."""
    a32 = np.abs(a64.astype(np.float32))
    b32 = np.abs(b64.astype(np.float32))
    scale = a32 @ b32
    scale *= np.float32(abs(alpha))
    if beta != 0.0 and c64 is not None:
        scale += np.float32(abs(beta)) * np.abs(c64.astype(np.float32))
    return scale


def half_ulp(x: np.ndarray, c_type: str) -> np.ndarray:
    """Half the spacing of ``c_type`` at magnitude ``x`` >= 0: the most rounding to C's type can
    move a value of that size (0 for an FP32 C, whose rounding the accumulation bound covers)."""
    x = np.asarray(x, dtype=np.float64)
    if c_type == "fp32":
        return np.zeros_like(x)
    top = (x.view(np.uint64) & np.uint64(0x7FF << 52)).view(np.float64)  # frexp 2^(e-1), fast
    spacing = np.where(np.isfinite(x), top, 0.5) * 2.0 ** (1 - _C_SIGNIFICAND_BITS[c_type])
    return np.where(x > 0, 0.5 * np.maximum(spacing, _C_MIN_SPACING[c_type]), 0.0)


def accumulation_bound(k: int) -> float:
    """u sqrt(K): the random walk of K FP32 roundings, per unit of error scale."""
    return U32 * math.sqrt(max(k, 1))


def product_norm(a64: np.ndarray, b64: np.ndarray) -> float:
    """sqrt(sum over i, j, k of (a_ik b_kj)^2) = sqrt(sum_k ||A_k||^2 ||B_k||^2): the size of
    the products' random errors (columns of A, rows of B), from O(MK + KN) work."""
    return math.sqrt(float(np.square(a64).sum(axis=0) @ np.square(b64).sum(axis=1)))


def fp32_yardstick(a64: np.ndarray, b64: np.ndarray, alpha: float = 1.0, norm=None) -> float:
    """The error norm FP32 accumulation gives on these inputs, one FMA per k step in order
    (:data:`FP32_SEQUENTIAL`): what an error is reported as a multiple of (``norm``: their
    product_norm, where it is known)."""
    return (U32 * math.sqrt(FP32_SEQUENTIAL * a64.shape[1]) * abs(alpha)
            * (product_norm(a64, b64) if norm is None else norm))


@dataclass(frozen=True)
class Tolerance:
    """The bound of one check, from the arithmetic the kernel claims (module docstring)."""

    c_type: str
    element_factor: float
    """S_E u sqrt(K): an element's bound per unit of its error scale (before C's rounding)."""
    norm_abs: float
    """Bound on ||out - ref||_F."""
    ref_norm: float
    """||ref||_F."""

    @property
    def norm_rel(self) -> float:
        """Bound on ||out - ref||_F / ||ref||_F (the check's ``tolerance_norm``)."""
        return self.norm_abs / self.ref_norm if self.ref_norm else math.inf

    input_factor: float = 0.0
    """2 u_in: an element's bound per unit of its error scale for inputs represented with
    relative error u_in (``fp32_via``, unrounded TF32); 0 when the inputs are exact."""
    c_rounding: float = 0.0
    """||round_C(ref) - ref||: what storing the exact result in a 16-bit C costs (0 for
    FP32)."""

    @classmethod
    def for_gemm(cls, precision: str, k: int, ref: np.ndarray, scale: np.ndarray,
                 c_type: str = "fp32", input_unit: float = 0.0,
                 input_norm: float = 0.0) -> Tolerance:
        """The bound for a K-deep GEMM of ``precision`` inputs whose reference is ``ref`` and
        error scale ``scale`` (:func:`error_scale`), written to a ``c_type`` C. With
        ``input_unit`` u_in (inputs the kernel represents less exactly than given), each
        product may be off by 2 u_in of itself: elements by 2 u_in of their scale, the norm
        by 2 u_in ``input_norm`` (:func:`product_norm` times |alpha|: the products' errors
        add like a random walk, three times the rounding's expected walk, once more for
        truncation's bias)."""
        cls.of_norms(precision, k, c_type, 0.0, 0.0, 0.0)  # an unknown type fails first
        return cls.of_norms(precision, k, c_type, float(np.linalg.norm(scale)),
                            float(np.linalg.norm(ref)), c_rounding_norm(ref, c_type),
                            input_unit, input_norm)

    @classmethod
    def of_norms(cls, precision: str, k: int, c_type: str, scale_norm: float, ref_norm: float,
                 rounding: float, input_unit: float = 0.0, input_norm: float = 0.0
                 ) -> Tolerance:
        """:meth:`for_gemm` from the norms of the error scale, the reference and C's rounding
        of it (:func:`c_rounding_norm`)."""
        if precision not in PRECISIONS:
            raise HarnessError(f"no tolerance for precision {precision!r}; expected one of "
                               f"{', '.join(PRECISIONS)}")
        if c_type not in C_TYPES:
            raise HarnessError(f"no tolerance for C type {c_type!r}; expected one of "
                               f"{', '.join(C_TYPES)}")
        walk = accumulation_bound(k)
        norm_abs = NORM_SAFETY * walk * scale_norm + (1.0 + C_ROUNDING_SLACK) * rounding
        norm_abs += 2.0 * input_unit * input_norm
        return cls(c_type, ELEMENT_SAFETY * walk, norm_abs, ref_norm, 2.0 * input_unit,
                   rounding)

    def element_limit(self, ref: np.ndarray, scale: np.ndarray) -> np.ndarray:
        """Each element's bound on |out - ref|: the accumulation's (and the inputs'
        representation's), plus half an ulp of C at the largest magnitude the accumulation
        allows."""
        local = (self.element_factor + self.input_factor) * scale.astype(np.float64)
        if self.c_type == "fp32":
            return local
        return local + half_ulp(np.abs(ref) + local, self.c_type)


def c_rounding_norm(ref: np.ndarray, c_type: str) -> float:
    """||round_C(ref) - ref||_F: what storing the exact result in C's type alone costs."""
    if c_type == "fp32":
        return 0.0
    return float(np.linalg.norm(to_float64(stored(ref, c_type), c_type) - ref))


FINDINGS = ("ok", "unwritten", "non-finite", "wrong values", "ignores beta", "ignores alpha",
            "race", "keeps state between launches", "depends on C's contents",
            "writes outside C", "faster than the hardware allows", "reads C when beta = 0",
            "nondeterministic", "less accurate than FP32", "narrower range than claimed",
            "wrong when timed", "adapts to timing", "replays an earlier result",
            "changes its inputs", "memoises", *FP8_FINDINGS)
"""What a check can find, each a different cause (the first failed check's is the row's).
"reads C when beta = 0" is a note unless BLAS strictness is asked for; "nondeterministic" is
a note for a kernel whose spec declares it (atomics), a failure otherwise."""


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
    fp32_multiple: float = math.nan
    """The error norm as a multiple of FP32 accumulation's on the same inputs
    (:func:`fp32_yardstick`); NaN where not measured."""

    @classmethod
    def finding_only(cls, finding: str, m: int, n: int, k: int, seed: int, alpha: float,
                     beta: float, message: str, bad: int = 0) -> CheckResult:
        """A failed check that is not an error measurement (race, writes outside C)."""
        return cls(False, m, n, k, seed, alpha, beta, math.nan, math.nan, bad, 0, 0.0,
                   message, finding)


def input_dtype(precision: str) -> np.dtype:
    """The host dtype of A and B for a precision or an FP8 format (BF16 as its uint16 bits)."""
    if precision in (*FP8_FORMATS, "fp8"):
        return np.dtype(np.uint8)
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


def tf32_round(x: np.ndarray) -> np.ndarray:
    """Round float32 to TF32 (10 explicit mantissa bits, round to nearest even), as float32
    with the low 13 bits zero."""
    raw = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounding = ((raw >> 13) & 1) + 0xFFF
    return ((raw + rounding) & np.uint32(0xFFFFE000)).view(np.float32)


def stored(values: np.ndarray, kind: str) -> np.ndarray:
    """float values in the device's storage format for ``kind`` (a precision or C type).
    TF32 operands are stored representable in TF32, so a TF32 kernel's products are exact and
    only its accumulation is judged, as for 16-bit inputs."""
    if kind in FP8_FORMATS:
        return FP8_FORMATS[kind].encode(values)  # nearest, ties to even, saturating
    values = np.asarray(values, dtype=np.float32)
    if kind == "bf16":
        return bf16_bits(values)
    if kind == "tf32":
        return tf32_round(values)
    return values.astype(input_dtype(kind))


def to_float64(array: np.ndarray, kind: str) -> np.ndarray:
    """The exact values of an array in storage format ``kind``."""
    if kind in FP8_FORMATS:
        return FP8_FORMATS[kind].decode(array)
    return (bf16_to_float(array) if kind == "bf16" else array).astype(np.float64)


WIDE_EXPONENT = {"fp32": 20, "tf32": 20, "bf16": 20, "fp16": 2}
"""The ``wide`` draw's exponent range per precision: values m 2^e, m uniform in [-1, 1), e
uniform in [-E, E] (FP16's own range is 2^-24..65504: E = 2 keeps its sums finite)."""
DRAWS = ("uniform", "wide")


def random_operand(rng: np.random.Generator, shape: tuple[int, int], precision: str,
                   draw: str = "uniform"):
    """A random operand in the device's storage format and its exact float64 value: uniform
    in [-1, 1), or with ``draw = "wide"`` spread over exponents (:data:`WIDE_EXPONENT`; TF32
    operands then unrounded FP32 values), on the 2^-23 grid (contents.check_operand: runs')."""
    values = rng.integers(0, 1 << 24, size=shape) * 2.0**-23 - 1.0
    if draw == "wide":
        e = WIDE_EXPONENT[precision]
        values = np.ldexp(values, rng.integers(-e, e + 1, size=shape))
        if precision == "tf32":
            store = values.astype(np.float32)
            return store, store.astype(np.float64)
    elif draw != "uniform":
        raise HarnessError(f"operands are drawn {' or '.join(DRAWS)}, not {draw!r}")
    store = stored(values, precision)
    return store, to_float64(store, precision)


def reference(a64: np.ndarray, b64: np.ndarray, alpha: float, beta: float,
              c64: np.ndarray | None) -> np.ndarray:
    """alpha * A @ B + beta * C in float64, A and B given in row-major logical shape."""
    out = alpha * (a64 @ b64)
    if beta != 0.0:
        out += beta * c64
    return out


def _relative(err_norm: float, ref_norm: float) -> float:
    if ref_norm:
        return err_norm / ref_norm
    return 0.0 if err_norm == 0.0 else math.inf
