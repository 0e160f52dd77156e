"""The reports of the commands that measure in the harness's own process, with the board's
power: ``harness ceiling`` (issue ceilings, power with ``--power``) and ``harness energy``
(energy per FLOP of a kernel's points)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from tabulate import tabulate

from harness.report import files


def write_ceiling_report(record, options, command: Sequence[str], report_dir: Path
                         ) -> tuple[Path, Path]:
    """``harness ceiling``'s report of a CeilingRecord (commands/ceiling.py) measured with
    CeilingRunOptions ``options``: ``reports/<gpu>/ceiling-<time>.{json,md}``."""
    meta = {**files.metadata(record.facts, command, options.timing, (), record.kernels),
            "launch": [asdict(launch) for launch in options.launches]}
    stem = files.new_stem(report_dir / files.gpu_slug(record.facts["name"]), "ceiling", None)
    return files.write_ceiling(meta, record.rows, stem)


ENERGY_HEADERS = ["point", "checked", "rounds", "board W", "TFLOP/s", "NVML MHz",
                  "pJ/FLOP median (range)", "clock held by"]


def energy_summary(rows: list[dict]) -> str:
    """Per point: medians over the rounds, and the range of pJ/FLOP, as a markdown table."""
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
    return tabulate(out, headers=ENERGY_HEADERS, tablefmt="github")


def write_energy_report(record, options, command: Sequence[str], report_dir: Path
                        ) -> tuple[Path, Path]:
    """``harness energy``'s report of an EnergyRecord (commands/energy.py) measured with
    EnergyOptions ``options``: ``reports/<gpu>/kernel-energy-<time>.{json,md}``. Energy times
    no repetitions: its report names no timing options (files.timing_record)."""
    meta = files.metadata(record.facts, command, {}, [options.size], record.kernels)
    method = (f"each point run back to back for {options.seconds:g} s with warm L2, "
              f"{options.rounds} rounds in turn; board power from NVML's energy counter between "
              "its first and last move in the pass; pJ/FLOP = W x GPU time per launch / FLOP")
    stem = files.new_stem(report_dir / files.gpu_slug(record.facts["name"]), "kernel-energy",
                          None)
    return files.write_table_report(meta, record.rows, stem, "Board energy per FLOP",
                                    [f"- method: {method}", "", energy_summary(record.rows), ""])
