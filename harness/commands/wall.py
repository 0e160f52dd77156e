"""``harness.time``'s second look: the callable called back to back between two context-wide
synchronisations, its wall time per call set beside the timed median. The timer's events see
only the work on its stream; a callable that puts work on another (a library's pool stream, a
``cuda.core`` stream not made to wait on the timed one) runs it outside them, and with graphs
that work runs once, at capture, and never in the replays. A context-wide synchronisation
waits for every stream: a wall time per call well above both the median and the host's own
time per call is work the median did not see (notes/timing.md, "Nothing off the clock")."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from harness.errors import HarnessError

WALL_MS = 30.0
"""GPU time the wall pass aims at (its calls: this over the larger of the median and the
host's time per call, from 3 to WALL_MOST_CALLS): about 30 ms more a ``harness.time``."""
WALL_MOST_CALLS = 2000
WALL_SLACK_PCT = 25.0
"""The wall time per call may exceed the larger of the median (its launch overhead added back)
and the host's time per call by this much: the wall pass runs warm and back to back, so that
it is faster than the median as a rule; a host that stalls between calls is slower."""
WALL_SLACK_MS = 0.02
UNSEEN_WORK = "work the events did not see"


@dataclass(frozen=True)
class Wall:
    """The wall pass: calls made, wall ms per call between the synchronisations, host ms per
    call to enqueue them."""

    calls: int
    wall_ms: float
    host_ms: float


def calls_for(median_ms: float, host_ms: float) -> int:
    """How many calls the wall pass makes."""
    per_call = max(median_ms, host_ms, 1e-3)
    return int(min(WALL_MOST_CALLS, max(3, math.ceil(WALL_MS / per_call))))


def wall_pass(launch: Callable[[], object], synchronize: Callable[[], None], calls: int) -> Wall:
    """``launch`` called ``calls`` times between two context-wide synchronisations."""
    synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        launch()
    host_s = time.perf_counter() - t0
    synchronize()
    wall_s = time.perf_counter() - t0
    return Wall(calls, wall_s * 1e3 / calls, host_s * 1e3 / calls)


def unseen(wall: Wall, median_ms: float, overhead_ms: float) -> str:
    """Why the wall time per call says the median missed work ("" when it does not)."""
    explained = max(median_ms + overhead_ms, wall.host_ms)
    if wall.wall_ms <= explained * (1 + WALL_SLACK_PCT / 100) + WALL_SLACK_MS:
        return ""
    return (f"{UNSEEN_WORK}: {wall.calls} calls back to back took {wall.wall_ms * 1e3:.1f} us "
            f"each between context-wide synchronisations, where the timed median is "
            f"{median_ms * 1e3:.1f} us (launch overhead {overhead_ms * 1e3:.1f} us) and the host "
            f"took {wall.host_ms * 1e3:.1f} us a call: the callable puts work outside the "
            "timer's stream (another stream, or the legacy default stream beside a user "
            "stream); pass stream= the stream it uses, or make its other streams wait on it")


def refused_in_graph(found: str) -> HarnessError:
    """The refusal of a graph-mode timing whose callable worked off the timed stream: that
    work ran once, at capture, and never in the replays."""
    return HarnessError(
        f"harness.time: {found}. With graph=True the repetitions are replays of a capture of "
        "the timed stream: work on a stream not forked from it ran once, at capture, and "
        "never in the replays, so the median is not the callable's time. Pass stream= the "
        "stream the work goes to, or fork the side stream from the timed one and join it back "
        "(an event each way) so that the capture holds its work")
