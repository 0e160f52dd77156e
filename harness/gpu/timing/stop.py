"""When timed repetitions stop, one rule for every regime: what a round holds
(:class:`Rounds`), the median's standard error, and the verdict (:class:`StopRule`).

The rule (after nvbench's noise-based stopping): once at least ``floor`` rounds are in, stop
when the median's relative standard error (1.2533 x sigma / sqrt(n), sigma from the p20-p80
range) is at most ``max_rel_se_pct`` for every launch timed; or at the ``cap`` of rounds,
whatever the error ("budget" or "max reps", by which of the two set the cap)."""

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
