"""When timed repetitions stop, one rule for every regime: what a round holds
(:class:`Rounds`), the median's standard error, and the verdict (:class:`StopRule`).

The rule (after nvbench's noise-based stopping): once at least ``floor`` rounds are in, stop
when the median's relative standard error (1.2533 x sigma / sqrt(n), sigma from the p20-p80
range) is at most ``max_rel_se_pct`` for every launch timed, except a launch that is another's
baseline: that pair's ratio (the kernel's % of cuBLAS) is held to sqrt(2) x ``max_rel_se_pct``,
what two medians within the bound each give it at worst; or at the ``cap`` of rounds, whatever
the error ("budget" or "max reps", by which of the two set the cap)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.stats import Summary

CONVERGED, BUDGET, MAX_REPS = "converged", "budget", "max reps"


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


@dataclass(frozen=True)
class Rounds:
    """What a round holds: ``launches`` timed launches, then the calibration launch when
    ``calibrated`` (a spin of ``spin_ms``, or the empty kernel when 0); when ``padded``, a spin
    of the same length before it, timed but not used.

    Back to back with warm L2 the GPU prepares each launch under the one before, so what a
    launch's events read may depend on its predecessor: the round's first launch follows the
    calibration spin, and the pad makes the calibration spin follow a spin too, not the round's
    last launch; no H100 run has yet shown it needed (notes/timing.md, "Why the timing options
    are what they are")."""

    launches: int
    calibrated: bool
    spin_ms: float
    padded: bool = False
    pairs: tuple[tuple[int, int], ...] = ()
    """(launch, its baseline) by index: the baseline is held through the pair's ratio, not
    alone (module docstring). A timing of a kernel and its cuBLAS: ((0, 1),)."""

    def __post_init__(self):
        for pair in self.pairs:
            if len(pair) != 2 or pair[0] == pair[1] or not all(
                    0 <= i < self.launches for i in pair):
                raise ValueError(f"Rounds.pairs: {pair} is not two launches of the "
                                 f"{self.launches} timed")

    def rel_se_pcts(self, per_round: list[list[float]]) -> list[float]:
        """Each timed launch's median's relative standard error (percent), less the
        calibration's median and with its error added where the rounds are calibrated (the
        overhead's uncertainty is the difference's, measured against the difference; a launch
        of no work is measured against its own median)."""
        columns = [Summary.of_ticks([r[i] for r in per_round])
                   for i in range(len(per_round[0]))]
        if not self.calibrated:
            return [median_rel_se_pct(c) for c in columns[:self.launches]]
        calibration = columns[-1]
        if calibration.count < 2:
            return [math.inf] * self.launches
        out = []
        for c in columns[:self.launches]:
            net = c.median - calibration.median + self.spin_ms
            se = math.hypot(standard_error(c), standard_error(calibration))
            out.append(100.0 * se / (net if net > 0 else c.median))
        return out

    def worst_rel_se_pct(self, per_round: list[list[float]]) -> float:
        """The stopping rule's measure, in units of its bound: the largest of each launch's
        relative standard error (:meth:`rel_se_pcts`), a baseline's aside, and each pair's
        ratio's (the two errors added in quadrature) over sqrt(2)."""
        errors = self.rel_se_pcts(per_round)
        baselines = {b for _, b in self.pairs}
        worst = max((e for i, e in enumerate(errors) if i not in baselines), default=0.0)
        for a, b in self.pairs:
            worst = max(worst, math.hypot(errors[a], errors[b]) / math.sqrt(2.0))
        return worst


@dataclass(frozen=True)
class StopRule:
    """The verdict on the rounds timed so far: "" (go on), or why they stop."""

    rounds: Rounds
    cap: int
    """The most rounds: from the budget, or the repetitions' own limit."""
    floor: int
    """The fewest rounds before the error is tested (``min_ms``, ``min_reps``)."""
    max_rel_se_pct: float
    """The error to reach (percent); 0 runs to the cap."""
    at_cap: str
    """Why a timing that reached the cap stopped: ``BUDGET`` or ``MAX_REPS``."""

    @classmethod
    def of(cls, rounds: Rounds, cap: int, floor: int, max_rel_se_pct: float,
           reps_caps: tuple[int, ...]) -> StopRule:
        """The rule with ``cap``, named "max reps" at the cap when ``cap`` is one of
        ``reps_caps`` (the repetitions' own limits), else "budget"."""
        return cls(rounds, cap, floor, max_rel_se_pct, MAX_REPS if cap in reps_caps else BUDGET)

    def verdict(self, per_round: list[list[float]], exhausted: bool = False) -> str:
        """``exhausted``: no more rounds can be had (isolated: its attempts are spent)."""
        n = len(per_round)
        if n >= self.cap or (n and exhausted):
            return self.at_cap
        if n < self.floor or self.max_rel_se_pct <= 0:
            return ""
        worst = self.rounds.worst_rel_se_pct(per_round)
        return CONVERGED if worst <= self.max_rel_se_pct else ""
