"""``harness profile``: its flags, what it prints and its exit status; the work is
harness/commands/profile.py's, the report report/profile.py's (kinds/buffers/profile.py's
for buffers kernels)."""

from __future__ import annotations

import sys
from pathlib import Path

from harness import kinds
from harness.bench import ncu
from harness.cli import common
from harness.commands.profile import TIMINGS, ProfileOptions, profile
from harness.gpu.timing import ISOLATED_GAP_MS
from harness.kernels.registry import Kernel
from harness.kinds import sizes as kernel_sizes
from harness.report import profile as report
from harness.run.runner import parse_size


def add_parsers(sub) -> None:
    p = sub.add_parser("profile", help="the napkin model beside Nsight Compute's counters: "
                                       "bytes, bank conflicts, occupancy, stalls, time (needs "
                                       "a GPU and ncu)")
    p.add_argument("kernels", nargs="+", metavar="KERNEL",
                   help="registry keys, file stems, globs or kernel file paths")
    p.add_argument("--size", action="append", metavar="N|M,N,K",
                   help="default 4096; a buffers kernel's dims (\"1<<28\", \"4096x1024\"), "
                        "default the first kernel's largest spec size")
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


def chosen_kernels(args) -> list[Kernel]:
    """The kernels named: GEMMs, or buffers kernels of one rank of dims; anything else is
    refused in one line (before the GPU is looked for)."""
    chosen = common.gemms_and_buffers(args, "profile")
    common.one_size_rank(chosen, "profile")
    return chosen


def sizes(args, chosen: list[Kernel]) -> tuple[tuple[int, int, int], ...]:
    """``--size`` as the runner takes it: M, N, K for GEMMs; the dims of buffers kernels
    padded with 1 (default: the first one's largest spec size)."""
    if chosen and kernel_sizes.has_own_sizes(chosen[0]):
        first = chosen[0]
        problems = [kernel_sizes.read(first, text) for text in args.size] if args.size \
            else [kinds.of(first.spec).launch_size(first.spec)]
        return tuple(kernel_sizes.slots(first, p) for p in problems)
    return tuple(parse_size(s) for s in (args.size or ["4096"]))


def options(args, chosen: list[Kernel] = ()) -> ProfileOptions:
    """The command's options from its arguments and the kernels ``chosen``; bad values are
    named."""
    return ProfileOptions(sizes=sizes(args, list(chosen)),
                          metric_groups=tuple(g.strip() for g in args.metrics.split(",")
                                              if g.strip()),
                          repeats=args.repeats, regimes=TIMINGS[args.timing], gap_ms=args.gap_ms,
                          flag_factor=args.flag_factor, ncu=args.ncu, timeout_s=args.timeout_s)


def _profile(args) -> int:
    chosen = chosen_kernels(args)
    opts = options(args, chosen)
    gpu_name = common.gpu()
    record = profile(chosen, opts, gpu_name, args.report_dir, ["harness", *sys.argv[1:]],
                     common.say, args.kernel_dir or [], args.no_builtin)
    for line in report.sections(record.rows, opts.flag_factor, fmt="simple"):
        print(line)
    kind = kinds.of(chosen[0].spec)
    alone = (f"; {kind.title} kernels ran alone under ncu (their baselines are timed by the "
             "harness, not launched under ncu)" if not kind.launches_baseline else "")
    print(f"wall time {record.meta['wall_s']:.0f} s{alone}; written: "
          f"{', '.join(map(str, record.written))}")
    return common.EXIT_OK if record.profiled else common.EXIT_FAILED
