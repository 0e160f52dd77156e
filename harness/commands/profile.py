"""``harness profile``: the napkin model beside Nsight Compute's counters (needs a GPU and ncu).

For each kernel: its harness timings first (sustained and isolated regimes, through the
runner: checked, then timed), then one ncu run of ``harness launch`` per size (checked again,
then launched; cuBLAS once per precision and size), then the report (report/profile.py).
Kernels of their own dims (buffers kernels) go the same way at their dims (``sizes`` holds
them padded with 1), alone under ncu where their kind launches no baseline, their rows their
kind's (Kind.profile_row).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness import kinds
from harness.bench import ncu, ncu_csv
from harness.bench.result import KernelInfo, Result
from harness.errors import HarnessError
from harness.gpu.timing import ISOLATED_GAP_MS, TimingOptions
from harness.kernels.registry import DEFAULT_KERNEL_DIRS, Kernel
from harness.kinds import sizes as kernel_sizes
from harness.knobs import GAP_MS, REPEATS, TIMEOUT_S, check_knobs, knob
from harness.report import files, napkin
from harness.report import profile as report
from harness.run.runner import RunOptions, run

Say = Callable[[str], None]
TIMINGS = {"both": ("sustained", "isolated"), "sustained": ("sustained",),
           "isolated": ("isolated",), "none": ()}


@dataclass(frozen=True)
class ProfileOptions:
    """How ``harness profile`` runs; checked when made."""

    sizes: tuple[tuple[int, int, int], ...] = ((4096, 4096, 4096),)
    """``--size``, repeatable: M, N, K; a buffers kernel's dims padded with 1."""
    metric_groups: tuple[str, ...] = ("all",)
    """``--metrics SET``: all, or sets of bench/ncu.py GROUPS."""
    repeats: int = knob(1, REPEATS)
    """``--repeats``: launches of the kernel (and of cuBLAS) profiled; the report takes the
    median (each costs a full set of ncu replay passes)."""
    regimes: tuple[str, ...] = TIMINGS["both"]
    """``--timing``: the harness regimes timed beside ncu."""
    gap_ms: float = knob(ISOLATED_GAP_MS, GAP_MS)
    """``--gap-ms``: the idle time before each isolated launch."""
    flag_factor: float = report.DEFAULT_FLAG_FACTOR
    """``--flag-factor``: a measured / predicted ratio beyond this either way is flagged."""
    ncu: str | None = None
    """``--ncu PATH``: the ncu to run (default: PATH, then NVIDIA's install folders)."""
    timeout_s: float = knob(600.0, TIMEOUT_S)
    """``--timeout-s``: the longest one kernel's ncu run may take."""

    def __post_init__(self) -> None:
        check_knobs(self)
        ncu.select(self.metric_groups)  # an unknown set fails here
        if self.flag_factor <= 1:
            raise HarnessError(f"--flag-factor {self.flag_factor:g}: expected a factor above 1")
        if not 0 < self.gap_ms <= 1000:
            raise HarnessError(f"--gap-ms {self.gap_ms:g}: expected 0 to 1000 ms")

    def timing(self, regime: str) -> TimingOptions:
        """How the harness times a kernel in ``regime`` beside ncu."""
        return TimingOptions(isolated_gap_ms=self.gap_ms if regime == "isolated" else 0.0)


@dataclass
class ProfileRecord:
    """The report's rows (report/profile.py), its metadata and the files written."""

    rows: list[dict] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    written: list[Path] = field(default_factory=list)

    @property
    def profiled(self) -> bool:
        """Every kernel (not cuBLAS) was profiled."""
        return all(r["status"] == "profiled" for r in self.rows if r["role"] == "kernel")


def profile(chosen: list[Kernel], options: ProfileOptions, gpu_name: str, report_dir: Path,
            command: Sequence[str], say: Say, kernel_dirs: Sequence[Path] = (),
            no_builtin: bool = False) -> ProfileRecord:
    """Time, profile and report ``chosen`` at every size; the report under
    ``report_dir/<gpu>/``. ``kernel_dirs`` and ``no_builtin``: the kernel folders the child
    ``harness launch`` is to read."""
    ncu_path = ncu.find_ncu(options.ncu)
    from harness.bench.session import BenchSession

    with BenchSession() as session:  # closed before ncu runs: one process on the GPU at once
        facts = session.facts()
        for kind in dict.fromkeys(kinds.of(k.spec) for k in chosen):
            facts.update(kind.library_facts(session))
        arch = session.arch
    metrics = ncu.select(options.metric_groups, arch)
    ncu_version = ncu.version(ncu_path)
    ncu.check_metrics(metrics, ncu.available_metrics(ncu_path),
                      f"ncu ({ncu_version}) on {gpu_name}")
    stem = files.new_stem(report_dir / files.gpu_slug(gpu_name), "profile",
                          f"-{options.regimes[0]}.jsonl" if options.regimes else None)
    t0 = time.perf_counter()
    say(f"harness profile: {len(chosen)} kernel(s) x {len(options.sizes)} size(s) on "
        f"{gpu_name} ({arch}) with {ncu_path} ({ncu_version}); harness timings: "
        f"{', '.join(options.regimes) or 'none'}")
    results = harness_timings(chosen, arch, options, stem, say)
    profiler = Profiler(options, ncu_path, metrics, arch, facts, stem, say, kernel_dirs,
                        no_builtin)
    record = ProfileRecord()
    steps = [(kernel.for_arch(arch), size) for kernel in chosen for size in options.sizes]
    for step, (kernel, size) in enumerate(steps, 1):
        timed = {regime: results.get((kernel.name, tuple(size), regime))
                 for regime in options.regimes}
        bad = next((r for r in timed.values() if r is not None and r.status != "pass"), None)
        if bad is not None:  # failed, or skipped for its constraints: nothing to profile
            record.rows.append(report.failed_row(kernel.name, info(kernel, size), size,
                                                 bad.status, f"not profiled: {bad.message}"))
            continue
        say(f"[{step}/{len(steps)} {time.perf_counter() - t0:6.1f} s] ncu: "
            f"{kernel.name} at {'x'.join(map(str, launch_size(kernel, size)))}")
        record.rows += profiler.rows(kernel, size, timed)
    record.meta = report.metadata(facts, options, chosen, arch, ncu_path, ncu_version, metrics,
                                  command)
    record.meta["wall_s"] = time.perf_counter() - t0
    record.written = report.write(record.meta, record.rows, stem, options.flag_factor,
                                  report.roofs(record.rows, facts),
                                  napkin.DRAM_BYTES_PER_S.get(files.gpu_slug(gpu_name)))
    return record


def predicted(kernel: Kernel, arch: str, size: tuple[int, int, int], sm_count: int = 132,
              l2_bytes: int = 50 << 20) -> dict:
    """The napkin model of ``kernel`` at ``size`` (none without a [model] table), its DRAM
    estimate by waves, and the harness's theoretical occupancy for ``arch``. A buffers
    kernel's napkin is its spec's ``bytes`` at its dims (``size``, padded with 1): compulsory
    and global bytes alike."""
    from harness.compiler.offline import build_row

    out = kinds.of(kernel.spec).napkin(kernel, size)
    built = build_row(kernel, arch, size)
    if built.get("occupancy_pct") is not None:
        out |= {"occupancy_pct": built["occupancy_pct"], "limiter": built["limiter"],
                "blocks_per_sm": built["blocks_per_sm"]}
        if "tile_m" in out:
            grid = math.prod(kernel.grid_dims(*size))
            waves = napkin.dram_bytes_waves(out, kernel.spec, *size, grid,
                                            built["blocks_per_sm"] * sm_count, l2_bytes)
            if waves is not None:
                out["dram_bytes_waves"] = waves
    return out


def info(kernel: Kernel, size: tuple[int, int, int]) -> dict:
    """What a report row says of the kernel: precision, file, parameters; a buffers kernel's
    dims at ``size`` (name -> value)."""
    kinfo = KernelInfo.of(kernel)
    out = {"precision": kinfo.precision, "file": kinfo.file, "params": kinfo.params}
    if kernel_sizes.has_own_sizes(kernel):
        out["dims"] = kernel_sizes.problem_at(kernel, size).as_dict()
    return out


def launch_size(kernel: Kernel, size: tuple[int, int, int]) -> tuple[int, ...]:
    """``size`` as ``harness launch --size`` takes it for ``kernel``: M, N, K, or a buffers
    kernel's dims (the padding dropped)."""
    return kernel_sizes.problem_at(kernel, size).values


def harness_timings(chosen: list[Kernel], arch: str, options: ProfileOptions, stem: Path,
                    say: Say) -> dict[tuple, Result]:
    """Every kernel checked and timed by the runner in each regime, by (name, size, regime);
    each regime's results also stream to ``<stem>-<regime>.jsonl``."""
    results = {}
    for regime in options.regimes:
        say(f"timing in the {regime} regime")
        record = run(chosen, arch, RunOptions(sizes=options.sizes,
                                              timing=options.timing(regime)),
                     stem.with_name(f"{stem.name}-{regime}.jsonl"), say)
        for r in record.results:
            results[(r.kernel.name, r.size, regime)] = r
    return results


class Profiler:
    """One ncu run per kernel and size, turned into report rows; cuBLAS is profiled with the
    first kernel of each precision, B layout, C type and size."""

    def __init__(self, options: ProfileOptions, ncu_path: str, metrics, arch: str, facts: dict,
                 stem: Path, say: Say, kernel_dirs: Sequence[Path], no_builtin: bool):
        self.opts, self.ncu_path, self.metrics = options, ncu_path, metrics
        self.arch, self.facts, self.stem, self.say = arch, facts, stem, say
        self.kernel_dirs, self.no_builtin = list(kernel_dirs), no_builtin
        self.done_baselines: set[tuple] = set()

    def rows(self, kernel: Kernel, size, timed: dict[str, Result | None]) -> list[dict]:
        spec, opts = kernel.spec, self.opts
        alone = not kinds.of(spec).launches_baseline  # its baseline is not launched there
        key = (spec.precision, spec.layout_b, spec.c_type, tuple(size))
        baseline = key not in self.done_baselines and not alone
        dirs, no_builtin = self.kernel_dirs, self.no_builtin
        about = info(kernel, size)
        cmd = ncu.command(self.ncu_path, self.metrics, ncu.launch_args(
            launch_pattern(kernel, dirs, no_builtin), launch_size(kernel, size), opts.repeats,
            baseline, dirs, no_builtin, dims=kernel_sizes.has_own_sizes(kernel)))
        try:
            text, launch_said = ncu.profile(cmd, opts.timeout_s)
        except HarnessError as exc:
            return [report.failed_row(kernel.name, about, size, "ncu error", str(exc))]
        saved = report.save_csv(text, self.stem, kernel.name, launch_size(kernel, size))
        try:
            ours, others = ncu_csv.split(ncu_csv.parse(text, self.metrics),
                                         kernel.entry_expression,
                                         opts.repeats)
            measured = ncu_csv.per_call(ours, self.metrics, opts.repeats)
        except HarnessError as exc:  # what the launch said explains a missing launch
            return [report.failed_row(kernel.name, about, size, "ncu error",
                                      f"{exc}; harness launch said: {ncu.tail(launch_said)}")]
        source = {"ncu_command": " ".join(cmd), "ncu_csv": saved}
        launched = {"ncu_kernels": sorted({launch.kernel_name for launch in ours}),
                    "launches": len(ours)}
        napkin_of = predicted(kernel, self.arch, size, self.facts["sm_count"],
                              self.facts["l2_bytes"])
        timings = {g: (r.timing if r else None) for g, r in timed.items()}
        out = [kinds.of(spec).profile_row(kernel.name, about, size, napkin_of, measured,
                                          timings, opts.flag_factor, **launched, **source)]
        if baseline and others:
            try:
                blas = ncu_csv.per_call(others, self.metrics, opts.repeats)
            except HarnessError as exc:
                self.say(f"cuBLAS beside {kernel.name} left out: {exc}")
                return out
            self.done_baselines.add(key)
            out.append(report.row(
                f"cuBLAS {spec.precision}", "baseline", {"precision": spec.precision}, size,
                {}, blas, {g: (r.baseline.timing if r and r.baseline else None)
                           for g, r in timed.items()}, opts.flag_factor,
                ncu_kernels=sorted({launch.kernel_name for launch in others}),
                launches=len(others), **source))
        return out


def launch_pattern(kernel: Kernel, kernel_dirs, no_builtin: bool) -> str:
    """How the child ``harness launch`` is told the kernel: its registry key when it lies in the
    kernel folders the child reads, else its path (a file given by path has no key)."""
    folders = [*(() if no_builtin else DEFAULT_KERNEL_DIRS), *kernel_dirs]
    path = kernel.spec.path.resolve()
    if any(path.is_relative_to(Path(d).resolve()) for d in folders):
        return kernel.name
    return kernel.selector
