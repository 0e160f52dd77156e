"""Commands that measure on the GPU: run, compare, check, tune (their flags, what they print,
their exit status); ceiling, energy and launch are in cli/power.py, a run without a GPU in
cli/offline_run.py. The work is the command layer's (harness/commands/), the reports
report/'s."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from harness import kinds
from harness.archs import get_arch
from harness.bench.phases import beside
from harness.cli import common, flags, power
from harness.cli.offline_run import builds_itself, run_offline, runs_offline
from harness.commands import measure, place, tune
from harness.commands.measure import DEFAULT_RUN_SIZES
from harness.errors import HarnessError
from harness.kernels.registry import Kernel, representatives
from harness.kinds import sizes as kernel_sizes
from harness.report import files, runs, tables
from harness.report.width import fit_text
from harness.run.runner import RunRecord


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
    p.add_argument("--timeout-s", type=float, default=None, help=flags.TIMEOUT_HELP)
    flags.timing_flags(p)
    flags.power_flags(p, "the kernel (and cuBLAS)")
    p.add_argument("--carveout", type=int, metavar="PCT")
    p.add_argument("--blas-strict", action="store_true",
                   help="a kernel that reads C when beta = 0 fails (default: a note)")
    flags.spread_flags(p, "kernels")
    flags.seed_flag(p)
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
    p.add_argument("--timeout-s", type=float, default=None, help=flags.TIMEOUT_HELP)
    p.add_argument("--blas-strict", action="store_true",
                   help="a kernel that reads C when beta = 0 fails (default: a note)")
    flags.seed_flag(p)
    p.set_defaults(run=_check)

    p = sub.add_parser("compare", help="variants side by side, timed interleaved with cuBLAS")
    p.add_argument("kernels", nargs="+", metavar="KERNEL",
                   help="two or more (keys, stems, globs or paths); the first is the reference")
    p.add_argument("--size", action="append", metavar="N|M,N,K", help="default 4096")
    p.add_argument("--hot", dest="cold_l2", action="store_false", default=True,
                   help="warm L2 (default: flushed before every launch)")
    p.add_argument("--timeout-s", type=float, default=None, help=flags.TIMEOUT_HELP)
    p.add_argument("--report-dir", type=Path, default=common.REPORTS)
    p.add_argument("--blas-strict", action="store_true")
    p.add_argument("--gpus", metavar="I",
                   help="the one GPU to compare on (default 0): interleaving needs one GPU")
    flags.timing_flags(p)
    flags.seed_flag(p)
    p.set_defaults(run=_compare)

    p = sub.add_parser("tune", help="sweep a kernel's tile parameters: check, time, rank")
    p.add_argument("kernel", metavar="KERNEL", help="a kernel file stem or path (its [tune] space)")
    p.add_argument("--size", action="append", metavar="N|M,N,K",
                   help="problem size(s) (default 4096; a buffers kernel's dims, \"1<<28\", "
                        "default its spec's largest size); ranked at the last one")
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
    p.add_argument("--timeout-s", type=float, default=None, help=flags.TIMEOUT_HELP)
    p.add_argument("--report-dir", type=Path, default=common.REPORTS)
    flags.spread_flags(p, "points")
    flags.timing_flags(p, budget_ms=100.0)
    flags.seed_flag(p)
    p.set_defaults(run=_tune)

    power.add_parsers(sub)


def _phases_lines(record: RunRecord) -> list[str]:
    """Where the run's wall time went, largest first."""
    total = record.wall_s or 1.0
    parts = sorted(record.phases.items(), key=lambda kv: -kv[1])
    accounted = sum(v for name, v in parts if not beside(name))  # those overlap the others
    lines = [f"{name}: {seconds:.1f} s ({100 * seconds / total:.0f}%)" for name, seconds in parts]
    lines.append(f"other (reports, process overhead): {max(0.0, total - accounted):.1f} s")
    return lines


def _run(args) -> int:
    if not args.cluster and args.gpus is None:
        from harness.run.process import start_ahead

        start_ahead()  # the one worker's start beside reading the kernels and the GPU
    status = None if args.cluster else common.has_gpu()
    if status is not None and not status.found:
        return _offline(args, status.reason)
    chosen = _gemms_and_buffers(args)
    dims = _buffer_sizes(args, chosen)
    options = flags.run_options(args, DEFAULT_RUN_SIZES, **_as_sizes(dims))
    if not args.kernels and not args.all:
        chosen = representatives(chosen)
    if args.cluster:
        with place.cluster(args.cluster, common.say) as target:
            return _run_and_report(args, chosen, options, target,
                                   f"a Dask cluster ({target.where})", not dims)
    target = place.local(args.gpus)
    return _run_and_report(args, chosen, options, target, f"{target.where} ({target.arch})",
                           not dims)



def _gemms_and_buffers(args, takes=None) -> list[Kernel]:
    """The kernels named (GEMMs and buffers kernels; ``takes(kind)``, those it takes); the
    default run's GEMMs without names."""
    return (common.gemms_and_buffers(args, "run", takes=takes) if args.kernels
            else common.kernels(args))


def _offline(args, why: str) -> int:
    """``harness run`` without a GPU: what the build says of every kernel a run takes, and
    of a kind that builds its kernels itself offline (at its own sizes)."""
    chosen = _gemms_and_buffers(args, runs_offline)
    if not args.kernels and not args.all:
        chosen = representatives(chosen)
    measured = [k for k in chosen if not builds_itself(k)]
    sizes: tuple = ()
    if measured:  # --size read by their kinds (a kind that builds itself reads its own)
        dims = _buffer_sizes(args, measured)
        sizes = flags.run_options(args, DEFAULT_RUN_SIZES, **_as_sizes(dims)).sizes
        if not args.size and all(kernel_sizes.has_own_sizes(k) for k in measured):
            sizes = kernel_sizes.own_slots(measured[0])
    return run_offline(chosen, sizes, why, common.width(args), tuple(args.size or ()))


def _as_sizes(dims: Sequence[tuple[int, int, int]]) -> dict:
    """``run_options``'s sizes for the slots ``dims`` of kernels of their own dims; none for
    []."""
    return {"sizes": tuple(dims)} if dims else {}


def _buffer_sizes(args, chosen: Sequence[Kernel]) -> list[tuple[int, int, int]]:
    """``--size`` read by the kind of the kernels chosen that name their own dims ("1<<28",
    "4096x1024"), as the run's slots; [] without --size or such kernels. Every kernel of such
    a run takes sizes of one rank, and GEMMs are run apart (their --size is M,N,K)."""
    own = [k for k in chosen if kernel_sizes.has_own_sizes(k)]
    if not own or not args.size:
        return []
    common.one_size_rank(list(chosen), "run")
    return [kernel_sizes.read_slots(own[0], text) for text in args.size]



def _run_and_report(args, chosen, options, target: place.Target, where: str,
                    own_sizes: bool = True) -> int:
    """The run's stream, its measurement, its reports (one per GPU model) and its table;
    ``own_sizes``: buffers kernels at their spec's sizes (else at options.sizes, --size)."""
    folder = args.report_dir / files.gpu_slug(target.gpu_name)
    stem = None if args.json else files.new_stem(folder, "run")  # claims the stream's name
    jsonl = args.json or Path(f"{stem}.jsonl")
    what = ("one representative of each kernel file" if not args.kernels and not args.all
            else f"{len(chosen)} kernels")
    timing = options.timing
    common.say(f"harness run: {what} ({len(chosen)}) x {len(options.sizes)} sizes on {where}, "
               f"{'cold' if timing.cold_l2 else 'hot'} L2, {timing.regime} launches; results "
               f"stream to {jsonl}")
    record = measure.run(chosen, options, target, jsonl, common.say,
                         own_sizes=own_sizes)
    written = runs.write_run_reports(record, ["harness", *sys.argv[1:]], timing, options.sizes,
                                     jsonl.with_suffix(""), stream=None if args.json else jsonl,
                                     report_dir=args.report_dir,
                                     name=stem.name if stem else f"run-{files.run_stamp()}")
    print("\n\n".join(kind.table(rows, console=True, wide=args.wide)
                      for kind, rows in kinds.split(record.results))
          or tables.console_table([], wide=args.wide))
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
    return _status(record.results)


def _status(results) -> int:
    passed = all(r.status in ("pass", "skipped") for r in results)
    return common.EXIT_OK if passed else common.EXIT_FAILED


def _check(args) -> int:
    if args.plan:
        return _plan(args)
    if args.json:
        raise HarnessError("--json goes with --plan (a GPU check prints its table and writes "
                           "no report)")
    chosen = _gemms_and_buffers(args)
    dims = _buffer_sizes(args, chosen)
    options = flags.run_options(args, ("1024",), **_as_sizes(dims))
    target = place.gpu()
    common.say(f"harness check: {len(chosen)} kernel(s), their battery and "
               f"{len(options.sizes)} size(s) on {target.gpu_name} ({target.arch}), no timing")
    record = measure.check(chosen, options, target, common.say,
                           own_sizes=not dims)
    print(tables.check_table(record.results, width=common.width(args)))
    fails = tables.failures(record.results, common.width(args))
    if fails:
        print("\nNot passed:\n" + fails)
    return _status(record.results)


def _plan(args) -> int:
    """``harness check --plan``: the battery of each kernel named whose kind derives it from
    the kernel's spec (GEMM, attention; no GPU), the others left out with why."""
    import json

    chosen = common.kernels(args, kind=None) if args.kernels else common.kernels(args)
    left = [k for k in chosen if not kinds.of(k.spec).takes("plan")]
    chosen = [k for k in chosen if kinds.of(k.spec).takes("plan")]
    if left:
        kind = kinds.of(left[0].spec)
        why = (f"--plan lists the batteries kernels derive from their spec; a {kind.name} "
               "kernel's is the same for every one (its kind's notes say which)")
        if not chosen:
            raise HarnessError(why)
        common.say(f"harness: {', '.join(k.name for k in left)} left out: {why}")
    if args.size and not any(kernel_sizes.has_own_sizes(k) for k in chosen):
        flags.run_options(args, ("1024",))  # a GEMM's --size refused as a run refuses it
    plans = [kinds.of(kernel.spec).plan(kernel) for kernel in chosen]
    if args.json:
        print(json.dumps([p.to_json() for p in plans], indent=1))
    else:
        for p in plans:
            print(p.table(common.width(args)))
    return common.EXIT_OK if all(p.checks for p in plans) else common.EXIT_FAILED


def _compare(args) -> int:
    from harness.run.gpus import parse_gpus

    chosen = _gemms_and_buffers(args)
    buffers = [k for k in chosen if kernel_sizes.has_own_sizes(k)]
    if buffers and len(buffers) < len(chosen):
        raise HarnessError("compare times GEMMs against each other or buffers kernels against "
                           "each other; these are both: compare them apart")
    if buffers and len({kernel_sizes.dims_of(k) for k in buffers}) > 1:
        raise HarnessError("compare needs buffers kernels of the same dims; found "
                           + ", ".join(f"{k.name} ({' x '.join(kernel_sizes.dims_of(k))})"
                                       for k in buffers))
    dims = (_buffer_sizes(args, chosen) or list(kernel_sizes.own_slots(buffers[0]))
            if buffers else [])
    options = flags.run_options(args, **_as_sizes(dims))
    if len(chosen) < 2:
        raise HarnessError(f"compare needs at least two kernels; {args.kernels} matched "
                           f"{[k.name for k in chosen]}")
    named = parse_gpus(args.gpus) if args.gpus is not None else ()
    if named is None or len(named) > 1:
        raise HarnessError(f"--gpus {args.gpus}: compare times its kernels interleaved, round "
                           "by round, on one GPU; expected one GPU index (--gpus 1); to "
                           "spread kernels over several GPUs use harness run --gpus")
    place.gpu()
    target = place.local(args.gpus)
    stem = files.new_stem(args.report_dir / files.gpu_slug(target.gpu_name), "compare")
    record = measure.compare(chosen, options, target, stem.with_suffix(".jsonl"), common.say)
    json_path, md_path = runs.write_compare_report(record, ["harness", *sys.argv[1:]],
                                                   options.timing, options.sizes, stem)
    print("\n\n".join(kind.table(rows, mode="compare", console=True, wide=args.wide,
                                 width=common.width(args))
                      for kind, rows in kinds.split(record.results))
          or tables.compare_table(record.results))
    print(f"\nwritten: {json_path}, {md_path}")
    return _status(record.results)


_RANKED = "tune ranks its points against each other"


def _tune(args) -> int:
    chosen = common.gemms_and_buffers(args, "tune", patterns=[args.kernel])
    dims = _buffer_sizes(args, chosen)
    if not dims and kernel_sizes.has_own_sizes(chosen[0]):  # ranked at its spec's largest
        dims = list(kernel_sizes.own_slots(chosen[0])[-1:])
    options = tune.TuneOptions(flags.run_options(
        args, timing=flags.timing(args, warmup_ms=min(args.warmup_ms, 10.0)),
        **_as_sizes(dims)),
        tuple(args.param), args.jobs, args.top)
    planned = tune.plan(chosen, args.kernel, options)
    if args.arch:
        get_arch(args.arch)
    if args.cluster and not args.dry_run:
        with place.cluster(args.cluster, common.say, ranked=_RANKED) as target:
            common.say(f"harness tune on a Dask cluster: {target.where}")
            return _tune_points(args, planned, target, target.arch)
    status = common.has_gpu()
    if not status.found and not args.dry_run:
        status.require("tuning times kernels; --dry-run screens the points without one")
    target = None
    if status.found:
        target = place.local(args.gpus, ranked=_RANKED)
        if target.slots and len(target.slots) > 1:
            common.say(f"harness tune on {target.where}")
    return _tune_points(args, planned, target, target.arch if target else args.arch or "sm_90")


def _tune_points(args, planned: tune.TunePlan, target: place.Target | None, arch: str) -> int:
    """Screen the points for ``arch``, time those worth it on ``target``, rank, report and
    pin."""
    tuning = tune.screen(planned, arch, common.say)
    keep, skipped = tuning.timed, tuning.skipped
    if args.dry_run or not keep:
        print(fit_text("\n".join(["skipped points:", *(f"- {k.name}: {reason}"
                                                        for k, reason in skipped)]),
                       common.width(args)))
        if not keep and not args.dry_run:
            print(f"\nnone of the {len(skipped)} points can be timed: nothing was run")
            return common.EXIT_FAILED
        print(f"\n{len(keep)} points would be timed" + "".join(f"\n  {k.name}" for k in keep))
        return common.EXIT_OK
    folder = args.report_dir / files.gpu_slug(target.gpu_name)
    stem = files.new_stem(folder, f"tune-{planned.spec.stem}")
    tune.sweep(tuning, target, stem.with_suffix(".jsonl"), common.say)
    json_path = runs.write_tune_report(tuning, ["harness", *sys.argv[1:]], stem)
    top, ranked_at = tuning.top, "x".join(map(str, planned.options.run.sizes[-1]))
    kind = kinds.of(planned.spec)
    if top and kernel_sizes.has_own_sizes(planned):
        ranked_at = " x ".join(kind.problem_of(top[0]).short.split("x"))
    print(kind.table(top, console=True, wide=args.wide, drop=("precision",)))
    print(f"\n{len(keep)} points timed, {len(skipped)} skipped (reasons in {json_path}); "
          f"ranked at {ranked_at}")
    if args.pin and top:
        best = tune.pin(tuning, planned.spec, arch)
        print(f"pinned [tuned.{arch}] {best} into {planned.spec.path}")
    return common.EXIT_OK if top else common.EXIT_FAILED
