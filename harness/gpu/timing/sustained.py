"""The sustained regime: launches back to back, the GPU never idle, timed in batches of about
``BATCH_MS`` of GPU work with two batches in flight.

A batch (each launch between its own event pair, with an L2 flush before each in cold mode) is
captured once in a CUDA graph and replayed, one driver call per batch, so that no repetition
waits on the host however short the kernel; where a launch refuses capture, or with
``graph=False``, batches are enqueued from the host behind enough L2-flush work that the GPU
is still busy with it when the host has enqueued the first two. With cold L2 every launch of
``REST_ABOVE_MS`` or more follows a rest of ``rest`` times its own time (``TimingOptions.rest``)."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from harness.gpu.driver import Event
from harness.gpu.timing import account
from harness.gpu.timing.batches import Batches
from harness.gpu.timing.launches import with_before
from harness.gpu.timing.options import FLOOR_REPS, WARMUP_STRETCH_MS, Timing
from harness.gpu.timing.stop import Rounds, StopRule
from harness.gpu.timing.trace import Trace
from harness.gpu.timing.warmup import alone_ms, warm_up

if TYPE_CHECKING:
    from harness.gpu.timing.handle import TimerHandle as Timer

BATCH_MS = 10.0
"""GPU time of one batch of timed repetitions: the stopping rule is tested after each. Each
of a timing's three batches is captured once, before the first runs, at a cost to the host of
about a quarter of a millisecond per round: captured while the first two ran, the third left
the GPU idle between batches at 512 (its capture outlasts them; issue 37), and 5 ms batches
were more often cut short by the host's other threads."""
BATCH_ROUNDS = 32
"""A batch of BATCH_MS that would hold more rounds than this holds this many, or those of
BATCH_LEAST_MS where that is more: a capture costs the host about 0.7 ms a round, and at 512
and 1024 a timing's batch of 48 short rounds took 25-90 ms to capture while the GPU waited,
2.7 s of a warm default run (reports/h100/timing-trace-warm-3c94270.txt.gz; issue 37)."""
BATCH_LEAST_MS = 5.0
FIRST_OVERSTATED = 0.75
"""A long round (its first launches' times WARMUP_STRETCH_MS or more) whose first warm-up
stretch runs in less than this share of what they said: a first launch read long for a cost
of its own (cuBLASLt's kernel for a new shape loaded on first use, its reading kept as
FIRST_KEPT_MS or more: 21.8 ms for a 20 us launch in the H100's cold run at 67f770d), and the
rests that follow it were that long; the launches are timed alone again and the timing starts
over from them, once."""
REST_ABOVE_MS = 0.01
"""Launches shorter than this get no rest (``TimingOptions.rest``): they draw little power, and
a spin's own launch costs a few us."""
GRAPH_IDLE_TOLERANCE_MS = 0.02
"""Graphs: an idle time between batches above this is the GPU waiting on the host (one graph
launch after another in a stream starts within a few microseconds)."""


def time_sustained(timer: Timer, launches: Sequence[Callable[[], None]], before: list,
                   rounds: Rounds, primers: list, after: list, budget_scale: float,
                   cycle: int = 0, first: Sequence[float] | None = None
                   ) -> tuple[list[Timing], list[list[float]]]:
    """The sustained regime of :meth:`harness.gpu.timing.Timer.time_interleaved` (its
    arguments, prepared; ``cycle``: the rounds after which the launches repeat themselves,
    timing.launch_cycle, 0 unknown; ``first``: the launches' times alone, taken again where
    their first launches overstated a round, FIRST_OVERSTATED)."""
    opts = timer.options
    trace = Trace()
    # untimed launches (first, estimate, warm-up) get their ``before`` too: a launch whose
    # preparation fills a workspace must never run without it
    prepared = [with_before(b, launch) for launch, b in zip(launches, before, strict=True)]

    def alone() -> list[float]:
        return alone_ms(timer, launches, before, hint=first_ms)

    first_ms = list(first) if first is not None else alone_ms(timer, launches, before,
                                                              first=True)
    trace.mark("first")
    offered = primers

    def regime(durations_ms: Sequence[float]) -> tuple[list, list[float]]:
        """Each launch's primer (if shorter than ``prime_below_ms``) and rest, by its time."""
        return (timer.primers_below(offered, durations_ms),
                [opts.rest * ms if opts.rests and ms >= REST_ABOVE_MS else 0.0
                 for ms in durations_ms])

    primers, rests = regime(first_ms)
    timer.kernels.set_rests(rests)

    def round_() -> None:
        for i, (launch, primer, rest) in enumerate(zip(prepared, primers, rests, strict=True)):
            if rest:
                timer.kernels.rest(i, rest)
            if primer is not None:
                primer()
            launch()

    # a round as its first launches time it (primed launches run twice, rests as spun)
    known_ms = _parts_ms(first_ms, primers, rests)
    # short rounds replayed from graphs: their batches, captured while the warm-up runs (the
    # rests they read are written once the warmed launches have been timed alone)
    early: list[Batches] = []
    if known_ms >= WARMUP_STRETCH_MS:
        # long rounds (01_naive at 4096: 0.55 s): the first launches time them to a fraction
        # of a percent, and eight more rounds to estimate them cost seconds; the enqueueing
        # host is never behind such work
        estimate_ms = known_ms

        def overstated(per_round_ms: float) -> bool:
            return first is None and per_round_ms < FIRST_OVERSTATED * known_ms

        # the first launches ran a round's work already (FIRST_KEPT_MS): it counts
        stretches = trace.stretches if trace.stretches is not None else []
        warmed_ms = warm_up(timer, round_, estimate_ms, ran_ms=known_ms, last_ms=known_ms,
                            stretches=stretches, give_up=overstated)
        if stretches and overstated(stretches[0]):
            return time_sustained(timer, launches, before, rounds, offered, after,
                                  budget_scale, cycle, first=alone())
        gpu_ms, host_per_round_ms = estimate_ms, 0.0
        warmed = first_ms
    else:
        # replayed from graphs, a round takes what its parts take (its rounds enqueued from the
        # host read the host's pace: three more rounds, synchronised, to learn nothing)
        estimate_ms = max(known_ms if opts.graph else timer.cost(round_, 3)[0], 1e-4)
        trace.mark("estimate")
        if opts.graph:
            guess_ms = estimate_ms + (len(launches) * timer.flush_ms() if opts.cold_l2 else 0)
            shape = _shape(primers, rests)
            early_rule = StopRule.of(rounds, opts.max_reps, FLOOR_REPS, opts.max_rel_se_pct,
                                     (opts.max_reps,))

            def capture() -> None:
                early.append(Batches(timer, launches, before, early_rule,
                                     rounds_per_batch(guess_ms, opts.max_reps), True,
                                     primers, rests, after, cycle))
        warmed_ms = warm_up(timer, round_, estimate_ms, beside=capture if opts.graph else None,
                            stretches=trace.stretches)
        trace.mark("warm-up")
        # primers and rests again, from each launch alone at the warmed clock: the first
        # launches follow the host's checks at an idle clock (345 MHz on an H100), up to 5x
        # slower, so that whether a launch was primed, and how long it rested, hung on how
        # slow its first launch was (the cached_replay fixture, 286 us at 1024, computed in
        # every timed repetition only unprimed: notes/verification.md)
        warmed = alone()
        primers, rests = regime(warmed)
        timer.kernels.set_rests(rests)
        # from graphs, what the parts take; five rounds from the host only where the batches
        # are enqueued from it (their pace sets how far ahead of them the flushes start): at
        # 4096 the five rounds were 50-200 ms of a timing's GPU time
        gpu_ms, host_per_round_ms = ((_parts_ms(warmed, primers, rests), 0.0) if opts.graph
                                     else timer.cost(round_, 5))
        trace.mark("regime")
    if opts.cold_l2:
        gpu_ms += len(launches) * timer.flush_ms()
    estimate_ms = max(gpu_ms, 1e-4)
    # the stopping rule's budget and floor count GPU time of the timed work, rests aside
    work_ms = max(estimate_ms - sum(rests), 1e-4)
    budget_ms = opts.budget_ms * max(budget_scale, 1.0)
    cap = int(min(opts.max_reps, max(opts.min_reps, budget_ms / work_ms)))
    floor = int(min(cap, max(FLOOR_REPS, math.ceil(opts.min_ms / work_ms))))
    per_batch = rounds_per_batch(estimate_ms, cap)
    rule = StopRule.of(rounds, cap, floor, opts.max_rel_se_pct, (opts.max_reps,))
    kept = early[0] if early else None
    if kept is not None and kept.sets and _shape(primers, rests) == shape \
            and kept.per_batch <= cap:
        batches = kept.ruled(rule, rests)
    else:  # the warmed launches prime or rest otherwise than the first ones: captured again
        if kept is not None:
            kept.close()
        batches = Batches(timer, launches, before, rule, per_batch, opts.graph, primers, rests,
                          after, cycle)
    trace.mark("capture")
    rest = opts.rest if any(rests) else 0.0
    if batches.sets:
        parts = _parts(timer, before, warmed, primers, rests)
        trace.mark("parts")
        out = _replayed(timer, batches, rounds, estimate_ms * batches.per_batch, rest,
                        warmed_ms)
        trace.mark("batches")
        trace.write(reps=len(batches.times), per_batch=batches.per_batch,
                    replicas=batches.replica_error or True, estimate_ms=estimate_ms,
                    warmed_ms=warmed_ms, warmup_per_round_ms=trace.stretches,
                    first_ms=list(first_ms), batch_gpu_ms=sum(batches.gpu_ms),
                    explained_ms=sum(account.span_explained(t, parts, len(launches))
                                     for t in batches.batch_times),
                    launches=len(launches), stop=batches.stop, gate_off=timer.gate_off,
                    gate_gave_way_ms=timer.gate_gave_way_ms)
        return _booked(out, batches, parts, warmed, rounds.launches, timer.clocks)

    # Work ahead of the first two batches: enough flushes to outlast the host's enqueueing
    # of them (about 4 driver calls per launch), with a 2x margin; later batches are
    # enqueued while earlier ones run. Graphs that were refused: the host's pace measured now.
    if opts.graph and not host_per_round_ms and known_ms < WARMUP_STRETCH_MS:
        host_per_round_ms = timer.cost(round_, 5)[1]
    host_enqueue_ms = 2 * per_batch * (host_per_round_ms + 0.05 * len(launches))
    ahead = max(4, math.ceil(2 * host_enqueue_ms / max(timer.flush_ms(), 1e-3)))
    ahead_start, ahead_end = Event(), Event()
    ahead_start.record(timer.stream)
    for _ in range(ahead):
        timer.flush()
    ahead_end.record(timer.stream)
    host_t0 = time.perf_counter()
    batches.enqueue()
    batches.enqueue()
    host_ms = (time.perf_counter() - host_t0) * 1e3
    clocks = timer.clocks.sample_until(batches.finished, tick=batches.tick)
    timer.stream.synchronize("timed repetitions")
    batches.tick()
    ahead_ms = ahead_end.elapsed_ms(ahead_start) - host_ms
    return timer.timings(rounds, batches.times, clocks, ahead_ms, batches.stop, rest=rest,
                         warmup_ms=warmed_ms)


def _parts(timer: Timer, before: Sequence, alone: Sequence[float], primers: Sequence,
           rests: Sequence[float]) -> account.Parts:
    """What each launch's untimed parts cost: its ``before`` measured now, one pass behind the
    gate (a fresh draw more, outside any timed repetition: about a gate's 1.5 ms of host time
    a timing), its primer at its time alone, its rest as written, the L2 flush as measured."""
    measured = (timer.host_free_each([(b, None) for b in before])
                if any(b is not None for b in before) else [None] * len(before))
    flush_ms = timer.flush_ms() if timer.options.cold_l2 else 0.0
    return account.Parts(tuple(rests), tuple(ms if p is not None else 0.0
                                              for ms, p in zip(alone, primers, strict=True)),
                         tuple(ms or 0.0 for ms in measured), flush_ms)


def _booked(out: tuple[list[Timing], list[list[float]]], batches: Batches,
            parts: account.Parts, alone: Sequence[float], launches: int, clocks
            ) -> tuple[list[Timing], list[list[float]]]:
    """The timings with what their books found (timing.account): each launch's gaps against
    its parts, and its time alone (its rest's source) against its timed median; a finding
    says too when ``clocks`` (NVML) lists other processes on the GPU."""
    timings, per_round = out
    gaps = account.unexplained(batches.gaps, parts, launches)
    medians = [statistics.median(r[i] for r in batches.times) for i in range(launches)]
    alone_found = account.slower_alone(alone[:launches], medians, parts.rests[:launches])
    if any(gaps) or any(alone_found):
        others = clocks.other_contexts()
        gaps = [account.on_a_shared_gpu(f, others) for f in gaps]
        alone_found = [account.on_a_shared_gpu(f, others) for f in alone_found]
    booked = [replace(t, findings=t.findings + tuple(f for f in (gap, slow) if f))
              for t, gap, slow in zip(timings, gaps, alone_found, strict=True)]
    return booked, per_round


def _shape(primers: Sequence, rests: Sequence[float]) -> tuple:
    """What a captured round holds beside its launches: which are primed, which rest."""
    return tuple(p is not None for p in primers), tuple(bool(r) for r in rests)


def rounds_per_batch(estimate_ms: float, cap: int) -> int:
    """Rounds of ``estimate_ms`` in a batch of about BATCH_MS (a round of BATCH_MS or more is
    a batch of its own: the stopping rule is tested after each), held to BATCH_ROUNDS where
    BATCH_LEAST_MS takes no more, and to ``cap``."""
    per_batch = max(1, math.ceil(BATCH_MS / estimate_ms))
    if per_batch > BATCH_ROUNDS:
        per_batch = max(BATCH_ROUNDS, math.ceil(BATCH_LEAST_MS / estimate_ms))
    return int(min(cap, per_batch))


def _parts_ms(durations_ms: Sequence[float], primers: Sequence, rests: Sequence[float]
              ) -> float:
    """GPU ms of a round from its parts: each launch, twice where it is primed, and its
    rest."""
    return sum(ms * (1 if p is None else 2) + rest
               for ms, p, rest in zip(durations_ms, primers, rests, strict=True))


def _replayed(timer: Timer, batches: Batches, rounds: Rounds, batch_ms: float, rest: float,
              warmed_ms: float = math.nan) -> tuple[list[Timing], list[list[float]]]:
    """The batches replayed from their graphs, two in flight (one: ONE_AHEAD_REST_MS, the
    queue-ahead then the rest ahead of the timed launch); queue-ahead from the GPU's idle time
    between batches, measured for every batch."""
    for _ in range(batches.ahead):
        batches.enqueue()
    clocks = timer.clocks.sample_until(batches.finished, tick=batches.tick)
    timer.stream.synchronize("timed repetitions")
    batches.tick()
    idle = max(batches.idle_ms, default=0.0)
    ahead_ms = -idle if idle > GRAPH_IDLE_TOLERANCE_MS else batch_ms
    if batches.ahead == 1:  # the GPU ahead of the timed launch: its rest, whatever the host
        ahead_ms = batches.rests[0]
    batches.close()
    return timer.timings(rounds, batches.times, clocks, ahead_ms, batches.stop, graph=True,
                         rest=rest, warmup_ms=warmed_ms)

