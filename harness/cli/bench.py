"""Commands that measure on the GPU: run, compare, tune, ceiling, energy, launch."""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from tabulate import tabulate

from harness.archs import get_arch
from harness.bench.result import Result
from harness.cli import common
from harness.compiler.offline import build_all
from harness.errors import HarnessError
from harness.gpu.timing import TimingOptions
from harness.kernels.registry import Kernel, representatives
from harness.report import files, tables
from harness.report.width import fit_text
from harness.run.runner import RunOptions, RunRecord, parse_size, run

DEFAULT_RUN_SIZES = ("512", "1024", "2048", "4096")
WRONG_BY_DESIGN = {"NOLOAD", "NOSTORE"}
"""Measurement knobs that skip work: a kernel with one set must fail its check."""
ISOLATED_GAP_MS = 5.0
"""``--gap-ms``'s default: the idle time before each isolated launch, long enough for the
board's power to fall away, short enough to keep a timing brief."""


def _timing_flags(p: argparse.ArgumentParser, budget_ms: float = 300.0) -> None:
    p.add_argument("--budget-ms", type=float, default=budget_ms,
                   help=f"most GPU time per timing ({budget_ms:g})")
    p.add_argument("--min-ms", type=float, default=TimingOptions.min_ms,
                   help=f"least GPU time per timing ({TimingOptions.min_ms:g}, or the budget "
                   "when that is smaller)")
    p.add_argument("--max-rel-se", type=float, default=TimingOptions.max_rel_se_pct,
                   metavar="PCT", help="stop a timing once its median's relative standard "
                   f"error is at most PCT ({TimingOptions.max_rel_se_pct:g}); 0 spends the "
                   "whole budget")
    p.add_argument("--warmup-ms", type=float, default=TimingOptions.warmup_ms)
    p.add_argument("--rest", type=float, default=TimingOptions.rest, metavar="R",
                   help="with cold L2, sustained: before each launch of 10 us or more, rest "
                        f"the SMs R times its own time ({TimingOptions.rest:g}: half duty, the "
                        "card under its power cap whatever ran before); 0 times at full duty, "
                        "at the clock the power cap allows")
    p.add_argument("--isolated", action="store_true",
                   help="time isolated launches, each after a synchronise and --gap-ms idle, "
                        "as Nsight Compute does (default: sustained, back to back with the "
                        "queue kept full)")
    p.add_argument("--gap-ms", type=float, default=ISOLATED_GAP_MS,
                   help=f"with --isolated: the idle time before each launch ({ISOLATED_GAP_MS:g})")



def _timing(args, cold_l2: bool = True, power_s: float = 0.0, **overrides) -> TimingOptions:
    values = {"cold_l2": cold_l2, "budget_ms": args.budget_ms, "min_ms": args.min_ms,
              "max_rel_se_pct": args.max_rel_se, "warmup_ms": args.warmup_ms,
              "rest": args.rest,
              "power_s": power_s,
              "isolated_gap_ms": args.gap_ms if getattr(args, "isolated", False) else 0.0,
              **overrides}
    if values["min_ms"] > values["budget_ms"] and values["min_ms"] == TimingOptions.min_ms:
        values["min_ms"] = values["budget_ms"]  # the default floor follows a smaller cap
    if values["min_ms"] > values["budget_ms"]:
        raise HarnessError(f"--min-ms {values['min_ms']:g} is above --budget-ms "
                           f"{values['budget_ms']:g}: the floor must not exceed the cap")
    if getattr(args, "isolated", False) and not 0 < values["isolated_gap_ms"] <= 1000:
        raise HarnessError(f"--gap-ms {values['isolated_gap_ms']:g}: expected an idle gap "
                           "above 0 and up to 1000 ms before each isolated launch (5 lets the "
                           "power fall away)")
    return TimingOptions(**values)


def _power_flags(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--power", action="store_true",
                   help=f"after each timing, run {what} back to back with warm L2 for --power-s "
                        "seconds: the board's mean power and energy per FLOP")
    p.add_argument("--power-s", type=float, default=2.0, metavar="SECONDS",
                   help="length of each power pass (2; NVML's power moves every ~100 ms)")


_TIMEOUT_HELP = ("seconds without progress before a kernel is called hung (default: each "
                 "stage's own limit, scaled with the work of its launches: about 30 s at the "
                 "default sizes)")


def _spread_flags(p: argparse.ArgumentParser, what: str) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument("--gpus", metavar="all|I,J,...",
                       help=f"spread the {what} over these GPUs of this host, one worker "
                            "process each, fed from one queue: all, or device indices (0,2); "
                            "one index runs there alone (default: GPU 0)")
    where.add_argument("--cluster", metavar="ADDRESS|local",
                       help=f"spread the {what} over the GPUs of a Dask cluster, one Dask "
                            "worker per GPU: the scheduler's address (tcp://host:8786), or "
                            "local for a cluster of this host's GPUs; needs pip install -e "
                            "'.[cluster]'")


def _seed_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seed", type=_seed, metavar="N",
                   help="draw every input from this seed (default: a new one per run, which "
                        "the report records): replays a run's inputs")


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value < 2**31:
        raise argparse.ArgumentTypeError(f"{value} is outside 0..2147483647")
    return value


def add_parsers(sub) -> None:
    p = sub.add_parser("run", help="check, time and report against cuBLAS (needs a GPU)")
    p.add_argument("kernels", nargs="*", metavar="KERNEL",
                   help="registry keys, file stems, globs or kernel file paths (default: one "
                        "representative of each kernel file)")
    p.add_argument("--all", action="store_true", help="every variant of every kernel file")
    p.add_argument("--size", action="append", metavar="N|M,N,K",
                   help=f"problem size (repeatable; default {', '.join(DEFAULT_RUN_SIZES)})")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--cold", dest="cold_l2", action="store_true", default=True,
                      help="flush L2 before every repetition (default)")
    mode.add_argument("--hot", dest="cold_l2", action="store_false", help="warm L2, no flush")
    p.add_argument("--json", type=Path, metavar="PATH",
                   help="JSON-lines file the results are appended to as they come, kept "
                        "(default: reports/<gpu>/run-<time>.jsonl, removed once the run's "
                        ".json holds every result)")
    p.add_argument("--report-dir", type=Path, default=common.REPORTS,
                   help="where reports/<gpu>/ goes (default: the project's reports/)")
    p.add_argument("--timeout-s", type=float, default=None, help=_TIMEOUT_HELP)
    _timing_flags(p)
    _power_flags(p, "the kernel (and cuBLAS)")
    p.add_argument("--carveout", type=int, metavar="PCT")
    p.add_argument("--blas-strict", action="store_true",
                   help="a kernel that reads C when beta = 0 fails (default: a note)")
    _spread_flags(p, "kernels")
    _seed_flag(p)
    p.set_defaults(run=_run)

    p = sub.add_parser("check", help="the check battery: --plan lists it (no GPU); without "
                       "--plan it runs on the GPU, no timing")
    p.add_argument("kernels", nargs="+", metavar="KERNEL",
                   help="registry keys, file stems, globs or kernel file paths")
    p.add_argument("--plan", action="store_true",
                   help="print the checks each kernel gets (shape, alpha, beta, seed, repeats) "
                        "and what is skipped and why; needs no GPU")
    p.add_argument("--json", action="store_true", help="with --plan: print it as JSON")
    p.add_argument("--size", action="append", metavar="N|M,N,K",
                   help="also check at this size on the operands a run would time on "
                        "(default 1024)")
    p.add_argument("--timeout-s", type=float, default=None, help=_TIMEOUT_HELP)
    p.add_argument("--blas-strict", action="store_true",
                   help="a kernel that reads C when beta = 0 fails (default: a note)")
    _seed_flag(p)
    p.set_defaults(run=_check)

    p = sub.add_parser("compare", help="variants side by side, timed interleaved with cuBLAS")
    p.add_argument("kernels", nargs="+", metavar="KERNEL",
                   help="two or more (keys, stems, globs or paths); the first is the reference")
    p.add_argument("--size", action="append", metavar="N|M,N,K", help="default 4096")
    p.add_argument("--hot", dest="cold_l2", action="store_false", default=True,
                   help="warm L2 (default: flushed before every launch)")
    p.add_argument("--timeout-s", type=float, default=None, help=_TIMEOUT_HELP)
    p.add_argument("--report-dir", type=Path, default=common.REPORTS)
    p.add_argument("--blas-strict", action="store_true")
    p.add_argument("--gpus", metavar="I",
                   help="the one GPU to compare on (default 0): interleaving needs one GPU")
    _timing_flags(p)
    _seed_flag(p)
    p.set_defaults(run=_compare)

    p = sub.add_parser("tune", help="sweep a kernel's tile parameters: check, time, rank")
    p.add_argument("kernel", metavar="KERNEL", help="a kernel file stem or path (its [tune] space)")
    p.add_argument("--size", action="append", metavar="N|M,N,K",
                   help="problem size(s) (default 4096); ranked at the last one")
    p.add_argument("--param", action="append", default=[], metavar="NAME=v1,v2",
                   help="override or add a swept parameter (repeatable)")
    p.add_argument("--arch", help="target for --dry-run (default sm_90); with a GPU, the GPU's")
    p.add_argument("--jobs", type=int, default=4, help="parallel compiles (4)")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--dry-run", action="store_true",
                   help="screen the points (constraints, compile, fit, spills) and stop: "
                        "no GPU needed")
    p.add_argument("--pin", action="store_true",
                   help="write the best point into the kernel's spec as [tuned.<arch>]")
    p.add_argument("--timeout-s", type=float, default=None, help=_TIMEOUT_HELP)
    p.add_argument("--report-dir", type=Path, default=common.REPORTS)
    _spread_flags(p, "points")
    _timing_flags(p, budget_ms=100.0)
    _seed_flag(p)
    p.set_defaults(run=_tune)

    p = sub.add_parser("ceiling", help="the mma.sync (or wgmma) issue ceiling of this GPU, per "
                                       "precision (needs a GPU)")
    p.add_argument("--precision", action="append", metavar="PREC",
                   help="bf16 or fp16 (repeatable; default: every precision a ceiling kernel "
                        "covers)")
    p.add_argument("--family", choices=("mma.sync", "wgmma"), default="mma.sync",
                   help="the instruction family measured (mma.sync; wgmma: sm_90a)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--budget-ms", type=float, default=500.0,
                   help="GPU time per precision, turned into repetitions (500)")
    _power_flags(p, "the kernel")
    p.add_argument("--warmup-ms", type=float, default=100.0)
    p.add_argument("--launch-ms", type=float, default=2.0,
                   help="shortest GPU time of one launch; sets the iterations (2)")
    p.add_argument("--blocks-per-sm", type=int, action="append", metavar="N",
                   help="blocks per SM (repeatable: one row each, to see where the pipe "
                        "saturates; default: the kernel's [ceiling] blocks_per_sm)")
    p.add_argument("--report-dir", type=Path, default=common.REPORTS)
    p.set_defaults(run=_ceiling)

    p = sub.add_parser("energy", help="board energy per FLOP of a kernel and of its measurement "
                                      "knobs, round by round (needs a GPU)")
    p.add_argument("kernel", metavar="KERNEL")
    p.add_argument("--knob", action="append", default=[], metavar="NAME=V[,NAME=V]",
                   help="a point with these parameters set (repeatable); NOLOAD and NOSTORE "
                        "points must fail their check, every other point must pass")
    p.add_argument("--size", default="4096")
    p.add_argument("--seconds", type=float, default=2.0, help="power pass per point (2)")
    p.add_argument("--rounds", type=int, default=2, help="rounds over the points (2)")
    p.add_argument("--report-dir", type=Path, default=common.REPORTS)
    p.set_defaults(run=_energy)

    p = sub.add_parser("launch", help="check a kernel, then launch it (and cuBLAS) N times "
                                      "between cuProfilerStart/Stop: a profiler's target")
    p.add_argument("kernel", metavar="KERNEL")
    p.add_argument("--size", default="4096")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="override a parameter (the launches are then unchecked)")
    p.add_argument("--no-baseline", action="store_true", help="leave cuBLAS out")
    p.add_argument("--gap-ms", type=float, default=0.0,
                   help="sleep between launches (isolated launches; 0: back to back)")
    p.set_defaults(run=_launch)


def _power_seconds(args) -> float:
    """The power pass's length from --power and --power-s: 0 without --power."""
    if not args.power:
        return 0.0
    if not 0.5 <= args.power_s <= 60:
        raise HarnessError(f"--power-s {args.power_s:g}: expected seconds from 0.5 to 60 "
                           "(NVML's power reading moves every ~100 ms, so less says nothing; "
                           "2 is enough)")
    return args.power_s


def _sizes(args, default=("4096",)) -> tuple[tuple[int, int, int], ...]:
    return tuple(parse_size(s) for s in (args.size or default))


def _phases_lines(record: RunRecord) -> list[str]:
    """Where the run's wall time went, largest first."""
    total = record.wall_s or 1.0
    parts = sorted(record.phases.items(), key=lambda kv: -kv[1])
    accounted = sum(v for _, v in parts)
    lines = [f"{name}: {seconds:.1f} s ({100 * seconds / total:.0f}%)" for name, seconds in parts]
    lines.append(f"other (reports, process overhead): {max(0.0, total - accounted):.1f} s")
    return lines


def _run(args) -> int:
    chosen = common.kernels(args)
    if not args.kernels and not args.all:
        chosen = representatives(chosen)
    sizes = _sizes(args, DEFAULT_RUN_SIZES)
    power_s = _power_seconds(args)
    timing = _timing(args, cold_l2=args.cold_l2, power_s=power_s)
    options = RunOptions(sizes=sizes, timing=timing, carveout_pct=args.carveout,
                         timeout_s=args.timeout_s, strict_blas=args.blas_strict,
                         seed=args.seed)
    if args.cluster:
        from harness.run.cluster import Engine

        with Engine(args.cluster, common.say) as engine:
            return _run_and_report(
                args, chosen, sizes, timing, engine.models[0],
                f"a Dask cluster ({engine.describe()})",
                lambda jsonl: engine.run(chosen, options, jsonl, common.say))
    status = common.has_gpu()
    if not status.found:
        largest = max(sizes, key=lambda s: s[0] * s[1] * s[2])
        print(fit_text(f"no GPU here ({status.reason}): nothing can be checked or timed; the "
                       f"offline build report for sm_90 at {'x'.join(map(str, largest))} follows",
                       common.width(args)))
        rows = build_all(chosen, "sm_90", largest)
        print(tables.build_table(rows, width=common.width(args)))
        others = [r for size in sizes if size != largest for r in build_all(chosen, "sm_90", size)]
        for r in rows + others:
            if r["status"] != "ok":
                print(f"- {r['kernel']} at {'x'.join(map(str, r.get('size', largest)))}: "
                      f"{r['status']}: {r['message']}")
        raise common.NoGpu("`harness run` needs a GPU; the report above is what it can say "
                           "without one")
    slots, name, arch, where = _local_gpus(args)
    return _run_and_report(args, chosen, sizes, timing, name, f"{where} ({arch})",
                           lambda jsonl: run(chosen, arch, options, jsonl, common.say,
                                             gpus=slots))


def _local_gpus(args, ranked: str | None = None):
    """``--gpus`` as worker pins (None without it: the one worker, on GPU 0), the name and
    compile target of the first GPU, and the GPUs in words. ``ranked``: why GPUs of several
    models are refused (their results are ranked against each other)."""
    from harness.gpu.driver import device_arch_name
    from harness.run import gpus

    if getattr(args, "gpus", None) is None:
        name = common.gpu()
        return None, name, device_arch_name(), name
    shown = gpus.visible_gpus()
    chosen = gpus.choose_gpus(args.gpus, shown)
    if ranked:
        gpus.one_model(chosen, shown, ranked)
    first = shown[chosen[0]]
    where = (f"GPU {first.index}, {first.name}" if len(chosen) == 1 else
             f"{len(chosen)} GPUs (" + "; ".join(f"{i}: {shown[i].name}" for i in chosen) + ")")
    share = gpus.host_share(len(chosen))
    return ([gpus.slot(i, host_threads=share) for i in chosen], first.name, first.arch,
            where)


def _run_and_report(args, chosen, sizes, timing, gpu_name: str, where: str, measure) -> int:
    """The run's stream, its measurement (``measure(jsonl_path)``: a RunRecord), its reports
    (one per GPU model) and its table."""
    folder = args.report_dir / files.gpu_slug(gpu_name)
    stem = None if args.json else files.new_stem(folder, "run")  # claims the stream's name
    jsonl = args.json or Path(f"{stem}.jsonl")
    what = ("one representative of each kernel file" if not args.kernels and not args.all
            else f"{len(chosen)} kernels")
    common.say(f"harness run: {what} ({len(chosen)}) x {len(sizes)} sizes on {where}, "
               f"{'cold' if args.cold_l2 else 'hot'} L2, {timing.regime} launches; results "
               f"stream to {jsonl}")
    record = measure(jsonl)
    written = write_run_reports(record, ["harness", *sys.argv[1:]], timing, sizes,
                                jsonl.with_suffix(""), stream=None if args.json else jsonl,
                                report_dir=args.report_dir,
                                name=stem.name if stem else f"run-{files.run_stamp()}")
    print(tables.console_table(record.results, wide=args.wide))
    fails = tables.failures(record.results, common.width(args))
    if fails:
        print("\nNot passed:\n" + fails)
    summed = (f" (phases summed over {len(record.devices)} GPUs' workers)"
              if len(record.devices) > 1 else "")
    print("\n" + fit_text(f"wall time {record.wall_s:.1f} s{summed}: "
                          + "; ".join(_phases_lines(record)), common.width(args)))
    kept = f"{jsonl}, " if args.json else ""  # the default stream is gone: the JSON has it
    print(fit_text(f"written: {kept}" + ", ".join(f"{j}, {m}" for j, m in written),
                   common.width(args)))
    passed = all(r.status in ("pass", "skipped") for r in record.results)
    return common.EXIT_OK if passed else common.EXIT_FAILED


def _check(args) -> int:
    import json

    from harness.bench.plan import plan

    chosen = common.kernels(args)
    if args.plan:
        plans = [plan(kernel) for kernel in chosen]
        if args.json:
            print(json.dumps([p.to_json() for p in plans], indent=1))
        else:
            for p in plans:
                print(tables.plan_table(p, common.width(args)))
        return common.EXIT_OK if all(p.checks for p in plans) else common.EXIT_FAILED
    if args.json:
        raise HarnessError("--json goes with --plan (a GPU check prints its table and writes "
                           "no report)")
    sizes = _sizes(args, ("1024",))
    name = common.gpu()
    from harness.gpu.driver import device_arch_name

    arch = device_arch_name()
    common.say(f"harness check: {len(chosen)} kernel(s), their battery and {len(sizes)} "
               f"size(s) on {name} ({arch}), no timing")
    options = RunOptions(sizes=sizes, timeout_s=args.timeout_s, strict_blas=args.blas_strict,
                         seed=args.seed)
    with tempfile.TemporaryDirectory() as folder:
        record = run(chosen, arch, options, Path(folder) / "check.jsonl", common.say,
                     mode="check")
    print(tables.check_table(record.results, width=common.width(args)))
    fails = tables.failures(record.results, common.width(args))
    if fails:
        print("\nNot passed:\n" + fails)
    passed = all(r.status in ("pass", "skipped") for r in record.results)
    return common.EXIT_OK if passed else common.EXIT_FAILED


def _infos(record: RunRecord) -> list:
    return list({r.kernel.name: r.kernel for r in record.results}.values())


def write_run_report(record: RunRecord, command: Sequence[str], timing: TimingOptions,
                     sizes, stem: Path, stream: Path | None) -> tuple[Path, Path]:
    """``harness run``'s report of ``record``: ``stem.json`` and ``stem.md``; ``stream`` (the
    JSON-lines file the results came in through) is removed once the JSON holds them."""
    meta = files.metadata(record.device, command, asdict(timing), sizes, _infos(record))
    meta["wall_s"], meta["phases_s"] = record.wall_s, record.phases
    meta["seed"] = record.seed
    sections = _gpus_section(record, meta)
    return files.write_run(meta, record.results, stem, stream=stream, sections=sections)


def write_run_reports(record: RunRecord, command: Sequence[str], timing: TimingOptions,
                      sizes, stem: Path, stream: Path | None, report_dir: Path,
                      name: str) -> list[tuple[Path, Path]]:
    """``record``'s reports: one at ``stem`` when its rows ran on GPUs of one model, else one
    per model at ``report_dir/<gpu>/name`` (rows that ran on none, compile errors, go with the
    first model's); ``stream`` is removed once they are written."""
    parts = by_model(record)
    if len(parts) == 1:
        return [write_run_report(record, command, timing, sizes, stem, stream)]
    written = [write_run_report(part, command, timing, sizes, report_dir / slug / name, None)
               for slug, part in parts.items()]
    if stream is not None:
        stream.unlink(missing_ok=True)
    return written


def by_model(record: RunRecord) -> dict[str, RunRecord]:
    """``record`` split by the GPU model its rows ran on (``reports/<gpu>/`` names); rows that
    ran on no GPU go with the first model's, and a record of one model is returned whole."""
    slug_of = {}
    for facts in [record.device, *record.devices]:
        if facts.get("name"):
            slug_of.setdefault(files.gpu_slug(facts["name"]), facts)
    if len(slug_of) < 2:
        return {files.gpu_slug(record.device.get("name") or "gpu"): record}
    first = next(iter(slug_of))
    parts = {slug: RunRecord(device=facts, phases=record.phases, wall_s=record.wall_s,
                             devices=[d for d in record.devices
                                      if files.gpu_slug(d.get("name", "")) == slug])
             for slug, facts in slug_of.items()}
    for result in record.results:
        named = result.gpu is not None and result.gpu.name
        parts[files.gpu_slug(result.gpu.name) if named else first].results.append(result)
    return parts


def _gpus_section(record: RunRecord, meta: dict) -> list[str]:
    """With rows from several GPUs: each GPU in the metadata (``gpus``) and a markdown table
    of them with the rows each ran."""
    if len(record.devices) < 2:
        return []
    counts = {}
    for r in record.results:
        if r.gpu is not None:
            key = (r.gpu.host, r.gpu.uuid, r.gpu.index)
            counts[key] = counts.get(key, 0) + 1
    meta["gpus"] = [{"index": d.get("index"), "uuid": d.get("uuid"), "name": d.get("name"),
                     "host": d.get("host"), "pci_bus_id": d.get("pci_bus_id"),
                     "clocks": d.get("clocks")} for d in record.devices]
    rows = [[d.get("index"), d.get("host"), d.get("name"), d.get("uuid"),
             (d.get("clocks") or {}).get("max_sm_clock_mhz"),
             counts.get((d.get("host"), d.get("uuid"), d.get("index")), 0)]
            for d in record.devices]
    return ["## GPUs", "", "Each row of the results names the GPU it ran on (`gpu` in the "
            "JSON).", "", tabulate(rows, headers=["GPU", "host", "model", "UUID",
                                                    "max SM MHz", "rows"], tablefmt="github"),
            ""]


def with_sass(results: Sequence[Result], kernels: Sequence[Kernel], arch: str) -> list[Result]:
    """``results`` with each kernel's SASS instruction mix (the compare table's last column)."""
    from harness.compiler.compile import compile_kernel
    from harness.compiler.sass import disassemble, instruction_mix

    mixes = {}
    for kernel in kernels:
        kernel = kernel.for_arch(arch)
        mixes[kernel.name] = instruction_mix(disassemble(compile_kernel(kernel, arch).cubin))
    return [r.with_parts(sass=mixes.get(r.kernel.name, {})) for r in results]


def write_compare_report(record: RunRecord, results: Sequence[Result], command: Sequence[str],
                         timing: TimingOptions, sizes, stem: Path) -> tuple[Path, Path]:
    """``harness compare``'s report: ``stem.json`` and ``stem.md``, side by side first; the
    JSON-lines stream ``stem.jsonl`` is removed once the JSON holds the results."""
    meta = {**files.metadata(record.device, command, asdict(timing), sizes, _infos(record)),
            "mode": "interleaved: each round launches every kernel once, in order, each "
                    "followed by cuBLAS of its types, its baseline; "
                    "speedup = median over rounds of (first kernel's time / this one's), "
                    "p20-p80 of those ratios; 'within noise' when that range holds 1",
            "seed": record.seed}
    return files.write_run(meta, results, stem, title="harness compare",
                    sections=["## Side by side", "", tables.compare_table(results), "",
                              "## Every result", ""], stream=stem.with_suffix(".jsonl"))


def _compare(args) -> int:
    from harness.run.gpus import parse_gpus

    chosen = common.kernels(args)
    if len(chosen) < 2:
        raise HarnessError(f"compare needs at least two kernels; {args.kernels} matched "
                           f"{[k.name for k in chosen]}")
    named = parse_gpus(args.gpus) if args.gpus is not None else ()
    if named is None or len(named) > 1:
        raise HarnessError(f"--gpus {args.gpus}: compare times its kernels interleaved, round "
                           "by round, on one GPU; expected one GPU index (--gpus 1); to "
                           "spread kernels over several GPUs use harness run --gpus")
    sizes = _sizes(args)
    timing = _timing(args, cold_l2=args.cold_l2)
    common.gpu()
    slots, name, arch, _ = _local_gpus(args)
    stem = files.new_stem(args.report_dir / files.gpu_slug(name), "compare")
    options = RunOptions(sizes=sizes, timeout_s=args.timeout_s, timing=timing,
                         strict_blas=args.blas_strict, seed=args.seed)
    record = run(chosen, arch, options, stem.with_suffix(".jsonl"), common.say, mode="compare",
                 gpus=slots)
    results = with_sass(record.results, chosen, arch)
    json_path, md_path = write_compare_report(record, results, ["harness", *sys.argv[1:]],
                                              timing, sizes, stem)
    print(tables.compare_table(results) if args.wide else
          tables.compare_table(results, fmt="simple", width=common.width(args)))
    print(f"\nwritten: {json_path}, {md_path}")
    passed = all(r.status in ("pass", "skipped") for r in results)
    return common.EXIT_OK if passed else common.EXIT_FAILED


def _tune(args) -> int:
    from harness.run import tune

    chosen = common.kernels(args, patterns=[args.kernel])
    spec = chosen[0].spec
    if any(k.spec is not spec for k in chosen):
        raise HarnessError(f"{args.kernel!r} matches kernels of several files; name one file stem")
    base = Kernel(spec.stem, spec, tuple(sorted(spec.params.items())))
    space = {name: list(values) for name, values in spec.tune.items()}
    for item in args.param:
        name, _, values = item.partition("=")
        try:
            space[name.strip()] = [int(v) for v in values.split(",")]
        except ValueError:
            raise HarnessError(f"--param {item!r}: expected NAME=v1,v2,... with integers") from None
    sizes = _sizes(args)
    candidates = tune.points(base, space)  # an empty space or unknown names: bad input first
    timing = _timing(args, warmup_ms=min(args.warmup_ms, 10.0))
    if args.arch:
        get_arch(args.arch)
    if args.cluster and not args.dry_run:
        from harness.run.cluster import Engine

        with Engine(args.cluster, common.say) as engine:
            if len(engine.models) > 1:
                raise HarnessError(f"--cluster {args.cluster}: tune ranks its points against "
                                   "each other, so expected Dask workers with GPUs of one "
                                   f"model, got {', '.join(engine.models)}")
            facts = engine.known[0]  # for local, this host's view: screening need not wait
            common.say(f"harness tune on a Dask cluster: {engine.describe()}")
            return _tune_points(args, spec, space, candidates, sizes, timing, facts["name"],
                                facts["arch"], lambda keep, options, jsonl: engine.run(
                                    keep, options, jsonl, common.say, reuse_baseline=True))
    status = common.has_gpu()
    if not status.found and not args.dry_run:
        status.require("tuning times kernels; --dry-run screens the points without one")
    slots, name = None, status.name
    if status.found:
        slots, name, arch, where = _local_gpus(args, ranked="tune ranks its points against "
                                                            "each other")
        if slots and len(slots) > 1:
            common.say(f"harness tune on {where}")
    else:
        arch = args.arch or "sm_90"
    return _tune_points(args, spec, space, candidates, sizes, timing, name, arch,
                        lambda keep, options, jsonl: run(keep, arch, options, jsonl, common.say,
                                                         reuse_baseline=True, gpus=slots))


def _tune_points(args, spec, space, candidates, sizes, timing, gpu_name: str | None, arch: str,
                 measure) -> int:
    """Screen the points for ``arch``, time those worth it (``measure(points, options,
    jsonl_path)``: a RunRecord), rank, report and pin."""
    from harness.run import tune

    keep, skipped = tune.screen(candidates, arch, sizes, args.jobs, common.say)
    if args.dry_run or not keep:
        print(fit_text("\n".join(["skipped points:", *(f"- {k.name}: {reason}"
                                                        for k, reason in skipped)]),
                       common.width(args)))
        if not keep and not args.dry_run:
            print(f"\nnone of the {len(skipped)} points can be timed: nothing was run")
            return common.EXIT_FAILED
        print(f"\n{len(keep)} points would be timed" + "".join(f"\n  {k.name}" for k in keep))
        return common.EXIT_OK
    folder = args.report_dir / files.gpu_slug(gpu_name)
    stem = files.new_stem(folder, f"tune-{spec.stem}")
    options = RunOptions(sizes=sizes, timing=timing, timeout_s=args.timeout_s, seed=args.seed)
    record = measure(keep, options, stem.with_suffix(".jsonl"))
    top = tune.best(record.results, sizes[-1], args.top)
    skipped_rows = [{"kernel": k.name, "params": dict(k.params), "message": reason}
                    for k, reason in skipped]
    meta = {**files.metadata(record.device, ["harness", *sys.argv[1:]], asdict(timing), sizes,
                             _infos(record)),
            "space": space, "points": len(keep) + len(skipped), "timed": len(keep),
            "skipped": skipped_rows, "baseline": "cuBLAS timed once per size in each worker",
            "seed": record.seed}
    columns = tables.columns_without("precision")
    skips = "\n".join(f"- {r['kernel']}: {r['message']}" for r in skipped_rows) or "- none"
    json_path, _ = files.write_run(meta, record.results, stem, title="harness tune", sections=[
        *_gpus_section(record, meta),
        f"## Best {len(top)} at {'x'.join(map(str, sizes[-1]))}", "",
        tables.table(top, columns, fmt="github"), "", "## Skipped points", "", skips, "",
        "## Every timed point", ""], stream=stem.with_suffix(".jsonl"))
    print(tables.console_table(top, columns, wide=args.wide))
    print(f"\n{len(keep)} points timed, {len(skipped)} skipped (reasons in {json_path}); "
          f"ranked at {'x'.join(map(str, sizes[-1]))}")
    if args.pin and top:
        best_params = {n: top[0].kernel.params[n] for n in space}
        tune.pin(spec.path, arch, best_params)
        print(f"pinned [tuned.{arch}] {best_params} into {spec.path}")
    return common.EXIT_OK if top else common.EXIT_FAILED


def _ceiling(args) -> int:
    from harness.bench.ceiling import (
        CeilingOptions,
        ceiling_kernel,
        ceiling_precisions,
        measure_ceiling,
    )

    kernels = common.kernels(args, kind="ceiling", patterns=[])
    precisions = args.precision or ceiling_precisions(kernels, args.family)
    # a bad --precision fails here
    chosen = [ceiling_kernel(p, kernels, args.family) for p in precisions]
    power_s = _power_seconds(args)
    status = common.has_gpu()
    if not status.found:
        sass = "HGMMA" if args.family == "wgmma" else "HMMA"
        status.require(f"the {args.family} ceiling is measured on a GPU; `harness sass "
                       f"{' '.join(k.name for k in chosen)}` shows its {sass} without one")
    from harness.bench.session import BenchSession

    # hot L2: the kernels load nothing, so flushing would change nothing but the run time
    timing = TimingOptions(cold_l2=False, warmup_ms=args.warmup_ms, budget_ms=args.budget_ms,
                           max_rel_se_pct=0.0, power_s=power_s)
    launches = [CeilingOptions(launch_ms=args.launch_ms, blocks_per_sm=b)
                for b in args.blocks_per_sm or [None]]
    with BenchSession(timing) as session:
        rows = []
        for precision, kernel in zip(precisions, chosen, strict=True):
            for options in launches:
                common.say(f"measuring the {precision} ceiling ({kernel.name}) on "
                           f"{session.device.name}")
                rows.append(asdict(measure_ceiling(session.device, session.timer, precision,
                                                   options, kernels, args.family)))
        facts = session.facts()
    meta = {**files.metadata(facts, ["harness", *sys.argv[1:]], asdict(timing), (), chosen),
            "launch": [asdict(options) for options in launches]}
    stem = files.new_stem(args.report_dir / files.gpu_slug(facts["name"]), "ceiling", None)
    json_path, md_path = files.write_ceiling(meta, rows, stem)
    if args.json:
        import json

        print(json.dumps(files.jsonable(rows), indent=1))
    else:
        print(tables.ceiling_table(rows))
    print(f"\nwritten: {json_path}, {md_path}", file=sys.stderr if args.json else sys.stdout)
    return common.EXIT_OK


def _knob(text: str) -> dict[str, int]:
    """``"NOLOAD=1,NOSTORE=1"`` -> {"NOLOAD": 1, "NOSTORE": 1}."""
    knobs = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        try:
            if not sep or not name.strip():
                raise ValueError
            knobs[name.strip()] = int(value)
        except ValueError:
            raise HarnessError(f"{text!r}: expected NAME=INT[,NAME=INT...], e.g. NOSTORE=1 or "
                               "NOLOAD=1,NOSTORE=1") from None
    return knobs


def with_knobs(base: Kernel, setting: dict[str, int]) -> Kernel:
    """``base`` with ``setting`` over its parameters; unknown names fail."""
    unknown = sorted(set(setting) - set(dict(base.params)))
    if unknown:
        raise HarnessError(f"{base.name} has no parameter {', '.join(unknown)}; its "
                           f"parameters: {', '.join(sorted(dict(base.params)))}")
    label = ",".join(f"{k}={v}" for k, v in setting.items())
    return base.with_params(setting, f"{base.name}+{label}")


def _energy(args) -> int:
    if not 0.5 <= args.seconds <= 60 or args.rounds < 1:
        raise HarnessError(f"--seconds {args.seconds:g} --rounds {args.rounds}: expected "
                           "0.5 to 60 seconds (NVML's power moves every ~100 ms) and at "
                           "least one round")
    (base,) = common.kernels(args, patterns=[args.kernel])[:1]
    points = [(base, {})] + [(with_knobs(base, s), s) for s in map(_knob, args.knob)]
    m, n, k = parse_size(args.size)
    common.gpu()
    from harness.bench.checks import check_one
    from harness.bench.measure import launcher
    from harness.bench.session import BenchSession

    flop = 2.0 * m * n * k
    rows = []
    with BenchSession() as session:
        runs, ops = [], None
        for kernel, setting in points:
            gemm = session.load(kernel)
            checks = check_one(gemm, session.stream, m, n, k, seed=11)
            failed = [r.message for r in checks if not r.passed]
            checked = f"passed ({len(checks)} checks)"
            if failed and set(setting) & WRONG_BY_DESIGN:
                checked = "fails, as its measurement knob must"
            elif failed:
                raise HarnessError(f"{kernel.name} fails the check: {failed[0]}")
            elif set(setting) & WRONG_BY_DESIGN:
                raise HarnessError(f"{kernel.name} passes the check, but its knob should make "
                                   "it wrong: the knob is not reaching the kernel")
            ops = ops or session.operands(kernel, m, n, k, seed=11)
            runs.append((gemm.kernel, checked, launcher(gemm, ops, session)))
        for r in range(args.rounds):
            for kernel, checked, launch in runs:
                p = session.timer.power(launch, args.seconds)
                rows.append({"kernel": kernel.name, "round": r, "checked": checked,
                             "size": f"{m}x{n}x{k}", "power_w": p.power_w,
                             "power_span_s": p.span_s, "ms_per_launch": p.ms_per_launch,
                             "launches": p.launches, "tflops": flop / p.ms_per_launch / 1e9,
                             "pj_per_flop": 1e12 * p.energy_j / flop,
                             "nvml_sm_mhz": p.sm_clock_mhz, "clock_limits": p.clock_limits})
                common.say(f"round {r} {kernel.name}: {p.power_w:.0f} W, "
                           f"{rows[-1]['tflops']:.1f} TFLOP/s, "
                           f"{rows[-1]['pj_per_flop']:.3f} pJ/FLOP")
        ops.close()
        facts = session.facts()
    meta = files.metadata(facts, ["harness", *sys.argv[1:]], {}, [(m, n, k)],
                          [kernel for kernel, _ in points])
    summary = tabulate(_energy_summary(rows), headers=[
        "point", "checked", "rounds", "board W", "TFLOP/s", "NVML MHz", "pJ/FLOP median (range)",
        "clock held by"], tablefmt="github")
    method = (f"each point run back to back for {args.seconds:g} s with warm L2, {args.rounds} "
              "rounds in turn; board power from NVML's energy counter between its first and "
              "last move in the pass; pJ/FLOP = W x GPU time per launch / FLOP")
    stem = files.new_stem(args.report_dir / files.gpu_slug(facts["name"]), "kernel-energy", None)
    json_path, md_path = files.write_table_report(meta, rows, stem, "Board energy per FLOP",
                                                  [f"- method: {method}", "", summary, ""])
    print(summary)
    print(f"\nwritten: {json_path}, {md_path}")
    return common.EXIT_OK


def _energy_summary(rows: list[dict]) -> list[list]:
    """Per point: medians over the rounds, and the range of pJ/FLOP."""
    out = []
    for name in dict.fromkeys(r["kernel"] for r in rows):
        mine = [r for r in rows if r["kernel"] == name]
        pj = [r["pj_per_flop"] for r in mine]
        out.append([name, mine[0]["checked"], len(mine),
                    f"{statistics.median(r['power_w'] for r in mine):.0f}",
                    f"{statistics.median(r['tflops'] for r in mine):.1f}",
                    f"{statistics.median(r['nvml_sm_mhz'] for r in mine):.0f}",
                    f"{statistics.median(pj):.3f} ({min(pj):.3f}-{max(pj):.3f})",
                    ", ".join(sorted({r["clock_limits"] for r in mine}))])
    return out


def _launch(args) -> int:
    import time

    (kernel,) = common.kernels(args, patterns=[args.kernel])[:1]
    if args.param:
        kernel = with_knobs(kernel, _knob(",".join(args.param)))
    if args.repeats < 1:
        raise HarnessError(f"--repeats {args.repeats}: expected at least 1")
    m, n, k = parse_size(args.size)
    common.gpu()
    from harness.bench.checks import check_one
    from harness.bench.measure import launcher
    from harness.bench.session import BenchSession
    from harness.gpu.driver import profiler_range

    with BenchSession() as session:
        gemm = session.load(kernel)
        if not args.param:
            failed = [r for r in check_one(gemm, session.stream, m, n, k, seed=1)
                      if not r.passed]
            if failed:
                raise HarnessError(f"{kernel.name} fails its check at {m}x{n}x{k}: "
                                   f"{failed[0].message}")
        spec = gemm.kernel.spec
        ops = session.operands(gemm.kernel, m, n, k, seed=1)
        ops.poison_c(session.stream)
        run_kernel = launcher(gemm, ops, session)
        works = [run_kernel]
        if not args.no_baseline:
            works.append(lambda: session.blas.gemm(
                spec.precision, m, n, k, 1.0, ops.a.address, ops.b.address, 0.0, ops.out.address,
                spec.layout_b, spec.c_type, layout_a=ops.layout_a, layout_c=ops.layout_c))
        for work in works:  # first launches (module load, cuBLAS's choice) outside the range
            work()
        session.stream.synchronize("warm-up")
        with profiler_range():
            for work in works:
                for _ in range(args.repeats):
                    work()
                    if args.gap_ms:
                        session.stream.synchronize("isolated launch")
                        time.sleep(args.gap_ms / 1e3)
            session.stream.synchronize("launches")
        ops.close()
    common.say(f"launched {gemm.kernel.name}" + ("" if args.no_baseline else " and cuBLAS")
               + f" {args.repeats} times each at {m}x{n}x{k}"
               + (" (checked first)" if not args.param else " (unchecked: parameters set)"))
    return common.EXIT_OK
