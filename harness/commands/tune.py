"""``harness tune``: a kernel file's parameter space (its ``[tune]``, with ``--param``
overrides) screened offline for an arch, the points worth it checked and timed on a Target
(cuBLAS once per size in each worker), ranked, and the best pinned into the spec."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.bench.result import Result
from harness.commands.place import Target
from harness.errors import HarnessError
from harness.kernels.registry import Kernel
from harness.kernels.spec import KernelSpec
from harness.knobs import check_knobs, knob
from harness.run import tune
from harness.run.runner import RunOptions, RunRecord

Say = Callable[[str], None]


@dataclass(frozen=True)
class TuneOptions:
    """How ``harness tune`` sweeps; checked when made, with the command line's messages."""

    run: RunOptions
    """The sizes (ranked at the last), the timing, the timeout and the seed of every point."""
    params: tuple[str, ...] = ()
    """``--param NAME=v1,v2``: a swept parameter added or overriding the spec's ``[tune]``."""
    jobs: int = knob(4, "--jobs", 1, what="parallel compiles")
    top: int = knob(10, "--top", 1, what="results ranked")

    def __post_init__(self) -> None:
        check_knobs(self)


@dataclass(frozen=True)
class TunePlan:
    """A kernel file's points: its spec, the space swept and every point in it."""

    spec: KernelSpec
    space: dict[str, list[int]]
    candidates: list[Kernel]
    options: TuneOptions


@dataclass
class Tuning:
    """What a tune found: the points timed and skipped (with why), every result, the best."""

    options: TuneOptions
    space: dict[str, list[int]]
    timed: list[Kernel]
    skipped: list[tuple[Kernel, str]]
    record: RunRecord = field(default_factory=RunRecord)
    top: list[Result] = field(default_factory=list)


def plan(kernels: Sequence[Kernel], pattern: str, options: TuneOptions) -> TunePlan:
    """The points of the one kernel file ``kernels`` (what ``pattern`` matched) come from;
    HarnessError for several files, a malformed ``--param``, or an empty or unknown space."""
    spec = kernels[0].spec
    if any(k.spec is not spec for k in kernels):
        raise HarnessError(f"{pattern!r} matches kernels of several files; name one file stem")
    base = Kernel(spec.stem, spec, tuple(sorted(spec.params.items())))
    space = {name: list(values) for name, values in spec.tune.items()}
    for item in options.params:
        name, _, values = item.partition("=")
        try:
            space[name.strip()] = [int(v) for v in values.split(",")]
        except ValueError:
            raise HarnessError(f"--param {item!r}: expected NAME=v1,v2,... with integers") from None
    return TunePlan(spec, space, tune.points(base, space), options)


def screen(planned: TunePlan, arch: str, say: Say) -> Tuning:
    """The points worth timing for ``arch``, and those skipped with their reason."""
    keep, skipped = tune.screen(planned.candidates, arch, planned.options.run.sizes,
                                planned.options.jobs, say)
    return Tuning(planned.options, planned.space, keep, skipped)


def sweep(tuning: Tuning, target: Target, jsonl_path: Path, say: Say) -> Tuning:
    """``tuning``'s points checked and timed on ``target`` (cuBLAS once per size in each
    worker), each result appended to ``jsonl_path`` as it comes, and ranked at the last
    size."""
    options = tuning.options
    tuning.record = target.measure(tuning.timed, options.run, jsonl_path, say,
                                   reuse_baseline=True)
    tuning.top = tune.best(tuning.record.results, options.run.sizes[-1], options.top)
    return tuning


def pin(tuning: Tuning, spec: KernelSpec, arch: str) -> dict[str, int]:
    """The best point's swept parameters, written into ``spec``'s file as
    ``[tuned.<arch>]``."""
    best = {name: tuning.top[0].kernel.params[name] for name in tuning.space}
    tune.pin(spec.path, arch, best)
    return best
