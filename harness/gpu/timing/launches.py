"""What the timer does with a launch besides timing it: what runs before it, what primes it,
how many warm-up rounds it gets."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

WARMUP_MAX_ROUNDS = 20000


def warmup_rounds(warmup_ms: float, round_ms: float) -> int:
    """Rounds of warm-up for ``warmup_ms`` of GPU time, at least one; at most
    WARMUP_MAX_ROUNDS, so that a kernel of a few us does not spend seconds of host time
    enqueueing (its rounds are launch-bound; the power it draws hardly moves the clock)."""
    return int(min(WARMUP_MAX_ROUNDS, max(1, math.ceil(warmup_ms / max(round_ms, 1e-4)))))


def launch_cycle(launches: Sequence[Callable[[], None]]) -> int:
    """The rounds after which every one of ``launches`` repeats itself (their cycles' least
    common multiple); 0 where one's is not known."""
    cycles = [getattr(launch, "cycle", 0) for launch in launches]
    return math.lcm(*cycles) if cycles and all(cycles) else 0


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
    cycle: int = 0
    """The rounds after which its repetitions repeat themselves, call for call (the copies of
    its operands it takes in turn; 1 on one copy); 0: not known. A timed batch of whole
    cycles may be captured once and copied (batches.Batches)."""

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
