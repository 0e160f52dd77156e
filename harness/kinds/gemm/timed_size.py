"""A size's own check on the operands it is timed on (measure.checked), in two parts: the
device's (the kernel launched twice from a poisoned C, and cuBLAS once per shape and types,
each output read back) and the host's (each output against the float64 reference, the two
runs' bits, the summary with the battery's results). A run starts the host's part on a thread
of its own before the size's timing, and the row waits for it (issue 37); the launches, and
whatever they crash, still come before the timing, the battery's verdict before any launch at
the size, and no figure goes out before its verdict. The host's part touches nothing on the
device: it holds the reference computed before the launches."""

from __future__ import annotations

import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from harness.bench.phases import CHECKS_BESIDE, PHASES
from harness.bench.result import CheckSummary, Result
from harness.compiler.screen import Screen
from harness.gpu.compare_sums import KINDS
from harness.kinds.gemm import chunked, numerics, operands
from harness.kinds.gemm.checks import (
    Checked,
    KernelChecks,
    baseline_output,
    compare_to_reference,
    judge_baseline,
    outside_c,
    repeat_finding,
    summary_of,
)
from harness.kinds.gemm.gemm import LoadedGemm
from harness.kinds.gemm.launches import gemm_launch

_JUDGING = ThreadPoolExecutor(max_workers=1, thread_name_prefix="harness-size-check")
"""Where a size's own comparisons run (their numpy work on chunked.py's pool, which lets go of
the GIL), apart from the thread that judges kept launches and the one that draws inputs."""


@dataclass
class SizeCheck:
    """The device's part of a size's check done: what the host's part needs."""

    gemm: LoadedGemm
    ops: operands.Operands
    seed: int
    run_seed: int
    battery: KernelChecks
    screen: Screen | None
    known: tuple
    """The reference, its error scale and an FP8 GEMM's walk (checks.known_of), made before
    the launches."""
    runs: list[tuple[np.ndarray, int]]
    """The two launches' outputs and their guards' overwritten elements."""
    baseline: np.ndarray | None
    """cuBLAS's output where its check is due (once per shape and types in a session)."""
    totals: tuple[chunked.Sums | None, ...] = (None, None)
    """Each output's comparison sums, made on the device where its reference has a device
    copy (gpu/compare_sums.py); None: the host makes them."""
    baseline_total: chunked.Sums | None = None
    """cuBLAS's output's, likewise."""

    def start(self, res: Result) -> Future:
        """:meth:`judged` on a thread of its own, at once: beside the size's own timing, not
        queued behind the kept launches of the sizes before it."""
        def judging() -> Result:
            with PHASES(CHECKS_BESIDE):
                return self.judged(res)
        return _JUDGING.submit(judging)

    def judged(self, res: Result) -> Result:
        """``res`` with the size's checks: their summary, ended FAIL on the first failure."""
        gemm, ops, seed = self.gemm, self.ops, self.seed
        deep = ops.k >= numerics.TIMED_DEEP_K and ops.m * ops.n >= numerics.TIMED_DEEP_OUTPUTS
        (out, guard), (out2, guard2) = self.runs

        def compared(output: np.ndarray, total: chunked.Sums | None) -> numerics.CheckResult:
            return compare_to_reference(gemm, ops, output, seed, 1.0, 0.0, ops.initial(),
                                        deep, known=self.known, total=total)

        first = Checked(out, compared(out, self.totals[0]), guard)
        # compared again only where its bits differ (at 4096 a comparison costs a second)
        same = not (numerics.bits(out2) != numerics.bits(out)).any()
        again = Checked(out2, first.result if same else compared(out2, self.totals[1]), guard2)
        results = list(self.battery.results)
        if first.guard:
            results.append(outside_c(first.result, first.guard))
        found = repeat_finding(gemm, [first, again], launches_before=0)
        if found is not None and not found.passed:
            results.append(found)
        results.append(first.result)
        if self.baseline is not None:
            judge_baseline(gemm, ops, self.baseline, seed, known=self.known,
                           total=self.baseline_total)
        passed, max_rel, finding, failure, of_bound = summary_of(results)
        notes = tuple(self.battery.notes) + ((found.message,) if found and found.passed
                                             else ())
        if self.battery.skipped:  # how little the constraints let the battery check
            notes += (f"battery: {self.battery.plan.summary()}",)
        res = res.with_parts(
            checks=CheckSummary(passed, len(results), max_rel, tuple(self.battery.skipped),
                                finding, failure, notes,
                                fp32_multiple=first.result.fp32_multiple, of_bound=of_bound),
            screen=self.screen.lines() if self.screen else (), seed=self.run_seed)
        return res.ended("FAIL", failure) if failure else res


def launched(session, gemm: LoadedGemm, ops: operands.Operands, known: tuple,
             battery: KernelChecks, screen: Screen | None) -> tuple[SizeCheck, float]:
    """The device's part of a size's check (``known``: checks.known_of, made before), and
    the first launch's host wall time (with its synchronisation: a timing estimate)."""
    stream, spec, seed = session.stream, gemm.kernel.spec, ops.seed
    runs, took, totals = [], [], []
    sums = _device_sums(session, gemm, ops, known)
    for _ in range(2):
        ops.poison_c(stream)
        t0 = time.perf_counter()
        gemm_launch(gemm, ops, stream)()
        runs.append(ops.result(stream))
        took.append((time.perf_counter() - t0) * 1e3)
        totals.append(sums(True) if sums is not None else None)
    key = (ops.m, ops.n, ops.k, seed, spec.precision, spec.layout_a, spec.layout_b,
           spec.layout_c, spec.c_type, *operands.fp8_key(spec))
    baseline = baseline_total = None
    if key not in session.baseline_checked:
        baseline = baseline_output(session.blas, gemm, ops, stream)
        session.baseline_checked.add(key)
        if baseline is not None and sums is not None:  # judged with no initial C
            baseline_total = sums(False)
    return SizeCheck(gemm, ops, seed, session.run_seed, battery, screen, known, runs,
                     baseline, tuple(totals), baseline_total), took[0]


def _device_sums(session, gemm: LoadedGemm, ops: operands.Operands, known: tuple):
    """What makes the sums of the output in ``ops.out`` against ``known``'s reference on the
    device (given whether to count the elements still holding the sentinel), where the
    reference has a device copy (made there), C starts as the sentinel, and the check is not
    an FP8 GEMM's (its bound is the walk's); None: the host makes them (and always with
    ``HARNESS_HOST_SUMS`` set: the experiments' before and after)."""
    spec = gemm.kernel.spec
    if os.environ.get("HARNESS_HOST_SUMS") or ops.fp8 is not None or spec.c_type not in KINDS or (
            ops.c_start is not None and ops.d is None):
        return None
    twin = session.twins.of(known[0])
    if twin is None:
        return None
    factor = chunked.element_factor(ops.k, chunked.input_unit(spec, ops))
    word = numerics.SENTINEL[spec.c_type]
    return lambda initial: chunked.of_device(session.compare_sums.sums(
        ops.out, spec.c_type, ops.layout_c, *twin, word if initial else None, factor, ops.m,
        ops.n))
