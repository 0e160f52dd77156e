"""``harness diff``: two saved runs side by side, per kernel and size, with a verdict.

The verdict is read from the two runs' own spreads and clocks, never from a fixed threshold:
a change smaller than the runs' p20-p80 spread is "same", and a change the SM clock explains is
not credited to the code. Where the two timings were not taken alike (cold against hot L2,
another precision, a changed kernel source...) the verdict is "ambiguous" and says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tabulate import tabulate

from harness.bench.result import Result, RunReport
from harness.gpu.timing import Timing

RULE = (
    "Verdict: ratio = new GFLOP/s / old GFLOP/s (medians); a run's spread = (p80 - p20) / "
    "median of its repetitions' times; tolerance = (old spread + new spread) / 2. \"same\" "
    "when |ratio - 1| <= tolerance, else \"faster\" or \"slower\". The same test is made on "
    "the ratio per SM clock (ratio x old MHz / new MHz): where the two tests disagree, the "
    "clocks moved more than the result explains and the verdict is \"ambiguous\". Also "
    "\"ambiguous\" where the timings were not taken alike: another GPU, cold against hot L2, "
    "interleaved (compare) against one at a time, another precision or parameters, another "
    "clock limiter, or a kernel source whose sha256 changed; \"why\" says which, and what the "
    "ratio alone says.")
VERDICTS = ("same", "faster", "slower", "ambiguous", "not timed")


@dataclass(frozen=True)
class DiffLine:
    """One kernel at one size in both runs."""

    kernel: str
    size: tuple[int, int, int]
    old: Result
    new: Result
    verdict: str
    why: str = ""
    ratio: float | None = None
    """New GFLOP/s over old."""
    per_clock_ratio: float | None = None
    tolerance: float | None = None
    baseline_ratio: float | None = None
    """cuBLAS's new GFLOP/s over its old: a control, timed beside the kernel in each run."""


@dataclass(frozen=True)
class Diff:
    old: RunReport
    new: RunReport
    lines: list[DiffLine]
    only_old: list[Result]
    only_new: list[Result]
    conditions: list[str]
    """Differences that hold for every line (another GPU)."""

    def counts(self) -> dict[str, int]:
        return {v: sum(1 for line in self.lines if line.verdict == v) for v in VERDICTS}


def spread(t: Timing) -> float:
    """(p80 - p20) / median of a timing's repetitions (NaN where it has none)."""
    return (t.p80_ms - t.p20_ms) / t.median_ms if t.median_ms else math.nan


def classify(ratio: float, tolerance: float) -> str:
    if abs(ratio - 1.0) <= tolerance:
        return "same"
    return "faster" if ratio > 1.0 else "slower"


def _mode(result: Result) -> str:
    return "interleaved (compare)" if result.comparison is not None else "one at a time"


def _l2(t: Timing) -> str:
    return "cold L2" if t.cold_l2 else "hot L2"


def _unlike(old: Result, new: Result) -> list[str]:
    """How the two timings were not taken alike, in words."""
    out = []
    if old.timing.cold_l2 != new.timing.cold_l2:
        out.append(f"{_l2(old.timing)} against {_l2(new.timing)}")
    if _mode(old) != _mode(new):
        out.append(f"{_mode(old)} against {_mode(new)}")
    ko, kn = old.kernel, new.kernel
    if ko.precision and kn.precision and ko.precision != kn.precision:
        out.append(f"precision {ko.precision} against {kn.precision}")
    # a parameter in one run only is one the spec gained or lost (at its default): the
    # source hash speaks for that; a value both runs name and differ on is another variant
    changed = sorted(k for k in set(ko.params) & set(kn.params) if ko.params[k] != kn.params[k])
    if changed:
        out.append("parameters differ (" + ", ".join(
            f"{k} {ko.params[k]} -> {kn.params[k]}" for k in changed) + ")")
    if ko.source_sha256 and kn.source_sha256 and ko.source_sha256 != kn.source_sha256:
        out.append(f"kernel source changed ({kn.file or ko.file}: sha256 "
                   f"{ko.source_sha256[:10]} -> {kn.source_sha256[:10]})")
    lo, ln = old.timing.clock_limits, new.timing.clock_limits
    if lo and ln and lo != ln:
        out.append(f"clock held by {lo} against {ln}")
    return out


def compare_one(old: Result, new: Result, conditions: list[str] = ()) -> DiffLine:
    """The verdict on one kernel at one size (see RULE)."""
    name, size = new.kernel.name, new.size
    timed = [r for r in (old, new) if r.passed and r.timing is not None]
    if len(timed) < 2:
        return DiffLine(name, size, old, new, "not timed",
                        f"old {old.status}, new {new.status}")
    ratio = new.gflops / old.gflops
    tolerance = (spread(old.timing) + spread(new.timing)) / 2
    notes = []
    if not math.isfinite(tolerance):
        tolerance, notes = 0.0, ["no p20-p80 in one run: tolerance 0"]
    by_time = classify(ratio, tolerance)
    c_old, c_new = old.timing.sm_clock_mhz, new.timing.sm_clock_mhz
    per_clock = None
    if all(math.isfinite(c) and c > 0 for c in (c_old, c_new)):
        per_clock = ratio * c_old / c_new
    else:
        notes.append("no SM clock in one run: judged by time alone")
    base = None
    if old.baseline_gflops and new.baseline_gflops:
        base = new.baseline_gflops / old.baseline_gflops
    reasons = [*conditions, *_unlike(old, new)]
    if per_clock is not None and classify(per_clock, tolerance) != by_time:
        reasons.append(f"SM clock {c_old:.0f} -> {c_new:.0f} MHz: "
                       f"{classify(per_clock, tolerance)} per clock")
    if reasons:
        verdict, why = "ambiguous", "; ".join(reasons) + f"; by the ratio alone {by_time}"
    else:
        verdict, why = by_time, "; ".join(notes)
    return DiffLine(name, size, old, new, verdict, why, ratio, per_clock, tolerance, base)


def diff(old: RunReport, new: RunReport, size: tuple[int, int, int] | None = None) -> Diff:
    """Every kernel and size of ``new`` matched by name and size in ``old``."""
    def keyed(report: RunReport) -> dict:
        out: dict = {}
        for r in report.results:
            if size is None or r.size == tuple(size):
                out.setdefault((r.kernel.name, r.size), r)
        return out

    o, n = keyed(old), keyed(new)
    conditions = []
    gpu_old, gpu_new = old.meta.get("gpu"), new.meta.get("gpu")
    if gpu_old and gpu_new and gpu_old != gpu_new:
        conditions.append(f"another GPU ({gpu_old} against {gpu_new})")
    lines = [compare_one(o[key], r, conditions) for key, r in n.items() if key in o]
    return Diff(old, new, lines, [r for key, r in o.items() if key not in n],
                [r for key, r in n.items() if key not in o], conditions)


# --- output ---------------------------------------------------------------------------------

def _size(size: tuple[int, int, int]) -> str:
    return "x".join(map(str, size))


def _f(value: float | None, fmt: str) -> str:
    return "" if value is None or not math.isfinite(value) else format(value, fmt)


def _describe(label: str, report: RunReport) -> str:
    meta = report.meta
    git = meta.get("git") or {}
    commit = (str(git.get("commit", ""))[:12] + (" (dirty)" if git.get("dirty") else "")
              if git else "not recorded")
    return (f"{label}: {report.path} ({meta.get('date_utc', 'no date')}, schema "
            f"{report.schema}, commit {commit}): `{meta.get('command', '?')}` on "
            f"{meta.get('gpu', '?')}")


def table(result: Diff, fmt: str = "github") -> str:
    rows = []
    for line in result.lines:
        o, n = line.old, line.new
        rows.append([
            line.kernel, _size(line.size), _f(o.gflops, ".0f"), _f(n.gflops, ".0f"),
            _f(line.ratio, ".3f"),
            _f(o.timing.sm_clock_mhz if o.timing else None, ".0f"),
            _f(n.timing.sm_clock_mhz if n.timing else None, ".0f"),
            _f(100 * spread(o.timing) if o.timing else None, ".1f"),
            _f(100 * spread(n.timing) if n.timing else None, ".1f"),
            _f(line.baseline_ratio, ".3f"), line.verdict, line.why])
    return tabulate(rows, headers=["kernel", "size", "old GFLOP/s", "new GFLOP/s", "new/old",
                                   "old MHz", "new MHz", "old spread %", "new spread %",
                                   "cuBLAS new/old", "verdict", "why"],
                    tablefmt=fmt, disable_numparse=True)


def text(result: Diff) -> str:
    counts = ", ".join(f"{n} {v}" for v, n in result.counts().items() if n)
    out = [_describe("old", result.old), _describe("new", result.new), ""]
    out += [f"every line: {c}" for c in result.conditions]
    out += [table(result) if result.lines else "no kernel at a size found in both", ""]
    for label, only in (("only in old", result.only_old), ("only in new", result.only_new)):
        if only:
            out.append(f"{label}: " + ", ".join(f"{r.kernel.name} at {_size(r.size)}"
                                                for r in only))
    out += [f"{len(result.lines)} matched: {counts or 'none'}", "", RULE]
    return "\n".join(out)


def to_json(result: Diff) -> dict:
    def side(r: Result) -> dict:
        t = r.timing
        return {"status": r.status, "gflops": r.gflops,
                "sm_clock_mhz": t.sm_clock_mhz if t else None,
                "spread": spread(t) if t else None, "cold_l2": t.cold_l2 if t else None,
                "source_sha256": r.kernel.source_sha256 or None}

    return {"old": str(result.old.path), "new": str(result.new.path), "rule": RULE,
            "conditions": result.conditions, "counts": result.counts(),
            "lines": [{"kernel": line.kernel, "size": list(line.size), "old": side(line.old),
                       "new": side(line.new), "ratio": line.ratio,
                       "per_clock_ratio": line.per_clock_ratio, "tolerance": line.tolerance,
                       "baseline_ratio": line.baseline_ratio, "verdict": line.verdict,
                       "why": line.why} for line in result.lines],
            "only_in_old": [{"kernel": r.kernel.name, "size": list(r.size)}
                            for r in result.only_old],
            "only_in_new": [{"kernel": r.kernel.name, "size": list(r.size)}
                            for r in result.only_new]}
