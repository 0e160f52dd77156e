"""A kernel measured: compiled and loaded once, put through its check battery (plan.py), then
per size checked on the very operands it is timed on, timed with cuBLAS (one after the other,
or interleaved with other kernels), and its timed launches checked again. Every
:class:`~harness.bench.result.Result` of a measurement is made here.

What a timing must survive before it is a figure: every repetition starts from a poisoned C
(no repetition can find the last one's result); the output of the timed launches is checked
against the output checked before timing, bit for bit (a kernel that goes wrong after some
launches keeps state between them); and the figure must not pass what the hardware allows
(limits.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from harness.bench import limits, numerics, operands
from harness.bench.checks import (
    KEEPS_STATE,
    NONDETERMINISTIC,
    Checked,
    KernelChecks,
    check_baseline,
    compare_to_reference,
    kernel_checks,
    outside_c,
    repeat_finding,
    summary_of,
)
from harness.bench.gemm import LoadedGemm
from harness.bench.numerics import CheckResult
from harness.bench.phases import PHASES
from harness.bench.plan import plan
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
from harness.bench.session import BenchSession, in_turn
from harness.build.compile import cache_dir
from harness.build.sass import disassemble, opcodes
from harness.errors import HarnessError, LaunchError
from harness.gpu.cublas import compute_name
from harness.gpu.timing import ISOLATED_MAX_REPS, Timing, TimingOptions, with_before
from harness.kernels.registry import Kernel
from harness.stats import Summary, peak_gflops

Say = Callable[..., None]
"""``say(stage, limit_s=None, show=True)``: a stage begins; ``limit_s`` is the longest it may
go without another word before the kernel is called hung; ``show=False`` keeps it off the
console (a heartbeat)."""
FASTER_THAN_HARDWARE = "faster than the hardware allows"

# How long a stage may go quiet: a floor, plus its launches at a rate slower than any working
# kernel's (the naive rung runs at 0.5 TFLOP/s at 4096 on an H100), plus its host work at a
# slow host's float64 rate. A hung kernel at the default sizes is called within about 30 s;
# a slow but working naive kernel at 8192 (2 s a launch) is not.
QUIET_FLOOR_S = 10.0
SLOWEST_GFLOPS = 25.0
HOST_GFLOPS = 5.0


def launches_limit_s(m: int, n: int, k: int, launches: int) -> float:
    return QUIET_FLOOR_S + launches * 2.0 * m * n * k / (SLOWEST_GFLOPS * 1e9)


def reference_limit_s(m: int, n: int, k: int) -> float:
    # the float64 product and the float32 error scale: two GEMMs on the host
    return QUIET_FLOOR_S + 2 * 2.0 * m * n * k / (HOST_GFLOPS * 1e9)


def timing_limit_s(options: TimingOptions, launch_ms: float, launches: int = 1) -> float:
    """No word for this long while ``launches`` launches of about ``launch_ms`` each are timed
    (and their power measured) is a hang: three times what the stopping rule can take."""
    per_rep_ms = launch_ms + 1.0  # and its L2 flush and C poisoning
    expected_ms = options.warmup_ms + max(options.budget_ms, options.min_reps * per_rep_ms)
    if options.regime == "isolated":
        expected_ms += ISOLATED_MAX_REPS * (options.isolated_gap_ms + per_rep_ms)
    expected_s = launches * (expected_ms / 1e3 + options.power_s)
    return QUIET_FLOOR_S + 3 * expected_s


@dataclass
class Prepared:
    """A kernel loaded, with the results of its check battery."""

    gemm: LoadedGemm
    info: KernelInfo
    checks: KernelChecks
    family: str = "unknown"
    """``simt`` or ``tensor``: the instruction family its SASS uses (its peak), ``unknown``
    when the SASS could not be read."""

    @property
    def kernel(self) -> Kernel:
        return self.gemm.kernel


def instruction_family(gemm: LoadedGemm) -> str:
    """Which peak a kernel is held to, from its SASS (limits.family), kept beside the compile
    cache by the cubin's hash: a disassembly costs the host most of a second."""
    cubin = gemm.compiled.cubin
    path = cache_dir() / f"{hashlib.sha256(cubin).hexdigest()[:32]}.family"
    try:
        known = path.read_text()
        if known in ("simt", "tensor"):
            return known
    except OSError:
        pass
    try:
        found = limits.family(opcodes(disassemble(cubin)))
    except HarnessError:
        return "unknown"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(found)
    except OSError:
        pass  # an unwritable cache costs the next run the disassembly, nothing else
    return found


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
            limit_s=launches_limit_s(check.m, check.n, check.k, 2 + check.repeats)
            + reference_limit_s(check.m, check.n, check.k))

    with PHASES("checks"):
        checks = kernel_checks(gemm, session.stream, battery,
                               strict_blas or gemm.kernel.spec.blas_strict, say=each)
    with PHASES("sass"):
        family = instruction_family(gemm)
    return Prepared(gemm, KernelInfo.of(gemm.kernel), checks, family)


@dataclass
class Ready:
    """A size checked on the operands it is timed on, ready to be timed."""

    result: Result
    ops: operands.Operands
    golden: np.ndarray
    """The kernel's output on ``ops`` as checked before timing: the timed launches must give
    the same bits."""
    seed: int
    launch_ms: float
    """Host wall time of the checked launch (with its synchronisation): a timing estimate."""


def _with_failure(res: Result, found: CheckResult) -> Result:
    """``res`` failed by one more check (``found``), its summary updated."""
    summary = res.checks or CheckSummary(0, 0, found.rel_err_norm)
    message = (f"1 of {summary.total + 1} checks failed; at {found.m}x{found.n}x{found.k} seed "
               f"{found.seed} alpha {found.alpha} beta {found.beta}: {found.message}")
    checks = dataclasses.replace(summary, total=summary.total + 1, finding=found.finding,
                                 failure=message)
    return res.with_parts(checks=checks).ended("FAIL", message)


def checked(session: BenchSession, prep: Prepared, m: int, n: int, k: int,
            say: Say = lambda *_, **__: None) -> tuple[Result, Ready | None]:
    """The result at one size after its checks: final (skipped, launch error, FAIL), or
    pending with what timing it needs."""
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
    spec = kernel.spec
    with PHASES("operands"):
        ops = session.timing_operands(kernel, m, n, k)
    seed = ops.seed
    say("computing the reference", limit_s=reference_limit_s(m, n, k))
    operands.reference(ops, (m, n, k, seed, spec.precision, spec.c_type, 1.0, 0.0), 1.0, 0.0)
    say("checking the timed size on the timed operands", limit_s=launches_limit_s(m, n, k, 3))
    key = (m, n, k, seed, spec.precision, spec.layout_a, spec.layout_b, spec.layout_c,
           spec.c_type)
    with PHASES("checks"):
        ops.poison_c(session.stream)
        t0 = time.perf_counter()
        gemm_launch(gemm, ops, session.stream)()
        out, guard = ops.result(session.stream)
        launch_ms = (time.perf_counter() - t0) * 1e3
        first = Checked(out, compare_to_reference(gemm, ops, out, seed, 1.0, 0.0,
                                                  ops.initial()), guard)
        again = _rerun(gemm, ops, session.stream, seed, first)
        results = list(prep.checks.results)
        if first.guard:
            results.append(outside_c(first.result, first.guard))
        found = repeat_finding(gemm, [first, again], launches_before=0)
        if found is not None and not found.passed:
            results.append(found)
        results.append(first.result)
        if key not in session.baseline_checked:
            check_baseline(session.blas, gemm, ops, session.stream, seed)
            session.baseline_checked.add(key)
    passed, max_rel, finding, failure = summary_of(results)
    notes = tuple(prep.checks.notes) + ((found.message,) if found and found.passed else ())
    if prep.checks.skipped:  # how little the constraints let the battery check
        notes += (f"battery: {prep.checks.plan.summary()}",)
    res = res.with_parts(checks=CheckSummary(passed, len(results), max_rel,
                                             tuple(prep.checks.skipped), finding, failure,
                                             notes))
    if failure:
        return res.ended("FAIL", failure), None
    return res, Ready(res, ops, first.out, seed, launch_ms)


def _rerun(gemm: LoadedGemm, ops: operands.Operands, stream, seed: int,
           first: Checked) -> Checked:
    """The same launch again on the same operands; compared with the reference only when its
    bits differ from the first's (at 4096 a comparison costs a second of host time)."""
    ops.poison_c(stream)
    gemm_launch(gemm, ops, stream)()
    out, guard = ops.result(stream)
    if not (numerics.bits(out) != numerics.bits(first.out)).any():
        return Checked(out, first.result, guard)
    return Checked(out, compare_to_reference(gemm, ops, out, seed, 1.0, 0.0, ops.initial()),
                   guard)


def gemm_launch(gemm: LoadedGemm, ops: operands.Operands, stream):
    """A no-argument launch of ``gemm`` on ``ops`` (alpha 1, beta 0) on ``stream``."""
    return gemm.launcher(ops.m, ops.n, ops.k, 1.0, ops.a.address, ops.b.address, 0.0,
                         ops.c.address, stream, d=ops.d.address if ops.d else None)


def launcher(gemm: LoadedGemm, ops, session: BenchSession):
    """A no-argument launch of ``gemm`` on ``ops`` (alpha 1, beta 0) on the session's stream."""
    return gemm_launch(gemm, ops, session.stream)


def kernel_timed(gemm: LoadedGemm, ops: operands.Operands, session: BenchSession,
                 copies: Sequence[operands.Operands] = ()):
    """What the timer times, the kernel's launch alone (counted), and what it enqueues before
    every repetition, outside the events: C poisoned and the launch's own preparation (a
    declared workspace zeroed). On ``ops``, or in turn on each of ``copies`` (``ops`` among
    them; ``BenchSession.placements``), one per round, as cuBLAS is."""
    launches, befores, primes = [], [], []
    for placed in copies or [ops]:
        launch = launcher(gemm, placed, session)
        run, prepare = getattr(launch, "run", launch), getattr(launch, "prepare", None)
        launches.append(run)
        befores.append(partial(_before_launch, placed, session.stream, prepare))
        primes.append(with_before(prepare, run))
    launch, before = in_turn(launches, befores, primes)
    return _Counted(launch), before


def _before_launch(ops: operands.Operands, stream, prepare: Callable[[], None] | None) -> None:
    ops.poison_c(stream)
    if prepare is not None:
        prepare()


class _Counted:
    """A launch that counts how often it ran (the timed launches and their primers)."""

    def __init__(self, launch: Callable[[], None]):
        self.launch, self.count = launch, 0
        self._prime = getattr(launch, "prime", None)

    def __call__(self) -> None:
        self.count += 1
        self.launch()

    @property
    def prime(self) -> Callable[[], None] | None:
        """Its primer (``timing.primer_of``), counted, where the launch has its own."""
        if self._prime is None:
            return None

        def counted() -> None:
            self.count += 1
            self._prime()
        return counted


def verify_timed(session: BenchSession, prep: Prepared, ready: Ready, launches: int,
                 last_output: bool = True, copies: Sequence[operands.Operands] = ()
                 ) -> CheckResult | None:
    """The timed configuration checked after its timing, on its own buffers: the output the
    last timed launch left in C (``last_output``; C was poisoned before it) must be the bits
    checked before timing (or, for a kernel that declares itself nondeterministic, pass the
    check); then one more launch, with A's rows in reverse order in the same buffer and C
    poisoned, must give the reference's rows reversed (a kernel that replays a result kept in
    device memory, or that counts its launches, gives something else), and the launch after
    it, on A as timed, the checked result (a kernel wrong every other launch); and one launch
    on each of the other ``copies`` it was timed on (the same values elsewhere in memory) the
    checked bits. None when all is right."""
    gemm, ops, stream = prep.gemm, ready.ops, session.stream
    spec, (m, n, k) = prep.kernel.spec, (ops.m, ops.n, ops.k)
    if last_output:
        out = ops.result(stream)[0]
        changed = numerics.bits(out) != numerics.bits(ready.golden)
        if changed.any():
            result = compare_to_reference(gemm, ops, out, ready.seed, 1.0, 0.0, ops.initial())
            if not result.passed:
                return _state_finding(ops, ready.seed, launches, "the output of the last "
                                      "timed launch (C poisoned before it)", result)
            if not spec.nondeterministic:
                return _nondeterministic(ops, ready.seed, f"after {launches} launches the "
                                         "output of the last timed launch", changed)
    ref, scale = operands.reference(ops, (m, n, k, ready.seed, spec.precision, spec.c_type,
                                          1.0, 0.0), 1.0, 0.0)
    with ops.a_rows_reversed(stream):
        ops.poison_c(stream)
        gemm_launch(gemm, ops, stream)()
        out = ops.result(stream)[0]
    result = numerics.compare(out, ref[::-1], spec.precision, k=k, seed=ready.seed, alpha=1.0,
                              beta=0.0, c_type=spec.c_type, initial=ops.initial(),
                              scale=scale[::-1])
    if not result.passed:
        return _state_finding(ops, ready.seed, launches + 1, "one more launch with A's rows "
                              "reversed in the same buffer (C poisoned before it)", result)
    ops.poison_c(stream)
    gemm_launch(gemm, ops, stream)()
    out = ops.result(stream)[0]
    changed = numerics.bits(out) != numerics.bits(ready.golden)
    if changed.any():
        result = compare_to_reference(gemm, ops, out, ready.seed, 1.0, 0.0, ops.initial())
        if not result.passed:
            return _state_finding(ops, ready.seed, launches + 2, "the launch after it, on A "
                                  "as timed (C poisoned before it)", result)
    return _verify_copies(session, prep, ready, copies)


def _verify_copies(session: BenchSession, prep: Prepared, ready: Ready,
                   copies: Sequence[operands.Operands]) -> CheckResult | None:
    """One launch on each copy of the operands the kernel was timed on besides its own (C
    poisoned): the same values must give the checked bits, or pass the check when the kernel
    declares itself nondeterministic."""
    gemm, stream, spec = prep.gemm, session.stream, prep.kernel.spec
    for number, placed in enumerate(copies):
        if placed is ready.ops:
            continue
        placed.poison_c(stream)
        gemm_launch(gemm, placed, stream)()
        out = placed.result(stream)[0]
        changed = numerics.bits(out) != numerics.bits(ready.golden)
        if not changed.any():
            continue
        result = compare_to_reference(gemm, placed, out, ready.seed, 1.0, 0.0, placed.initial())
        where = (f"on copy {number} of the operands it was timed on (the same values at "
                 "another address, C poisoned)")
        if not result.passed:
            return CheckResult.finding_only(
                result.finding, placed.m, placed.n, placed.k, ready.seed, 1.0, 0.0,
                f"{result.finding} {where}: {result.message}; its operands' own buffers gave "
                "the checked result: it depends on where they lie or on what earlier launches "
                "left, and its timing is not a figure",
                result.bad_elements or result.unwritten_elements)
        if not spec.nondeterministic:
            return _nondeterministic(placed, ready.seed, f"{where} its output", changed)
    return None


def _nondeterministic(ops, seed: int, what: str, changed: np.ndarray) -> CheckResult:
    """``what`` differs from the output checked before timing in the ``changed`` elements,
    each within tolerance, and the kernel does not declare itself nondeterministic."""
    count = int(np.count_nonzero(changed))
    return CheckResult.finding_only(
        NONDETERMINISTIC, ops.m, ops.n, ops.k, seed, 1.0, 0.0,
        f"nondeterministic: {what} differs from the one checked before timing in {count} "
        "outputs, each within tolerance; a kernel whose result changes between identical "
        "runs races, unless it sums with atomics whose order changes: then declare "
        "nondeterministic = true in its spec", count)


def _state_finding(ops, seed: int, launches: int, what: str, result: CheckResult
                   ) -> CheckResult:
    return CheckResult.finding_only(
        KEEPS_STATE, ops.m, ops.n, ops.k, seed, 1.0, 0.0,
        f"{KEEPS_STATE}: wrong after {launches} launches on the same buffers: {what} is "
        f"wrong ({result.message}), though the launch checked before timing was right; the "
        "output depends on how often the kernel ran or on what it kept in device memory "
        "(counters, flags, cached results): its timing is not a figure",
        result.bad_elements or result.unwritten_elements)


def timed(session: BenchSession, prep: Prepared, res: Result, kernel_timing: Timing,
          baseline_timing: Timing) -> Result:
    """``res`` completed with the kernel's and cuBLAS's timings: passed, unless a figure is
    past what the hardware allows. Tensor-core rows carry the issue ceiling of the
    instruction family the kernel uses."""
    device, precision, c_type = session.device, res.kernel.precision, res.kernel.c_type
    for who, timing, family in (("cuBLAS", baseline_timing, "unknown"),
                                (res.kernel.name, kernel_timing, prep.family)):
        why = limits.violation(session.limits, res.m, res.n, res.k, precision, c_type, family,
                               timing.median_ms, timing.sm_clock_max_mhz, timing.cold_l2)
        if why and who == "cuBLAS":
            return res.ended("error", f"cuBLAS timed {why}: the timer is wrong here; no "
                                      "figure of this size is reported")
        if why:
            return _with_failure(res, CheckResult.finding_only(
                FASTER_THAN_HARDWARE, res.m, res.n, res.k, 0, 1.0, 0.0, why))
    per_clock = device.arch.fma_flops_per_clock_per_sm.get(precision, float("nan"))
    parts = {"timing": kernel_timing,
             "baseline": Baseline(compute_name(precision), baseline_timing, c_type),
             "peak_gflops_at_clock": peak_gflops(per_clock, device.sm_count,
                                                 kernel_timing.sm_clock_mhz)}
    with PHASES("ceiling"):
        ceiling = session.ceilings.get(precision, prep.kernel.mma_family)
    if ceiling is not None:  # bf16/fp16: the share of what its instruction can issue here
        parts["ceiling"] = CeilingRef(ceiling.gflops, ceiling.instruction, ceiling.sm_clock_mhz)
    return res.with_parts(**parts).ended("pass", "ok")


def measure(session: BenchSession, prep: Prepared, m: int, n: int, k: int,
            reuse_baseline: bool = False, say: Say = lambda *_, **__: None) -> Result:
    """Check ``prep``'s kernel at one size, time it and cuBLAS interleaved round by round (so
    that clock and power drift touch both alike, whichever ran first), a small GEMM's rounds
    taking copies of the operands in turn, both on the same copy in a round; then check its
    timed launches. ``reuse_baseline`` (tuning sweeps): the kernel timed alone on its
    operands, cuBLAS once per shape and types in the session."""
    res, ready = checked(session, prep, m, n, k, say)
    if ready is None:
        return res
    timer, ops = session.timer, ready.ops
    copies = () if reuse_baseline else session.placements(prep.kernel, ops)
    launch, before = kernel_timed(prep.gemm, ops, session, copies)
    blas, poison = session.baseline_timed(prep.kernel, ops)
    if reuse_baseline:
        say("timing", limit_s=timing_limit_s(timer.options, ready.launch_ms))
        with PHASES("timing"):
            kernel_timing = timer.time(launch, before=before)
    else:
        say("timing the kernel and cuBLAS interleaved",
            limit_s=timing_limit_s(timer.options, ready.launch_ms, 2))
        with PHASES("timing"):
            (kernel_timing, baseline_timing), _ = timer.time_interleaved(
                [launch, blas], [before, poison])
            kernel_timing = timer.with_power(kernel_timing, launch)
    say("checking the timed launches", limit_s=launches_limit_s(m, n, k, 3 + len(copies)))
    with PHASES("checks"):
        found = verify_timed(session, prep, ready, launch.count, last_output=reuse_baseline,
                             copies=copies)
    if found is not None:
        return _with_failure(res, found)
    with PHASES("cuBLAS timing"):
        if reuse_baseline:
            say("timing cuBLAS", limit_s=timing_limit_s(timer.options, ready.launch_ms))
            baseline_timing = session.time_baseline(prep.kernel, ops, reuse=True)
        else:
            baseline_timing = timer.with_power(baseline_timing, blas)
    return timed(session, prep, res, kernel_timing, baseline_timing)


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
    launches, before, counted = [], [], []
    for (prep, ready), placed in zip(live, copies, strict=True):
        launch, prepare = kernel_timed(prep.gemm, ready.ops, session, placed)
        blas, poison = session.baseline_timed(prep.kernel, ready.ops)
        launches += [launch, blas]
        before += [prepare, poison]
        counted.append(launch)
    with PHASES("timing"):
        # each pair gets the budget a run would give it: over 18 pairs at 512 one budget
        # ended at 125 rounds, where cuBLAS's median has a 1% standard error
        timings, per_round = session.timer.time_interleaved(launches, before,
                                                            budget_scale=len(live))
    done = {}
    first_name = live[0][0].kernel.name
    for i, ((prep, ready), count) in enumerate(zip(live, counted, strict=True)):
        say("checking the timed launches", limit_s=launches_limit_s(m, n, k, 2 + len(copies[i])))
        with PHASES("checks"):
            found = verify_timed(session, prep, ready, count.count, last_output=False,
                                 copies=copies[i])
        if found is not None:
            done[id(ready.result)] = _with_failure(ready.result, found)
            continue
        # per-round ratios: drift between rounds cancels, so their spread is the noise
        ratios = Summary.of([r[0] / r[2 * i] for r in per_round])
        res = timed(session, prep, ready.result, timings[2 * i], timings[2 * i + 1])
        if res.status == "pass":
            res = res.with_parts(comparison=Comparison(
                first_name, ratios.median, ratios.p20, ratios.p80,
                i > 0 and ratios.p20 <= 1.0 <= ratios.p80))
        done[id(ready.result)] = res
    return [done.get(id(r), r) for r in results]
