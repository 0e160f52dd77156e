"""The ``mma.sync`` issue ceiling: what the tensor cores reach through ``mma.sync`` on the
running GPU, so that a tensor-core kernel can be stated as a % of it (beside % of cuBLAS and %
of peak).

A ceiling kernel (``kind = "ceiling"`` in its spec; ``ptx/ceiling/``) keeps operands and
accumulators in registers and issues ``[ceiling] mma_per_iteration`` independent mma per warp
per loop trip, for a runtime number of trips. Its ABI is ``(u64 sink, u32 iterations)``: every
thread writes one f32, the sum of its accumulators, to ``sink[blockIdx.x * blockDim.x +
threadIdx.x]``, so no mma is dead code.

It is launched as one wave of ``blocks_per_sm x SM count`` blocks (all resident at once, enough
warps for every SM sub-partition), checked (every thread writes, and its sum doubles when the
iterations double), then timed by :class:`harness.gpu.timing.Timer` like any kernel. Hot or cold L2
makes no difference: nothing is loaded. GFLOP/s = 2 m n k (the instruction's shape) x
mma_per_iteration x iterations x warps / median time.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from harness.archs import Arch, can_run, get_arch
from harness.compiler.compile import compile_kernel
from harness.errors import HarnessError, LaunchError
from harness.gpu.driver import Buffer, Device, Function, LaunchShape, Module, Stream
from harness.gpu.timing import Timer
from harness.kernels.registry import DEFAULT_KERNEL_DIRS, Kernel, discover, project_relative
from harness.kernels.spec import CEILING_PRECISIONS
from harness.knobs import check_knobs, knob
from harness.stats import peak_gflops

NAN_WORD = 0x7FC00000
"""A quiet NaN as float32 bits: what the sink is filled with before a probe writes it."""

PLAN_CLOCK_MHZ = 2000.0
"""Above any boost clock of the GPUs the harness knows: iterations planned at the dense peak
at this clock make a launch last at least ``launch_ms``."""
PLAN_FLOPS_PER_CLOCK = 8192
"""FLOP/clock/SM to plan with on an arch whose peak is not recorded (sm_100)."""
CHECK_ITERATIONS = 8


@dataclass(frozen=True)
class CeilingOptions:
    """How a ceiling kernel is launched; checked when made."""

    launch_ms: float = knob(2.0, "--launch-ms", 0, False, "milliseconds of GPU time of one "
                                                          "launch")
    """Shortest GPU time of one launch (iterations are planned for it): long against the
    microseconds a wave takes to start and drain."""
    blocks_per_sm: int | None = knob(None, "--blocks-per-sm", 1, what="blocks per SM")
    """Blocks per SM; None: the spec's ``[ceiling] blocks_per_sm``."""
    iterations: int | None = None
    """Loop trips per thread (the kernel's ``iterations`` argument); None: from launch_ms."""

    def __post_init__(self) -> None:
        check_knobs(self)


@dataclass(frozen=True)
class LaunchPlan:
    """One launch of a ceiling kernel and the FLOP it does."""

    blocks_per_sm: int
    blocks: int
    block_threads: int
    iterations: int
    flops: int
    flop_formula: str


@dataclass(frozen=True)
class CeilingResult:
    """A measured ceiling: the rate, how it was launched and timed, and the clock it ran at."""

    kernel: str
    file: str
    precision: str
    instruction: str
    arch: str
    gflops: float
    median_ms: float
    p20_ms: float
    p80_ms: float
    reps: int
    cold_l2: bool
    sm_clock_mhz: float
    sm_clock_min_mhz: float
    sm_clock_max_mhz: float
    peak_gflops_at_clock: float
    """The precision's dense peak at the measured SM clock (NaN where none is recorded)."""
    power_w: float
    """Mean board power over its power pass (TimingOptions.power_s; NaN without one)."""
    pj_per_flop: float
    """Board energy per FLOP in the power pass."""
    clock_limits: str
    """What held the SM clock ("power cap", "none"; "" where NVML cannot say)."""
    pct_peak: float
    blocks: int
    blocks_per_sm: int
    block_threads: int
    iterations: int
    mma_per_iteration: int
    flops_per_launch: int
    flop_formula: str
    registers: int

    def as_dict(self) -> dict:
        return asdict(self)


CEILING_FAMILIES = ("mma.sync", "wgmma")
"""Instruction families a ceiling kernel measures (CeilingSpec.family); the % ceiling of run
rows is of mma.sync's."""


def ceiling_precisions(kernels: Sequence[Kernel], family: str = "mma.sync") -> list[str]:
    """The precisions the ``family`` ceiling kernels among ``kernels`` cover, in PRECISIONS
    order."""
    have = {k.spec.precision for k in kernels
            if k.spec.kind == "ceiling" and k.spec.ceiling.family == family}
    return [p for p in CEILING_PRECISIONS if p in have]


def ceiling_kernel(precision: str, kernels: Sequence[Kernel] | None = None,
                   family: str = "mma.sync") -> Kernel:
    """The one ceiling kernel of ``precision`` and instruction ``family`` (among ``kernels``,
    default the project's)."""
    if kernels is None:
        kernels = discover(DEFAULT_KERNEL_DIRS, kind="ceiling")
    found = [k for k in kernels if k.spec.kind == "ceiling" and k.spec.precision == precision
             and k.spec.ceiling.family == family]
    if len(found) == 1:
        return found[0]
    if not found:
        raise HarnessError(
            f"no {family} ceiling kernel for {precision}: expected one kind = \"ceiling\" "
            f"kernel per precision and family, found them for "
            f"{', '.join(ceiling_precisions(kernels, family)) or 'none'}; "
            "add one to ptx/ceiling/ or pick one of those")
    raise HarnessError(f"{len(found)} {family} ceiling kernels for {precision} "
                       f"({', '.join(k.name for k in found)}); expected one per precision: "
                       "keep one in the kernel folders")


def plan_launch(kernel: Kernel, arch: Arch, sm_count: int,
                options: CeilingOptions = CeilingOptions()) -> LaunchPlan:
    """Grid, iterations and FLOP of one launch of ``kernel`` on ``sm_count`` SMs of ``arch``."""
    ceiling = kernel.spec.ceiling
    threads = kernel.block_threads
    if threads % arch.warp_size:
        raise HarnessError(f"{kernel.name}: a block of {threads} threads is not whole warps; "
                           f"mma.sync needs every thread of a warp: use a multiple of "
                           f"{arch.warp_size}")
    per_sm = ceiling.blocks_per_sm if options.blocks_per_sm is None else options.blocks_per_sm
    if per_sm < 1:
        raise HarnessError(f"{kernel.name}: blocks per SM must be at least 1, found {per_sm}")
    blocks = per_sm * sm_count
    warps = blocks * threads // arch.warp_size
    per_iteration = ceiling.flops_per_instruction * ceiling.mma_per_iteration * warps
    iterations = options.iterations
    if iterations is None:
        per_clock = arch.fma_flops_per_clock_per_sm.get(kernel.spec.precision,
                                                        PLAN_FLOPS_PER_CLOCK)
        fastest_flops_per_s = peak_gflops(per_clock, sm_count, PLAN_CLOCK_MHZ) * 1e9
        iterations = max(CHECK_ITERATIONS,
                         math.ceil(options.launch_ms * 1e-3 * fastest_flops_per_s / per_iteration))
    if not 1 <= iterations < 1 << 32:
        raise HarnessError(f"{kernel.name}: iterations must be 1 .. 2^32 - 1 (a u32 argument), "
                           f"found {iterations}")
    m, n, k = ceiling.shape
    share = f"/{ceiling.warps_per_instruction}" if ceiling.warps_per_instruction > 1 else ""
    formula = (f"2*{m}*{n}*{k}{share} FLOP per mma x {ceiling.mma_per_iteration} mma per warp per "
               f"iteration x {iterations} iterations x {warps} warps ({blocks} blocks of "
               f"{threads // arch.warp_size})")
    return LaunchPlan(per_sm, blocks, threads, iterations, per_iteration * iterations, formula)


DOUBLING_TOLERANCE = {"fp8": 5e-2}
"""How far from double the sums of twice the iterations may be, relative (default 1e-3): FP8
wgmma truncates every step's terms at 2^-13 of the largest (notes/fp8_accumulation.md), a
walk of a few 1e-3 over the check's steps; a loop that skips iterations is off by tens of %."""


def check_sink(name: str, function: Function, shape: LaunchShape, sink: Buffer,
               stream: Stream, tolerance: float = 1e-3) -> None:
    """Run the kernel on a NaN-poisoned sink with CHECK_ITERATIONS and twice that: every thread
    must write a finite sum, and every sum must double within ``tolerance`` (the loop runs
    what it is given)."""
    threads = sink.nbytes // 4
    sums = []
    for iterations in (CHECK_ITERATIONS, 2 * CHECK_ITERATIONS):
        sink.fill_u32(NAN_WORD, stream)
        function.launch(shape, stream, (ctypes.c_uint64(sink.address),
                                        ctypes.c_uint32(iterations)))
        sums.append(sink.download(np.float32, (threads,), stream).astype(np.float64))
    bad = int(np.count_nonzero(~(np.isfinite(sums[0]) & np.isfinite(sums[1]))))
    if bad:
        raise HarnessError(f"{name}: {bad} of {threads} threads left their sink slot NaN or "
                           "wrote a non-finite sum; expected every thread to write the finite "
                           "sum of its accumulators: check the store and the ABI "
                           "(u64 sink, u32 iterations)")
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.linalg.norm(sums[1] - 2 * sums[0]) / np.linalg.norm(2 * sums[0])
    if not rel < tolerance:
        raise HarnessError(f"{name}: doubling the iterations ({CHECK_ITERATIONS} -> "
                           f"{2 * CHECK_ITERATIONS}) should double every thread's sum; the "
                           f"relative difference is {rel:.1e} (expected < {tolerance:g}): the "
                           "loop does not run the iterations it is given, or the sum skips "
                           "accumulators")


def measure_ceiling(device: Device, timer: Timer, precision: str,
                    options: CeilingOptions = CeilingOptions(),
                    kernels: Sequence[Kernel] | None = None,
                    family: str = "mma.sync") -> CeilingResult:
    """Compile, load, check and time the ``family`` ceiling kernel of ``precision`` on
    ``timer``'s stream (whose SM clock sampler the timing records); the result's clock is the
    measured one."""
    kernel = ceiling_kernel(precision, kernels, family)
    need = get_arch(kernel.spec.min_arch)
    if not can_run(need, device.arch):
        raise LaunchError(f"{kernel.name} needs {need.name} (min_arch); this GPU "
                          f"({device.name}) is {device.arch.name}")
    compiled = compile_kernel(kernel, device.arch.name)
    function = Module(compiled.cubin, kernel.name).function(compiled.symbol)
    plan = plan_launch(kernel, device.arch, device.sm_count, options)
    resident = function.max_active_blocks(plan.block_threads, 0)
    if resident < plan.blocks_per_sm:
        raise LaunchError(f"{kernel.name}: {plan.blocks_per_sm} blocks per SM wanted in one "
                          f"wave, but only {resident} blocks of {plan.block_threads} threads "
                          f"with {function.registers} registers fit an SM of {device.name}: "
                          "lower blocks_per_sm ([ceiling] in the spec, or CeilingOptions)")
    shape = LaunchShape((plan.blocks, 1, 1), (plan.block_threads, 1, 1), 0)
    stream = timer.stream
    sink = Buffer(plan.blocks * plan.block_threads * 4)
    try:
        check_sink(kernel.name, function, shape, sink, stream,
                   DOUBLING_TOLERANCE.get(precision, 1e-3))
        args = (ctypes.c_uint64(sink.address), ctypes.c_uint32(plan.iterations))
        timing = timer.time(lambda: function.launch(shape, stream, args))
    finally:
        sink.close()
    gflops = plan.flops / (timing.median_ms * 1e-3) / 1e9
    per_clock = device.arch.fma_flops_per_clock_per_sm.get(precision, math.nan)
    peak = peak_gflops(per_clock, device.sm_count, timing.sm_clock_mhz)
    return CeilingResult(
        kernel=kernel.name, file=project_relative(kernel.spec.path), precision=precision,
        instruction=kernel.spec.ceiling.instruction, arch=compiled.arch, gflops=gflops,
        median_ms=timing.median_ms, p20_ms=timing.p20_ms, p80_ms=timing.p80_ms,
        reps=timing.reps, cold_l2=timing.cold_l2, sm_clock_mhz=timing.sm_clock_mhz,
        sm_clock_min_mhz=timing.sm_clock_min_mhz, sm_clock_max_mhz=timing.sm_clock_max_mhz,
        peak_gflops_at_clock=peak, power_w=timing.power_w,
        pj_per_flop=1e12 * timing.energy_j / plan.flops, clock_limits=timing.clock_limits,
        pct_peak=100.0 * gflops / peak,
        blocks=plan.blocks, blocks_per_sm=plan.blocks_per_sm, block_threads=plan.block_threads,
        iterations=plan.iterations, mma_per_iteration=kernel.spec.ceiling.mma_per_iteration,
        flops_per_launch=plan.flops, flop_formula=plan.flop_formula,
        registers=function.registers)


class Ceilings:
    """Each precision's ceiling per instruction family, measured the first time it is asked
    for and then kept (the GPU worker holds one per session). None for a precision no ceiling
    kernel covers (fp32), or whose measurement failed: the reason is in ``errors`` and was
    said."""

    def __init__(self, device: Device, timer: Timer, options: CeilingOptions = CeilingOptions(),
                 say: Callable[[str], None] = lambda _: None):
        self.device, self.timer, self.options, self.say = device, timer, options, say
        self.results: dict[tuple[str, str], CeilingResult | None] = {}
        self.errors: dict[tuple[str, str], str] = {}
        self._kernels: list[Kernel] | None = None

    def get(self, precision: str, family: str = "mma.sync") -> CeilingResult | None:
        key = (precision, family)
        if key in self.results:
            return self.results[key]
        result = None
        try:
            if self._kernels is None:
                self._kernels = discover(DEFAULT_KERNEL_DIRS, kind="ceiling")
            if precision in ceiling_precisions(self._kernels, family):
                self.say(f"measuring the {precision} {family} ceiling")
                result = measure_ceiling(self.device, self.timer, precision, self.options,
                                         self._kernels, family)
        except HarnessError as exc:  # a row without % ceiling beats a run that stops
            self.errors[key] = str(exc)
            self.say(f"no {precision} {family} ceiling: {exc}")
        self.results[key] = result
        return result
