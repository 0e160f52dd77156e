"""Report files under ``reports/<gpu>/``: JSON (the results, for programs) and markdown (the
same with its provenance, for people), each headed by the date, the command, the git commit,
the GPU, driver and clocks."""

from __future__ import annotations

import csv
import gzip
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from tabulate import tabulate

from harness.bench.result import Result, jsonable, report_json
from harness.kernels.registry import PROJECT_ROOT
from harness.report import tables


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


def git_state(root: Path = PROJECT_ROOT) -> dict:
    """The commit the project's tree is at and whether it has uncommitted changes to tracked
    files; from git where the tree is a checkout, else from ``HARNESS_GIT_COMMIT`` and
    ``HARNESS_GIT_DIRTY`` (a copy of the tree sent to a GPU host without its .git)."""
    try:
        top = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, timeout=10)
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"],
                                capture_output=True, text=True, timeout=10)
        status = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                 "--untracked-files=no"], capture_output=True, text=True,
                                timeout=10)
        # a copy of the tree inside another checkout (sent to a GPU host in an ignored
        # folder) must not report that checkout's commit
        own = top.returncode == 0 and Path(top.stdout.strip()).resolve() == Path(root).resolve()
        if own and commit.returncode == 0 and status.returncode == 0:
            return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        pass
    if os.environ.get("HARNESS_GIT_COMMIT"):
        return {"commit": os.environ["HARNESS_GIT_COMMIT"],
                "dirty": os.environ.get("HARNESS_GIT_DIRTY", "") not in ("", "0")}
    return {"commit": "unknown", "dirty": None}


def metadata(device: dict, command: Sequence[str], timing: dict, sizes,
             kernels: Sequence = ()) -> dict:
    """A report's provenance: date, command, git state, GPU and host, how it timed, and the
    source hash of every kernel it ran (``kernels``: KernelInfo)."""
    return {
        "date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(command),
        "git": git_state(),
        "gpu": device.get("name"),
        "device": device,
        "timing": {**timing, "l2": "cold (flushed before every repetition)"
                   if timing.get("cold_l2") else "hot (warm L2, no flush)",
                   "method": timing_method(timing)},
        "sizes": [list(s) for s in sizes],
        "kernel_sources": {k.name: {"file": k.file, "sha256": k.source_sha256}
                           for k in kernels},
        "host": {"python": platform.python_version(), "platform": platform.platform()},
    }


def timing_method(timing: dict) -> str:
    """How a report's timings were taken, in words (``timing``: TimingOptions as a dict)."""
    gap = timing.get("isolated_gap_ms") or 0
    if gap > 0:
        return (f"isolated launches: before each repetition the stream is synchronised and the "
                f"GPU left idle {gap:g} ms, then CUDA events around the launch with a little "
                "work queued ahead of it; median and p20/p80 of the repetitions")
    return ("sustained: CUDA events around each launch with the queue kept full behind "
            "L2-flush work; median and p20/p80 of the repetitions")


def header(meta: dict, title: str) -> list[str]:
    """A markdown report's first lines: ``title``, date, command, git commit, and the GPU,
    driver and clock facts."""
    device = meta.get("device", {})
    clocks = device.get("clocks", {})
    cublas = device.get("cublas_version")
    git = meta.get("git")
    lines = [
        f"# {title}: {meta.get('gpu')}",
        "",
        f"- date (UTC): {meta['date_utc']}",
        f"- command: `{meta['command']}`",
    ]
    if git:
        dirty = {True: " (with uncommitted changes)", False: "", None: ""}[git.get("dirty")]
        lines.append(f"- git commit: {git.get('commit')}{dirty}")
    return lines + [
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


def write_run(meta: dict, results: Sequence[Result], stem: Path,
              sections: Sequence[str] = (), title: str = "harness run") -> tuple[Path, Path]:
    """Write ``stem.json`` (metadata + results) and ``stem.md`` (metadata, any extra markdown
    ``sections``, then the table of every result)."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = stem.with_suffix(".json"), stem.with_suffix(".md")
    json_path.write_text(report_json(meta, results))
    lines = [
        *header(meta, title),
        f"- timing: {meta['timing']['l2']}; {meta['timing']['method']}; warm-up "
        f"{meta['timing'].get('warmup_ms')} ms, budget {meta['timing'].get('budget_ms')} ms",
        "- baseline: cuBLAS `cublasGemmEx` on the same buffers, timed by the same code right "
        "after each kernel; compute type per row in the JSON (`baseline.compute`)",
        *_ceiling_note(results),
        "",
        *sections,
        tables.table(results, fmt="github"),
        "",
    ]
    fails = tables.failures(results)
    if fails:
        lines += ["## Not passed", "", fails, ""]
    md_path.write_text("\n".join(lines))
    return json_path, md_path


def _ceiling_note(results: Sequence[Result]) -> list[str]:
    """The header line that says what % ceiling is measured against, where results have it."""
    seen = {}
    for r in results:
        if r.ceiling is not None:
            seen.setdefault(r.kernel.precision, r.ceiling)
    if not seen:
        return []
    each = "; ".join(f"{p} {c.gflops:.0f} GFLOP/s (`{c.instruction}`, SM "
                     f"{tables.cell('', c.sm_clock_mhz)} MHz)" for p, c in seen.items())
    return [f"- % ceiling: of the `mma.sync` issue ceiling measured in the same worker "
            f"(`harness ceiling`): {each}"]


def write_table_report(meta: dict, rows: Sequence[dict], stem: Path, title: str,
                       body: Sequence[str]) -> tuple[Path, Path]:
    """A measurement's ``stem.json`` (metadata + rows) and ``stem.md`` (the header, then
    ``body``)."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    json_path, md_path = stem.with_suffix(".json"), stem.with_suffix(".md")
    json_path.write_text(json.dumps(jsonable({"meta": meta, "rows": list(rows)}), indent=1,
                                    allow_nan=False) + "\n")
    md_path.write_text("\n".join([*header(meta, title), *body]))
    return json_path, md_path


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


def write_ceiling(meta: dict, rows: Sequence[dict], stem: Path) -> tuple[Path, Path]:
    """``harness ceiling``: ``stem.json`` (metadata + one row per precision) and ``stem.md``."""
    lines = [
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
        tables.ceiling_table(rows, fmt="github"),
        "",
        "FLOP per launch:",
        "",
        *[f"- {r['precision']} (`{r['file']}`): {r['flop_formula']} = {r['flops_per_launch']}"
          for r in rows],
        "",
    ]
    return write_table_report(meta, rows, stem, "mma.sync issue ceiling", lines)
