"""``harness run``, ``compare`` and ``check``: kernels measured in worker processes on a
:class:`~harness.commands.place.Target`, their results as a RunRecord."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from harness.bench.result import Result
from harness.commands.place import Target
from harness.kernels.registry import Kernel
from harness.run.runner import RunOptions, RunRecord

Say = Callable[[str], None]
DEFAULT_RUN_SIZES = ("512", "1024", "2048", "4096")
"""``harness run``'s sizes (``--size``, the API's ``sizes``)."""


def run(kernels: Sequence[Kernel], options: RunOptions, target: Target, jsonl_path: Path,
        say: Say) -> RunRecord:
    """Check and time each kernel against cuBLAS at each size, each result appended to
    ``jsonl_path`` as it comes."""
    return target.measure(kernels, options, jsonl_path, say)


def compare(kernels: Sequence[Kernel], options: RunOptions, target: Target, jsonl_path: Path,
            say: Say) -> RunRecord:
    """Two or more kernels (refusing fewer is the caller's: it names what was asked), the
    first the reference, timed interleaved with cuBLAS round by round on one GPU; each result
    with its speedup over the first and its SASS mix."""
    record = target.measure(kernels, options, jsonl_path, say, mode="compare")
    return replace(record, results=with_sass(record.results, kernels, target.arch))


def check(kernels: Sequence[Kernel], options: RunOptions, target: Target, say: Say
          ) -> RunRecord:
    """The check battery and a check at each size, no timing; the results stream to a
    temporary file."""
    with tempfile.TemporaryDirectory(prefix="harness-check-") as folder:
        return target.measure(kernels, options, Path(folder) / "check.jsonl", say, mode="check")


def with_sass(results: Sequence[Result], kernels: Sequence[Kernel], arch: str) -> list[Result]:
    """``results`` with each kernel's SASS instruction mix (the compare table's last column)."""
    from harness.compiler.compile import compile_kernel
    from harness.compiler.sass import disassemble, instruction_mix

    mixes = {}
    for kernel in kernels:
        kernel = kernel.for_arch(arch)
        mixes[kernel.name] = instruction_mix(disassemble(compile_kernel(kernel, arch).cubin))
    return [r.with_parts(sass=mixes.get(r.kernel.name, {})) for r in results]
