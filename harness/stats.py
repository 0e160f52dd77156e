"""Summary statistics of repeated timings."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from harness.errors import HarnessError

ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
"""Bytes of one element of each precision (an FP8 format's, for ``fp8``)."""

def percentile(values: Sequence[float], pct: float) -> float:
    """Linear-interpolated percentile (numpy's default method), ``pct`` in 0..100."""
    ordered = _sorted(values)
    if not 0 <= pct <= 100:
        raise HarnessError(f"percentile must be within 0..100, got {pct}")
    return _sorted_percentile(ordered, pct)


@dataclass(frozen=True)
class Summary:
    """Median and the p20/p80 spread of a sample."""

    median: float
    p20: float
    p80: float
    minimum: float
    maximum: float
    count: int

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        ordered = _sorted(values)
        return cls(*(_sorted_percentile(ordered, p) for p in (50, 20, 80)),
                   float(ordered[0]), float(ordered[-1]), int(ordered.size))

    @classmethod
    def of_ticks(cls, values: Sequence[float]) -> Summary:
        """``of`` for times read off a clock that ticks (``grid_step``): the median and
        p20/p80 of the values on a grid taken as grouped data, each value standing for the
        tick-wide cell around it (``grouped_percentile``); as ``of`` when they lie on no grid.
        CUDA events on the H100 tick every 32 ns: 1% of a 3 us cuBLAS at 512, and the plain
        median of such values moves a tick at a time (notes/timing.md). The stopping rule
        takes it after every batch of a timing, over thousands of values: one sort of them."""
        ordered = _sorted(values)
        distinct, counts = np.unique(ordered, return_counts=True)
        step = _grid_step(distinct, ordered.size)
        if step is None:
            medians = [_sorted_percentile(ordered, p) for p in (50, 20, 80)]
        else:
            medians = [_grouped(distinct, counts, p, step) for p in (50, 20, 80)]
        return cls(*medians, float(ordered[0]), float(ordered[-1]), int(ordered.size))


def tick_percentile(values: Sequence[float], pct: float) -> float:
    """The ``pct`` percentile (0..100) as :meth:`Summary.of_ticks` takes the median: grouped on
    the grid the values lie on, else linear."""
    step = grid_step(values)
    return percentile(values, pct) if step is None else grouped_percentile(values, pct, step)


GRID_TOLERANCE = 0.05
"""How far (in steps) a gap between two values may be from a whole number of steps."""


def grid_step(values: Sequence[float]) -> float | None:
    """The step of the grid ``values`` were read on (a clock's tick), when they lie on one:
    at most half as many distinct values as values, and every gap between two neighbouring
    distinct values a whole number of the smallest gap. None otherwise."""
    return _grid_step(np.unique(np.asarray(values, dtype=np.float64)), len(values))


def grouped_percentile(values: Sequence[float], pct: float, step: float) -> float:
    """The ``pct`` percentile of values read on a grid of ``step``, as grouped data: each value
    stands for the cell from half a step below it to half a step above, its count spread evenly
    over the cell (the textbook median of grouped data, L + (n p - F) / f x step). Between two
    ticks it moves smoothly with the share of values on each, where the plain percentile
    jumps a tick."""
    return _grouped(*np.unique(_sorted(values), return_counts=True), pct, step)


def _sorted(values: Sequence[float]) -> np.ndarray:
    ordered = np.sort(np.asarray(values, dtype=np.float64))
    if not ordered.size:
        raise HarnessError("percentile of no values")
    return ordered


def _sorted_percentile(ordered: np.ndarray, pct: float) -> float:
    pos = (len(ordered) - 1) * pct / 100
    low, high = math.floor(pos), math.ceil(pos)
    return float(ordered[low]) + (float(ordered[high]) - float(ordered[low])) * (pos - low)


def _grid_step(distinct: np.ndarray, count: int) -> float | None:
    if len(distinct) < 2 or len(distinct) > count / 2:
        return None
    gaps = np.diff(distinct)
    step = float(gaps.min())
    if step <= 0:
        return None
    ratio = gaps / step
    return None if np.any(np.abs(ratio - np.round(ratio)) > GRID_TOLERANCE) else step


def _grouped(distinct: np.ndarray, counts: np.ndarray, pct: float, step: float) -> float:
    """The first cell whose running count reaches ``pct`` of all, and the share of it below
    the percentile."""
    cumulative = np.cumsum(counts)
    target = int(cumulative[-1]) * pct / 100
    i = int(np.searchsorted(cumulative, target, side="left"))
    if i >= len(distinct):
        return float(distinct[-1]) + step / 2
    below, count = int(cumulative[i] - counts[i]), int(counts[i])
    return float(distinct[i]) - step / 2 + (target - below) / count * step


def gflops(m: int, n: int, k: int, ms: float) -> float:
    """GFLOP/s of an M x N x K GEMM (2MNK FLOP) that took ``ms`` milliseconds."""
    return 2.0 * m * n * k / (ms * 1e-3) / 1e9


def peak_gflops(flops_per_clock_per_sm: int, sm_count: int, clock_mhz: float) -> float:
    """Dense peak at a clock: FLOP/clock/SM x SMs x clock."""
    return flops_per_clock_per_sm * sm_count * clock_mhz * 1e6 / 1e9
