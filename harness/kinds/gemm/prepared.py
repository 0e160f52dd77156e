"""What a GEMM's measurement carries from step to step (measure.py): the kernel prepared
(loaded, its battery run) and a size ready to be timed. Apart from measure.py so that the
timed checks (timed_checks.py) can name them without importing it."""

from __future__ import annotations

from dataclasses import dataclass

from harness.bench.result import KernelInfo, Result
from harness.compiler.screen import Screen
from harness.kernels.registry import Kernel
from harness.kinds.gemm import operands
from harness.kinds.gemm.battery import KernelChecks
from harness.kinds.gemm.gemm import LoadedGemm
from harness.kinds.gemm.timed_size import SizeCheck


@dataclass
class Prepared:
    """A kernel loaded, with the results of its check battery."""

    gemm: LoadedGemm
    info: KernelInfo
    checks: KernelChecks
    family: str = "unknown"
    """``simt`` or ``tensor``: the instruction family its SASS uses, ``unknown`` when the
    SASS could not be read (reported; the peak it is held to follows its claim)."""
    screen: Screen | None = None
    """What its cubin could keep state in or read time from (screen.py); None unread."""

    @property
    def kernel(self) -> Kernel:
        return self.gemm.kernel



@dataclass
class Ready:
    """A size checked on the operands it is timed on, ready to be timed."""

    result: Result
    ops: operands.Operands
    launch_ms: float
    """Host wall time of the checked launch (with its synchronisation): a timing estimate."""
    size: SizeCheck | None = None
    """The size's check launched, not yet judged (``checked``'s ``defer``)."""
