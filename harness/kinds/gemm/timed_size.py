"""A size's own check on the operands it is timed on (measure.checked), in two parts: the
device's (the kernel launched twice from a poisoned C, and cuBLAS once per shape and types,
each output read back) and the host's (each output against the float64 reference, the two
runs' bits, the summary with the battery's results). A run starts the host's part on a thread
of its own before the size's timing, and the row waits for it (issue 37); the launches, and
whatever they crash, still come before the timing, the battery's verdict before any launch at
the size, and no figure goes out before its verdict. The host's part touches nothing on the
device: it holds the reference computed before the launches."""

from __future__ import annotations

import itertools
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from harness.bench import keyed
from harness.bench.phases import CHECKS_BESIDE, PHASES
from harness.bench.result import CheckSummary, Result
from harness.compiler.screen import Screen
from harness.gpu.compare_sums import KINDS
from harness.kinds.gemm import chunked, contents, numerics, operands
from harness.kinds.gemm.battery import KernelChecks
from harness.kinds.gemm.checks import (
    Checked,
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
    """The reference, its error scale and an FP8 GEMM's walk (references.known_of), made before
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
    twin_written: int = 0
    """Launches of the kernel across which the reference's device twin changed
    (:class:`TwinGuard`): a failure."""

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
        if self.twin_written:
            results.append(numerics.CheckResult.finding_only(
                WRITES_REFERENCE, ops.m, ops.n, ops.k, seed, 1.0, 0.0,
                f"{WRITES_REFERENCE}: the float64 reference the harness keeps on the device "
                f"(and its error scale) changed across {self.twin_written} of its launches at "
                "this size: the kernel writes outside its buffers, into memory the check "
                "reads; it was judged on the host's copy instead", self.twin_written))
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
    """The device's part of a size's check (``known``: references.known_of, made before), and
    the first launch's host wall time (with its synchronisation: a timing estimate)."""
    stream, spec, seed = session.stream, gemm.kernel.spec, ops.seed
    runs, took, totals = [], [], []
    sums = _device_sums(session, gemm, ops, known)
    guard = TwinGuard(session, known[0]) if sums is not None else None
    first, second = checked_positions(keyed.run_secret(), gemm.kernel.name, ops.m, ops.n, ops.k,
                                      spec.precision)
    for position in range(second + 1):
        if guard is not None and not guard.before():
            sums = None  # changed before this kernel's launch: the host's reference serves
        if position not in (first, second):
            _decoy(session, gemm, ops)
        else:
            ops.restore(stream)  # A and B back to the values checked (a decoy drew others)
            ops.poison_c(stream)
            t0 = time.perf_counter()
            gemm_launch(gemm, ops, stream)()
            runs.append(ops.result(stream))
            took.append((time.perf_counter() - t0) * 1e3)
        if guard is not None and not guard.after():
            sums = None  # the kernel wrote into it: judged on the host's, and fails
        if position in (first, second):
            totals.append(sums(True) if sums is not None else None)
    ops.restore(stream)
    key = (ops.m, ops.n, ops.k, seed, spec.precision, spec.layout_a, spec.layout_b,
           spec.layout_c, spec.c_type, *operands.fp8_key(spec))
    baseline = baseline_total = None
    if key not in session.baseline_checked:
        baseline = baseline_output(session.blas, gemm, ops, stream)
        session.baseline_checked.add(key)
        if sums is not None:  # judged with no initial C
            baseline_total = sums(False)
    return SizeCheck(gemm, ops, seed, session.run_seed, battery, screen, known, runs,
                     baseline, tuple(totals), baseline_total,
                     guard.written if guard is not None else 0), took[0]


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


AMONG = 8
"""The size's two checked launches are a pair drawn uniformly from its first AMONG launches
(secret, :func:`checked_positions`), the launches before and between them decoys: a kernel
that counts its launches at a shape finds each of the first AMONG checked in a quarter of the
runs (2 / AMONG), the very first included, and its first two both in one run in 28; every
later launch is a timed repetition, each as likely as any to be kept (capture.py)."""
PAIRS = tuple((i, j) for i in range(AMONG) for j in range(i + 1, AMONG))
POSITIONS_STREAM = 0xFFFFFFFD
DECOY_STREAM = 0xFFFFFFFE
_DECOYS = itertools.count(1)
"""Each decoy launch of the process draws its own content."""


def checked_positions(secret: keyed.Secret, kernel: str, m: int, n: int, k: int,
                      precision: str) -> tuple[int, int]:
    """The two launches of ``kernel`` at m x n x k that the size checks in full, counted from
    0 (the first launch at the shape): drawn from the run secret, so they change from run to
    run and no launch can know them; the launches before and between are decoys."""
    name = contents.derive(0, kernel, m, n, k, precision)
    word = keyed.words(contents.content_key(secret, POSITIONS_STREAM, name, 0), [0])
    return PAIRS[int(word[0]) % len(PAIRS)]  # a bias of 2^32 mod 28 in 2^32: none that shows


def _decoy(session, gemm: LoadedGemm, ops: operands.Operands) -> None:
    """A launch the kernel cannot tell from a checked one: A and B drawn on the device from a
    content of their own (the same family, keyed.py), C poisoned, the output read back as a
    check reads it; its output is not judged."""
    stream, secret, count = session.stream, keyed.run_secret(), next(_DECOYS)
    ops.restore(stream)  # as before a checked launch: the same copy and wait, then new values
    for part, (buf, elements, kind) in enumerate(((ops.a, ops.m * ops.k, ops.kinds[0]),
                                                  (ops.b, ops.k * ops.n, ops.kinds[1]))):
        session.fresh.fill(buf, elements, kind,
                           contents.content_key(secret, DECOY_STREAM, count, part))
    ops.poison_c(stream)
    gemm_launch(gemm, ops, stream)()
    ops.result(stream)


WRITES_REFERENCE = "writes into the reference"


class TwinGuard:
    """The reference's device twin (gpu/compare_sums.Twins) checked around every launch at a
    size: its keyed checksum read before and after each, against the one made with it. A
    change before the launch is not the kernel's doing (the twin is given up, the host's
    reference serves); a change across it is (:attr:`written` counts those)."""

    def __init__(self, session, ref: np.ndarray):
        self.session, self.ref = session, ref
        self.expected = session.twins.sealed(ref)
        self.written = 0
        self.active = True

    def _intact(self) -> bool:
        twin = self.session.twins.of(self.ref)
        if twin is None or self.expected is None:
            return False
        return self.session.compare_sums.checksum(twin, self.session.twin_key) == self.expected

    def _give_up(self) -> bool:
        self.active = False
        self.session.twins.forget(self.ref)
        return False

    def before(self) -> bool:
        """True while the twin holds what was made; else it is given up (False from now)."""
        return self.active and (self._intact() or self._give_up())

    def after(self) -> bool:
        """After a launch: True while the twin is intact; else the launch wrote into it."""
        if not self.active:
            return False
        if self._intact():
            return True
        self.written += 1
        return self._give_up()
