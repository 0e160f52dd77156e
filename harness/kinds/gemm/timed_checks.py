"""The timed launches checked after their timing (kept_checks.py): the kept repetitions
judged on the host, now or beside the next timing (:class:`Pending`), and, for a kernel whose
cubin can keep state, whether it runs faster on inputs it has seen (:func:`memo_probe`).

The device's part (kept_checks.gather: scans, the sampled blocks, the inputs' changes) is read
before the buffers are freed; the host's part (kept_checks.finish: the float64 products of
the sampled rows and columns, drawn again from their seeds, and the comparisons) needs no
device, so a run hands it to a thread and times the next size meanwhile: the host is idle
while the device times, and the device while the host compares (issue 37)."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from harness.bench.phases import CHECKS_BESIDE, PHASES, TIMED_LAUNCHES
from harness.bench.result import Result
from harness.kinds.gemm import capture, kept_checks
from harness.kinds.gemm.launches import _before_launch, gemm_launch
from harness.kinds.gemm.numerics import CheckResult

if TYPE_CHECKING:
    from harness.bench.session import BenchSession
    from harness.kinds.gemm.prepared import Prepared, Ready

Verdict = tuple[CheckResult | None, int]
"""The kept launches' first failure (None when all is right), and how many were checked."""
T = TypeVar("T")


@dataclass
class Pending:
    """A size measured whose kept launches are still being compared on the host: ``result()``
    waits for them and gives the row."""

    future: Future
    row: Callable[[Any], Result]
    """The row of what the future gives (measure.py: the size's checked result and the kept
    launches' :data:`Verdict`)."""

    def done(self) -> bool:
        """Compared without an error (an error is raised by ``result()``, on its caller's
        thread)."""
        return self.future.done() and self.future.exception() is None

    def result(self) -> Result:
        return self.row(self.future.result())


def finished(judge: Callable[[], T], row: Callable[[T], Result],
             beside: Executor | None) -> Result | Pending:
    """``row`` of what ``judge`` (the host's comparisons, kept_checks.finish on what
    kept_checks.gather read) says: now, or on ``beside`` (a :class:`Pending`)."""
    if beside is None:
        with PHASES(TIMED_LAUNCHES):
            return row(judge())

    def judged() -> T:
        with PHASES(CHECKS_BESIDE):
            return judge()

    return Pending(beside.submit(judged), row)


def verify_timed(session: BenchSession, prep: Prepared, ready: Ready,
                 outputs: capture.TimedOutputs) -> Verdict:
    """The timed launches checked after the timing (kept_checks.verify: the kept repetitions'
    outputs and inputs), then, for a kernel whose cubin can keep state, whether it runs
    faster on inputs it has seen (:func:`memo_probe`)."""
    found, kept = kept_checks.verify(outputs, ready.ops, prep.screen)
    if found is None and prep.screen is not None and prep.screen.stateful:
        found = memo_probe(session, prep, ready, outputs)
    return found, kept


MEMO_MARGIN = 0.03
"""How much faster than on fresh inputs a kernel may run on inputs it has just seen before it
is called a memo: timed interleaved, both cold, a kernel that keeps nothing runs alike on
both (within its noise, p20-p80 a few tenths of a percent at a default run's sizes)."""


def memo_probe(session: BenchSession, prep: Prepared, ready: Ready,
               outputs: capture.TimedOutputs) -> CheckResult | None:
    """A kernel with state timed on fresh inputs and, in the same rounds, again on the inputs
    it has just run on: a memo answers the second from what it kept. None unless the second
    is faster by more than MEMO_MARGIN and beyond both spreads."""
    gemm, ops, stream = prep.gemm, ready.ops, session.stream
    launch = gemm_launch(gemm, ops, stream)
    run, prepare = getattr(launch, "run", launch), getattr(launch, "prepare", None)

    def seen() -> None:
        _before_launch(ops, stream, prepare)

    def fresh() -> None:
        outputs.refresh(0)  # copies[0] is ops
        seen()

    with PHASES("timing"):
        (new, again), _ = session.timer.time_interleaved([run, run], [fresh, seen])
    if not (again.median_ms < (1 - MEMO_MARGIN) * new.median_ms and again.p80_ms < new.p20_ms):
        return None
    m, n, k = ops.m, ops.n, ops.k
    held = "; ".join(prep.screen.lines()) if prep.screen else ""
    return CheckResult.finding_only(
        kept_checks.MEMOISES, m, n, k, outputs.seed, 1.0, 0.0,
        f"{kept_checks.MEMOISES}: on the inputs it had just run on it took "
        f"{again.median_ms * 1e3:.2f} us against {new.median_ms * 1e3:.2f} us on fresh ones "
        f"({100 * (1 - again.median_ms / new.median_ms):.0f}% faster, timed interleaved, both "
        f"with a cold L2): it keeps results or inputs between launches ({held}); a kernel "
        "timed on inputs it has seen is timed on its memory, not on the work", 0)

