"""The offline build report: compile every kernel for an arch and predict its occupancy."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from harness.archs import can_run, get_arch
from harness.compiler import child, occupancy
from harness.compiler.compile import compile_kernel, in_parallel, target_arch
from harness.errors import HarnessError
from harness.kernels.registry import Kernel

DEFAULT_SIZE = (4096, 4096, 4096)


def build_row(kernel: Kernel, arch: str, size=DEFAULT_SIZE,
              carveout_pct: int | None = None, limit_s: float | None = None) -> dict:
    """Compile ``kernel`` for ``arch`` (stopped after ``limit_s`` seconds); resources and
    predicted occupancy at ``size``."""
    kernel = kernel.for_arch(arch)
    row = {"kernel": kernel.name, "arch": arch, "file": str(kernel.spec.path.name),
           "params": dict(kernel.params)}
    need = get_arch(kernel.spec.min_arch)
    if not can_run(need, get_arch(arch)):
        return {**row, "status": "skipped",
                "message": f"needs {need.name} (min_arch), not built for {arch}"}
    row["arch"] = target_arch(kernel, arch)  # sm_90a where the kernel's min_arch asks for it
    try:
        compiled = compile_kernel(kernel, arch, limit_s=limit_s)
    except HarnessError as exc:
        return {**row, "status": "compile error", "message": str(exc)}
    res = compiled.resources
    m, n, k = size
    dynamic = kernel.dynamic_smem_bytes(m, n, k)
    carveout = carveout_pct if carveout_pct is not None else kernel.spec.carveout_pct
    occ = occupancy.predict(get_arch(arch), kernel.block_threads, res.registers,
                            res.static_smem_bytes, dynamic, carveout)
    problems = occupancy.kernel_launch_problems(kernel, get_arch(arch), m, n, k, res.registers,
                                                res.static_smem_bytes)
    return {
        **row, "status": "cannot launch" if problems else "ok",
        "message": "; ".join(problems) or "ok",
        "registers": res.registers, "static_smem_bytes": res.static_smem_bytes,
        "spill_store_bytes": res.spill_store_bytes, "spill_load_bytes": res.spill_load_bytes,
        "stack_frame_bytes": res.stack_frame_bytes, "barriers": res.barriers,
        "block_threads": kernel.block_threads, "block": list(kernel.block_dims),
        "grid": list(kernel.grid_dims(m, n, k)), "size": list(size),
        "dynamic_smem_bytes": dynamic, "blocks_per_sm": occ.blocks_per_sm,
        "occupancy_pct": occ.occupancy_pct, "limiter": occ.limiter,
        "compiler": compiled.compiler, "cached": compiled.cached,
    }


Progress = Callable[[dict, int, int], None]
"""Told each row as it is built, with how many are done and how many there are in all."""


def build_all(kernels: Sequence[Kernel], arch: str, size=DEFAULT_SIZE,
              carveout_pct: int | None = None, *, limit_s: float | None = None,
              jobs: int | None = None, progress: Progress | None = None) -> list[dict]:
    """:func:`build_row` for every kernel, ``jobs`` compiles at a time (every core by
    default), in registry order; ``progress`` is told of each row as it is built. Each
    compile is stopped after ``limit_s`` seconds (:func:`harness.compiler.child.compile_limit_s`:
    a bad limit is refused here, before anything is built); Ctrl-C stops them all."""
    child.compile_limit_s(limit_s)
    count = itertools.count(1)
    done = (lambda _, row: progress(row, next(count), len(kernels))) if progress else None
    return in_parallel(lambda k: build_row(k, arch, size, carveout_pct, limit_s), kernels,
                       jobs, done)
