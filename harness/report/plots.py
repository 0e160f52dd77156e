"""Plots of a run (matplotlib, PNG): the ladder against cuBLAS, and a roofline."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

from harness.errors import HarnessError
from harness.report.files import write_atomic


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def ladder(rows: Sequence[dict], size: tuple[int, int, int], title: str, path: Path) -> None:
    """GFLOP/s per kernel at ``size`` as bars (rows: measured, passing results), with the
    cuBLAS median as a line."""
    at = [r for r in rows if (r["m"], r["n"], r["k"]) == size]
    if not at:
        raise HarnessError(f"no measured rows at {'x'.join(map(str, size))} to plot")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 5))
    names = [r["kernel"] for r in at]
    ax.bar(range(len(at)), [r["gflops"] / 1e3 for r in at], color="#4477aa")
    cublas = sorted(r["cublas_gflops"] for r in at)[len(at) // 2] / 1e3
    ax.axhline(cublas, color="#cc3311", linestyle="--",
               label=f"cuBLAS ({at[0].get('cublas_compute', '')}, median of its runs) "
                     f"{cublas:.1f}")
    ax.legend(loc="upper left")
    ax.set_xticks(range(len(at)), names, rotation=35, ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"{title}, {'x'.join(map(str, size))}")
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def roofline(points: Sequence[dict], peak_gflops: float, dram_bytes_per_s: float | None,
             title: str, path: Path, precision: str = "FP32") -> None:
    """Each kernel at its implied arithmetic intensity, under the DRAM and compute roofs."""
    if not points:
        raise HarnessError("no measured rows to place on the roofline")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5.5))
    xs = [p["intensity_flop_per_byte"] for p in points]
    lo, hi = min(xs + [0.1]) / 2, max(xs + [100.0]) * 2
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    if dram_bytes_per_s:
        ax.plot(grid, [min(peak_gflops, x * dram_bytes_per_s / 1e9) for x in grid],
                color="black", label=f"roof: DRAM {dram_bytes_per_s / 1e12:.2f} TB/s, "
                                     f"{precision} {peak_gflops / 1e3:.1f} TFLOP/s")
    else:
        ax.axhline(peak_gflops, color="black", label=f"{precision} peak")
    for p in points:
        ax.scatter(p["intensity_flop_per_byte"], p["gflops"], s=25)
        ax.annotate(p["kernel"], (p["intensity_flop_per_byte"], p["gflops"]), fontsize=7,
                    xytext=(4, 2), textcoords="offset points")
    _finish_log_log(plt, fig, ax, "FLOP per byte of the global traffic the tiling implies",
                    "GFLOP/s (measured)", title, path)


def roofline_pairs(points: Sequence[dict], roofs: dict[str, float],
                   dram_bytes_per_s: float | None, title: str, path: Path) -> None:
    """Each kernel twice at its measured GFLOP/s: at the napkin's arithmetic intensity (open
    marker) and at the one its DRAM bytes give (filled), joined by a line; under the DRAM roof
    and one compute roof per precision (``roofs``: name -> GFLOP/s)."""
    if not points:
        raise HarnessError("no profiled kernels with DRAM bytes to place on the roofline")
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 6))
    xs = [p["measured_intensity"] for p in points] + [p["napkin_intensity"] for p in points
                                                      if p.get("napkin_intensity")]
    lo, hi = min(xs + [0.1]) / 2, max(xs + [100.0]) * 2
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    top = max(roofs.values())
    if dram_bytes_per_s:
        ax.plot(grid, [min(top, x * dram_bytes_per_s / 1e9) for x in grid], color="black",
                label=f"DRAM {dram_bytes_per_s / 1e12:.2f} TB/s")
    for name, peak in roofs.items():
        ax.axhline(peak, color="grey", linestyle=":", linewidth=1)
        ax.annotate(f"{name} peak {peak / 1e3:.0f} TFLOP/s", (grid[0], peak), fontsize=7,
                    xytext=(2, 2), textcoords="offset points")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, p in enumerate(points):
        colour = colours[i % len(colours)]
        y, x = p["gflops"], p["measured_intensity"]
        if p.get("napkin_intensity"):
            ax.plot([p["napkin_intensity"], x], [y, y], color=colour, linewidth=1)
            ax.scatter(p["napkin_intensity"], y, s=30, facecolors="none", edgecolors=colour)
        ax.scatter(x, y, s=30, color=colour)
        ax.annotate(p["label"], (x, y), fontsize=7, xytext=(4, 2), textcoords="offset points")
    ax.scatter([], [], s=30, facecolors="none", edgecolors="black",
               label="napkin intensity (tiling's global bytes)")
    ax.scatter([], [], s=30, color="black", label="measured intensity (DRAM bytes)")
    _finish_log_log(plt, fig, ax, "FLOP per byte",
                    "GFLOP/s (Nsight Compute's time of the profiled launch)", title, path)


def _finish_log_log(plt, fig, ax, xlabel: str, ylabel: str, title: str, path: Path) -> None:
    """A roofline's log-log axes, labels and legend; the figure written and closed."""
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)


def _save(fig, path: Path) -> None:
    """The figure as a PNG at ``path``, written atomically (files.write_atomic)."""
    data = io.BytesIO()
    fig.savefig(data, dpi=120, format="png")
    write_atomic(path, data.getvalue())
