"""A kernel measured: compiled and loaded once, put through its check battery (plan.py), then
per size checked on the operands it is timed on, timed with cuBLAS (one after the other, or
interleaved with other kernels), and its timed launches checked. Every
:class:`~harness.bench.result.Result` of a measurement is made here.

What a timing must survive before it is a figure: every repetition runs on inputs drawn
afresh for it on the device and starts from a poisoned C (capture.py); a random sample of
the timed repetitions' outputs, kept inside the timed sequence, must be right, and the inputs
unchanged after them; a kernel whose cubin can keep state (screen.py) must not run faster on
inputs it has seen; and the figure must not pass what the hardware allows for the precision
the kernel claims (limits.py).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from concurrent.futures import Executor, ThreadPoolExecutor

from harness.bench.phases import BATTERY, PHASES, TIMED_LAUNCHES, TIMED_SIZE
from harness.bench.result import (
    Baseline,
    CeilingRef,
    CheckSummary,
    Comparison,
    KernelInfo,
    LaunchInfo,
    OccupancyInfo,
    Result,
)
from harness.bench.session import BenchSession
from harness.errors import HarnessError, LaunchError
from harness.gpu.cublas import compute_name, library_name, scheme_via
from harness.gpu.timing import Timing
from harness.kernels.registry import Kernel
from harness.kinds.gemm import capture, kept_checks, limits, operands
from harness.kinds.gemm.battery import kernel_checks
from harness.kinds.gemm.hang_limits import (
    QUIET_FLOOR_S,
    Say,
    launches_limit_s,
    reference_limit_s,
    timing_limit_s,
)
from harness.kinds.gemm.launches import kernel_timed
from harness.kinds.gemm.numerics import CheckResult
from harness.kinds.gemm.plan import plan
from harness.kinds.gemm.prepared import Prepared, Ready
from harness.kinds.gemm.references import known_of
from harness.kinds.gemm.screening import screened
from harness.kinds.gemm.timed_checks import (
    Pending,
    finished,
    memo_probe,
    verify_timed,
)
from harness.kinds.gemm.timed_size import AMONG, launched
from harness.stats import Summary, peak_gflops

FASTER_THAN_HARDWARE = "faster than the hardware allows"


def prepare(session: BenchSession, kernel: Kernel, strict_blas: bool = False,
            say: Say = lambda *_, **__: None) -> Prepared:
    """Compile and load ``kernel``, and put it through its check battery (plan.plan: fresh
    inputs, two seeds, alpha and beta, identical runs, reads of C at beta = 0, stale C, on
    shapes its constraints allow)."""
    with PHASES("compile and load"):
        gemm = session.load(kernel)
    battery = plan(gemm.kernel)
    say(f"checking: {battery.summary()}", limit_s=QUIET_FLOOR_S)

    def each(check) -> None:
        say(f"check {check.kind} at {check.m}x{check.n}x{check.k}", show=False,
            limit_s=launches_limit_s(check.m, check.n, check.k, 4 + check.repeats)
            + reference_limit_s(check.m, check.n, check.k))

    # the disassembly (cuobjdump, most of a second on a cold cache) runs beside the checks
    with ThreadPoolExecutor(max_workers=1) as pool:
        screening = pool.submit(screened, gemm)
        with PHASES(BATTERY):
            checks = kernel_checks(gemm, session.stream, battery,
                                   strict_blas or gemm.kernel.spec.blas_strict, say=each,
                                   run_seed=session.run_seed, crowd=session.crowd)
        with PHASES("sass"):
            family, found = screening.result()
    spec = gemm.kernel.spec
    if family == "tensor" and spec.precision == "fp32" and not spec.fp32_via:
        checks.note("its SASS holds tensor-core instructions though it claims FP32 and "
                    "declares no fp32_via: held to FP32's accuracy and the FP32 FMA peak")
    return Prepared(gemm, KernelInfo.of(gemm.kernel), checks, family, found)


def _with_failure(res: Result, found: CheckResult) -> Result:
    """``res`` failed by one more check (``found``), its summary updated."""
    summary = res.checks or CheckSummary(0, 0, found.rel_err_norm)
    message = (f"1 of {summary.total + 1} checks failed; at {found.m}x{found.n}x{found.k} seed "
               f"{found.seed} alpha {found.alpha} beta {found.beta}: {found.message}")
    checks = dataclasses.replace(summary, total=summary.total + 1, finding=found.finding,
                                 failure=message)
    return res.with_parts(checks=checks).ended("FAIL", message)


def checked(session: BenchSession, prep: Prepared, m: int, n: int, k: int,
            say: Say = lambda *_, **__: None, defer: bool = False
            ) -> tuple[Result, Ready | None]:
    """The result at one size after its checks: final (skipped, launch error, FAIL), or
    pending with what timing it needs. ``defer``: the size's launches made, their comparisons
    left to the caller (``Ready.size``, :mod:`~harness.kinds.gemm.timed_size`)."""
    gemm, kernel = prep.gemm, prep.kernel
    res = Result.of(prep.info, m, n, k).with_parts(
        resources=gemm.compiled.resources, launch=LaunchInfo(kernel.block_threads))
    problems = kernel.shape_problems(m, n, k)
    if problems:
        return res.ended("skipped", "; ".join(problems)), None
    try:
        occ = gemm.occupancy(m, n, k)
    except LaunchError as exc:
        return res.ended("launch error", str(exc)), None
    shape = gemm.shape(m, n, k)
    offline = occ["offline"]
    res = res.with_parts(
        launch=LaunchInfo(kernel.block_threads, shape.grid, shape.dynamic_smem_bytes),
        occupancy=OccupancyInfo(occ["driver_blocks_per_sm"], offline["blocks_per_sm"],
                                offline["occupancy_pct"], offline["limiter"],
                                occ["waves_per_sm"]))
    with PHASES("operands"):
        ops = session.timing_operands(kernel, m, n, k)
    say("computing the reference", limit_s=reference_limit_s(m, n, k))
    known = known_of(gemm, ops, ops.seed, 1.0, 0.0)
    say("checking the timed size on the timed operands",  # its decoys too (timed_size.py)
        limit_s=launches_limit_s(m, n, k, 1 + AMONG))
    with PHASES(TIMED_SIZE):
        size, launch_ms = launched(session, gemm, ops, known, prep.checks, prep.screen)
        if defer:
            return res, Ready(res, ops, launch_ms, size)
        res = size.judged(res)
    return res, (None if res.status == "FAIL" else Ready(res, ops, launch_ms))


def timed(session: BenchSession, prep: Prepared, res: Result, kernel_timing: Timing,
          baseline_timing: Timing, plain_timing: Timing | None = None) -> Result:
    """``res`` completed with the kernel's and cuBLAS's timings: passed, unless a figure is
    past what the hardware allows for the precision the kernel claims (an FP32 kernel is
    held to the FP32 FMA peak whatever its SASS holds, unless it declares fp32_via).
    Tensor-core rows carry the issue ceiling of the instruction family the kernel uses."""
    device, precision, c_type = session.device, res.kernel.precision, res.kernel.c_type
    via = prep.kernel.spec.fp32_via
    if baseline_timing.findings:  # the timer's books (timing/account.py) on cuBLAS's side
        return res.ended("error", f"cuBLAS's timing: {baseline_timing.findings[0]}; no figure "
                                  "of this size is reported")
    if kernel_timing.findings:
        first = kernel_timing.findings[0]
        return _with_failure(res, CheckResult.finding_only(
            first.split(":", 1)[0], res.m, res.n, res.k, 0, 1.0, 0.0,
            f"{first}; its timing is not a figure"))
    for who, timing, family in (("cuBLAS", baseline_timing, "unknown"),
                                (res.kernel.name, kernel_timing,
                                 limits.claimed_family(precision, via))):
        why = limits.violation(session.limits, res.m, res.n, res.k, precision, c_type, family,
                               timing.median_ms, timing.sm_clock_max_mhz, timing.cold_l2,
                               fp32_via=via if who != "cuBLAS" else scheme_via(via))
        if why and who == "cuBLAS":
            return res.ended("error", f"cuBLAS timed {why}: the timer is wrong here; no "
                                      "figure of this size is reported")
        if why:
            return _with_failure(res, CheckResult.finding_only(
                FASTER_THAN_HARDWARE, res.m, res.n, res.k, 0, 1.0, 0.0, why))
    per_clock = device.arch.fma_flops_per_clock_per_sm.get(precision, float("nan"))
    parts = {"timing": kernel_timing,
             "baseline": Baseline(compute_name(precision, prep.kernel.spec), baseline_timing,
                                  c_type, library_name(precision)),
             "peak_gflops_at_clock": peak_gflops(per_clock, device.sm_count,
                                                 kernel_timing.sm_clock_mhz)}
    if plain_timing is not None:  # an fp32_via kernel: plain SGEMM beside its like-for-like
        parts["baseline_fp32"] = Baseline(compute_name(precision), plain_timing, c_type,
                                          library_name(precision))
    with PHASES("ceiling"):
        ceiling = session.ceilings.get(precision, prep.kernel.mma_family)
    if ceiling is not None:  # bf16/fp16: the share of what its instruction can issue here
        parts["ceiling"] = CeilingRef(ceiling.gflops, ceiling.instruction, ceiling.sm_clock_mhz)
    return res.with_parts(**parts).ended("pass", "ok")


def measure(session: BenchSession, prep: Prepared, m: int, n: int, k: int,
            reuse_baseline: bool = False, say: Say = lambda *_, **__: None,
            beside: Executor | None = None) -> Result | Pending:
    """Check ``prep``'s kernel at one size, time it and cuBLAS interleaved round by round (so
    that clock and power drift touch both alike, whichever ran first), a small GEMM's rounds
    taking copies of the operands in turn, both on the same copy in a round, every round on
    inputs drawn afresh; then check the timed launches kept. ``reuse_baseline`` (tuning
    sweeps): the kernel timed alone on its operands, cuBLAS once per shape and types in the
    session. ``beside``: the kept launches' comparisons on the host go to it, the size's own
    start on their thread before the timing (its launches made: timed_size.py), and a
    :class:`~harness.kinds.gemm.timed_checks.Pending` row comes back at once (the device goes on
    with the next size meanwhile); a size that fails its own check gets no figure."""
    res, ready = checked(session, prep, m, n, k, say, defer=beside is not None)
    if ready is None:
        return res
    size = ready.size.start(res) if ready.size is not None else None
    timer, ops = session.timer, ready.ops
    copies = [ops] if reuse_baseline else session.placements(prep.kernel, ops)
    outputs = session.timed_outputs(prep.kernel, copies, slots=_slots(prep))
    plain_timing: list[Timing] = []
    try:
        launch, before = kernel_timed(prep.gemm, ops, session, copies, outputs)
        if reuse_baseline:
            say("timing", limit_s=timing_limit_s(timer.options, ready.launch_ms))
            with PHASES("timing"):
                kernel_timing = timer.time(launch, before=before, after=launch.after)
        else:
            blas, poison = session.baseline_timed(prep.kernel, ops)
            # an FP32 kernel on tensor cores: plain SGEMM beside cuBLAS in its scheme
            plain = ([session.baseline_timed(prep.kernel, ops, plain=True)]
                     if prep.kernel.spec.fp32_via else [])
            say("timing the kernel and cuBLAS interleaved",
                limit_s=timing_limit_s(timer.options, ready.launch_ms, 2 + len(plain)))
            with PHASES("timing"):
                (kernel_timing, baseline_timing, *plain_timing), _ = timer.time_interleaved(
                    [launch, blas, *(p[0] for p in plain)],
                    [before, poison, *(p[1] for p in plain)],
                    after=[launch.after, None, *(None for _ in plain)], pairs=[(0, 1)])
                kernel_timing = timer.with_power(kernel_timing, launch)
        say("checking the timed launches", limit_s=launches_limit_s(m, n, k, 4)
            + timing_limit_s(timer.options, ready.launch_ms, 2))
        with PHASES(TIMED_LAUNCHES):
            gathered = kept_checks.gather(outputs)
            probe = (memo_probe(session, prep, ready, outputs)
                     if prep.screen is not None and prep.screen.stateful else None)
    finally:
        _release([outputs], [ops], session.stream)
    with PHASES("cuBLAS timing"):
        if reuse_baseline:
            say("timing cuBLAS", limit_s=timing_limit_s(timer.options, ready.launch_ms))
            baseline_timing = session.time_baseline(prep.kernel, ops, reuse=True)
        else:
            baseline_timing = timer.with_power(baseline_timing, blas)
    if size is not None:  # the row may be made on another thread: its ceiling made here
        with PHASES("ceiling"):
            session.ceilings.get(res.kernel.precision, prep.kernel.mma_family)

    def judge() -> tuple[Result, tuple[CheckResult | None, int]]:
        """The host's part: the size's own check (started before the timing), then the kept
        launches."""
        checked_res = res if size is None else size.result()
        if checked_res.status == "FAIL":
            return checked_res, (None, 0)
        return checked_res, kept_checks.finish(gathered, ready.ops, prep.screen)

    def row(judged: tuple[Result, tuple[CheckResult | None, int]]) -> Result:
        checked_res, (found, kept) = judged
        if checked_res.status == "FAIL":  # the size's own check: no figure
            return checked_res
        # the kept launches' finding first, as it was found first
        found = found or probe
        if found is not None:
            return _with_failure(checked_res, found)
        figure = timed(session, prep, checked_res, kernel_timing, baseline_timing,
                       plain_timing[0] if plain_timing else None)
        return _kept(figure, kept, launch.count)

    return finished(judge, row, beside)


def _slots(prep: Prepared) -> int | None:
    """Timed repetitions to keep: twice the default for a kernel whose cubin can keep state
    or read a clock (the stateful checks at full strength)."""
    found = prep.screen
    if found is not None and (found.stateful or found.clocks):
        return 2 * capture.SLOTS
    return None


def _kept(res: Result, kept: int, launches: int) -> Result:
    """``res`` noting how many timed repetitions were kept and checked."""
    if res.checks is None:
        return res
    return res.with_parts(checks=dataclasses.replace(res.checks, timed_checked=kept,
                                                     launches=launches))


def check_only(session: BenchSession, prep: Prepared, m: int, n: int, k: int,
               say: Say = lambda *_, **__: None) -> Result:
    """``harness check``: the size checked on the operands a run would time on, not timed."""
    res, ready = checked(session, prep, m, n, k, say)
    return res if ready is None else res.ended("pass", "checked, not timed")


def compare(session: BenchSession, preps: Sequence[Prepared], m: int, n: int, k: int,
            say: Say = lambda *_, **__: None) -> list[Result]:
    """Check every kernel at one size, then time those that passed interleaved, round by
    round, each followed in the round by cuBLAS of its own types (precision, layouts, C
    type), which is its baseline: a kernel and its cuBLAS run back to back, at the clock of
    that moment, wherever they stand in the round (as in ``measure``). Each has its speedup
    over the first. The timed configurations are checked again after the rounds."""
    pairs = [checked(session, prep, m, n, k, say) for prep in preps]
    live = [(prep, ready) for prep, (_, ready) in zip(preps, pairs, strict=True)
            if ready is not None]
    results = [res for res, _ in pairs]
    if not live:
        return results
    say(f"timing {len(live)} kernels interleaved, each followed by its cuBLAS",
        limit_s=timing_limit_s(session.timer.options, max(r.launch_ms for _, r in live),
                               2 * len(live)))
    copies = [session.placements(prep.kernel, ready.ops) for prep, ready in live]
    kept_outputs = [session.timed_outputs(prep.kernel, placed, slots=_slots(prep))
                    for (prep, _), placed in zip(live, copies, strict=True)]
    launches, before, after, counted, at = [], [], [], [], []
    try:
        for (prep, ready), placed, outputs in zip(live, copies, kept_outputs, strict=True):
            launch, prepare = kernel_timed(prep.gemm, ready.ops, session, placed, outputs)
            blas, poison = session.baseline_timed(prep.kernel, ready.ops)
            # an fp32_via kernel: plain SGEMM too, after its cuBLAS in its scheme
            plain = ([session.baseline_timed(prep.kernel, ready.ops, plain=True)]
                     if prep.kernel.spec.fp32_via else [])
            at.append(len(launches))  # the kernel's index; its cuBLAS, then SGEMM, follow
            launches += [launch, blas, *(p[0] for p in plain)]
            before += [prepare, poison, *(p[1] for p in plain)]
            after += [launch.after, None, *(None for _ in plain)]
            counted.append(launch)
        with PHASES("timing"):
            # each pair gets the budget a run would give it: over 18 pairs at 512 one budget
            # ended at 125 rounds, where cuBLAS's median has a 1% standard error
            timings, per_round = session.timer.time_interleaved(
                launches, before, budget_scale=len(live), after=after,
                pairs=[(j, j + 1) for j in at])
        done = {}
        first_name = live[0][0].kernel.name
        for i, ((prep, ready), count, outputs) in enumerate(
                zip(live, counted, kept_outputs, strict=True)):
            say("checking the timed launches", limit_s=launches_limit_s(m, n, k, 4)
                + timing_limit_s(session.timer.options, ready.launch_ms, 2))
            with PHASES(TIMED_LAUNCHES):
                found, kept = verify_timed(session, prep, ready, outputs)
            if found is not None:
                done[id(ready.result)] = _with_failure(ready.result, found)
                continue
            # per-round ratios: drift between rounds cancels, so their spread is the noise
            j = at[i]
            ratios = Summary.of([r[0] / r[j] for r in per_round])
            res = timed(session, prep, _kept(ready.result, kept, count.count), timings[j],
                        timings[j + 1], timings[j + 2] if prep.kernel.spec.fp32_via else None)
            if res.status == "pass":
                res = res.with_parts(comparison=Comparison(
                    first_name, ratios.median, ratios.p20, ratios.p80,
                    i > 0 and ratios.p20 <= 1.0 <= ratios.p80))
            done[id(ready.result)] = res
    finally:
        _release(kept_outputs, [ready.ops for _, ready in live], session.stream)
    return [done.get(id(r), r) for r in results]


def _release(kept: Sequence[capture.TimedOutputs], ops: Sequence[operands.Operands],
             stream) -> None:
    """After a timing: the kept outputs freed and the operands' A and B drawn from their seed
    again (the next kernel checks on them). While an error is on its way out (a fault leaves
    the context unusable) a failure here must not replace it."""
    failing = sys.exc_info()[0] is not None
    try:
        for outputs in kept:
            outputs.close()
        for each in dict.fromkeys(ops):
            each.restore(stream)
    except HarnessError:
        if not failing:
            raise
