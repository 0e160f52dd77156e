"""Before a sustained timing's batches (sustained.py): its launches timed alone, the host out
of the way (their primers and rests follow from those times), and the warm-up: rounds back to
back, replayed from a graph of a few of them, until two stretches in a row agree."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from harness.errors import HarnessError
from harness.gpu.graph import Graph
from harness.gpu.timing.launches import warmup_rounds
from harness.gpu.timing.options import WARMUP_STRETCH_MS

if TYPE_CHECKING:
    from harness.gpu.timing.handle import TimerHandle as Timer

FIRST_KEPT_MS = 20.0
"""A timing's first launch of this long or longer is timed, not run untimed before it is
timed again: 01_naive at 4096 ran its 0.28 s launch twice before its warm-up (issue 37)."""


def alone_ms(timer: Timer, launches: Sequence[Callable[[], None]], before: Sequence,
             first: bool = False, hint: Sequence[float] | None = None) -> list[float]:
    """GPU ms of one call of each launch (after its ``before``, and an L2 flush with cold L2),
    the host out of the way (``Timer.host_free_each``: a pass of them behind the stream's gate,
    so that their events bracket the launches, not the host's enqueueing of them); twice where
    one is under a millisecond, the least kept, every launch called as often as the others
    (launches that take copies in turn stay in step: one of a millisecond or more gets only its
    ``before`` the second time).
    Timed from the host alone, a launch of 8 us read some 0.2 ms (the wait for the host's next
    driver calls), and rested that long in every round: 0.75 ms of GPU time a round where its
    parts take 0.16 ms (issue 37, experiments/round_cost.py).

    ``first``: the launches' first calls, each timed as above before the two passes; a reading
    of FIRST_KEPT_MS or more is kept (what a first launch costs more, its code loaded and its
    buffers first touched, is microseconds), the others are the untimed first launches.

    ``hint``: each launch's time from an earlier pass (the first launches, at an idle clock
    and so no faster than now). A reading of a millisecond or more is timed again, not only
    prepared, where it is over ``SUSPECT_OVER`` times its hint: a launch of 20 us read 4.3 ms
    alone on the H100 while seven other processes time-sliced the GPU (67f770d's suite), and
    the rest that follows its time alone was 200x too long (notes/timing.md)."""
    best = [math.inf] * len(launches)
    passes = [True, False, False] if first else [False, False]
    for p, untimed in enumerate(passes):
        if p == len(passes) - 1 and min(best) >= 1.0 \
                and not any(_suspect(b, hint, i) for i, b in enumerate(best)):
            break  # a second timed pass only where a launch is under a millisecond
        steps = [(None, b) if not untimed and 1.0 <= best[i] < math.inf  # its copy's turn
                 and not _suspect(best[i], hint, i)
                 else (launch, partial(_prepare, timer, b))
                 for i, (launch, b) in enumerate(zip(launches, before, strict=True))]
        for i, reading in enumerate(timer.host_free_each(steps)):
            if reading is not None and (not untimed or reading >= FIRST_KEPT_MS):
                best[i] = min(best[i], reading)
        if untimed and max(best) < math.inf:  # every one kept (each FIRST_KEPT_MS or more)
            return best
    return best


SUSPECT_OVER = 2.0
"""A launch read alone at more than this many times its earlier time (``alone_ms``'s hint) is
timed again: a warmed launch is no slower than its first, which followed the host's checks at
an idle clock (up to 5x slower)."""
SUSPECT_SLACK_MS = 0.05


def _suspect(reading: float, hint: Sequence[float] | None, i: int) -> bool:
    """Whether ``reading`` of launch ``i`` is past what its hint allows (none: not)."""
    return hint is not None and reading > SUSPECT_OVER * hint[i] + SUSPECT_SLACK_MS


def _prepare(timer: Timer, before: Callable[[], None] | None) -> None:
    """What goes ahead of a launch timed alone, outside its events: its ``before``, and an L2
    flush with cold L2."""
    if before is not None:
        before()
    if timer.options.cold_l2:
        timer.flush()


def warm_up(timer: Timer, round_: Callable[[], None], estimate_ms: float,
            ran_ms: float = 0.0, last_ms: float = math.nan,
            beside: Callable[[], None] | None = None,
            stretches: list[float] | None = None,
            give_up: Callable[[float], bool] | None = None) -> float:
    """Rounds back to back until the card is steady (``TimingOptions.warmup_steady_pct``:
    two stretches in a row of the same time per round, a stretch ``WARMUP_STRETCH_MS`` of
    GPU time or one round where a round is longer; at most ``warmup_ms``), or for the whole
    ``warmup_ms`` (``warmup_steady_pct`` 0); the GPU time spent. ``ran_ms``: work that ran
    already and counts toward ``warmup_ms``; ``last_ms``: the time per round it measured (a
    long round's first launches: 01_naive at 4096 ran 0.55 s a round, and its warm-up one
    more round of it, where the first launches had run two). ``beside``: host work done while
    the GPU runs the first stretch, then twice as long (the batches' capture: time_sustained),
    where the stretch is a graph's replays. ``stretches``: each stretch's time per round is
    appended to it (the timing trace's, for experiments). ``give_up``: true of a stretch's
    time per round ends the warm-up there (the caller starts over: time_sustained's
    FIRST_OVERSTATED)."""
    opts = timer.options
    if opts.warmup_steady_pct <= 0 or opts.warmup_ms < 2 * WARMUP_STRETCH_MS:
        count = warmup_rounds(opts.warmup_ms - ran_ms, estimate_ms) if ran_ms < opts.warmup_ms \
            else 0
        for _ in range(count):
            round_()
        return ran_ms + count * estimate_ms
    per_stretch = warmup_rounds(WARMUP_STRETCH_MS, estimate_ms)
    captured = min(per_stretch, WARMUP_GRAPH_ROUNDS)
    stretch = _stretch_graph(timer, round_, captured)
    replays = 1
    if stretch is not None:  # the stretch in replays of a graph of a few rounds
        replays = -(-per_stretch // captured)
        per_stretch = replays * captured

    def replayed(times: int) -> None:
        for _ in range(times):
            stretch.launch(timer.stream)

    spent, last = ran_ms, last_ms
    try:
        while spent < opts.warmup_ms:
            if stretch is None:
                per_round = timer.cost(round_, per_stretch)[0]
                rounds = per_stretch
            else:  # the replays enqueued behind the gate: the stretch's own GPU time
                times = 2 * replays if beside is not None else replays
                per_round = timer.host_free_ms(partial(replayed, times),
                                               beside=beside) / (times * captured)
                beside, rounds = None, times * captured
            spent += per_round * rounds
            if stretches is not None:
                stretches.append(per_round)
            if give_up is not None and give_up(per_round):
                break
            if abs(per_round - last) <= opts.warmup_steady_pct / 100.0 * last:
                break
            last = per_round
    finally:
        if stretch is not None:
            stretch.close()
    return spent


WARMUP_GRAPH_ROUNDS = 16
"""Warm-up rounds captured in one graph, replayed as often as a stretch needs: a capture costs
the host some 0.3-0.5 ms a round, and a stretch of short rounds holds about 80."""


def _stretch_graph(timer: Timer, round_: Callable[[], None], rounds: int) -> Graph | None:
    """``rounds`` warm-up rounds (at most WARMUP_GRAPH_ROUNDS) captured once, to be replayed
    stretch after stretch (None: enqueue each stretch from the host, where graphs are off or
    a launch refuses capture). Enqueued from the host, a stretch of short rounds waits on the
    host, about 20 driver calls a round: the GPU idles between rounds, and what a stretch
    measures is the host's pace, which two stretches in a row rarely agree on (issue 37: the
    warm-up was 9 s of a default run's wall; rounds of 0.6-10 ms, a stretch of 1-16 of them,
    were still enqueued from the host at 6b5f97c, 54 ms of warm-up a timing in the traced
    run at 6990030). Replayed, a stretch is still a few driver calls from the host, each a wait
    for the interpreter while other threads compare on the host: its events are recorded
    behind the gate (Timer.host_free_ms; a lead until b2620d5), else the FP8 rows' stretches,
    beside their host walks, read the host's stalls and ran long (277 and 272 ms at 512 and 1024 in
    reports/h100/timing-trace-warm-aa3caf3.txt.gz, about 35 ms for rows without that host work;
    75 and 88 ms behind the lead, timing-trace-warm-a6d3ae4.txt.gz: 4.6 s of warm-up in all
    against 6.1)."""
    if not timer.options.graph:
        return None

    def stretch() -> None:
        for _ in range(rounds):
            round_()

    try:
        return Graph(timer.stream, stretch, "warm-up")
    except HarnessError:
        return None
