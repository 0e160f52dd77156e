"""``harness launch``: a kernel checked, then launched (and cuBLAS beside it) a few times
between cuProfilerStart and cuProfilerStop, for a profiler started with ``--profile-from-start
off`` (Nsight Compute under ``harness profile``). A buffers kernel is launched at its dims,
alone (kinds/buffers/launch.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness import kinds
from harness.commands.params import with_knobs
from harness.kernels.registry import Kernel
from harness.knobs import GAP_MS, REPEATS, check_knobs, knob


@dataclass(frozen=True)
class LaunchOptions:
    """How ``harness launch`` launches; checked when made."""

    size: tuple[int, ...] = (4096, 4096, 4096)
    """``--size``: a GEMM's M, N, K; a buffers kernel's dims, in its spec's order."""
    setting: dict[str, int] = field(default_factory=dict)
    """``--param NAME=VALUE``: parameters set (the launches are then unchecked)."""
    repeats: int = knob(5, REPEATS)
    baseline: bool = True
    """cuBLAS launched too (``--no-baseline`` leaves it out); never beside a buffers kernel."""
    gap_ms: float = knob(0.0, GAP_MS)
    """A synchronise and a sleep between launches (isolated launches); 0, back to back."""

    def __post_init__(self) -> None:
        check_knobs(self)


def kernel_for(kernel: Kernel, options: LaunchOptions) -> Kernel:
    """``kernel`` with ``options.setting`` (an unknown parameter fails here)."""
    return with_knobs(kernel, options.setting) if options.setting else kernel


def launch(kernel: Kernel, options: LaunchOptions) -> Kernel:
    """Launch ``kernel`` (:func:`kernel_for`: checked first unless parameters were set)
    ``repeats`` times, then its baseline as often where its kind launches one, inside the
    profiler range; first launches (module load, cuBLAS's choice) outside it. Its kind
    launches it (a buffers kernel at its dims, alone). The kernel launched, as loaded."""
    return kinds.of(kernel.spec).launch(kernel, options)
