"""Flags several GPU commands share, and the one translation of them into options
(:meth:`TimingOptions.from_flags`, RunOptions): the timing, the power pass, where to spread
the work, the seed, the timeout."""

from __future__ import annotations

import argparse
from typing import Any

from harness.gpu.timing import ISOLATED_GAP_MS, POWER_PASS_S, TimingOptions
from harness.run.runner import RunOptions, Size, parse_size

TIMEOUT_HELP = ("seconds without progress before a kernel is called hung (default: each "
                "stage's own limit, scaled with the work of its launches: about 30 s at the "
                "default sizes)")


def timing_flags(p: argparse.ArgumentParser, budget_ms: float = 300.0) -> None:
    p.add_argument("--budget-ms", type=float, default=budget_ms,
                   help=f"most GPU time per timing ({budget_ms:g})")
    p.add_argument("--min-ms", type=float, default=TimingOptions.min_ms,
                   help=f"least GPU time per timing ({TimingOptions.min_ms:g}, or the budget "
                   "when that is smaller)")
    p.add_argument("--max-rel-se", type=float, default=TimingOptions.max_rel_se_pct,
                   metavar="PCT", help="stop a timing once its median's relative standard "
                   f"error is at most PCT ({TimingOptions.max_rel_se_pct:g}); 0 spends the "
                   "whole budget")
    p.add_argument("--warmup-ms", type=float, default=TimingOptions.warmup_ms)
    p.add_argument("--rest", type=float, default=TimingOptions.rest, metavar="R",
                   help="with cold L2, sustained: before each launch of 10 us or more, rest "
                        f"the SMs R times its own time ({TimingOptions.rest:g}: half duty, the "
                        "card under its power cap whatever ran before); 0 times at full duty, "
                        "at the clock the power cap allows")
    p.add_argument("--isolated", action="store_true",
                   help="time isolated launches, each after a synchronise and --gap-ms idle, "
                        "as Nsight Compute does (default: sustained, back to back with the "
                        "queue kept full)")
    p.add_argument("--gap-ms", type=float, default=ISOLATED_GAP_MS,
                   help=f"with --isolated: the idle time before each launch ({ISOLATED_GAP_MS:g})")


def power_flags(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--power", action="store_true",
                   help=f"after each timing, run {what} back to back with warm L2 for --power-s "
                        "seconds: the board's mean power and energy per FLOP")
    p.add_argument("--power-s", type=float, default=POWER_PASS_S, metavar="SECONDS",
                   help="length of each power pass (2; NVML's power moves every ~100 ms)")


def spread_flags(p: argparse.ArgumentParser, what: str) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument("--gpus", metavar="all|I,J,...",
                       help=f"spread the {what} over these GPUs of this host, one worker "
                            "process each, fed from one queue: all, or device indices (0,2); "
                            "one index runs there alone (default: GPU 0)")
    where.add_argument("--cluster", metavar="ADDRESS|local",
                       help=f"spread the {what} over the GPUs of a Dask cluster, one Dask "
                            "worker per GPU: the scheduler's address (tcp://host:8786), or "
                            "local for a cluster of this host's GPUs; needs pip install -e "
                            "'.[cluster]'")


def seed_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=_seed, metavar="N",
                   help="derive every check's seed, shape and sample from this seed "
                        "(default: a new one per run, which the report records); the input "
                        "values also need the run's secret, never recorded: set "
                        "HARNESS_INPUT_SECRET (32 hex digits) in both runs to replay them")


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value < 2**31:
        raise argparse.ArgumentTypeError(f"{value} is outside 0..2147483647")
    return value


def sizes(args: argparse.Namespace, default=("4096",)) -> tuple[Size, ...]:
    return tuple(parse_size(s) for s in (args.size or default))


def timing(args: argparse.Namespace, **given: Any) -> TimingOptions:
    """The timing the flags ask for (``given`` fields set as they are)."""
    return TimingOptions.from_flags(vars(args), **given)


def run_options(args: argparse.Namespace, default_sizes=("4096",), **given: Any) -> RunOptions:
    """The RunOptions the flags ask for: sizes, timing, carve-out, timeout, BLAS strictness
    and seed, as each command has them (``given`` fields set as they are)."""
    measured = given.pop("timing", None) or timing(args)  # numbers first, as ever: then sizes
    values = {"sizes": given.pop("sizes") if "sizes" in given else sizes(args, default_sizes),
              "timing": measured,
              "carveout_pct": getattr(args, "carveout", None),
              "timeout_s": getattr(args, "timeout_s", None),
              "strict_blas": getattr(args, "blas_strict", False),
              "seed": getattr(args, "seed", None)}
    return RunOptions(**{**values, **given})
