"""How a timing is taken (:class:`TimingOptions`) and what it gives (:class:`Timing`,
:class:`PowerPass`).

TimingOptions check themselves (their knobs: harness/knobs.py), describe themselves for
reports (:meth:`TimingOptions.describe`), and are built from the command line's flags or the
API's keywords by :meth:`TimingOptions.from_flags`, from a dict by :meth:`TimingOptions.of`. A
new knob is a field here (with its flag in :func:`~harness.knobs.knob`) and a flag in the CLI.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from dataclasses import replace as dc_replace
from typing import Any

from harness.errors import HarnessError
from harness.knobs import GAP_MS, POWER_S, check_knobs, knob, knob_of

SUSTAINED, ISOLATED = "sustained", "isolated"
HOT_SUSTAINED_CALIBRATION_MS = 0.01
"""The spin the launch overhead is calibrated on in the hot sustained regime (10 us)."""
ISOLATED_MAX_REPS = 200
"""Isolated repetitions each cost a sleep: their count is capped lower than back to back."""
ISOLATED_GAP_MS = 5.0
"""``--gap-ms``'s default: the idle time before each isolated launch, long enough for the
board's power to fall away, short enough to keep a timing brief."""
WARMUP_STRETCH_MS = 10.0
"""GPU time of one stretch of a sustained warm-up (``TimingOptions.warmup_steady_pct``), or one
round where a round is longer: at half duty (``rest``) the card holds its clock after the
host's checks. Default runs spent 5.2 s of GPU time warming up with 10 ms stretches and 9.3 s
with 25 ms ones (issue 37, notes/verification.md)."""
FLOOR_REPS = 3
"""The fewest repetitions a sustained timing takes before the stopping rule tests its error,
where ``min_ms`` of timed work takes fewer (01_naive at 4096: 0.28 s a launch)."""
POWER_PASS_S = 2.0
"""``--power-s``'s default: NVML's power reading moves every ~100 ms."""


@dataclass(frozen=True)
class TimingOptions:
    """How a kernel is timed."""

    cold_l2: bool = True
    """Flush L2 (write 2x its size) before every repetition; False times with warm L2."""
    warmup_ms: float = knob(300.0, "--warmup-ms", 0, what="milliseconds of warm-up")
    """GPU time spent running the launches back to back before measuring: module load, clocks
    ramping, and the power limiter settling: the GPU idles while the host checks a kernel, and
    the first tens of ms after that run cooler (notes/timing.md, "Why the timing options are
    what they are")."""
    warmup_steady_pct: float = 0.5
    """Sustained: the warm-up ends early, once two stretches of it in a row
    (``WARMUP_STRETCH_MS`` of GPU time each) take the same time per round within this percent;
    ``warmup_ms`` is then its cap. 0 runs the whole ``warmup_ms``. With rests (``rest``) the
    card stays at its clock after the host's checks, and the 300 ms that a full-duty transient
    needed is spent only where the rounds' time still moves (issue 37)."""
    budget_ms: float = knob(300.0, "--budget-ms", 0, False,
                            "the most GPU time per timing, in milliseconds")
    """The most GPU time the timed repetitions may take (the cap of the stopping rule)."""
    min_ms: float = knob(30.0, "--min-ms", 0, what="the least GPU time per timing, in "
                                                  "milliseconds")
    """The least GPU time the timed repetitions take (the floor of the stopping rule, with
    ``FLOOR_REPS``). At full duty it was 100 ms, a window as long as the power limiter's own;
    at half duty (``rest``) the card runs below its cap at the clock it picks, and the error
    test, not the window, decides (notes/timing.md, "Why the timing options are what they
    are")."""
    max_rel_se_pct: float = knob(0.25, "--max-rel-se", 0, what="a percent; 0 spends the whole "
                                                               "budget", dest="max_rel_se")
    """Stop once the median's relative standard error is at most this (percent), and a kernel's
    ratio to its cuBLAS timed beside it at most sqrt(2) times this (cuBLAS's own median is held
    through the ratio: stop.py); 0 runs every timing to ``budget_ms``. A short cuBLAS spreads
    over 15% of its median: half this error moved two runs' % cuBLAS by up to 2.5%
    (notes/timing.md, "Why the timing options are what they are")."""
    min_reps: int = 10
    """The fewest repetitions the budget may cap a timing at (a long launch is timed at least
    this often when its error has not converged; the floor is ``FLOOR_REPS``)."""
    max_reps: int = 2000
    power_s: float = knob(0.0, "--power-s", 0.5, most=60, off=0.0, expect=(
        "seconds from 0.5 to 60 (NVML's power reading moves every ~100 ms, so less says "
        "nothing; 2 is enough)"))
    """After timing one launch, run it back to back this long for the board's mean power
    (``Timer.power``); 0 skips it. Launches timed interleaved get none."""
    graph: bool = True
    """Sustained: capture each batch of repetitions (C poisoned, L2 flush, events, launch)
    once in a CUDA graph and replay it, one driver call per batch, so that no repetition
    waits on the host however short the kernel; False enqueues every launch from the host."""
    subtract_launch_overhead: bool = True
    """Subtract from every repetition what a launch costs besides its work (the events' and the
    launch's own cost, a few us on an H100), calibrated by a one-thread kernel timed as one more
    launch of every round, in the same regime and the same stretch of GPU time: what remains is
    the kernel's duration from its first instruction to its last. Calibrated once per process,
    it differed by 2% of a 3 us cuBLAS between two runs (notes/timing.md, "Why the timing
    options are what they are")."""
    calibration_spin_ms: float | None = None
    """The launch overhead's calibration, timed in every round: 0, the empty kernel; above 0, a
    spin of this length, less the mean span the spins measured of themselves; None (default), a
    10 us spin in the hot sustained regime and the empty kernel in the others: back to back with
    warm L2 the GPU prepares the next launch while a kernel runs, which it cannot under a kernel
    of no work; behind an L2 flush or a synchronise it prepares nothing ahead, and the empty
    kernel is right (notes/timing.md, "Why the timing options are what they are")."""

    rest: float = knob(1.0, "--rest", 0, what="a multiple of each launch's time; 0 times at "
                                              "full duty")
    """Sustained with cold L2: every timed repetition (and warm-up round) of a launch is
    preceded by a rest of this many times the launch's own GPU time, a one-thread spin that
    leaves the SMs idle, so that the card runs at about half duty, under its power cap, at the
    clock it picks when power does not hold it: at full duty (0) a power-capped card's clock
    follows what it ran over the last 0.1-3 s (notes/timing.md, "Why the timing options are what
    they are"). The budget and the floor of the stopping rule count GPU time without the rests.
    Not with warm L2 (a launch there follows its own last one, which a rest would change) nor
    isolated (which idles)."""

    prime_below_ms: float = 1.0
    """With cold L2: every timed repetition of a launch shorter than this (its first launch,
    timed alone) follows an untimed launch of itself, before its ``before`` and the L2 flush
    (``primer_of``; isolated, after the idle gap): the SMs' instruction and constant caches then
    hold its code, as in a loop of it, whatever else the round runs, and the flush still empties
    L2: without it a short launch reads longer the more other launches a round runs between two
    of its own (notes/timing.md, "Why the timing options are what they are"). 0 primes nothing;
    above 1 ms the primer's cost outweighs what it could move. Hot, none: sustained, a launch
    follows the one before it with no flush between, and its overhead partly hides under that
    one; isolated, the work queued ahead of it already begins with a launch of itself."""

    isolated_gap_ms: float = knob(0.0, "--gap-ms", 0, False, most=1000, off=0.0, expect=(
        "an idle gap above 0 and up to 1000 ms before each isolated launch (5 lets the power "
        "fall away)"), dest="gap_ms")
    """``--isolated`` with ``--gap-ms``: 0 times the sustained regime (the queue kept full);
    above 0, each repetition is an isolated launch after the stream is synchronised and the
    host has slept this long (the GPU idle), as under Nsight Compute."""

    def __post_init__(self) -> None:
        check_knobs(self)
        if self.min_ms > self.budget_ms:
            if self.min_ms != _DEFAULT_MIN_MS:
                raise HarnessError(f"--min-ms {self.min_ms:g} is above --budget-ms "
                                   f"{self.budget_ms:g}: the floor must not exceed the cap")
            object.__setattr__(self, "min_ms", self.budget_ms)  # the default follows the cap

    @classmethod
    def of(cls, value: TimingOptions | Mapping[str, Any] | None) -> TimingOptions:
        """``value`` as TimingOptions: itself, the defaults for None, or a dict of fields
        (``{"budget_ms": 100, "cold_l2": False}``)."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise HarnessError(f"timing {value!r}: expected TimingOptions or a dict of its "
                               "fields")
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(value) - set(names))
        if unknown:
            raise HarnessError(f"timing: no option {', '.join(map(repr, unknown))}; "
                               f"TimingOptions has {', '.join(names)}")
        return cls(**value)

    @classmethod
    def named(cls, values: Mapping[str, Any]) -> TimingOptions:
        """The options of a report that names only some of them (an experiment's, a command
        that times no repetitions itself): every switch it leaves out is off (warm L2, no graph,
        nothing subtracted, no rest), every number as given or its default."""
        off = {"cold_l2": False, "graph": False, "subtract_launch_overhead": False, "rest": 0.0,
               "calibration_spin_ms": 0.0}
        names = {f.name for f in fields(cls)}
        return cls(**{**off, **{k: v for k, v in values.items() if k in names}})

    @classmethod
    def from_flags(cls, flags: Mapping[str, Any], **given: Any) -> TimingOptions:
        """The options the command line's flags (or the API's keywords of the same names:
        ``budget_ms``, ``max_rel_se``, ``isolated``, ``gap_ms``, ``power``, ``power_s``, ...)
        ask for; ``given`` fields are set as they are. ``--gap-ms`` and ``--power-s`` are
        checked whether or not ``--isolated`` and ``--power`` use them."""
        GAP_MS.check(flags.get("gap_ms"))
        POWER_S.check(flags.get("power_s"))
        values = {}
        for f in fields(cls):
            dest = f.metadata["knob"].dest or f.name if "knob" in f.metadata else f.name
            if dest in flags and flags[dest] is not None:
                values[f.name] = flags[dest]
        values["isolated_gap_ms"] = 0.0
        if flags.get("isolated"):  # the gap must then be one: 0 is not "off"
            values["isolated_gap_ms"] = flags.get("gap_ms", ISOLATED_GAP_MS)
            dc_replace(knob_of(cls, "isolated_gap_ms"), off=None).check(values["isolated_gap_ms"])
        values["power_s"] = flags.get("power_s", POWER_PASS_S) if flags.get("power") else 0.0
        return cls(**{**values, **given})

    def to_dict(self) -> dict[str, Any]:
        """The fields, as a report's JSON records them."""
        return asdict(self)

    @property
    def calibration_ms(self) -> float:
        """The spin the overhead is calibrated on in this regime (0: the empty kernel)."""
        if self.calibration_spin_ms is not None:
            return self.calibration_spin_ms
        return HOT_SUSTAINED_CALIBRATION_MS if (not self.cold_l2 and self.isolated_gap_ms <= 0
                                                ) else 0.0

    @property
    def regime(self) -> str:
        """``sustained`` or ``isolated``."""
        return ISOLATED if self.isolated_gap_ms > 0 else SUSTAINED

    @property
    def rests(self) -> bool:
        """Whether timed launches rest between repetitions (``rest``)."""
        return self.rest > 0 and self.cold_l2 and self.regime == SUSTAINED

    def describe(self) -> str:
        """How the timings were taken and when they stopped, in words, for reports."""
        return f"{self.method()}; {self.stopping()}"

    def method(self) -> str:
        """How the repetitions are taken, in words."""
        less = ("; C poisoned before every repetition"
                + (f"; every repetition less the launch's own overhead ({self._calibration()})"
                   if self.subtract_launch_overhead else ""))
        if self.isolated_gap_ms > 0:
            return (f"isolated launches: before each repetition the stream is synchronised and "
                    f"the GPU left idle {self.isolated_gap_ms:g} ms, then CUDA events around the "
                    f"launch with a little work queued ahead of it; median and p20/p80 of the "
                    f"repetitions{less}")
        if self.rest > 0 and self.cold_l2:
            less += (f"; each launch of 10 us or more after a rest of {self.rest:g}x its own time "
                     "(a one-thread spin), so that the card runs under its power cap at the clock "
                     "it picks, whatever ran before")
        if self.graph:
            return ("sustained: each batch of repetitions (C poisoned, L2 flushed in cold mode, "
                    "CUDA events around each launch) captured once in a CUDA graph and replayed, "
                    "so that no repetition waits on the host; median and p20/p80 of the "
                    f"repetitions{less}")
        return ("sustained: CUDA events around each launch with the queue kept full behind "
                f"L2-flush work; median and p20/p80 of the repetitions{less}")

    def _calibration(self) -> str:
        same = "timed as one more launch in every round, beside the kernels"
        if self.calibration_spin_ms is None:
            return (f"the median of an empty kernel {same}; with warm L2 and launches back to "
                    "back, of a 10 us spin, less the span it measured of itself with "
                    "%globaltimer")
        spin_us = 1e3 * self.calibration_spin_ms
        if spin_us > 0:
            return (f"the median of a one-thread {spin_us:g} us spin {same}, less the span it "
                    "measured of itself with %globaltimer")
        return f"the median of an empty kernel {same}"

    def stopping(self) -> str:
        """The stopping rule in words."""
        rule = (f"until the median's relative standard error is <= {self.max_rel_se_pct:g}% "
                f"(a kernel's ratio to its cuBLAS <= {self.max_rel_se_pct * 2 ** 0.5:.2g}%; "
                f"at least {self.min_ms:g} ms and {FLOOR_REPS} repetitions)"
                if self.max_rel_se_pct > 0 else "for the whole budget")
        if self.regime == ISOLATED:
            rule = rule.replace(f"{self.min_ms:g} ms and {FLOOR_REPS}", str(self.min_reps))
            return (f"isolated launches, each after a synchronise and {self.isolated_gap_ms:g} "
                    f"ms idle, {rule}, at most "
                    f"{self.budget_ms:g} ms of GPU time or "
                    f"{min(self.max_reps, ISOLATED_MAX_REPS)} repetitions; warm-up "
                    f"{self.warmup_ms:g} ms")
        rest = (f"; each launch after a rest of {self.rest:g}x its own time (one-thread spin: "
                "the card under its power cap)" if self.rests else "")
        warm = (f"warm-up until two {WARMUP_STRETCH_MS:g} ms stretches in a row take the same "
                f"time per round within {self.warmup_steady_pct:g}%, at most "
                f"{self.warmup_ms:g} ms" if self.warmup_steady_pct > 0
                else f"warm-up {self.warmup_ms:g} ms")
        return (f"repetitions in batches {rule}, at most {self.budget_ms:g} ms of GPU time or "
                f"{self.max_reps} repetitions; {warm}{rest}")


_DEFAULT_MIN_MS = next(f.default for f in fields(TimingOptions) if f.name == "min_ms")


@dataclass(frozen=True)
class Timing:
    """Per-repetition times of one kernel at one size, and how they were taken."""

    median_ms: float
    p20_ms: float
    p80_ms: float
    min_ms: float
    max_ms: float
    reps: int
    cold_l2: bool
    sm_clock_mhz: float
    sm_clock_min_mhz: float
    sm_clock_max_mhz: float
    queue_ahead_ms: float
    """Positive: no repetition waited on the host. Enqueued from the host: the GPU work still
    queued ahead of the timed region when the host finished enqueueing the first two batches;
    negative, launches may include host latency. Replayed from graphs: the GPU time of one
    batch when the GPU never idled between batches (every batch is one driver call, so no
    repetition inside one can wait); negative, the longest it idled between two batches
    waiting on the host (the repetitions' own times are unaffected, their clocks may be)."""
    clock_limits: str = ""
    """What held the SM clock during the repetitions ("power cap", "none", ...); "" unknown."""
    power_w: float = math.nan
    """Mean board power (W) over the power pass (``TimingOptions.power_s``); NaN without one,
    or where NVML has no energy counter."""
    power_span_s: float = 0.0
    """The span ``power_w`` is a mean over (clocks.py)."""
    power_ms_per_launch: float = math.nan
    """GPU time per launch in the power pass: with ``power_w``, the energy of one launch."""
    stop: str = ""
    """Why the repetitions stopped: "converged", "budget" or "max reps"."""
    median_rel_se_pct: float = math.nan
    """The median's relative standard error when they stopped (percent)."""
    regime: str = SUSTAINED
    """``sustained`` (back to back, the queue kept full) or ``isolated`` (each launch after the
    GPU idled ``gap_ms``); reports written before there was a choice were sustained."""
    gap_ms: float = 0.0
    """Isolated: the idle time before each repetition."""
    graph: bool = False
    """The repetitions were replayed from CUDA graphs (TimingOptions.graph)."""
    launch_overhead_ms: float = 0.0
    """The launch's own overhead, calibrated in the same rounds (median of the calibration
    launch less the span a spin measured of itself), subtracted from every repetition
    (TimingOptions.subtract_launch_overhead); 0 when nothing was subtracted. Once per
    repetition, whatever the launch runs: a cuBLAS call of two kernels keeps its second
    kernel's launch in its time (notes/timing.md, "Nothing off the clock", 7)."""
    rest: float = 0.0
    """The rest before each repetition, in multiples of the launch's own time
    (TimingOptions.rest); 0, full duty (every report written before 2026-11-26 14:30 UTC)."""
    warmup_ms: float = math.nan
    """GPU time of the warm-up this timing had (TimingOptions.warmup_steady_pct); NaN where
    not recorded (every report written before 2026-11-27 04:00 UTC)."""
    findings: tuple[str, ...] = ()
    """What the timing's books found (timing/account.py): untimed parts that took more than
    they are known to cost, the launch slower alone than timed, the timer's device state
    changed under it. Not empty: the launch's figure is not one (measure.timed)."""

    @property
    def energy_j(self) -> float:
        """Board energy of one launch in the power pass (NaN without one)."""
        return self.power_w * self.power_ms_per_launch * 1e-3


@dataclass(frozen=True)
class PowerPass:
    """A launch run back to back for a few seconds (``Timer.power``)."""

    power_w: float
    """The board's mean power (clocks.py); NaN where NVML cannot say."""
    span_s: float
    """The span the mean is over."""
    ms_per_launch: float
    """GPU time per launch over the pass."""
    launches: int
    sm_clock_mhz: float
    """NVML's median SM clock over the pass."""
    clock_limits: str

    @property
    def energy_j(self) -> float:
        """Board energy of one launch."""
        return self.power_w * self.ms_per_launch * 1e-3
