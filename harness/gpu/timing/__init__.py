"""Timing with CUDA events, the queue kept full, cold or hot L2, SM clock sampled by NVML.

Method (after Triton's ``do_bench`` and nvbench's noise-based stopping, adapted): warm up for
``warmup_ms`` (long enough for the power limiter to settle); then time repetitions, each launch
between its own event pair, with an L2 flush (a write of twice the L2 size) before each in cold
mode, until the stop rule says so (stop.py: at least ``min_ms`` of GPU time and ``FLOOR_REPS``
repetitions, and the median's relative standard error at most ``max_rel_se_pct`` for every
launch timed; or ``budget_ms`` of GPU time, or ``max_reps`` repetitions). It reports the median
and p20/p80, and why it stopped. While the GPU works through the repetitions the host samples
NVML for the SM clock and what held it (clocks.py); launches timed interleaved share one
window, so they share those. Board power needs a longer window than a timing gives (NVML's
readings move every ~100 ms): with ``power_s`` set, a single launch's timing is followed by a
power pass, the launch back to back for that long with warm L2 and no events, the queue kept a
few tens of ms ahead, whose mean board power and GPU time per launch give the energy per
launch. With cold L2, a launch shorter than ``prime_below_ms`` follows, in every repetition, an
untimed launch of itself (before C is poisoned and L2 flushed): L2 is cold, its code in the
SMs' caches is not, whatever else the round runs.

One module per part: ``options`` (TimingOptions, Timing, PowerPass), ``stop`` (the one stop
rule), ``launches`` (a launch's before, primer and warm-up), ``kernels`` (the timer's own
kernels), ``gate`` (the spin the host opens, ahead of work timed alone), ``warmup`` (the
launches timed alone and the warm-up, before a sustained timing's batches), ``batches``
(those batches, enqueued from the host or captured in CUDA graphs and replayed), ``trace`` (a
timing's steps, for experiments), ``timer`` (Timer: rounds, calibration, power pass), and one
per regime:
``sustained`` (the default: launches back to back, the GPU never idle, batches replayed from
CUDA graphs, so a power-capped card runs them at the clock its cap allows) and ``isolated``
(``isolated_gap_ms`` > 0: every launch after a synchronise and an idle gap, as Nsight Compute
sees it). Every Timing says which regime it was taken in.
"""

from harness.gpu.timing.isolated import ISOLATED_AHEAD_MAX_MS, ISOLATED_AHEAD_MS
from harness.gpu.timing.kernels import CALIBRATION_SLOTS, TimerKernels
from harness.gpu.timing.launches import (
    WARMUP_MAX_ROUNDS,
    Primed,
    launch_cycle,
    primer_of,
    warmup_rounds,
    with_before,
)
from harness.gpu.timing.options import (
    HOT_SUSTAINED_CALIBRATION_MS,
    ISOLATED,
    ISOLATED_GAP_MS,
    ISOLATED_MAX_REPS,
    POWER_PASS_S,
    SUSTAINED,
    PowerPass,
    Timing,
    TimingOptions,
)
from harness.gpu.timing.stop import Rounds, StopRule, median_rel_se_pct, standard_error
from harness.gpu.timing.sustained import BATCH_MS, GRAPH_IDLE_TOLERANCE_MS, REST_ABOVE_MS
from harness.gpu.timing.timer import FLUSH_WORD, POWER_AHEAD, POWER_CHUNK_MS, Timer

__all__ = [
    "BATCH_MS", "CALIBRATION_SLOTS", "FLUSH_WORD", "GRAPH_IDLE_TOLERANCE_MS",
    "HOT_SUSTAINED_CALIBRATION_MS", "ISOLATED", "ISOLATED_AHEAD_MAX_MS", "ISOLATED_AHEAD_MS",
    "ISOLATED_GAP_MS", "ISOLATED_MAX_REPS", "POWER_AHEAD", "POWER_CHUNK_MS", "POWER_PASS_S",
    "REST_ABOVE_MS", "SUSTAINED",
    "WARMUP_MAX_ROUNDS", "PowerPass", "Primed", "Rounds", "StopRule", "Timer", "TimerKernels",
    "Timing", "TimingOptions", "launch_cycle", "median_rel_se_pct", "primer_of", "standard_error",
    "warmup_rounds", "with_before",
]
