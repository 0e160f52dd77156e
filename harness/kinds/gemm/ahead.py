"""What the runner's compile pool does for GEMM kernels beside the worker (run/runner.py):
each kernel's SASS read (its instruction family and screening, cached by the cubin's hash),
and the ceiling kernels tensor-core rows are held to, compiled."""

from __future__ import annotations

from harness.archs import can_run, get_arch
from harness.compiler.compile import compile_kernel
from harness.errors import HarnessError
from harness.kernels.registry import DEFAULT_KERNEL_DIRS, Kernel, discover

CEILING_KIND = "ceiling"
"""The kind of the probes a tensor-core GEMM's % ceiling is of (harness/kinds/ceiling/)."""


def read_sass(kernel: Kernel, arch: str) -> None:
    from harness.kinds.gemm.screening import screened_cubin

    try:  # the cubin screen() compiled; none where it did not (the worker compiles then)
        screened_cubin(compile_kernel(kernel, arch, cached_only=True).cubin)
    except HarnessError:
        pass  # the worker reads it again, and reports what it finds


def compiled_quietly(kernel: Kernel, arch: str) -> None:
    try:
        compile_kernel(kernel, arch)
    except HarnessError:
        pass  # the worker measures no such ceiling, and says why


def ceiling_kernels(arch: str) -> list[Kernel]:
    """The ceiling kernels ``arch`` runs; none where a ceiling file is broken (the worker
    says so when it measures)."""
    try:
        return [k for k in discover(DEFAULT_KERNEL_DIRS, CEILING_KIND)
                if can_run(get_arch(k.spec.min_arch), get_arch(arch))]
    except HarnessError:
        return []
