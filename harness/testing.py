"""Helpers for your own pytest tests of kernels: build offline, assert a budget, need a GPU.

    import harness
    from harness.testing import assert_builds

    def test_my_kernel_fits():
        row = assert_builds("kernels/my.cu", max_registers=128, max_spill_bytes=0)
        assert row["occupancy_pct"] >= 50

    def test_my_kernel_checks(harness_gpu):     # skipped, with the reason, without a GPU
        harness.kernel("kernels/my.cu").check().raise_for_status()

A ``kind = "buffers"`` kernel (notes/buffers_kind.md) builds as a GEMM does, at the smallest of
its spec's sizes, or at ``size`` read as its dims (``"1<<20"``, ``(4096, 1024)``).

The ``harness_gpu`` fixture comes with the pytest plugin (``harness.pytest_plugin``, installed
with the package); nothing here loads a CUDA library until it is called.
"""

from __future__ import annotations

import os

import pytest

from harness import kinds
from harness.errors import HarnessError
from harness.kernels.spec import budget_problems as budget_problems  # re-exported
from harness.kinds import sizes as kernel_sizes

DEFAULT_ARCH = "sm_90"
DEFAULT_SIZE = (1024, 1024, 1024)
"""The problem size (M, N, K) builds are judged at: grid, dynamic shared memory, and the size
the pytest plugin's GPU check battery runs at."""


def _kernels(kernel) -> list:
    """Every registry Kernel that ``kernel`` names (all the variants of a file or stem)."""
    try:
        return [_one_kernel(kernel)]
    except _SeveralKernels as several:
        if not several.kernels:
            raise
        return several.kernels


class _SeveralKernels(HarnessError):
    def __init__(self, message: str, kernels: list):
        super().__init__(message)
        self.kernels = kernels


def _one_kernel(kernel):
    """The registry Kernel that ``kernel`` names: a Kernel, a handle of one kernel (the API's
    ``harness.kernel(...)``), a kernel file's path or a registry key (``stem:variant``); a GEMM
    or a buffers kernel."""
    from harness.kernels.registry import Kernel, load_registry

    if isinstance(kernel, Kernel):
        return kernel
    if isinstance(kernel, str | os.PathLike):
        found = load_registry(kind=None).select([os.fspath(kernel)])
        if found and not kinds.of(found[0].spec).takes("run"):
            raise HarnessError(f"{found[0].name} is a {found[0].spec.kind!r} kernel; these "
                               "helpers build " + " and ".join(
                                   k.title for k in kinds.all_kinds() if k.takes("run"))
                               + " kernels")
    elif hasattr(kernel, "kernels"):
        found = list(kernel.kernels)
    else:
        raise HarnessError(f"{kernel!r}: expected a kernel file's path, a registry key, or a "
                           "kernel handle (harness.kernel)")
    if len(found) != 1:
        names = ", ".join(k.name for k in found[:6])
        raise _SeveralKernels(f"{kernel!r} names {len(found)} kernels ({names}); name one "
                              "variant (path.cu:variant, or stem:variant)", found)
    return found[0]


def _build_size(kernel, size) -> tuple[int, int, int]:
    """Where ``kernel`` is built: ``size`` (default :data:`DEFAULT_SIZE`); a buffers kernel's
    read as its dims (default the smallest of its spec's sizes), padded with 1."""
    if not kernel_sizes.has_own_sizes(kernel):
        return tuple(DEFAULT_SIZE if size is None else size)
    from harness.api import dims_of, smallest_dims

    return kernel_sizes.slots(kernel, smallest_dims(kernel) if size is None
                              else dims_of(kernel, size))


def build(kernel, arch: str = DEFAULT_ARCH, size=None) -> dict:
    """Compile one kernel for ``arch`` (no GPU): the ``harness build`` row, with ``status``
    (ok, cannot launch, compile error, skipped), ``message``, registers, shared memory, spills
    and the predicted occupancy at ``size`` ((M, N, K), default :data:`DEFAULT_SIZE`; a buffers
    kernel's dims, default the smallest of its spec's sizes)."""
    from harness.archs import get_arch
    from harness.compiler.offline import build_row

    get_arch(arch)
    chosen = _one_kernel(kernel)
    return build_row(chosen, arch, _build_size(chosen, size))


def assert_builds(kernel, arch: str = DEFAULT_ARCH, size=None, **budget: int):
    """:func:`build` and assert the kernel compiled, can launch at ``size`` (as :func:`build`
    takes it) and stays within ``budget`` (keywords of ``[budget]``: max_registers,
    max_spill_bytes, max_smem_bytes, min_occupancy_pct) and its spec's own ``[budget]``;
    returns the build row. A file or stem with variants builds every variant (name one with
    ``path.cu:variant`` to build that one alone): each is asserted, the failures are listed
    together, and the rows come back as a list, in the spec's order."""
    from harness.kernels.spec import parse_budget

    parse_budget(budget, lambda message: TypeError(f"assert_builds: {message}"))
    chosen = _kernels(kernel)
    rows, failures = [], []
    for one in chosen:
        row = build(one, arch, size)
        rows.append(row)
        if row["status"] != "ok":
            failures.append(f"{row['kernel']} ({row['arch']}): {row['status']}: "
                            f"{short_message(row['message'])}")
            continue
        problems = budget_problems(row, {**one.spec.budget, **budget})
        if problems:
            failures.append(f"{row['kernel']} ({row['arch']}) is over its budget: "
                            + "; ".join(problems))
    if failures:
        head = (f"{len(failures)} of {len(chosen)} variants failed: " if len(chosen) > 1
                else "")
        raise AssertionError(head + "\n".join(failures))
    return rows[0] if len(rows) == 1 else rows


def short_message(message: str) -> str:
    """A harness message without the full compiler or linker log it may end with (the lines
    before it name the file, the line and the error)."""
    return message.split("\n--- full ", 1)[0].rstrip()


@pytest.fixture(scope="session")
def harness_gpu() -> str:
    """The GPU's compile target (``sm_90`` on an H100); skips the test, with the reason, where
    no GPU can be used."""
    from harness.gpu.driver import device_arch_name, gpu_status

    status = gpu_status()
    if not status.found:
        pytest.skip(f"needs a GPU: {status.reason}")
    return device_arch_name()


__all__ = ["DEFAULT_ARCH", "DEFAULT_SIZE", "assert_builds", "budget_problems", "build",
           "harness_gpu", "short_message"]
