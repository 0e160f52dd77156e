"""What every command group shares: the registry a command sees, the GPU check, exit codes,
progress on stderr."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import HarnessError, NoGpu  # noqa: F401 (NoGpu: its old home)
from harness.kernels.registry import DEFAULT_KERNEL_DIRS, PROJECT_ROOT, Kernel, load_registry

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_NO_GPU, EXIT_DEVICE, EXIT_INTERRUPTED = \
    0, 1, 2, 3, 4, 130
REPORTS = PROJECT_ROOT / "reports"

if TYPE_CHECKING:
    from harness.gpu.driver import GpuStatus

# the numeric options of every command: (dest, flag, least value, whether the least value itself
# is allowed, what the number is)
_NUMBERS = (
    ("budget_ms", "--budget-ms", 0, False, "the most GPU time per timing, in milliseconds"),
    ("min_ms", "--min-ms", 0, True, "the least GPU time per timing, in milliseconds"),
    ("warmup_ms", "--warmup-ms", 0, True, "milliseconds of warm-up"),
    ("rest", "--rest", 0, True, "a multiple of each launch's time; 0 times at full duty"),
    ("max_rel_se", "--max-rel-se", 0, True, "a percent; 0 spends the whole budget"),
    ("timeout_s", "--timeout-s", 0, False, "seconds without progress before a kernel is "
                                           "called hung"),
    ("power_s", "--power-s", 0, False, "seconds of each power pass"),
    ("seconds", "--seconds", 0, False, "seconds of each power pass"),
    ("rounds", "--rounds", 1, True, "rounds over the points"),
    ("jobs", "--jobs", 1, True, "parallel compiles"),
    ("top", "--top", 1, True, "results ranked"),
    ("repeats", "--repeats", 1, True, "launches of each"),
    ("gap_ms", "--gap-ms", 0, True, "milliseconds between launches"),
    ("launch_ms", "--launch-ms", 0, False, "milliseconds of GPU time of one launch"),
)


def check_options(args: argparse.Namespace) -> None:
    """Refuse, before any work and whether or not there is a GPU, an option value no command
    could use: a count or duration out of range, a carve-out that is not a percent, a report
    folder or file that cannot be written."""
    for dest, flag, least, inclusive, what in _NUMBERS:
        value = getattr(args, dest, None)
        if value is None:
            continue
        if not math.isfinite(value) or value < least or (value == least and not inclusive):
            bound = f"at least {least}" if inclusive else f"more than {least}"
            raise HarnessError(f"{flag} {value:g}: expected {bound} ({what})")
    check_sizes(getattr(args, "size", None))
    carveout = getattr(args, "carveout", None)
    if carveout is not None and not 0 <= carveout <= 100:
        raise HarnessError(f"--carveout {carveout}: expected a percent from 0 to 100 (the "
                           "preferred shared-memory carve-out; leave it out for the spec's, "
                           "else the driver's default)")
    if getattr(args, "gpus", None) is not None:
        from harness.run.gpus import parse_gpus

        parse_gpus(args.gpus)  # its form only: which GPUs exist is asked of the driver later
    for blocks in getattr(args, "blocks_per_sm", None) or []:
        if blocks < 1:
            raise HarnessError(f"--blocks-per-sm {blocks}: expected at least 1 (blocks per SM)")
    if getattr(args, "report_dir", None) is not None:
        _check_writable_folder("--report-dir", Path(args.report_dir))
    if isinstance(getattr(args, "json", None), Path):
        if args.json.is_dir():
            raise HarnessError(f"--json {args.json}: a folder; expected the path of a JSON-lines "
                               "file to append the results to")
        _check_writable_folder("--json", args.json.parent, args.json)


def check_sizes(given) -> None:
    """``--size`` (one value or a repeated option's list) read the one way every command, the
    API and the pytest plugin read it (:func:`harness.run.runner.parse_size`: N or M,N,K,
    positive integers within the ABI's int range), before any work: a command that would not
    use it for what it was asked (``check --plan``) refuses a size it could never use all the
    same."""
    from harness.run.runner import parse_size

    for text in [given] if isinstance(given, str) else given or []:
        parse_size(text)


def _check_writable_folder(flag: str, folder: Path, given: Path | None = None) -> None:
    """``folder`` is a folder that can be written, or can be made where its nearest existing
    parent can be written (nothing is created here)."""
    given = given or folder
    if folder.exists() and not folder.is_dir():
        raise HarnessError(f"{flag} {given}: {folder} is a file, not a folder; pass a folder "
                           "that can be written")
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise HarnessError(f"{flag} {given}: {probe} is a file, so {folder} cannot be made; "
                           "pass a folder that can be written")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise HarnessError(f"{flag} {given}: {probe} is not writable; pass a folder that can "
                           "be written")


def check_writable_folder(flag: str, folder: Path) -> None:
    """``folder`` (given as ``flag``) can be written, or made; HarnessError in one line if
    not."""
    _check_writable_folder(flag, Path(folder))


WIDE_COMMANDS = ("run", "check", "compare", "tune", "list", "build", "report", "diff", "index")
"""The commands whose tables fit 100 columns unless ``--wide``."""


def wide_flag(p: argparse.ArgumentParser) -> None:
    """``--wide``: tables at their full width, every column (default: what fits 100 columns,
    the rest in the JSON)."""
    p.add_argument("--wide", action="store_true",
                   help="print every column at full width (default: the columns that matter, "
                        "fitted to 100 columns; the reports' JSON has them all)")


def width(args: argparse.Namespace) -> int | None:
    """The width the command's tables and prose fit: None (as they are) with --wide."""
    from harness.report.width import WIDTH

    return None if getattr(args, "wide", False) else WIDTH


def say(line: str) -> None:
    """Progress for people, on stderr (stdout carries the command's result)."""
    print(line, file=sys.stderr, flush=True)


def kernels(args: argparse.Namespace, kind: str | None = "gemm",
            patterns: list[str] | None = None) -> list[Kernel]:
    """The kernels ``patterns`` (default: the command's KERNEL arguments) name among those the
    command sees: the built-in folders unless --no-builtin, every --kernel-dir, and any kernel
    file named by its path. Broken files are said once, on stderr, unless one is named."""
    folders = [] if args.no_builtin else list(DEFAULT_KERNEL_DIRS)
    registry = load_registry(folders + (args.kernel_dir or []), kind)
    patterns = list(getattr(args, "kernels", None) or []) if patterns is None else patterns
    chosen = registry.select(patterns)
    if registry.broken and not patterns:
        say(f"harness: {len(registry.broken)} kernel file(s) skipped for errors (`harness "
            "list` shows each): " + ", ".join(str(b.path) for b in registry.broken))
    if not chosen:
        raise HarnessError("no kernels to work on: name a kernel (registry key or file path), "
                           "or drop --no-builtin")
    return chosen


def gpu() -> str:
    """The GPU's name; NoGpu when there is none."""
    return has_gpu().require()


def has_gpu() -> GpuStatus:
    """The GPU, or why there is none."""
    from harness.gpu.driver import gpu_status

    return gpu_status()
