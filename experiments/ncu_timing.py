"""Cross-check the harness's timing against Nsight Compute's ``gpu__time_duration``.

    ncu --clock-control none --cache-control all --profile-from-start off \
        --metrics gpu__time_duration.sum --csv \
        python3 -m harness launch KERNEL --size 4096 > ncu.csv
    python3 experiments/ncu_timing.py ncu.csv reports/h100/run-....json KERNEL --size 4096

``harness launch`` checks the kernel, then launches it and cuBLAS a few times each between
cuProfilerStart and cuProfilerStop (ncu flushes caches before each by default, which matches the
harness's cold-L2 mode); this script writes the medians side by side to
reports/<gpu>/ncu-vs-harness-<kernel>-<size>.{json,md}.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import sys
from pathlib import Path

from harness.kernels.registry import PROJECT_ROOT, discover, select
from harness.report import files
from harness.report.reading import load_report
from harness.run.runner import parse_size


def ncu_durations(text: str) -> dict[str, list[float]]:
    """Kernel name -> gpu__time_duration values in ms, from ncu's --csv output."""
    start = text.find('"ID"')
    rows = csv.DictReader(io.StringIO(text[start:]))
    out: dict[str, list[float]] = {}
    for row in rows:
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "nsecond")
        scale = {"ns": 1e-6, "nsecond": 1e-6, "us": 1e-3, "usecond": 1e-3, "ms": 1.0,
                 "msecond": 1.0, "s": 1e3, "second": 1e3}[unit]
        out.setdefault(row["Kernel Name"], []).append(value * scale)
    return out


def compare(ncu_csv: Path, run_json: Path, kernel_name: str, size: str) -> None:
    (kernel,) = select(discover(), [kernel_name])
    m, n, k = parse_size(size)
    durations = ncu_durations(ncu_csv.read_text())
    ours = [v for name, vals in durations.items() if name.startswith(kernel.spec.entry)
            for v in vals]
    blas = {name: vals for name, vals in durations.items()
            if not name.startswith(kernel.spec.entry)}
    if not ours or len(blas) != 1:
        raise SystemExit(f"expected the kernel and exactly one cuBLAS kernel in {ncu_csv}, "
                         f"found {sorted(durations)}")
    (blas_name, blas_vals), = blas.items()
    run = load_report(run_json)
    (row,) = [r for r in run.results if r.kernel.name == kernel.name and r.size == (m, n, k)]
    result = {
        **files.provenance(["python3", "experiments/ncu_timing.py", *sys.argv[1:]], [kernel]),
        "gpu": run.meta["gpu"], "kernel": kernel.name, "size": [m, n, k],
        "harness_run": str(run_json.resolve().relative_to(PROJECT_ROOT)),
        "harness_timing": run.meta["timing"],
        "ncu": "gpu__time_duration.sum, --clock-control none --cache-control all",
        "cublas_kernel": blas_name,
        "kernel_ncu_ms": ours, "kernel_ncu_median_ms": statistics.median(ours),
        "kernel_harness_median_ms": row.timing.median_ms,
        "cublas_ncu_ms": blas_vals, "cublas_ncu_median_ms": statistics.median(blas_vals),
        "cublas_harness_median_ms": row.baseline.timing.median_ms,
    }
    for who in ("kernel", "cublas"):
        h, c = result[f"{who}_harness_median_ms"], result[f"{who}_ncu_median_ms"]
        result[f"{who}_diff_pct"] = 100.0 * (h - c) / c
    stem = run_json.parent / f"ncu-vs-harness-{kernel.name.replace(':', '-')}-{m}"
    dirty = " (with uncommitted changes)" if result["git"].get("dirty") else ""
    lines = [f"# Harness timing vs Nsight Compute: {kernel.name} and cuBLAS at {m}x{n}x{k}",
             "", f"- date (UTC): {result['date_utc']}", f"- command: `{result['command']}`",
             f"- git commit: {result['git'].get('commit')}{dirty}",
             f"- GPU: {result['gpu']}", f"- harness run: `{result['harness_run']}` "
             f"({run.meta['timing']['l2']})", f"- ncu: {result['ncu']}",
             f"- cuBLAS kernel: `{blas_name}`", "",
             "| | harness median ms | ncu median ms | difference |", "|---|---|---|---|"]
    for who, label in (("kernel", kernel.name), ("cublas", "cuBLAS")):
        lines.append(f"| {label} | {result[f'{who}_harness_median_ms']:.4f} | "
                     f"{result[f'{who}_ncu_median_ms']:.4f} | {result[f'{who}_diff_pct']:+.2f}% |")
    with files.writing(stem.parent):
        stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
        stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ncu_csv", type=Path)
    parser.add_argument("run_json", type=Path)
    parser.add_argument("kernel")
    parser.add_argument("--size", default="4096")
    args = parser.parse_args()
    compare(args.ncu_csv, args.run_json, args.kernel, args.size)


if __name__ == "__main__":
    main()
