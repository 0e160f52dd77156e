"""What every command group shares: the registry a command sees, the GPU check, exit codes,
progress on stderr."""

from __future__ import annotations

import argparse
import sys

from harness.errors import HarnessError
from harness.kernels.registry import DEFAULT_KERNEL_DIRS, PROJECT_ROOT, Kernel, load_registry

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_NO_GPU, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
REPORTS = PROJECT_ROOT / "reports"


class NoGpu(HarnessError):
    """A command that needs a GPU found none (exit status 3)."""


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
    from harness.gpu.driver import gpu_status

    ok, why = gpu_status()
    if not ok:
        raise NoGpu(f"no GPU here ({why})")
    return why


def has_gpu() -> tuple[bool, str]:
    from harness.gpu.driver import gpu_status

    return gpu_status()
