"""The GEMM part of a :class:`~harness.bench.session.BenchSession`: cuBLAS, the mma.sync
ceilings, the reference and check kernels on the device, the timing operands and their
placements, and GEMM kernels compiled and loaded once each.

:func:`gemm_session` gives the part of a session (made the first time); a
:class:`GemmSession` also reads through to its session's device, stream, timer and clocks, so
GEMM code takes it wherever it took a session. ``GemmSession.open(...)`` opens a session of its
own (what the GEMM commands and the experiments use), closed with it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from functools import cached_property, partial

from harness.bench.keyed import run_secret
from harness.bench.seeds import derive
from harness.bench.session import BenchSession, in_turn
from harness.compiler.compile import compile_kernel
from harness.gpu.compare_sums import SOURCE as SUMS_SOURCE
from harness.gpu.compare_sums import SumsKernels, Twins
from harness.gpu.cublas import Cublas
from harness.gpu.cublas import available as cublas_available
from harness.gpu.fp8_walk import SOURCE as FP8_WALK_SOURCE
from harness.gpu.fp8_walk import Fp8WalkKernels
from harness.gpu.reference import SOURCE as REFERENCE_SOURCE
from harness.gpu.reference import ReferenceKernels, reference_and_scale
from harness.gpu.timing import Timing, TimingOptions
from harness.kernels.registry import Kernel
from harness.kinds.ceiling.probe import Ceilings
from harness.kinds.gemm import references
from harness.kinds.gemm.baselines import CublasGemm
from harness.kinds.gemm.capture import FRESH_SOURCE, FreshKernels, TimedOutputs
from harness.kinds.gemm.contents import content_key
from harness.kinds.gemm.gemm import LoadedGemm
from harness.kinds.gemm.host_values import prefetch
from harness.kinds.gemm.limits import Limits
from harness.kinds.gemm.operands import Operands, for_kernel, fp8_key

SOURCES = (FRESH_SOURCE, REFERENCE_SOURCE, FP8_WALK_SOURCE, SUMS_SOURCE)
"""The GEMM part's own kernels, built beside a session's start-up (BenchSession ``ahead``)."""
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
PART = "gemm"
"""The key of this part in a session (BenchSession.part)."""


def timing_key(run_seed: int, kernel: Kernel, m: int, n: int, k: int) -> tuple[tuple, int]:
    """What a session keeps the timing operands of ``kernel`` at m x n x k under, and the seed
    they are drawn from (one per shape, types and layouts in a run)."""
    spec = kernel.spec
    key = (m, n, k, spec.precision, spec.layout_a, spec.layout_b, spec.layout_c,
           spec.c_type, spec.has_d, *fp8_key(spec))
    return key, derive(run_seed, m, n, k, *map(str, key[3:]))


def gemm_session(session: BenchSession | GemmSession) -> GemmSession:
    """The GEMM part of ``session`` (itself, when it is one)."""
    if isinstance(session, GemmSession):
        return session
    return session.part(PART, GemmSession)


class GemmSession:
    """The GEMM part of one BenchSession (:func:`gemm_session`); reads through to it."""

    def __init__(self, core: BenchSession):
        self.core = core
        self._own = False
        self._loaded: dict[tuple, LoadedGemm] = {}
        self._baselines: dict[tuple, Timing] = {}
        self._timing_operands: dict[tuple, Operands] = {}
        self._placements: dict[tuple, list[Operands]] = {}
        self.baseline_checked: set[tuple] = set()
        """The shapes and types cuBLAS has been checked at in this session."""
        self.twins = Twins()
        """The device copies of the references made here (gpu/compare_sums.py)."""
        references.set_gpu_references(self.reference_on_gpu, cublas_available, self.fp8_walk_sums)

    @classmethod
    def open(cls, timing: TimingOptions | None = None, **options) -> GemmSession:
        """A session of its own (BenchSession's arguments) and its GEMM part, closed
        together."""
        core = BenchSession(timing, ahead=SOURCES, **options)
        part = gemm_session(core)
        part._own = True
        return part

    def __getattr__(self, name: str):
        # the session's device, stream, timer, clocks, crowd, run_seed, say, kernel(), ...
        if name == "core":
            raise AttributeError(name)
        return getattr(self.core, name)

    def __enter__(self) -> GemmSession:
        return self

    def __exit__(self, *exc) -> None:
        (self.core if self._own else self).close()

    def close(self) -> None:
        """Called by the session's close (an own session: closing this closes it)."""
        if self._own:
            self._own = False
            self.core.close()
            return
        references.release_gpu_references(self.reference_on_gpu)
        self.twins.close()
        self._loaded.clear()
        for ops in [*self._timing_operands.values(), *sum(self._placements.values(), [])]:
            ops.close()
        self._timing_operands.clear()
        self._placements.clear()

    @cached_property
    def blas(self) -> Cublas:
        """cuBLAS on this session's stream, created the first time it is needed."""
        return Cublas(self.stream)

    def reference_on_gpu(self, a64, b64, alpha: float, beta: float, c64):
        """A check's float64 reference and error scale computed with this session's cuBLAS
        (gpu/reference.py): how the checks compute the large ones while it is open
        (references.set_gpu_references); their device copies stay in :attr:`twins`."""
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
        (references.set_gpu_references)."""
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
        self.core.timings += 1
        first = copies[0]
        salt = derive(self.run_seed, kernel.name, first.m, first.n, first.k, self.core.timings)
        return TimedOutputs(self.fresh, kernel.spec, copies, self.run_seed, salt, slots)

    @cached_property
    def ceilings(self) -> Ceilings:
        """Each precision's mma.sync ceiling, measured the first time it is asked for."""
        return Ceilings(self.device, self.timer, say=self.say)

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
        """A no-argument launch of ``kernel``'s baseline (cuBLAS, or cuBLASLt FP8; the
        kind's named Baseline) with its types and layout on ``ops`` (alpha 1, beta 0), in the
        kernel's arithmetic: an FP32 kernel on tensor cores (``fp32_via``) against cuBLAS in
        the same scheme (cublas.baseline_precision); ``plain``, plain SGEMM
        (``COMPUTE_32F``) whatever it declares."""
        baseline = CublasGemm(kernel.spec, None, self.blas, plain=plain)
        baseline.prepare(ops)
        return baseline.launch

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
        """What this part adds to the session's facts: cuBLAS's version once its handle is
        open (BenchSession.part_facts)."""
        return {"cublas_version": self.blas.version} if self.blas_open else {}
