"""Report files under ``reports/<gpu>/``: JSON (the results, for programs) and markdown (the
same with its provenance, for people), each headed by the date, the command, the git commit,
the GPU, driver and clocks. Every writer writes through :func:`writing`, which regenerates the
folder's INDEX.md once the report is complete."""

from __future__ import annotations

import csv
import glob
import gzip
import io
import itertools
import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

from tabulate import tabulate

from harness import kinds
from harness.bench.result import KernelInfo, Result
from harness.errors import HarnessError
from harness.gpu.timing import TimingOptions
from harness.kernels.registry import PROJECT_ROOT, Kernel
from harness.report import index, tables
from harness.report.atomic import write_atomic
from harness.report.reading import report_json
from harness.typed_json import jsonable


def gpu_slug(name: str) -> str:
    """Folder name for a GPU: its family (``h100``) when recognised, else its name, lowercased."""
    match = re.search(r"\b([ABHLV]\d{2,3}|RTX ?\w+|GH200|GB200|B200)\b", name, re.IGNORECASE)
    text = match.group(1) if match else name
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "gpu"


def run_stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S")


def new_stem(folder: Path, prefix: str, claim: str | None = ".jsonl") -> Path:
    """``folder/<prefix>-<UTC time>``, a report name no other report in ``folder`` has: a
    second run started in the same second gets ``-2`` after the time, a third ``-3``. ``claim``
    is the ending of the file that holds the name (a run's stream, ``.jsonl``): created now,
    empty and exclusively, so that two processes cannot both take the name; None creates
    nothing (the report's JSON, written later by :func:`publish`, takes a free name then)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = run_stamp()
    for n in itertools.count(1):
        stem = folder / (f"{prefix}-{stamp}" + (f"-{n}" if n > 1 else ""))
        if _taken(stem):
            continue
        if claim is None:
            return stem
        try:
            Path(f"{stem}{claim}").open("x").close()
        except FileExistsError:
            continue
        return stem
    raise AssertionError("unreachable")


def _taken(stem: Path) -> bool:
    """Whether a file of the report named ``stem`` is there (its JSON, markdown, stream, or a
    companion such as ``stem-sustained.jsonl``)."""
    name = glob.escape(stem.name)
    return any(stem.parent.glob(f"{name}.*")) or any(stem.parent.glob(f"{name}-*"))


def publish(stem: Path, parts: dict[str, str | bytes]) -> Path:
    """A report's files (``{ending: content}``, the JSON first), each written atomically,
    never over another report: where the first is there already (a report of the same name,
    from a run of the same second), under the first free ``stem-2``, ``stem-3``, ... Returns
    the stem written."""
    (first, data), *rest = parts.items()
    for n in itertools.count(1):
        name = stem if n == 1 else stem.with_name(f"{stem.name}-{n}")
        if n > 1 and _taken(name):
            continue
        try:
            write_atomic(Path(f"{name}{first}"), data, replace=False)
        except FileExistsError:
            continue
        for ending, content in rest:
            write_atomic(Path(f"{name}{ending}"), content)
        return name
    raise AssertionError("unreachable")


def git_state(root: Path = PROJECT_ROOT) -> dict:
    """The commit the project's tree is at and whether it has uncommitted changes to tracked
    files. ``HARNESS_GIT_COMMIT`` (and ``HARNESS_GIT_DIRTY``) first, when set: a copy of the
    tree sent to a GPU host names its commit that way, since a .git beside it may be a stale
    copy (seen: the host's copy kept the .git of the session's first transfer). An abbreviated
    hash there is recorded in full where the tree is its own checkout and git knows the one
    commit it abbreviates, else as given. Without it, git's HEAD where the tree is its own
    checkout; else "unknown"."""
    given = os.environ.get("HARNESS_GIT_COMMIT", "").strip()
    if given:
        return {"commit": _full_commit(root, given),
                "dirty": os.environ.get("HARNESS_GIT_DIRTY", "") not in ("", "0")}
    # a copy of the tree inside another checkout (sent to a GPU host in an ignored folder)
    # must not report that checkout's commit
    if _own_checkout(root):
        commit = _git(root, "rev-parse", "HEAD")
        status = _git(root, "status", "--porcelain", "--untracked-files=no")
        if commit is not None and status is not None:
            return {"commit": commit, "dirty": bool(status)}
    return {"commit": "unknown", "dirty": None}


def _full_commit(root: Path, given: str) -> str:
    """``given`` (a commit as HARNESS_GIT_COMMIT names it) as the full hash where it is an
    abbreviated one that the checkout at ``root`` resolves to exactly one commit; else as
    given (a name that is not a hash, a hash git does not know or finds ambiguous, no git)."""
    if not re.fullmatch(r"[0-9a-fA-F]{4,39}", given) or not _own_checkout(root):
        return given
    full = _git(root, "rev-parse", "--verify", "--quiet", f"{given}^{{commit}}")
    return full if full and full.startswith(given.lower()) else given


def _own_checkout(root: Path) -> bool:
    """Whether ``root`` is the top of a git checkout (not a folder inside another one)."""
    top = _git(root, "rev-parse", "--show-toplevel")
    return top is not None and Path(top).resolve() == Path(root).resolve()


def _git(root: Path, *args: str) -> str | None:
    """What ``git -C root ARGS`` prints, stripped; None where git is missing or fails."""
    try:
        proc = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


@contextmanager
def writing(folder: Path, regenerate_index: bool = True) -> Iterator[Path]:
    """Around the writing of one report into ``folder``, the hook every report writer goes
    through: makes the folder, and once the report's files are all there regenerates the
    folder's INDEX.md (a failure there is said, and costs the report nothing);
    ``regenerate_index`` False leaves INDEX.md alone (files written into a folder the user
    named)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    yield folder
    if not regenerate_index:
        return
    try:
        index.write_index(folder)
    except OSError as exc:
        print(f"harness: {folder / index.INDEX_NAME} not regenerated ({exc}); "
              "`harness index` redoes it", file=sys.stderr)


def kernel_sources(kernels: Iterable[Kernel | KernelInfo]) -> dict:
    """{name: {file, sha256}} of each kernel: which source a report's figures came from."""
    infos = (k if isinstance(k, KernelInfo) else KernelInfo.of(k) for k in kernels)
    return {k.name: {"file": k.file, "sha256": k.source_sha256} for k in infos}


def provenance(command: Sequence[str], kernels: Iterable[Kernel | KernelInfo] = ()) -> dict:
    """What every report records of where it came from: date, command, git state and the
    source hash of each kernel it ran."""
    return {"date_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": " ".join(command), "git": git_state(),
            "kernel_sources": kernel_sources(kernels)}


def metadata(device: dict, command: Sequence[str], timing: TimingOptions | Mapping,
             sizes, kernels: Iterable[Kernel | KernelInfo] = ()) -> dict:
    """A report's provenance: date, command, git state, GPU and host, how it timed
    (:func:`timing_record`), and the source hash of every kernel it ran (``kernels``: Kernel
    or KernelInfo)."""
    made = provenance(command, kernels)
    return {
        "date_utc": made["date_utc"],
        "command": made["command"],
        "git": made["git"],
        "gpu": device.get("name"),
        "device": device,
        "timing": timing_record(timing),
        "sizes": [list(s) for s in sizes],
        "kernel_sources": made["kernel_sources"],
        "host": {"python": platform.python_version(), "platform": platform.platform()},
    }


def timing_record(timing: TimingOptions | Mapping) -> dict:
    """A report's ``timing``: the options, which L2, and the method in the options' own words
    (:meth:`TimingOptions.describe`). A mapping names some options only (an experiment's; ``{}``
    for a command that times no repetitions): the switches it leaves out are off
    (:meth:`TimingOptions.named`), and its stopping rule is said only where it names one."""
    if isinstance(timing, TimingOptions):
        values, method = asdict(timing), timing.describe()
    else:
        values = dict(timing)
        method = TimingOptions.named(values).method()
        if "max_rel_se_pct" in values:
            method += "; " + TimingOptions.of(values).stopping()
    l2 = ("cold (flushed before every repetition)" if values.get("cold_l2") else
          "hot (warm L2, no flush)")
    return {**values, "l2": l2, "method": method}


def check_writable_folder(flag: str, folder: Path, given: Path | None = None) -> None:
    """``folder`` (given as ``flag``: ``--report-dir``, or the folder of ``--json``'s file
    ``given``) is a folder that can be written, or can be made where its nearest existing
    parent can be written (nothing is created here); HarnessError in one line if not."""
    folder = Path(folder)
    given = given or folder
    if folder.exists() and not folder.is_dir():
        raise HarnessError(f"{flag} {given}: {folder} is a file, not a folder; pass a folder "
                           "that can be written")
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise HarnessError(f"{flag} {given}: {probe} is a file, so {folder} cannot be made; "
                           "pass a folder that can be written")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise HarnessError(f"{flag} {given}: {probe} is not writable; pass a folder that can "
                           "be written")


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
              sections: Sequence[str] = (), title: str = "harness run",
              stream: Path | None = None) -> tuple[Path, Path]:
    """Write ``stem.json`` (metadata + results) and ``stem.md`` (metadata, any extra markdown
    ``sections``, then the table of every result). ``stream``, the JSON-lines file the results
    came in through as they were measured, is removed once the JSON holds them: a report is
    not kept twice in two formats that say the same thing."""
    json_path = Path(f"{stem}.json")
    groups = kinds.split(results)
    lines = [
        *header(meta, title),
        f"- timing: {meta['timing']['l2']}; {meta['timing']['method']}"
        + ("" if "max_rel_se_pct" in meta["timing"] else
           f"; warm-up {meta['timing'].get('warmup_ms')} ms, budget "
           f"{meta['timing'].get('budget_ms')} ms"),
        *(line for kind, rows in groups for line in kind.report_notes(rows)),
        "",
        *sections,
        *(part for kind, rows in groups for part in (kind.table(rows, fmt="github"), "")),
        *([tables.table([], fmt="github"), ""] if not groups else []),
    ]
    fails = tables.failures(results)
    if fails:
        lines += ["## Not passed", "", fails, ""]
    with writing(stem.parent):
        written = publish(stem, {".json": report_json(meta, results), ".md": "\n".join(lines)})
        if stream is not None and stream.resolve() != json_path.resolve():
            stream.unlink(missing_ok=True)
    return Path(f"{written}.json"), Path(f"{written}.md")


def write_table_report(meta: dict, rows: Sequence[dict], stem: Path, title: str,
                       body: Sequence[str]) -> tuple[Path, Path]:
    """A measurement's ``stem.json`` (metadata + rows) and ``stem.md`` (the header, then
    ``body``)."""
    with writing(stem.parent):
        written = publish(stem, {
            ".json": json.dumps(jsonable({"meta": meta, "rows": list(rows)}), indent=1,
                                allow_nan=False) + "\n",
            ".md": "\n".join([*header(meta, title), *body])})
    return Path(f"{written}.json"), Path(f"{written}.md")


def write_sweep(rows: Sequence[dict], kernel_rows: int, gpu: str, command: Sequence[str],
                folder: Path, date_utc: str | None = None,
                kernels: Iterable[Kernel | KernelInfo] = ()) -> dict:
    """Occupancy sweep: summary and disagreements as JSON and markdown, every row as csv.gz;
    the summary records the git state and the source hash of each kernel swept."""
    disagree = [r for r in rows if not r["agree"]]
    made = provenance(command, kernels)
    summary = {"gpu": gpu, "date_utc": date_utc or made["date_utc"],
               "command": made["command"], "git": made["git"], "configurations": len(rows),
               "kernel_configurations": kernel_rows,
               "probe_configurations": len(rows) - kernel_rows, "disagreements": len(disagree),
               "rows": "occupancy-sweep.csv.gz", "kernel_sources": made["kernel_sources"]}
    git = made["git"]
    dirty = " (with uncommitted changes)" if git.get("dirty") else ""
    md = [f"# Offline occupancy vs the driver on {gpu}", "",
          *[f"- {key}: {value}" for key, value in summary.items()
            if key not in ("git", "kernel_sources")],
          f"- git commit: {git.get('commit')}{dirty}",
          f"- kernel sources: {len(made['kernel_sources'])} kernels, each file's sha256 in the "
          "JSON", ""]
    if disagree:
        md += ["## Disagreements", "", tabulate(disagree[:200], headers="keys",
                                                 tablefmt="github"), ""]
    table = io.StringIO(newline="")
    writer = csv.DictWriter(table, fieldnames=list(rows[0]) if rows else ["agree"])
    writer.writeheader()
    writer.writerows(rows)
    with writing(folder):
        write_atomic(folder / "occupancy-sweep.json",
                     json.dumps({"summary": summary, "disagreements": disagree}, indent=1) + "\n")
        write_atomic(folder / "occupancy-sweep.csv.gz", gzip.compress(table.getvalue().encode()))
        write_atomic(folder / "occupancy-sweep.md", "\n".join(md))
    return summary


def write_ceiling(meta: dict, rows: Sequence[dict], stem: Path) -> tuple[Path, Path]:
    """``harness ceiling``: ``stem.json`` (metadata + one row per precision) and ``stem.md``."""
    wgmma = any(r["instruction"].startswith("wgmma") for r in rows)
    family = "wgmma" if wgmma else "mma.sync"
    operands = ("A in registers, B in shared memory (filled once), accumulators in registers"
                if wgmma else "independent accumulator chains per warp, operands in registers")
    lines = [
        f"- kernels: `{family}` loops (`ptx/ceiling/`): {operands}, nothing loaded from global "
        "memory, one store per thread; one wave of blocks_per_sm x SM count blocks; checked "
        "before timing (every thread writes, its sum doubles when the iterations double)",
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
    return write_table_report(meta, rows, stem, f"{family} issue ceiling", lines)
