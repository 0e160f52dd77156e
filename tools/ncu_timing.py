"""Cross-check the harness's timing against Nsight Compute's ``gpu__time_duration``.

    ncu --clock-control none --cache-control all --metrics gpu__time_duration.sum --csv \
        python3 tools/ncu_timing.py launch KERNEL --size 4096 > ncu.csv
    python3 tools/ncu_timing.py compare ncu.csv reports/h100/run-....json KERNEL --size 4096

``launch`` runs the kernel and the cuBLAS baseline a few times each (ncu times every kernel,
flushing caches before each by default, which matches the harness's cold-L2 mode);
``compare`` writes the medians side by side to reports/<gpu>/ncu-vs-harness-<kernel>.{json,md}.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.build.compile import compile_kernel  # noqa: E402
from harness.kernels.registry import discover, select  # noqa: E402
from harness.run.runner import parse_size  # noqa: E402


def launch(kernel_name: str, size: str, repeats: int, params: list[str] = ()) -> None:
    from harness.bench.gemm import LoadedGemm
    from harness.gpu.cublas import Cublas
    from harness.gpu.driver import Device, Stream
    from harness.run.worker import Operands

    (kernel,) = select(discover(), [kernel_name])
    if params:  # an explicit point, like a tuning point: e.g. NOLOAD=1 to time a knob
        kernel = kernel.with_params({n: int(v) for n, v in (p.split("=", 1) for p in params)},
                                    f"{kernel.name}+{','.join(params)}")
    m, n, k = parse_size(size)
    with Device(0) as device:
        stream = Stream()
        kernel = kernel.for_arch(device.arch.name)
        gemm = LoadedGemm(device, kernel, compile_kernel(kernel, device.arch.name))
        blas = Cublas(stream)
        ops = Operands(stream, m, n, k, kernel.spec.precision, kernel.spec.layout_b, seed=1)
        run = gemm.launcher(m, n, k, 1.0, ops.a.address, ops.b.address, 0.0, ops.c.address,
                            stream)
        for _ in range(repeats):
            run()
        for _ in range(repeats):
            blas.gemm(kernel.spec.precision, m, n, k, 1.0, ops.a.address, ops.b.address, 0.0,
                      ops.c.address, kernel.spec.layout_b)
        stream.synchronize()


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
    run = json.loads(run_json.read_text())
    (row,) = [r for r in run["rows"] if r["kernel"] == kernel.name
              and (r["m"], r["n"], r["k"]) == (m, n, k)]
    result = {
        "gpu": run["meta"]["gpu"], "kernel": kernel.name, "size": [m, n, k],
        "harness_run": str(run_json.resolve().relative_to(ROOT)),
        "harness_timing": run["meta"]["timing"],
        "ncu": "gpu__time_duration.sum, --clock-control none --cache-control all",
        "cublas_kernel": blas_name,
        "kernel_ncu_ms": ours, "kernel_ncu_median_ms": statistics.median(ours),
        "kernel_harness_median_ms": row["median_ms"],
        "cublas_ncu_ms": blas_vals, "cublas_ncu_median_ms": statistics.median(blas_vals),
        "cublas_harness_median_ms": row["cublas_median_ms"],
    }
    for who in ("kernel", "cublas"):
        h, c = result[f"{who}_harness_median_ms"], result[f"{who}_ncu_median_ms"]
        result[f"{who}_diff_pct"] = 100.0 * (h - c) / c
    stem = run_json.parent / f"ncu-vs-harness-{kernel.name.replace(':', '-')}-{m}"
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [f"# Harness timing vs Nsight Compute: {kernel.name} and cuBLAS at {m}x{n}x{k}",
             "", f"- GPU: {result['gpu']}", f"- harness run: `{result['harness_run']}` "
             f"({run['meta']['timing']['l2']})", f"- ncu: {result['ncu']}",
             f"- cuBLAS kernel: `{blas_name}`", "",
             "| | harness median ms | ncu median ms | difference |", "|---|---|---|---|"]
    for who, label in (("kernel", kernel.name), ("cublas", "cuBLAS")):
        lines.append(f"| {label} | {result[f'{who}_harness_median_ms']:.4f} | "
                     f"{result[f'{who}_ncu_median_ms']:.4f} | {result[f'{who}_diff_pct']:+.2f}% |")
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("launch")
    p.add_argument("kernel")
    p.add_argument("--size", default="4096")
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                   help="override a parameter (launches unchecked: for profiling only)")
    c = sub.add_parser("compare")
    c.add_argument("ncu_csv", type=Path)
    c.add_argument("run_json", type=Path)
    c.add_argument("kernel")
    c.add_argument("--size", default="4096")
    args = parser.parse_args()
    if args.command == "launch":
        launch(args.kernel, args.size, args.repeats, args.param)
    else:
        compare(args.ncu_csv, args.run_json, args.kernel, args.size)


if __name__ == "__main__":
    main()
