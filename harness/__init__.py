"""The kernel harness: compile, check, time and report GEMM kernels against cuBLAS.

    import harness
    k = harness.kernel("cu/sgemm/10_hoisted.cu")   # a path, a registry key, or source=...
    print(k.build(arch="sm_90"))                   # offline: registers, occupancy, limiter
    k.run(sizes=[4096])                            # GPU: checked and timed against cuBLAS
    harness.time(lambda: my_launch(), cold_l2=False)  # GPU: any launch, the harness's method

The API (:mod:`harness.api`) is imported on first use, so ``import harness`` stays fast and
loads no CUDA library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Build", "Builds", "CompileError", "DeviceError", "HarnessError", "KernelFailed",
    "KernelHandle", "NoGpu", "Plan", "Plans", "Result", "Results", "SpecError", "__version__",
    "compare", "kernel", "time",
]
# name -> the module that defines it, imported on first access (PEP 562)
_LAZY = {
    **dict.fromkeys(["kernel", "compare", "KernelHandle", "Build", "Builds", "Plans", "Results",
                     "KernelFailed"], "harness.api"),
    "Result": "harness.bench.result", "Plan": "harness.kinds.gemm.plan",
    "time": "harness.commands.timeit",
    **dict.fromkeys(["HarnessError", "SpecError", "CompileError", "NoGpu", "DeviceError"],
                     "harness.errors"),
}

if TYPE_CHECKING:
    from harness.api import (
        Build,
        Builds,
        KernelFailed,
        KernelHandle,
        Plans,
        Results,
        compare,
        kernel,
    )
    from harness.bench.result import Result
    from harness.commands.timeit import time
    from harness.errors import CompileError, DeviceError, HarnessError, NoGpu, SpecError
    from harness.kinds.gemm.plan import Plan


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
