"""Where the run-to-run spread of % cuBLAS comes from (issue 21).

    python3 experiments/tc_variance.py [--size 4096] [--trials 4] [--report-dir reports]
        [KERNEL ...]

Between two default `harness run`s the mma.sync rows' % of cuBLAS at 4096 moved by up to 2.7
points while each run's p20-p80 was a fraction of a point. This times each kernel and cuBLAS
interleaved (as `harness run` does) several times in one process, in four ways:

- ``same``: the same operands each time, the run's timing options;
- ``fresh``: operands of the same values in a new allocation each time (the old ones kept, so
  that the new ones lie elsewhere in memory);
- ``steady``: the same operands, after 1 s of the pair back to back and with at least 200 ms
  of repetitions (the GPU in a steady state);
- ``long``: the same operands, run for the whole 300 ms budget every time.

A spread across ``fresh`` well above ``same`` says the kernel's time depends on where its
operands lie; ``steady`` against ``same`` says whether the run's short timing sees a transient.
Launches are not checked here: every kernel is the default run's, checked there.
Writes reports/<gpu>/tc-variance-<date>.{json,md}.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import replace
from functools import partial
from pathlib import Path

from tabulate import tabulate

from harness.gpu.timing import Timer
from harness.kernels.registry import DEFAULT_KERNEL_DIRS, PROJECT_ROOT, load_registry
from harness.kinds.gemm import launches
from harness.kinds.gemm.session import GemmSession
from harness.report import files

KERNELS = ["11_mma_sync_bf16:m128n256k64s4c1", "12_mma_tma_fp16:m256n128e",
           "13_mma_persist_fp16:m256n128l3g8", "14_mma_cluster_fp16:m256n128e",
           "16_wgmma_ws_bf16:m128n256", "19_wgmma_epi_bf16:s4e64"]


def _before(ops, stream, prepare) -> None:
    """What goes before every timed launch, outside its events: C poisoned, and the launch's
    own preparation (a workspace) where it has one."""
    ops.poison_c(stream)
    if prepare is not None:
        prepare()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernels", nargs="*", default=KERNELS)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--report-dir", type=Path, default=PROJECT_ROOT / "reports")
    args = parser.parse_args()
    registry = load_registry(DEFAULT_KERNEL_DIRS)
    kernels = registry.select(args.kernels)
    m = n = k = args.size
    rows = []
    with GemmSession.open() as session:
        run_options = session.timer.options
        timers = {
            "same": session.timer, "fresh": session.timer,
            "steady": Timer(session.stream, session.device.l2_bytes, session.clocks,
                            replace(run_options, warmup_ms=1000.0, min_ms=200.0)),
            "long": Timer(session.stream, session.device.l2_bytes, session.clocks,
                          replace(run_options, max_rel_se_pct=0.0)),
        }
        for kernel in kernels:
            gemm = session.load(kernel)
            kept = []
            for mode, timer in timers.items():
                for trial in range(args.trials if mode != "long" else 2):
                    if mode == "fresh":
                        ops = session.operands(kernel, m, n, k, seed=m + n + k)
                        kept.append(ops)
                    else:
                        ops = session.timing_operands(kernel, m, n, k)
                    launch = launches.launcher(gemm, ops, session)
                    before = partial(_before, ops, session.stream,
                                     getattr(launch, "prepare", None))
                    launch = getattr(launch, "run", launch)
                    blas = session.baseline_launcher(kernel, ops)
                    (kt, bt), _ = timer.time_interleaved(
                        [launch, blas], [before, partial(ops.poison_c, session.stream)])
                    rows.append({"kernel": kernel.name, "mode": mode, "trial": trial,
                                 "a_address": ops.a.address,
                                 "kernel_us": kt.median_ms * 1e3,
                                 "kernel_p20_us": kt.p20_ms * 1e3,
                                 "kernel_p80_us": kt.p80_ms * 1e3,
                                 "cublas_us": bt.median_ms * 1e3,
                                 "pct_cublas": 100 * bt.median_ms / kt.median_ms,
                                 "sm_clock_mhz": kt.sm_clock_mhz, "reps": kt.reps})
                    print(f"{kernel.name:34s} {mode:6s} {trial} kernel {kt.median_ms * 1e3:7.1f} "
                          f"us cuBLAS {bt.median_ms * 1e3:7.1f} us "
                          f"{rows[-1]['pct_cublas']:5.1f}% {kt.sm_clock_mhz:.0f} MHz "
                          f"{kt.reps} reps", flush=True)
            for ops in kept:
                ops.close()
        facts = session.facts()
    summary = []
    for kernel in kernels:
        for mode in timers:
            pct = [r["pct_cublas"] for r in rows if r["kernel"] == kernel.name
                   and r["mode"] == mode]
            us = [r["kernel_us"] for r in rows if r["kernel"] == kernel.name
                  and r["mode"] == mode]
            summary.append([kernel.name, mode, len(pct), f"{min(pct):.1f}-{max(pct):.1f}",
                            f"{max(pct) - min(pct):.2f}",
                            f"{min(us):.1f}-{max(us):.1f}",
                            f"{100 * (max(us) - min(us)) / statistics.median(us):.2f}"])
    table = tabulate(summary, headers=["kernel", "mode", "trials", "% cuBLAS", "range (points)",
                                       "kernel us", "kernel range %"], tablefmt="github")
    print(table)
    meta = files.metadata(facts, ["python3", *sys.argv], {}, [], [])
    stem = (args.report_dir / files.gpu_slug(facts["name"])
            / f"tc-variance-{files.run_stamp()}")
    files.write_table_report(meta, rows, stem, "Run-to-run spread of % cuBLAS",
                             [f"- {__doc__.split(chr(10) + chr(10))[2]}", "", table, ""])
    print(f"\nwritten: {stem}.json, {stem}.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
