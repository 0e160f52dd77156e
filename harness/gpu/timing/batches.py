"""A sustained timing's batches: the timed repetitions, a batch at a time with two in flight,
enqueued from the host or captured in CUDA graphs and replayed (:class:`Batches`), each
captured batch with its events (:class:`Captured`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.errors import HarnessError
from harness.gpu.driver import Event
from harness.gpu.graph import Graph
from harness.gpu.timing import account
from harness.gpu.timing.stop import StopRule

if TYPE_CHECKING:
    from harness.gpu.timing.handle import TimerHandle as Timer

ROUND_CYCLE = 16
"""The copies of a small GEMM's operands its launches take in turn, one per round
(bench.session.BASELINE_PLACEMENTS), where the launches do not say their own cycle
(timing.Primed.cycle): a batch of a multiple of the cycle runs every copy alike, so that the
two other batches may be copies of its capture (Batches._replicated); other batches are
captured three times, each going on where the one before stopped. A GEMM on one copy (4096)
has a cycle of one round: in the trace at 00a91f6 its 26 timings of a round a batch or more
were captured three times each, 2.0 s of host time with the GPU waiting."""
ONE_AHEAD_REST_MS = 10.0
"""Replayed batches of one round whose first launch rests this long or longer go one at a
time, not two in flight: each begins with the GPU idle for its rest anyway, and the host's
reply to the last one's end only lengthens that rest by a little. Two in flight, a timing of
such rounds ran one more than its stopping rule asked for: 01_naive's 0.55 s round at 4096
(a 0.28 s launch behind its rest) four times where the rule stopped at three (issue 37,
reports/h100/timing-trace-warm-3c94270.txt.gz: eight timings, 0.84 s of GPU time)."""


class Batches:
    """The timed repetitions, a batch at a time with two batches in flight, collected as they
    finish, and stopped by the rule. A batch is enqueued from the host launch by launch, or,
    with graphs, captured once and replayed: three captured batches (each with its own events)
    take turns, so a finished batch's events are read before its graph runs again, and the one
    before it still holds its end for the idle-time measure."""

    def __init__(self, timer: Timer, launches, before, rule: StopRule, per_batch: int,
                 graph: bool = False, primers=None, rests=None, after=None, cycle: int = 0):
        self.timer, self.launches, self.before, self.rule = timer, launches, before, rule
        self.after = list(after or [None] * len(launches))
        self.primers = list(primers or [None] * len(launches))
        self.rests = list(rests or [0.0] * len(launches))
        self.cap, self.per_batch = rule.cap, per_batch
        self._taken: list[Event] = []
        self.enqueued = 0
        self.in_flight: list[list[list[tuple[Event, Event]]]] = []
        self.times: list[list[float]] = []
        self.stop = ""
        self.sets: list[Captured] = []
        self.idle_ms: list[float] = []
        """Graphs: the GPU's idle time between one batch's end and the next one's start."""
        self.gpu_ms: list[float] = []
        """Graphs: each batch's GPU time, from its start to its last event (its last launch's end,
        or that launch's ``after``'s)."""
        self.gaps: list[list[float]] = []
        """Graphs: each round's GPU time before each launch's start (timing.account.gaps)."""
        self.batch_times: list[list[list[float]]] = []
        """Graphs: each batch's rounds' times, as ``times`` holds them, batch by batch."""
        self._last: Captured | None = None
        self.graph_error = ""
        self.replica_error = ""
        """Why the batches are three captures, not one and its copies (empty when copies)."""
        self.cycle = cycle or ROUND_CYCLE
        self.ahead = 2
        """Batches kept in flight (ONE_AHEAD_REST_MS: one)."""
        if graph:
            if per_batch >= self.cycle:  # whole cycles of copies, the batch no longer
                self.per_batch = per_batch = per_batch // self.cycle * self.cycle
            try:
                self.sets = self._captured()
            except HarnessError as exc:  # e.g. a library call that refuses capture
                self.close()
                self.sets, self.graph_error = [], str(exc)
            if self.sets and self.per_batch == 1 and self.rests[0] >= ONE_AHEAD_REST_MS:
                self.ahead = 1

    def _rounds(self, batch, in_graph: bool = False) -> None:
        stream, cold = self.timer.stream, self.timer.options.cold_l2
        for round_events in batch:
            for i, (launch, before, after, primer, rest, events) in enumerate(zip(
                    self.launches, self.before, self.after, self.primers, self.rests,
                    round_events, strict=True)):
                if rest:
                    self.timer.kernels.rest(i, rest)
                if primer is not None:
                    primer()
                if before is not None:
                    before()
                if cold:
                    self.timer.flush()
                events[0].record(stream, in_graph)
                launch()
                events[1].record(stream, in_graph)
                if after is not None:
                    after()
                    events[2].record(stream, in_graph)

    def _captured(self) -> list[Captured]:
        """The three batches that take turns: one capture and two copies of it with events of
        their own (:class:`~harness.gpu.graph.Graph`'s replicas) where a batch holds whole
        cycles of copies (``cycle``); else, or where the driver refuses the copies, three
        captures."""
        if self.per_batch % self.cycle == 0:
            try:
                return self._replicated()
            except (HarnessError, KeyError, TypeError) as exc:
                self.replica_error = f"{type(exc).__name__}: {exc}"
        else:
            self.replica_error = f"{self.per_batch} rounds a batch, not whole cycles"
        sets: list[Captured] = []
        try:
            for _ in range(3):
                sets.append(self._capture())
        except HarnessError:
            for captured in sets:
                captured.graph.close()
            raise
        return sets

    def _replicated(self) -> list[Captured]:
        batches = [[self._round_events()
                    for _ in range(self.per_batch)] for _ in range(3)]
        marks = [self._event() for _ in batches]

        def events(k: int) -> list[Event]:
            return [marks[k], *(e for round_ in batches[k] for pair in round_ for e in pair)]

        moved = [dict(zip(events(0), events(k), strict=True)) for k in (1, 2)]

        def enqueue() -> None:
            marks[0].record(self.timer.stream, in_graph=True)
            self._rounds(batches[0], in_graph=True)

        first = Graph(self.timer.stream, enqueue, "timed repetitions", retargets=moved)
        return [Captured(g, m, b) for g, m, b in zip([first, *first.replicas], marks, batches,
                                                     strict=True)]

    def _capture(self) -> Captured:
        batch = [self._round_events()
                 for _ in range(self.per_batch)]
        mark = self._event()

        def enqueue() -> None:
            mark.record(self.timer.stream, in_graph=True)
            self._rounds(batch, in_graph=True)

        return Captured(Graph(self.timer.stream, enqueue, "timed repetitions"), mark, batch)

    def ruled(self, rule: StopRule, rests: Sequence[float]) -> Batches:
        """These batches, captured before the warmed launches said their rule and rests (the
        same launches primed and rested: only the rests' lengths, read when replayed,
        differ), under ``rule`` and ``rests``."""
        self.rule, self.cap, self.rests = rule, rule.cap, list(rests)
        return self

    def enqueue(self) -> None:
        if self.stop or self.enqueued >= self.cap:
            return
        if self.sets:
            busy = [id(b) for b in self.in_flight]
            free = next(c for c in self.sets if id(c.batch) not in busy and c is not self._last)
            free.graph.launch(self.timer.stream)
            self.in_flight.append(free.batch)
            self.enqueued += self.per_batch
            return
        count = min(self.per_batch, self.cap - self.enqueued)
        batch = [self._round_events() for _ in range(count)]
        self._rounds(batch)
        self.in_flight.append(batch)
        self.enqueued += count

    def tick(self) -> None:
        """Collect finished batches; decide whether to stop; keep two batches queued."""
        while self.in_flight and self.in_flight[0][-1][-1][-1].done():
            batch = self.in_flight.pop(0)
            self.times += [[events[1].elapsed_ms(events[0]) for events in round_events]
                           for round_events in batch]
            if self.sets:
                done = next(c for c in self.sets if c.batch is batch)
                self.gpu_ms.append(batch[-1][-1][-1].elapsed_ms(done.mark))
                self.gaps += account.gaps(batch, done.mark)
                self.batch_times.append(self.times[-len(batch):])
                if self._last is not None and self.ahead > 1:
                    self.idle_ms.append(done.mark.elapsed_ms(self._last.batch[-1][-1][-1]))
                self._last = done
            if not self.stop:
                self.stop = self.rule.verdict(self.times)
        while not self.stop and len(self.in_flight) < self.ahead and self.enqueued < self.cap:
            self.enqueue()

    def _round_events(self) -> list[tuple[Event, ...]]:
        """A round's events: each launch's start and end, and where the launch has an
        ``after`` (the keeping of its output), one more when that has run: the next launch's
        gap is read from there (timing.account.gaps), so that what the harness does after a
        repetition (a kept one copies its output) is never booked as the kernel's."""
        return [(self._event(), self._event(), *((self._event(),) if after else ()))
                for after in self.after]

    def _event(self) -> Event:
        """An event of the timer's pool (Timer.events), given back at ``close``."""
        event = self.timer.events.take(Event)
        self._taken.append(event)
        return event

    def close(self) -> None:
        """The graphs destroyed; their events back to the timer's pool once nothing in flight
        records them (an error may leave batches running: their events are then dropped)."""
        for captured in self.sets:
            captured.graph.close()
        if not self.in_flight:
            self.timer.events.give(self._taken)
        self._taken = []

    def finished(self) -> bool:
        return not self.in_flight and (bool(self.stop) or self.enqueued >= self.cap)


@dataclass
class Captured:
    """One batch of repetitions captured in a graph, with its events."""

    graph: Graph
    mark: Event
    """Recorded first in the batch: when the GPU started it."""
    batch: list
