"""The check library: what a kernel must pass before it is timed, and what its failures mean.

Each check draws fresh inputs from a seed, fills C with the sentinel (beta = 0) or random start
values (beta != 0) and a guard past its end, launches once and compares with float64
(comparison.compare names the finding: unwritten, non-finite, wrong values, ignores beta, ignores
alpha). A check may run the same launch again on the same inputs: identical runs must agree bit for
bit (a race; a kernel that keeps state between launches; a nondeterministic kernel that did not say
so), on an idle GPU and behind a crowd that holds most of its SMs (gpu/crowd.py). The guard after C
catches stores without bounds checks. Two launches are probes: NaN in C at beta = 0 (a kernel that
computes beta * C there reads C when beta = 0: a note, a failure under BLAS strictness) and new
inputs with C still holding the last result (a kernel that skips work where C looks computed).
plan.py says which checks a kernel gets, battery.py runs them in order and references.py says
where their references are made.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np

from harness.errors import HarnessError
from harness.gpu.crowd import PRESSES, Crowd
from harness.gpu.cublas import Cublas
from harness.gpu.driver import Stream
from harness.kinds.gemm import chunked, numerics, operands
from harness.kinds.gemm.fp8 import check as fp8_check
from harness.kinds.gemm.gemm import LoadedGemm
from harness.kinds.gemm.numerics import CheckResult
from harness.kinds.gemm.references import known_of, reference_engine

KEEPS_STATE = "keeps state between launches"
DEPENDS_ON_C = "depends on C's contents"
NONDETERMINISTIC = "nondeterministic"


def _launch(gemm: LoadedGemm, ops: operands.Operands, alpha: float, beta: float,
            stream: Stream) -> None:
    gemm.launcher(ops.m, ops.n, ops.k, alpha, ops.a.address, ops.b.address, beta,
                  ops.c.address, stream, d=ops.d.address if ops.d else None)()


@dataclass
class Checked:
    """One launch's output and its comparison with the reference."""

    out: np.ndarray
    result: CheckResult
    guard: int


def compare_to_reference(gemm: LoadedGemm, ops: operands.Operands, out: np.ndarray, seed: int,
                         alpha: float, beta: float, initial: np.ndarray | None,
                         deep: bool = False, known: tuple | None = None,
                         total: chunked.Sums | None = None) -> CheckResult:
    """``out`` (C after a launch on ``ops``) against the float64 reference of ``ops``, its
    error also as a multiple of FP32 accumulation's on the same inputs; ``deep`` (K >= 2048,
    or a timed size): a kernel that claims FP32 fails above numerics.FP32_MULTIPLE_MAX.
    ``known``: :func:`known_of`, made on the device's thread; ``total``: the device's sums."""
    spec = gemm.kernel.spec
    k = ops.k
    ref, scale, walked = known if known is not None else known_of(gemm, ops, seed, alpha, beta)
    if ops.fp8 is not None:  # its scales are in a64 and b64; its bound is the window's walk
        return fp8_check.check(out, *ops.codes, ops.fp8, ops.scales, spec.c_type, seed=seed,
                               initial=initial, ref=ref, walked=walked)
    via, unit = getattr(spec, "fp32_via", ""), chunked.input_unit(spec, ops)
    strict = deep and spec.precision == "fp32" and not via
    got = chunked.compare(
        out, ref, spec.precision, k=k, seed=seed, alpha=alpha, beta=beta, c_type=spec.c_type,
        initial=initial, c64=ops.c64, scale=scale, operands=(ops.a64, ops.b64) if strict else None,
        yardstick=(numerics.fp32_yardstick(ops.a64, ops.b64, alpha, ops.product_norm())
                   if beta == 0.0 and ops.draw == "uniform" else None),
        max_multiple=numerics.FP32_MULTIPLE_MAX if strict else None, input_unit=unit,
        input_norm=abs(alpha) * ops.product_norm() if unit else 0.0, total=total)
    return _past_fp16(got, spec.precision, ops)


FP16_MAX = 65504.0


def _past_fp16(r: CheckResult, precision: str, ops) -> CheckResult:
    """A TF32 or FP32 kernel's non-finite outputs from finite inputs some of which lie past
    FP16's largest value (contents.py scales one TF32 element in 64 by 2^17): named for what
    they show, a computation in FP16 (the fp16_as_tf32 fixture read "non-finite: an
    overflow, or arithmetic on memory nothing wrote" on the H100)."""
    if r.passed or r.finding != "non-finite" or precision not in ("tf32", "fp32"):
        return r
    widest = max(float(np.abs(ops.a64).max(initial=0.0)), float(np.abs(ops.b64).max(initial=0.0)))
    if not FP16_MAX < widest < np.inf:
        return r
    return narrower(r, precision, f"on finite inputs reaching {widest:.3g}, past FP16's "
                                  f"{FP16_MAX:g},")


def launch_and_compare(gemm: LoadedGemm, ops: operands.Operands, stream: Stream, seed: int,
                       alpha: float = 1.0, beta: float = 0.0, deep: bool = False) -> Checked:
    """C poisoned, one launch, its output compared with the reference."""
    ops.poison_c(stream)
    _launch(gemm, ops, alpha, beta, stream)
    out, guard = ops.result(stream)
    return Checked(out, compare_to_reference(gemm, ops, out, seed, alpha, beta, ops.initial(),
                                             deep), guard)


def _bits_differ(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return numerics.bits(a) != numerics.bits(b)


def difference(first: Checked, other: Checked, c_type: str) -> str:
    """How two identical runs differ: how many outputs, where, and by how much."""
    changed = _bits_differ(first.out, other.out)
    row, col = np.argwhere(changed)[0]
    a = numerics.to_float64(first.out, c_type)
    b = numerics.to_float64(other.out, c_type)
    with np.errstate(invalid="ignore"):
        largest = float(np.nanmax(np.abs(a - b) / np.maximum(np.abs(a), 1e-30)))
    return (f"{int(np.count_nonzero(changed))} of {changed.size} outputs differ (first at row "
            f"{row}, col {col}; largest relative difference {largest:.2e})")


def repeat_finding(gemm: LoadedGemm, runs: list[Checked], launches_before: int = 0
                   ) -> CheckResult | None:
    """What identical runs (same inputs, same buffers, C poisoned before each) say, when their
    outputs are not bit for bit the same: None when they are.

    The first right and the later ones wrong and alike (or every wrong one alike) is a kernel
    that keeps state between launches; wrong runs that differ is a race; runs that differ and
    all pass are a nondeterministic kernel: a note when its spec says so (atomics), else a
    failure."""
    first, spec = runs[0], gemm.kernel.spec
    r = first.result
    where = (r.m, r.n, r.k, r.seed, r.alpha, r.beta)
    for i, other in enumerate(runs[1:], start=2):
        if not _bits_differ(first.out, other.out).any():
            continue
        diff = difference(first, other, spec.c_type)
        later = runs[i - 1:]
        if all(run.result.passed for run in runs):
            if spec.nondeterministic:
                return CheckResult(True, *where[:3], *where[3:], r.rel_err_norm, r.max_abs_err,
                                   0, 0, r.tolerance_norm,
                                   f"nondeterministic (declared): identical runs differ: {diff}, "
                                   "every run within tolerance", NONDETERMINISTIC)
            return CheckResult.finding_only(
                NONDETERMINISTIC, *where,
                f"nondeterministic: identical runs on the same inputs give different outputs: "
                f"{diff}, each within tolerance; a kernel whose result changes between runs "
                "races (an unsynchronised read, blocks writing the same outputs), unless it "
                "sums with atomics whose order changes: then declare nondeterministic = true "
                "in its spec", int(np.count_nonzero(_bits_differ(first.out, other.out))))
        alike = all(not _bits_differ(later[0].out, x.out).any() for x in later[1:])
        # wrong launches that give the same bits, right ones between them (a kernel whose
        # state or clock decides when it skims) keep state too; a race's wrong bits differ
        wrong = [x for x in runs if not x.result.passed]
        if len(wrong) >= 2:
            alike = alike or all(not _bits_differ(wrong[0].out, x.out).any() for x in wrong[1:])
        if r.passed and not other.result.passed and alike:
            n = launches_before + i
            return CheckResult.finding_only(
                KEEPS_STATE, *where,
                f"{KEEPS_STATE}: wrong after {n - 1} launches on the same buffers (launch "
                f"{launches_before + 1} was right, launch {n} on the same inputs is not): "
                f"{other.result.message}; a GEMM's output must depend on A, B, C, alpha and "
                "beta alone (no counters, flags or caches kept in device memory between "
                "launches)", other.result.bad_elements or other.result.unwritten_elements)
        count = int(np.count_nonzero(_bits_differ(first.out, other.out)))
        held = _holds_state(gemm)
        if held is not None:  # timer_skim on a busy GPU: some blocks skim, others do not
            return CheckResult.finding_only(
                KEEPS_STATE, *where,
                f"{KEEPS_STATE}: identical runs differ and are wrong ({diff}) and its cubin "
                f"holds {'; '.join(held.lines())}: what it keeps between launches decides "
                "its output (else a race among its blocks); a GEMM's output must depend on "
                "A, B, C, alpha and beta alone", count)
        return CheckResult.finding_only(
            "race", *where,
            f"race: identical runs differ and are wrong: {diff}; a missing barrier, a "
            "read-modify-write without an atomic, or blocks writing the same outputs", count)
    return None


def _holds_state(gemm: LoadedGemm):
    """The kernel's screening (screen.py) where its cubin holds state that outlives a launch
    (a mutable device global, the heap); None otherwise or unknown."""
    compiled = getattr(gemm, "compiled", None)
    if compiled is None:
        return None
    from harness.kinds.gemm.screening import screened_cubin
    found = screened_cubin(compiled.cubin)[1]
    return found if found is not None and found.stateful else None


def outside_c(r: CheckResult, guard: int) -> CheckResult:
    return CheckResult.finding_only(
        "writes outside C", r.m, r.n, r.k, r.seed, r.alpha, r.beta,
        f"writes outside C: {guard} elements past the end of the {r.m} x {r.n} C were "
        "overwritten (a tile that runs past M or N stores without a bounds check); guard the "
        "stores with row < M and col < N, or declare the shapes it supports in the spec's "
        "constraints", guard)


def check_one(gemm: LoadedGemm, stream: Stream, m: int, n: int, k: int, seed: int,
              alpha: float = 1.0, beta: float = 0.0, repeats: int = 0,
              baseline: Cublas | None = None, draw: str = "uniform",
              deep: bool = False) -> list[CheckResult]:
    """Run the kernel (``1 + repeats`` times, and the baseline once if given) on fresh inputs
    drawn ``draw`` and compare with float64 (``deep``: held to FP32's error too); what
    explains a failed comparison comes before it."""
    return check_launched(gemm, stream, m, n, k, seed, alpha, beta, repeats, baseline, draw,
                          deep)()


def check_launched(gemm: LoadedGemm, stream: Stream, m: int, n: int, k: int, seed: int,
                   alpha: float = 1.0, beta: float = 0.0, repeats: int = 0,
                   baseline: Cublas | None = None, draw: str = "uniform",
                   deep: bool = False, crowd: Crowd | None = None
                   ) -> Callable[[], list[CheckResult]]:
    """:func:`check_one`'s device part now (the launches, their outputs read, the baseline's
    check, a reference the GPU computes), and its host part, the comparisons with float64, as
    the function returned: it touches no device, so it may run on another thread while the
    next check launches. With ``crowd`` and repeats, two more identical runs: one behind a
    crowd (gpu/crowd.py: its blocks in another order than on an idle GPU), one on an idle GPU
    again (a run wrong behind the crowd and right after it is a race, not kept state)."""
    spec = gemm.kernel.spec
    ops = operands.for_kernel(stream, spec, m, n, k, seed, with_c=beta != 0.0, draw=draw)
    try:
        outputs = []
        presses = [None] * (1 + repeats) + ([PRESSES[-1], None] if crowd and repeats else [])
        for press in presses:
            ops.poison_c(stream)
            if press is None:
                _launch(gemm, ops, alpha, beta, stream)
            else:
                crowd.around(partial(_launch, gemm, ops, alpha, beta, stream), press)
            outputs.append(ops.result(stream))
        known = (known_of(gemm, ops, seed, alpha, beta)
                 if reference_engine(m, n, k) is not None else None)
        if baseline is not None:
            check_baseline(baseline, gemm, ops, stream, seed, alpha, beta)
    finally:
        ops.close()  # its device buffers; the host values the comparisons read stay
    initial = ops.initial()

    def judged() -> list[CheckResult]:
        runs = [Checked(out, compare_to_reference(gemm, ops, out, seed, alpha, beta, initial,
                                                  deep, known=known), guard)
                for out, guard in outputs]
        causes = [outside_c(runs[0].result, runs[0].guard)] if runs[0].guard else []
        found = repeat_finding(gemm, runs)
        if found is not None:
            causes.append(found)
        return causes + [runs[0].result]

    return judged


def check_baseline(blas: Cublas, gemm: LoadedGemm, ops: operands.Operands, stream: Stream,
                   seed: int, alpha: float = 1.0, beta: float = 0.0) -> None:
    """cuBLAS with the kernel's types on ``ops`` (a block-scaled FP8 GEMM's with its block
    scales: Operands.blas_fp8), compared with the same reference: an error when it fails
    (then the reference or the operands are wrong, not the kernel)."""
    judge_baseline(gemm, ops, baseline_output(blas, gemm, ops, stream, alpha, beta), seed,
                   alpha, beta)


def baseline_output(blas: Cublas, gemm: LoadedGemm, ops: operands.Operands, stream: Stream,
                    alpha: float = 1.0, beta: float = 0.0) -> np.ndarray:
    """:func:`check_baseline`'s device part: cuBLAS's output on ``ops``."""
    spec = gemm.kernel.spec
    ops.poison_c(stream)
    ops.start_output(stream)
    blas.gemm(spec.precision, ops.m, ops.n, ops.k, alpha, ops.a.address, ops.b.address, beta,
              ops.out.address, spec.layout_b, spec.c_type, layout_a=spec.layout_a,
              layout_c=spec.layout_c, fp8=ops.blas_fp8)
    return ops.result(stream)[0]


def judge_baseline(gemm: LoadedGemm, ops: operands.Operands, out: np.ndarray, seed: int,
                   alpha: float = 1.0, beta: float = 0.0, known: tuple | None = None,
                   total: chunked.Sums | None = None) -> None:
    """:func:`check_baseline`'s host part: an error when cuBLAS's ``out`` fails."""
    base = compare_to_reference(gemm, ops, out, seed, alpha, beta, None, known=known,
                                total=total)
    if not base.passed:
        raise HarnessError(f"cuBLAS itself failed the check at {ops.m}x{ops.n}x{ops.k}: "
                           f"{base.message}; the reference or the operands are wrong")


def reads_c_at_beta_zero(gemm: LoadedGemm, stream: Stream, m: int, n: int, k: int,
                         seed: int) -> bool:
    """Launch once at beta = 0 with NaN in C: True when NaN comes out where the reference is
    finite (the kernel computed beta * C, and 0 * NaN is NaN)."""
    spec = gemm.kernel.spec
    ops = operands.for_kernel(stream, spec, m, n, k, seed)
    try:
        ops.poison_c(stream, nan=True)
        _launch(gemm, ops, 1.0, 0.0, stream)
        out, _ = ops.result(stream)
        return bool(np.isnan(numerics.to_float64(out, spec.c_type)).any())
    finally:
        ops.close()


def stale_c(gemm: LoadedGemm, stream: Stream, m: int, n: int, k: int,
            seed: int) -> list[CheckResult]:
    """One launch on inputs from ``seed``, then new inputs in the same buffers and a second
    launch (beta = 0) with C still holding the first result: the second must be the new
    product. A kernel that skips work where C already looks computed keeps old values."""
    spec = gemm.kernel.spec
    ops = operands.for_kernel(stream, spec, m, n, k, seed)
    try:
        first = launch_and_compare(gemm, ops, stream, seed)
        if not first.result.passed:
            return [first.result]
        ops.redraw(seed + 1000, stream)
        _launch(gemm, ops, 1.0, 0.0, stream)
        out, _ = ops.result(stream)
        second = compare_to_reference(gemm, ops, out, seed + 1000, 1.0, 0.0, first.out)
        if second.passed:
            return [second]
        kept = int(np.count_nonzero(~_bits_differ(out, first.out)))
        return [CheckResult.finding_only(
            DEPENDS_ON_C, m, n, k, seed + 1000, 1.0, 0.0,
            f"{DEPENDS_ON_C}: launched at beta = 0 on new inputs with C still holding the "
            f"previous result, the output is wrong ({kept} of {out.size} outputs kept their "
            f"old values): {second.message}; the kernel skips work where C looks computed; "
            "at beta = 0 every output must come from A and B alone", kept or second.bad_elements)]
    finally:
        ops.close()


NARROWER = "narrower range than claimed"


def narrower(r: CheckResult, precision: str, inputs: str = "") -> CheckResult:
    """A failure named for what it shows: the kernel computes in a type whose exponents do
    not reach the claimed precision's (FP16 for TF32, say). ``inputs``: what the inputs were
    (default: the wide-exponent check's)."""
    if not inputs:
        spread = numerics.WIDE_EXPONENT[precision]
        inputs = (f"on inputs spread over exponents -{spread}..{spread}"
                  f"{' (unrounded FP32 values)' if precision == 'tf32' else ''}")
    return dataclasses.replace(
        r, finding=NARROWER,
        message=f"{NARROWER}: {inputs} it is wrong: {r.message}; it computes in a type with a "
                f"narrower exponent range than {precision} (FP16?)")


def summary_of(results: list[CheckResult]) -> tuple[int, float, str, str, float]:
    """Passed count, the largest error norm, the first failure's finding and text, and the
    largest error norm as a fraction of its own check's bound."""
    failed = [r for r in results if not r.passed]
    max_rel = max((r.rel_err_norm for r in results if r.rel_err_norm == r.rel_err_norm),
                  default=float("nan"))
    if any(r.rel_err_norm == float("inf") for r in results):
        max_rel = float("inf")
    of_bound = max((r.rel_err_norm / r.tolerance_norm for r in results
                    if r.tolerance_norm > 0 and r.rel_err_norm == r.rel_err_norm),
                   default=float("nan"))
    if not failed:
        return len(results), max_rel, "ok", "", of_bound
    f = failed[0]
    return (len(results) - len(failed), max_rel, f.finding,
            f"{len(failed)} of {len(results)} checks failed; first at {f.m}x{f.n}x{f.k} seed "
            f"{f.seed} alpha {f.alpha} beta {f.beta}: {f.message}", of_bound)
