"""Reports: the terminal table (tabulate), and JSON + markdown files under ``reports/<gpu>/``."""

from __future__ import annotations

import csv
import gzip
import json
import math
import platform
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from tabulate import tabulate

RUN_COLUMNS = (
    ("kernel", "kernel"), ("size", "size"), ("precision", "prec"), ("gflops", "GFLOP/s"),
    ("cublas_gflops", "cuBLAS GFLOP/s"), ("pct_cublas", "% cuBLAS"), ("pct_peak", "% peak"),
    ("pct_ceiling", "% ceiling"), ("sm_clock_mhz", "SM MHz"), ("power_w", "board W"),
    ("pj_per_flop", "pJ/FLOP"), ("cublas_pj_per_flop", "cuBLAS pJ/FLOP"),
    ("clock_limits", "clock held by"), ("registers", "regs"),
    ("smem", "smem s/d B"), ("spills", "spill st/ld B"), ("blocks_per_sm", "blocks/SM"),
    ("occupancy_pct", "occ %"),
    ("limiter", "limiter"), ("max_rel_err", "max rel err"), ("status", "status"),
)
# shown only when a row has them: % ceiling exists for precisions with an mma.sync ceiling,
# power for runs with --power where NVML has an energy counter
_ONLY_WHEN_PRESENT = ("pct_ceiling", "power_w", "pj_per_flop", "cublas_pj_per_flop",
                      "clock_limits")
BUILD_COLUMNS = (
    ("kernel", "kernel"), ("arch", "arch"), ("registers", "regs"),
    ("static_smem_bytes", "static smem B"), ("spills", "spill st/ld B"),
    ("block_threads", "threads"), ("dynamic_smem_bytes", "dyn smem B"),
    ("blocks_per_sm", "blocks/SM"), ("occupancy_pct", "occ %"), ("limiter", "limiter"),
)


def jsonable(value):
    """``value`` with non-finite floats as None, so files are strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value


def _cell(row: dict, key: str):
    if key == "size":
        return f"{row['m']}x{row['n']}x{row['k']}"
    if key == "smem":
        if "static_smem_bytes" not in row:
            return ""
        return f"{row['static_smem_bytes']}/{row.get('dynamic_smem_bytes', '')}"
    if key == "spills":
        if "spill_store_bytes" not in row:
            return ""
        return f"{row['spill_store_bytes']}/{row['spill_load_bytes']}"
    value = row.get(key)
    if value is None:
        return ""
    if isinstance(value, float):
        if not math.isfinite(value):
            return ""
        if key == "max_rel_err":
            return f"{value:.1e}"
        if key in ("pct_cublas", "pct_peak", "pct_ceiling", "occupancy_pct"):
            return f"{value:.1f}"
        if key in ("pj_per_flop", "cublas_pj_per_flop"):
            return f"{value:.2f}"
        return f"{value:.0f}"
    return value


def _present(value) -> bool:
    return value not in (None, "") and not (isinstance(value, float) and math.isnan(value))


def table(rows: Sequence[dict], columns=RUN_COLUMNS, fmt: str = "simple") -> str:
    columns = [c for c in columns
               if c[0] not in _ONLY_WHEN_PRESENT or any(_present(r.get(c[0])) for r in rows)]
    return tabulate([[_cell(r, key) for key, _ in columns] for r in rows],
                    headers=[title for _, title in columns], tablefmt=fmt, disable_numparse=True)


def failures(rows: Sequence[dict]) -> str:
    """The message of every row that did not pass, one block each."""
    return "\n".join(f"- {r['kernel']} {_cell(r, 'size')}: {r['status']}: {r['message']}"
                     for r in rows if r.get("status") != "pass")


def gpu_slug(name: str) -> str:
    """Folder name for a GPU: its family (``h100``) when recognised, else its name, lowercased."""
    match = re.search(r"\b([ABHLV]\d{2,3}|RTX ?\w+|GH200|GB200|B200)\b", name, re.IGNORECASE)
    text = match.group(1) if match else name
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


def run_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


def write_tool_json(result: dict, tool: str, argv: Sequence[str], kind: str,
                    report_dir: Path) -> Path:
    """A measurement tool's ``result`` (with its ``gpu``), stamped with the date (UTC) and the
    command that made it, written to ``report_dir/<gpu>/<kind>-<date>.json``; returns that path
    without its suffix, for the markdown beside it."""
    now = datetime.now(UTC)
    result |= {"date": now.isoformat(timespec="seconds"),
               "command": " ".join(["python3", tool, *argv])}
    folder = report_dir / gpu_slug(result["gpu"])
    folder.mkdir(parents=True, exist_ok=True)
    stem = folder / f"{kind}-{now:%Y%m%d-%H%M%S}"
    stem.with_suffix(".json").write_text(json.dumps(jsonable(result), indent=1) + "\n")
    return stem


def finish_tool_report(stem: Path, markdown: str) -> None:
    """The markdown beside ``write_tool_json``'s JSON, printed, and where both went."""
    stem.with_suffix(".md").write_text(markdown)
    print(markdown)
    print(f"written: {stem}.json, {stem}.md", file=sys.stderr)


def metadata(device: dict, command: Sequence[str], timing: dict, sizes) -> dict:
    return {
        "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(command),
        "gpu": device.get("name"),
        "device": device,
        "timing": {**timing, "l2": "cold (flushed before every repetition)"
                   if timing.get("cold_l2") else "hot (warm L2, no flush)",
                   "method": "CUDA events around each launch with the queue kept full behind "
                             "L2-flush work; median and p20/p80 of the repetitions"},
        "sizes": [list(s) for s in sizes],
        "host": {"python": platform.python_version(), "platform": platform.platform()},
    }


def _start_report(meta: dict, rows: Sequence[dict], stem: Path,
                  title: str) -> tuple[Path, Path, list[str]]:
    """Write ``stem.json`` (metadata + rows); return it, the markdown path, and the markdown's
    first lines: ``title``, date, command, and the GPU, driver and clock facts."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = stem.with_suffix(".json"), stem.with_suffix(".md")
    json_path.write_text(json.dumps(jsonable({"meta": meta, "rows": list(rows)}), indent=1,
                                    allow_nan=False) + "\n")
    device = meta.get("device", {})
    clocks = device.get("clocks", {})
    cublas = device.get("cublas_version")
    return json_path, md_path, [
        f"# {title}: {meta.get('gpu')}",
        "",
        f"- date (UTC): {meta['date_utc']}",
        f"- command: `{meta['command']}`",
        f"- GPU: {meta.get('gpu')}, {device.get('sm_count')} SMs, L2 "
        f"{(device.get('l2_bytes') or 0) // (1 << 20)} MB, compute capability "
        f"{'.'.join(map(str, device.get('compute_capability', [])))}",
        f"- driver: CUDA {device.get('driver')} (NVML {clocks.get('nvml_driver')}); compilers: "
        f"{device.get('compilers')}" + (f"; cuBLAS {cublas}" if cublas is not None else ""),
        f"- clocks: max SM {clocks.get('max_sm_clock_mhz')} MHz, power limit "
        f"{clocks.get('power_limit_w')} W; in the table, from NVML during each timing, the "
        "median SM clock and what held it; with `--power`, the board's mean power (energy "
        "counter) over a power pass after the timing, the launch back to back with warm L2, "
        "and the energy per FLOP it gives (board W x GPU time per launch / FLOP)",
    ]


def write_run(meta: dict, rows: Sequence[dict], stem: Path,
              sections: Sequence[str] = ()) -> tuple[Path, Path]:
    """Write ``stem.json`` (metadata + rows) and ``stem.md`` (metadata, any extra markdown
    ``sections``, then the table of every row)."""
    json_path, md_path, head = _start_report(meta, rows, stem, "harness run")
    lines = [
        *head,
        f"- timing: {meta['timing']['l2']}; {meta['timing']['method']}; warm-up "
        f"{meta['timing'].get('warmup_ms')} ms, budget {meta['timing'].get('budget_ms')} ms",
        "- baseline: cuBLAS `cublasGemmEx` on the same buffers, timed by the same code right "
        "after each kernel; compute type per row in the JSON (`cublas_compute`)",
        *_ceiling_note(rows),
        "",
        *sections,
        table(rows, fmt="github"),
        "",
    ]
    fails = failures(rows)
    if fails:
        lines += ["## Not passed", "", fails, ""]
    md_path.write_text("\n".join(lines))
    return json_path, md_path


def _ceiling_note(rows: Sequence[dict]) -> list[str]:
    """The header line that says what % ceiling is measured against, where rows have it."""
    seen = {}
    for r in rows:
        if r.get("ceiling_gflops") is not None:
            seen.setdefault(r["precision"], r)
    if not seen:
        return []
    each = "; ".join(f"{p} {r['ceiling_gflops']:.0f} GFLOP/s (`{r['ceiling_instruction']}`, SM "
                     f"{_cell(r, 'ceiling_sm_clock_mhz')} MHz)" for p, r in seen.items())
    return [f"- % ceiling: of the `mma.sync` issue ceiling measured in the same worker "
            f"(`harness ceiling`): {each}"]


def write_sweep(rows: Sequence[dict], kernel_rows: int, gpu: str, command: Sequence[str],
                folder: Path, date_utc: str | None = None) -> dict:
    """Occupancy sweep: summary and disagreements as JSON and markdown, every row as csv.gz."""
    folder.mkdir(parents=True, exist_ok=True)
    disagree = [r for r in rows if not r["agree"]]
    date_utc = date_utc or datetime.now(UTC).isoformat(timespec="seconds")
    summary = {"gpu": gpu, "date_utc": date_utc,
               "command": " ".join(command), "configurations": len(rows),
               "kernel_configurations": kernel_rows,
               "probe_configurations": len(rows) - kernel_rows, "disagreements": len(disagree),
               "rows": "occupancy-sweep.csv.gz"}
    (folder / "occupancy-sweep.json").write_text(
        json.dumps({"summary": summary, "disagreements": disagree}, indent=1) + "\n")
    with gzip.open(folder / "occupancy-sweep.csv.gz", "wt", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["agree"])
        writer.writeheader()
        writer.writerows(rows)
    md = [f"# Offline occupancy vs the driver on {gpu}", "",
          *[f"- {key}: {value}" for key, value in summary.items()], ""]
    if disagree:
        md += ["## Disagreements", "", tabulate(disagree[:200], headers="keys",
                                                 tablefmt="github"), ""]
    (folder / "occupancy-sweep.md").write_text("\n".join(md))
    return summary


COMPARE_SASS = ("FFMA", "LDS", "LDS.128", "LDSM", "HMMA", "HGMMA", "LDGSTS", "BAR", "LDL", "STL")


def compare_table(rows: Sequence[dict], fmt: str = "github") -> str:
    """``harness compare`` rows: speed, speedup over the first with its spread, resources,
    occupancy and the SASS mix."""
    out = []
    ceiling = any(r.get("pct_ceiling") is not None for r in rows)
    for r in rows:
        if r.get("status") != "pass":
            out.append([r["kernel"], _cell(r, "size"), r["status"], *[""] * (7 + ceiling)])
            continue
        if r["kernel"] == r.get("compared_to"):
            verdict = "reference"
        elif r.get("within_noise"):
            verdict = "within noise"
        else:
            verdict = "faster" if r["speedup"] > 1 else "slower"
        mix = r.get("sass", {})
        out.append([
            r["kernel"], _cell(r, "size"), f"{r['gflops']:.0f}",
            f"{r['speedup']:.3f} ({r['speedup_p20']:.3f}-{r['speedup_p80']:.3f})", verdict,
            f"{r['pct_cublas']:.1f}", *([_cell(r, "pct_ceiling")] if ceiling else []),
            r["registers"], _cell(r, "smem"),
            f"{r['blocks_per_sm']} / {r['occupancy_pct']:.0f}% ({r['limiter']})",
            " ".join(f"{k}:{mix[k]}" for k in COMPARE_SASS if mix.get(k)),
        ])
    return tabulate(out, headers=["kernel", "size", "GFLOP/s", "speedup vs first (p20-p80)",
                                  "verdict", "% cuBLAS", *(["% ceiling"] if ceiling else []),
                                  "regs", "smem s/d B", "blocks/SM / occ (limiter)", "SASS mix"],
                    tablefmt=fmt, disable_numparse=True)


def ceiling_table(rows: Sequence[dict], fmt: str = "simple") -> str:
    """``harness ceiling`` rows: the rate, its share of the dense peak at the measured clock,
    and how it was launched."""
    out = [[r["precision"], r["instruction"], _cell(r, "gflops"), _cell(r, "pct_peak"),
            _cell(r, "peak_gflops_at_clock"), _cell(r, "sm_clock_mhz"), _cell(r, "power_w"),
            _cell(r, "pj_per_flop"), r.get("clock_limits", ""),
            f"{r['blocks']} x {r['block_threads']}", r["iterations"],
            f"{r['median_ms']:.3f} ({r['p20_ms']:.3f}-{r['p80_ms']:.3f})", r["reps"]]
           for r in rows]
    return tabulate(out, headers=["prec", "instruction", "GFLOP/s", "% peak",
                                  "peak GFLOP/s at clock", "SM MHz", "board W", "pJ/FLOP",
                                  "clock held by", "blocks x threads",
                                  "iterations", "median ms (p20-p80)", "reps"],
                    tablefmt=fmt, disable_numparse=True)


def write_ceiling(meta: dict, rows: Sequence[dict], stem: Path) -> tuple[Path, Path]:
    """``harness ceiling``: ``stem.json`` (metadata + one row per precision) and ``stem.md``."""
    json_path, md_path, head = _start_report(meta, rows, stem, "mma.sync issue ceiling")
    lines = [
        *head,
        "- kernels: register-only `mma.sync` loops (`ptx/ceiling/`): independent accumulator "
        "chains per warp, operands in registers, nothing loaded, one store per thread; one "
        "wave of blocks_per_sm x SM count blocks; checked before timing (every thread writes, "
        "its sum doubles when the iterations double)",
        f"- timing: {meta['timing']['method']}; warm-up {meta['timing'].get('warmup_ms')} ms, "
        f"budget {meta['timing'].get('budget_ms')} ms; L2 {meta['timing']['l2']}, which "
        "changes nothing here: the kernels load nothing",
        "- % peak: of the precision's dense peak at the measured SM clock (FLOP/clock/SM x SMs "
        "x clock)",
        "",
        ceiling_table(rows, fmt="github"),
        "",
        "FLOP per launch:",
        "",
        *[f"- {r['precision']} (`{r['file']}`): {r['flop_formula']} = {r['flops_per_launch']}"
          for r in rows],
        "",
    ]
    md_path.write_text("\n".join(lines))
    return json_path, md_path
