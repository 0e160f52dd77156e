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
from harness.kinds import sizes as kernel_sizes
from harness.run.runner import RunOptions, RunRecord

Say = Callable[[str], None]
DEFAULT_RUN_SIZES = ("512", "1024", "2048", "4096")
"""``harness run``'s sizes (``--size``, the API's ``sizes``)."""


def run(kernels: Sequence[Kernel], options: RunOptions, target: Target, jsonl_path: Path,
        say: Say, mode: str = "run", own_sizes: bool = True) -> RunRecord:
    """Check and time each kernel against its baseline at each size, each result appended to
    ``jsonl_path`` as it comes: GEMMs at ``options.sizes`` against cuBLAS, buffers kernels at
    their spec's sizes (``own_sizes``; else at ``options.sizes``, their dims padded with 1)
    against theirs (one pass per distinct list of sizes), in one record."""
    options = options.seeded()
    common = [k for k in kernels if not kernel_sizes.has_own_sizes(k)]
    record = (target.measure(common, options, jsonl_path, say, mode=mode) if common
              else RunRecord(seed=options.seed))
    groups: dict[tuple, list[Kernel]] = {}
    for k in kernels:
        if kernel_sizes.has_own_sizes(k):
            sizes = kernel_sizes.own_slots(k) if own_sizes else tuple(options.sizes)
            groups.setdefault(sizes, []).append(k)
    for sizes, group in groups.items():
        more = target.measure(group, replace(options, sizes=sizes), jsonl_path, say, mode=mode)
        record = merged(record, more)
    return record


def merged(first: RunRecord, second: RunRecord) -> RunRecord:
    """Two passes of one run as one record (phases and wall time summed)."""
    phases = dict(first.phases)
    for name, seconds in second.phases.items():
        phases[name] = phases.get(name, 0.0) + seconds
    record = replace(first, results=[*first.results, *second.results], phases=phases,
                     wall_s=first.wall_s + second.wall_s, device=first.device or second.device,
                     devices=list(first.devices))
    for facts in second.devices:
        record.saw(facts, facts.get("index", 0))
    return record


def compare(kernels: Sequence[Kernel], options: RunOptions, target: Target, jsonl_path: Path,
            say: Say) -> RunRecord:
    """Two or more kernels (refusing fewer is the caller's: it names what was asked), the
    first the reference, timed interleaved with cuBLAS round by round on one GPU; each result
    with its speedup over the first and its SASS mix."""
    record = target.measure(kernels, options, jsonl_path, say, mode="compare")
    return replace(record, results=with_sass(record.results, kernels, target.arch))


def check(kernels: Sequence[Kernel], options: RunOptions, target: Target, say: Say,
          own_sizes: bool = True) -> RunRecord:
    """The check battery and a check at each size, no timing; the results stream to a
    temporary file."""
    with tempfile.TemporaryDirectory(prefix="harness-check-") as folder:
        return run(kernels, options, target, Path(folder) / "check.jsonl", say, mode="check",
                   own_sizes=own_sizes)


def with_sass(results: Sequence[Result], kernels: Sequence[Kernel], arch: str) -> list[Result]:
    """``results`` with each kernel's SASS instruction mix (the compare table's last column)."""
    from harness.compiler.compile import compile_kernel
    from harness.compiler.sass import disassemble, instruction_mix

    mixes = {}
    for kernel in kernels:
        kernel = kernel.for_arch(arch)
        mixes[kernel.name] = instruction_mix(disassemble(compile_kernel(kernel, arch).cubin))
    return [r.with_parts(sass=mixes.get(r.kernel.name, {})) for r in results]
