"""One GPU against several: wall time, speedup, winners and pass/fail per row of the same
``harness run`` or ``harness tune`` on one GPU, with ``--gpus all`` and through a Dask cluster
(issue 24).

    python3 experiments/multi_gpu_report.py ROOT [--report-dir reports]

ROOT holds ``walls.txt`` (one line per command: ``KIND LABEL SECONDS RC``, KIND ``run`` or
``tune``, LABEL ``one`` for the one-GPU command and any other word for the others, SECONDS its
wall time as the shell measured it, start-up included) and each command's report folder
``KIND-LABEL/<gpu>/{run,tune}-*.json``. Writes ``reports/<gpu>/multi-gpu-<date>.{json,md}``.

Winners: for tune, the fastest passing point at the ranking size (and the first three); for
run, the fastest passing variant of each kernel file at each size. A winner that differs is
listed with how far apart the two candidates were in the one-GPU run, so that a swap between
points within a percent of each other reads as the noise it is.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.bench.result import Result
from harness.errors import HarnessError
from harness.kernels.registry import PROJECT_ROOT
from harness.report import files
from harness.report.reading import load_report

TARGET_SPEEDUP = 1.8


def _walls(root: Path) -> list[tuple[str, str, float, int]]:
    out = []
    for line in (root / "walls.txt").read_text().splitlines():
        if line.strip():
            kind, label, seconds, rc = line.split()
            out.append((kind, label, float(seconds), int(rc)))
    return out


def _report(root: Path, kind: str, label: str):
    found = sorted((root / f"{kind}-{label}").glob(f"*/{kind}-*.json"))
    if not found:
        raise HarnessError(f"no {kind} report under {root / f'{kind}-{label}'}")
    return load_report(found[-1])


def _key(r: Result) -> tuple[str, tuple[int, int, int]]:
    return r.kernel.name, r.size


def _gpus(results) -> list[str]:
    """The GPUs the rows ran on (host:index); a run of one worker without --gpus names none:
    GPU 0."""
    return sorted({f"{r.gpu.host or '?'}:{r.gpu.index}" if r.gpu else "GPU 0"
                   for r in results})


def _winners(kind: str, results, rank_size) -> dict:
    """{what is ranked: (winner, its GFLOP/s, {candidate: GFLOP/s})}"""
    groups: dict = {}
    for r in results:
        if r.status != "pass" or r.gflops is None:
            continue
        if kind == "tune" and r.size != rank_size:
            continue
        group = ("best point", r.size) if kind == "tune" else (Path(r.kernel.file).stem, r.size)
        groups.setdefault(group, {})[r.kernel.name] = r.gflops
    return {g: (max(c, key=c.get), max(c.values()), c) for g, c in groups.items()}


def compare(root: Path) -> tuple[list[dict], list[str], dict]:
    walls = _walls(root)
    rows, body, first_meta = [], [], {}
    for kind in dict.fromkeys(k for k, *_ in walls):
        labels = [(label, s, rc) for k, label, s, rc in walls if k == kind]
        base_label = next((label for label, *_ in labels if label == "one"), None)
        if base_label is None:
            raise HarnessError(f"walls.txt has no 'one' line for {kind}: nothing to compare to")
        base = _report(root, kind, "one")
        first_meta = first_meta or base.meta
        base_wall = next(s for label, s, _ in labels if label == "one")
        rank_size = tuple(base.meta["sizes"][-1])
        base_status = {_key(r): r.status for r in base.results}
        base_win = _winners(kind, base.results, rank_size)
        body += ["", f"## harness {kind}", "", f"- one GPU: `{base.meta.get('command')}`", ""]
        table = ["| command | GPUs | wall s | harness wall s | speedup | rows | passed | "
                 "pass/fail as on one GPU | winners as on one GPU |", "|---|---|---|---|---|---|"
                 "---|---|---|"]
        differences = []
        for label, seconds, rc in labels:
            rep = base if label == "one" else _report(root, kind, label)
            status = {_key(r): r.status for r in rep.results}
            same_rows = set(status) == set(base_status)
            flips = sorted(k for k in status.keys() & base_status.keys()
                           if (status[k] == "pass") != (base_status[k] == "pass"))
            win = _winners(kind, rep.results, rank_size)
            swapped = sorted(g for g in base_win if g in win and win[g][0] != base_win[g][0])
            missing = sorted(set(base_win) ^ set(win))
            speedup = base_wall / seconds if seconds > 0 else float("nan")
            row = {"kind": kind, "label": label, "command": rep.meta.get("command"),
                   "gpus": _gpus(rep.results), "wall_s": seconds, "rc": rc,
                   "harness_wall_s": rep.meta.get("wall_s"), "speedup": speedup,
                   "rows": len(rep.results),
                   "passed": sum(r.status == "pass" for r in rep.results),
                   "same_rows": same_rows, "pass_fail_flips": [list(map(str, f)) for f in flips],
                   "winner_groups": len(win), "winners_swapped": [str(g) for g in swapped],
                   "winner_groups_missing": [str(g) for g in missing]}
            rows.append(row)
            hw = row["harness_wall_s"]
            table.append(
                f"| {label}: `{row['command']}` | {len(row['gpus'])} | {seconds:.1f} | "
                f"{'' if hw is None else f'{hw:.1f}'} | {speedup:.2f}x | {row['rows']} | "
                f"{row['passed']} | {'yes' if same_rows and not flips else 'no'} "
                f"({len(flips)} differ) | {len(win) - len(swapped) - len(missing)} of "
                f"{len(base_win)} |")
            for g in swapped:
                cands = base_win[g][2]
                theirs, ours = win[g][0], base_win[g][0]
                gap = 100.0 * (cands[ours] / cands.get(theirs, float("nan")) - 1.0)
                differences.append(f"- {label}: {g[0]} at {'x'.join(map(str, g[1]))}: "
                                   f"{theirs} won, on one GPU {ours} ({gap:+.1f}% over "
                                   f"{theirs} there)")
            for f in flips:
                differences.append(f"- {label}: {f[0]} at {'x'.join(map(str, f[1]))}: "
                                   f"{status[f]} here, {base_status[f]} on one GPU")
            if kind == "tune":
                top = sorted(win.get(("best point", rank_size), (None, 0, {}))[2].items(),
                             key=lambda kv: -kv[1])[:3]
                body_top = ", ".join(f"{n} ({g:,.0f} GFLOP/s)" for n, g in top)
                differences.append(f"- {label}: first three at "
                                   f"{'x'.join(map(str, rank_size))}: {body_top}")
        body += [*table, "", *differences, ""]
        fast = [r for r in rows if r["kind"] == kind and r["label"] != "one"]
        verdicts = [f"{r['label']} {r['speedup']:.2f}x "
                    f"({'meets' if r['speedup'] >= TARGET_SPEEDUP else 'misses'} "
                    f"{TARGET_SPEEDUP}x)" for r in fast]
        body += [f"Speedup over one GPU: {'; '.join(verdicts)}.", ""]
    return rows, body, first_meta


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--report-dir", type=Path, default=PROJECT_ROOT / "reports")
    args = parser.parse_args()
    try:
        rows, body, first = compare(args.root)
    except HarnessError as exc:
        print(f"multi_gpu_report: {exc}", file=sys.stderr)
        return 2
    gpu = first.get("gpu") or "unknown GPU"
    meta = {**files.provenance(["python3", *sys.argv]), "gpu": gpu,
            "device": first.get("device", {}),
            "method": "each command's wall time measured by the shell around it (process "
                      "and cluster start-up included), on one machine, one after the other; "
                      "the compile and SASS caches filled before the first "
                      "(experiments/warm_caches.py)"}
    stem = args.report_dir / files.gpu_slug(gpu) / f"multi-gpu-{files.run_stamp()}"
    json_path, md_path = files.write_table_report(meta, rows, stem, "one GPU against several",
                                                  body)
    print(md_path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
