"""How long a stage of a measurement may go without a word (``say``) before its kernel is
called hung: a floor, plus the stage's launches at a rate slower than any working kernel's,
plus its host work at a slow host's rate."""

from __future__ import annotations

from collections.abc import Callable

from harness.gpu.timing import ISOLATED_MAX_REPS, TimingOptions

Say = Callable[..., None]
"""``say(stage, limit_s=None, show=True)``: a stage begins; ``limit_s`` is the longest it may
go without another word before the kernel is called hung; ``show=False`` keeps it off the
console (a heartbeat)."""

# How long a stage may go quiet: a floor, plus its launches at a rate slower than any working
# kernel's (the naive rung runs at 0.5 TFLOP/s at 4096 on an H100), plus its host work at a
# slow host's float64 rate. A hung kernel at the default sizes is called within about 30 s;
# a slow but working naive kernel at 8192 (2 s a launch) is not.
QUIET_FLOOR_S = 10.0
SLOWEST_GFLOPS = 25.0
HOST_GFLOPS = 5.0


def launches_limit_s(m: int, n: int, k: int, launches: int) -> float:
    return QUIET_FLOOR_S + launches * 2.0 * m * n * k / (SLOWEST_GFLOPS * 1e9)


def reference_limit_s(m: int, n: int, k: int) -> float:  # two GEMMs, on the host at worst
    return QUIET_FLOOR_S + 2 * 2.0 * m * n * k / (HOST_GFLOPS * 1e9)


def timing_limit_s(options: TimingOptions, launch_ms: float, launches: int = 1) -> float:
    """No word for this long while ``launches`` launches of about ``launch_ms`` each are timed
    (and their power measured) is a hang: three times what the stopping rule can take."""
    per_rep_ms = launch_ms + 1.0  # and its L2 flush and C poisoning
    expected_ms = options.warmup_ms + max(options.budget_ms, options.min_reps * per_rep_ms)
    if options.regime == "isolated":
        expected_ms += ISOLATED_MAX_REPS * (options.isolated_gap_ms + per_rep_ms)
    expected_s = launches * (expected_ms / 1e3 + options.power_s)
    return QUIET_FLOOR_S + 3 * expected_s
