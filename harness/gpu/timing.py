"""Timing with CUDA events, the queue kept full, cold or hot L2, SM clock sampled by NVML.

Method (after Triton's ``do_bench`` and nvbench's noise-based stopping, adapted): warm up for
``warmup_ms`` (long enough for the power limiter to settle); then time repetitions in batches of
about ``BATCH_MS`` of GPU work, each launch between its own event pair, with an L2 flush (a
write of twice the L2 size) before each in cold mode. Two batches are kept queued, behind enough
L2-flush work that the GPU is still busy with it when the host has enqueued them, so no launch
waits on the host. After each batch the median is tested: the timing stops once at least
``min_ms`` of GPU time and ``min_reps`` repetitions are in and the median's relative standard
error (1.2533 x sigma / sqrt(n), sigma from the p20-p80 range) is at most ``max_rel_se_pct`` for
every launch timed, or once ``budget_ms`` of GPU time or ``max_reps`` repetitions are spent. It
reports the median and p20/p80, and why it stopped. While the GPU works through the repetitions
the host samples NVML for the SM clock and what held it (clocks.py); launches timed interleaved
share one window, so they share those. Board power needs a longer window than a timing gives
(NVML's readings move every ~100 ms): with ``power_s`` set, a single launch's timing is followed
by a power pass, the launch back to back for that long with warm L2 and no events, the queue
kept a few tens of ms ahead, whose mean board power and GPU time per launch give the energy per
launch. With cold L2, a launch shorter than ``prime_below_ms`` follows, in every
repetition, an untimed launch of itself (before C is poisoned and L2 flushed): L2 is cold,
its code in the SMs' caches is not, whatever else the round runs.

Two regimes. *Sustained* (the default) is the above: launches back to back, the GPU never
idle, so a power-capped card runs them at the clock its cap allows. *Isolated*
(``isolated_gap_ms`` > 0) is how Nsight Compute sees a kernel: before every repetition the
stream is synchronised and the host sleeps ``isolated_gap_ms``, so the GPU idles and its power
and clocks recover; then work is queued ahead of the timed launch (L2 flushes in cold mode;
in hot mode launches of the same kernel) long enough that the launch still never waits on the
host (``_Isolated``). Every Timing says which regime it was taken in.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from harness.errors import HarnessError
from harness.gpu.clocks import ClockSampler
from harness.gpu.driver import Buffer, Event, Graph, Stream, TimerKernels
from harness.stats import Summary

FLUSH_WORD = 0x3F800000
WARMUP_MAX_ROUNDS = 20000
POWER_CHUNK_MS, POWER_AHEAD = 20.0, 3  # power pass: GPU ms per chunk of launches, chunks queued
HOT_SUSTAINED_CALIBRATION_MS = 0.01
"""The spin the launch overhead is calibrated on in the hot sustained regime (10 us)."""
BATCH_MS = 10.0
"""GPU time of one batch of timed repetitions: the stopping rule is tested after each."""
ISOLATED_AHEAD_MS = 0.05
"""Isolated: GPU work queued ahead of each timed launch beyond three times the host's time to
enqueue one (``_Isolated``)."""
ISOLATED_AHEAD_MAX_MS = 20.0
"""The most queued work a repetition's retries double up to."""
ISOLATED_MAX_REPS = 200
"""Isolated repetitions each cost a sleep: their count is capped lower than back to back."""
SUSTAINED, ISOLATED = "sustained", "isolated"
REST_ABOVE_MS = 0.01
"""Launches shorter than this get no rest (``TimingOptions.rest``): they draw little power, and
a spin's own launch costs a few us."""
GRAPH_IDLE_TOLERANCE_MS = 0.02
"""Graphs: an idle time between batches above this is the GPU waiting on the host (one graph
launch after another in a stream starts within a few microseconds)."""


@dataclass(frozen=True)
class TimingOptions:
    """How a kernel is timed."""

    cold_l2: bool = True
    """Flush L2 (write 2x its size) before every repetition; False times with warm L2."""
    warmup_ms: float = 300.0
    """GPU time spent running the launches back to back before measuring: module load, clocks
    ramping, and the power limiter settling. The GPU idles while the host checks a kernel,
    and the first tens of ms after that run cooler: on the H100 at 4096, after a 30 ms warm-up
    four repeats of the same mma.sync kernel against cuBLAS spread over 2.3-3.4 points of %
    cuBLAS (up to 10% in the kernel's time), and after 1 s over 0.2-0.4 points, about 3 points
    lower (reports/h100/tc-variance-2c038fe.log, notes/timing.md)."""
    budget_ms: float = 300.0
    """The most GPU time the timed repetitions may take (the cap of the stopping rule)."""
    min_ms: float = 100.0
    """The least GPU time the timed repetitions take (the floor of the stopping rule): a median
    over a window as long as the power limiter's own (NVML's power moves every ~100 ms)."""
    max_rel_se_pct: float = 0.25
    """Stop once the median's relative standard error is at most this (percent); 0 runs every
    timing to ``budget_ms``. At 0.5 a 3 us cuBLAS (p20-p80 over 15% of its median) stopped
    after about 550 repetitions, and two runs' % cuBLAS of one kernel moved up to 2.5%; 0.25
    takes about four times as many where the budget allows (notes/timing.md)."""
    min_reps: int = 10
    max_reps: int = 2000
    power_s: float = 0.0
    """After timing one launch, run it back to back this long for the board's mean power
    (``Timer.power``); 0 skips it. Launches timed interleaved get none."""
    graph: bool = True
    """Sustained: capture each batch of repetitions (C poisoned, L2 flush, events, launch)
    once in a CUDA graph and replay it, one driver call per batch, so that no repetition
    waits on the host however short the kernel; False enqueues every launch from the host."""
    subtract_launch_overhead: bool = True
    """Subtract from every repetition what a launch costs besides its work (the events' and
    the launch's own cost, a few us on an H100), calibrated by a one-thread kernel timed as
    one more launch of every round, in the same regime and the same stretch of GPU time:
    what remains is the kernel's duration from its first instruction to its last. (Until
    2026-11-25 it was calibrated once per process, and two default runs subtracted 3.55 and
    3.62 us: 2% of a 3 us cuBLAS; notes/timing.md.)"""
    calibration_spin_ms: float | None = None
    """The launch overhead's calibration, timed in every round: 0, the empty kernel; above 0,
    a spin of this length, less the mean span the spins measured of themselves;
    None (default), a 10 us spin in the hot sustained regime and the empty kernel in the
    others. Back to back with warm L2 the GPU prepares the next launch while a kernel runs,
    which it cannot under a kernel of no work: there the empty kernel read 0.5-1.0 us too
    much in three of four H100 runs; behind an L2 flush or a synchronise the empty kernel is
    right and a spin read up to 0.53 us too much (notes/timing.md)."""

    rest: float = 1.0
    """Sustained with cold L2: every timed repetition (and warm-up round) of a launch is
    preceded by a rest of this many times the launch's own GPU time, a one-thread spin that
    leaves the SMs idle, so that the card runs at about half duty, under its power cap, at
    the clock it picks when power does not hold it. At full duty (0) a power-capped card's
    clock follows what it ran over the last 0.1-3 s: on the H100 at 4096 the same pairs read
    mma.sync rows 1-4.6% lower in % cuBLAS within a compare's round than alone, and alone
    after an idle 2 s than after a soak; at half duty every context agreed within 1.1%, at
    1980 MHz (power-context-20261126-135043, notes/timing.md). The budget and the floor of
    the stopping rule count GPU time without the rests. Not with warm L2 (a launch there
    follows its own last one, which a rest would change) nor isolated (which idles)."""

    prime_below_ms: float = 1.0
    """With cold L2: every timed repetition of a launch shorter than this (its first launch,
    timed alone) follows an untimed launch of itself, before its ``before`` and the L2 flush
    (``primer_of``; isolated, after the idle gap): the SMs' instruction and constant caches
    then hold its code, as in a loop of it, whatever else the round runs, and the flush still
    empties L2. Without it a 3 us cuBLAS at 512 read 0.3-0.5 us longer where 36 other launches
    of a compare round ran between two of its own than where two did, in a run
    (notes/timing.md). 0 primes nothing; above 1 ms the primer's cost outweighs what it could
    move. Hot, none: sustained, a launch follows the one before it with no flush between, and
    its overhead partly hides under that one; isolated, the work queued ahead of it already
    begins with a launch of itself."""

    isolated_gap_ms: float = 0.0
    """``--isolated`` with ``--gap-ms``: 0 times the sustained regime (the queue kept full);
    above 0, each repetition is an isolated launch after the stream is synchronised and the
    host has slept this long (the GPU idle), as under Nsight Compute."""

    @property
    def calibration_ms(self) -> float:
        """The spin the overhead is calibrated on in this regime (0: the empty kernel)."""
        if self.calibration_spin_ms is not None:
            return self.calibration_spin_ms
        return HOT_SUSTAINED_CALIBRATION_MS if (not self.cold_l2 and self.isolated_gap_ms <= 0
                                                ) else 0.0

    @property
    def regime(self) -> str:
        """``sustained`` or ``isolated``."""
        return ISOLATED if self.isolated_gap_ms > 0 else SUSTAINED

    @property
    def rests(self) -> bool:
        """Whether timed launches rest between repetitions (``rest``)."""
        return self.rest > 0 and self.cold_l2 and self.regime == SUSTAINED

    def describe(self) -> str:
        """The stopping rule in words, for reports."""
        rule = (f"until the median's relative standard error is <= {self.max_rel_se_pct:g}% "
                f"(at least {self.min_ms:g} ms and {self.min_reps} repetitions)"
                if self.max_rel_se_pct > 0 else "for the whole budget")
        if self.regime == ISOLATED:
            return (f"isolated launches, each after a synchronise and {self.isolated_gap_ms:g} "
                    f"ms idle, {rule.replace(f'{self.min_ms:g} ms and ', '')}, at most "
                    f"{self.budget_ms:g} ms of GPU time or "
                    f"{min(self.max_reps, ISOLATED_MAX_REPS)} repetitions; warm-up "
                    f"{self.warmup_ms:g} ms")
        rest = (f"; each launch after a rest of {self.rest:g}x its own time (one-thread spin: "
                "the card under its power cap)" if self.rests else "")
        return (f"repetitions in batches {rule}, at most {self.budget_ms:g} ms of GPU time or "
                f"{self.max_reps} repetitions; warm-up {self.warmup_ms:g} ms{rest}")


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
    """Positive: no repetition waited on the host. Enqueued from the host: the GPU work still
    queued ahead of the timed region when the host finished enqueueing the first two batches;
    negative, launches may include host latency. Replayed from graphs: the GPU time of one
    batch when the GPU never idled between batches (every batch is one driver call, so no
    repetition inside one can wait); negative, the longest it idled between two batches
    waiting on the host (the repetitions' own times are unaffected, their clocks may be)."""
    clock_limits: str = ""
    """What held the SM clock during the repetitions ("power cap", "none", ...); "" unknown."""
    power_w: float = math.nan
    """Mean board power (W) over the power pass (``TimingOptions.power_s``); NaN without one,
    or where NVML has no energy counter."""
    power_span_s: float = 0.0
    """The span ``power_w`` is a mean over (clocks.py)."""
    power_ms_per_launch: float = math.nan
    """GPU time per launch in the power pass: with ``power_w``, the energy of one launch."""
    stop: str = ""
    """Why the repetitions stopped: "converged", "budget" or "max reps"."""
    median_rel_se_pct: float = math.nan
    """The median's relative standard error when they stopped (percent)."""
    regime: str = SUSTAINED
    """``sustained`` (back to back, the queue kept full) or ``isolated`` (each launch after the
    GPU idled ``gap_ms``); reports written before there was a choice were sustained."""
    gap_ms: float = 0.0
    """Isolated: the idle time before each repetition."""
    graph: bool = False
    """The repetitions were replayed from CUDA graphs (TimingOptions.graph)."""
    launch_overhead_ms: float = 0.0
    """The launch's own overhead, calibrated in the same rounds (median of the calibration
    launch less the span a spin measured of itself), subtracted from every repetition
    (TimingOptions.subtract_launch_overhead); 0 when nothing was subtracted."""
    rest: float = 0.0
    """The rest before each repetition, in multiples of the launch's own time
    (TimingOptions.rest); 0, full duty (every report written before 2026-11-26 14:30 UTC)."""

    @property
    def energy_j(self) -> float:
        """Board energy of one launch in the power pass (NaN without one)."""
        return self.power_w * self.power_ms_per_launch * 1e-3


@dataclass(frozen=True)
class PowerPass:
    """A launch run back to back for a few seconds (``Timer.power``)."""

    power_w: float
    """The board's mean power (clocks.py); NaN where NVML cannot say."""
    span_s: float
    """The span the mean is over."""
    ms_per_launch: float
    """GPU time per launch over the pass."""
    launches: int
    sm_clock_mhz: float
    """NVML's median SM clock over the pass."""
    clock_limits: str

    @property
    def energy_j(self) -> float:
        """Board energy of one launch."""
        return self.power_w * self.ms_per_launch * 1e-3


class Timer:
    """Times launches on one stream; owns the L2-flush buffer."""

    def __init__(self, stream: Stream, l2_bytes: int, clocks: ClockSampler,
                 options: TimingOptions = TimingOptions()):
        self.stream, self.clocks, self.options = stream, clocks, options
        self.flush_buffer = Buffer(max(2 * l2_bytes, 1 << 20))
        self._flush_ms: float | None = None
        self._kernels: TimerKernels | None = None

    @property
    def kernels(self) -> TimerKernels:
        """The empty and spin kernels, compiled the first time they are needed."""
        if self._kernels is None:
            self._kernels = TimerKernels(self.stream)
        return self._kernels

    def _calibration(self) -> Callable[[], None]:
        """The launch timed in every round beside the others, whose median (less the span a
        spin measured of itself) is the launch overhead: the empty kernel, or a spin of
        ``calibration_ms``. Spins measured here keep their spans apart from any other spin."""
        spin_ms = self.options.calibration_ms
        if spin_ms <= 0:
            return self.kernels.empty
        self.kernels.reset_calibration_spins()
        return lambda: self.kernels.calibration_spin(spin_ms)

    def _own_ms(self) -> float:
        """The mean span the calibration spins measured of themselves (0 for the empty
        kernel); after the stream's work."""
        return self.kernels.calibration_spin_mean_ms() if self.options.calibration_ms > 0 \
            else 0.0

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

    def time(self, launch: Callable[[], None], before: Callable[[], None] | None = None,
             after: Callable[[], None] | None = None) -> Timing:
        """Time ``launch`` (which enqueues one kernel on this timer's stream), then measure its
        power if the options ask for it. ``before`` enqueues work before every timed
        repetition, outside its events (poisoning C); ``after``, after every timed one."""
        timing = self.time_interleaved([launch], None if before is None else [before],
                                       after=None if after is None else [after])[0][0]
        return self.with_power(timing, launch)

    def with_power(self, timing: Timing, launch: Callable[[], None]) -> Timing:
        """``timing`` with the power pass of ``launch`` when the options ask for one."""
        if self.options.power_s <= 0:
            return timing
        p = self.power(launch, self.options.power_s)
        return replace(timing, power_w=p.power_w, power_span_s=p.span_s,
                       power_ms_per_launch=p.ms_per_launch)

    def power(self, launch: Callable[[], None], seconds: float) -> PowerPass:
        """``launch`` back to back for ``seconds`` (warm L2, no events between launches)."""
        estimate_ms = max(self._measure(launch, 5)[0], 1e-4)
        per_chunk = max(1, math.ceil(POWER_CHUNK_MS / estimate_ms))
        chunks = max(2, math.ceil(seconds * 1e3 / (per_chunk * estimate_ms)))
        marks: list[Event] = []
        start = Event()
        start.record(self.stream)

        def top_up() -> None:  # keep POWER_AHEAD chunks queued, so the GPU never waits
            while len(marks) < chunks and sum(not m.done() for m in marks[-POWER_AHEAD:]) \
                    < POWER_AHEAD:
                for _ in range(per_chunk):
                    launch()
                marks.append(Event())
                marks[-1].record(self.stream)

        top_up()
        sample = self.clocks.sample_until(lambda: len(marks) == chunks and marks[-1].done(),
                                          tick=top_up)
        self.stream.synchronize("power pass")
        return PowerPass(sample.power_w, sample.power_span_s,
                         marks[-1].elapsed_ms(start) / (chunks * per_chunk), chunks * per_chunk,
                         sample.median, sample.limits)

    def time_interleaved(self, launches: Sequence[Callable[[], None]],
                         before: Sequence[Callable[[], None] | None] | None = None,
                         budget_scale: float = 1.0,
                         after: Sequence[Callable[[], None] | None] | None = None
                         ) -> tuple[list[Timing], list[list[float]]]:
        """Time several launches in rounds (A B C, A B C, ...), each with its own events and
        flush, so that clock or thermal drift touches all of them alike. ``before[i]``, when
        given, is enqueued before every timed repetition of launch i, outside its events (C
        poisoned, so that no repetition finds the last one's result). With the launch
        overhead subtracted, every round ends with the calibration launch (``_calibration``).
        ``budget_scale``: the budget (the cap of the stopping rule) is this many times
        ``budget_ms`` (a compare of n kernels, each with its cuBLAS, gives every pair what a
        run would). ``after[i]``, when given, is enqueued after every timed repetition of
        launch i, outside its events, and after no other launch of it (the capture of a
        timed output: verify.py). Returns a Timing per launch and the per-round times (ms)
        that go with them."""
        opts = self.options
        before = list(before or [None] * len(launches))
        after = list(after or [None] * len(launches))
        rounds = _Rounds(len(launches), opts.subtract_launch_overhead, opts.calibration_ms,
                         padded=opts.subtract_launch_overhead and opts.calibration_ms > 0
                         and opts.regime == SUSTAINED and not opts.cold_l2)
        primers = [primer_of(launch, b) for launch, b in zip(launches, before, strict=True)]
        if rounds.calibrated:
            extra = [self._calibration()]
            # the empty kernel is primed as the launches are; a calibration spin keeps a slot
            # per launch and is not
            primers.append(extra[0] if opts.calibration_ms <= 0 else None)
            if rounds.padded:  # the calibration spin after a spin, as the first launch is
                extra.insert(0, lambda: self.kernels.spin(opts.calibration_ms))
                primers.insert(-1, None)
            launches, before = [*launches, *extra], [*before, *[None] * len(extra)]
            after = [*after, *[None] * len(extra)]
        if opts.regime == ISOLATED:
            return self._time_isolated(launches, before, rounds, primers, after)
        # untimed launches (first, estimate, warm-up) get their ``before`` too: a launch whose
        # preparation fills a workspace must never run without it
        prepared = [with_before(b, launch) for launch, b in zip(launches, before, strict=True)]
        for launch in prepared:
            launch()
        self.stream.synchronize("first launch")
        first_ms = [self._measure(launch, 1)[0] for launch in prepared]  # each alone, loaded
        primers = self._gated(primers, first_ms)
        rests = [opts.rest * ms if opts.rests and ms >= REST_ABOVE_MS else 0.0
                 for ms in first_ms]

        def round_() -> None:
            for launch, primer, rest in zip(prepared, primers, rests, strict=True):
                if rest:
                    self.kernels.spin(rest)
                if primer is not None:
                    primer()
                launch()

        estimate_ms = max(self._measure(round_, 3)[0], 1e-4)
        for _ in range(warmup_rounds(opts.warmup_ms, estimate_ms)):
            round_()
        gpu_ms, host_per_round_ms = self._measure(round_, 5)
        if opts.cold_l2:
            gpu_ms += len(launches) * self.flush_ms()
        estimate_ms = max(gpu_ms, 1e-4)
        # the stopping rule's budget and floor count GPU time of the timed work, rests aside
        work_ms = max(estimate_ms - sum(rests), 1e-4)
        budget_ms = opts.budget_ms * max(budget_scale, 1.0)
        cap = int(min(opts.max_reps, max(opts.min_reps, budget_ms / work_ms)))
        floor = int(min(cap, max(opts.min_reps, math.ceil(opts.min_ms / work_ms))))
        per_batch = int(min(cap, max(5, math.ceil(BATCH_MS / estimate_ms))))
        batches = _Batches(self, launches, before, cap, floor, per_batch, rounds, opts.graph,
                           primers, rests, after)
        if batches.sets:
            return self._replayed(batches, rounds, estimate_ms * per_batch)

        # Work ahead of the first two batches: enough flushes to outlast the host's enqueueing
        # of them (about 4 driver calls per launch), with a 2x margin; later batches are
        # enqueued while earlier ones run.
        host_enqueue_ms = 2 * per_batch * (host_per_round_ms + 0.05 * len(launches))
        ahead = max(4, math.ceil(2 * host_enqueue_ms / max(self.flush_ms(), 1e-3)))
        ahead_start, ahead_end = Event(), Event()
        ahead_start.record(self.stream)
        for _ in range(ahead):
            self.flush()
        ahead_end.record(self.stream)
        host_t0 = time.perf_counter()
        batches.enqueue()
        batches.enqueue()
        host_ms = (time.perf_counter() - host_t0) * 1e3
        clocks = self.clocks.sample_until(batches.finished, tick=batches.tick)
        self.stream.synchronize("timed repetitions")
        batches.tick()
        ahead_ms = ahead_end.elapsed_ms(ahead_start) - host_ms
        return self._timings(rounds, batches.times, clocks, ahead_ms, batches.stop,
                             rest=opts.rest if any(rests) else 0.0)

    def _gated(self, primers: list, durations_ms: Sequence[float]) -> list:
        """The primers of launches shorter than ``prime_below_ms``, with cold L2 (None for
        the others): ``TimingOptions.prime_below_ms``."""
        below = self.options.prime_below_ms if self.options.cold_l2 else 0.0
        return [p if p is not None and ms < below else None
                for p, ms in zip(primers, durations_ms, strict=True)]

    def _replayed(self, batches: _Batches, rounds: _Rounds, batch_ms: float
                  ) -> tuple[list[Timing], list[list[float]]]:
        """The batches replayed from their graphs, two in flight; queue-ahead from the GPU's
        idle time between batches, measured for every batch."""
        batches.enqueue()
        batches.enqueue()
        clocks = self.clocks.sample_until(batches.finished, tick=batches.tick)
        self.stream.synchronize("timed repetitions")
        batches.tick()
        idle = max(batches.idle_ms, default=0.0)
        ahead_ms = -idle if idle > GRAPH_IDLE_TOLERANCE_MS else batch_ms
        batches.close()
        return self._timings(rounds, batches.times, clocks, ahead_ms, batches.stop,
                             graph=True, rest=self.options.rest if any(batches.rests) else 0.0)

    def _timings(self, rounds: _Rounds, per_round: list[list[float]], clocks,
                 ahead_ms: float, stop: str, **regime) -> tuple[list[Timing],
                                                               list[list[float]]]:
        """A Timing per launch from its repetitions, less the overhead its rounds
        calibrated; and the per-round times so corrected, without the calibration's."""
        opts = self.options
        for i in range(len(per_round[0]) if per_round else 0):
            if Summary.of_ticks([r[i] for r in per_round]).median <= 0:
                raise HarnessError("timing: the median repetition took no time; the launch "
                                   "enqueued nothing on the timer's stream")
        overhead, overhead_se = 0.0, 0.0
        if rounds.calibrated:
            calibration = Summary.of_ticks([r[-1] for r in per_round])
            overhead = max(calibration.median - self._own_ms(), 0.0)
            overhead_se = standard_error(calibration)
            per_round = [r[:rounds.launches] for r in per_round]
        corrected = [[max(t - overhead, 0.0) for t in r] for r in per_round]
        timings = []
        for i in range(rounds.launches):
            summary = Summary.of_ticks([r[i] for r in corrected])
            se = math.hypot(standard_error(summary), overhead_se)
            timings.append(Timing(summary.median, summary.p20, summary.p80, summary.minimum,
                                  summary.maximum, len(corrected), opts.cold_l2,
                                  clocks.median, clocks.minimum, clocks.maximum, ahead_ms,
                                  clocks.limits, stop=stop,
                                  median_rel_se_pct=100.0 * se / summary.median
                                  if summary.median > 0 else math.inf,
                                  launch_overhead_ms=overhead, **regime))
        return timings, corrected

    def _time_isolated(self, launches: Sequence[Callable[[], None]], before: list,
                       rounds: _Rounds, primers: list, after: list
                       ) -> tuple[list[Timing], list[list[float]]]:
        """The isolated regime of :meth:`time_interleaved`: every repetition of every launch
        after a synchronise and ``isolated_gap_ms`` of idle GPU; with cold L2 a launch shorter
        than ``prime_below_ms`` is primed after the gap, ahead of the flushes (with warm L2
        the work queued ahead already begins with a launch of itself)."""
        opts = self.options
        prepared = [with_before(b, launch) for launch, b in zip(launches, before, strict=True)]
        for launch in prepared:
            launch()
        self.stream.synchronize("first launch")
        measured = [self._measure(launch, 3) for launch in prepared]  # (GPU ms, host ms)
        total_ms = sum(max(gpu_ms, 1e-4) for gpu_ms, _ in measured)
        warm = warmup_rounds(opts.warmup_ms, total_ms)
        self._measure(lambda: [launch() for launch in prepared], warm)
        cap = int(min(opts.max_reps, ISOLATED_MAX_REPS,
                      max(opts.min_reps, opts.budget_ms / total_ms)))
        primers = self._gated(primers, [gpu_ms for gpu_ms, _ in measured])
        reps = _Isolated(self, launches, before, measured, cap, min(cap, opts.min_reps),
                         rounds, primers, after)
        clocks = self.clocks.sample_until(reps.finished, interval_s=0.0, tick=reps.step)
        self.stream.synchronize("isolated repetitions")
        return self._timings(rounds, reps.times, clocks, reps.least_ahead_ms, reps.stop,
                             regime=ISOLATED, gap_ms=opts.isolated_gap_ms)


@dataclass(frozen=True)
class _Rounds:
    """What a round holds: ``launches`` timed launches, then the calibration launch when
    ``calibrated`` (a spin of ``spin_ms``, or the empty kernel when 0); when ``padded``, a
    spin of the same length before it, timed but not used.

    Back to back with warm L2 the GPU prepares each launch under the one before, so what a
    launch's events read may depend on its predecessor: the round's first launch follows the
    calibration spin, and the pad makes the calibration spin follow a spin too, not the
    round's last launch. No H100 run has yet shown the pad needed: it was added against a
    0.32-0.35 us miss of hot 2 and 5 us spins that it did not change, and whose cause was a
    read-modify-write after the calibration spin (notes/timing.md)."""

    launches: int
    calibrated: bool
    spin_ms: float
    padded: bool = False

    def worst_rel_se_pct(self, per_round: list[list[float]]) -> float:
        """The stopping rule's measure: the largest relative standard error among the timed
        launches' medians, each less the calibration's median and with its error added (the
        overhead's uncertainty is the difference's, measured against the difference; a
        launch of no work is measured against its own median)."""
        columns = [Summary.of_ticks([r[i] for r in per_round])
                   for i in range(len(per_round[0]))]
        if not self.calibrated:
            return max(median_rel_se_pct(c) for c in columns)
        calibration, worst = columns[-1], 0.0
        if calibration.count < 2:
            return math.inf
        for c in columns[:self.launches]:
            net = c.median - calibration.median + self.spin_ms
            se = math.hypot(standard_error(c), standard_error(calibration))
            worst = max(worst, 100.0 * se / (net if net > 0 else c.median))
        return worst


def warmup_rounds(warmup_ms: float, round_ms: float) -> int:
    """Rounds of warm-up for ``warmup_ms`` of GPU time, at least one; at most
    WARMUP_MAX_ROUNDS, so that a kernel of a few us does not spend seconds of host time
    enqueueing (its rounds are launch-bound; the power it draws hardly moves the clock)."""
    return int(min(WARMUP_MAX_ROUNDS, max(1, math.ceil(warmup_ms / max(round_ms, 1e-4)))))


def primer_of(launch: Callable[[], None], before: Callable[[], None] | None = None
              ) -> Callable[[], None]:
    """What runs untimed before a timed repetition of ``launch`` to prime it
    (``TimingOptions.prime_below_ms``): its ``prime`` attribute where it has one (a launch
    that takes copies of its operands in turn primes on the copy it is about to take, with
    its own preparation, C poisoned after it), else ``before`` and the launch (C is poisoned
    again after it, before the timed launch)."""
    return getattr(launch, "prime", None) or with_before(before, launch)


@dataclass(frozen=True)
class Primed:
    """A launch for the timer with what primes it (``primer_of``) and, where it has one, what
    follows each of its timed repetitions (``Timer.time_interleaved``'s ``after``)."""

    launch: Callable[[], None]
    prime: Callable[[], None]
    after: Callable[[], None] | None = None

    def __call__(self) -> None:
        self.launch()


def with_before(before: Callable[[], None] | None, launch: Callable[[], None]
           ) -> Callable[[], None]:
    """``launch`` preceded by ``before`` (when there is one)."""
    if before is None:
        return launch

    def both() -> None:
        before()
        launch()
    return both


def standard_error(summary: Summary) -> float:
    """The median's standard error: 1.2533 sigma / sqrt(n), with sigma estimated from the
    p20-p80 range (1.683 sigma for a normal sample); inf below two values."""
    if summary.count < 2:
        return math.inf
    return 1.2533 * (summary.p80 - summary.p20) / 1.683 / math.sqrt(summary.count)


def median_rel_se_pct(summary: Summary) -> float:
    """The median's relative standard error in percent (``standard_error`` / median)."""
    if summary.count < 2 or summary.median <= 0:
        return math.inf
    return 100.0 * standard_error(summary) / summary.median


class _Batches:
    """The timed repetitions, a batch at a time with two batches in flight, collected as they
    finish, and stopped by the rule (``TimingOptions``). A batch is enqueued from the host
    launch by launch, or, with graphs, captured once and replayed: three captured batches
    (each with its own events) take turns, so a finished batch's events are read before its
    graph runs again, and the one before it still holds its end for the idle-time measure."""

    def __init__(self, timer: Timer, launches, before, cap: int, floor: int, per_batch: int,
                 rounds: _Rounds, graph: bool = False, primers=None, rests=None, after=None):
        self.timer, self.launches, self.before, self.rounds = timer, launches, before, rounds
        self.after = list(after or [None] * len(launches))
        self.primers = list(primers or [None] * len(launches))
        self.rests = list(rests or [0.0] * len(launches))
        self.cap, self.floor, self.per_batch = cap, floor, per_batch
        self.enqueued = 0
        self.in_flight: list[list[list[tuple[Event, Event]]]] = []
        self.times: list[list[float]] = []
        self.stop = ""
        self.sets: list[_Captured] = []
        self.idle_ms: list[float] = []
        """Graphs: the GPU's idle time between one batch's end and the next one's start."""
        self._last: _Captured | None = None
        self.graph_error = ""
        if graph:
            try:
                self.sets = [self._capture() for _ in range(3)]
            except HarnessError as exc:  # e.g. a library call that refuses capture
                self.close()
                self.sets, self.graph_error = [], str(exc)

    def _rounds(self, batch, in_graph: bool = False) -> None:
        stream, cold = self.timer.stream, self.timer.options.cold_l2
        for round_events in batch:
            for launch, before, after, primer, rest, (start, end) in zip(
                    self.launches, self.before, self.after, self.primers, self.rests,
                    round_events, strict=True):
                if rest:
                    self.timer.kernels.spin(rest)
                if primer is not None:
                    primer()
                if before is not None:
                    before()
                if cold:
                    self.timer.flush()
                start.record(stream, in_graph)
                launch()
                end.record(stream, in_graph)
                if after is not None:
                    after()

    def _capture(self) -> _Captured:
        batch = [[(Event(), Event()) for _ in self.launches] for _ in range(self.per_batch)]
        mark = Event()

        def enqueue() -> None:
            mark.record(self.timer.stream, in_graph=True)
            self._rounds(batch, in_graph=True)

        return _Captured(Graph(self.timer.stream, enqueue, "timed repetitions"), mark, batch)

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
        batch = [[(Event(), Event()) for _ in self.launches] for _ in range(count)]
        self._rounds(batch)
        self.in_flight.append(batch)
        self.enqueued += count

    def tick(self) -> None:
        """Collect finished batches; decide whether to stop; keep two batches queued."""
        while self.in_flight and self.in_flight[0][-1][-1][1].done():
            batch = self.in_flight.pop(0)
            self.times += [[end.elapsed_ms(start) for start, end in round_events]
                           for round_events in batch]
            if self.sets:
                done = next(c for c in self.sets if c.batch is batch)
                if self._last is not None:
                    self.idle_ms.append(done.mark.elapsed_ms(self._last.batch[-1][-1][1]))
                self._last = done
            if not self.stop:
                self.stop = self._verdict()
        while not self.stop and len(self.in_flight) < 2 and self.enqueued < self.cap:
            self.enqueue()

    def close(self) -> None:
        for captured in self.sets:
            captured.graph.close()

    def _verdict(self) -> str:
        n = len(self.times)
        opts = self.timer.options
        if n >= self.cap:
            return "max reps" if self.cap == opts.max_reps else "budget"
        if n < self.floor or opts.max_rel_se_pct <= 0:
            return ""
        worst = self.rounds.worst_rel_se_pct(self.times)
        return "converged" if worst <= opts.max_rel_se_pct else ""

    def finished(self) -> bool:
        return not self.in_flight and (bool(self.stop) or self.enqueued >= self.cap)


@dataclass
class _Captured:
    """One batch of repetitions captured in a graph, with its events."""

    graph: Graph
    mark: Event
    """Recorded first in the batch: when the GPU started it."""
    batch: list


class _Isolated:
    """Isolated repetitions, a round per :meth:`step`: each launch after a synchronise and the
    gap, behind queued work, between its own events. The clock sampler calls :meth:`step`
    between samples, so each sample is taken while a launch runs.

    The queued work must outlast the host's enqueueing of the launch (a cuBLAS call costs the
    host ~0.2 ms): it is sized at ``ISOLATED_AHEAD_MS`` plus three times the host's time per
    launch, and a repetition in which the GPU still waited on the host is done again with
    twice as much (at most three attempts per repetition over the timing; past that,
    repetitions are kept as they come, and ``queue_ahead_ms`` < 0 says so)."""

    def __init__(self, timer: Timer, launches, before, measured: list[tuple[float, float]],
                 cap: int, floor: int, rounds: _Rounds, primers=None, after=None):
        self.timer, self.launches, self.cap, self.floor = timer, launches, cap, floor
        self.after = list(after or [None] * len(launches))
        self.primers = list(primers or [None] * len(launches))
        self.rounds = rounds
        self.before = before
        self.gpu_ms = [max(gpu_ms, 1e-4) for gpu_ms, _ in measured]
        self.ahead_ms = [ISOLATED_AHEAD_MS + 3 * host_ms for _, host_ms in measured]
        self.gap_s = timer.options.isolated_gap_ms / 1e3
        self.times: list[list[float]] = []
        self.pending: list[tuple[Event, Event, Event, float]] = []
        self.least_ahead_ms = math.inf
        self.attempts, self.max_attempts = 0, 3 * cap
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
        self.stop = self._verdict()

    def _verdict(self) -> str:
        n, opts = len(self.times), self.timer.options
        if n >= self.cap or (n and self.attempts >= self.max_attempts):
            return "max reps" if self.cap in (opts.max_reps, ISOLATED_MAX_REPS) else "budget"
        if n < self.floor or opts.max_rel_se_pct <= 0:
            return ""
        worst = self.rounds.worst_rel_se_pct(self.times)
        return "converged" if worst <= opts.max_rel_se_pct else ""

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
