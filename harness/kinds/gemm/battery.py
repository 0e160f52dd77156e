"""A kernel's check battery run: every check of its plan (plan.py) in order, each one's
launches on the caller's thread and its comparisons on the battery's threads while the next
check launches, the probes once the checks before them passed; and the host's part of a
battery drawn ahead, beside other work (:func:`prefetch_battery`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from harness.gpu import reference as gpu_reference
from harness.gpu.crowd import Crowd
from harness.gpu.driver import Stream
from harness.kinds.gemm import contents, host_values
from harness.kinds.gemm.checks import (
    NONDETERMINISTIC,
    check_launched,
    narrower,
    reads_c_at_beta_zero,
    stale_c,
)
from harness.kinds.gemm.gemm import LoadedGemm
from harness.kinds.gemm.numerics import CheckResult
from harness.kinds.gemm.plan import DEEP, READS_C, STALE_C, WIDE, Plan, PlannedCheck

READS_C_NOTE = "reads C when beta = 0 (BLAS leaves C unset then: C may hold NaN)"


@dataclass
class KernelChecks:
    """A kernel's battery before timing (the timed sizes add theirs)."""

    results: list[CheckResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """What the battery left out, with the reason (plan.Plan.skipped)."""
    notes: list[str] = field(default_factory=list)
    plan: Plan | None = None

    def note(self, text: str) -> None:
        """A finding that is not a failure, said once."""
        if text not in self.notes:
            self.notes.append(text)


def kernel_checks(gemm: LoadedGemm, stream: Stream, plan: Plan, strict_blas: bool = False,
                  say: Callable[[PlannedCheck], None] = lambda _: None,
                  run_seed: int = 0, crowd: Crowd | None = None) -> KernelChecks:
    """Every check of ``plan``, in order, on inputs drawn from ``run_seed`` and each check's
    own seed; the probes run only once the checks before them passed (their findings mean
    little on a kernel that computes wrong values)."""
    out = KernelChecks(skipped=list(plan.skipped), plan=plan)
    pending: list[tuple[PlannedCheck, Future]] = []

    def judged() -> None:  # the comparisons made so far, their results in the plan's order
        for check, comparing in pending:
            for r in comparing.result():
                if check.kind == WIDE and r.finding in ("non-finite", "wrong values"):
                    r = narrower(r, gemm.kernel.spec.precision)
                if r.passed and r.finding == NONDETERMINISTIC:
                    out.note(r.message)
                    continue
                out.results.append(r)
        pending.clear()

    for planned in plan.checks:
        say(planned)
        check = dataclasses.replace(planned, seed=contents.derive(run_seed, planned.seed))
        shape = check.shape
        if check.kind in (READS_C, STALE_C):
            judged()
        if check.kind == READS_C:
            if all(r.passed for r in out.results) and reads_c_at_beta_zero(
                    gemm, stream, *shape, check.seed):
                if strict_blas:
                    out.results.append(CheckResult.finding_only(
                        "reads C when beta = 0", *shape, check.seed, 1.0, 0.0,
                        f"{READS_C_NOTE}; a failure under BLAS strictness (--blas-strict or "
                        "blas_strict = true): branch on beta == 0 and write alpha * acc alone"))
                else:
                    out.note(READS_C_NOTE)
            continue
        if check.kind == STALE_C:
            out.results += stale_c(gemm, stream, *shape, check.seed)
            continue
        accuracy = {DEEP: {"deep": True}, WIDE: {"draw": "wide"}}.get(check.kind, {})
        comparisons = check_launched(gemm, stream, *shape, check.seed, check.alpha,
                                     check.beta, check.repeats, crowd=crowd, **accuracy)
        pending.append((check, _BATTERY.submit(comparisons)))
    judged()
    return out


_BATTERY = ThreadPoolExecutor(max_workers=4, thread_name_prefix="harness-battery")
"""Where a battery's comparisons run while its next checks launch (kernel_checks): a check's
launches take the device some milliseconds, its comparisons the host longer; one after the
other on the main thread they were most of the battery's 8 s in a default run (issue 37).
Their blocks of rows run on the main thread's pool (chunked.pool)."""


def prefetch_battery(spec, battery: Plan, run_seed: int, executor: Executor) -> None:
    """The host's part of ``battery``'s checks drawn on ``executor`` beside other work (the
    device timing the kernel before): every check's inputs, and the references the host
    computes (checks under gpu.reference.MIN_MNK), as :func:`kernel_checks` will ask for them
    (the same seeds), so that it finds them made."""
    for planned in battery.checks:
        seed = contents.derive(run_seed, planned.seed)
        m, n, k = planned.shape
        alpha, beta = ((1.0, 0.0) if planned.kind in (READS_C, STALE_C)
                       else (planned.alpha, planned.beta))
        ref = (alpha, beta) if m * n * k < gpu_reference.MIN_MNK and planned.kind != READS_C \
            else None
        draw = "wide" if planned.kind == WIDE else "uniform"
        host_values.prefetch(executor, spec, m, n, k, seed, beta != 0.0, draw, ref)
        if planned.kind == STALE_C:  # its second launch's inputs
            host_values.prefetch(executor, spec, m, n, k, seed + 1000, False, draw, ref)

