"""The Python API: the CLI's commands as calls that return typed records, for notebooks, scripts
and tests.

    import harness
    k = harness.kernel("cu/sgemm/10_hoisted.cu")   # a path, a registry key, or source=...
    k.build(arch="sm_90")                          # offline: resources, predicted occupancy
    k.plan()                                       # offline: the check battery
    k.check(sizes=[1024])                          # GPU: the battery, no timing
    k.run(sizes=[4096])                            # GPU: checked and timed against cuBLAS
    harness.compare([k, "09_cp_async:s4"], sizes=[4096])
    harness.kernel("examples/vector_add.cu").run()  # a buffers kernel: its spec's sizes, GB/s

A buffers kernel (notes/buffers_kind.md) runs at its spec's sizes, or at sizes read as its dims
(``1 << 28``, ``"4096x1024"``, ``(4096, 1024)``); its results carry ``.gbps`` and ``.memory``.

Every call runs the commands the CLI runs (harness/commands/: the registry,
``harness.compiler.offline``, ``harness.kinds.gemm.plan``, ``harness.commands.measure``), its
options
named as the CLI's flags (or ``timing=``: TimingOptions or a dict of its fields) and its bad
input refused with the CLI's message (a :class:`~harness.errors.HarnessError`, raised by the
options themselves) before a GPU is looked for; a call that needs a GPU where there is none
raises :class:`~harness.errors.NoGpu`. The records it returns are harness/records.py's.
Kernels run in worker processes, so one that faults or hangs ends its worker, not the Python
session: its result says so and the next call works.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import kinds
from harness.api_args import (  # noqa: F401 (dims_of, smallest_dims: read by testing.py)
    Chosen,
    SizeLike,
    _call_args,
    _flags,
    _run_options,
    _size,
    _sizes,
    _sizes_for,
    dims_of,
    smallest_dims,
)
from harness.archs import get_arch
from harness.commands import measure, place
from harness.commands.measure import DEFAULT_RUN_SIZES
from harness.compiler.offline import DEFAULT_SIZE, build_all
from harness.errors import HarnessError, NoGpu
from harness.gpu.timing import ISOLATED_GAP_MS, POWER_PASS_S, TimingOptions
from harness.kernels.registry import (
    DEFAULT_KERNEL_DIRS,
    KERNEL_SUFFIXES,
    Kernel,
    Registry,
    load_registry,
)
from harness.kinds import sizes as kernel_sizes
from harness.knobs import CARVEOUT
from harness.records import Build, Builds, KernelFailed, Plans, Results
from harness.report import files, runs
from harness.run.runner import RunOptions

__all__ = ["Build", "Builds", "KernelFailed", "KernelHandle", "NoGpu", "Plans", "Results",
           "compare", "kernel"]

_STEM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")


# --- kernels ---------------------------------------------------------------------------------

class _SourceFolder:
    """The private temporary folder that holds a kernel given as a source string, so that it
    compiles (and runs in a worker) by the same path as a file; removed when the last handle
    that holds it is gone."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="harness-source-"))
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.path),
                                           ignore_errors=True)

    def remove(self) -> None:
        self._finalizer()


class KernelHandle:
    """The kernels of one kernel file: every variant, or the one a ``stem:variant`` key names.
    Offline: :meth:`build`, :meth:`plan`; on a GPU: :meth:`check`, :meth:`run`."""

    def __init__(self, kernels: Sequence[Kernel], origin: str,
                 source: _SourceFolder | None = None):
        self.kernels: tuple[Kernel, ...] = tuple(kernels)
        """The registry records (harness.kernels.registry.Kernel)."""
        self.origin = origin
        """How the handle was made, as Python: what a report records as its command."""
        self._source = source  # keeps a source string's folder alive as long as the handle

    @property
    def name(self) -> str:
        """The file stem: the registry key of a file without variants."""
        return self.kernels[0].spec.stem

    @property
    def path(self) -> Path:
        return self.kernels[0].spec.path

    @property
    def spec(self):
        """The file's parsed spec (harness.kernels.spec.KernelSpec)."""
        return self.kernels[0].spec

    @property
    def names(self) -> tuple[str, ...]:
        """The registry key of each kernel (``stem`` or ``stem:variant``)."""
        return tuple(k.name for k in self.kernels)

    @property
    def variants(self) -> tuple[str, ...]:
        """The variant names the handle holds (empty for a file without variants)."""
        return tuple(k.variant for k in self.kernels if k.variant)

    def variant(self, name: str) -> KernelHandle:
        """The handle of one variant."""
        chosen = [k for k in self.kernels if k.variant == name]
        if not chosen:
            raise HarnessError(f"{self.name} has no variant {name!r}; its variants: "
                               f"{', '.join(self.variants) or 'none (name it by its stem)'}")
        return KernelHandle(chosen, f"{self.origin}.variant({name!r})", self._source)

    def __repr__(self) -> str:
        return f"<KernelHandle {', '.join(self.names)} ({self.path})>"

    def build(self, arch: str = "sm_90", size: SizeLike | None = None,
              carveout: int | None = None) -> Builds:
        """``harness build``: compile each kernel for ``arch`` (no GPU) and predict its
        occupancy at ``size`` (default 1024; a buffers kernel's, the smallest of its spec's
        sizes); ``carveout`` as ``harness occupancy --carveout`` (percent)."""
        CARVEOUT.check(carveout)
        get_arch(arch)
        if kernel_sizes.has_own_sizes(self.kernels[0]):
            first = self.kernels[0]
            at = kernel_sizes.slots(first, smallest_dims(first) if size is None
                                    else dims_of(first, size))
        else:
            at = _size(DEFAULT_SIZE if size is None else size)
        return Builds(Build.from_row(row) for row in build_all(self.kernels, arch, at, carveout))

    def plan(self) -> Plans:
        """``harness check --plan``: each kernel's check battery (no GPU)."""
        kind = kinds.of(self.spec)
        if not kind.takes("plan"):
            raise HarnessError(f"{self.name} is a {kind.title} kernel: its battery is the same "
                               "for every one (notes/buffers_kind.md lists it; .check() runs it)")
        return Plans(kind.plan(k) for k in self.kernels)

    def check(self, sizes: Sequence[SizeLike] | SizeLike | None = None, *,
              timeout_s: float | None = None, blas_strict: bool = False,
              quiet: bool = False, seed: int | None = None) -> Results:
        """``harness check``: the check battery and a check at each size on a GPU (default
        1024; a buffers kernel's, its spec's sizes), no timing and no report; ``quiet`` leaves
        out the progress lines on stderr; ``seed`` as ``--seed``."""
        return _check(self.kernels, sizes, timeout_s, blas_strict, quiet, seed)

    def run(self, sizes: Sequence[SizeLike] | SizeLike | None = None, *,
            cold_l2: bool = True, budget_ms: float = TimingOptions.budget_ms,
            min_ms: float = TimingOptions.min_ms,
            max_rel_se: float = TimingOptions.max_rel_se_pct,
            warmup_ms: float = TimingOptions.warmup_ms, rest: float = TimingOptions.rest,
            isolated: bool = False,
            gap_ms: float = ISOLATED_GAP_MS, power: bool = False, power_s: float = POWER_PASS_S,
            carveout: int | None = None, timeout_s: float | None = None,
            blas_strict: bool = False, report_dir: str | os.PathLike | None = None,
            quiet: bool = False, seed: int | None = None,
            timing: TimingOptions | Mapping[str, Any] | None = None) -> Results:
        """``harness run``: check and time each kernel against cuBLAS at each size on a GPU
        (default 512 to 4096; a buffers kernel, against its baseline at its spec's sizes). The
        options are the CLI's flags (``cold_l2=False`` is ``--hot``); ``timing``, the timing
        as TimingOptions or a dict of its fields, in place of the timing keywords.
        ``report_dir``: None writes nothing; a folder gets the reports ``harness run
        --report-dir`` writes (``<folder>/<gpu>/run-<time>.{json,md}``, paths in
        ``Results.report``)."""
        flags = _flags(KernelHandle.run, locals())
        chosen = _sizes_for(self.kernels, sizes, DEFAULT_RUN_SIZES)
        options = _run_options(flags, chosen[0], KernelHandle.run, carveout_pct=carveout)
        command = [f"{self.origin}.run({_call_args(chosen, flags, KernelHandle.run)})"]
        return _measure(self.kernels, options, "run", report_dir, command, quiet, chosen[1])


KernelLike = KernelHandle | str | os.PathLike
"""A kernel for :func:`compare`: a handle, a registry key, stem or glob, or a file's path."""


def kernel(target: str | os.PathLike | None = None, *, source: str | None = None,
           name: str = "kernel", suffix: str = ".cu",
           kernel_dir: Sequence[str | os.PathLike] = (), no_builtin: bool = False
           ) -> KernelHandle:
    """A kernel file's handle: ``target`` is its path (``my.cu``, ``my.cu:variant``) or a
    registry key (a stem, ``stem:variant``); or ``source`` is the file's text, spec block
    first, written as ``<name><suffix>`` (``.cu`` or ``.ptx``) to a private folder that lives
    as long as the handle. ``kernel_dir`` and ``no_builtin`` are the CLI's ``--kernel-dir``
    and ``--no-builtin``."""
    if (target is None) == (source is None):
        raise HarnessError("harness.kernel: pass a kernel file's path or registry key, or "
                           "source= with the file's text (spec block first), not "
                           + ("both" if source is not None else "neither"))
    if source is None:
        if not isinstance(target, str | os.PathLike):
            raise HarnessError(f"harness.kernel({target!r}): expected a kernel file's path or a "
                               "registry key (see `harness list`)")
        text = os.fspath(target)
        registry = _registry(kernel_dir, no_builtin)
        return _one_file(registry.select([text]), text, f"harness.kernel({text!r})")
    if not isinstance(source, str):
        raise HarnessError(f"source: expected the kernel file's text (str), found "
                           f"{type(source).__name__}")
    if not isinstance(name, str) or not _STEM.fullmatch(name):
        raise HarnessError(f"name {name!r}: expected a file stem (letters, digits, _ . + -), "
                           "the kernel's registry key")
    if suffix not in KERNEL_SUFFIXES:
        raise HarnessError(f"suffix {suffix!r}: expected one of {', '.join(KERNEL_SUFFIXES)} "
                           "(CUDA C++ or PTX)")
    folder = _SourceFolder()
    try:
        path = folder.path / f"{name}{suffix}"
        path.write_text(source, encoding="utf-8")
        kernels = _measurable(Registry([], [], None).select([str(path)]))
    except BaseException:
        folder.remove()
        raise
    return KernelHandle(kernels, f"harness.kernel(source=<{len(source)} characters>, "
                                 f"name={name!r}, suffix={suffix!r})", folder)


def compare(kernels: Sequence[KernelLike], sizes: Sequence[SizeLike] | SizeLike | None = None,
            *, cold_l2: bool = True, budget_ms: float = TimingOptions.budget_ms,
            min_ms: float = TimingOptions.min_ms,
            max_rel_se: float = TimingOptions.max_rel_se_pct,
            warmup_ms: float = TimingOptions.warmup_ms, rest: float = TimingOptions.rest,
            isolated: bool = False,
            gap_ms: float = ISOLATED_GAP_MS, timeout_s: float | None = None,
            blas_strict: bool = False, report_dir: str | os.PathLike | None = None,
            quiet: bool = False, kernel_dir: Sequence[str | os.PathLike] = (),
            no_builtin: bool = False, seed: int | None = None,
            timing: TimingOptions | Mapping[str, Any] | None = None) -> Results:
    """``harness compare``: two or more kernels (handles, registry keys, stems, globs or
    paths; the first is the reference) timed interleaved with cuBLAS, round by round, each with
    its speedup over the first, at ``sizes`` (default 4096). Buffers kernels of one set of dims
    are compared with each other (never with GEMMs), at the first one's spec sizes by default.
    Options and ``report_dir`` as :meth:`KernelHandle.run`."""
    flags = _flags(compare, locals())
    if isinstance(kernels, str | os.PathLike | KernelHandle):
        raise HarnessError("compare takes a list of two or more kernels (handles, registry "
                           "keys or paths); the first is the reference")
    chosen = _resolve(kernels, kernel_dir, no_builtin)
    if len(chosen) < 2:
        raise HarnessError(f"compare needs at least two kernels; {_labels(kernels)} matched "
                           f"{[k.name for k in chosen]}")
    chosen_sizes = _sizes_for(chosen, sizes, ("4096",), together=True)
    options = _run_options(flags, chosen_sizes[0], compare)
    command = [f"harness.compare({_labels(kernels)}, "
               f"{_call_args(chosen_sizes, flags, compare)})"]
    return _measure(chosen, options, "compare", report_dir, command, quiet)


# --- helpers ---------------------------------------------------------------------------------

def _registry(kernel_dir: Sequence[str | os.PathLike], no_builtin: bool) -> Registry:
    """The registry the CLI sees with ``--kernel-dir`` and ``--no-builtin``."""
    if isinstance(kernel_dir, str | os.PathLike):
        kernel_dir = [kernel_dir]
    folders = [] if no_builtin else list(DEFAULT_KERNEL_DIRS)
    return load_registry(folders + [Path(d) for d in kernel_dir], None)


def _measurable(kernels: list[Kernel]) -> list[Kernel]:
    """``kernels``, GEMMs and buffers kernels; another kind (a ceiling kernel) is refused."""
    for k in kernels:
        kind = kinds.of(k.spec)
        if not kind.takes("run"):
            raise HarnessError(f"{k.name} is a {kind.name!r} kernel; the API takes "
                               + " and ".join(o.title for o in kinds.all_kinds()
                                              if o.takes("run"))
                               + f" kernels (`{kind.runs_it()}` runs it)")
    return kernels


def _one_file(kernels: list[Kernel], pattern: str, origin: str) -> KernelHandle:
    if len({k.spec.path for k in kernels}) > 1:
        raise HarnessError(f"{pattern!r} matches kernels of several files "
                           f"({', '.join(k.name for k in kernels[:6])}"
                           f"{', ...' if len(kernels) > 6 else ''}); name one file stem, or "
                           "pass them all to harness.compare")
    return KernelHandle(_measurable(kernels), origin)


def _resolve(items: Sequence[KernelLike], kernel_dir, no_builtin: bool) -> list[Kernel]:
    """The kernels of handles and patterns, in order, each once; two different kernels under
    one name (a source string named as a registry key) are refused."""
    registry = None
    chosen: dict[tuple[Path, str], Kernel] = {}
    for item in items:
        if isinstance(item, KernelHandle):
            found = list(item.kernels)
        elif isinstance(item, str | os.PathLike):
            registry = registry or _registry(kernel_dir, no_builtin)
            found = _measurable(registry.select([os.fspath(item)]))
        else:
            raise HarnessError(f"{item!r}: expected a kernel handle (harness.kernel), a "
                               "registry key or a kernel file's path")
        for k in found:
            chosen.setdefault((k.spec.path.resolve(), k.name), k)
    by_name: dict[str, Kernel] = {}
    for k in chosen.values():
        if k.name in by_name:
            raise HarnessError(f"two kernels are named {k.name!r} ({by_name[k.name].spec.path} "
                               f"and {k.spec.path}): results are keyed by name; rename one "
                               "(name= for a source string)")
        by_name[k.name] = k
    return list(chosen.values())


def _labels(items) -> list[str]:
    if isinstance(items, str | os.PathLike | KernelHandle):
        items = [items]
    return [item.origin if isinstance(item, KernelHandle) else os.fspath(item)
            if isinstance(item, str | os.PathLike) else repr(item) for item in items]


def _target(what: str) -> place.Target:
    """GPU 0, one worker; NoGpu, saying what works without a GPU, where there is none."""
    return place.gpu(f"{what} needs one; without a GPU, a kernel's .build() (registers, "
                     "shared memory, spills, predicted occupancy) and .plan() (its check "
                     "battery) work")


def _say(quiet: bool) -> Callable[[str], None]:
    return (lambda line: None) if quiet else _stderr


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _check(kernels: Sequence[Kernel], sizes, timeout_s: float | None, blas_strict: bool,
           quiet: bool, seed: int | None = None) -> Results:
    sizes, own_sizes, _ = _sizes_for(kernels, sizes, ("1024",))
    options = RunOptions(sizes=sizes, timeout_s=timeout_s, strict_blas=blas_strict, seed=seed)
    target = _target(".check()")
    say = _say(quiet)
    say(f"harness check: {len(kernels)} kernel(s), their battery and {len(options.sizes)} "
        f"size(s) on {target.gpu_name} ({target.arch}), no timing")
    with tempfile.TemporaryDirectory(prefix="harness-check-") as folder:
        record = measure.run(kernels, options, target, Path(folder) / "check.jsonl", say,
                             mode="check", own_sizes=own_sizes)
    return Results(record.results, "check", record.device, None, record.wall_s)


def _measure(kernels: Sequence[Kernel], options: RunOptions, mode: str,
             report_dir: str | os.PathLike | None, command: list[str], quiet: bool,
             own_sizes: bool = True) -> Results:
    """``harness run`` (mode ``run``) or ``harness compare`` of ``kernels``: results only, or
    with the CLI's reports under ``report_dir``; ``own_sizes``: as measure.run's."""
    target = _target(".run()" if mode == "run" else "harness.compare()")
    say = _say(quiet)
    timing = options.timing
    say(f"harness {mode}: {len(kernels)} kernel(s) x {len(options.sizes)} size(s) on "
        f"{target.gpu_name} ({target.arch}), {'cold' if timing.cold_l2 else 'hot'} L2, "
        f"{timing.regime} launches")
    how = (measure.compare if mode == "compare" else
           lambda *args: measure.run(*args, own_sizes=own_sizes))
    if report_dir is None:
        with tempfile.TemporaryDirectory(prefix=f"harness-{mode}-") as folder:
            record = how(kernels, options, target, Path(folder) / f"{mode}.jsonl", say)
        return Results(record.results, mode, record.device, None, record.wall_s)
    stem = Path(report_dir) / files.gpu_slug(target.gpu_name) / f"{mode}-{files.run_stamp()}"
    record = how(kernels, options, target, stem.with_suffix(".jsonl"), say)
    if mode == "compare":
        report = runs.write_compare_report(record, command, timing, options.sizes, stem)
    else:
        report = runs.write_run_report(record, command, timing, options.sizes, stem,
                                       stream=stem.with_suffix(".jsonl"))
    say(f"written: {report[0]}, {report[1]}")
    return Results(record.results, mode, record.device, report, record.wall_s)
