"""``harness profile``: the napkin model beside Nsight Compute's counters (needs a GPU and ncu).

For each kernel: its harness timings first (sustained and isolated regimes, through the
runner: checked, then timed), then one ncu run of ``harness launch`` per size (checked again,
then launched; cuBLAS once per precision and size), then the report (report/profile.py).
"""

from __future__ import annotations

import gzip
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.bench import ncu, ncu_csv
from harness.bench.result import KernelInfo, Result
from harness.cli import common
from harness.cli.bench import ISOLATED_GAP_MS
from harness.errors import HarnessError
from harness.gpu.timing import TimingOptions
from harness.kernels.registry import DEFAULT_KERNEL_DIRS, Kernel
from harness.report import files, napkin
from harness.report import profile as report
from harness.run.runner import RunOptions, parse_size, run

TIMINGS = {"both": ("sustained", "isolated"), "sustained": ("sustained",),
           "isolated": ("isolated",), "none": ()}


@dataclass(frozen=True)
class ProfileOptions:
    """How ``harness profile`` runs."""

    sizes: tuple[tuple[int, int, int], ...] = ((4096, 4096, 4096),)
    """``--size``, repeatable."""
    metric_groups: tuple[str, ...] = ("all",)
    """``--metrics SET``: all, or sets of bench/ncu.py GROUPS."""
    repeats: int = 1
    """``--repeats``: launches of the kernel (and of cuBLAS) profiled; the report takes the
    median (each costs a full set of ncu replay passes)."""
    regimes: tuple[str, ...] = TIMINGS["both"]
    """``--timing``: the harness regimes timed beside ncu."""
    gap_ms: float = ISOLATED_GAP_MS
    """``--gap-ms``: the idle time before each isolated launch."""
    flag_factor: float = report.DEFAULT_FLAG_FACTOR
    """``--flag-factor``: a measured / predicted ratio beyond this either way is flagged."""
    ncu: str | None = None
    """``--ncu PATH``: the ncu to run (default: PATH, then NVIDIA's install folders)."""
    timeout_s: float = 600.0
    """``--timeout-s``: the longest one kernel's ncu run may take."""


def add_parsers(sub) -> None:
    p = sub.add_parser("profile", help="the napkin model beside Nsight Compute's counters: "
                                       "bytes, bank conflicts, occupancy, stalls, time (needs "
                                       "a GPU and ncu)")
    p.add_argument("kernels", nargs="+", metavar="KERNEL",
                   help="registry keys, file stems, globs or kernel file paths")
    p.add_argument("--size", action="append", metavar="N|M,N,K", help="default 4096")
    p.add_argument("--metrics", default="all", metavar="SET",
                   help=f"all (default), or a comma list of {', '.join(ncu.GROUPS)} (time is "
                        "always collected; fewer sets, fewer replay passes)")
    p.add_argument("--repeats", type=int, default=ProfileOptions.repeats,
                   help="launches profiled per kernel, median taken (1)")
    p.add_argument("--timing", choices=tuple(TIMINGS), default="both",
                   help="harness timings beside ncu's: both regimes (default), one, or none")
    p.add_argument("--gap-ms", type=float, default=ISOLATED_GAP_MS,
                   help=f"idle time before each isolated launch ({ISOLATED_GAP_MS:g})")
    p.add_argument("--flag-factor", type=float, default=report.DEFAULT_FLAG_FACTOR,
                   help="flag a measured / predicted ratio off by more than this (2)")
    p.add_argument("--ncu", metavar="PATH", help="the ncu executable")
    p.add_argument("--timeout-s", type=float, default=ProfileOptions.timeout_s,
                   help="longest ncu run for one kernel (600)")
    p.add_argument("--report-dir", type=Path, default=common.REPORTS)
    p.set_defaults(run=_profile)


def options(args) -> ProfileOptions:
    """The command's options from its arguments; bad values are named."""
    groups = tuple(g.strip() for g in args.metrics.split(",") if g.strip())
    ncu.select(groups)  # an unknown set fails here
    if args.repeats < 1:
        raise HarnessError(f"--repeats {args.repeats}: expected at least 1")
    if args.flag_factor <= 1:
        raise HarnessError(f"--flag-factor {args.flag_factor:g}: expected a factor above 1")
    if not 0 < args.gap_ms <= 1000:
        raise HarnessError(f"--gap-ms {args.gap_ms:g}: expected 0 to 1000 ms")
    return ProfileOptions(sizes=tuple(parse_size(s) for s in (args.size or ["4096"])),
                          metric_groups=groups, repeats=args.repeats,
                          regimes=TIMINGS[args.timing], gap_ms=args.gap_ms,
                          flag_factor=args.flag_factor, ncu=args.ncu, timeout_s=args.timeout_s)


def _timing_options(regime: str, opts: ProfileOptions) -> TimingOptions:
    return TimingOptions(isolated_gap_ms=opts.gap_ms if regime == "isolated" else 0.0)


def predicted(kernel: Kernel, arch: str, size: tuple[int, int, int], sm_count: int = 132,
              l2_bytes: int = 50 << 20) -> dict:
    """The napkin model of ``kernel`` at ``size`` (none without a [model] table), its DRAM
    estimate by waves, and the harness's theoretical occupancy for ``arch``."""
    from harness.compiler.offline import build_row

    out = dict(napkin.model(kernel.spec, dict(kernel.params), *size)) if kernel.spec.model \
        else {}
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


def _info(kernel: Kernel) -> dict:
    info = KernelInfo.of(kernel)
    return {"precision": info.precision, "file": info.file, "params": info.params}


def _profile(args) -> int:
    opts = options(args)
    chosen = common.kernels(args)
    gpu_name = common.gpu()
    ncu_path = ncu.find_ncu(opts.ncu)
    from harness.bench.session import BenchSession

    with BenchSession() as session:  # closed before ncu runs: one process on the GPU at once
        facts = {**session.facts(), "cublas_version": session.blas.version}
        arch = session.arch
    metrics = ncu.select(opts.metric_groups, arch)
    ncu_version = ncu.version(ncu_path)
    ncu.check_metrics(metrics, ncu.available_metrics(ncu_path),
                      f"ncu ({ncu_version}) on {gpu_name}")
    stem = files.new_stem(args.report_dir / files.gpu_slug(gpu_name), "profile",
                          f"-{opts.regimes[0]}.jsonl" if opts.regimes else None)
    t0 = time.perf_counter()
    common.say(f"harness profile: {len(chosen)} kernel(s) x {len(opts.sizes)} size(s) on "
               f"{gpu_name} ({arch}) with {ncu_path} ({ncu_version}); harness timings: "
               f"{', '.join(opts.regimes) or 'none'}")
    results = _harness_timings(chosen, arch, opts, stem)
    profiler = _Profiler(args, opts, ncu_path, metrics, arch, facts, stem)
    rows = []
    steps = [(kernel.for_arch(arch), size) for kernel in chosen for size in opts.sizes]
    for step, (kernel, size) in enumerate(steps, 1):
        timed = {regime: results.get((kernel.name, tuple(size), regime))
                 for regime in opts.regimes}
        bad = next((r for r in timed.values() if r is not None and r.status != "pass"), None)
        if bad is not None:  # failed, or skipped for its constraints: nothing to profile
            rows.append(report.failed_row(kernel.name, _info(kernel), size, bad.status,
                                          f"not profiled: {bad.message}"))
            continue
        common.say(f"[{step}/{len(steps)} {time.perf_counter() - t0:6.1f} s] ncu: "
                   f"{kernel.name} at {'x'.join(map(str, size))}")
        rows += profiler.rows(kernel, size, timed)

    meta = _meta(facts, opts, chosen, arch, ncu_path, ncu_version, metrics)
    meta["wall_s"] = time.perf_counter() - t0
    written = report.write(meta, rows, stem, opts.flag_factor, _roofs(rows, facts),
                           napkin.DRAM_BYTES_PER_S.get(files.gpu_slug(gpu_name)))
    for line in report.sections(rows, opts.flag_factor, fmt="simple"):
        print(line)
    print(f"wall time {meta['wall_s']:.0f} s; written: {', '.join(map(str, written))}")
    ok = all(r["status"] == "profiled" for r in rows if r["role"] == "kernel")
    return common.EXIT_OK if ok else common.EXIT_FAILED


def _harness_timings(chosen: list[Kernel], arch: str, opts: ProfileOptions, stem: Path
                     ) -> dict[tuple, Result]:
    """Every kernel checked and timed by the runner in each regime, by (name, size, regime);
    each regime's results also stream to ``<stem>-<regime>.jsonl``."""
    results = {}
    for regime in opts.regimes:
        common.say(f"timing in the {regime} regime")
        record = run(chosen, arch, RunOptions(sizes=opts.sizes,
                                              timing=_timing_options(regime, opts)),
                     stem.with_name(f"{stem.name}-{regime}.jsonl"), common.say)
        for r in record.results:
            results[(r.kernel.name, r.size, regime)] = r
    return results


class _Profiler:
    """One ncu run per kernel and size, turned into report rows; cuBLAS is profiled with the
    first kernel of each precision, B layout, C type and size."""

    def __init__(self, args, opts: ProfileOptions, ncu_path: str, metrics, arch: str,
                 facts: dict, stem: Path):
        self.args, self.opts, self.ncu_path, self.metrics = args, opts, ncu_path, metrics
        self.arch, self.facts, self.stem = arch, facts, stem
        self.done_baselines: set[tuple] = set()

    def rows(self, kernel: Kernel, size, timed: dict[str, Result | None]) -> list[dict]:
        spec, opts = kernel.spec, self.opts
        key = (spec.precision, spec.layout_b, spec.c_type, tuple(size))
        baseline = key not in self.done_baselines
        dirs, no_builtin = self.args.kernel_dir or [], self.args.no_builtin
        cmd = ncu.command(self.ncu_path, self.metrics, ncu.launch_args(
            _launch_pattern(kernel, dirs, no_builtin), size, opts.repeats, baseline, dirs,
            no_builtin))
        try:
            text, launch_said = ncu.profile(cmd, opts.timeout_s)
        except HarnessError as exc:
            return [report.failed_row(kernel.name, _info(kernel), size, "ncu error", str(exc))]
        saved = _save_csv(text, self.stem, kernel.name, size)
        try:
            ours, others = ncu_csv.split(ncu_csv.parse(text, self.metrics),
                                         kernel.entry_expression,
                                         opts.repeats)
            measured = ncu_csv.per_call(ours, self.metrics, opts.repeats)
        except HarnessError as exc:  # what the launch said explains a missing launch
            return [report.failed_row(kernel.name, _info(kernel), size, "ncu error",
                                      f"{exc}; harness launch said: {ncu.tail(launch_said)}")]
        source = {"ncu_command": " ".join(cmd), "ncu_csv": saved}
        out = [report.row(
            kernel.name, "kernel", _info(kernel), size,
            predicted(kernel, self.arch, size, self.facts["sm_count"], self.facts["l2_bytes"]),
            measured, {g: (r.timing if r else None) for g, r in timed.items()},
            opts.flag_factor, ncu_kernels=sorted({launch.kernel_name for launch in ours}),
            launches=len(ours), **source)]
        if baseline and others:
            try:
                blas = ncu_csv.per_call(others, self.metrics, opts.repeats)
            except HarnessError as exc:
                common.say(f"cuBLAS beside {kernel.name} left out: {exc}")
                return out
            self.done_baselines.add(key)
            out.append(report.row(
                f"cuBLAS {spec.precision}", "baseline", {"precision": spec.precision}, size,
                {}, blas, {g: (r.baseline.timing if r and r.baseline else None)
                           for g, r in timed.items()}, opts.flag_factor,
                ncu_kernels=sorted({launch.kernel_name for launch in others}),
                launches=len(others), **source))
        return out


def _launch_pattern(kernel: Kernel, kernel_dirs, no_builtin: bool) -> str:
    """How the child ``harness launch`` is told the kernel: its registry key when it lies in the
    kernel folders the child reads, else its path (a file given by path has no key)."""
    folders = [*(() if no_builtin else DEFAULT_KERNEL_DIRS), *kernel_dirs]
    path = kernel.spec.path.resolve()
    if any(path.is_relative_to(Path(d).resolve()) for d in folders):
        return kernel.name
    return kernel.selector


def _meta(facts: dict, opts: ProfileOptions, chosen: list[Kernel], arch: str, ncu_path: str,
          ncu_version: str, metrics) -> dict:
    """The report's provenance: files.metadata, how each regime was timed, and ncu's part."""
    meta = files.metadata(facts, ["harness", *sys.argv[1:]], asdict(TimingOptions()),
                          opts.sizes, [KernelInfo.of(k.for_arch(arch)) for k in chosen])
    meta["timing"] = {regime: {**asdict(_timing_options(regime, opts)),
                               "method": files.timing_method(asdict(_timing_options(regime,
                                                                                   opts)))}
                      for regime in opts.regimes}
    meta["timing"]["l2"] = "cold (flushed before every repetition; ncu: --cache-control all)"
    meta["ncu"] = {"path": ncu_path, "version": ncu_version,
                   "clock_control": ncu.CLOCK_CONTROL, "cache_control": ncu.CACHE_CONTROL,
                   "metrics": {m.key: m.name for m in metrics}}
    meta["options"] = asdict(opts)
    return meta


def _save_csv(text: str, stem: Path, name: str, size) -> str:
    """ncu's CSV of one kernel, gzipped beside the report: where every number came from."""
    folder = stem.parent / f"{stem.name}-ncu"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name.replace(':', '-')}-{'x'.join(map(str, size))}.csv.gz"
    with gzip.open(path, "wt") as f:
        f.write(text)
    return str(path.relative_to(stem.parent))


def _roofs(rows: list[dict], facts: dict) -> dict[str, float]:
    """The dense peak (GFLOP/s) of each precision profiled, at the median SM clock ncu saw."""
    from harness.archs import get_arch

    clocks = [r["derived"]["ncu_sm_clock_mhz"] for r in rows
              if r["status"] == "profiled" and "ncu_sm_clock_mhz" in r["derived"]]
    if not clocks:
        return {}
    arch = get_arch(facts["arch"])
    mhz = statistics.median(clocks)
    return {p.upper(): arch.fma_flops_per_clock_per_sm[p] * facts["sm_count"] * mhz / 1e3
            for p in sorted({r.get("precision") for r in rows if r.get("precision")})
            if p in arch.fma_flops_per_clock_per_sm}

