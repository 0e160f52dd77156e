"""What a run measures and how (:class:`RunOptions`), and the one reading of a problem size
(:func:`parse_size`), for ``harness run``, ``compare``, ``check`` and ``tune``."""

from __future__ import annotations

from dataclasses import dataclass, replace

from harness import kinds
from harness.bench.seeds import new_seed
from harness.gpu.timing import TimingOptions
from harness.knobs import CARVEOUT, TIMEOUT_S, check_knobs, knob

Size = tuple[int, int, int]


@dataclass(frozen=True)
class RunOptions:
    """How ``harness run``, ``compare`` and ``check`` measure (and ``tune`` its points): they
    check themselves when made, with the command line's messages."""

    sizes: tuple[Size, ...]
    timing: TimingOptions = TimingOptions()
    """TimingOptions, or a dict of its fields."""
    carveout_pct: int | None = knob(None, CARVEOUT)
    """``--carveout``: the preferred shared-memory carve-out in percent, for every kernel;
    None, the spec's (else the driver's default)."""
    timeout_s: float | None = knob(None, TIMEOUT_S)
    """Longest wait for the next event from a worker before the kernel is called hung; None
    lets each stage say how long it may take (measure.py: scaled with the work of the launches
    in flight, about 30 s at the default sizes)."""
    strict_blas: bool = False
    """Reading C when beta = 0 fails the check instead of being a note."""
    seed: int | None = None
    """What every input of the run is drawn from (the checks' and the timed repetitions');
    None draws one, which the report records (``--seed`` replays it)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "timing", TimingOptions.of(self.timing))
        check_knobs(self)

    def seeded(self) -> RunOptions:
        """These options with a seed: their own, or one drawn now."""
        return self if self.seed is not None else replace(self, seed=new_seed())


def parse_size(text: str) -> Size:
    """``N`` (square) or ``M,N,K``: the default kind's reading (its kind reads it, once)."""
    kind = kinds.get(kinds.DEFAULT)
    return kind.slots(None, kind.read_size(text))
