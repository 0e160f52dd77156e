"""A run's ladder with its napkin model: table, plots, and the README's results section.

Everything here is derived from a run's JSON (written on the GPU) and the kernels' specs. A
kernel whose spec has no ``[model]`` table (or whose file is gone) keeps its measured columns
and leaves the model's blank.
"""

from __future__ import annotations

import re
from pathlib import Path

from tabulate import tabulate

from harness.bench.result import Result, RunReport, load_report
from harness.errors import HarnessError
from harness.kernels.registry import PROJECT_ROOT, discover
from harness.kernels.spec import read_spec
from harness.report import napkin, plots
from harness.report.files import gpu_slug, write_atomic, writing


def load(path: Path) -> RunReport:
    return load_report(path)


def _model(result: Result, defaults: dict) -> tuple[dict, str]:
    """The napkin model of ``result``'s kernel, and its spec's prediction; ({}, "") when the
    file is gone or has no [model] table."""
    try:
        spec = read_spec(PROJECT_ROOT / result.kernel.file)
    except HarnessError:
        return {}, ""
    if not spec.model:
        return {}, spec.predicted
    params = result.kernel.params or defaults.get(result.kernel.name, {})
    return (napkin.model(spec, params, result.m, result.n, result.k, result.kernel.name),
            spec.predicted)


def napkin_rows(run: RunReport) -> list[dict]:
    """Every passing result of ``run`` with its napkin model and roofline bound."""
    device = run.meta["device"]
    slug = gpu_slug(run.meta["gpu"])
    defaults = {k.name: dict(k.params) for k in discover()}
    out = []
    for r in run.results:
        if r.status != "pass":
            continue
        est, predicted = _model(r, defaults)
        row = {"kernel": r.kernel.name, "precision": r.kernel.precision, "m": r.m, "n": r.n,
               "k": r.k, "gflops": r.gflops, "pct_cublas": r.pct_baseline,
               "pct_peak": r.pct_peak, "cublas_gflops": r.baseline_gflops,
               "cublas_compute": r.baseline.compute if r.baseline else "",
               "predicted": predicted, "peak_gflops": r.peak_gflops_at_clock, **est}
        if est:
            limit, roof = napkin.bound(est["intensity_flop_per_byte"],
                                       est["smem_loads_per_fma"], device["arch"],
                                       device["sm_count"], r.timing.sm_clock_mhz, slug,
                                       r.kernel.precision)
            row.update(bound_gflops=limit, bound=roof, pct_of_bound=100.0 * r.gflops / limit)
        out.append(row)
    return out


def _f(row: dict, key: str, fmt: str, scale: float = 1.0) -> str:
    value = row.get(key)
    return "" if value is None else fmt.format(value / scale)


def table(rows: list[dict], size: tuple[int, int, int], fmt: str = "github") -> str:
    """The results at ``size`` with their napkin model; the model's columns are left out when
    no kernel at this size has one (a tensor-core comparison)."""
    at = [r for r in rows if (r["m"], r["n"], r["k"]) == size]
    headers = ["kernel", "GFLOP/s", "% cuBLAS", "% peak", "implied GB", "FLOP/B",
               "smem loads/FMA", "napkin bound GFLOP/s", "% of bound"]
    cells = [[r["kernel"], f"{r['gflops']:.0f}", f"{r['pct_cublas']:.1f}", f"{r['pct_peak']:.1f}",
              _f(r, "global_bytes", "{:.2f}", 1e9), _f(r, "intensity_flop_per_byte", "{:.1f}"),
              _f(r, "smem_loads_per_fma", "{:.3g}"),
              f"{r['bound_gflops']:.0f} ({r['bound']})" if "bound" in r else "",
              _f(r, "pct_of_bound", "{:.1f}")] for r in at]
    if not any("global_bytes" in r for r in at):
        headers, cells = headers[:4], [c[:4] for c in cells]
    return tabulate(cells, headers=headers, tablefmt=fmt, disable_numparse=True)


def _precisions(rows: list[dict]) -> str:
    """The input precisions of ``rows``, as titles name them ("FP32", "BF16 and FP32")."""
    names = sorted({r["precision"].upper() for r in rows})
    return " and ".join(names) if names else "no"


def write(run_path: Path, size: tuple[int, int, int]) -> tuple[Path, Path, Path | None]:
    """<run>-ladder.md (tables at every size), the ladder plot at ``size``, and the roofline
    of the kernels with a napkin model (None when none has one). Nothing is written until
    everything the files need is known to be there."""
    run = load(run_path)
    rows = napkin_rows(run)
    gpu = run.meta["gpu"]
    at = [r for r in rows if (r["m"], r["n"], r["k"]) == size]
    if not at:
        have = sorted({"x".join(map(str, (r["m"], r["n"], r["k"]))) for r in rows})
        raise HarnessError(f"{run_path} has no passing results at {'x'.join(map(str, size))}; "
                           f"it has {', '.join(have) or 'none'}: pass one with --size")
    stem = run_path.with_suffix("")
    md = stem.parent / f"{stem.name}-ladder.md"
    sizes = sorted({(r["m"], r["n"], r["k"]) for r in rows})
    sizes_note = ("" if all(r["precision"] in ("fp32", "tf32") for r in rows)
                  else ", each at its element size: 2 bytes for BF16/FP16 inputs")
    blank_note = ("" if all("global_bytes" in r for r in rows) else
                  " Kernels whose spec has no [model] table leave the model's columns blank.")
    text = [f"# Ladder and napkin model: {gpu}", "",
            f"From `{run_path.name}` ({run.meta['date_utc']}, `{run.meta['command']}`, "
            f"{run.meta['timing']['l2']}).", "",
            "Implied GB: global traffic the tiling guarantees (A once per block column, B once "
            f"per block row, C once{sizes_note}); FLOP/B: 2MNK over it; smem loads/FMA: "
            "shared-load instructions per FMA in the source; bound: min("
            f"{_precisions(rows)} peak at the measured clock, FLOP/B x DRAM bandwidth, 64 / "
            f"(smem loads per FMA) FLOP per clock per SM).{blank_note}", ""]
    for s in sizes:
        text += [f"## {'x'.join(map(str, s))}", "", table(rows, s), ""]
    ladder_png = stem.parent / f"{stem.name}-ladder.png"
    roof_png = stem.parent / f"{stem.name}-roofline.png"
    modelled = [r for r in at if "intensity_flop_per_byte" in r]
    with writing(stem.parent):
        plots.ladder(rows, size, f"{_precisions(at)} ladder on {gpu}", ladder_png)
        if modelled:
            peak = max(r["peak_gflops"] for r in modelled)
            plots.roofline(modelled, peak, napkin.DRAM_BYTES_PER_S.get(gpu_slug(gpu)),
                           f"Roofline at {'x'.join(map(str, size))} on {gpu}", roof_png,
                           _precisions(modelled))
        else:
            roof_png = None
        write_atomic(md, "\n".join(text))
    return md, ladder_png, roof_png


def markers(section: str) -> tuple[str, str]:
    """The README comment lines around a generated section (``results`` is the main one)."""
    return f"<!-- {section}:start -->", f"<!-- {section}:end -->"


def readme_section(run_path: Path, size: tuple[int, int, int] | None,
                   section: str = "results") -> str:
    """A README section generated from ``run_path``: its table at ``size``, or at every size
    it has (``None``) with a heading per size."""
    run = load(run_path)
    rel = run_path.resolve().relative_to(PROJECT_ROOT)
    stem = rel.with_suffix("")
    rows = napkin_rows(run)
    sizes = [size] if size else sorted({(r["m"], r["n"], r["k"]) for r in rows})
    command = f"harness report {rel} --readme" + (f" --section {section}"
                                                  if section != "results" else "")
    command += "" if size else " --all-sizes"
    start, end = markers(section)
    lines = [
        start,
        f"Generated by `{command}` from the {gpu_slug(run.meta['gpu']).upper()} run of "
        f"{run.meta['date_utc']} ({run.meta['timing']['l2']}"
        + (f"; {run.meta['mode'].split(';')[0]}" if run.meta.get("mode") else "")
        + f"): `{run.meta['command']}`; plots: "
        f"[ladder]({stem}-ladder.png)"
        + (f", [roofline]({stem}-roofline.png)" if (PROJECT_ROOT / f"{stem}-roofline.png"
                                                   ).exists() else "")
        + f"; every size in [{stem.name}-ladder.md]({stem}-ladder.md).",
    ]
    for s in sizes:
        if len(sizes) > 1:
            lines += ["", f"{'x'.join(map(str, s))}:"]
        lines += ["", table(rows, s)]
    return "\n".join([*lines, end])


def update_readme(readme: Path, section: str, name: str = "results") -> None:
    start, end = markers(name)
    text = readme.read_text()
    pattern = re.compile(re.escape(start) + ".*?" + re.escape(end), re.DOTALL)
    if not pattern.search(text):
        raise HarnessError(f"{readme} has no {start} ... {end} section")
    write_atomic(readme, pattern.sub(lambda _: section, text))


def readme_sources(readme: Path) -> list[tuple[Path, str, bool]]:
    """Every generated section of the README: its run report, its name, and whether it shows
    every size."""
    found = re.findall(r"`harness report (\S+) --readme( --section (\S+))?( --all-sizes)?`",
                       readme.read_text())
    return [(PROJECT_ROOT / path, name or "results", bool(every))
            for path, _, name, every in found]


def readme_source(readme: Path) -> Path | None:
    """The run report the README's results section was generated from."""
    return next((path for path, name, _ in readme_sources(readme) if name == "results"), None)
