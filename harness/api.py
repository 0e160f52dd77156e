"""The Python API: the CLI's commands as calls that return typed records, for notebooks, scripts
and tests.

    import harness
    k = harness.kernel("cu/sgemm/10_hoisted.cu")   # a path, a registry key, or source=...
    k.build(arch="sm_90")                          # offline: resources, predicted occupancy
    k.plan()                                       # offline: the check battery
    k.check(sizes=[1024])                          # GPU: the battery, no timing
    k.run(sizes=[4096])                            # GPU: checked and timed against cuBLAS
    harness.compare([k, "09_cp_async:s4"], sizes=[4096])

Every call runs the code the CLI runs (the registry, ``harness.compiler.offline``,
``harness.bench.plan``, ``harness.run.runner``), its options named as the CLI's flags and its
bad input refused with the CLI's message (a :class:`~harness.errors.HarnessError`) before a GPU
is looked for; a call that needs a GPU where there is none raises
:class:`~harness.errors.NoGpu`. Kernels run in worker processes, so one that faults or
hangs ends its worker, not the Python session: its result says so and the next call works.
"""

from __future__ import annotations

import html
import inspect
import os
import re
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from harness.archs import get_arch
from harness.bench.plan import Plan, plan
from harness.bench.result import Result
from harness.cli import common
from harness.cli.bench import (
    DEFAULT_RUN_SIZES,
    ISOLATED_GAP_MS,
    _power_seconds,
    _timing,
    with_sass,
    write_compare_report,
    write_run_report,
)
from harness.cli.common import NoGpu
from harness.compiler.offline import DEFAULT_SIZE, build_all
from harness.errors import HarnessError
from harness.gpu.timing import TimingOptions
from harness.kernels.registry import (
    DEFAULT_KERNEL_DIRS,
    KERNEL_SUFFIXES,
    Kernel,
    Registry,
    load_registry,
)
from harness.report import files, tables
from harness.run.runner import RunOptions, RunRecord, Size, parse_size, run

__all__ = ["Build", "Builds", "KernelFailed", "KernelHandle", "NoGpu", "Plans", "Results",
           "compare", "kernel"]

SizeLike = int | str | Sequence[int]
"""A problem size: ``N`` (square), ``"M,N,K"`` or ``(M, N, K)``."""
_STEM = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")


class KernelFailed(HarnessError):
    """:meth:`Results.raise_for_status` found results that did not pass; ``results`` holds
    them all."""

    def __init__(self, message: str, results: Results):
        super().__init__(message)
        self.results = results


# --- records and their tables ----------------------------------------------------------------

class _Rendered:
    """A record or collection that renders as the CLI's table: ``str()`` for the terminal,
    markdown and HTML for notebooks."""

    def _render(self, fmt: str) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self._render("simple")

    def __repr__(self) -> str:
        return self._render("simple")

    def _repr_markdown_(self) -> str:
        return self._render("github")

    def _repr_html_(self) -> str:
        return self._render("html")


def _with_notes(table: str, notes: str, fmt: str) -> str:
    """``table`` followed by ``notes`` (the messages of what did not pass), in ``fmt``."""
    if not notes:
        return table
    if fmt == "html":
        return f"{table}\n<p>Not passed:</p>\n<pre>{html.escape(notes)}</pre>"
    gap = "\n\n" if fmt == "github" else "\n"
    return f"{table}\n\nNot passed:{gap}{notes}"


@dataclass(frozen=True)
class Build(_Rendered):
    """One kernel compiled offline for one arch (``harness build``): the ptxas report and the
    predicted occupancy at one problem size. ``status``: ok, cannot launch, compile error or
    skipped (below the kernel's min_arch), with ``message`` saying why."""

    kernel: str
    arch: str
    """The compile target: the arch asked for, or sm_90a where the kernel's min_arch says so."""
    file: str
    params: dict[str, int]
    status: str
    message: str
    registers: int | None = None
    static_smem_bytes: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    stack_frame_bytes: int | None = None
    barriers: int | None = None
    block_threads: int | None = None
    block: tuple[int, ...] | None = None
    grid: tuple[int, ...] | None = None
    size: tuple[int, ...] | None = None
    dynamic_smem_bytes: int | None = None
    blocks_per_sm: int | None = None
    """Predicted by the offline calculator (harness.compiler.occupancy)."""
    occupancy_pct: float | None = None
    limiter: str | None = None
    compiler: str | None = None
    cached: bool | None = None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Build:
        """A record from a row of :func:`harness.compiler.offline.build_row`."""
        known = {f.name for f in fields(cls)}
        return cls(**{key: tuple(value) if isinstance(value, list) else value
                      for key, value in row.items() if key in known})

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        """The row ``harness build --json`` prints for this kernel."""
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in fields(self) if getattr(self, f.name) is not None}

    def _render(self, fmt: str) -> str:
        return Builds([self])._render(fmt)


class Builds(_Rendered, list[Build]):
    """The :class:`Build` of each kernel of a handle, in registry order."""

    @property
    def ok(self) -> bool:
        return all(b.status in ("ok", "skipped") for b in self)

    def to_rows(self) -> list[dict[str, Any]]:
        return [b.to_dict() for b in self]

    def _render(self, fmt: str) -> str:
        notes = "\n".join(f"- {b.kernel} ({b.arch}): {b.status}: {b.message}"
                          for b in self if b.status != "ok")
        return _with_notes(tables.build_table(self.to_rows(), fmt=fmt), notes, fmt)


class Plans(_Rendered, list[Plan]):
    """The check battery (:class:`~harness.bench.plan.Plan`) of each kernel of a handle, as
    ``harness check --plan`` prints it."""

    def to_rows(self) -> list[dict[str, Any]]:
        return [p.to_json() for p in self]

    def _render(self, fmt: str) -> str:
        text = "\n".join(tables.plan_table(p) for p in self)
        if fmt == "html":
            return f"<pre>{html.escape(text)}</pre>"
        return f"```text\n{text}```" if fmt == "github" else text


class Results(_Rendered, list[Result]):
    """The :class:`~harness.bench.result.Result` records of a check, run or compare (``mode``),
    as ``harness run`` writes them; ``report`` holds the (json, md) paths where a report was
    written, ``device`` the GPU's facts, ``wall_s`` the call's wall time."""

    def __init__(self, results: Iterable[Result] = (), mode: str = "run",
                 device: dict | None = None, report: tuple[Path, Path] | None = None,
                 wall_s: float = 0.0):
        super().__init__(results)
        self.mode, self.device, self.report, self.wall_s = mode, device or {}, report, wall_s

    @property
    def passed(self) -> bool:
        """Every result passed (or was skipped on purpose)."""
        return all(r.passed for r in self)

    def failures(self) -> str:
        """The message of every result that did not pass, one line each ("" when none)."""
        return tables.failures(self)

    def raise_for_status(self) -> Results:
        """These results, or :class:`KernelFailed` with the messages of those that did not
        pass (a fault, a hang, a failed check, a compile error)."""
        if not self.passed:
            raise KernelFailed(self.failures(), self)
        return self

    def to_rows(self) -> list[dict[str, Any]]:
        """Plain dicts (the JSON of each result, as in a run report)."""
        return [r.to_json() for r in self]

    def _render(self, fmt: str) -> str:
        if self.mode == "compare":
            table = tables.compare_table(self, fmt="github" if fmt == "simple" else fmt)
        elif self.mode == "check":
            table = tables.check_table(self, fmt=fmt)
        else:
            table = tables.table(self, fmt=fmt)
        return _with_notes(table, self.failures(), fmt)


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

    def build(self, arch: str = "sm_90", size: SizeLike = DEFAULT_SIZE,
              carveout: int | None = None) -> Builds:
        """``harness build``: compile each kernel for ``arch`` (no GPU) and predict its
        occupancy at ``size``; ``carveout`` as ``harness occupancy --carveout`` (percent)."""
        common.check_options(SimpleNamespace(carveout=carveout))
        get_arch(arch)
        return Builds(Build.from_row(row)
                      for row in build_all(self.kernels, arch, _size(size), carveout))

    def plan(self) -> Plans:
        """``harness check --plan``: each kernel's check battery (no GPU)."""
        return Plans(plan(k) for k in self.kernels)

    def check(self, sizes: Sequence[SizeLike] | SizeLike = ("1024",), *,
              timeout_s: float | None = None, blas_strict: bool = False,
              quiet: bool = False, seed: int | None = None) -> Results:
        """``harness check``: the check battery and a check at each size on a GPU, no timing
        and no report; ``quiet`` leaves out the progress lines on stderr; ``seed`` as
        ``--seed``."""
        return _check(self.kernels, sizes, timeout_s, blas_strict, quiet, seed)

    def run(self, sizes: Sequence[SizeLike] | SizeLike = DEFAULT_RUN_SIZES, *,
            cold_l2: bool = True, budget_ms: float = 300.0,
            min_ms: float = TimingOptions.min_ms,
            max_rel_se: float = TimingOptions.max_rel_se_pct,
            warmup_ms: float = TimingOptions.warmup_ms, rest: float = TimingOptions.rest,
            isolated: bool = False,
            gap_ms: float = ISOLATED_GAP_MS, power: bool = False, power_s: float = 2.0,
            carveout: int | None = None, timeout_s: float | None = None,
            blas_strict: bool = False, report_dir: str | os.PathLike | None = None,
            quiet: bool = False, seed: int | None = None) -> Results:
        """``harness run``: check and time each kernel against cuBLAS at each size on a GPU.
        The options are the CLI's flags (``cold_l2=False`` is ``--hot``). ``report_dir``:
        None writes nothing; a folder gets the reports ``harness run --report-dir`` writes
        (``<folder>/<gpu>/run-<time>.{json,md}``, paths in ``Results.report``)."""
        flags = _flags(KernelHandle.run, locals())
        args = SimpleNamespace(**flags, kernels=None)
        common.check_options(args)
        sizes_ = _sizes(sizes)
        timing = _timing(args, cold_l2=cold_l2, power_s=_power_seconds(args))
        options = RunOptions(sizes=sizes_, timing=timing, carveout_pct=carveout,
                             timeout_s=timeout_s, strict_blas=blas_strict, seed=seed)
        command = [f"{self.origin}.run({_call_args(sizes_, flags, KernelHandle.run)})"]
        return _measure(self.kernels, options, "run", report_dir, command, quiet)


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
        kernels = Registry([], [], "gemm").select([str(path)])
    except BaseException:
        folder.remove()
        raise
    return KernelHandle(kernels, f"harness.kernel(source=<{len(source)} characters>, "
                                 f"name={name!r}, suffix={suffix!r})", folder)


def compare(kernels: Sequence[KernelLike], sizes: Sequence[SizeLike] | SizeLike = ("4096",),
            *, cold_l2: bool = True, budget_ms: float = 300.0,
            min_ms: float = TimingOptions.min_ms,
            max_rel_se: float = TimingOptions.max_rel_se_pct,
            warmup_ms: float = TimingOptions.warmup_ms, rest: float = TimingOptions.rest,
            isolated: bool = False,
            gap_ms: float = ISOLATED_GAP_MS, timeout_s: float | None = None,
            blas_strict: bool = False, report_dir: str | os.PathLike | None = None,
            quiet: bool = False, kernel_dir: Sequence[str | os.PathLike] = (),
            no_builtin: bool = False, seed: int | None = None) -> Results:
    """``harness compare``: two or more kernels (handles, registry keys, stems, globs or
    paths; the first is the reference) timed interleaved with cuBLAS, round by round, each with
    its speedup over the first. Options and ``report_dir`` as :meth:`KernelHandle.run`."""
    flags = _flags(compare, locals())
    if isinstance(kernels, str | os.PathLike | KernelHandle):
        raise HarnessError("compare takes a list of two or more kernels (handles, registry "
                           "keys or paths); the first is the reference")
    chosen = _resolve(kernels, kernel_dir, no_builtin)
    if len(chosen) < 2:
        raise HarnessError(f"compare needs at least two kernels; {_labels(kernels)} matched "
                           f"{[k.name for k in chosen]}")
    args = SimpleNamespace(**flags, kernels=None)
    common.check_options(args)
    sizes_ = _sizes(sizes)
    timing = _timing(args, cold_l2=cold_l2)
    options = RunOptions(sizes=sizes_, timeout_s=timeout_s, timing=timing,
                         strict_blas=blas_strict, seed=seed)
    command = [f"harness.compare({_labels(kernels)}, {_call_args(sizes_, flags, compare)})"]
    return _measure(chosen, options, "compare", report_dir, command, quiet)


# --- helpers ---------------------------------------------------------------------------------

def _registry(kernel_dir: Sequence[str | os.PathLike], no_builtin: bool) -> Registry:
    """The registry the CLI sees with ``--kernel-dir`` and ``--no-builtin``."""
    if isinstance(kernel_dir, str | os.PathLike):
        kernel_dir = [kernel_dir]
    folders = [] if no_builtin else list(DEFAULT_KERNEL_DIRS)
    return load_registry(folders + [Path(d) for d in kernel_dir], "gemm")


def _one_file(kernels: list[Kernel], pattern: str, origin: str) -> KernelHandle:
    if len({k.spec.path for k in kernels}) > 1:
        raise HarnessError(f"{pattern!r} matches kernels of several files "
                           f"({', '.join(k.name for k in kernels[:6])}"
                           f"{', ...' if len(kernels) > 6 else ''}); name one file stem, or "
                           "pass them all to harness.compare")
    return KernelHandle(kernels, origin)


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
            found = registry.select([os.fspath(item)])
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


def _size(value: SizeLike) -> Size:
    """One problem size: N, "N", "M,N,K" or (M, N, K), checked as ``--size`` is."""
    if isinstance(value, int) and not isinstance(value, bool):
        return parse_size(str(value))
    if isinstance(value, str):
        return parse_size(value)
    if isinstance(value, Sequence) and len(value) == 3 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return parse_size(",".join(map(str, value)))
    raise HarnessError(f"size {value!r}: expected N, 'M,N,K' or (M, N, K) with positive "
                       "integers")


def _sizes(sizes: Sequence[SizeLike] | SizeLike) -> tuple[Size, ...]:
    """Problem sizes, each as :func:`_size` takes it; a lone N or "M,N,K" is one size."""
    if isinstance(sizes, int | str):
        sizes = [sizes]
    if not isinstance(sizes, Sequence) or not sizes:
        raise HarnessError(f"sizes {sizes!r}: expected a list of one or more sizes (N, "
                           "'M,N,K' or (M, N, K))")
    return tuple(_size(s) for s in sizes)


def _flags(function: Callable, given: dict[str, Any]) -> dict[str, Any]:
    """The keyword options of a call (its locals), as the CLI's argparse destinations: the
    names the CLI's own option checks read."""
    names = [p.name for p in inspect.signature(function).parameters.values()
             if p.kind is inspect.Parameter.KEYWORD_ONLY]
    return {name: given[name] for name in names}


def _call_args(sizes: tuple[Size, ...], flags: dict[str, Any], function: Callable) -> str:
    """The call's sizes and the options it set, as Python (a report's command)."""
    defaults = {p.name: p.default for p in inspect.signature(function).parameters.values()}
    text = [f"sizes={['x'.join(map(str, s)) for s in sizes]!r}"]
    text += [f"{name}={value!r}" for name, value in flags.items()
             if name not in ("quiet", "report_dir") and value != defaults.get(name)]
    return ", ".join(text)


def _gpu(what: str) -> tuple[str, str]:
    """The GPU's name and compile target; NoGpu, saying what works without one, where there
    is none."""
    name = common.has_gpu().require(
        f"{what} needs one; without a GPU, a kernel's .build() (registers, shared memory, "
        "spills, predicted occupancy) and .plan() (its check battery) work")
    from harness.gpu.driver import device_arch_name

    return name, device_arch_name()


def _say(quiet: bool) -> Callable[[str], None]:
    return (lambda line: None) if quiet else common.say


def _check(kernels: Sequence[Kernel], sizes, timeout_s: float | None, blas_strict: bool,
           quiet: bool, seed: int | None = None) -> Results:
    sizes_ = _sizes(sizes)
    common.check_options(SimpleNamespace(timeout_s=timeout_s))
    name, arch = _gpu(".check()")
    say = _say(quiet)
    say(f"harness check: {len(kernels)} kernel(s), their battery and {len(sizes_)} size(s) on "
        f"{name} ({arch}), no timing")
    options = RunOptions(sizes=sizes_, timeout_s=timeout_s, strict_blas=blas_strict, seed=seed)
    with tempfile.TemporaryDirectory(prefix="harness-check-") as folder:
        record = run(kernels, arch, options, Path(folder) / "check.jsonl", say, mode="check")
    return Results(record.results, "check", record.device, None, record.wall_s)


def _measure(kernels: Sequence[Kernel], options: RunOptions, mode: str,
             report_dir: str | os.PathLike | None, command: list[str], quiet: bool) -> Results:
    """``harness run`` (mode ``run``) or ``harness compare`` of ``kernels``: results only, or
    with the CLI's reports under ``report_dir``."""
    name, arch = _gpu(".run()" if mode == "run" else "harness.compare()")
    say = _say(quiet)
    timing = options.timing
    say(f"harness {mode}: {len(kernels)} kernel(s) x {len(options.sizes)} size(s) on {name} "
        f"({arch}), {'cold' if timing.cold_l2 else 'hot'} L2, {timing.regime} launches")
    report = None
    if report_dir is None:
        with tempfile.TemporaryDirectory(prefix=f"harness-{mode}-") as folder:
            record = run(kernels, arch, options, Path(folder) / f"{mode}.jsonl", say,
                         mode=mode)
        results = _finished(record, kernels, arch, mode)
    else:
        stem = Path(report_dir) / files.gpu_slug(name) / f"{mode}-{files.run_stamp()}"
        record = run(kernels, arch, options, stem.with_suffix(".jsonl"), say, mode=mode)
        results = _finished(record, kernels, arch, mode)
        if mode == "compare":
            write_compare_report(record, results, command, timing, options.sizes, stem)
            report = (stem.with_suffix(".json"), stem.with_suffix(".md"))
        else:
            report = write_run_report(record, command, timing, options.sizes, stem,
                                      stream=stem.with_suffix(".jsonl"))
        say(f"written: {report[0]}, {report[1]}")
    return Results(results, mode, record.device, report, record.wall_s)


def _finished(record: RunRecord, kernels: Sequence[Kernel], arch: str, mode: str
              ) -> list[Result]:
    """The run's results; a compare's with each kernel's SASS mix, as the CLI shows them."""
    return with_sass(record.results, kernels, arch) if mode == "compare" else record.results

