"""Attention kernels against the attention baselines on this GPU (issue 63), until ``harness
compare`` takes attention kernels: harness/kinds/attention/timed.py does the work (battery
first, fresh draws every timed repetition, kept outputs checked at sampled rows, the baselines
interleaved on the same stream); this writes its rows as JSON and markdown with the GPU,
driver, clocks, date, command, commit and each baseline's version.

Run on a GPU from the project root (the wheel installed, or PYTHONPATH set):
python3 experiments/attention_compare.py KERNEL[:VARIANT]... [--size S]... [--baseline NAME]...
    [--out DIR]
KERNEL is a path (cu/attention/attention_03_wgmma.cu); a size as the kind reads it
(B=4,H=16,S=4096,D=128, causal with ",causal"); default: the kind's timed sizes at D = 128.
Baselines by name (harness/kinds/attention/baselines.py), default every one: those that cannot
run here are listed with the reason. Exit status 0 when every kernel row passed, 1 when one
failed, 2 when it could not run.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from harness.errors import HarnessError
from harness.kinds.attention import problem as attention_problem
from harness.kinds.attention.baselines import BASELINES


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels", nargs="+")
    parser.add_argument("--size", action="append", default=[])
    parser.add_argument("--baseline", action="append", default=[])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", default="reports")
    args = parser.parse_args(argv)
    from harness.bench.session import BenchSession
    from harness.gpu.timing import TimingOptions
    from harness.kinds.attention.timed import compare
    from harness.report.files import git_state

    try:
        problems = ([attention_problem.read_size(s) for s in args.size]
                    or list(attention_problem.timed_first()))
        kernels = [(k.split(":")[0], k.split(":")[1] if ":" in k else None)
                   for k in args.kernels]
        baselines = args.baseline or list(BASELINES.names())
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        session = BenchSession(TimingOptions(graph=False))
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    rows = []
    try:
        facts = session.facts()
        for row in compare(kernels, problems, baselines, seeds=args.seeds, session=session,
                           say=lambda s: print(f"  .. {s}", flush=True)):
            rows.append(row)
            print(_line(row), flush=True)
    except HarnessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        session.close()
    meta = {"date_utc": started, "command": "python3 experiments/attention_compare.py "
            + " ".join(argv), "git": git_state(), "gpu": facts.get("name"), "device": facts,
            "timing": "sustained, cold L2, warm-up then repetitions to the stop rule, enqueued "
                      "from the host (no graphs); median and p20/p80 of the repetitions"}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"attention-compare-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}"
    Path(f"{stem}.json").write_text(json.dumps({"meta": meta,
                                                "rows": [r.to_json() for r in rows]}, indent=1))
    Path(f"{stem}.md").write_text("\n".join(markdown(meta, rows)) + "\n")
    print(f"wrote {stem}.json and .md")
    return 1 if any(not r.baseline and r.status != "pass" for r in rows) else 0


def _line(row) -> str:
    if row.status != "pass":
        return f"{row.name:34s} {row.problem:32s} {row.status}: {row.message}"
    against = ", ".join(f"{v:.2f}x {k}" for k, v in row.ratios.items())
    return (f"{row.name:34s} {row.problem:32s} {row.median_ms:9.4f} ms {row.tflops:7.1f} "
            f"TFLOP/s @{row.sm_clock_mhz:.0f} MHz" + (f"  ({against})" if against else ""))


def markdown(meta: dict, rows) -> list[str]:
    clocks = meta["device"].get("clocks", {})
    lines = [f"# Attention compare: {meta['gpu']}", "",
             f"- date (UTC): {meta['date_utc']}", f"- command: `{meta['command']}`",
             f"- git commit: {meta['git'].get('commit')}",
             f"- driver: CUDA {meta['device'].get('driver')}; max SM clock "
             f"{clocks.get('max_sm_clock_mhz')} MHz, power limit {clocks.get('power_limit_w')} W",
             f"- timing: {meta['timing']}", "",
             "| kernel or baseline | size | status | median ms (p20-p80) | TFLOP/s | SM MHz | "
             "kept outputs checked | speedup over each baseline | version / note |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r.status != "pass":
            lines.append(f"| {r.name} | {r.problem} | {r.status} | | | | | | "
                         f"{r.version} {r.message} |")
            continue
        against = ", ".join(f"{v:.3f} ({k})" for k, v in r.ratios.items())
        lines.append(f"| {r.name} | {r.problem} | pass | {r.median_ms:.4f} ({r.p20_ms:.4f}-"
                     f"{r.p80_ms:.4f}) | {r.tflops:.1f} | {r.sm_clock_mhz:.0f} | "
                     f"{r.kept_checked if not r.baseline else ''} | {against} | "
                     f"{r.version or r.message} |")
    return lines


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
