"""``harness energy``: the board's energy per FLOP of a kernel and of its measurement knobs
(``NOLOAD``, ``NOSTORE``, ...), each point checked, then run back to back with warm L2 for a
power pass, round by round, in this process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from harness.commands.params import WRONG_BY_DESIGN, with_knobs
from harness.errors import HarnessError
from harness.kernels.registry import Kernel
from harness.knobs import check_knobs, knob

Say = Callable[[str], None]


@dataclass(frozen=True)
class EnergyOptions:
    """How ``harness energy`` measures; checked when made."""

    size: tuple[int, int, int] = (4096, 4096, 4096)
    settings: tuple[dict[str, int], ...] = ()
    """``--knob NAME=V[,NAME=V]``: one point per setting, beside the kernel as it is."""
    seconds: float = knob(2.0, "--seconds", 0, False, "seconds of each power pass")
    """Each point's power pass."""
    rounds: int = knob(2, "--rounds", 1, what="rounds over the points")

    def __post_init__(self) -> None:
        check_knobs(self)
        if not 0.5 <= self.seconds <= 60:
            raise HarnessError(f"--seconds {self.seconds:g} --rounds {self.rounds}: expected "
                               "0.5 to 60 seconds (NVML's power moves every ~100 ms) and at "
                               "least one round")


@dataclass
class EnergyRecord:
    """One row per point and round, the GPU's facts, the points' kernels."""

    kernels: list[Kernel]
    rows: list[dict] = field(default_factory=list)
    facts: dict = field(default_factory=dict)


def points(base: Kernel, options: EnergyOptions) -> list[tuple[Kernel, dict[str, int]]]:
    """The kernel as it is, then one point per setting (an unknown parameter fails here)."""
    return [(base, {})] + [(with_knobs(base, s), s) for s in options.settings]


def measure(chosen: list[tuple[Kernel, dict[str, int]]], options: EnergyOptions, say: Say
            ) -> EnergyRecord:
    """Every point (:func:`points`) checked (a knob in WRONG_BY_DESIGN must make it fail,
    every other point must pass), then its power pass in each round; a row per point and
    round."""
    from harness.kinds.gemm.checks import check_one
    from harness.kinds.gemm.launches import launcher
    from harness.kinds.gemm.session import GemmSession

    m, n, k = options.size
    flop = 2.0 * m * n * k
    record = EnergyRecord([kernel for kernel, _ in chosen])
    with GemmSession.open() as session:
        runs, ops = [], None
        for kernel, setting in chosen:
            gemm = session.load(kernel)
            checks = check_one(gemm, session.stream, m, n, k, seed=11)
            failed = [r.message for r in checks if not r.passed]
            checked = f"passed ({len(checks)} checks)"
            if failed and set(setting) & WRONG_BY_DESIGN:
                checked = "fails, as its measurement knob must"
            elif failed:
                raise HarnessError(f"{kernel.name} fails the check: {failed[0]}")
            elif set(setting) & WRONG_BY_DESIGN:
                raise HarnessError(f"{kernel.name} passes the check, but its knob should make "
                                   "it wrong: the knob is not reaching the kernel")
            ops = ops or session.operands(kernel, m, n, k, seed=11)
            runs.append((gemm.kernel, checked, launcher(gemm, ops, session)))
        for r in range(options.rounds):
            for kernel, checked, launch in runs:
                p = session.timer.power(launch, options.seconds)
                row = {"kernel": kernel.name, "round": r, "checked": checked,
                       "size": f"{m}x{n}x{k}", "power_w": p.power_w, "power_span_s": p.span_s,
                       "ms_per_launch": p.ms_per_launch, "launches": p.launches,
                       "tflops": flop / p.ms_per_launch / 1e9,
                       "pj_per_flop": 1e12 * p.energy_j / flop, "nvml_sm_mhz": p.sm_clock_mhz,
                       "clock_limits": p.clock_limits}
                record.rows.append(row)
                say(f"round {r} {kernel.name}: {p.power_w:.0f} W, {row['tflops']:.1f} TFLOP/s, "
                    f"{row['pj_per_flop']:.3f} pJ/FLOP")
        ops.close()
        record.facts = session.facts()
    return record
