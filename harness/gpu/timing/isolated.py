"""The isolated regime (``isolated_gap_ms`` > 0), how Nsight Compute sees a kernel: before every
repetition the stream is synchronised and the host sleeps ``isolated_gap_ms``, so the GPU idles
and its power and clocks recover; then work is queued ahead of the timed launch (L2 flushes in
cold mode; in hot mode a launch of the same kernel and a spin) long enough that the launch
still never waits on the host."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from harness.gpu.driver import Event
from harness.gpu.timing.launches import warmup_rounds, with_before
from harness.gpu.timing.options import ISOLATED, ISOLATED_MAX_REPS, Timing
from harness.gpu.timing.stop import Rounds, StopRule

if TYPE_CHECKING:
    from harness.gpu.timing.handle import TimerHandle as Timer

ISOLATED_AHEAD_MS = 0.05
"""Isolated: GPU work queued ahead of each timed launch beyond three times the host's time to
enqueue one (``Isolated``)."""
ISOLATED_AHEAD_MAX_MS = 20.0
"""The most queued work a repetition's retries double up to."""


def time_isolated(timer: Timer, launches: Sequence[Callable[[], None]], before: list,
                  rounds: Rounds, primers: list, after: list
                  ) -> tuple[list[Timing], list[list[float]]]:
    """The isolated regime of :meth:`harness.gpu.timing.Timer.time_interleaved`: every
    repetition of every launch after a synchronise and ``isolated_gap_ms`` of idle GPU; with
    cold L2 a launch shorter than ``prime_below_ms`` is primed after the gap, ahead of the
    flushes (with warm L2 the work queued ahead already begins with a launch of itself)."""
    opts = timer.options
    prepared = [with_before(b, launch) for launch, b in zip(launches, before, strict=True)]
    for launch in prepared:
        launch()
    timer.stream.synchronize("first launch")
    measured = [timer.cost(launch, 3) for launch in prepared]  # (GPU ms, host ms)
    total_ms = sum(max(gpu_ms, 1e-4) for gpu_ms, _ in measured)
    warm = warmup_rounds(opts.warmup_ms, total_ms)
    timer.cost(lambda: [launch() for launch in prepared], warm)
    cap = int(min(opts.max_reps, ISOLATED_MAX_REPS,
                  max(opts.min_reps, opts.budget_ms / total_ms)))
    primers = timer.primers_below(primers, [gpu_ms for gpu_ms, _ in measured])
    rule = StopRule.of(rounds, cap, min(cap, opts.min_reps), opts.max_rel_se_pct,
                       (opts.max_reps, ISOLATED_MAX_REPS))
    reps = Isolated(timer, launches, before, measured, rule, primers, after)
    clocks = timer.clocks.sample_until(reps.finished, interval_s=0.0, tick=reps.step)
    timer.stream.synchronize("isolated repetitions")
    return timer.timings(rounds, reps.times, clocks, reps.least_ahead_ms, reps.stop,
                         regime=ISOLATED, gap_ms=opts.isolated_gap_ms)


class Isolated:
    """Isolated repetitions, a round per :meth:`step`: each launch after a synchronise and the
    gap, behind queued work, between its own events. The clock sampler calls :meth:`step`
    between samples, so each sample is taken while a launch runs.

    The queued work must outlast the host's enqueueing of the launch (a cuBLAS call costs the
    host ~0.2 ms): it is sized at ``ISOLATED_AHEAD_MS`` plus three times the host's time per
    launch, and a repetition in which the GPU still waited on the host is done again with
    twice as much (at most three attempts per repetition over the timing; past that,
    repetitions are kept as they come, and ``queue_ahead_ms`` < 0 says so)."""

    def __init__(self, timer: Timer, launches, before, measured: list[tuple[float, float]],
                 rule: StopRule, primers=None, after=None):
        self.timer, self.launches, self.rule = timer, launches, rule
        self.after = list(after or [None] * len(launches))
        self.primers = list(primers or [None] * len(launches))
        self.before = before
        self.gpu_ms = [max(gpu_ms, 1e-4) for gpu_ms, _ in measured]
        self.ahead_ms = [ISOLATED_AHEAD_MS + 3 * host_ms for _, host_ms in measured]
        self.gap_s = timer.options.isolated_gap_ms / 1e3
        self.times: list[list[float]] = []
        self.pending: list[tuple[Event, Event, Event, float]] = []
        self.least_ahead_ms = math.inf
        self.attempts, self.max_attempts = 0, 3 * rule.cap
        self.stop = ""

    def _ahead(self, i: int) -> None:
        """Cold: the launch's primer (``primer_of``), its ``before`` (fresh inputs written, C
        poisoned), then L2 flushes (each costs the GPU far more than the host): nothing the
        launch reads is left in L2. Hot: one launch of the kernel itself (L2 warm with its
        data), a spin of the time wanted (a kernel shorter than its own enqueueing could never
        get ahead of the host by repetition), then its ``before``."""
        before = self.before[i]
        if self.timer.options.cold_l2:
            if self.primers[i] is not None:
                self.primers[i]()
            if before is not None:
                before()
            flush_ms = max(self.timer.flush_ms(), 1e-4)
            for _ in range(max(1, math.ceil(self.ahead_ms[i] / flush_ms))):
                self.timer.flush()
            return
        self.launches[i]()
        self.timer.kernels.spin(self.ahead_ms[i])
        if before is not None:
            before()

    def _collect(self) -> None:
        if not self.pending:
            return
        self.timer.stream.synchronize("isolated repetition")
        row, aheads = [], []
        for i, (mark, start, end, host_ms) in enumerate(self.pending):
            row.append(end.elapsed_ms(start))
            # how long the GPU was still busy with the queued work when the host had enqueued
            # the launch: positive means the launch never waited on the host
            aheads.append(start.elapsed_ms(mark) - host_ms)
            if aheads[-1] <= 0:
                self.ahead_ms[i] = min(2 * self.ahead_ms[i], ISOLATED_AHEAD_MAX_MS)
        self.pending = []
        self.attempts += 1
        if min(aheads) > 0 or self.attempts >= self.max_attempts:
            self.times.append(row)
            self.least_ahead_ms = min(self.least_ahead_ms, min(aheads))
        self.stop = self.rule.verdict(self.times, exhausted=self.attempts >= self.max_attempts)

    def step(self) -> None:
        self._collect()
        if self.stop:
            return
        stream = self.timer.stream
        for i, launch in enumerate(self.launches):
            stream.synchronize("isolated gap")
            time.sleep(self.gap_s)
            mark, start, end = Event(), Event(), Event()
            mark.record(stream)
            host_t0 = time.perf_counter()
            self._ahead(i)
            start.record(stream)
            launch()
            host_ms = (time.perf_counter() - host_t0) * 1e3
            end.record(stream)
            if self.after[i] is not None:
                self.after[i]()
            self.pending.append((mark, start, end, host_ms))

    def finished(self) -> bool:
        return bool(self.stop)
