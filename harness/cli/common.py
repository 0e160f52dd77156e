"""What every command group shares: the registry a command sees, the GPU check, exit codes,
progress on stderr."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness import kinds
from harness.errors import HarnessError, NoGpu  # noqa: F401 (NoGpu: its old home)
from harness.kernels.registry import DEFAULT_KERNEL_DIRS, PROJECT_ROOT, Kernel, load_registry
from harness.kinds import sizes as kernel_sizes
from harness.knobs import CARVEOUT
from harness.report.files import check_writable_folder

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_NO_GPU, EXIT_DEVICE, EXIT_INTERRUPTED = \
    0, 1, 2, 3, 4, 130
REPORTS = PROJECT_ROOT / "reports"

if TYPE_CHECKING:
    from harness.gpu.driver import GpuStatus

def check_options(args: argparse.Namespace) -> None:
    """Refuse, before any work and whether or not there is a GPU, what no command could use:
    a size, a carve-out that is not a percent, a --gpus that names no GPUs, a report folder or
    file that cannot be written. Each command's numbers are refused by its options as they
    are made (harness/knobs.py), before it looks for kernels or a GPU."""
    check_sizes(getattr(args, "size", None))
    CARVEOUT.check(getattr(args, "carveout", None))
    if getattr(args, "gpus", None) is not None:
        from harness.run.gpus import parse_gpus

        parse_gpus(args.gpus)  # its form only: which GPUs exist is asked of the driver later
    if getattr(args, "report_dir", None) is not None:
        check_writable_folder("--report-dir", Path(args.report_dir))
    if isinstance(getattr(args, "json", None), Path):
        if args.json.is_dir():
            raise HarnessError(f"--json {args.json}: a folder; expected the path of a JSON-lines "
                               "file to append the results to")
        check_writable_folder("--json", args.json.parent, args.json)


def check_sizes(given) -> None:
    """``--size`` (one value or a repeated option's list) read the one way every command, the
    API and the pytest plugin read it (:func:`harness.run.runner.parse_size`: N or M,N,K,
    positive integers within the ABI's int range), before any work: a command that would not
    use it for what it was asked (``check --plan``) refuses a size it could never use all the
    same."""
    from harness.run.runner import parse_size

    for text in [given] if isinstance(given, str) else given or []:
        try:
            parse_size(text)
        except HarnessError:
            if not _dims_size(text) and not _named_size(text):
                raise  # a buffers kernel's dims ("1<<28", "4096x1024"), another kind's names


def _named_size(text: str) -> bool:
    """Whether a kind with named dims (attention's ``B=4,H=16,S=4096,D=128``) reads ``text``."""
    if "=" not in str(text):
        return False
    for kind in kinds.all_kinds():
        try:
            kind.read_size(str(text))
            return True
        except (HarnessError, ValueError):
            continue
    return False


def _dims_size(text: str) -> bool:
    """Whether ``text`` reads as a buffers kernel's dims: formulas of constants, each at least
    1, joined by ``x`` (never commas: those are a GEMM's M,N,K)."""
    from harness.kernels import expr

    if "," in str(text):
        return False
    try:
        return all(int(expr.parse(part)({})) >= 1 for part in str(text).split("x"))
    except HarnessError:
        return False


WIDE_COMMANDS = ("run", "check", "compare", "tune", "list", "build", "report", "diff", "index",
                 "sass", "occupancy")
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


class Progress:
    """Progress for people, on stderr (stdout carries the command's result). On a terminal,
    a stage line (indented six spaces: what a kernel is doing now) replaces the one before it
    on a status line under the results, headed by the rows done and to do and the time left
    from the last result line (``[ 37/120 45.2 s, ~80 s left]``); every other line stays.
    Elsewhere (a log, a pipe) every line as it comes."""

    COUNTER = re.compile(r"^\[\s*(\d+)/(\d+) ([^\]]*)\]")

    def __init__(self, stream=None):
        self.stream = stream
        self.counter, self.showing = "", False

    def __call__(self, line: str) -> None:
        stream = self.stream or sys.stderr
        live = stream.isatty() and os.environ.get("TERM", "") != "dumb"
        if live and line.startswith("      "):
            width = shutil.get_terminal_size((100, 20)).columns
            text = f"{self.counter} {line.strip()}".strip()
            stream.write("\r\x1b[2K" + text[:max(10, width - 1)])
            stream.flush()
            self.showing = True
            return
        if self.showing:
            stream.write("\r\x1b[2K")
            self.showing = False
        seen = self.COUNTER.match(line)
        if seen:
            self.counter = f"[{seen[1]} of {seen[2]} rows, {seen[3].strip()}]"
        print(line, file=stream, flush=True)


say = Progress()


def kernels(args: argparse.Namespace, kind: str | None = kinds.DEFAULT,
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


def gemms_and_buffers(args: argparse.Namespace, command: str,
                      patterns: list[str] | None = None, takes=None) -> list[Kernel]:
    """The kernels ``patterns`` name (default: the command's KERNEL arguments) whose kind
    ``harness command`` takes (GEMM and buffers kernels; ``takes(kind)`` where the command's
    say is not the kind's): a glob that also matched kernels of other kinds keeps these; a
    name of other kinds alone is refused in one line."""
    takes = takes or (lambda kind: kind.takes(command))
    chosen = kernels(args, kind=None, patterns=patterns)
    other = [k for k in chosen if not takes(kinds.of(k.spec))]
    if other and len(other) < len(chosen):
        return [k for k in chosen if takes(kinds.of(k.spec))]
    if other:
        kind = kinds.of(other[0].spec)
        takers = [k.title for k in kinds.all_kinds() if takes(k)]
        raise HarnessError(f"{other[0].name} is a {kind.name!r} kernel; harness {command} "
                           f"takes {' and '.join(takers)} kernels (`{kind.runs_it()}` "
                           f"takes {kind.name} kernels)")
    return chosen


def one_size_rank(chosen: list[Kernel], command: str) -> None:
    """Refuse kernels one ``--size`` cannot name: GEMMs (N or M,N,K) with buffers kernels (their
    dims), or buffers kernels of different numbers of dims."""
    buffers = [k for k in chosen if kernel_sizes.has_own_sizes(k)]
    if buffers and len(buffers) < len(chosen):
        gemm = next(k for k in chosen if not kernel_sizes.has_own_sizes(k))
        raise HarnessError(f"--size with GEMMs and buffers kernels together ({gemm.name}, "
                           f"{buffers[0].name}): a GEMM's size is N or M,N,K, a buffers "
                           f"kernel's its dims; {command} them apart")
    ranks = {kernel_sizes.dims_of(k) for k in buffers}
    if len({len(d) for d in ranks}) > 1:
        raise HarnessError("--size for buffers kernels of different dims ("
                           + "; ".join(" x ".join(d) for d in sorted(ranks)) + f"): "
                           f"{command} them apart")


def gpu() -> str:
    """The GPU's name; NoGpu when there is none."""
    return has_gpu().require()


def has_gpu() -> GpuStatus:
    """The GPU, or why there is none."""
    from harness.gpu.driver import gpu_status

    return gpu_status()
