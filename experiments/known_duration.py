"""The timer against kernels of known duration, in every regime.

    python3 experiments/known_duration.py [--report-dir reports]

A %globaltimer spin of 2, 5, 20 and 200 us and a 256 MB copy (each one's duration is what it
measures of itself with %globaltimer) are timed by the harness's timer
with cold and hot L2, sustained (repetitions replayed from CUDA graphs) and isolated, and, for
the record of what graphs changed, sustained with every launch enqueued from the host. Each
reading passes within max(2%, 0.3 us) of the expected duration (harness/bench/known.py).
Writes reports/<gpu>/known-duration-<date>.{json,md}.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, replace
from pathlib import Path

from tabulate import tabulate

from harness.bench import known
from harness.bench.session import BenchSession
from harness.gpu.timing import Timer, TimingOptions
from harness.kernels.registry import PROJECT_ROOT
from harness.report import files

REGIMES = {
    "cold, sustained": TimingOptions(),
    "hot, sustained": TimingOptions(cold_l2=False),
    "cold, isolated": TimingOptions(isolated_gap_ms=5.0),
    "hot, isolated": TimingOptions(cold_l2=False, isolated_gap_ms=5.0),
    "cold, sustained, no graph": TimingOptions(graph=False),
    "hot, sustained, no graph": TimingOptions(cold_l2=False, graph=False),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report-dir", type=Path, default=PROJECT_ROOT / "reports")
    parser.add_argument("--calibration-spin-us", type=float, default=None,
                        help="the spin the launch overhead is calibrated on (0: an empty "
                             "kernel); default TimingOptions'")
    args = parser.parse_args()
    if args.calibration_spin_us is not None:
        for name, options in REGIMES.items():
            REGIMES[name] = replace(options, calibration_spin_ms=args.calibration_spin_us / 1e3)
    with BenchSession() as session:
        device = session.device
        kernels = known.KnownKernels(session.arch, session.stream, device.sm_count)
        timers = {name: Timer(session.stream, device.l2_bytes, session.clocks, options)
                  for name, options in REGIMES.items()}
        rows = known.measure(kernels, timers)
        facts = session.facts()
    table = tabulate([[r.kernel, r.regime, f"{r.expected_us:.2f}", f"{r.measured_us:.2f}",
                       f"{r.error_us:+.2f}", f"{known.tolerance_us(r.expected_us):.2f}",
                       f"{r.p20_us:.2f}-{r.p80_us:.2f}", r.reps,
                       "pass" if r.passed else "FAIL"] for r in rows],
                     headers=["kernel", "regime", "expected us", "measured us", "error us",
                              "tolerance us", "p20-p80 us", "reps", ""], tablefmt="github")
    print(table)
    meta = files.metadata(facts, ["python3", *sys.argv],
                          asdict(next(iter(REGIMES.values()))), [], [])
    stem = args.report_dir / files.gpu_slug(facts["name"]) / f"known-duration-{files.run_stamp()}"
    method = ("expected: what the kernel measured of itself (%globaltimer: the spin's exit "
              "minus entry, the copy's last block end minus first block start, one more "
              "launch after the timing); measured: the timer's median; pass within "
              f"max({known.TOLERANCE_PCT:g}%, {known.TOLERANCE_US:g} us). Rows marked 'no graph' "
              "enqueue every launch from the host (the timer before graphs), for the record.")
    files.write_table_report(meta, [r.to_json() for r in rows], stem,
                             "Known-duration kernels", [f"- {method}", "", table, ""])
    print(f"\nwritten: {stem}.json, {stem}.md")
    graphed = [r for r in rows if "no graph" not in r.regime]
    return 0 if all(r.passed for r in graphed) else 1


if __name__ == "__main__":
    sys.exit(main())
