"""Summary statistics of repeated timings (pure Python)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.errors import HarnessError


def percentile(values: Sequence[float], pct: float) -> float:
    """Linear-interpolated percentile (numpy's default method), ``pct`` in 0..100."""
    if not values:
        raise HarnessError("percentile of no values")
    if not 0 <= pct <= 100:
        raise HarnessError(f"percentile must be within 0..100, got {pct}")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * pct / 100
    low, high = math.floor(pos), math.ceil(pos)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


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
        return cls(percentile(values, 50), percentile(values, 20), percentile(values, 80),
                   min(values), max(values), len(values))


def gflops(m: int, n: int, k: int, ms: float) -> float:
    """GFLOP/s of an M x N x K GEMM (2MNK FLOP) that took ``ms`` milliseconds."""
    return 2.0 * m * n * k / (ms * 1e-3) / 1e9


def peak_gflops(flops_per_clock_per_sm: int, sm_count: int, clock_mhz: float) -> float:
    """Dense peak at a clock: FLOP/clock/SM x SMs x clock."""
    return flops_per_clock_per_sm * sm_count * clock_mhz * 1e6 / 1e9
