"""The timer: one stream, its L2-flush buffer and its own kernels; times launches in rounds,
each with its own events, in the regime its options name (sustained.py, isolated.py), stops
them by one rule (stop.py), subtracts the launch overhead calibrated in the same rounds, and
runs the power pass."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from harness.errors import HarnessError
from harness.gpu.clocks import ClockSampler
from harness.gpu.driver import Buffer, Event, EventPool, Stream
from harness.gpu.timing.gate import Gate
from harness.gpu.timing.isolated import time_isolated
from harness.gpu.timing.kernels import TimerKernels
from harness.gpu.timing.launches import launch_cycle, primer_of
from harness.gpu.timing.options import SUSTAINED, PowerPass, Timing, TimingOptions
from harness.gpu.timing.stop import Rounds, standard_error
from harness.gpu.timing.sustained import time_sustained
from harness.stats import Summary

FLUSH_WORD = 0x3F800000
POWER_CHUNK_MS, POWER_AHEAD = 20.0, 3  # power pass: GPU ms per chunk of launches, chunks queued


HOST_LEAD_MS = 0.5
"""``Timer.host_free_ms``: the spin ahead of work timed with the host out of the way, long
enough for the host to enqueue a launch, its preparation and its events (ten driver calls or
so) while the GPU is busy."""
LEAD_SHARE = 0.9
"""The most of its lead the host may take to enqueue the work and its events (the GPU then
still has the work's preparation and the work itself to run before it could wait); past it, a
longer lead."""
LEAD_MOST_MS = 32.0
GATE_MOST_MS = 50.0
"""The longest a gate holds the stream (gate.py); a host that took longer to enqueue the work
behind it times the work again behind leads, and the timer's gate is off from then on."""


class Timer:
    """Times launches on one stream; owns the L2-flush buffer."""

    def __init__(self, stream: Stream, l2_bytes: int, clocks: ClockSampler,
                 options: TimingOptions | None = None):
        self.stream, self.clocks = stream, clocks
        self.options = options if options is not None else TimingOptions()
        self.flush_buffer = Buffer(max(2 * l2_bytes, 1 << 20))
        self._flush_ms: float | None = None
        self._kernels: TimerKernels | None = None
        self._gate: Gate | None = None
        self._gate_off = False
        self.gate_gave_way_ms: float | None = None
        """The host's enqueueing time (ms) that made the gate give way, once it has."""
        self.events = EventPool()
        """The timed batches' events, used again from one timing to the next (batches.py)."""

    @property
    def kernels(self) -> TimerKernels:
        """The empty and spin kernels, compiled the first time they are needed."""
        if self._kernels is None:
            self._kernels = TimerKernels(self.stream)
        return self._kernels

    @property
    def gate(self) -> Gate | None:
        """The stream's gate (gate.py), made the first time it is needed; None where the
        device cannot have one, or where one gave way before the host opened it."""
        if self._gate is None and not self._gate_off:
            try:
                self._gate = Gate(self.kernels)
            except HarnessError:
                self._gate_off = True
        return None if self._gate_off else self._gate

    @property
    def gate_off(self) -> bool:
        """Whether work timed with the host out of the way runs behind leads (spins of fixed
        length) for the rest of this timer's life: the gate could not be made, or it gave way
        before the host had enqueued the work (the timing trace records it)."""
        return self._gate_off

    def _gave_way(self, host_ms: float) -> None:
        """The gate gave way while the host took ``host_ms`` to enqueue: off for good, and
        the time kept for the timing trace."""
        self._gate_off = True
        self.gate_gave_way_ms = host_ms

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

    def cost(self, work: Callable[[], None], count: int) -> tuple[float, float]:
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
        """GPU ms of one L2 flush, measured once (``host_free_ms``). Enqueued from the host
        beside the battery's comparisons, a session's first timing estimated a 0.15 ms round
        at 1.89 ms, three flushes of about 0.58 ms each by my reading, and every timing of the
        session counted them, its batches sized and its budget spent by them (issue 37,
        reports/h100/fp8-sampled-ec74544.txt.gz)."""
        if self._flush_ms is None:
            self.cost(self.flush, 3)
            self._flush_ms = self.host_free_ms(self.flush, count=10)
        return self._flush_ms

    def host_free_ms(self, work: Callable[[], None], count: int = 1,
                     prepare: Callable[[], None] | None = None,
                     beside: Callable[[], None] | None = None) -> float:
        """GPU ms per call of ``work``, called ``count`` times between two events after
        ``prepare`` (outside them), the host out of the way: behind the stream's gate
        (gate.py), opened once the host has enqueued it all, so that the events bracket the
        work, not the host's enqueueing of it. Without a gate, behind a spin of HOST_LEAD_MS;
        where the host took more than LEAD_SHARE of the spin to enqueue it all (its other
        threads holding the interpreter), again behind a spin four times as long, up to
        LEAD_MOST_MS. ``beside``: host work done once while the GPU runs the work (it must not
        wait for the stream)."""
        gate = self.gate
        if gate is not None:
            host_t0 = time.perf_counter()
            token = gate.close(GATE_MOST_MS)
            try:
                reading, host_ms = self._enqueued(work, count, prepare, host_t0)
            finally:
                gate.open(token)
            if beside is not None:
                beside()
                beside = None
            self.stream.synchronize("timing behind the gate")
            if host_ms <= LEAD_SHARE * GATE_MOST_MS:
                return reading()
            self._gave_way(host_ms)  # before the host was done: leads from now on
        lead_ms = HOST_LEAD_MS
        while True:
            host_t0 = time.perf_counter()
            self.kernels.lead(lead_ms)
            reading, host_ms = self._enqueued(work, count, prepare, host_t0)
            if beside is not None:
                beside()
                beside = None
            self.stream.synchronize("timing behind a lead")
            if host_ms <= LEAD_SHARE * lead_ms or lead_ms >= LEAD_MOST_MS:
                return reading()
            lead_ms = min(LEAD_MOST_MS, 4 * lead_ms)

    def host_free_each(self, steps: Sequence[tuple[Callable[[], None] | None,
                                                   Callable[[], None] | None]]
                       ) -> list[float | None]:
        """:meth:`host_free_ms` of several works at once, behind one gate and one
        synchronise: each step's ``prepare``, then its ``work`` between two events (None: its
        ``prepare`` alone, and no reading). A timing's launches timed alone took three gates
        and three synchronises a pass, some 1.5 ms each (issue 37). Without a gate, or where
        it gave way, each work behind its own lead."""
        gate = self.gate
        if gate is not None:
            host_t0 = time.perf_counter()
            token = gate.close(GATE_MOST_MS)
            pairs: list[tuple[Event, Event] | None] = []
            try:
                for work, prepare in steps:
                    if prepare is not None:
                        prepare()
                    if work is None:
                        pairs.append(None)
                        continue
                    start, end = Event(), Event()
                    start.record(self.stream)
                    work()
                    end.record(self.stream)
                    pairs.append((start, end))
                host_ms = (time.perf_counter() - host_t0) * 1e3
            finally:
                gate.open(token)
            self.stream.synchronize("timing behind the gate")
            if host_ms <= LEAD_SHARE * GATE_MOST_MS:
                return [None if p is None else p[1].elapsed_ms(p[0]) for p in pairs]
            self._gave_way(host_ms)  # the works ran; they run again, each behind its lead
        out: list[float | None] = []
        for work, prepare in steps:
            if work is None:
                if prepare is not None:
                    prepare()
                out.append(None)
            else:
                out.append(self.host_free_ms(work, prepare=prepare))
        return out

    def _enqueued(self, work: Callable[[], None], count: int,
                  prepare: Callable[[], None] | None, host_t0: float
                  ) -> tuple[Callable[[], float], float]:
        """``prepare``, then ``count`` calls of ``work`` between two events, enqueued: the GPU
        ms per call (to be read after a synchronise) and the host ms since ``host_t0`` (the
        enqueueing of what holds the GPU ahead of it, and its own)."""
        start, end = Event(), Event()
        if prepare is not None:
            prepare()
        start.record(self.stream)
        for _ in range(count):
            work()
        end.record(self.stream)
        host_ms = (time.perf_counter() - host_t0) * 1e3
        return (lambda: end.elapsed_ms(start) / count), host_ms

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
        estimate_ms = max(self.cost(launch, 5)[0], 1e-4)
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
                         after: Sequence[Callable[[], None] | None] | None = None,
                         pairs: Sequence[tuple[int, int]] = ()
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
        timed output: capture.py). ``pairs``: (launch, its baseline) by index, each baseline
        held by the stopping rule through the pair's ratio (stop.py). Returns a Timing per
        launch and the per-round times (ms) that go with them."""
        opts = self.options
        before = list(before or [None] * len(launches))
        after = list(after or [None] * len(launches))
        rounds = Rounds(len(launches), opts.subtract_launch_overhead, opts.calibration_ms,
                        padded=opts.subtract_launch_overhead and opts.calibration_ms > 0
                        and opts.regime == SUSTAINED and not opts.cold_l2,
                        pairs=tuple(tuple(p) for p in pairs))
        primers = [primer_of(launch, b) for launch, b in zip(launches, before, strict=True)]
        cycle = launch_cycle(launches)  # the timer's own launches below are alike every round
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
        if opts.regime == SUSTAINED:
            return time_sustained(self, launches, before, rounds, primers, after, budget_scale,
                                  cycle)
        return time_isolated(self, launches, before, rounds, primers, after)

    def primers_below(self, primers: list, durations_ms: Sequence[float]) -> list:
        """The primers of launches shorter than ``prime_below_ms``, with cold L2 (None for
        the others): ``TimingOptions.prime_below_ms``."""
        below = self.options.prime_below_ms if self.options.cold_l2 else 0.0
        return [p if p is not None and ms < below else None
                for p, ms in zip(primers, durations_ms, strict=True)]

    def timings(self, rounds: Rounds, per_round: list[list[float]], clocks, ahead_ms: float,
                stop: str, **regime) -> tuple[list[Timing], list[list[float]]]:
        """A Timing per launch from its repetitions, less the overhead its rounds
        calibrated; and the per-round times so corrected, without the calibration's."""
        opts = self.options
        for i in range(len(per_round[0]) if per_round else 0):
            if Summary.of_ticks([r[i] for r in per_round]).median <= 0:
                raise HarnessError("timing: the median repetition took no time; the launch "
                                   "enqueued nothing on the timer's stream")
        overhead, overhead_se = 0.0, 0.0
        # the timer's own device state, after the stream's work: a change names every launch
        # of the timing (which of them wrote it cannot be told)
        state = tuple(self._kernels.state_findings()) if self._kernels is not None else ()
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
                                  launch_overhead_ms=overhead, findings=state, **regime))
        return timings, corrected
