"""The GPU commands that measure in this process: ceiling, energy, launch: their flags
(:func:`add_parsers`, which cli/bench.py calls after its own), options from the flags, the
command (harness/commands/), what it prints, its exit status."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harness import kinds
from harness.cli import common, flags
from harness.commands import ceiling as ceilings
from harness.commands import energy as energies
from harness.commands import launch as launches
from harness.commands.params import parse_setting
from harness.kinds import sizes as kernel_sizes
from harness.report import files, power, tables
from harness.run.runner import parse_size


def add_parsers(sub) -> None:
    """The flags of ceiling, energy and launch (cli/bench.py adds them after its own)."""
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
    flags.power_flags(p, "the kernel")
    p.add_argument("--warmup-ms", type=float, default=100.0)
    p.add_argument("--launch-ms", type=float, default=2.0,
                   help="shortest GPU time of one launch; sets the iterations (2)")
    p.add_argument("--blocks-per-sm", type=int, action="append", metavar="N",
                   help="blocks per SM (repeatable: one row each, to see where the pipe "
                        "saturates; default: the kernel's [ceiling] blocks_per_sm)")
    p.add_argument("--report-dir", type=Path, default=common.REPORTS)
    p.set_defaults(run=ceiling)

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
    p.set_defaults(run=energy)

    p = sub.add_parser("launch", help="check a kernel, then launch it (and cuBLAS) N times "
                                      "between cuProfilerStart/Stop: a profiler's target")
    p.add_argument("kernel", metavar="KERNEL")
    p.add_argument("--size", metavar="N|M,N,K", help="default 4096; a buffers kernel's dims "
                   "(\"1<<28\", \"4096x1024\"), default its spec's largest size")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="override a parameter (the launches are then unchecked)")
    p.add_argument("--no-baseline", action="store_true", help="leave cuBLAS out")
    p.add_argument("--gap-ms", type=float, default=0.0,
                   help="sleep between launches (isolated launches; 0: back to back)")
    p.set_defaults(run=launch)


def ceiling(args) -> int:
    options = ceilings.CeilingRunOptions(
        # hot L2: the kernels load nothing, so flushing would change nothing but the run time
        timing=flags.timing(args, cold_l2=False, max_rel_se_pct=0.0),
        precisions=tuple(args.precision or ()), family=args.family,
        launches=tuple(ceilings.CeilingOptions(launch_ms=args.launch_ms, blocks_per_sm=b)
                       for b in args.blocks_per_sm or [None]))
    kernels = common.kernels(args, kind=ceilings.KIND, patterns=[])
    _, chosen = ceilings.kernels_for(kernels, options)  # a bad --precision fails here
    sass = "HGMMA" if args.family == "wgmma" else "HMMA"
    common.has_gpu().require(f"the {args.family} ceiling is measured on a GPU; `harness sass "
                             f"{' '.join(k.name for k in chosen)}` shows its {sass} without one")
    record = ceilings.measure(kernels, options, common.say)
    json_path, md_path = power.write_ceiling_report(record, options, ["harness", *sys.argv[1:]],
                                                    args.report_dir)
    if args.json:
        print(json.dumps(files.jsonable(record.rows), indent=1))
    else:
        print(tables.ceiling_table(record.rows))
    print(f"\nwritten: {json_path}, {md_path}", file=sys.stderr if args.json else sys.stdout)
    return common.EXIT_OK


def energy(args) -> int:
    options = energies.EnergyOptions(size=parse_size(args.size),
                                     settings=tuple(map(parse_setting, args.knob)),
                                     seconds=args.seconds, rounds=args.rounds)
    (base,) = common.kernels(args, patterns=[args.kernel])[:1]
    points = energies.points(base, options)
    common.gpu()
    record = energies.measure(points, options, common.say)
    json_path, md_path = power.write_energy_report(record, options, ["harness", *sys.argv[1:]],
                                                   args.report_dir)
    print(power.energy_summary(record.rows))
    print(f"\nwritten: {json_path}, {md_path}")
    return common.EXIT_OK


def launch(args) -> int:
    (kernel,) = common.gemms_and_buffers(args, "launch", patterns=[args.kernel])[:1]
    kind = kinds.of(kernel.spec)
    alone = not kind.launches_baseline
    # --size read by its kind (a buffers kernel's dims, "1<<28", "4096x1024"); without it,
    # its kind's launch size (a GEMM 4096, a buffers kernel its spec's largest size)
    size = (kernel_sizes.read(kernel, args.size) if args.size
            else kind.launch_size(kernel.spec)).values
    options = launches.LaunchOptions(
        size=size, setting=parse_setting(",".join(args.param)) if args.param else {},
        repeats=args.repeats, baseline=not args.no_baseline and not alone,
        gap_ms=args.gap_ms)
    kernel = launches.kernel_for(kernel, options)
    common.gpu()
    launched = launches.launch(kernel, options)
    beside = ("" if not options.baseline else " and cuBLAS")
    each = " each" if beside else ""
    common.say(f"launched {launched.name}{beside} {args.repeats} times{each} at "
               + ("x".join(map(str, size)))
               + (" (checked first)" if not args.param else " (unchecked: parameters set)")
               + (f"; its baseline is not launched ({kind.title} kernels: the kernel alone)"
                  if alone else ""))
    return common.EXIT_OK
