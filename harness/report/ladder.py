"""A run's ladder with its napkin model: table, plots, and the README's results section.

Everything here is derived from a run's JSON (written on the GPU) and the kernels' specs. A
kernel whose spec has no ``[model]`` table (or whose file is gone) keeps its measured columns
and leaves the model's blank.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

from tabulate import tabulate

from harness.bench.result import Result
from harness.errors import HarnessError
from harness.kernels.registry import PROJECT_ROOT, discover
from harness.kernels.spec import read_spec
from harness.report import napkin, plots
from harness.report.files import gpu_slug, write_atomic, writing
from harness.report.reading import RunReport, load_report
from harness.report.width import NAME, TEXT, fit_table, fit_text


def load(path: Path) -> RunReport:
    return load_report(path)


_NO_MODEL = (HarnessError, OSError, KeyError, ValueError, ArithmeticError)
"""What computing a kernel's napkin model from its spec as it is now can raise for a row of
an older report (a file gone or moved, a formula that names a parameter the row lacks, a
precision the model has no figures for): the row keeps its measured columns, the model's are
left blank."""


def _model(result: Result, defaults: dict, specs: dict) -> tuple[dict, str]:
    """The napkin model of ``result``'s kernel, and its spec's prediction; ({}, "") when the
    file is gone, has no [model] table, or its model cannot be computed for this row.
    ``specs``: the specs read so far, by file (None for one that cannot be read)."""
    if result.kernel.file not in specs:
        try:
            specs[result.kernel.file] = read_spec(PROJECT_ROOT / result.kernel.file)
        except _NO_MODEL:
            specs[result.kernel.file] = None
    spec = specs[result.kernel.file]
    if spec is None:
        return {}, ""
    if not spec.model:
        return {}, spec.predicted
    params = result.kernel.params or defaults.get(result.kernel.name, {})
    try:
        return (napkin.model(spec, params, result.m, result.n, result.k, result.kernel.name),
                spec.predicted)
    except _NO_MODEL:
        return {}, spec.predicted


def _device(run: RunReport) -> tuple[str, int] | None:
    """The arch and SM count the run's GPU has, for the napkin bound; None where the report
    does not say (a stream has no metadata)."""
    device = run.meta.get("device") or {}
    arch, sm_count = device.get("arch"), device.get("sm_count")
    if isinstance(arch, str) and isinstance(sm_count, int) and sm_count > 0:
        return arch, sm_count
    return None


def _l2_bytes(run: RunReport) -> int | None:
    """The run's GPU's L2 in bytes, where its report says."""
    value = (run.meta.get("device") or {}).get("l2_bytes")
    return value if isinstance(value, int) and value > 0 else None


def _waves(r: Result, est: dict, specs: dict, sm_count: int, run: RunReport) -> float | None:
    """DRAM bytes by waves of blocks (napkin.dram_bytes_waves) for ``r``'s launch as its row
    records it (grid, blocks per SM); None where it does not say or the model cannot."""
    l2 = _l2_bytes(run)
    spec = specs.get(r.kernel.file)
    launch, occ = getattr(r, "launch", None), getattr(r, "occupancy", None)
    per_sm = getattr(occ, "driver_blocks_per_sm", None) or getattr(
        occ, "offline_blocks_per_sm", None)
    if not (l2 and spec is not None and launch is not None and per_sm):
        return None
    try:
        return napkin.dram_bytes_waves(est, spec, r.m, r.n, r.k, math.prod(launch.grid),
                                       per_sm * sm_count, l2)
    except _NO_MODEL:
        return None


def napkin_rows(run: RunReport) -> list[dict]:
    """Every passing, timed result of ``run`` with its napkin model and roofline bound."""
    device = _device(run)
    slug = gpu_slug(run.meta.get("gpu") or "")
    defaults = {k.name: dict(k.params) for k in discover()}
    out, specs = [], {}
    for r in run.results:
        if r.status != "pass" or r.timing is None:
            continue
        est, predicted = _model(r, defaults, specs)
        row = {"kernel": r.kernel.name, "precision": r.kernel.precision, "m": r.m, "n": r.n,
               "k": r.k, "gflops": r.gflops, "pct_cublas": r.pct_baseline,
               "pct_peak": r.pct_peak, "cublas_gflops": r.baseline_gflops,
               "cublas_compute": r.baseline.compute if r.baseline else "",
               "predicted": predicted, "peak_gflops": r.peak_gflops_at_clock,
               "pct_ceiling": r.pct_ceiling,
               "of_bound": r.checks.of_bound if r.checks is not None else math.nan, **est}
        if est and device is not None:
            intensity, in_l2 = napkin.dram_intensity(est, _l2_bytes(run),
                                                     _waves(r, est, specs, device[1], run))
            try:
                limit, roof = napkin.bound(intensity, est["smem_loads_per_fma"], *device,
                                           r.timing.sm_clock_mhz, slug, r.kernel.precision)
            except _NO_MODEL:
                limit = math.nan
            if roof == "DRAM" and in_l2:
                roof = f"DRAM, {in_l2}"
            elif roof == "DRAM" and limit > 0 and r.gflops > limit:
                # a tile of one element: what its tiling implies, L1 and L2 serve again
                roof = "DRAM as tiled: caches beat it"
            if limit > 0:
                row.update(bound_gflops=limit, bound=roof, pct_of_bound=100.0 * r.gflops / limit)
        out.append(row)
    return out


def _f(row: dict, key: str, fmt: str, scale: float = 1.0) -> str:
    value = row.get(key)
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    return fmt.format(value / scale)


_NARROW = {"% cuBLAS": "% of\ncuBLAS", "% peak": "% of\npeak", "implied GB": "implied\nGB",
           "smem loads/FMA": "smem\nloads/FMA", "napkin bound GFLOP/s": "napkin bound\nGFLOP/s",
           "% of bound": "% of\nbound", "% ceiling": "% of\nceiling",
           "error / bound": "error /\nbound"}


def table(rows: list[dict], size: tuple[int, int, int], fmt: str = "github",
          width: int | None = None) -> str:
    """The results at ``size`` with their napkin model; the model's columns are left out when
    no kernel at this size has one (a tensor-core comparison). ``width``: two-line titles,
    names and bounds wrapped, to fit it."""
    at = [r for r in rows if (r["m"], r["n"], r["k"]) == size]
    headers = ["kernel", "GFLOP/s", "% cuBLAS", "% peak", "implied GB", "FLOP/B",
               "smem loads/FMA", "napkin bound GFLOP/s", "% of bound"]
    cells = [[r["kernel"], _f(r, "gflops", "{:.0f}"), _f(r, "pct_cublas", "{:.1f}"),
              _f(r, "pct_peak", "{:.1f}"),
              _f(r, "global_bytes", "{:.2f}", 1e9), _f(r, "intensity_flop_per_byte", "{:.1f}"),
              _f(r, "smem_loads_per_fma", "{:.3g}"),
              f"{r['bound_gflops']:.0f} ({r['bound']})" if "bound" in r else "",
              _f(r, "pct_of_bound", "{:.1f}")] for r in at]
    if not any("global_bytes" in r for r in at):
        headers, cells = headers[:4], [c[:4] for c in cells]
        if at and all(math.isfinite(r.get("of_bound", math.nan)) and r.get("pct_ceiling")
                      for r in at):  # tensor-core rows whose report records both
            headers += ["% ceiling", "error / bound"]
            cells = [c + [_f(r, "pct_ceiling", "{:.1f}"), _f(r, "of_bound", "{:.2f}")]
                     for c, r in zip(cells, at, strict=True)]
    if width is None:
        return tabulate(cells, headers=headers, tablefmt=fmt, disable_numparse=True)
    wrap = {7: (TEXT, 7), 0: (NAME, 16)} if len(headers) > 4 else {0: (NAME, 16)}
    return fit_table([_NARROW.get(h, h) for h in headers], cells, wrap, width, "simple").text


def _precisions(rows: list[dict]) -> str:
    """The input precisions of ``rows``, as titles name them ("FP32", "BF16 and FP32")."""
    names = sorted({r["precision"].upper() for r in rows})
    return " and ".join(names) if names else "no"


def _sizes(rows: list[dict]) -> list[tuple[int, int, int]]:
    return sorted({(r["m"], r["n"], r["k"]) for r in rows})


def default_size(rows: list[dict]) -> tuple[int, int, int] | None:
    """The size the plots show when none is asked for: 4096 where the run has it, else its
    largest; None for a run with nothing passed."""
    sizes = _sizes(rows)
    if not sizes:
        return None
    return (4096,) * 3 if (4096,) * 3 in sizes else max(sizes, key=lambda s: (s[0] * s[1] * s[2],
                                                                             s))


def _title(run: RunReport, path: Path) -> str:
    meta, l2 = run.meta, (run.meta.get("timing") or {}).get("l2")
    said = [str(meta["date_utc"])] if meta.get("date_utc") else []
    said += [f"`{meta['command']}`"] if meta.get("command") else []
    said += [str(l2)] if l2 else []
    return f"From `{path.name}`" + (f" ({', '.join(said)})." if said else ".")


def text(run: RunReport, path: Path, width: int | None = None,
         only: tuple[int, int, int] | None = None) -> list[str]:
    """The ladder's markdown (tables at every size, and what the columns mean), or with
    ``width`` the same for a terminal: tables and prose fitted to it. ``only``: the table at
    that size alone (HarnessError where nothing passed at it)."""
    rows = napkin_rows(run)
    sizes = _sizes(rows)
    if only is not None:
        if tuple(only) not in sizes:
            raise HarnessError(f"{path} has no passing results at {'x'.join(map(str, only))}; "
                               f"it has {', '.join('x'.join(map(str, s)) for s in sizes) or 'none'}"
                               ": pass one with --size")
        sizes = [tuple(only)]
    gpu = run.meta.get("gpu") or "GPU not recorded"
    sizes_note = ("" if all(r["precision"] in ("fp32", "tf32") for r in rows)
                  else ", each at its element size: 2 bytes for BF16/FP16 inputs")
    blank_note = ("" if all("global_bytes" in r for r in rows) else
                  " Kernels whose spec has no [model] table leave the model's columns blank.")
    bound_note = ("" if _device(run) else " No bound: the report does not name the GPU's "
                  "arch and SM count.")
    lines = [f"# Ladder and napkin model: {gpu}", "", _title(run, path), ""]
    if not run.complete:
        lines += [f"An incomplete report: {'; '.join(run.notes)}.", ""]
    lines += [
        "Implied GB: global traffic the tiling guarantees (A once per block column, B once "
        f"per block row, C once{sizes_note}); FLOP/B: 2MNK over it; smem loads/FMA: "
        "shared-load instructions per FMA in the source; bound: min("
        f"{_precisions(rows)} peak at the measured clock, FLOP/B x DRAM bandwidth, 64 / "
        f"(smem loads per FMA) FLOP per clock per SM).{blank_note}{bound_note}", ""]
    if not rows:
        statuses: dict[str, int] = {}
        for r in run.results:
            statuses[r.status] = statuses.get(r.status, 0) + 1
        lines += [f"Nothing passed and was timed: {len(run.results)} rows"
                  + (f" ({', '.join(f'{n} {s}' for s, n in statuses.items())})"
                     if statuses else "") + ".", ""]
    for s in sizes:
        lines += [f"## {'x'.join(map(str, s))}", "", table(rows, s, width=width), ""]
    # a table is the one entry of several lines: it was fitted already
    return lines if width is None else [line if "\n" in line else fit_text(line, width)
                                        for line in lines]


def _bare(path: Path) -> Path:
    """``path`` without its report ending (``run-X.json`` and ``run-X.json.gz``: ``run-X``),
    the stem its plots and tables are named after."""
    return path.with_name(path.name.removesuffix(".gz").rsplit(".", 1)[0])


def write(run_path: Path, size: tuple[int, int, int] | None,
          folder: Path | None = None) -> tuple[Path, Path, Path | None]:
    """<run>-ladder.md (tables at every size), the ladder plot at ``size`` (None: 4096, else
    the largest the run has), and the roofline of the kernels with a napkin model (None when
    none has one), beside the run (its folder's INDEX.md regenerated then) or in ``folder``.
    Nothing is written until everything the files need is known to be there."""
    run = load(run_path)
    rows = napkin_rows(run)
    size = size or default_size(rows)
    gpu = run.meta.get("gpu") or "GPU not recorded"
    at = [r for r in rows if (r["m"], r["n"], r["k"]) == size]
    if not at:
        have = sorted({"x".join(map(str, (r["m"], r["n"], r["k"]))) for r in rows})
        asked = "x".join(map(str, size)) if size else "any size"
        raise HarnessError(f"{run_path} has no passing results at {asked}; it has "
                           f"{', '.join(have) or 'none'}: pass one with --size")
    stem = _bare(run_path)
    out = Path(folder) if folder is not None else stem.parent
    md = out / f"{stem.name}-ladder.md"
    ladder_png = out / f"{stem.name}-ladder.png"
    roof_png = out / f"{stem.name}-roofline.png"
    modelled = [r for r in at if "intensity_flop_per_byte" in r]
    with writing(out, regenerate_index=folder is None):
        plots.ladder(rows, size, f"{_precisions(at)} ladder on {gpu}", ladder_png)
        peaks = [r["peak_gflops"] for r in modelled if r["peak_gflops"] > 0]
        if modelled and peaks:
            plots.roofline(modelled, max(peaks), napkin.DRAM_BYTES_PER_S.get(gpu_slug(gpu)),
                           f"Roofline at {'x'.join(map(str, size))} on {gpu}", roof_png,
                           _precisions(modelled))
        else:
            roof_png = None
        write_atomic(md, "\n".join(text(run, run_path)))
    return md, ladder_png, roof_png


def markers(section: str) -> tuple[str, str]:
    """The README comment lines around a generated section (``results`` is the main one)."""
    return f"<!-- {section}:start -->", f"<!-- {section}:end -->"


def readme_section(run_path: Path, size: tuple[int, int, int] | None,
                   section: str = "results", doc: Path | None = None) -> str:
    """A README section generated from ``run_path``: its table at ``size``, or at every size
    it has (``None``) with a heading per size. ``doc``: the page it goes in (default the
    README), which its links are written relative to (``docs/results.md`` links
    ``../reports/...``)."""
    run = load(run_path)
    up = Path(os.path.relpath(PROJECT_ROOT, (doc or PROJECT_ROOT / "README.md").resolve().parent))
    try:
        rel = run_path.resolve().relative_to(PROJECT_ROOT)
    except ValueError:
        raise HarnessError(f"--readme: {run_path} is outside the project ({PROJECT_ROOT}); the "
                           "README links the report and its plots, so it takes one under "
                           "reports/") from None
    missing = [k for k in ("gpu", "date_utc", "command", "timing") if not run.meta.get(k)]
    if missing:
        raise HarnessError(f"--readme: {run_path} records no {', '.join(missing)} (a stream, "
                           "or a report cut short); the README's section names them: pass the "
                           "finished run's .json")
    stem = _bare(up / rel)  # Path(".") / rel is rel: the README's own links
    rows = napkin_rows(run)
    sizes = [size] if size else sorted({(r["m"], r["n"], r["k"]) for r in rows})
    command = f"harness report {rel} --readme" + (f" --section {section}"
                                                  if section != "results" else "")
    command += "" if size else " --all-sizes"
    start, end = markers(section)
    lines = [
        start,
        f"Generated by `{command}` from the {gpu_slug(run.meta['gpu']).upper()} run of "
        f"{run.meta['date_utc']} ({run.meta['timing'].get('l2')}"
        + (f"; {run.meta['mode'].split(';')[0]}" if run.meta.get("mode") else "")
        + f"): `{run.meta['command']}`; plots: "
        f"[ladder]({stem}-ladder.png)"
        + (f", [roofline]({stem}-roofline.png)" if (
            PROJECT_ROOT / f"{_bare(rel)}-roofline.png").exists() else "")
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


def documents() -> list[Path]:
    """The pages that may hold generated sections: the README and docs/*.md."""
    return [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]


def document_of(name: str) -> Path:
    """The page (README or docs/*.md) that holds the generated section ``name``."""
    start, _ = markers(name)
    found = [doc for doc in documents() if start in doc.read_text()]
    if len(found) != 1:
        where = ", ".join(str(d.relative_to(PROJECT_ROOT)) for d in found) or "none of them"
        raise HarnessError(f"--section {name}: {start} should be in exactly one of README.md "
                           f"and docs/*.md, found in {where}; add its start and end lines "
                           "to the page it belongs in")
    return found[0]


def readme_source(readme: Path) -> Path | None:
    """The run report the README's results section was generated from."""
    return next((path for path, name, _ in readme_sources(readme) if name == "results"), None)
