"""An attention kernel under Nsight Compute beside its napkin (issue 63, item 4), until
``harness profile`` takes attention kernels: what limits it, the tensor pipe, the SFU or the
warps' stalls, and the same counters for a baseline launched beside it.

Run on a GPU from the project root (the wheel installed, or PYTHONPATH set):
python3 experiments/attention_profile.py KERNEL[:VARIANT] [--size S] [--repeats N]
    [--baseline NAME] [--out DIR]
The script runs ncu over itself in ``--launch`` mode: the kernel at the size on drawn inputs,
once outside the profiler range (module load, first touch) and N times inside it, then the
baseline N times; after the profiled launches the kernel's output is checked at sampled rows
against the FP64 device reference (a wrong kernel is not profiled into a report). ncu runs with
the GPU's own clocks and caches flushed before every replay pass (harness/bench/ncu.py).
Writes JSON and markdown: per metric the median over the launches, and the napkin's three
bounds (tensor cores at the dense BF16 rate, exponentials on the SFU, compulsory bytes at the
DRAM rate given) at the SM clock ncu measured. Exit 0 written, 1 the kernel's check failed,
2 it could not run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from harness.errors import HarnessError
from harness.kinds.attention import problem as attention_problem

GROUPS = ("throughput", "stalls", "occupancy", "dram")
DRAM_GBPS = 3350.0
"""The DRAM rate the memory bound assumes unless ``--dram-gbps`` says otherwise: an H100
SXM's 3.35 TB/s peak (NVIDIA's H100 datasheet); an H200's is 4.8 TB/s. Attention at these
sizes is far from it, so the bound only has to be the right order."""


def _launch(args) -> int:
    """Inside ncu: the launches, then the check."""
    import numpy as np

    from harness.bench.session import BenchSession
    from harness.gpu.driver import profiler_range
    from harness.kinds.attention import device_reference
    from harness.kinds.attention.build import load
    from harness.kinds.attention.launch import Launcher
    from harness.kinds.attention.sampled import judge_rows, rows_of, sampled_rows
    from harness.kinds.attention.timed import Operands, baseline_launches
    from harness.kinds.buffers.draw import Draws

    path, _, variant = args.kernel.partition(":")
    p = attention_problem.read_size(args.size)
    scale = 1.0 / float(np.sqrt(p["D"]))
    with BenchSession() as session:
        spec = load(path)
        launcher = Launcher(spec, session.arch, variant or None, session.stream)
        draws = Draws(session.stream, session.arch, session.device.sm_count)
        ops = Operands(session, spec, p, draws)
        try:
            ops.fill(session.run_seed, 1)
            launch = launcher.bind(p, (ops.q, ops.k, ops.v), ops.o, ops.lse, scale)
            bases = baseline_launches(ops, [args.baseline] if args.baseline else [], scale,
                                      session.stream)
            ops.poisoned()
            launch()
            session.stream.synchronize("the first launch")
            with profiler_range():
                for _ in range(args.repeats):
                    ops.poisoned()
                    launch()
                session.stream.synchronize("the profiled launches")
            raw = ops.o.download(np.uint16, (ops.q_count,), session.stream)
            with profiler_range():  # the baseline writes O too: after the kernel's is read
                for _, _, base_launch, _ in bases:
                    for _ in range(args.repeats if base_launch else 0):
                        base_launch()
                session.stream.synchronize("the baseline's launches")
            rows = sampled_rows(p, np.random.default_rng(session.run_seed))
            ops.fill(session.run_seed, 1)  # the inputs of the launches (the baseline's too)
            ref = device_reference.run(ops.q, ops.k, ops.v, rows, p, scale,
                                       precision=spec.precision, layout=spec.kind_spec.layout,
                                       p_precision=spec.kind_spec.p_precision(spec.precision),
                                       stream=session.stream)
            verdict = judge_rows(spec, p, rows_of(raw, rows, p, spec.kind_spec.layout), ref)
            for name, _, _, why in bases:
                if why:
                    print(f"baseline {name} not launched: {why}", file=sys.stderr)
        finally:
            ops.draws.close()
            ops.close()
            launcher.close()
    if not verdict.ok:
        print(f"CHECK FAILED: {verdict}", file=sys.stderr)
        return 1
    print("check: ok", file=sys.stderr)
    return 0


def _profile(args) -> int:
    from harness.bench import ncu, ncu_csv
    from harness.kinds.attention import napkin
    from harness.kinds.attention.build import load
    from harness.report.files import git_state

    path, _, _ = args.kernel.partition(":")
    spec = load(path)
    p = attention_problem.read_size(args.size)
    tool = ncu.find_ncu(args.ncu)
    metrics = ncu.select(GROUPS, "sm_90")
    ncu.check_metrics(metrics, ncu.available_metrics(tool), "this GPU")
    sections = sorted({m.section for m in metrics if m.section})
    cmd = [tool, "--csv", "--page", "raw", "--print-units", "base", "--clock-control",
           ncu.CLOCK_CONTROL, "--cache-control", ncu.CACHE_CONTROL, "--profile-from-start",
           "off", *[a for s in sections for a in ("--section", s)],
           "--metrics", ",".join(m.name for m in metrics if not m.section),
           sys.executable, __file__, "--launch", args.kernel, "--size", args.size,
           "--repeats", str(args.repeats), *(["--baseline", args.baseline]
                                             if args.baseline else [])]
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if out.returncode != 0 or "CHECK FAILED" in out.stderr:
        print(ncu.tail(out.stdout + out.stderr, 12), file=sys.stderr)
        return 1 if "CHECK FAILED" in out.stderr else 2
    launches = ncu_csv.parse(out.stdout, metrics)
    ours, others = ncu_csv.split(launches, spec.entry, args.repeats)
    measured = ncu_csv.per_call(ours, metrics, args.repeats)
    beside = ncu_csv.per_call(others, metrics, args.repeats) if others else None
    clock = measured["sm_clock_hz"]
    bound = napkin.ceiling(p, arch="sm_90", sms=132, clock_hz=clock,
                           dram_bytes_per_s=args.dram_gbps * 1e9,
                           tensor_flops_per_clock_per_sm=4096, precision=spec.precision)
    ms = measured["duration_ns"] / 1e6
    report = {"meta": {"date_utc": started, "command": "python3 experiments/attention_profile.py "
                       + " ".join(sys.argv[1:]), "git": git_state(), "ncu": ncu.version(tool),
                       "kernel": args.kernel, "problem": p.text, "baseline": args.baseline,
                       "dram_gbps_assumed": args.dram_gbps},
              "napkin": {"tensor_ms": bound.tensor_ms, "exp_ms": bound.exp_ms,
                         "memory_ms": bound.memory_ms, "limiter": bound.limiter,
                         "ceiling_tflops": bound.tflops(p)},
              "kernel": measured, "kernel_tflops": napkin.flops(p) / (ms * 1e9),
              "baseline": beside}
    dest = Path(args.out)
    dest.mkdir(parents=True, exist_ok=True)
    stem = dest / f"attention-profile-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    Path(f"{stem}.json").write_text(json.dumps(report, indent=1))
    Path(f"{stem}.md").write_text("\n".join(markdown(report, metrics)) + "\n")
    print(f"{args.kernel} at {p.text}: {ms:.3f} ms under ncu, {report['kernel_tflops']:.1f} "
          f"TFLOP/s; napkin {bound.ms:.3f} ms ({bound.limiter}); tensor pipe "
          f"{measured['tensor_pipe_pct']:.1f}%")
    print(f"wrote {stem}.json and .md")
    return 0


def markdown(report: dict, metrics) -> list[str]:
    meta, nap = report["meta"], report["napkin"]
    lines = [f"# Attention profile: {meta['kernel']} at {meta['problem']}", "",
             f"- date (UTC): {meta['date_utc']}", f"- command: `{meta['command']}`",
             f"- git commit: {meta['git'].get('commit')}", f"- ncu: {meta['ncu']}",
             f"- napkin at the SM clock ncu measured: tensor cores {nap['tensor_ms']:.3f} ms, "
             f"exponentials {nap['exp_ms']:.3f} ms, memory {nap['memory_ms']:.3f} ms "
             f"(DRAM at {meta['dram_gbps_assumed']:.0f} GB/s assumed): {nap['limiter']} "
             f"bind, {nap['ceiling_tflops']:.0f} TFLOP/s at best",
             f"- the kernel: {report['kernel_tflops']:.1f} TFLOP/s under ncu", "",
             f"| metric | kernel | {meta['baseline'] or 'no baseline'} | what |",
             "|---|---|---|---|"]
    base = report["baseline"] or {}
    for m in metrics:
        value = report["kernel"].get(m.key)
        other = base.get(m.key)
        lines.append(f"| {m.key} | {value:.4g} | "
                     f"{'' if other is None else f'{other:.4g}'} | {m.what} |")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel")
    parser.add_argument("--size", default="B=4,H=16,S=4096,D=128")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", default="torch_sdpa_cudnn")
    parser.add_argument("--dram-gbps", type=float, default=DRAM_GBPS)
    parser.add_argument("--out", default="reports")
    parser.add_argument("--ncu", help="the ncu to run (default: found on PATH or in the usual "
                        "places)")
    parser.add_argument("--launch", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        return _launch(args) if args.launch else _profile(args)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
