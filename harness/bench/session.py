"""The one place a GPU session is set up: device and context, stream, clock sampler, timer,
cuBLAS, the mma.sync ceilings, and kernels compiled and loaded once each.

The worker, the CLI's GPU commands (occupancy, ceiling, energy, launch) and the experiments all
open a :class:`BenchSession` instead of wiring the driver themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from functools import cached_property, partial

from harness.bench import checks
from harness.bench.capture import FRESH_SOURCE, FreshKernels, TimedOutputs
from harness.bench.ceiling import Ceilings
from harness.bench.contents import content_key, derive, new_seed
from harness.bench.gemm import LoadedGemm
from harness.bench.keyed import run_secret
from harness.bench.limits import Limits
from harness.bench.operands import Operands, for_kernel, fp8_key, prefetch
from harness.compiler.compile import compile_kernel
from harness.gpu import own_kernels
from harness.gpu.clocks import ClockSampler
from harness.gpu.compare_sums import SOURCE as SUMS_SOURCE
from harness.gpu.compare_sums import SumsKernels, Twins
from harness.gpu.compilers import compiler_versions
from harness.gpu.crowd import SOURCE as CROWD_SOURCE
from harness.gpu.crowd import Crowd
from harness.gpu.cublas import Cublas, baseline_precision
from harness.gpu.cublas import available as cublas_available
from harness.gpu.driver import Device, Stream
from harness.gpu.fp8_walk import SOURCE as FP8_WALK_SOURCE
from harness.gpu.fp8_walk import Fp8WalkKernels
from harness.gpu.reference import SOURCE as REFERENCE_SOURCE
from harness.gpu.reference import ReferenceKernels, reference_and_scale
from harness.gpu.timing import Primed, Timer, Timing, TimingOptions, with_before
from harness.gpu.timing.kernels import SOURCE as TIMER_SOURCE
from harness.kernels.registry import Kernel

TIMING_OPERAND_BYTES = 4 << 30
TWIN_STREAM = 0xFFFFFFFC
"""The salt (contents.content_key) of the reference twins' checksum key."""
BASELINE_PLACEMENTS = 16
"""cuBLAS and the kernel on a small GEMM are timed on this many copies of its operands (the
kernel's and fresh allocations of the same values), one per round in turn, both on the same
copy in a round: at 512 on the H100 cuBLAS's time moved 3-7% with where its operands lie, and
16 copies halve the variance of the mixture's median against 8 (notes/timing.md, "Why the
timing options are what they are")."""
PLACEMENT_OPERAND_BYTES = 64 << 20
"""A GEMM whose A, B and C take at most this is timed over placements."""



def timing_key(run_seed: int, kernel: Kernel, m: int, n: int, k: int) -> tuple[tuple, int]:
    """What a session keeps the timing operands of ``kernel`` at m x n x k under, and the seed
    they are drawn from (one per shape, types and layouts in a run)."""
    spec = kernel.spec
    key = (m, n, k, spec.precision, spec.layout_a, spec.layout_b, spec.layout_c,
           spec.c_type, spec.has_d, *fp8_key(spec))
    return key, derive(run_seed, m, n, k, *map(str, key[3:]))

class BenchSession:
    """A GPU opened for measuring; use as a context manager (closing releases the context)."""

    def __init__(self, timing: TimingOptions | None = None, *, carveout_pct: int | None = None,
                 ordinal: int = 0, say: Callable[[str], None] = lambda _: None,
                 run_seed: int | None = None):
        timing = timing or TimingOptions()
        self.run_seed = new_seed() if run_seed is None else int(run_seed)
        """What every input of this session is drawn from (contents.derive): recorded with
        the results, so a run can be replayed with ``--seed``."""
        self._timings = 0
        self.device = Device(ordinal)
        # the session's own kernels built on threads beside its start-up (own_kernels.py)
        own_kernels.ahead(self.device.arch.name, TIMER_SOURCE, FRESH_SOURCE, CROWD_SOURCE,
                          REFERENCE_SOURCE, FP8_WALK_SOURCE, SUMS_SOURCE)
        self.stream = Stream()
        self.clocks = ClockSampler(self.device.pci_bus_id)
        self.timer = Timer(self.stream, self.device.l2_bytes, self.clocks, timing)
        self.carveout_pct = carveout_pct
        self.say = say
        self._loaded: dict[tuple, LoadedGemm] = {}
        self._baselines: dict[tuple, Timing] = {}
        self._timing_operands: dict[tuple, Operands] = {}
        self._placements: dict[tuple, list[Operands]] = {}
        self.baseline_checked: set[tuple] = set()
        """The shapes and types cuBLAS has been checked at in this session."""
        self.twins = Twins()
        """The device copies of the references made here (gpu/compare_sums.py)."""
        checks.set_gpu_references(self.reference_on_gpu, cublas_available, self.fp8_walk_sums)

    def __enter__(self) -> BenchSession:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        checks.release_gpu_references(self.reference_on_gpu)
        self.twins.close()
        self._loaded.clear()
        for ops in [*self._timing_operands.values(), *sum(self._placements.values(), [])]:
            ops.close()
        self._timing_operands.clear()
        self._placements.clear()
        self.device.close()

    @property
    def arch(self) -> str:
        """The device's compile target (``sm_90``)."""
        return self.device.arch.name

    @cached_property
    def blas(self) -> Cublas:
        """cuBLAS on this session's stream, created the first time it is needed."""
        return Cublas(self.stream)

    def reference_on_gpu(self, a64, b64, alpha: float, beta: float, c64):
        """A check's float64 reference and error scale computed with this session's cuBLAS
        (gpu/reference.py): how the checks compute the large ones while it is open
        (checks.set_gpu_references); their device copies stay in :attr:`twins`."""
        kept: list = []
        ref, scale = reference_and_scale(self.blas, a64, b64, alpha, beta, c64,
                                         self.reference_kernels, kept)
        for ref_buf, scale_buf in kept:
            self.twins.keep(ref, ref_buf, scale_buf,
                            self.compare_sums.checksum((ref_buf, scale_buf), self.twin_key))
        return ref, scale

    @cached_property
    def twin_key(self) -> int:
        """The key of the twins' checksums (gpu/compare_sums.py): from the run secret."""
        return content_key(run_secret(), TWIN_STREAM, 0, 0)

    @cached_property
    def compare_sums(self) -> SumsKernels:
        """A large comparison's sums on the device (gpu/compare_sums.py)."""
        return SumsKernels(self.stream, self.device.sm_count)

    @cached_property
    def reference_kernels(self) -> ReferenceKernels:
        """The references' magnitudes and float32 scale on the device (gpu/reference.py)."""
        return ReferenceKernels(self.device.sm_count)

    def fp8_walk_sums(self, *args, **kwargs):
        """An FP8 check's walk sums on this session's stream (gpu/fp8_walk.py): how the
        checks make the walk where they make the reference on the GPU
        (checks.set_gpu_references)."""
        return self.fp8_walk.sums(*args, **kwargs)

    @cached_property
    def fp8_walk(self) -> Fp8WalkKernels:
        """The FP8 check's walk on the device, built the first time it is needed."""
        return Fp8WalkKernels(self.stream)

    @cached_property
    def fresh(self) -> FreshKernels:
        """The kernels that draw fresh inputs and keep timed outputs (capture.py), compiled
        the first time they are needed."""
        return FreshKernels(self.stream, self.device.sm_count)

    def timed_outputs(self, kernel: Kernel, copies: Sequence[Operands],
                      slots: int | None = None) -> TimedOutputs:
        """Fresh inputs and kept outputs for one timing of ``kernel`` over ``copies``, salted
        apart from every other timing of the session."""
        self._timings += 1
        first = copies[0]
        salt = derive(self.run_seed, kernel.name, first.m, first.n, first.k, self._timings)
        return TimedOutputs(self.fresh, kernel.spec, copies, self.run_seed, salt, slots)

    @cached_property
    def crowd(self) -> Crowd:
        """Blocks that hold part of the SMs while a check launches a kernel (gpu/crowd.py),
        compiled the first time they are needed."""
        return Crowd(self.stream, self.device.sm_count)

    @cached_property
    def ceilings(self) -> Ceilings:
        """Each precision's mma.sync ceiling, measured the first time it is asked for."""
        return Ceilings(self.device, self.timer, say=self.say)

    def kernel(self, kernel: Kernel) -> Kernel:
        """``kernel`` with this device's tuned parameters (``[tuned.<arch>]``)."""
        return kernel.for_arch(self.arch)

    def load(self, kernel: Kernel, carveout_pct: int | None = None) -> LoadedGemm:
        """``kernel`` (tuned for this device) compiled and loaded, once per kernel and
        carve-out in a session."""
        kernel = self.kernel(kernel)
        carveout = self.carveout_pct if carveout_pct is None else carveout_pct
        key = (kernel.name, kernel.spec.path, kernel.params, carveout)
        if key not in self._loaded:
            compiled = compile_kernel(kernel, self.arch)
            self._loaded[key] = LoadedGemm(self.device, kernel, compiled, carveout)
        return self._loaded[key]

    def operands(self, kernel: Kernel, m: int, n: int, k: int, seed: int,
                 with_c: bool = False) -> Operands:
        """Fresh random A, B (and C when beta is tested) for ``kernel``'s types and layout."""
        return for_kernel(self.stream, kernel.spec, m, n, k, seed, with_c)

    def timing_operands(self, kernel: Kernel, m: int, n: int, k: int) -> Operands:
        """The operands every kernel of this session with ``kernel``'s types and layout is
        checked on at m x n x k before it is timed (drawn from the run's seed), made once; C is
        poisoned afresh by each user, and a timing restores A and B after it.
        Kept while they take at most TIMING_OPERAND_BYTES of device memory (every timed size
        of a default run in every precision does)."""
        key, seed = timing_key(self.run_seed, kernel, m, n, k)
        if key not in self._timing_operands:
            self._timing_operands[key] = self.operands(kernel, m, n, k, seed=seed)
            while (sum(o.a.nbytes + o.b.nbytes + o.c.nbytes
                       for o in self._timing_operands.values()) > TIMING_OPERAND_BYTES
                   and len(self._timing_operands) > 1):
                self._timing_operands.pop(next(iter(self._timing_operands))).close()
        return self._timing_operands[key]

    def prefetch_timing_operands(self, kernel: Kernel, m: int, n: int, k: int,
                                 executor: Executor) -> None:
        """The host values of :meth:`timing_operands` drawn on ``executor`` beside other work,
        unless this session has them already."""
        key, seed = timing_key(self.run_seed, kernel, m, n, k)
        if key not in self._timing_operands:
            prefetch(executor, kernel.spec, m, n, k, seed)

    def baseline_launcher(self, kernel: Kernel, ops: Operands, plain: bool = False):
        """A no-argument cuBLAS launch with ``kernel``'s types and layout on ``ops`` (alpha 1,
        beta 0), in the kernel's arithmetic: an FP32 kernel on tensor cores (``fp32_via``)
        against cuBLAS in the same scheme (cublas.baseline_precision); ``plain``, plain SGEMM
        (``COMPUTE_32F``) whatever it declares."""
        spec = kernel.spec
        precision = spec.precision if plain else baseline_precision(spec.precision,
                                                                    spec.fp32_via)
        return partial(self.blas.gemm, precision, ops.m, ops.n, ops.k, 1.0, ops.a.address,
                       ops.b.address, 0.0, ops.blas_out.address, spec.layout_b, spec.c_type,
                       layout_a=ops.layout_a, layout_c=ops.layout_c, fp8=ops.blas_fp8)

    def placements(self, kernel: Kernel, ops: Operands) -> list[Operands]:
        """``ops``, and for a small GEMM copies of them elsewhere in memory (the same values,
        made once per shape and types in the session): what a timing takes in turn, one
        copy per round (BASELINE_PLACEMENTS)."""
        if ops.a.nbytes + ops.b.nbytes + ops.c.nbytes > PLACEMENT_OPERAND_BYTES:
            return [ops]
        spec = kernel.spec
        key = (ops.m, ops.n, ops.k, ops.seed, spec.precision, spec.layout_a, spec.layout_b,
               spec.layout_c, spec.c_type, spec.has_d, *fp8_key(spec))
        if key not in self._placements:
            self._placements[key] = [ops.placed_copy(self.stream)
                                     for _ in range(BASELINE_PLACEMENTS - 1)]
        return [ops, *self._placements[key]]

    def baseline_timed(self, kernel: Kernel, ops: Operands,
                       copies: Sequence[Operands] | None = None, plain: bool = False
                       ) -> tuple[Callable[[], None], Callable[[], None]]:
        """cuBLAS for the timer: its launch and what goes before every repetition (its own
        output poisoned: ``Operands.blas_out``). On ``ops``, or, for a small GEMM, on ``ops``
        and copies of them elsewhere in memory, one per round in turn (``placements``;
        ``copies`` names others)."""
        copies = copies or self.placements(kernel, ops)
        return in_turn([self.baseline_launcher(kernel, c, plain) for c in copies],
                       [partial(c.poison_blas, self.stream) for c in copies])

    def time_baseline(self, kernel: Kernel, ops: Operands, reuse: bool = False) -> Timing:
        """cuBLAS with ``kernel``'s types and layout on ``ops`` (beta = 0), timed now as the
        kernel is (C poisoned before every repetition); with ``reuse``, once per shape and
        types in the session (tuning sweeps of many points)."""
        spec = kernel.spec
        key = (spec.precision, spec.fp32_via, ops.layout_a, spec.layout_b, ops.layout_c,
               spec.c_type, ops.m, ops.n, ops.k, *fp8_key(spec))
        if not (reuse and key in self._baselines):
            launch, before = self.baseline_timed(kernel, ops)
            self._baselines[key] = self.timer.time(launch, before=before)
        return self._baselines[key]

    @cached_property
    def limits(self) -> Limits:
        """What this device allows a GEMM at most (limits.py)."""
        device = self.device
        return Limits(device.arch, device.sm_count, device.max_sm_clock_mhz,
                      device.dram_bytes_per_s)

    @property
    def blas_open(self) -> bool:
        """Whether this session's cuBLAS handle has been made."""
        return "blas" in self.__dict__

    def facts(self) -> dict:
        """The GPU facts a report's header names."""
        device = self.device
        facts = {"name": device.name, "compute_capability": list(device.compute_capability),
                 "arch": device.arch.name, "sm_count": device.sm_count,
                 "l2_bytes": device.l2_bytes, "driver": device.driver_version,
                 "pci_bus_id": device.pci_bus_id, "compilers": compiler_versions(),
                 "clocks": self.clocks.info(), "memory_bytes": device.total_memory_bytes}
        if self.blas_open:
            facts["cublas_version"] = self.blas.version
        return facts


def in_turn(launches: list[Callable[[], None]], befores: list[Callable[[], None]],
            primes: list[Callable[[], None]] | None = None,
            afters: list[Callable[[], None]] | None = None
            ) -> tuple[Callable[[], None], Callable[[], None]]:
    """A launch and its ``before`` for the timer that take the copies in turn, one per round
    (the launch alone when there is one copy). ``primes[i]`` primes launch i on its copy
    (``timing.primer_of``): its own preparation and the launch, C left as it is; by default
    the launch. ``afters[i]`` follows each timed repetition of launch i on its copy (the
    returned launch's ``after``)."""
    if len(launches) == 1:
        prime = primes[0] if primes else with_before(befores[0], launches[0])
        return Primed(launches[0], prime, afters[0] if afters else None, cycle=1), befores[0]
    turn = _InTurn(launches, befores, primes or launches, afters)
    return (Primed(turn.launch, turn.prime, turn.after if afters else None,
                   cycle=len(launches)), turn.before)


class _InTurn:
    """Launches on several copies of the operands, one copy per round: ``before`` moves to the
    next copy and prepares it, ``launch`` launches on it (the timer calls them in that
    order). Two of them over the same copies, called once each per round, stay in step: the
    kernel and cuBLAS of a round run on the same copy. ``prime``, called before ``before``,
    launches on the copy the round is about to take (``before`` then poisons its C): the SMs
    hold the launch's code and the GPU its operands' address translations, as in a loop over
    the same buffers, which an L2 flush leaves cold. (Priming on the copy of the round
    before, at 512 a compare's round of 18 pairs over 4 sets of types read cuBLAS 1-2.8% and
    the kernels 0.5-1.3% slower than runs did: compare-20261126-140622.)"""

    def __init__(self, launches: list[Callable[[], None]],
                 befores: list[Callable[[], None]], primes: list[Callable[[], None]],
                 afters: list[Callable[[], None]] | None = None):
        self.launches, self.befores, self.primes, self.turn = launches, befores, primes, 0
        self.afters = afters

    def before(self) -> None:
        self.turn = (self.turn + 1) % len(self.launches)
        self.befores[self.turn]()

    def prime(self) -> None:
        self.primes[(self.turn + 1) % len(self.primes)]()

    def launch(self) -> None:
        self.launches[self.turn]()

    def after(self) -> None:
        self.afters[self.turn]()
