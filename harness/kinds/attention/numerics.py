"""The error bound an attention kernel's output is held to, derived from its arithmetic, and
the verdict that names a failure's cause (docs/attention.md, "Numerics").

A kernel declaring FP32 accumulation computes, per query row i and output column d,
``O_id = sum_j p_ij v_jd`` with ``p_ij = exp(x_ij - m_i) / l_i``. Its errors, from the inputs
exactly as stored:

- the logits ``x_ij = scale * q_i . k_j`` summed in FP32 (D products, each exact: a 16-bit
  product fits FP32), and the exponent's argument rounded once more (``x log2 e - m log2 e`` in
  FP32): a relative error on ``p_ij`` of ``2 u32 (|x_ij| + |m_i|) + u32 D |scale| |q_i||k_j|``;
- ``p_ij`` rounded to the type the second product takes (BF16 or FP16 for ``mma.sync``:
  ``u_p = 2^-8`` or ``2^-11``; FP32 for a kernel that keeps P in FP32);
- the exponential itself (``ex2.approx``: relative error under 2^-22; 2^-21 is taken);
- the sums over keys in FP32 (``u32 = 2^-24``), the running max's rescales included;
- the output rounded to its type (half an ulp: ``u_out |O_id|``, plus half the smallest
  subnormal).

Errors on different keys are independent and of either sign, so they add as a random walk
(Higham and Mary, "A New Approach to Probabilistic Rounding Error Analysis", SISC 2019): with
``rho_ij`` the first three's relative error, the output's error is within
``lambda sqrt(sum_j (p_ij rho_ij v_jd)^2 + O_id^2 sum_j (p_ij rho_ij)^2)`` except with
probability ``2 exp(-lambda^2 / 2)`` per element (``lambda = 8``: 2.5e-14). The exponential's
own error may be biased, so it is counted in full: ``2 u_exp sum_j p_ij |v_jd|``. The FP32 sums
add ``lambda u32 sqrt(S_kv) sum_j p_ij |v_jd|``. A worst-case bound (every error aligned) would
be ``sqrt(S_kv)`` times wider and would pass a 16-bit accumulator at every length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from harness.kinds.attention.reference import Reference, attention

U32 = 2.0**-24
UNIT_ROUNDOFF = {"bf16": 2.0**-8, "fp16": 2.0**-11, "fp32": U32}
HALF_SUBNORMAL = {"bf16": 2.0**-134, "fp16": 2.0**-25, "fp32": 2.0**-150}
U_EXP = 2.0**-21
LAMBDA = 8.0
"""Standard deviations of the random walk the bound allows (a false failure per element:
2 exp(-32) = 2.5e-14)."""
OVERFLOW_LOGIT = math.log(np.finfo(np.float32).max)
"""exp(x) of FP32 overflows past 88.7: logits beyond it need the running maximum."""
BF16_POISON = 0xFF7F
"""-3.39e38 in BF16: finite (0 * poison = 0), and far past any output (|O| <= max |V|)."""
FP16_POISON = 0xFBFF
"""-65504 in FP16, for the same reasons."""
LSE_POISON = 0xFF7FFFFF
"""-FLT_MAX: a row's log-sum-exp is finite or -inf, never this."""


@dataclass(frozen=True)
class Arithmetic:
    """What a kernel declares it computes in."""

    precision: str
    """Inputs' and output's type: ``bf16`` or ``fp16``."""
    p_type: str
    """The type P meets V in: the input type (an ``mma.sync`` kernel) or ``fp32``."""

    def rho(self, d: int):
        """Each probability's relative error scale (the module's documentation)."""
        u_p = UNIT_ROUNDOFF[self.p_type]

        def rho(x: np.ndarray, m: np.ndarray, qk: np.ndarray) -> np.ndarray:
            return u_p + 2 * U32 * (np.abs(x) + np.abs(m)[:, None]) + U32 * d * qk
        return rho


def reference(q, k, v, scale: float, causal: bool, arithmetic: Arithmetic) -> Reference:
    """The float64 reference with the bound's terms for ``arithmetic``."""
    return attention(q, k, v, scale, causal, arithmetic.rho(q.shape[-1]))


def o_bound(ref: Reference, arithmetic: Arithmetic, s_kv: int) -> np.ndarray:
    """Per element, the largest |O_kernel - O| the declared arithmetic allows."""
    spread = np.sqrt(ref.spread_pv**2 + (ref.o * ref.spread_p[..., None])**2)
    out = arithmetic.precision
    return (LAMBDA * spread + (2 * U_EXP + LAMBDA * U32 * math.sqrt(s_kv)) * ref.abs_pv
            + UNIT_ROUNDOFF[out] * np.abs(ref.o) + HALF_SUBNORMAL[out])


def lse_bound(ref: Reference, s_kv: int) -> np.ndarray:
    """Per row, the largest |LSE_kernel - LSE| (FP32 output): the normaliser's random walk,
    the exponential's bias, log's own error and the FP32 rounding of m and the result."""
    finite = np.where(np.isfinite(ref.lse), ref.lse, 0.0)
    return (LAMBDA * ref.spread_p + 2 * U_EXP + LAMBDA * U32 * math.sqrt(s_kv)
            + 4 * U32 * (np.abs(np.where(np.isfinite(ref.m), ref.m, 0.0)) + np.abs(finite))
            + 2.0**-21)


@dataclass(frozen=True)
class Verdict:
    """A check's outcome: ``ok``, and when not, the cause by name and where it was seen."""

    ok: bool
    cause: str = ""
    detail: str = ""
    worst_ratio: float = 0.0
    """The largest error over its bound (<= 1 passes)."""

    def __str__(self) -> str:
        return "ok" if self.ok else f"{self.cause}: {self.detail}"


def _where(index: tuple, names=("b", "h", "i", "d")) -> str:
    return ", ".join(f"{n}={int(v)}" for n, v in zip(names, index, strict=False))


def judge(o: np.ndarray, o_unwritten: np.ndarray, ref: Reference, arithmetic: Arithmetic,
          s_kv: int, *, lse: np.ndarray | None = None, lse_unwritten: np.ndarray | None = None,
          suspects=None) -> Verdict:
    """The verdict on a kernel's output ``o`` (float64, logical ``[B, H, S_q, D]``; where
    ``o_unwritten`` is True the poison was found bit for bit) and its log-sum-exp ``lse``
    (``[B, H, S_q]``, or None when the kernel writes none). ``suspects()`` yields
    ``(cause, Reference)`` pairs of likely mistakes (battery.suspects), tried in order when
    the output is off, to name the cause."""
    if o_unwritten.any():
        rows = np.argwhere(o_unwritten.any(axis=-1))
        return Verdict(False, "unwritten output",
                       f"{len(rows)} row(s) kept the poison, first at {_where(tuple(rows[0]))}"
                       " (every output row must be written, masked rows as 0)", math.inf)
    if lse is not None and lse_unwritten is not None and lse_unwritten.any():
        rows = np.argwhere(lse_unwritten)
        return Verdict(False, "unwritten log-sum-exp",
                       f"{len(rows)} value(s) kept the poison, first at "
                       f"{_where(tuple(rows[0]))}", math.inf)
    bad = ~np.isfinite(o)
    if bad.any():
        first = tuple(np.argwhere(bad)[0])
        largest = float(np.nanmax(np.abs(np.where(np.isfinite(ref.m), ref.m, 0.0))))
        if largest > OVERFLOW_LOGIT:
            return Verdict(False, "no running maximum",
                           f"NaN or Inf at {_where(first)} with logits up to {largest:.3g}: "
                           f"exp overflows FP32 past {OVERFLOW_LOGIT:.1f} unless the row's "
                           "maximum is subtracted first", math.inf)
        return Verdict(False, "not finite", f"NaN or Inf at {_where(first)} where the "
                       "reference is finite", math.inf)
    bound = o_bound(ref, arithmetic, s_kv)
    error = np.abs(o - ref.o)
    ratio = error / bound
    worst = float(ratio.max()) if ratio.size else 0.0
    if worst > 1:
        at = np.unravel_index(int(ratio.argmax()), ratio.shape)
        cause = _name(o, arithmetic, s_kv, suspects) or _accuracy_cause(error, ref)
        return Verdict(False, cause,
                       f"|error| {float(error[at]):.3g} is {worst:.3g}x the bound "
                       f"{float(bound[at]):.3g} at {_where(at)} (reference "
                       f"{float(ref.o[at]):.6g}, kernel {float(o[at]):.6g})", worst)
    if lse is not None:
        verdict = _judge_lse(lse, ref, s_kv)
        if not verdict.ok:
            return verdict
        worst = max(worst, verdict.worst_ratio)
    return Verdict(True, worst_ratio=worst)


def _judge_lse(lse: np.ndarray, ref: Reference, s_kv: int) -> Verdict:
    masked = ~np.isfinite(ref.lse)
    wrong_masked = masked & ~(np.isneginf(lse))
    if wrong_masked.any():
        at = tuple(np.argwhere(wrong_masked)[0])
        return Verdict(False, "wrong log-sum-exp",
                       f"a row that sees no key has log-sum-exp {float(lse[at]):.6g}, not "
                       f"-inf, at {_where(at)}", math.inf)
    error = np.where(masked, 0.0, np.abs(np.where(masked, 0.0, lse) - np.where(masked, 0.0,
                                                                               ref.lse)))
    error = np.where(np.isfinite(error), error, math.inf)
    ratio = error / lse_bound(ref, s_kv)
    worst = float(ratio.max()) if ratio.size else 0.0
    if worst <= 1:
        return Verdict(True, worst_ratio=worst)
    at = np.unravel_index(int(ratio.argmax()), ratio.shape)
    kernel, want = float(lse[at]), float(ref.lse[at])
    hint = ""
    if math.isfinite(kernel) and abs(kernel - want * math.log2(math.e)) < 1e-3 * abs(want):
        hint = " (it is in log2 units: multiply by ln 2)"
    elif abs(kernel - (want - float(ref.m[at]))) < 1e-3 * max(1.0, abs(want)):
        hint = " (the row maximum was not added back)"
    return Verdict(False, "wrong log-sum-exp",
                   f"{kernel:.6g} against {want:.6g} at {_where(at)}, {worst:.3g}x the "
                   f"bound{hint}", worst)


def _name(o, arithmetic: Arithmetic, s_kv: int, suspects) -> str:
    if suspects is None:
        return ""
    for cause, candidate in suspects():
        if (np.abs(o - candidate.o) <= o_bound(candidate, arithmetic, s_kv)).all():
            return cause
    return ""


def _accuracy_cause(error: np.ndarray, ref: Reference) -> str:
    # relative to what the row adds up: FP32 arithmetic stays near 2^-20 of it, a 16-bit
    # accumulator or rounding reaches 2^-12..2^-6, a wrong formula ~1
    relative = float((error / np.maximum(ref.abs_pv, 1e-300)).max())
    if relative < 2.0**-5:
        return "accuracy (the size of 16-bit accumulation or rounding, not FP32's)"
    return "wrong output"
