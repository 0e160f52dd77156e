"""The ``harness`` command line: list, build, occupancy, run."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from tabulate import tabulate

from harness.archs import ARCHS
from harness.build.offline import DEFAULT_SIZE, build_all
from harness.errors import HarnessError
from harness.kernels.registry import (
    DEFAULT_KERNEL_DIRS,
    PROJECT_ROOT,
    discover,
    project_relative,
    select,
)
from harness.report import files as report
from harness.run.runner import parse_size

DEFAULT_RUN_SIZES = ("1024", "2048", "4096")
# the kernel kinds a command sees; every other command takes the GEMM ABI: kind "gemm"
_COMMAND_KINDS = {"list": None, "sass": None, "ptx": None, "ceiling": "ceiling"}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="harness", description=__doc__)
    parser.add_argument("--kernel-dir", action="append", type=Path, metavar="DIR",
                        help="folder of kernel files (repeatable; default: the project's cu/ "
                             "and ptx/)")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("list", help="the registry: kernel, kind, file, precision, min arch, summary")

    build = sub.add_parser("build", help="compile to cubin and report resources (no GPU needed)")
    build.add_argument("kernels", nargs="*", metavar="KERNEL")
    build.add_argument("--arch", default="sm_90", choices=sorted(ARCHS))
    build.add_argument("--size", default=",".join(map(str, DEFAULT_SIZE)),
                       help="problem size for the launch shape: N or M,N,K (default 4096)")
    build.add_argument("--json", action="store_true", help="print a JSON list")

    occ = sub.add_parser("occupancy", help="occupancy breakdown, offline and from the driver")
    occ.add_argument("kernels", nargs="*", metavar="KERNEL")
    occ.add_argument("--arch", choices=sorted(ARCHS),
                     help="predict for this arch (default: the GPU's, else sm_90)")
    occ.add_argument("--size", default=",".join(map(str, DEFAULT_SIZE)))
    occ.add_argument("--carveout", type=int, metavar="PCT",
                     help="preferred shared-memory carve-out in percent (default: the spec's, "
                          "else the driver's)")
    occ.add_argument("--json", action="store_true")
    occ.add_argument("--sweep", action="store_true",
                     help="GPU: compare offline and driver occupancy for every kernel (and "
                          "carve-out) and a probe sweep of registers, block sizes, dynamic smem "
                          "and carve-outs; writes reports/<gpu>/occupancy-sweep.{json,md}")
    occ.add_argument("--report-dir", type=Path, default=PROJECT_ROOT / "reports")

    sass = sub.add_parser("sass", help="SASS instruction mix of the cubin (no GPU needed)")
    sass.add_argument("kernels", nargs="*", metavar="KERNEL")
    sass.add_argument("--arch", default="sm_90", choices=sorted(ARCHS))
    sass.add_argument("--json", action="store_true")
    sass.add_argument("--listing", action="store_true", help="print the whole disassembly too")

    ptx = sub.add_parser("ptx", help="a PTX kernel after its macros (#for, #if, ${...}) are "
                                     "expanded with the variant's parameters (no GPU needed)")
    ptx.add_argument("kernel", metavar="KERNEL", help="one registry key (stem:variant)")
    ptx.add_argument("--arch", default="sm_90", choices=sorted(ARCHS),
                     help="the target: its [tuned.<arch>] parameters and SM (default sm_90)")

    tune = sub.add_parser("tune", help="sweep a kernel's tile parameters: check, time, rank")
    tune.add_argument("kernel", metavar="KERNEL", help="a kernel file stem (its [tune] space)")
    tune.add_argument("--size", action="append", metavar="N|M,N,K",
                      help="problem size(s) (default 4096); ranked at the last one")
    tune.add_argument("--param", action="append", default=[], metavar="NAME=v1,v2",
                      help="override or add a swept parameter (repeatable)")
    tune.add_argument("--arch", choices=sorted(ARCHS),
                      help="target for --dry-run (default sm_90); with a GPU, the GPU's")
    tune.add_argument("--jobs", type=int, default=4, help="parallel compiles (4)")
    tune.add_argument("--top", type=int, default=10)
    tune.add_argument("--dry-run", action="store_true",
                      help="screen the points (constraints, compile, fit, spills) and stop: "
                           "no GPU needed")
    tune.add_argument("--pin", action="store_true",
                      help="write the best point into the kernel's spec as [tuned.<arch>]")
    tune.add_argument("--budget-ms", type=float, default=100.0)
    tune.add_argument("--timeout-s", type=float, default=120.0)
    tune.add_argument("--report-dir", type=Path, default=PROJECT_ROOT / "reports")

    cmp_ = sub.add_parser("compare", help="variants side by side, timed interleaved with cuBLAS")
    cmp_.add_argument("kernels", nargs="+", metavar="KERNEL",
                      help="two or more; the first is the reference for speedups")
    cmp_.add_argument("--size", action="append", metavar="N|M,N,K", help="default 4096")
    cmp_.add_argument("--hot", dest="cold_l2", action="store_false", default=True,
                      help="warm L2 (default: flushed before every launch)")
    cmp_.add_argument("--budget-ms", type=float, default=300.0)
    cmp_.add_argument("--timeout-s", type=float, default=300.0)
    cmp_.add_argument("--report-dir", type=Path, default=PROJECT_ROOT / "reports")

    rep = sub.add_parser("report", help="napkin model, ladder and roofline plots from a run's "
                                        "JSON; optionally the README's results table")
    rep.add_argument("run_json", type=Path, help="a run report (reports/<gpu>/run-*.json)")
    rep.add_argument("--size", default="4096", help="size for the plots and the README table")
    rep.add_argument("--readme", action="store_true",
                     help="rewrite the README's results section from this run")

    ceil = sub.add_parser("ceiling", help="the mma.sync issue ceiling of this GPU, per precision "
                                          "(needs a GPU)")
    ceil.add_argument("--precision", action="append", metavar="PREC",
                      help="bf16 or fp16 (repeatable; default: every precision a ceiling kernel "
                           "covers)")
    ceil.add_argument("--json", action="store_true", help="print the results as JSON")
    ceil.add_argument("--budget-ms", type=float, default=500.0,
                      help="GPU time per precision, turned into repetitions (500)")
    ceil.add_argument("--power", action="store_true",
                      help="after each timing, run the kernel back to back for --power-s "
                      "seconds: the board's mean power and energy per FLOP")
    ceil.add_argument("--power-s", type=float, default=2.0, metavar="SECONDS",
                      help="length of each power pass (2)")
    ceil.add_argument("--warmup-ms", type=float, default=100.0)
    ceil.add_argument("--launch-ms", type=float, default=2.0,
                      help="shortest GPU time of one launch; sets the iterations (2)")
    ceil.add_argument("--blocks-per-sm", type=int, action="append", metavar="N",
                      help="blocks per SM (repeatable: one row each, to see where the pipe "
                           "saturates; default: the kernel's [ceiling] blocks_per_sm)")
    ceil.add_argument("--report-dir", type=Path, default=PROJECT_ROOT / "reports")

    run = sub.add_parser("run", help="check, time and report against cuBLAS (needs a GPU)")
    run.add_argument("kernels", nargs="*", metavar="KERNEL")
    run.add_argument("--size", action="append", metavar="N|M,N,K",
                     help=f"problem size (repeatable; default {', '.join(DEFAULT_RUN_SIZES)})")
    mode = run.add_mutually_exclusive_group()
    mode.add_argument("--cold", dest="cold_l2", action="store_true", default=True,
                      help="flush L2 before every repetition (default)")
    mode.add_argument("--hot", dest="cold_l2", action="store_false", help="warm L2, no flush")
    run.add_argument("--json", type=Path, metavar="PATH",
                     help="JSON-lines file the results are appended to as they come "
                          "(default: reports/<gpu>/run-<time>.jsonl)")
    run.add_argument("--report-dir", type=Path, default=PROJECT_ROOT / "reports",
                     help="where reports/<gpu>/ goes (default: the project's reports/)")
    run.add_argument("--timeout-s", type=float, default=300.0,
                     help="seconds without progress before a kernel is called hung (300)")
    run.add_argument("--budget-ms", type=float, default=300.0,
                     help="GPU time per timing, turned into repetitions (300)")
    run.add_argument("--power", action="store_true",
                     help="after each timing, run the kernel (and cuBLAS) back to back with "
                     "warm L2 for --power-s seconds: the board's mean power and energy per FLOP")
    run.add_argument("--power-s", type=float, default=2.0, metavar="SECONDS",
                     help="length of each power pass (2; NVML's power moves every ~100 ms)")
    run.add_argument("--warmup-ms", type=float, default=30.0)
    run.add_argument("--carveout", type=int, metavar="PCT")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        kernels = discover(args.kernel_dir or DEFAULT_KERNEL_DIRS,
                           kind=_COMMAND_KINDS.get(args.command, "gemm"))
        return _COMMANDS[args.command](args, kernels)
    except HarnessError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("harness: interrupted; results so far are in the JSON-lines file", file=sys.stderr)
        return 130


def _list(args, kernels) -> int:
    rows = [[k.name, k.spec.kind, project_relative(k.spec.path), k.spec.precision,
             k.spec.min_arch, k.spec.summary] for k in kernels]
    print(tabulate(rows, headers=["kernel", "kind", "file", "precision", "min arch", "summary"],
                   maxcolwidths=[None, None, None, None, None, 70]))
    return 0


def _build(args, kernels) -> int:
    rows = build_all(select(kernels, args.kernels), args.arch, parse_size(args.size))
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(report.table(rows, report.BUILD_COLUMNS))
        _print_problems(rows)
    return 0 if all(r["status"] in ("ok", "skipped") for r in rows) else 1


def _print_problems(rows) -> None:
    for r in rows:
        if r["status"] not in ("ok",):
            print(f"- {r['kernel']} ({r['arch']}): {r['status']}: {r['message']}")


def _occupancy(args, kernels) -> int:
    from harness.archs import get_arch
    from harness.build import occupancy as occ_mod
    from harness.build.compile import compile_kernel
    from harness.gpu.driver import gpu_status

    m, n, k = parse_size(args.size)
    gpu, why = gpu_status()
    if args.sweep:
        if not gpu:
            raise HarnessError(f"--sweep compares with the driver and needs a GPU ({why})")
        return _occupancy_sweep(args, select(kernels, args.kernels))
    if not args.kernels:
        raise HarnessError("name at least one KERNEL (see `harness list`), or pass --sweep")
    out = []
    for kernel in select(kernels, args.kernels):
        entry: dict = {"kernel": kernel.name, "size": [m, n, k]}
        if gpu:
            from harness.bench.gemm import LoadedGemm
            from harness.gpu.driver import Device

            with Device(0) as device:
                arch = args.arch or device.arch.name
                kernel = kernel.for_arch(device.arch.name)
                compiled = compile_kernel(kernel, device.arch.name)
                gemm = LoadedGemm(device, kernel, compiled, args.carveout)
                driver = gemm.occupancy(m, n, k)
                entry["driver"] = {"gpu": device.name,
                                   "blocks_per_sm": driver["driver_blocks_per_sm"],
                                   "waves_per_sm": driver["waves_per_sm"],
                                   "agrees_with_offline": driver["agree"]}
                sm_count = device.sm_count
        else:
            arch, sm_count = args.arch or "sm_90", None
            kernel = kernel.for_arch(arch)
            entry["driver"] = f"not queried: {why}"
        compiled = compile_kernel(kernel, arch)
        res = compiled.resources
        dynamic = kernel.dynamic_smem_bytes(m, n, k)
        carveout = args.carveout if args.carveout is not None else kernel.spec.carveout_pct
        pred = occ_mod.predict(get_arch(arch), kernel.block_threads, res.registers,
                               res.static_smem_bytes, dynamic, carveout)
        grid = kernel.grid_dims(m, n, k)
        entry["offline"] = pred.as_dict()
        entry["grid_blocks"] = grid[0] * grid[1] * grid[2]
        if sm_count and pred.blocks_per_sm:
            entry["offline"]["waves_per_sm"] = occ_mod.waves_per_sm(
                entry["grid_blocks"], pred.blocks_per_sm, sm_count)
        entry["launch_problems"] = occ_mod.launch_problems(
            get_arch(arch), kernel.block_threads, res.registers, res.static_smem_bytes, dynamic)
        out.append(entry)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for entry in out:
        p = entry["offline"]
        rows = [
            ("Registers Per Thread", p["registers_per_thread"]),
            ("Static Shared Memory Per Block", f"{p['static_smem_bytes']} B"),
            ("Dynamic Shared Memory Per Block", f"{p['dynamic_smem_bytes']} B"),
            ("Driver Shared Memory Per Block", f"{p['reserved_smem_bytes']} B"),
            ("Shared Memory Configuration Size", f"{p['smem_per_sm_bytes']} B"),
            ("Threads Per Block", p["block_threads"]),
            ("Block Limit Registers", p["block_limit_registers"]),
            ("Block Limit Shared Mem", p["block_limit_smem"]),
            ("Block Limit Warps", p["block_limit_warps"]),
            ("Block Limit SM", p["block_limit_sm"]),
            ("Theoretical Active Warps per SM", p["active_warps_per_sm"]),
            ("Theoretical Occupancy", f"{p['occupancy_pct']:.1f} %"),
            ("Limiter", p["limiter"]),
            ("Grid Blocks", entry["grid_blocks"]),
        ]
        if "waves_per_sm" in p:
            rows.append(("Waves Per SM", f"{p['waves_per_sm']:.2f}"))
        driver = entry["driver"]
        if isinstance(driver, dict):
            rows.append((f"Driver Blocks Per SM ({driver['gpu']})", driver["blocks_per_sm"]))
            rows.append(("Driver agrees with offline",
                         "yes" if driver["agrees_with_offline"] else "NO: DISAGREEMENT"))
        else:
            rows.append(("Driver", driver))
        carveout = "" if p["carveout_pct"] is None else f", carve-out {p['carveout_pct']}%"
        print(f"{entry['kernel']} at {'x'.join(map(str, entry['size']))} on {p['arch']}{carveout}")
        print(tabulate(rows, tablefmt="plain"))
        for problem in entry["launch_problems"]:
            print(f"cannot launch: {problem}")
        print()
    return 0


def _occupancy_sweep(args, kernels) -> int:
    from harness.bench.gemm import LoadedGemm
    from harness.bench.occupancy_sweep import CARVEOUTS, compare_function, sweep
    from harness.build.compile import compile_kernel
    from harness.gpu.driver import Device

    say = lambda line: print(line, file=sys.stderr)  # noqa: E731
    with Device(0) as device:
        rows = []
        for kernel in kernels:
            gemm = LoadedGemm(device, kernel, compile_kernel(kernel, device.arch.name))
            configs = [(kernel.block_threads, kernel.dynamic_smem_bytes(*size), c)
                       for size in ((1024,) * 3, (4096,) * 3) for c in CARVEOUTS]
            rows += compare_function(device, gemm.function, kernel.name, gemm.registers,
                                     gemm.static_smem_bytes, configs)
        kernel_rows = len(rows)
        say(f"registry kernels: {kernel_rows} configurations")
        rows += sweep(device, say)
        name = device.name
    folder = args.report_dir / report.gpu_slug(name)
    summary = report.write_sweep(rows, kernel_rows, name, ["harness", *sys.argv[1:]], folder)
    disagree = [r for r in rows if not r["agree"]]
    print(f"{summary['configurations']} configurations compared ({kernel_rows} from registry "
          f"kernels), {len(disagree)} disagreements; written to "
          f"{folder}/occupancy-sweep.{{json,md,csv.gz}}")
    for r in disagree[:20]:
        print(f"  DISAGREE {r}")
    return 0 if not disagree else 1


def _sass(args, kernels) -> int:
    from harness.build.compile import compile_kernel
    from harness.build.sass import CATEGORIES, disassemble, instruction_mix

    rows = []
    for kernel in select(kernels, args.kernels):
        kernel = kernel.for_arch(args.arch)
        listing = disassemble(compile_kernel(kernel, args.arch).cubin)
        rows.append({"kernel": kernel.name, "arch": args.arch, **instruction_mix(listing)})
        if args.listing:
            print(listing)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        columns = ["kernel", *[name for name, _, _ in CATEGORIES], "total"]
        print(tabulate([[r[c] for c in columns] for r in rows], headers=columns))
        print("static counts: instructions in the code (an unrolled loop counts each copy), "
              "not instructions executed")
    return 0


def _ptx(args, kernels) -> int:
    from harness.kernels.ptxpp import expand

    chosen = select(kernels, [args.kernel])
    if len(chosen) != 1 or chosen[0].spec.language != "ptx":
        names = ", ".join(k.name for k in chosen)
        raise HarnessError(f"`harness ptx` takes one PTX kernel; {args.kernel!r} matches {names}"
                           " (name one variant, stem:variant, of a .ptx file)")
    kernel = chosen[0].for_arch(args.arch)
    text = kernel.spec.path.read_text()
    print(expand(text, kernel.param_env, kernel.spec.path, args.arch).text, end="")
    return 0


def _tune(args, kernels) -> int:
    from harness.gpu.driver import gpu_status
    from harness.kernels.registry import Kernel
    from harness.run import tune

    chosen = select(kernels, [args.kernel])
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
    sizes = tuple(parse_size(s) for s in (args.size or ["4096"]))
    say = lambda line: print(line, file=sys.stderr)  # noqa: E731
    gpu, why = gpu_status()
    if not gpu and not args.dry_run:
        raise HarnessError(f"tuning times kernels and needs a GPU ({why}); --dry-run screens "
                           "the points without one")
    if gpu:
        from harness.gpu.driver import device_arch_name

        arch = device_arch_name()
    else:
        arch = args.arch or "sm_90"
    keep, skipped = tune.screen(tune.points(base, space), arch, sizes, args.jobs, say)
    skipped_rows = [{"kernel": k.name, "params": dict(k.params), "status": "skipped",
                     "message": reason} for k, reason in skipped]
    if args.dry_run:
        print(tabulate([[r["kernel"], r["message"][:110]] for r in skipped_rows],
                       headers=["skipped point", "reason"]))
        print(f"\n{len(keep)} points would be timed" + "".join(f"\n  {k.name}" for k in keep))
        return 0
    from harness.gpu.timing import TimingOptions
    from harness.run.runner import RunOptions, run

    folder = args.report_dir / report.gpu_slug(why)
    stem = folder / f"tune-{spec.stem}-{report.run_stamp()}"
    options = RunOptions(sizes=sizes, carveout_pct=None,
                         timing=TimingOptions(budget_ms=args.budget_ms, warmup_ms=10.0),
                         timeout_s=args.timeout_s)
    record = run(keep, arch, options, stem.with_suffix(".jsonl"), say, baseline="once")
    top = tune.best(record.rows, sizes[-1], args.top)
    meta = {**report.metadata(record.device, ["harness", *sys.argv[1:]],
                              asdict(options.timing), sizes),
            "space": space, "points": len(keep) + len(skipped), "timed": len(keep),
            "skipped": skipped_rows, "baseline": "cuBLAS timed once per size in each worker"}
    columns = [c for c in report.RUN_COLUMNS if c[0] not in ("precision",)]
    skips = "\n".join(f"- {r['kernel']}: {r['message']}" for r in skipped_rows) or "- none"
    report.write_run(meta, record.rows, stem, sections=[
        f"## Best {len(top)} at {'x'.join(map(str, sizes[-1]))}", "",
        report.table(top, columns, fmt="github"), "", "## Skipped points", "", skips, "",
        "## Every timed point", ""])
    print(report.table(top, columns))
    print(f"\n{len(keep)} points timed, {len(skipped)} skipped (reasons in {stem}.json); "
          f"ranked at {'x'.join(map(str, sizes[-1]))}")
    if args.pin and top:
        best_params = {n: top[0]["params"][n] for n in space}
        tune.pin(spec.path, arch, best_params)
        print(f"pinned [tuned.{arch}] {best_params} into {spec.path}")
    return 0 if top else 1


def _compare(args, kernels) -> int:
    from harness.build.compile import compile_kernel
    from harness.build.sass import disassemble, instruction_mix
    from harness.gpu.driver import device_arch_name, gpu_status
    from harness.gpu.timing import TimingOptions
    from harness.run.runner import RunOptions, run

    chosen = select(kernels, args.kernels)
    if len(chosen) < 2:
        raise HarnessError(f"compare needs at least two kernels; {args.kernels} matched "
                           f"{[k.name for k in chosen]}")
    gpu, why = gpu_status()
    if not gpu:
        raise HarnessError(f"compare times kernels and needs a GPU ({why}); `harness build` "
                           "and `harness sass` compare resources and instructions without one")
    arch = device_arch_name()
    sizes = tuple(parse_size(s) for s in (args.size or ["4096"]))
    stem = args.report_dir / report.gpu_slug(why) / f"compare-{report.run_stamp()}"
    options = RunOptions(sizes=sizes, timeout_s=args.timeout_s,
                         timing=TimingOptions(cold_l2=args.cold_l2, budget_ms=args.budget_ms))
    say = lambda line: print(line, file=sys.stderr)  # noqa: E731
    record = run(chosen, arch, options, stem.with_suffix(".jsonl"), say, mode="compare")
    mixes = {}
    for kernel in chosen:
        kernel = kernel.for_arch(arch)
        mixes[kernel.name] = instruction_mix(disassemble(
            compile_kernel(kernel, arch).cubin))
    rows = [{**r, "sass": mixes.get(r["kernel"], {})} for r in record.rows]
    meta = {**report.metadata(record.device, ["harness", *sys.argv[1:]],
                              asdict(options.timing), sizes),
            "mode": "interleaved: each round launches every kernel and cuBLAS once, in order; "
                    "speedup = median over rounds of (first kernel's time / this one's), "
                    "p20-p80 of those ratios; 'within noise' when that range holds 1"}
    report.write_run(meta, rows, stem)
    table = report.compare_table(rows)
    (stem.parent / f"{stem.name}-table.md").write_text(table + "\n")
    print(table)
    print(f"\nwritten: {stem}.json, {stem}.md, {stem}-table.md")
    return 0 if all(r["status"] in ("pass", "skipped") for r in rows) else 1


def _report(args, kernels) -> int:
    from harness.report import ladder

    size = parse_size(args.size)
    md, ladder_png, roof_png = ladder.write(args.run_json, size)
    print(md.read_text())
    print(f"written: {md}, {ladder_png}, {roof_png}")
    if args.readme:
        ladder.update_readme(PROJECT_ROOT / "README.md", ladder.readme_section(args.run_json,
                                                                              size))
        print(f"README.md results section regenerated from {args.run_json}")
    return 0


def _ceiling(args, kernels) -> int:
    from harness.bench.ceiling import ceiling_kernel, ceiling_precisions
    from harness.gpu.driver import gpu_status

    precisions = args.precision or ceiling_precisions(kernels)
    chosen = [ceiling_kernel(p, kernels) for p in precisions]  # a bad --precision fails here
    power_s = _power_seconds(args)
    gpu, why = gpu_status()
    if not gpu:
        print(f"no GPU here ({why}): the mma.sync ceiling is measured on a GPU; "
              f"`harness sass {' '.join(k.name for k in chosen)}` shows its HMMA without one")
        return 0
    from harness.bench.ceiling import CeilingOptions, device_facts, measure_ceiling
    from harness.gpu.clocks import ClockSampler
    from harness.gpu.driver import Device, Stream
    from harness.gpu.timing import Timer, TimingOptions

    # hot L2: the kernels load nothing, so flushing would change nothing but the run time
    timing = TimingOptions(cold_l2=False, warmup_ms=args.warmup_ms, budget_ms=args.budget_ms,
                           power_s=power_s)
    launches = [CeilingOptions(launch_ms=args.launch_ms, blocks_per_sm=b)
                for b in args.blocks_per_sm or [None]]
    with Device(0) as device:
        clocks = ClockSampler(device.pci_bus_id)
        timer = Timer(Stream(), device.l2_bytes, clocks, timing)
        rows = []
        for precision, kernel in zip(precisions, chosen, strict=True):
            for options in launches:
                print(f"measuring the {precision} ceiling ({kernel.name}) on {device.name}",
                      file=sys.stderr)
                rows.append(measure_ceiling(device, timer, precision, options,
                                            kernels).as_dict())
        facts = device_facts(device, clocks)
    meta = {**report.metadata(facts, ["harness", *sys.argv[1:]], asdict(timing), ()),
            "launch": [asdict(options) for options in launches]}
    stem = args.report_dir / report.gpu_slug(facts["name"]) / f"ceiling-{report.run_stamp()}"
    json_path, md_path = report.write_ceiling(meta, rows, stem)
    if args.json:
        print(json.dumps(report.jsonable(rows), indent=1))
    else:
        print(report.ceiling_table(rows))
    print(f"\nwritten: {json_path}, {md_path}", file=sys.stderr if args.json else sys.stdout)
    return 0


def _power_seconds(args) -> float:
    """The power pass's length from --power and --power-s: 0 without --power."""
    if not args.power:
        return 0.0
    if not 0.5 <= args.power_s <= 60:
        raise HarnessError(f"--power-s {args.power_s:g}: expected seconds from 0.5 to 60 "
                           "(NVML's power reading moves every ~100 ms, so less says nothing; "
                           "2 is enough)")
    return args.power_s


def _run(args, kernels) -> int:
    from harness.gpu.driver import gpu_status

    chosen = select(kernels, args.kernels)
    sizes = tuple(parse_size(s) for s in (args.size or DEFAULT_RUN_SIZES))
    power_s = _power_seconds(args)
    gpu, why = gpu_status()
    if not gpu:
        print(f"no GPU here ({why}): nothing can be checked or timed; the offline build report "
              "for sm_90 follows")
        rows = build_all(chosen, "sm_90")
        print(report.table(rows, report.BUILD_COLUMNS))
        _print_problems(rows)
        return 0
    from harness.gpu.driver import device_arch_name
    from harness.gpu.timing import TimingOptions
    from harness.run.runner import RunOptions, run

    arch = device_arch_name()
    stamp = report.run_stamp()
    folder = args.report_dir / report.gpu_slug(why)
    jsonl = args.json or folder / f"run-{stamp}.jsonl"
    options = RunOptions(
        sizes=sizes,
        timing=TimingOptions(cold_l2=args.cold_l2, budget_ms=args.budget_ms,
                             warmup_ms=args.warmup_ms, power_s=power_s),
        carveout_pct=args.carveout, timeout_s=args.timeout_s)
    print(f"harness run: {len(chosen)} kernels x {len(sizes)} sizes on {why} ({arch}), "
          f"{'cold' if args.cold_l2 else 'hot'} L2; results stream to {jsonl}", file=sys.stderr)
    record = run(chosen, arch, options, jsonl, lambda line: print(line, file=sys.stderr))
    meta = report.metadata(record.device, ["harness", *sys.argv[1:]],
                           asdict(options.timing), sizes)
    json_path, md_path = report.write_run(meta, record.rows, jsonl.with_suffix(""))
    print(report.table(record.rows))
    fails = report.failures(record.rows)
    if fails:
        print("\nNot passed:\n" + fails)
    print(f"\nwritten: {jsonl}, {json_path}, {md_path}")
    return 0 if all(r["status"] in ("pass", "skipped") for r in record.rows) else 1


_COMMANDS = {"list": _list, "build": _build, "occupancy": _occupancy, "sass": _sass,
             "ptx": _ptx, "tune": _tune, "compare": _compare, "report": _report, "run": _run,
             "ceiling": _ceiling}

if __name__ == "__main__":
    sys.exit(main())
