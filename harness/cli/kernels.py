"""Commands about kernels themselves, none of which needs a GPU: list, build, sass, ptx, and
occupancy (which adds the driver's answer where a GPU is found)."""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor

from tabulate import tabulate

from harness import kinds
from harness.archs import ARCHS, can_run, get_arch
from harness.cli import common
from harness.compiler import occupancy as occ_mod
from harness.compiler.child import DEFAULT_LIMIT_S, compile_limit_s
from harness.compiler.compile import compile_kernel
from harness.compiler.offline import DEFAULT_SIZE, Progress, build_all
from harness.errors import HarnessError, LaunchError
from harness.kernels.registry import DEFAULT_KERNEL_DIRS, load_registry, project_relative
from harness.kernels.spec import budget_problems
from harness.kinds import sizes as kernel_sizes
from harness.report import files, tables
from harness.report.width import NAME, TEXT, column_groups, fit_table, fit_text
from harness.run.runner import parse_size

_SIZE_HELP = "problem size for the launch shape: N or M,N,K (default 4096)"
_CANNOT_LAUNCH = "not queried: the kernel cannot launch"


def add_parsers(sub) -> None:
    p = sub.add_parser("list", help="the kernel files: kind, precision, minimum arch, variants, "
                                    "what the rung changes; files with errors say which")
    p.add_argument("--variants", action="store_true",
                   help="one line per registry key (stem:variant) instead of per file")
    p.set_defaults(run=_list)

    p = sub.add_parser("build", help="compile to cubin and report resources (no GPU needed)")
    p.add_argument("kernels", nargs="*", metavar="KERNEL")
    p.add_argument("--arch", default="sm_90", choices=sorted(ARCHS))
    p.add_argument("--size", default=None, help=_SIZE_HELP + "; a buffers kernel's: its dims "
                   "(default: its spec's largest size)")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.add_argument("--jobs", type=int, default=None,
                   help="compiles at a time, each in a process of its own (default: every core)")
    p.add_argument("--compile-limit-s", type=float, default=None, metavar="SECONDS",
                   help="stop a compile that runs longer (default: $HARNESS_COMPILE_LIMIT_S, "
                        f"else {DEFAULT_LIMIT_S:g}; 0: no limit)")
    p.set_defaults(run=_build)

    p = sub.add_parser("occupancy", help="occupancy breakdown, offline and from the driver")
    p.add_argument("kernels", nargs="*", metavar="KERNEL")
    p.add_argument("--arch", choices=sorted(ARCHS),
                   help="predict for this arch (default: the GPU's, else sm_90)")
    p.add_argument("--size", default=None, help=_SIZE_HELP + "; a buffers kernel's: its dims "
                   "(default: its spec's largest size)")
    p.add_argument("--carveout", type=int, metavar="PCT",
                   help="preferred shared-memory carve-out in percent (default: the spec's, "
                        "else the driver's)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--sweep", action="store_true",
                   help="GPU: compare offline and driver occupancy for every kernel (and "
                        "carve-out) and a probe sweep of registers, block sizes, dynamic smem "
                        "and carve-outs; writes reports/<gpu>/occupancy-sweep.{json,md}")
    p.add_argument("--report-dir", type=files.Path, default=common.REPORTS)
    p.set_defaults(run=_occupancy)

    p = sub.add_parser("sass", help="SASS instruction mix of the cubin (no GPU needed)")
    p.add_argument("kernels", nargs="*", metavar="KERNEL")
    p.add_argument("--arch", default="sm_90", choices=sorted(ARCHS))
    p.add_argument("--json", action="store_true")
    p.add_argument("--listing", action="store_true", help="print the whole disassembly too")
    p.set_defaults(run=_sass)

    p = sub.add_parser("ptx", help="a PTX kernel after its macros (#for, #if, ${...}) are "
                                   "expanded with the variant's parameters (no GPU needed)")
    p.add_argument("kernel", metavar="KERNEL", help="one registry key (stem:variant) or path")
    p.add_argument("--arch", default="sm_90", choices=sorted(ARCHS),
                   help="the target: its [tuned.<arch>] parameters and SM (default sm_90)")
    p.set_defaults(run=_ptx)


def _first_sentence(text: str, width: int = 64) -> str:
    sentence = text.split(". ")[0].rstrip(".") + "."
    return sentence if len(sentence) <= width else sentence[: width - 3].rstrip() + "..."


def _list(args) -> int:
    folders = [] if args.no_builtin else list(DEFAULT_KERNEL_DIRS)
    registry = load_registry(folders + (args.kernel_dir or []), kind=None)
    if args.variants:
        rows = [[k.name, k.spec.kind, k.spec.precision, k.spec.min_arch,
                 project_relative(k.spec.path)] for k in registry.kernels]
        print(fit_table(["kernel", "kind", "prec", "min arch", "file"], rows,
                        {4: (NAME, 24), 0: (NAME, 20)}, common.width(args)).text)
    else:
        by_file: dict = {}
        for k in registry.kernels:
            by_file.setdefault(k.spec.path, []).append(k)
        rows = []
        for ks in by_file.values():
            spec = ks[0].spec
            variants = ", ".join(k.variant for k in ks if k.variant) or "-"
            rows.append([spec.stem, spec.kind, spec.precision, spec.min_arch, variants,
                         _first_sentence(spec.summary)])
        headers = ["kernel file", "kind", "prec", "min arch", "variants", "what it changes"]
        if args.wide:
            print(tabulate(rows, headers=headers, maxcolwidths=[None] * 4 + [28, 64]))
        else:
            longest = max((len(k.variant or "") for k in registry.kernels), default=0)
            print(fit_table(headers, rows, {4: (TEXT, max(16, longest + 1)), 5: (TEXT, 24),
                                            0: (NAME, 16)}, common.width(args)).text)
        print(f"\n{len(registry.kernels)} kernels in {len(by_file)} files; `harness list "
              "--variants` lists every registry key")
    for bad in registry.broken:
        print(f"\nERROR {project_relative(bad.path)}: {bad.error}")
    return common.EXIT_FAILED if registry.broken else common.EXIT_OK


def build_progress(what: str = "building") -> Progress:
    """Progress of a build on stderr: a live count on a terminal, else a line per kernel that
    was compiled (one found in the compile cache, or not built for the arch, says nothing)."""
    live = sys.stderr.isatty()

    def show(row: dict, done: int, total: int) -> None:
        status = "" if row["status"] in ("ok", "skipped") else f": {row['status']}"
        if live:  # one line, rewritten: return to its start, clear it, write the count
            line = f"{what} {done}/{total}: {row['kernel']}{status}"[:99]
            print(f"\r\033[K{line}", end="\n" if done == total else "", file=sys.stderr,
                  flush=True)
        elif row.get("cached") is False or row["status"] == "compile error":  # it compiled
            regs = f", {row['registers']} registers" if "registers" in row else ""
            common.say(f"{what} {done}/{total}: {row['kernel']} ({row['arch']}){regs}{status}")

    return show


def _build(args) -> int:
    compile_limit_s(args.compile_limit_s)  # a bad limit is bad input, before any work
    chosen = common.gemms_and_buffers(args, "build") if args.kernels else common.kernels(args)
    try:
        rows = _build_rows(args, chosen)
    except KeyboardInterrupt:
        print("harness: build interrupted: every compile in flight was stopped; the kernels "
              "compiled before are in the compile cache", file=sys.stderr)
        return common.EXIT_INTERRUPTED
    for kernel, row in zip(chosen, rows, strict=True):
        over = budget_problems(row, kernel.spec.budget) if row["status"] == "ok" else []
        if over:  # the spec's [budget] is a limit of the build, as the pytest plugin holds it
            row.update(status="over budget",
                       message="; ".join(over) + " (the limits of its spec's [budget])")
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        print(tables.build_table(rows, width=common.width(args)))
        for r in rows:
            if r["status"] != "ok":
                print(f"- {r['kernel']} ({r['arch']}): {r['status']}: {r['message']}")
    ok = all(r["status"] in ("ok", "skipped") for r in rows)
    return common.EXIT_OK if ok else common.EXIT_FAILED


def _build_size(args, kernel) -> tuple[int, int, int]:
    """The size ``kernel``'s launch shape is built for: --size read by its kind (a GEMM's N or
    M,N,K, a buffers kernel's dims), else a GEMM's default and, for a kind whose kernels carry
    their own sizes, the largest of its spec's."""
    if not kernel_sizes.has_own_sizes(kernel):
        return parse_size(args.size or ",".join(map(str, DEFAULT_SIZE)))
    if args.size:
        return kernel_sizes.read_slots(kernel, args.size)
    return max(kernel_sizes.own_slots(kernel), key=lambda s: s[0] * s[1] * s[2])


def _build_rows(args, chosen) -> list[dict]:
    """``build_all`` over ``chosen``, each kernel at its own size (:func:`_build_size`); a
    kernel whose kind builds its own (Kind.build_row) by its kind."""
    rows: list[dict | None] = [None] * len(chosen)
    for i, kernel in enumerate(chosen):
        rows[i] = kinds.of(kernel.spec).build_row(kernel, args.arch, args.size,
                                                  args.compile_limit_s)
    rest = [k for k, row in zip(chosen, rows, strict=True) if row is None]
    if args.size and len({kernel_sizes.has_own_sizes(k) for k in rest}) > 1:
        common.one_size_rank(rest, "build")
    sizes = [_build_size(args, k) if row is None else None
             for k, row in zip(chosen, rows, strict=True)]
    for size in dict.fromkeys(s for s in sizes if s is not None):
        at = [i for i, s in enumerate(sizes) if s == size]
        built = build_all([chosen[i] for i in at], args.arch, size,
                          limit_s=args.compile_limit_s, jobs=args.jobs,
                          progress=build_progress())
        for i, row in zip(at, built, strict=True):
            rows[i] = row
    return rows


def _occupancy(args) -> int:
    if not args.kernels and not args.sweep:
        raise HarnessError("name at least one KERNEL (see `harness list`), or pass --sweep")
    status = common.has_gpu()
    if args.sweep:
        status.require("--sweep compares with the driver's occupancy; without --sweep, "
                       "`harness occupancy KERNEL` predicts it offline")
        return _occupancy_sweep(args, common.kernels(args))
    chosen = common.gemms_and_buffers(args, "occupancy")
    if args.size and len({kernel_sizes.has_own_sizes(k) for k in chosen}) > 1:
        common.one_size_rank(list(chosen), "occupancy")
    if status.found:
        from harness.bench.session import BenchSession

        with BenchSession(carveout_pct=args.carveout) as session:
            out = [_occupancy_entry(args, kernel, _build_size(args, kernel), session)
                   for kernel in chosen]
    else:
        out = [_occupancy_entry(args, kernel, _build_size(args, kernel), None, status.reason)
               for kernel in chosen]
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for entry in out:
            _print_occupancy(entry, common.width(args))
    blocked = any(entry["launch_problems"] for entry in out)
    return common.EXIT_FAILED if blocked else common.EXIT_OK


def _occupancy_entry(args, kernel, size, session, why: str = "") -> dict:
    """The offline breakdown of ``kernel`` at ``size``, with the driver's answer beside it when
    a session is open and the kernel can launch; the kernel is compiled once. A kernel that
    cannot launch (its min_arch, the block's resources, the grid) gets its reasons in
    ``launch_problems`` and is never handed to the driver, with or without a GPU."""
    m, n, k = size
    entry: dict = {"kernel": kernel.name, "size": [m, n, k]}
    if session is not None and args.arch not in (None, session.arch):
        session, why = None, f"--arch {args.arch} is not this GPU's ({session.arch})"
    if session is not None and not kinds.of(kernel.spec).loads_for_the_driver:
        session, why = None, f"the driver is not asked about {kernel.spec.kind} kernels"
    arch = session.arch if session is not None else args.arch or "sm_90"
    need = get_arch(kernel.spec.min_arch)
    if not can_run(need, get_arch(arch)):
        # compiling for an arch below min_arch fails or builds code the kernel does not mean
        entry.update(offline=None, grid_blocks=None, driver=_CANNOT_LAUNCH,
                     launch_problems=[f"needs {need.name} (min_arch in {kernel.spec.path.name});"
                                      f" {arch} cannot run it"])
        return entry
    if session is not None:
        gemm = kinds.of(kernel.spec).load(session, kernel)
        kernel, compiled, sm_count = gemm.kernel, gemm.compiled, session.device.sm_count
    else:
        sm_count = None
        kernel = kernel.for_arch(arch)
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
    problems = occ_mod.kernel_launch_problems(
        kernel, get_arch(arch), m, n, k, res.registers, res.static_smem_bytes, sm_count)
    if session is None:
        entry["driver"] = f"not queried: {why}"
    elif problems:
        # the driver is asked through LoadedGemm.prepare, which refuses the same launch
        entry["driver"] = _CANNOT_LAUNCH
    else:
        try:
            driver = gemm.occupancy(m, n, k)
        except LaunchError as exc:  # a limit the offline check missed: still a kernel failure
            problems.append(str(exc))
            entry["driver"] = _CANNOT_LAUNCH
        else:
            entry["driver"] = {"gpu": session.device.name,
                               "blocks_per_sm": driver["driver_blocks_per_sm"],
                               "waves_per_sm": driver["waves_per_sm"],
                               "agrees_with_offline": driver["agree"]}
    entry["launch_problems"] = problems
    return entry


def _print_occupancy(entry: dict, width: int | None = None) -> None:
    p = entry["offline"]
    if p is None:  # not built for an arch below its min_arch
        print(f"{entry['kernel']} at {'x'.join(map(str, entry['size']))}")
        for problem in entry["launch_problems"]:
            print(f"cannot launch: {problem}")
        print()
        return
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
    print(fit_text(tabulate(rows, tablefmt="plain"), width, indent=" " * 34))
    for problem in entry["launch_problems"]:
        print(f"cannot launch: {problem}")
    print()


def _occupancy_sweep(args, chosen) -> int:
    from harness.bench.occupancy_sweep import CARVEOUTS, compare_function, sweep
    from harness.bench.session import BenchSession

    with BenchSession() as session:
        rows = []
        for kernel in chosen:
            gemm = kinds.of(kernel.spec).load(session, kernel)
            configs = [(gemm.kernel.block_threads, gemm.kernel.dynamic_smem_bytes(*size), c)
                       for size in ((1024,) * 3, (4096,) * 3) for c in CARVEOUTS]
            rows += compare_function(session.device, gemm.function, gemm.kernel.name,
                                     gemm.registers, gemm.static_smem_bytes, configs)
        kernel_rows = len(rows)
        common.say(f"registry kernels: {kernel_rows} configurations")
        rows += sweep(session.device, common.say)
        name = session.device.name
    folder = args.report_dir / files.gpu_slug(name)
    summary = files.write_sweep(rows, kernel_rows, name, ["harness", *sys.argv[1:]], folder,
                               kernels=chosen)
    disagree = [r for r in rows if not r["agree"]]
    print(f"{summary['configurations']} configurations compared ({kernel_rows} from registry "
          f"kernels), {len(disagree)} disagreements; written to "
          f"{folder}/occupancy-sweep.{{json,md,csv.gz}}")
    for r in disagree[:20]:
        print(f"  DISAGREE {r}")
    return common.EXIT_FAILED if disagree else common.EXIT_OK


def _sass(args) -> int:
    from harness.compiler.sass import CATEGORIES, disassemble, instruction_mix

    chosen = [k.for_arch(args.arch) for k in common.kernels(args, kind=None)]
    common.say(f"compiling and disassembling {len(chosen)} kernel(s) for {args.arch}")

    def one(kernel):
        listing = disassemble(compile_kernel(kernel, args.arch).cubin)
        common.say(f"  {kernel.name}")
        return kernel, listing

    with ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(one, chosen))
    rows = []
    for kernel, listing in done:
        rows.append({"kernel": kernel.name, "arch": args.arch, **instruction_mix(listing)})
        if args.listing:
            print(listing)
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        columns = ["kernel", *[name for name, _, _ in CATEGORIES], "total"]
        print(column_groups(columns, [[r[c] for c in columns] for r in rows],
                             common.width(args)))
        print(fit_text("static counts: instructions in the code (an unrolled loop counts each "
                       "copy), not instructions executed", common.width(args)))
    return common.EXIT_OK


def _ptx(args) -> int:
    from harness.kernels.ptxpp import expand

    chosen = common.kernels(args, kind=None, patterns=[args.kernel])
    cuda_cpp = sorted({project_relative(k.spec.path) for k in chosen
                       if k.spec.language != "ptx"})
    if cuda_cpp:
        raise HarnessError(
            f"`harness ptx` shows hand-written PTX kernels after their macros are expanded; "
            f"{args.kernel!r} is CUDA C++ ({', '.join(cuda_cpp)}), which has no PTX macros: "
            "`harness sass KERNEL --listing` shows what NVRTC made of it")
    if len(chosen) != 1:
        names = ", ".join(k.name for k in chosen)
        raise HarnessError(f"`harness ptx` takes one PTX kernel; {args.kernel!r} matches {names}"
                           " (name one variant, stem:variant, of a .ptx file)")
    kernel = chosen[0].for_arch(args.arch)
    text = kernel.spec.path.read_text()
    print(expand(text, kernel.param_env, kernel.spec.path, args.arch).text, end="")
    return common.EXIT_OK
