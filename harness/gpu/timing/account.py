"""A timing's books: every replayed batch's GPU span set against the parts it is made of, and
the timer's own device state (rest lengths, calibration spans) checked after the timing. What
no part explains, or a part the kernel's context changed, is a finding on the launch it
names (``Timing.findings``), and the row gets no figure (notes/timing.md, "Nothing off the
clock").

A batch is rounds of, per launch: its rest, its primer (short launches with cold L2), its
``before`` (fresh inputs drawn, C poisoned, its preparation), an L2 flush, the timed launch
between its events, and its ``after`` (the keeping of its output), which an event of its own
closes. The gap between the end of one timed launch's ``after`` (or of the launch, where it
has none) and the next one's start holds everything untimed between them: what the parts are
known to cost (the rest as written, the primer at the launch's own time alone, the
``before`` and the flush as measured before the batches) explains it, to within
``GAP_SLACK_PCT`` and ``GAP_SLACK_MS``; the median gap over the timing's rounds is what is set
against it. The ``after`` is the harness's own work behind the launch's end in stream order
(nothing of the kernel's runs there), so it is left out of the gap: a kept repetition copies
its output and reads its inputs again, at 4096 about 0.25 ms, and the reservoir keeps every
one of the first ``slots`` repetitions and each later one with chance slots / t, about half
of a 45-round timing (reports/h100/default-run-cold-de02d3e.log.gz: ten cuBLAS rows at 4096
flagged when the gap was read from the kernel's end)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

HIDES_WORK = "hides work off the clock"
"""The finding of a launch whose untimed parts (its primer, its rest, its draws) took more GPU
time than they are known to cost."""
TIMER_STATE = "writes the timer's state"
"""The finding of a timing whose rest lengths or calibration spans changed under it."""
SLOWER_ALONE = "slower alone than timed"
"""The finding of a launch whose time alone, which its rest follows, is well above its time
in the timed rounds."""

GAP_SLACK_PCT = 10.0
"""A launch's median gap may exceed its parts' known cost by this much of that cost: the
flush's cost moves by a few percent from one pass to the next."""
GAP_SLACK_MS = 0.05
"""... and by this much (graph nodes: about ten a launch, with the events and the one-thread
kernels of the keeping, about 1-2 us apart on an H100)."""
ALONE_SLACK_PCT = 25.0
"""A launch's time alone may exceed its timed median by this much (plus ``ALONE_SLACK_MS``):
an unprimed launch alone is a few percent slower than a primed one at 512."""
ALONE_SLACK_MS = 0.03
SPAN_MOST_MS = 1.0
"""A calibration spin of ``ns`` measures itself at least ``ns`` and, held up by a preemption,
at most this much more: a span outside that was written by something else. (A span too short
is what would flatter: the overhead subtracted is the calibration's median less the spans'
mean.)"""


@dataclass(frozen=True)
class Parts:
    """What the untimed parts before each launch of a round are known to cost (ms)."""

    rests: tuple[float, ...]
    primers: tuple[float, ...]
    """The launch's own time alone where it is primed, else 0."""
    befores: tuple[float, ...]
    """Its ``before`` as measured (with the primer's decoy draw counted once more where it
    is primed: the decoy costs what the fresh draw does)."""
    flush_ms: float

    def expected_ms(self, i: int) -> float:
        primed = self.primers[i] > 0
        before = self.befores[i] * (2 if primed else 1)
        return self.rests[i] + self.primers[i] + before + self.flush_ms


def gaps(batch, mark) -> list[list[float]]:
    """Each round's gap (ms) before each launch's start: from the last launch's last event
    (its end, or where it has an ``after``, the end of that: a third event), or the batch's
    first mark for its first launch."""
    out, last = [], mark
    for round_events in batch:
        row = []
        for events in round_events:
            row.append(events[0].elapsed_ms(last))
            last = events[-1]
        out.append(row)
    return out


def unexplained(gap_rows: Sequence[Sequence[float]], parts: Parts, launches: int
                ) -> list[str]:
    """Per launch (the first ``launches`` of a round), why its median gap is more than its
    parts explain ("" where they do)."""
    found = []
    for i in range(launches):
        column = [row[i] for row in gap_rows]
        if not column:
            found.append("")
            continue
        got, want = statistics.median(column), parts.expected_ms(i)
        if got <= want * (1 + GAP_SLACK_PCT / 100) + GAP_SLACK_MS:
            found.append("")
            continue
        found.append(
            f"{HIDES_WORK}: the GPU spent a median {got * 1e3:.1f} us between the end of the "
            f"launch before it (and of the harness's keeping of its output) and the start of "
            f"each timed repetition, where its untimed "
            f"parts are known to cost {want * 1e3:.1f} us (rest {parts.rests[i] * 1e3:.1f}, "
            f"primer {parts.primers[i] * 1e3:.1f} as the launch alone, fresh draws and C "
            f"poisoned {parts.befores[i] * 1e3:.1f}{' twice' if parts.primers[i] else ''}, "
            f"L2 flush {parts.flush_ms * 1e3:.1f}): work it did off the clock, in its primer "
            "or around its rest, is not in its figure")
    return found


def span_explained(batch_times: Sequence[Sequence[float]], parts: Parts, launches: int
                   ) -> float:
    """GPU ms of a batch its parts explain: its timed launches as measured, and each round's
    untimed parts at their known cost (the trace's figure beside ``Batches.gpu_ms``)."""
    rounds = len(batch_times)
    return sum(sum(r) for r in batch_times) + rounds * sum(
        parts.expected_ms(i) for i in range(launches))


def slower_alone(alone_ms: Sequence[float], timed_ms: Sequence[float],
                 rests: Sequence[float]) -> list[str]:
    """Per launch with a rest, why its time alone (which its rest follows) is well above its
    median in the timed rounds ("" where it is not): a kernel that knows an unprimed launch
    alone from a timed one and runs slowly there rests longer, and runs cooler, when timed."""
    found = []
    for alone, timed, rest in zip(alone_ms, timed_ms, rests, strict=True):
        if rest and alone > timed * (1 + ALONE_SLACK_PCT / 100) + ALONE_SLACK_MS:
            found.append(f"{SLOWER_ALONE}: {alone * 1e3:.1f} us alone, where its rest is "
                         f"measured, against {timed * 1e3:.1f} us timed: its rests were "
                         "lengthened by launches it could tell apart")
        else:
            found.append("")
    return found


def on_a_shared_gpu(finding: str, others: int | None) -> str:
    """``finding`` (from :func:`unexplained` or :func:`slower_alone`) with the other cause
    that reads the same, where NVML lists ``others`` processes with a context on the GPU:
    their kernels, time-sliced in between the timer's, fill its gaps and slow a launch alone
    (three parts of the suite at once on one H200 failed a right kernel so: notes/timing.md,
    "Nothing off the clock"). The books cannot tell the two apart, so the row still gets no
    figure; the finding says both."""
    if not finding or not others:
        return finding
    return (f"{finding} (or the GPU was shared: NVML lists {others} other "
            f"process{'es' if others > 1 else ''} with a context on it, and kernels of "
            "theirs time-sliced in fill the gaps and slow a launch alone just so; time it "
            "on a GPU of its own to tell)")


def rests_changed(written_ns: Sequence[int], held_ns: Sequence[int]) -> str:
    """Why the rest lengths on the device differ from those the timer wrote ("" if alike)."""
    moved = [i for i, (w, h) in enumerate(zip(written_ns, held_ns, strict=True)) if w != h]
    if not moved:
        return ""
    i = moved[0]
    return (f"{TIMER_STATE}: the rest of launch {i} read {held_ns[i]} ns on the device after "
            f"the timing, where the timer wrote {written_ns[i]} ns ({len(moved)} slots "
            "changed): the timer's rests live in the kernel's context, and something there "
            "wrote them")


def spans_changed(spans_ns: Sequence[int], used: int, spin_ns: int) -> str:
    """Why the calibration spins' spans on the device cannot be what the spins measured ("" if
    they can): a span shorter than the spin or far longer, a slot written past those used,
    or none written where spins were used. (A used slot may be unwritten: a batch captured
    and never replayed.)"""
    most = spin_ns + SPAN_MOST_MS * 1e6
    bad = [i for i, span in enumerate(spans_ns)
           if span and (i >= used or not spin_ns <= span <= most)]
    if not bad and (not used or any(spans_ns[:used])):
        return ""
    if not bad:
        return (f"{TIMER_STATE}: none of the {used} calibration slots used holds a span after "
                "the timing: the launch overhead subtracted from every repetition follows "
                "these spans, and something in the kernel's context cleared them")
    i = bad[0]
    return (f"{TIMER_STATE}: calibration slot {i} held {spans_ns[i]} ns after the timing, for "
            f"a spin of {spin_ns} ns ({used} slots used; {len(bad)} wrong): the launch "
            "overhead subtracted from every repetition follows these spans, and something in "
            "the kernel's context wrote them")
