"""The SM clock a tensor-core kernel actually ran at, beside the one NVML sampled.

    python3 experiments/kernel_clock.py 12_mma_tma_bf16:m256n128e [KERNEL ...] [--size 4096]

Each kernel is built with CLOCKREC = 1 (ptx/hgemm/mma_sync_gemm.ptxh: every block adds its
%clock64 and %globaltimer deltas, entry to exit, into the module's ``clockrec``), checked
against the float64 reference, then run two ways:

- sustained: the harness's own timing (CUDA events per launch, an L2 flush before each, the
  queue kept full), as ``harness run`` times it; a first pass warms the card up, and the
  second pass's launches are the ones counted;
- burst: single launches after 50 ms idle, each after an L2 flush, so the card starts cool.
  Their event times include the GPU waking from idle (on the H100 ~50 us more than sustained,
  kernel-clock-20261122-214442), so burst "cycles" overstate the kernel's own.

For each: the median time, TFLOP/s, NVML's median SM clock, the in-kernel clock (the sum of
block cycles over the sum of block nanoseconds) and the SM cycles per launch (median time x
in-kernel clock); for the sustained pass also what held the clock, and from a power pass after
it (the launch back to back for 2 s, warm L2: harness/gpu/timing.py) the board's mean power
and energy per FLOP.
Writes reports/<gpu>/kernel-clock-<date>.{json,md}.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from harness.errors import HarnessError
from harness.kernels.registry import PROJECT_ROOT, Kernel, discover, select
from harness.run.runner import parse_size

BURST_LAUNCHES = 30
BURST_IDLE_S = 0.05


def with_clockrec(kernel: Kernel) -> Kernel:
    if "CLOCKREC" not in dict(kernel.params):
        raise HarnessError(f"{kernel.name} has no CLOCKREC knob: only the PTX tensor-core "
                           "GEMMs (ptx/hgemm/1[1-4]_*) record their clock")
    return kernel.with_params({"CLOCKREC": 1}, f"{kernel.name}+CLOCKREC=1")


class ClockRecord:
    """The module's ``clockrec[2]``, zeroed and read back as (cycles, nanoseconds) in order
    on the stream the kernel runs on."""

    def __init__(self, module, label: str, stream):
        self.words, self.stream = module.global_buffer("clockrec"), stream
        if self.words.nbytes != 16:
            raise HarnessError(f"{label}: clockrec is {self.words.nbytes} bytes, expected 16")

    def zero(self) -> None:
        self.words.fill_u32(0, self.stream)

    def read(self) -> tuple[int, int]:
        cycles, ns = self.words.download(np.uint64, (2,), self.stream)
        return int(cycles), int(ns)


def measure(names: list[str], size: str, budget_ms: float, power_s: float) -> dict:
    from harness.gpu.driver import Event
    from harness.gpu.timing import TimingOptions
    from harness.kinds.gemm.checks import check_one
    from harness.kinds.gemm.launches import launcher
    from harness.kinds.gemm.session import GemmSession

    m, n, k = parse_size(size)
    flop = 2.0 * m * n * k
    chosen = [(base, with_clockrec(base)) for name in names
              for base in select(discover(), [name])]  # bad names fail before the GPU is
    rows = []                                           # opened
    with GemmSession.open(TimingOptions(budget_ms=budget_ms, max_rel_se_pct=0)) as session:
        stream, timer, clocks = session.stream, session.timer, session.clocks
        for base, kernel in chosen:
            gemm = session.load(kernel)
            record = ClockRecord(gemm.module, kernel.name, stream)
            checks = [r for shape in ((517, 392, 200), (m, n, k))
                      for r in check_one(gemm, stream, *shape, seed=7)]
            failed = [r.message for r in checks if not r.passed]
            if failed:
                raise HarnessError(f"{base.name} with CLOCKREC = 1 fails the check: "
                                   f"{failed[0]}")
            error = max(r.rel_err_norm for r in checks)
            ops = session.operands(gemm.kernel, m, n, k, seed=7)
            run = launcher(gemm, ops, session)
            timer.time(run)  # warms the card to its sustained state
            record.zero()
            sustained = timer.time(run)
            cycles, ns = record.read()
            sustained_mhz = 1e3 * cycles / ns
            pass_w, pass_pj = math.nan, math.nan
            if power_s > 0:  # after the clock record is read: the pass runs warm L2
                power = timer.power(run, power_s)
                pass_w, pass_pj = power.power_w, 1e12 * power.energy_j / flop
            starts, ends, burst_ms = Event(), Event(), []
            record.zero()
            burst_nvml = []
            for _ in range(BURST_LAUNCHES):
                time.sleep(BURST_IDLE_S)
                timer.flush()
                starts.record(stream)
                run()
                ends.record(stream)
                stream.synchronize("burst launch")
                burst_ms.append(ends.elapsed_ms(starts))
                burst_nvml.append(clocks.sm_clock_mhz())
            cycles, ns = record.read()
            burst_mhz = 1e3 * cycles / ns
            burst_median = statistics.median(burst_ms)
            for mode, ms, nvml, mhz, watts, pj, limits in (
                    ("sustained", sustained.median_ms, sustained.sm_clock_mhz, sustained_mhz,
                     pass_w, pass_pj, sustained.clock_limits),
                    ("burst", burst_median, statistics.median(burst_nvml), burst_mhz,
                     math.nan, math.nan, "")):  # single launches: no power pass
                rows.append({
                    "kernel": base.name, "size": f"{m}x{n}x{k}", "mode": mode,
                    "median_ms": ms, "tflops": flop / ms / 1e9,
                    "nvml_sm_mhz": nvml, "in_kernel_sm_mhz": mhz,
                    "cycles_per_launch": ms * 1e3 * mhz,
                    "tflops_per_ghz": flop / ms / 1e9 / (mhz / 1e3),
                    "power_w": watts, "pj_per_flop": pj,
                    "clock_limits": limits,
                    "rel_err_norm": error,
                })
                print(f"{base.name} {mode}: {flop / ms / 1e9:.1f} TFLOP/s, NVML {nvml:.0f} "
                      f"MHz, in kernel {mhz:.0f} MHz", file=sys.stderr)
            ops.close()
        return {"facts": session.facts(), "rows": rows,
                "kernels": [base for base, _ in chosen]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernels", nargs="+", metavar="KERNEL")
    ap.add_argument("--size", default="4096")
    ap.add_argument("--budget-ms", type=float, default=300.0,
                    help="GPU time of the sustained timing (300, as harness run)")
    ap.add_argument("--power", type=float, default=2.0, metavar="SECONDS",
                    help="the power pass after the sustained timing (2; 0 skips it)")
    ap.add_argument("--report-dir", type=Path, default=PROJECT_ROOT / "reports")
    args = ap.parse_args(argv)
    from tabulate import tabulate

    from harness.report import files

    try:
        result = measure(args.kernels, args.size, args.budget_ms, args.power)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    facts = result["facts"]
    meta = files.metadata(facts, ["python3", "experiments/kernel_clock.py", *sys.argv[1:]],
                          {"budget_ms": args.budget_ms}, [parse_size(args.size)],
                          result["kernels"])
    stem = (args.report_dir / files.gpu_slug(facts["name"])
            / f"kernel-clock-{files.run_stamp()}")
    table = tabulate([[r["kernel"], r["size"], r["mode"], f"{r['median_ms'] * 1e3:.1f}",
                       f"{r['tflops']:.1f}", f"{r['nvml_sm_mhz']:.0f}",
                       f"{r['in_kernel_sm_mhz']:.0f}", f"{r['cycles_per_launch'] / 1e3:.0f}k",
                       f"{r['tflops_per_ghz']:.1f}",
                       "" if math.isnan(r["power_w"]) else f"{r['power_w']:.0f}",
                       "" if math.isnan(r["pj_per_flop"]) else f"{r['pj_per_flop']:.2f}",
                       r["clock_limits"]] for r in result["rows"]],
                     headers=["kernel", "size", "mode", "median us", "TFLOP/s", "NVML MHz",
                              "in-kernel MHz", "cycles", "TFLOP/s per GHz", "board W",
                              "pJ/FLOP", "clock held by"], tablefmt="github")
    body = [
            "- sustained: the harness's timing (events per launch, L2 flushed before each, "
            f"queue full, {args.budget_ms:.0f} ms), after a first pass that warms the card; "
            "burst: "
            f"{BURST_LAUNCHES} single launches, each after {BURST_IDLE_S * 1e3:.0f} ms idle "
            "and an L2 flush (their times include waking from idle: read burst cycles as an "
            "upper bound)\n"
            "- in-kernel MHz: the sum over blocks of %clock64 cycles over the sum of "
            "%globaltimer nanoseconds, entry to exit (CLOCKREC = 1; checked against the "
            "float64 reference first); cycles = median time x in-kernel clock", "", table, ""]
    files.write_table_report(meta, result["rows"], stem, "The SM clock inside the kernel", body)
    print(table)
    print(f"written: {stem}.json, {stem}.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
