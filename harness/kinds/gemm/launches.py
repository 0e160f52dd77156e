"""A kernel's launch as the timer and the checks take it: on one set of operands (alpha 1, beta
0), and for a timing, in turn over its placements, counted, each repetition after its fresh
inputs, C poisoned and its own preparation, and followed by the keeping of its output
(capture.py). measure.py times and checks what these build."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from harness.bench.session import BenchSession, in_turn
from harness.gpu.graph import on_replay
from harness.gpu.timing import with_before
from harness.kinds.gemm import capture, operands
from harness.kinds.gemm.gemm import LoadedGemm


def gemm_launch(gemm: LoadedGemm, ops: operands.Operands, stream):
    """A no-argument launch of ``gemm`` on ``ops`` (alpha 1, beta 0) on ``stream``."""
    return gemm.launcher(ops.m, ops.n, ops.k, 1.0, ops.a.address, ops.b.address, 0.0,
                         ops.c.address, stream, d=ops.d.address if ops.d else None)


def launcher(gemm: LoadedGemm, ops, session: BenchSession):
    """A no-argument launch of ``gemm`` on ``ops`` (alpha 1, beta 0) on the session's stream."""
    return gemm_launch(gemm, ops, session.stream)


def kernel_timed(gemm: LoadedGemm, ops: operands.Operands, session: BenchSession,
                 copies: Sequence[operands.Operands] = (),
                 timed: capture.TimedOutputs | None = None):
    """What the timer times, the kernel's launch alone (counted), and what it enqueues before
    every repetition, outside the events: with ``timed``, inputs drawn afresh (capture.py),
    then C poisoned and the launch's own preparation (a declared workspace zeroed). On
    ``ops``, or in turn on each of ``copies`` (``ops`` among them;
    ``BenchSession.placements``), one per round, as cuBLAS is. With ``timed`` the launch's
    ``after`` keeps a random sample of the timed repetitions' outputs, and its primer (the
    untimed launch ahead of a short repetition: ``timing.primer_of``) runs on decoy contents
    (``_primer_before``)."""
    launches, befores, primes = [], [], []
    for index, placed in enumerate(copies or [ops]):
        launch = launcher(gemm, placed, session)
        run, prepare = getattr(launch, "run", launch), getattr(launch, "prepare", None)
        launches.append(run)
        befores.append(partial(_before_launch, placed, session.stream, prepare))
        primes.append(with_before(_primer_before(timed, index, prepare), run))
    if timed is not None:
        befores = timed.befores(befores)
    launch, before = in_turn(launches, befores, primes,
                             timed.afters() if timed is not None else None)
    return _Counted(launch), before


def _primer_before(timed: capture.TimedOutputs | None, index: int,
                   prepare: Callable[[], None] | None) -> Callable[[], None] | None:
    """What goes ahead of the primer on copy ``index``: with fresh inputs, decoy contents
    drawn into the copy (``TimedOutputs.decoy``: the primer never runs on a content of the
    timed sequence, and the next one is drawn after it), then the launch's own preparation."""
    if timed is None:
        return prepare

    def decoyed() -> None:
        timed.decoy(index)
        if prepare is not None:
            prepare()
    return decoyed


def _before_launch(ops: operands.Operands, stream, prepare: Callable[[], None] | None) -> None:
    ops.poison_c(stream)
    if prepare is not None:
        prepare()


class _Counted:
    """A launch that counts how often it ran (the timed launches and their primers): a call
    captured in a graph at each replay of the graph, not when captured."""

    def __init__(self, launch: Callable[[], None]):
        self.launch, self.count = launch, 0
        self._prime = getattr(launch, "prime", None)
        self.after = getattr(launch, "after", None)
        """What follows each timed repetition (the keeping of outputs), or None."""
        self.cycle = getattr(launch, "cycle", 0)
        """The rounds after which it repeats itself (timing.Primed.cycle)."""

    def __call__(self) -> None:
        self._ran()
        self.launch()

    def _ran(self) -> None:
        if not on_replay(self._tick):
            self.count += 1

    def _tick(self) -> None:
        self.count += 1

    @property
    def prime(self) -> Callable[[], None] | None:
        """Its primer (``timing.primer_of``), counted, where the launch has its own."""
        if self._prime is None:
            return None

        def counted() -> None:
            self._ran()
            self._prime()
        return counted
