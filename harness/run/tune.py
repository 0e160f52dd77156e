"""``harness tune``: sweep a kernel's declared parameter space, check and time every valid point.

Points are skipped, each with its reason, when a constraint fails at the tuning size, the block
is empty or too large, the compile fails, the device could not hold the block (registers,
shared memory) or ptxas spilled. The rest compile in parallel, then go through the same
isolated check-then-time path as ``harness run``, one JSON line per result as it comes.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.archs import get_arch
from harness.bench.result import Result
from harness.compiler import occupancy
from harness.compiler.compile import compile_kernel
from harness.errors import FormulaError, HarnessError, SpecError
from harness.kernels.registry import Kernel


def points(kernel: Kernel, space: dict[str, Sequence[int]]) -> list[Kernel]:
    """Every combination of ``space`` over the kernel's parameters, as named kernels."""
    unknown = sorted(set(space) - set(kernel.spec.params))
    if unknown:
        raise HarnessError(f"{kernel.spec.stem} has no parameter {', '.join(unknown)}; its "
                           f"parameters: {', '.join(kernel.spec.params)}")
    if not space:
        raise HarnessError(f"{kernel.spec.stem} declares no [tune] space and none was given "
                           "with --param NAME=v1,v2")
    names = list(space)
    out = []
    for values in itertools.product(*(space[n] for n in names)):
        chosen = dict(zip(names, values, strict=True))
        label = ",".join(f"{n}={v}" for n, v in chosen.items())
        out.append(kernel.with_params(chosen, f"{kernel.spec.stem}[{label}]"))
    return out


def why_invalid(kernel: Kernel, arch: str, sizes: Sequence[tuple[int, int, int]]) -> str | None:
    """The reason a point cannot run (before compiling), or None."""
    try:
        threads = kernel.block_threads
        for size in sizes:
            problems = kernel.shape_problems(*size)
            if problems:
                return problems[0]
            kernel.grid_dims(*size)
    except FormulaError as exc:
        return exc.reason  # the point's row names the kernel already
    except SpecError as exc:
        return str(exc)
    if threads > get_arch(arch).max_threads_per_block:
        return f"{threads} threads per block, at most {get_arch(arch).max_threads_per_block}"
    for size in sizes:  # grid and block limits, the ABI's int, dynamic shared memory
        try:
            problems = occupancy.kernel_launch_problems(kernel, get_arch(arch), *size)
        except FormulaError as exc:
            return exc.reason
        if problems:
            return problems[0]
    return None


def why_not_launchable(kernel: Kernel, arch: str, sizes) -> str | None:
    """Compile ``kernel``; the reason it should not be timed (compile error, no fit, spills)."""
    try:
        res = compile_kernel(kernel, arch).resources
    except HarnessError as exc:
        return f"compile error: {str(exc).splitlines()[0]}"
    for size in sizes:
        problems = occupancy.kernel_launch_problems(kernel, get_arch(arch), *size, res.registers,
                                                    res.static_smem_bytes)
        if problems:
            return problems[0]
    if res.spill_store_bytes or res.spill_load_bytes:
        return (f"spills {res.spill_store_bytes} B stored / {res.spill_load_bytes} B loaded "
                f"at {res.registers} registers")
    return None


def screen(candidates: Sequence[Kernel], arch: str, sizes, jobs: int,
           say: Callable[[str], None]) -> tuple[list[Kernel], list[tuple[Kernel, str]]]:
    """Split points into those worth timing and those skipped with a reason."""
    valid, skipped = [], []
    for k in candidates:
        reason = why_invalid(k, arch, sizes)
        (skipped.append((k, reason)) if reason else valid.append(k))
    say(f"{len(candidates)} points: {len(skipped)} invalid before compiling; compiling "
        f"{len(valid)} with {jobs} threads")
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        reasons = list(pool.map(lambda k: why_not_launchable(k, arch, sizes), valid))
    keep = []
    for k, reason in zip(valid, reasons, strict=True):
        (skipped.append((k, reason)) if reason else keep.append(k))
    say(f"{len(keep)} points to check and time, {len(skipped)} skipped")
    return keep, skipped


def best(results: Sequence[Result], size: tuple[int, int, int], top: int) -> list[Result]:
    """The fastest passing results at ``size``, as their kind ranks them (GFLOP/s, or GB/s;
    points of one kernel at one size do the same work, so either ranks by time)."""
    at = [r for r in results if r.status == "pass" and r.size == tuple(size)]
    return sorted(at, key=lambda r: -r.kind_of.rank(r))[:top]


_TUNED_BLOCK = re.compile(r"\n\[tuned\.(?P<arch>\w+)\]\n(?:[A-Za-z_]\w* = -?\d+\n)*")


def pin(path: Path, arch: str, params: dict[str, int]) -> None:
    """Write ``[tuned.<arch>]`` with ``params`` into the spec block of the kernel at ``path``."""
    text = path.read_text()
    end = text.index("*/")
    head, tail = text[:end], text[end:]
    block = f"\n[tuned.{arch}]\n" + "".join(f"{k} = {v}\n" for k, v in params.items())
    existing = [m for m in _TUNED_BLOCK.finditer(head) if m["arch"] == arch]
    if existing:
        m = existing[0]
        head = head[:m.start()] + block + head[m.end():]
    else:
        head = head.rstrip("\n") + "\n" + block
    path.write_text(head + tail)
