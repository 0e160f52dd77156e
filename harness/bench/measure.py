"""A kernel measured: compiled and loaded once, checked on the odd shapes, then per size checked
again and timed with cuBLAS (one after the other, or interleaved with other kernels). Every
:class:`~harness.bench.result.Result` of a measurement is made here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from harness.bench.checks import KernelChecks, check_one, kernel_checks, summary_of
from harness.bench.gemm import LoadedGemm
from harness.bench.phases import PHASES
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
from harness.gpu.cublas import compute_name
from harness.gpu.timing import Timing
from harness.kernels.registry import Kernel
from harness.stats import Summary, peak_gflops

Say = Callable[[str], None]


@dataclass
class Prepared:
    """A kernel loaded, with the results of its odd-shape checks."""

    gemm: LoadedGemm
    info: KernelInfo
    checks: KernelChecks

    @property
    def kernel(self) -> Kernel:
        return self.gemm.kernel


def prepare(session: BenchSession, kernel: Kernel, strict_blas: bool = False,
            say: Say = lambda _: None) -> Prepared:
    """Compile and load ``kernel``, and check it on the odd shapes (fresh inputs, several
    seeds, the beta path, races, reads of C at beta = 0)."""
    with PHASES("compile and load"):
        gemm = session.load(kernel)
    say("checking odd shapes")
    with PHASES("checks"):
        checks = kernel_checks(gemm, session.stream, strict_blas or gemm.kernel.spec.blas_strict)
    for reason in checks.skipped:
        say(f"check skipped: {reason}")
    return Prepared(gemm, KernelInfo.of(gemm.kernel), checks)


def checked(session: BenchSession, prep: Prepared, m: int, n: int, k: int,
            say: Say = lambda _: None) -> Result:
    """The result at one size after its checks: final (skipped, launch error, FAIL), or
    "pending" when it is ready to be timed."""
    gemm, kernel = prep.gemm, prep.kernel
    res = Result.of(prep.info, m, n, k).with_parts(
        resources=gemm.compiled.resources, launch=LaunchInfo(kernel.block_threads))
    problems = kernel.shape_problems(m, n, k)
    if problems:
        return res.ended("skipped", "; ".join(problems))
    try:
        occ = gemm.occupancy(m, n, k)
    except LaunchError as exc:
        return res.ended("launch error", str(exc))
    shape = gemm.shape(m, n, k)
    offline = occ["offline"]
    res = res.with_parts(
        launch=LaunchInfo(kernel.block_threads, shape.grid, shape.dynamic_smem_bytes),
        occupancy=OccupancyInfo(occ["driver_blocks_per_sm"], offline["blocks_per_sm"],
                                offline["occupancy_pct"], offline["limiter"],
                                occ["waves_per_sm"]))
    say("checking the timed size")
    spec = kernel.spec
    seed = m * 7 + n * 3 + k
    key = (m, n, k, seed, spec.precision, spec.layout_b, spec.c_type)
    baseline = None if key in session.baseline_checked else session.blas
    with PHASES("checks"):
        results = prep.checks.results + check_one(gemm, session.stream, m, n, k, seed=seed,
                                                  baseline=baseline)
    session.baseline_checked.add(key)
    passed, max_rel, finding, failure = summary_of(results)
    res = res.with_parts(checks=CheckSummary(passed, len(results), max_rel,
                                             tuple(prep.checks.skipped), finding, failure,
                                             tuple(prep.checks.notes)))
    return res.ended("FAIL", failure) if failure else res


def timed(session: BenchSession, res: Result, kernel_timing: Timing,
          baseline_timing: Timing, mma_family: str = "mma.sync") -> Result:
    """``res`` completed with the kernel's and cuBLAS's timings: passed. Tensor-core rows
    carry the issue ceiling of the instruction family the kernel uses."""
    device, precision = session.device, res.kernel.precision
    per_clock = device.arch.fma_flops_per_clock_per_sm.get(precision, float("nan"))
    parts = {"timing": kernel_timing,
             "baseline": Baseline(compute_name(precision), baseline_timing, res.kernel.c_type),
             "peak_gflops_at_clock": peak_gflops(per_clock, device.sm_count,
                                                 kernel_timing.sm_clock_mhz)}
    with PHASES("ceiling"):
        ceiling = session.ceilings.get(precision, mma_family)
    if ceiling is not None:  # bf16/fp16: the share of what its instruction can issue here
        parts["ceiling"] = CeilingRef(ceiling.gflops, ceiling.instruction, ceiling.sm_clock_mhz)
    return res.with_parts(**parts).ended("pass", "ok")


def measure(session: BenchSession, prep: Prepared, m: int, n: int, k: int,
            reuse_baseline: bool = False, say: Say = lambda _: None) -> Result:
    """Check ``prep``'s kernel at one size, then time it and cuBLAS one after the other."""
    res = checked(session, prep, m, n, k, say)
    if res.status != "pending":
        return res
    say("timing kernel and cuBLAS")
    kernel = prep.kernel
    with PHASES("operands"):
        ops = session.timing_operands(kernel, m, n, k)
        ops.poison_c(session.stream)
    with PHASES("timing"):
        kernel_timing = session.timer.time(launcher(prep.gemm, ops, session))
    with PHASES("cuBLAS timing"):
        baseline_timing = session.time_baseline(kernel, ops, reuse=reuse_baseline)
    return timed(session, res, kernel_timing, baseline_timing, kernel.mma_family)


def launcher(gemm: LoadedGemm, ops, session: BenchSession):
    """A no-argument launch of ``gemm`` on ``ops`` (alpha 1, beta 0) on the session's stream."""
    return gemm.launcher(ops.m, ops.n, ops.k, 1.0, ops.a.address, ops.b.address, 0.0,
                         ops.c.address, session.stream)


def compare(session: BenchSession, preps: Sequence[Prepared], m: int, n: int, k: int,
            say: Say = lambda _: None) -> list[Result]:
    """Check every kernel at one size, then time those that passed and cuBLAS interleaved,
    round by round; each with its speedup over the first."""
    first = preps[0].kernel.spec
    for prep in preps[1:]:
        spec = prep.kernel.spec
        if (spec.precision, spec.layout_b, spec.c_type) != (first.precision, first.layout_b,
                                                             first.c_type):
            raise HarnessError(
                f"compare needs one precision, B layout and C type: {preps[0].kernel.name} is "
                f"{first.precision}/{first.layout_b}/C {first.c_type}, {prep.kernel.name} is "
                f"{spec.precision}/{spec.layout_b}/C {spec.c_type}")
    results = [checked(session, prep, m, n, k, say) for prep in preps]
    live = [(prep, res) for prep, res in zip(preps, results, strict=True)
            if res.status == "pending"]
    if not live:
        return results
    say(f"timing {len(live)} kernels and cuBLAS interleaved")
    with PHASES("operands"):
        ops = session.timing_operands(preps[0].kernel, m, n, k)
        ops.poison_c(session.stream)
    launches = [launcher(prep.gemm, ops, session) for prep, _ in live]
    launches.append(partial(session.blas.gemm, first.precision, m, n, k, 1.0,
                            ops.a.address, ops.b.address, 0.0, ops.c.address,
                            first.layout_b, first.c_type))
    with PHASES("timing"):
        timings, per_round = session.timer.time_interleaved(launches)
    done = {}
    for i, (_, res) in enumerate(live):
        # per-round ratios: drift between rounds cancels, so their spread is the noise
        ratios = Summary.of([r[0] / r[i] for r in per_round])
        done[id(res)] = timed(session, res, timings[i], timings[-1],
                              live[i][0].kernel.mma_family).with_parts(
            comparison=Comparison(live[0][1].kernel.name, ratios.median, ratios.p20,
                                  ratios.p80, i > 0 and ratios.p20 <= 1.0 <= ratios.p80))
    return [done.get(id(r), r) for r in results]
