"""``harness diff``: two saved runs side by side, per kernel and size, with a verdict.

The verdict answers "did my edit make it slower?" from the uncertainty of the two medians, not
from the spread of single repetitions: the ratio of the new median time to the old is "slower"
or "faster" when it is further from 1 than three of its standard errors (and a small practical
floor), else "same". Whatever else differs between the two timings (a changed kernel source,
cold against hot L2, another regime, precision or clock limiter, a moved SM clock) is noted
beside the verdict, never in its place; a moved clock also gets a verdict per clock (cycles).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tabulate import tabulate

from harness.bench.result import Result
from harness.gpu.timing import Timing, median_rel_se_pct
from harness.report.reading import RunReport
from harness.report.tables import short_size
from harness.report.width import NAME, TEXT, WIDTH, fit_table, fit_text
from harness.stats import Summary

SIGMAS = 3.0
"""How many combined standard errors a change must exceed to count."""
FLOOR = 0.01
"""The least change that counts, however tight the medians. A median's standard error is within
one run; two runs also differ by what it leaves out (clock, power and temperature drift). The
CUDA-core kernels of two back-to-back runs of one commit (reports/h100/run-20261124-130116 and
-130246) repeat within 1%; the power-capped tensor-core kernels move up to ~8% between them, more
than their medians' errors say: read their verdicts beside the cuBLAS control."""
CLOCK_SHIFT = 0.01
"""SM clocks further apart than this (relative) get a verdict per clock beside the wall-time one."""
WALL, PER_CLOCK = "wall time", "per clock"

RULE = (
    f"Verdict: ratio = new median time / old median time. Each median's relative standard "
    f"error is the run's own (median_rel_se_pct) or, where the report has none, 1.2533 x sigma "
    f"/ sqrt(reps) / median with sigma = (p80 - p20) / 1.683; the ratio's (the +-) is the two "
    f"added in quadrature. \"slower\" or \"faster\" when |ratio - 1| > max({SIGMAS:g} x that, "
    f"{100 * FLOOR:g}%), else \"same\". Where the SM clocks differ by more than "
    f"{100 * CLOCK_SHIFT:g}%, the same test is made per clock (ratio x new MHz / old MHz: "
    f"cycles) and shown beside; the verdict that counts (and fails --fail-on-slower) is the "
    f"wall-time one unless --per-clock is given. What else differs between the timings "
    f"(source, L2, interleaving, regime, precision, parameters, clock limiter, GPU) is noted "
    f"beside the verdict and does not change it.")
VERDICTS = ("same", "faster", "slower", "not timed")


@dataclass(frozen=True)
class Judgement:
    """One ratio judged against its uncertainty."""

    ratio: float
    """New over old: median time, or cycles (time x SM clock)."""
    rel_se: float
    """The ratio's relative standard error (a fraction; NaN where a run gave none)."""
    threshold: float
    """max(SIGMAS x rel_se, FLOOR): how far from 1 the ratio must be to count."""
    verdict: str

    def describe(self) -> str:
        """e.g. ``1.250x slower (+-0.8%)``, ``1.003x, same (+-0.2%)``."""
        se = f"+-{100 * self.rel_se:.2g}%" if math.isfinite(self.rel_se) else "+-?"
        if self.verdict == "slower":
            return f"{self.ratio:.3f}x slower ({se})"
        if self.verdict == "faster":
            return f"{1 / self.ratio:.3f}x faster ({se})"
        return f"{self.ratio:.3f}x, same ({se})"


@dataclass(frozen=True)
class DiffLine:
    """One kernel at one size in both runs."""

    kernel: str
    size: tuple[int, int, int]
    old: Result
    new: Result
    verdict: str
    """The verdict that counts: ``wall``'s, or ``per_clock``'s with --per-clock."""
    judged_by: str = WALL
    wall: Judgement | None = None
    per_clock: Judgement | None = None
    """Computed where the clocks differ by more than CLOCK_SHIFT, or with --per-clock."""
    notes: tuple[str, ...] = ()
    """What differs between the two timings besides the time, and what could not be judged."""
    baseline_ratio: float | None = None
    """cuBLAS's new median time over its old: a control, timed beside the kernel in each run."""

    @property
    def counted(self) -> Judgement | None:
        return self.per_clock if self.judged_by == PER_CLOCK else self.wall

    def describe(self) -> str:
        """The verdict in words: the ratio, its uncertainty, which one counts."""
        if self.wall is None:
            return self.verdict
        parts = [f"{self.judged_by} (counts): {self.counted.describe()}"]
        other = self.wall if self.judged_by == PER_CLOCK else self.per_clock
        if other is not None:
            parts.append(f"{PER_CLOCK if self.judged_by == WALL else WALL}: {other.describe()}")
        return "; ".join(parts)


@dataclass(frozen=True)
class Diff:
    old: RunReport
    new: RunReport
    lines: list[DiffLine]
    only_old: list[Result]
    only_new: list[Result]
    conditions: list[str]
    """Differences that hold for every line (another GPU)."""
    judged_by: str = WALL

    def counts(self) -> dict[str, int]:
        return {v: sum(1 for line in self.lines if line.verdict == v) for v in VERDICTS}


def rel_se(t: Timing) -> float:
    """The relative standard error of a timing's median (a fraction): the run's own where it
    recorded one, else estimated from p20-p80 and the repetitions as the timer does."""
    if math.isfinite(t.median_rel_se_pct) and t.median_rel_se_pct >= 0:
        return t.median_rel_se_pct / 100
    if not t.median_ms > 0:
        return math.nan
    pct = median_rel_se_pct(Summary(t.median_ms, t.p20_ms, t.p80_ms, t.min_ms, t.max_ms,
                                    int(t.reps)))
    return pct / 100 if math.isfinite(pct) and pct >= 0 else math.nan


def judge(ratio: float, rel_se_combined: float) -> Judgement:
    """``ratio`` (new over old time or cycles) against max(SIGMAS standard errors, FLOOR)."""
    spread = SIGMAS * rel_se_combined if math.isfinite(rel_se_combined) else 0.0
    threshold = max(spread, FLOOR)
    verdict = "same" if abs(ratio - 1.0) <= threshold else ("slower" if ratio > 1 else "faster")
    return Judgement(ratio, rel_se_combined, threshold, verdict)


def _mode(result: Result) -> str:
    return "interleaved (compare)" if result.comparison is not None else "one at a time"


def _duty(timing) -> str:
    """A timing's duty in words (TimingOptions.rest)."""
    return f"a rest of {timing.rest:g}x before each launch" if timing.rest else "full duty"


def _l2(t: Timing) -> str:
    return "cold L2" if t.cold_l2 else "hot L2"


def _unlike(old: Result, new: Result) -> list[str]:
    """How the two timings were not taken alike, in words."""
    out = []
    ko, kn = old.kernel, new.kernel
    if ko.source_sha256 and kn.source_sha256 and ko.source_sha256 != kn.source_sha256:
        out.append(f"source changed ({kn.file or ko.file}: sha256 "
                   f"{ko.source_sha256[:10]} -> {kn.source_sha256[:10]})")
    if old.timing.cold_l2 != new.timing.cold_l2:
        out.append(f"{_l2(old.timing)} against {_l2(new.timing)}")
    if _mode(old) != _mode(new):
        out.append(f"{_mode(old)} against {_mode(new)}")
    if old.timing.regime != new.timing.regime:
        out.append(f"regime {old.timing.regime} against {new.timing.regime}")
    if old.timing.rest != new.timing.rest:
        out.append(f"{_duty(old.timing)} against {_duty(new.timing)}")
    if ko.precision and kn.precision and ko.precision != kn.precision:
        out.append(f"precision {ko.precision} against {kn.precision}")
    # a parameter in one run only is one the spec gained or lost (at its default): the
    # source hash speaks for that; a value both runs name and differ on is another variant
    changed = sorted(k for k in set(ko.params) & set(kn.params) if ko.params[k] != kn.params[k])
    if changed:
        out.append("parameters differ (" + ", ".join(
            f"{k} {ko.params[k]} -> {kn.params[k]}" for k in changed) + ")")
    lo, ln = old.timing.clock_limits, new.timing.clock_limits
    if lo and ln and lo != ln:
        out.append(f"clock held by {lo} against {ln}")
    return out


def compare_one(old: Result, new: Result, conditions: list[str] = (),
                by_clock: bool = False) -> DiffLine:
    """The verdict on one kernel at one size (see RULE); ``by_clock``: the per-clock verdict
    counts (--per-clock)."""
    name, size = new.kernel.name, new.size
    if not all(r.passed and r.timing is not None for r in (old, new)):
        return DiffLine(name, size, old, new, "not timed",
                        notes=(f"old {old.status}, new {new.status}",))
    to, tn = old.timing, new.timing
    if not all(math.isfinite(t.median_ms) and t.median_ms > 0 for t in (to, tn)):
        return DiffLine(name, size, old, new, "not timed", notes=(
            f"median time old {to.median_ms:g} ms, new {tn.median_ms:g} ms: no ratio",))
    se_old, se_new = rel_se(to), rel_se(tn)
    se = math.hypot(se_old, se_new)
    notes = [*conditions, *_unlike(old, new)]
    if not math.isfinite(se):
        notes.append(f"no standard error of the median in one run: judged against the "
                     f"{100 * FLOOR:g}% floor alone")
    ratio = tn.median_ms / to.median_ms
    wall = judge(ratio, se)
    c_old, c_new = to.sm_clock_mhz, tn.sm_clock_mhz
    per_clock = None
    if all(math.isfinite(c) and c > 0 for c in (c_old, c_new)):
        shifted = abs(c_new / c_old - 1.0) > CLOCK_SHIFT
        if shifted:
            notes.append(f"SM clock {c_old:.0f} -> {c_new:.0f} MHz")
        if shifted or by_clock:
            # the clock is taken as exact: its samples' spread is not in the +-
            per_clock = judge(ratio * c_new / c_old, se)
    elif by_clock:
        notes.append("no SM clock in one run: judged by wall time")
    judged_by = PER_CLOCK if by_clock and per_clock is not None else WALL
    base = None
    if old.baseline and new.baseline and old.baseline.timing.median_ms > 0:
        base = new.baseline.timing.median_ms / old.baseline.timing.median_ms
    verdict = (per_clock if judged_by == PER_CLOCK else wall).verdict
    return DiffLine(name, size, old, new, verdict, judged_by, wall, per_clock, tuple(notes),
                    base)


def diff(old: RunReport, new: RunReport, size: tuple[int, int, int] | None = None,
         per_clock: bool = False) -> Diff:
    """Every kernel and size of ``new`` matched by name and size in ``old``; ``per_clock``:
    judge each by its cycles (time x SM clock) instead of its wall time."""
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
    lines = [compare_one(o[key], r, conditions, per_clock) for key, r in n.items() if key in o]
    return Diff(old, new, lines, [r for key, r in o.items() if key not in n],
                [r for key, r in n.items() if key not in o], conditions,
                PER_CLOCK if per_clock else WALL)


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
            _f(o.timing.sm_clock_mhz if o.timing else None, ".0f"),
            _f(n.timing.sm_clock_mhz if n.timing else None, ".0f"),
            _f(line.baseline_ratio, ".3f"), line.verdict, line.describe(),
            "; ".join(line.notes)])
    return tabulate(rows, headers=["kernel", "size", "old GFLOP/s", "new GFLOP/s", "old MHz",
                                   "new MHz", "cuBLAS new/old time", "verdict",
                                   "new/old time (+- 1 s.e.)", "notes"],
                    tablefmt=fmt, disable_numparse=True)


def narrow_table(result: Diff, width: int = WIDTH) -> tuple[str, list[str]]:
    """The table a terminal of ``width`` columns shows, and its notes: what differs besides
    the time, and the judgement that does not count, numbered once each however many lines
    share them (what holds for every line is said above the table)."""
    numbers: dict[str, int] = {}
    rows = []
    for line in result.lines:
        o, n = line.old, line.new
        said = [x for x in line.notes if x not in result.conditions]
        other = line.wall if line.judged_by == PER_CLOCK else line.per_clock
        if other is not None:
            said.append(f"{PER_CLOCK if line.judged_by == WALL else WALL}: {other.describe()}")
        marks = [str(numbers.setdefault(x, len(numbers) + 1)) for x in said]
        counted = line.counted
        se = ("" if counted is None else f"{100 * counted.rel_se:.2g}%"
              if math.isfinite(counted.rel_se) else "?")
        rows.append([line.kernel, short_size(line.size), _f(o.gflops, ".0f"),
                     _f(n.gflops, ".0f"), "" if counted is None else f"{counted.ratio:.3f}",
                     se, line.verdict, _f(line.baseline_ratio, ".3f"), ",".join(marks)])
    ratio = "new/old\ncycles" if result.judged_by == PER_CLOCK else "new/old\ntime"
    fitted = fit_table(["kernel", "size", "old\nGFLOP/s", "new\nGFLOP/s", ratio, "+-\n1 s.e.",
                        "verdict", "cuBLAS\nnew/old", "notes"], rows,
                       {8: (TEXT, 5), 0: (NAME, 16)}, width)
    return fitted.text, [f"[{k}] {x}" for x, k in numbers.items()]


def text(result: Diff, width: int | None = None) -> str:
    """What ``harness diff`` prints: the two runs, the table, what is in one only, the counts
    and the rule; ``width``: the table narrowed and the prose wrapped to fit it (None: every
    column at full width, as the markdown reports have it)."""
    counts = ", ".join(f"{n} {v}" for v, n in result.counts().items() if n)
    head = [_describe("old", result.old), _describe("new", result.new)]
    head += [f"{label}: {r.path}: {r.describe_state()}" for label, r in
             (("old", result.old), ("new", result.new)) if not r.complete]
    head += ["", *(f"every line: {c}" for c in result.conditions)]
    notes: list[str] = []
    if not result.lines:
        shown = "no kernel at a size found in both"
    elif width is None:
        shown = table(result)
    else:
        shown, notes = narrow_table(result, width)
    tail = [*(["notes:", *notes] if notes else []), ""]
    for label, only in (("only in old", result.only_old), ("only in new", result.only_new)):
        if only:
            tail.append(f"{label}: " + ", ".join(f"{r.kernel.name} at {_size(r.size)}"
                                                 for r in only))
    tail += [f"{len(result.lines)} matched, judged by {result.judged_by}: {counts or 'none'}",
             "", RULE]
    return "\n".join([fit_text("\n".join(head), width), shown,
                      fit_text("\n".join(tail), width)])


def to_json(result: Diff) -> dict:
    def side(r: Result) -> dict:
        t = r.timing
        return {"status": r.status, "gflops": r.gflops,
                "median_ms": t.median_ms if t else None,
                "median_rel_se_pct": 100 * rel_se(t) if t else None,
                "sm_clock_mhz": t.sm_clock_mhz if t else None,
                "cold_l2": t.cold_l2 if t else None, "regime": t.regime if t else None,
                "source_sha256": r.kernel.source_sha256 or None}

    def judgement(j: Judgement | None) -> dict | None:
        return None if j is None else {
            "ratio": j.ratio, "rel_se_pct": 100 * j.rel_se, "threshold_pct": 100 * j.threshold,
            "verdict": j.verdict, "text": j.describe()}

    return {"old": str(result.old.path), "new": str(result.new.path), "rule": RULE,
            "judged_by": result.judged_by, "conditions": result.conditions,
            "counts": result.counts(),
            "lines": [{"kernel": line.kernel, "size": list(line.size), "old": side(line.old),
                       "new": side(line.new), "verdict": line.verdict,
                       "judged_by": line.judged_by, "wall_time": judgement(line.wall),
                       "per_clock": judgement(line.per_clock),
                       "baseline_time_ratio": line.baseline_ratio, "notes": list(line.notes),
                       "text": line.describe()} for line in result.lines],
            "only_in_old": [{"kernel": r.kernel.name, "size": list(r.size)}
                            for r in result.only_old],
            "only_in_new": [{"kernel": r.kernel.name, "size": list(r.size)}
                            for r in result.only_new]}
