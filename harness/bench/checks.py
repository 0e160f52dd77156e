"""The check library: what a kernel must pass before it is timed, and what its failures mean.

Each check draws fresh inputs from a seed, fills C with the sentinel (beta = 0) or random start
values (beta != 0) and a guard past its end, launches once and compares with float64
(numerics.compare names the finding: unwritten, non-finite, wrong values, ignores beta, ignores
alpha). A check may also run the launch again on the same inputs (a result that changes is a
race), and look at the guard (a kernel that writes past C has no bounds checks).

Per kernel: three seeds at each odd shape its constraints allow, once more with alpha = 0.75 and
beta = -0.5, one repeat per shape, and one launch with NaN in C at beta = 0: a kernel that turns
it into NaN reads C when beta = 0 (a note, or a failure under BLAS strictness). Per timed size:
one more check, with cuBLAS checked on the same inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from harness.bench import numerics, operands
from harness.bench.gemm import LoadedGemm
from harness.bench.numerics import CheckResult
from harness.errors import HarnessError
from harness.gpu.cublas import Cublas
from harness.gpu.driver import Stream

# Shapes that are not multiples of any tile, several seeds each: odd ones for kernels with no
# constraints, ones with N and K multiples of 4 (but of no tile) for float4 kernels, and ones
# with N and K multiples of 8 (16-byte rows of 16-bit inputs: cp.async and ldmatrix kernels).
CHECK_SHAPES = ((37, 45, 29), (127, 253, 61), (257, 129, 300), (131, 196, 68), (515, 260, 132),
                (133, 264, 104), (517, 392, 200))
CHECK_SEEDS = (11, 12, 13)
BETA_CHECK = (0.75, -0.5)
"""alpha, beta of the check that tests the beta path."""
READS_C_NOTE = "reads C when beta = 0 (BLAS leaves C unset then: C may hold NaN)"
NONDETERMINISTIC_NOTE = ("nondeterministic: identical runs give outputs that differ in their "
                         "last bits, every run within tolerance (atomics whose order changes)")
REPEATS = 2
"""Extra runs on the same inputs in a repeat check: a result that changes is a race (or, when
every run is within tolerance, a note: atomics in an order that changes)."""


def _launch(gemm: LoadedGemm, ops: operands.Operands, alpha: float, beta: float,
            stream: Stream) -> None:
    gemm.launcher(ops.m, ops.n, ops.k, alpha, ops.a.address, ops.b.address, beta,
                  ops.c.address, stream)()


def check_one(gemm: LoadedGemm, stream: Stream, m: int, n: int, k: int, seed: int,
              alpha: float = 1.0, beta: float = 0.0, repeat: bool = False,
              baseline: Cublas | None = None) -> list[CheckResult]:
    """Run the kernel (and the baseline if given) on fresh inputs and compare with float64."""
    spec = gemm.kernel.spec
    ops = operands.Operands(stream, m, n, k, spec.precision, spec.layout_b, seed,
                            with_c=beta != 0.0, c_type=spec.c_type)
    try:
        ref = operands.reference(ops, (m, n, k, seed, spec.precision, spec.c_type, alpha, beta),
                                 alpha, beta)

        def run_and_compare() -> tuple[np.ndarray, CheckResult, int]:
            ops.poison_c(stream)
            _launch(gemm, ops, alpha, beta, stream)
            out, guard = ops.result(stream)
            return out, numerics.compare(out, ref, spec.precision, k=k, seed=seed, alpha=alpha,
                                         beta=beta, c_type=spec.c_type, initial=ops.initial(),
                                         c64=ops.c64), guard

        out, result, guard = run_and_compare()
        causes = []  # what explains a failed comparison goes before it
        if guard:
            causes.append(CheckResult.finding_only(
                "writes outside C", m, n, k, seed, alpha, beta,
                f"writes outside C: {guard} elements past the end of the {m} x {n} C were "
                "overwritten (a tile that runs past M or N stores without a bounds check); "
                "guard the stores with row < M and col < N, or declare the shapes it supports "
                "in the spec's constraints", guard))
        for _ in range(REPEATS if repeat else 0):
            again, again_result, _ = run_and_compare()
            changed = numerics.bits(out) != numerics.bits(again)
            differ = int(np.count_nonzero(changed))
            if not differ:
                continue
            where = np.argwhere(changed)[0]
            if result.passed and again_result.passed:
                causes.append(CheckResult(
                    True, m, n, k, seed, alpha, beta, result.rel_err_norm, result.max_abs_err,
                    0, 0, result.tolerance_norm,
                    f"nondeterministic: {differ} outputs changed between identical runs (first "
                    f"at row {where[0]}, col {where[1]}), every run within tolerance",
                    "nondeterministic"))
            else:
                causes.append(CheckResult.finding_only(
                    "race", m, n, k, seed, alpha, beta,
                    f"race: {differ} outputs differ between two identical runs (first at row "
                    f"{where[0]}, col {where[1]}) and the results are wrong: a missing barrier, "
                    "a read-modify-write without an atomic, or blocks writing the same outputs",
                    differ))
            break
        results = causes + [result]
        if baseline is not None:
            ops.poison_c(stream)
            baseline.gemm(spec.precision, m, n, k, alpha, ops.a.address, ops.b.address, beta,
                          ops.c.address, spec.layout_b, spec.c_type)
            base = numerics.compare(ops.result(stream)[0], ref, spec.precision, k=k, seed=seed,
                                    alpha=alpha, beta=beta, c_type=spec.c_type)
            if not base.passed:
                raise HarnessError(f"cuBLAS itself failed the check at {m}x{n}x{k}: "
                                   f"{base.message}; the reference or the operands are wrong")
        return results
    finally:
        ops.close()


def reads_c_at_beta_zero(gemm: LoadedGemm, stream: Stream, m: int, n: int, k: int,
                         seed: int) -> bool:
    """Launch once at beta = 0 with NaN in C: True when NaN comes out where the reference is
    finite (the kernel computed beta * C, and 0 * NaN is NaN)."""
    spec = gemm.kernel.spec
    ops = operands.Operands(stream, m, n, k, spec.precision, spec.layout_b, seed,
                            c_type=spec.c_type)
    try:
        ops.poison_c(stream, nan=True)
        _launch(gemm, ops, 1.0, 0.0, stream)
        out, _ = ops.result(stream)
        return bool(np.isnan(numerics.to_float64(out, spec.c_type)).any())
    finally:
        ops.close()


@dataclass
class KernelChecks:
    """A kernel's checks on the odd shapes (the timed sizes add theirs)."""

    results: list[CheckResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """Shapes the kernel's constraints exclude, with the reason."""
    notes: list[str] = field(default_factory=list)


def kernel_checks(gemm: LoadedGemm, stream: Stream, strict_blas: bool = False) -> KernelChecks:
    """Every odd shape the kernel's constraints allow: three seeds (one run twice, for races),
    one check of alpha and beta, and on the first shape a launch with NaN in C at beta = 0."""
    kernel = gemm.kernel
    out = KernelChecks()
    probed = False
    for i, (m, n, k) in enumerate(CHECK_SHAPES):
        problems = kernel.shape_problems(m, n, k)
        if problems:
            out.skipped += problems
            continue
        for seed in CHECK_SEEDS:
            for r in check_one(gemm, stream, m, n, k, seed + 100 * i, repeat=seed == 11):
                if r.passed and r.finding == "nondeterministic":
                    if NONDETERMINISTIC_NOTE not in out.notes:
                        out.notes.append(NONDETERMINISTIC_NOTE)
                    continue
                out.results.append(r)
        alpha, beta = BETA_CHECK
        out.results += check_one(gemm, stream, m, n, k, 7 + i, alpha=alpha, beta=beta)
        if not probed and all(r.passed for r in out.results):
            probed = True
            if reads_c_at_beta_zero(gemm, stream, m, n, k, seed=50 + i):
                if strict_blas:
                    out.results.append(CheckResult.finding_only(
                        "reads C when beta = 0", m, n, k, 50 + i, 1.0, 0.0,
                        f"{READS_C_NOTE}; a failure under BLAS strictness (--blas-strict or "
                        "blas_strict = true): branch on beta == 0 and write alpha * acc alone"))
                else:
                    out.notes.append(READS_C_NOTE)
    return out


def summary_of(results: list[CheckResult]) -> tuple[int, float, str, str]:
    """Passed count, the largest error norm, and the first failure's finding and text."""
    failed = [r for r in results if not r.passed]
    max_rel = max((r.rel_err_norm for r in results if r.rel_err_norm == r.rel_err_norm),
                  default=float("nan"))
    if any(r.rel_err_norm == float("inf") for r in results):
        max_rel = float("inf")
    if not failed:
        return len(results), max_rel, "ok", ""
    f = failed[0]
    return (len(results) - len(failed), max_rel, f.finding,
            f"{len(failed)} of {len(results)} checks failed; first at {f.m}x{f.n}x{f.k} seed "
            f"{f.seed} alpha {f.alpha} beta {f.beta}: {f.message}")
