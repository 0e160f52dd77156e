"""The reports of ``harness run``, ``compare`` and ``tune``: a RunRecord's rows with their
provenance, one report per GPU model (``reports/<gpu>/``), through files.write_run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tabulate import tabulate

from harness import kinds
from harness.gpu.timing import TimingOptions
from harness.report import files, tables
from harness.run.runner import RunRecord


def infos(record: RunRecord) -> list:
    """Each kernel of ``record`` once (their sources go in the report)."""
    return list({r.kernel.name: r.kernel for r in record.results}.values())


def write_run_report(record: RunRecord, command: Sequence[str], timing: TimingOptions,
                     sizes, stem: Path, stream: Path | None) -> tuple[Path, Path]:
    """``harness run``'s report of ``record``: ``stem.json`` and ``stem.md``; ``stream`` (the
    JSON-lines file the results came in through) is removed once the JSON holds them."""
    meta = files.metadata(record.device, command, timing, sizes, infos(record))
    meta["wall_s"], meta["phases_s"] = record.wall_s, record.phases
    meta["seed"] = record.seed
    sections = gpus_section(record, meta)
    return files.write_run(meta, record.results, stem, stream=stream, sections=sections)


def write_run_reports(record: RunRecord, command: Sequence[str], timing: TimingOptions,
                      sizes, stem: Path, stream: Path | None, report_dir: Path,
                      name: str) -> list[tuple[Path, Path]]:
    """``record``'s reports: one at ``stem`` when its rows ran on GPUs of one model, else one
    per model at ``report_dir/<gpu>/name`` (rows that ran on none, compile errors, go with the
    first model's); ``stream`` is removed once they are written."""
    parts = by_model(record)
    if len(parts) == 1:
        return [write_run_report(record, command, timing, sizes, stem, stream)]
    written = [write_run_report(part, command, timing, sizes, report_dir / slug / name, None)
               for slug, part in parts.items()]
    if stream is not None:
        stream.unlink(missing_ok=True)
    return written


def by_model(record: RunRecord) -> dict[str, RunRecord]:
    """``record`` split by the GPU model its rows ran on (``reports/<gpu>/`` names); rows that
    ran on no GPU go with the first model's, and a record of one model is returned whole."""
    slug_of = {}
    for facts in [record.device, *record.devices]:
        if facts.get("name"):
            slug_of.setdefault(files.gpu_slug(facts["name"]), facts)
    if len(slug_of) < 2:
        return {files.gpu_slug(record.device.get("name") or "gpu"): record}
    first = next(iter(slug_of))
    parts = {slug: RunRecord(device=facts, phases=record.phases, wall_s=record.wall_s,
                             devices=[d for d in record.devices
                                      if files.gpu_slug(d.get("name", "")) == slug])
             for slug, facts in slug_of.items()}
    for result in record.results:
        named = result.gpu is not None and result.gpu.name
        parts[files.gpu_slug(result.gpu.name) if named else first].results.append(result)
    return parts


def gpus_section(record: RunRecord, meta: dict) -> list[str]:
    """With rows from several GPUs: each GPU in the metadata (``gpus``) and a markdown table
    of them with the rows each ran."""
    if len(record.devices) < 2:
        return []
    counts = {}
    for r in record.results:
        if r.gpu is not None:
            key = (r.gpu.host, r.gpu.uuid, r.gpu.index)
            counts[key] = counts.get(key, 0) + 1
    meta["gpus"] = [{"index": d.get("index"), "uuid": d.get("uuid"), "name": d.get("name"),
                     "host": d.get("host"), "pci_bus_id": d.get("pci_bus_id"),
                     "clocks": d.get("clocks")} for d in record.devices]
    rows = [[d.get("index"), d.get("host"), d.get("name"), d.get("uuid"),
             (d.get("clocks") or {}).get("max_sm_clock_mhz"),
             counts.get((d.get("host"), d.get("uuid"), d.get("index")), 0)]
            for d in record.devices]
    return ["## GPUs", "", "Each row of the results names the GPU it ran on (`gpu` in the "
            "JSON).", "", tabulate(rows, headers=["GPU", "host", "model", "UUID",
                                                    "max SM MHz", "rows"], tablefmt="github"),
            ""]


def write_compare_report(record: RunRecord, command: Sequence[str], timing: TimingOptions,
                         sizes, stem: Path) -> tuple[Path, Path]:
    """``harness compare``'s report: ``stem.json`` and ``stem.md``, side by side first; the
    JSON-lines stream ``stem.jsonl`` is removed once the JSON holds the results."""
    meta = {**files.metadata(record.device, command, timing, sizes, infos(record)),
            "mode": "interleaved: each round launches every kernel once, in order, each "
                    "followed by cuBLAS of its types, its baseline; "
                    "speedup = median over rounds of (first kernel's time / this one's), "
                    "p20-p80 of those ratios; 'within noise' when that range holds 1",
            "seed": record.seed}
    groups = kinds.split(record.results)
    if len(groups) == 1 and groups[0][0].compare_mode:
        meta["mode"] = meta["mode"].replace("followed by cuBLAS of its types, its baseline",
                                            groups[0][0].compare_mode)
    side = "\n\n".join(kind.table(rows, mode="side", fmt="github")
                        for kind, rows in groups) or tables.compare_table(record.results)
    return files.write_run(meta, record.results, stem, title="harness compare",
                           sections=["## Side by side", "", side, "", "## Every result", ""],
                           stream=stem.with_suffix(".jsonl"))


def write_tune_report(tuning, command: Sequence[str], stem: Path) -> Path:
    """``harness tune``'s report of a :class:`~harness.commands.tune.Tuning`: the best points
    at the last size, the points skipped and why, every point timed; its JSON's path."""
    record, options = tuning.record, tuning.options.run
    skipped_rows = [{"kernel": k.name, "params": dict(k.params), "message": reason}
                    for k, reason in tuning.skipped]
    meta = {**files.metadata(record.device, command, options.timing, options.sizes,
                             infos(record)),
            "space": tuning.space, "points": len(tuning.timed) + len(tuning.skipped),
            "timed": len(tuning.timed), "skipped": skipped_rows,
            "baseline": "cuBLAS timed once per size in each worker", "seed": record.seed}
    skips = "\n".join(f"- {r['kernel']}: {r['message']}" for r in skipped_rows) or "- none"
    ranked_at = "x".join(map(str, options.sizes[-1]))
    if tuning.top:
        kind = tuning.top[0].kind_of
        if kind.tune_baseline:
            meta["baseline"] = kind.tune_baseline
        ranked_at = " x ".join(kind.problem_of(tuning.top[0]).short.split("x"))
        best = kind.table(tuning.top, fmt="github", drop=("precision",))
    else:
        best = tables.table(tuning.top, tables.columns_without("precision"), fmt="github")
    json_path, _ = files.write_run(meta, record.results, stem, title="harness tune", sections=[
        *gpus_section(record, meta),
        f"## Best {len(tuning.top)} at {ranked_at}", "", best, "", "## Skipped points", "", skips,
        "", "## Every timed point", ""], stream=stem.with_suffix(".jsonl"))
    return json_path
