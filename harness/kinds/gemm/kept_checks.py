"""The kept timed repetitions judged after the timing (capture.py keeps them on the device).

After the timing each kept output is scanned on the device (outputs still holding the
sentinel, non-finite ones, guard elements overwritten) and a random block of it (up to
:data:`SAMPLE` rows by :data:`SAMPLE` columns) is compared with the float64 product of the
same rows of A and columns of B, drawn here for that repetition's content. Every kept
repetition's A and B must still hold, right after its launch, what was drawn for it (a kernel
that writes its inputs changes them). A kernel whose output is wrong in a kept repetition is
named by what its cubin can keep or read (screen.py): keeps state between launches, adapts to
timing, or replays an earlier result when its output is the product of earlier inputs.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from harness.compiler.screen import Screen
from harness.kinds.gemm import contents, numerics
from harness.kinds.gemm.capture import Kept, TimedOutputs
from harness.kinds.gemm.numerics import CheckResult
from harness.kinds.gemm.operands import GUARD_ELEMENTS, Operands

SAMPLE = 64
"""Rows and columns of a kept output compared with float64 (the whole output is scanned)."""
_VERIFYING = ThreadPoolExecutor(max_workers=8, thread_name_prefix="harness-verify")
"""Where the kept repetitions of a timing are compared, side by side (their comparisons use
chunked.py's pool in turn, so this one must be another)."""

KEEPS_STATE = "keeps state between launches"
ADAPTS = "adapts to timing"
WRONG_WHEN_TIMED = "wrong when timed"
REPLAYS = "replays an earlier result"
REPLAY_WORK = 1 << 31
"""Multiply-adds of the products of earlier contents that a wrong kept repetition's output is
compared with (a 64 x 64 block each: 1,024 contents at K = 512, about a millisecond each on
the host, 128 at K = 4096; spent only on a wrong one)."""
CHANGES_INPUTS = "changes its inputs"
MEMOISES = "memoises"
WRITES_OUTSIDE = "writes outside C"
MISCOUNTED = "writes the harness's state"


@dataclass
class Scanned:
    """One kept repetition as the device holds it: its scan and its sampled block."""

    kept: Kept
    unwritten: int
    nonfinite: int
    moved: int
    rows: np.ndarray
    cols: np.ndarray
    out: np.ndarray


@dataclass
class Gathered:
    """What the device holds about a timing's kept repetitions, read at once (the buffers can
    then go): :func:`finish` judges it on the host, beside the next timing if need be."""

    timed: TimedOutputs
    total: int
    scanned: list[Scanned]
    changed: tuple[int, int]
    d_changes: list[tuple[int, int]]
    """A kernel that writes D: (placement, elements of C changed) where any were."""
    made: int = -1
    """Timed repetitions the host made (TimedOutputs.keeps): ``total``, the reservoir's count
    on the device, must equal it; -1: not known (the check is not made)."""


def gather(timed: TimedOutputs) -> Gathered:
    """Every kept repetition scanned and its random block read, the inputs' changes counted,
    and C scanned where the kernel writes D: the device's part of :func:`verify`."""
    total, kept = timed.kept()
    m, n = timed.m, timed.n
    rng = np.random.default_rng(contents.derive(timed.seed, timed.salt, "sample"))
    counts, picks = [], []
    for one in kept:
        base = timed.kept_buffer.address + one.slot * timed.stride
        counts.append(timed.scan(base, m * n, GUARD_ELEMENTS))
        rows = np.sort(rng.choice(m, size=min(m, SAMPLE), replace=False))
        cols = np.sort(rng.choice(n, size=min(n, SAMPLE), replace=False))
        picks.append((one.slot, rows, cols))
    scanned = [Scanned(one, *found, rows, cols, block) for one, found, (_, rows, cols), block
               in zip(kept, counts, picks, timed.blocks(picks), strict=True)]
    d_changes = []
    if getattr(timed.spec, "has_d", False):
        for index, ops in enumerate(timed.copies):
            same, _, moved = timed.scan(ops.c.address, m * n, GUARD_ELEMENTS)
            if same != m * n or moved:
                d_changes.append((index, m * n - same + moved))
    return Gathered(timed, total, scanned, timed.changed_inputs(), d_changes, timed.keeps)


def verify(timed: TimedOutputs, initial: Operands, screen: Screen | None
           ) -> tuple[CheckResult | None, int]:
    """Every kept timed repetition checked, then the inputs: the first failure (None when all
    is right) and how many kept repetitions were checked."""
    return finish(gather(timed), initial, screen)


def finish(gathered: Gathered, initial: Operands, screen: Screen | None
           ) -> tuple[CheckResult | None, int]:
    """:func:`verify`'s host part, on what :func:`gather` read: no device work, so it may run
    on another thread while the device times the next launch."""
    timed, checked = gathered.timed, len(gathered.scanned)
    m, n, k = timed.m, timed.n, timed.k
    if gathered.made >= 0 and gathered.total != gathered.made:
        return CheckResult.finding_only(
            MISCOUNTED, m, n, k, timed.seed, 1.0, 0.0,
            f"{MISCOUNTED}: the reservoir on the device counted {gathered.total} timed "
            f"repetitions where {gathered.made} were launched: its state (device memory the "
            "kernel shares) was written by something other than the harness; a kernel that "
            "writes outside its buffers is not measured", 1), 0
    # each kept repetition on a thread of its own (numpy lets go of the GIL); the first
    # failure in the order they ran is the finding
    for found in _VERIFYING.map(lambda one: _verify_one(timed, initial, screen, one,
                                                        gathered.total), gathered.scanned):
        if found is not None:
            return found, checked
    changed_a, changed_b = gathered.changed
    if changed_a or changed_b:
        what = " and ".join(f"{count} elements of {name}" for name, count
                            in (("A", changed_a), ("B", changed_b)) if count)
        return CheckResult.finding_only(
            CHANGES_INPUTS, m, n, k, timed.seed, 1.0, 0.0,
            f"{CHANGES_INPUTS}: right after its kept timed repetitions {what} no longer held "
            "what was drawn into them before the launch: a GEMM reads A and B and never "
            "writes them; a kernel that marks or reuses its inputs is not measured on the "
            "inputs it was given", changed_a + changed_b), checked
    if gathered.d_changes:
        index, changes = gathered.d_changes[0]
        return CheckResult.finding_only(
            CHANGES_INPUTS, m, n, k, timed.seed, 1.0, 0.0,
            f"{CHANGES_INPUTS}: C, an input only for a kernel that writes D, was "
            f"changed in {changes} elements (placement {index}) during "
            "the timed repetitions", changes), checked
    return None, checked


def _verify_one(timed: TimedOutputs, initial: Operands, screen: Screen | None, scanned: Scanned,
                total: int) -> CheckResult | None:
    spec, (m, n, k) = timed.spec, (timed.m, timed.n, timed.k)
    one, unwritten, nonfinite = scanned.kept, scanned.unwritten, scanned.nonfinite
    where = (f"timed repetition {one.rep + 1} of {total} (kept at random inside the timed "
             "sequence, on inputs drawn afresh for it)")
    if scanned.moved:
        return CheckResult.finding_only(
            WRITES_OUTSIDE, m, n, k, timed.seed, 1.0, 0.0,
            f"{WRITES_OUTSIDE}: in {where} {scanned.moved} elements past the end of the {m} x "
            f"{n} C were overwritten", scanned.moved)
    rows, cols, out = scanned.rows, scanned.cols, scanned.out
    sentinel = np.full(out.shape, numerics.SENTINEL[spec.c_type],
                       dtype=np.uint32 if timed.word_bytes == 4 else np.uint16)
    result = timed.compare(out, *timed.operands(one.content, rows, cols), timed.seed, rows,
                           cols, initial=sentinel.view(out.dtype))
    if result.passed and not unwritten and not nonfinite:
        return None
    if unwritten:
        what = f"{unwritten} of {m * n} outputs were never written"
    elif nonfinite:
        what = f"{nonfinite} of {m * n} outputs are NaN or Inf"
    elif result.finding == "less accurate than FP32":
        what = f"the sampled block is {result.message}"
    else:
        what = (f"{result.bad_elements} of {out.size} sampled outputs are outside their bound "
                f"(rel error norm {result.rel_err_norm:.2e}, bound {result.tolerance_norm:.2e})")
    replayed = _replayed(timed, initial, one, out, rows, cols)
    if replayed:
        finding = REPLAYS
        cause = (f"its output is the product of {replayed}, not of the inputs it was given: it "
                 "returns a result kept from an earlier launch")
    else:
        finding = (KEEPS_STATE if screen is not None and screen.stateful else
                   ADAPTS if screen is not None and screen.clocks else WRONG_WHEN_TIMED)
        cause = ("the same kernel passed every check outside the timed sequence, so it "
                 "computes differently when timed")
    held = f"; its cubin holds {'; '.join(screen.lines())}" if screen and screen.lines() else ""
    return CheckResult.finding_only(
        finding, m, n, k, timed.seed, 1.0, 0.0,
        f"{finding}: in {where} {what}: {cause}{held}; its timing is not a figure",
        max(unwritten, nonfinite, result.bad_elements))


def _replayed(timed: TimedOutputs, initial: Operands, one: Kept, out: np.ndarray,
              rows: np.ndarray, cols: np.ndarray) -> str:
    """What earlier inputs ``out`` is the product of, if any: the repetition before, the last
    content of this placement (what its primer ran on), the timing's first launch, the
    contents drawn before its own as far back as REPLAY_WORK allows (a kernel that replays at
    every launch back to back returns what it computed after the last pause, however many
    launches before: a launch timed alone to choose its primer and rest is such a pause), or
    the inputs checked before timing."""
    candidates = [(one.content - 1, "the inputs of the repetition before it"),
                  (one.content - len(timed.copies), "the inputs its placement held before"),
                  (1, "the inputs of the timing's first launch")]
    lookback = max(64, REPLAY_WORK // (len(rows) * len(cols) * max(timed.k, 1)))
    candidates += [(one.content - back, f"the inputs drawn {back} draws before its own")
                   for back in range(2, lookback + 1)]
    tried = set()
    for content, what in candidates:
        if content < 1 or content in tried:
            continue
        tried.add(content)
        if timed.compare(out, *timed.operands(content, rows, cols), 0, rows, cols).passed:
            return what
    # the primers' decoys, the latest first: a kernel that keeps what its primer computed
    for content in range(timed.decoys_drawn, max(0, timed.decoys_drawn - lookback), -1):
        if timed.compare(out, *timed.operands(content, rows, cols, decoy=True), 0, rows,
                         cols).passed:
            return "the decoy inputs its untimed primer ran on"
    a = numerics.to_float64(initial.codes[0][rows], timed.kinds[0])
    b = numerics.to_float64(initial.codes[1][:, cols], timed.kinds[1])
    if timed.compare(out, a, b, 0, rows, cols).passed:
        return "the inputs checked before timing"
    return ""
