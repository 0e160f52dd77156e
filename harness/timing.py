"""Timing with CUDA events, the queue kept full, cold or hot L2, SM clock sampled by NVML.

Method (after Triton's ``do_bench``, adapted): warm up for ``warmup_ms``; turn ``budget_ms`` into
a repetition count; enqueue enough L2-flush work ahead of the timed region that the GPU is
still busy with it when the host has finished enqueueing every repetition (so no launch waits on
the host); record an event pair around each launch, with an L2 flush (a write of twice the L2
size) between repetitions in cold mode; synchronise once; report the median and p20/p80.
While the GPU works through the repetitions the host samples NVML: the SM clock, the board's
mean power over the window (its energy counter, for windows of a second or more) and what held
the clock (clocks.py). Launches timed interleaved share one window, so they share those.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

from harness.clocks import ClockSampler
from harness.driver import Buffer, Event, Stream
from harness.errors import HarnessError
from harness.stats import Summary

FLUSH_WORD = 0x3F800000


@dataclass(frozen=True)
class TimingOptions:
    """How a kernel is timed."""

    cold_l2: bool = True
    """Flush L2 (write 2x its size) before every repetition; False times with warm L2."""
    warmup_ms: float = 30.0
    """GPU time spent launching before measuring (module load, clocks ramping)."""
    budget_ms: float = 300.0
    """GPU time the timed repetitions should take; turned into a repetition count."""
    min_reps: int = 10
    max_reps: int = 2000


@dataclass(frozen=True)
class Timing:
    """Per-repetition times of one kernel at one size, and how they were taken."""

    median_ms: float
    p20_ms: float
    p80_ms: float
    min_ms: float
    max_ms: float
    reps: int
    cold_l2: bool
    sm_clock_mhz: float
    sm_clock_min_mhz: float
    sm_clock_max_mhz: float
    queue_ahead_ms: float
    """GPU work still queued ahead of the timed region when the host finished enqueueing it.
    Positive: no repetition waited on the host. Negative: launches may include host latency."""
    power_w: float = math.nan
    """Mean board power (W) while the repetitions ran, L2 flushes included in cold mode; NaN
    where NVML has no energy counter or the window spans under a second (clocks.py: ask for a
    budget of 1500 ms or more to get it)."""
    power_span_s: float = 0.0
    """The span ``power_w`` is a mean over."""
    clock_limits: str = ""
    """What held the SM clock during the repetitions ("power cap", "none", ...); "" unknown."""

    def as_dict(self) -> dict:
        return asdict(self)


class Timer:
    """Times launches on one stream; owns the L2-flush buffer."""

    def __init__(self, stream: Stream, l2_bytes: int, clocks: ClockSampler,
                 options: TimingOptions = TimingOptions()):
        self.stream, self.clocks, self.options = stream, clocks, options
        self.flush_buffer = Buffer(max(2 * l2_bytes, 1 << 20))
        self._flush_ms: float | None = None

    def flush(self) -> None:
        self.flush_buffer.fill_u32(FLUSH_WORD, self.stream)

    def _measure(self, work: Callable[[], None], count: int) -> tuple[float, float]:
        """GPU ms per call of ``work`` and host ms to enqueue one, over ``count`` calls."""
        start, end = Event(), Event()
        start.record(self.stream)
        host_t0 = time.perf_counter()
        for _ in range(count):
            work()
        host_ms = (time.perf_counter() - host_t0) * 1e3
        end.record(self.stream)
        self.stream.synchronize("timing")
        return end.elapsed_ms(start) / count, host_ms / count

    def flush_ms(self) -> float:
        if self._flush_ms is None:
            self._measure(self.flush, 3)
            self._flush_ms = self._measure(self.flush, 10)[0]
        return self._flush_ms

    def time(self, launch: Callable[[], None]) -> Timing:
        """Time ``launch`` (which enqueues one kernel on this timer's stream)."""
        return self.time_interleaved([launch])[0][0]

    def time_interleaved(self, launches: Sequence[Callable[[], None]]
                         ) -> tuple[list[Timing], list[list[float]]]:
        """Time several launches in rounds (A B C, A B C, ...), each with its own events and
        flush, so that clock or thermal drift touches all of them alike. Returns a Timing per
        launch and the per-round times (ms) that go with them."""
        opts = self.options
        for launch in launches:
            launch()
        self.stream.synchronize("first launch")

        def round_() -> None:
            for launch in launches:
                launch()

        estimate_ms = max(self._measure(round_, 3)[0], 1e-4)
        for _ in range(max(1, math.ceil(opts.warmup_ms / estimate_ms))):
            round_()
        gpu_ms, host_per_round_ms = self._measure(round_, 5)
        estimate_ms = max(gpu_ms, 1e-4)
        reps = int(min(opts.max_reps, max(opts.min_reps, opts.budget_ms / estimate_ms)))

        # Work ahead of the timed region: enough flushes to outlast the host's enqueueing
        # (about 4 driver calls per launch), with a 2x margin.
        host_enqueue_ms = reps * (host_per_round_ms + 0.05 * len(launches))
        ahead = max(4, math.ceil(2 * host_enqueue_ms / max(self.flush_ms(), 1e-3)))
        events = [[(Event(), Event()) for _ in launches] for _ in range(reps)]
        ahead_start, ahead_end = Event(), Event()
        ahead_start.record(self.stream)
        for _ in range(ahead):
            self.flush()
        ahead_end.record(self.stream)
        host_t0 = time.perf_counter()
        for round_events in events:
            for launch, (start, end) in zip(launches, round_events, strict=True):
                if opts.cold_l2:
                    self.flush()
                start.record(self.stream)
                launch()
                end.record(self.stream)
        host_ms = (time.perf_counter() - host_t0) * 1e3
        clocks = self.clocks.sample_until(events[-1][-1][1].done)
        self.stream.synchronize("timed repetitions")
        per_round = [[end.elapsed_ms(start) for start, end in round_events]
                     for round_events in events]
        ahead_ms = ahead_end.elapsed_ms(ahead_start) - host_ms
        timings = []
        for i in range(len(launches)):
            summary = Summary.of([r[i] for r in per_round])
            if summary.median <= 0:
                raise HarnessError("timing: the median repetition took no time; the launch "
                                   "enqueued nothing on the timer's stream")
            timings.append(Timing(summary.median, summary.p20, summary.p80, summary.minimum,
                                  summary.maximum, reps, opts.cold_l2, clocks.median,
                                  clocks.minimum, clocks.maximum, ahead_ms, clocks.power_w,
                                  clocks.power_span_s, clocks.limits))
        return timings, per_round
