"""harness diff: two saved runs side by side, with a verdict from the uncertainty of their
medians, and what else differs noted beside it."""

import dataclasses
import json
import math
import subprocess
import sys

import pytest

from harness.bench.result import (
    Baseline,
    Comparison,
    KernelInfo,
    Result,
)
from harness.gpu.timing import Timing
from harness.kernels.registry import PROJECT_ROOT
from harness.report import diff
from harness.report.reading import RunReport, load_report, report_json

H100 = PROJECT_ROOT / "reports" / "h100"
SAME_COMMIT = (H100 / "run-20261124-130116.json", H100 / "run-20261124-130246.json.gz")
"""Two back-to-back schema-2 runs of one commit: every kernel, source hashes recorded."""
HOISTED = ("10_hoisted", (4096, 4096, 4096))


def timing(ms: float, spread: float = 0.02, mhz: float = 1800.0, cold: bool = True,
           limits: str = "power cap", se_pct: float = math.nan,
           regime: str = "sustained") -> Timing:
    """A timing whose p20-p80 is ``spread`` of its median, over 50 repetitions."""
    return Timing(ms, ms * (1 - spread / 2), ms * (1 + spread / 2), ms * 0.9, ms * 1.1, 50,
                  cold, mhz, mhz, mhz, 3.0, limits, median_rel_se_pct=se_pct, regime=regime)


def result(ms: float, name: str = "k", size: int = 4096, sha: str = "a" * 64,
           precision: str = "bf16", params=None, status: str = "pass", **timing_args):
    info = KernelInfo(name, "cu/k.cu", precision, params or {"BM": 128}, source_sha256=sha)
    return Result.of(info, size, size, size).with_parts(
        timing=timing(ms, **timing_args),
        baseline=Baseline("CUBLAS_COMPUTE_32F", timing(0.2))).ended(status, "ok")


def report(*results, gpu="NVIDIA H100 80GB HBM3") -> RunReport:
    return RunReport({"gpu": gpu, "command": "harness run"}, list(results))


def verdict(old: Result, new: Result, per_clock: bool = False) -> diff.DiffLine:
    (line,) = diff.diff(report(old), report(new), per_clock=per_clock).lines
    return line


def changed(r: Result, factor: float = 1.0, sha: str | None = None,
            mhz: float | None = None) -> Result:
    """``r`` with every time of its timing scaled by ``factor`` (its relative error kept), its
    source hash and its SM clock replaced where given."""
    t = r.timing
    t = dataclasses.replace(t, median_ms=t.median_ms * factor, p20_ms=t.p20_ms * factor,
                            p80_ms=t.p80_ms * factor, min_ms=t.min_ms * factor,
                            max_ms=t.max_ms * factor)
    if mhz is not None:
        t = dataclasses.replace(t, sm_clock_mhz=mhz, sm_clock_min_mhz=mhz,
                                sm_clock_max_mhz=mhz)
    kernel = r.kernel if sha is None else dataclasses.replace(r.kernel, source_sha256=sha)
    return r.with_parts(timing=t, kernel=kernel)


def committed_copy(tmp_path, **change) -> tuple:
    """The committed run, and a copy of it written to ``tmp_path`` with 10_hoisted at 4096
    ``changed(**change)``."""
    old_path = SAME_COMMIT[1]
    old = load_report(old_path)
    rows = [changed(r, **change) if (r.kernel.name, r.size) == HOISTED else r
            for r in old.results]
    new_path = tmp_path / "run-new.json"
    new_path.write_text(report_json(old.meta, rows))
    return old_path, new_path


def line_of(d: diff.Diff, key=HOISTED) -> diff.DiffLine:
    return next(line for line in d.lines if (line.kernel, line.size) == key)


# --- the rule -------------------------------------------------------------------------------

def test_a_medians_error_is_the_runs_own_else_estimated_from_p20_p80():
    assert diff.rel_se(timing(1.0, se_pct=0.5)) == pytest.approx(0.005)
    # 1.2533 sigma / sqrt(reps) / median, sigma = (p80 - p20) / 1.683
    assert diff.rel_se(timing(2.0, spread=0.02)) == pytest.approx(
        1.2533 * (0.04 / 1.683) / math.sqrt(50) / 2.0)


@pytest.mark.parametrize("new_ms, expected", [(1.05, "same"), (0.95, "same"),
                                              (1.10, "slower"), (0.90, "faster")])
def test_the_verdict_is_read_from_the_medians_uncertainty(new_ms, expected):
    # 2% each: 2.83% on the ratio, a change must pass 3 x that = 8.5%
    line = verdict(result(1.0, se_pct=2.0), result(new_ms, se_pct=2.0))
    assert line.verdict == expected and line.judged_by == diff.WALL
    assert line.wall.ratio == pytest.approx(new_ms)
    assert line.wall.rel_se == pytest.approx(math.sqrt(8) / 100)
    assert line.wall.threshold == pytest.approx(3 * math.sqrt(8) / 100)
    assert line.per_clock is None and line.notes == ()


def test_not_the_spread_of_single_repetitions():
    # a 20% p20-p80 spread over 50 repetitions pins each median to 2.1%, the ratio to 3%:
    # 12% slower, inside the spread, is beyond 3 standard errors
    line = verdict(result(1.0, spread=0.2), result(1.12, spread=0.2))
    assert line.verdict == "slower" and line.wall.rel_se == pytest.approx(0.0298, rel=1e-2)


@pytest.mark.parametrize("new_ms, expected", [(1.005, "same"), (0.995, "same"),
                                              (1.015, "slower"), (0.985, "faster")])
def test_tight_medians_are_judged_against_the_practical_floor(new_ms, expected):
    line = verdict(result(1.0, se_pct=0.01), result(new_ms, se_pct=0.01))
    assert line.verdict == expected and line.wall.threshold == diff.FLOOR


def test_the_line_says_the_ratio_and_its_uncertainty():
    line = verdict(result(1.0, se_pct=0.2), result(1.25, se_pct=0.2))
    assert line.describe() == "wall time (counts): 1.250x slower (+-0.28%)"
    assert verdict(result(1.0, se_pct=0.2), result(0.8, se_pct=0.2)).describe() == (
        "wall time (counts): 1.250x faster (+-0.28%)")
    assert verdict(result(1.0, se_pct=0.2), result(1.002, se_pct=0.2)).describe() == (
        "wall time (counts): 1.002x, same (+-0.28%)")


def test_a_moved_clock_gives_the_per_clock_verdict_beside():
    # 10% faster at a 10% higher clock: faster by wall time, the same per clock
    old, new = result(1.0, mhz=1600.0, se_pct=0.2), result(1 / 1.1, mhz=1760.0, se_pct=0.2)
    line = verdict(old, new)
    assert (line.verdict, line.judged_by) == ("faster", diff.WALL)
    assert line.per_clock.ratio == pytest.approx(1.0) and line.per_clock.verdict == "same"
    assert line.notes == ("SM clock 1600 -> 1760 MHz",)
    assert line.describe() == ("wall time (counts): 1.100x faster (+-0.28%); "
                               "per clock: 1.000x, same (+-0.28%)")
    # --per-clock: the per-clock verdict counts, wall time beside it
    line = verdict(old, new, per_clock=True)
    assert (line.verdict, line.judged_by) == ("same", diff.PER_CLOCK)
    assert line.describe().startswith("per clock (counts): 1.000x, same")
    assert "wall time: 1.100x faster" in line.describe()
    # a clock within 1%: no per-clock verdict unless asked for
    line = verdict(result(1.0, mhz=1800.0), result(1.0, mhz=1810.0))
    assert line.per_clock is None and line.notes == ()
    assert verdict(result(1.0, mhz=1800.0), result(1.0, mhz=1810.0),
                   per_clock=True).judged_by == diff.PER_CLOCK
    # no clock in one run: --per-clock falls back to wall time and says so
    line = verdict(result(1.0, mhz=math.nan), result(1.5), per_clock=True)
    assert (line.verdict, line.judged_by) == ("slower", diff.WALL)
    assert line.notes == ("no SM clock in one run: judged by wall time",)


@pytest.mark.parametrize("change, note", [
    ({"sha": "b" * 64}, "source changed (cu/k.cu: sha256 aaaaaaaaaa -> bbbbbbbbbb)"),
    ({"cold": False}, "cold L2 against hot L2"),
    ({"regime": "isolated"}, "regime sustained against isolated"),
    ({"precision": "fp16"}, "precision bf16 against fp16"),
    ({"params": {"BM": 256}}, "parameters differ (BM 128 -> 256)"),
    ({"limits": "thermal"}, "clock held by power cap against thermal"),
])
@pytest.mark.parametrize("new_ms, expected", [(1.25, "slower"), (0.8, "faster"),
                                              (1.0, "same")])
def test_what_differs_is_noted_beside_the_verdict_never_instead(change, note, new_ms,
                                                                expected):
    line = verdict(result(1.0, spread=0.01), result(new_ms, spread=0.01, **change))
    assert line.verdict == expected and line.notes == (note,)


def test_what_does_not_differ():
    # an unknown hash (schema 1), a parameter the spec gained at its default, an unrecorded
    # clock limiter: none of them says the timings differ
    old = result(1.0, sha="", params={"BM": 128}, limits="")
    new = result(1.0, params={"BM": 128, "NOSTORE": 0})
    line = verdict(old, new)
    assert line.verdict == "same" and line.notes == ()


def test_interleaved_against_one_at_a_time_and_another_gpu():
    compared = result(1.0).with_parts(comparison=Comparison("k0", 1.0, 1.0, 1.0, True))
    line = verdict(compared, result(1.5))
    assert line.verdict == "slower"
    assert line.notes == ("interleaved (compare) against one at a time",)
    d = diff.diff(report(result(1.0)), report(result(1.5), gpu="NVIDIA A100"))
    assert d.conditions == ["another GPU (NVIDIA H100 80GB HBM3 against NVIDIA A100)"]
    assert d.lines[0].verdict == "slower" and d.lines[0].notes == tuple(d.conditions)


def test_no_standard_error_in_one_run_is_judged_against_the_floor():
    single = dataclasses.replace(timing(1.0), reps=1)
    old = result(1.0).with_parts(timing=single)
    line = verdict(old, result(1.02))
    assert line.verdict == "slower" and line.wall.threshold == diff.FLOOR
    assert "no standard error of the median in one run" in line.notes[0]
    assert "(+-?)" in line.describe()


def test_rows_in_one_run_only_and_untimed_rows():
    old = report(result(1.0, "a"), result(1.0, "b"), result(1.0, "c", status="FAIL"))
    new = report(result(1.0, "a"), result(1.0, "c"), result(1.0, "d"))
    d = diff.diff(old, new)
    assert [(line.kernel, line.verdict) for line in d.lines] == [("a", "same"),
                                                                ("c", "not timed")]
    assert d.lines[1].notes == ("old FAIL, new pass",) and d.lines[1].wall is None
    assert [r.kernel.name for r in d.only_old] == ["b"]
    assert [r.kernel.name for r in d.only_new] == ["d"]
    text = diff.text(d)
    assert "only in old: b at 4096x4096x4096" in text and "only in new: d at" in text
    assert "2 matched, judged by wall time: 1 same, 1 not timed" in text and diff.RULE in text


def test_size_filter():
    old = report(result(1.0, size=2048), result(1.0, size=4096))
    new = report(result(0.5, size=2048), result(1.0, size=4096))
    d = diff.diff(old, new, (2048, 2048, 2048))
    assert [(line.size, line.verdict) for line in d.lines] == [((2048,) * 3, "faster")]


# --- committed runs, and copies of them -----------------------------------------------------

def test_committed_runs_hot_against_cold_are_judged_with_the_difference_noted():
    """Two committed schema-1 runs: hot L2 (230540) against cold (230633), the clock 7-9%
    higher in the cold one."""
    d = diff.diff(load_report(H100 / "run-20261122-230540.json"),
                  load_report(H100 / "run-20261122-230633.json"))
    lines = {line.kernel: line for line in d.lines}
    assert set(lines) == {"12_mma_tma_bf16:m256n128e", "13_mma_persist_bf16:m256n128l3g8e"}
    tma, persist = lines["12_mma_tma_bf16:m256n128e"], lines["13_mma_persist_bf16:m256n128l3g8e"]
    assert tma.wall.ratio == pytest.approx(464924 / 460044, rel=1e-4)
    # 1.1% slower: tighter than 3 standard errors, beyond the 1% floor
    assert tma.verdict == "slower" and persist.verdict == "same"
    for line in (tma, persist):
        assert line.notes[0] == "hot L2 against cold L2"
        assert line.notes[1].startswith("SM clock 16")
        assert line.per_clock.verdict == "slower"
    assert len(d.only_old) == 3 and len(d.only_new) == 2
    assert diff.diff(load_report(H100 / "run-20261122-230540.json"),
                     load_report(H100 / "run-20261122-230633.json"),
                     per_clock=True).counts()["slower"] == 2


def test_two_runs_of_one_commit_cuda_core_kernels_are_the_same():
    """Real noise: back to back, one commit. The CUDA-core rungs (01-10) repeat within their
    medians' uncertainty and the floor; the power-capped tensor-core rungs move more (FLOOR)."""
    d = diff.diff(*map(load_report, SAME_COMMIT))
    simt = [line for line in d.lines if int(line.kernel[:2]) <= 10]
    assert len(simt) >= 30
    assert all(line.verdict == "same" and line.notes == () for line in simt)


def test_a_copy_with_noise_within_the_medians_uncertainty_is_the_same(tmp_path):
    old = load_report(SAME_COMMIT[1])
    # each median moved by twice its own standard error, up and down in turn: inside
    # 3 x the combined error of the pair
    rows = [changed(r, 1 + (-1) ** i * 2 * diff.rel_se(r.timing)) if r.timing else r
            for i, r in enumerate(old.results)]
    d = diff.diff(old, RunReport(old.meta, rows, 2))
    assert len(d.lines) == len(old.results)
    assert sum(line.wall.ratio != 1.0 for line in d.lines) > len(d.lines) // 2
    assert all(line.verdict == "same" and line.notes == () for line in d.lines)


def test_a_slower_10_hoisted_with_a_new_source_is_slower_and_says_source_changed(tmp_path):
    old_path, new_path = committed_copy(tmp_path, factor=1.25, sha="e" * 64)
    d = diff.diff(load_report(old_path), load_report(new_path))
    line = line_of(d)
    assert line.verdict == "slower" and line.wall.ratio == pytest.approx(1.25)
    assert line.describe().startswith("wall time (counts): 1.250x slower (+-")
    assert len(line.notes) == 1 and line.notes[0].startswith(
        "source changed (cu/sgemm/10_hoisted.cu: sha256 caaf79a8")
    assert d.counts() == {"same": len(d.lines) - 1, "faster": 0, "slower": 1, "not timed": 0}


def test_a_clock_shift_gives_the_per_clock_verdict_too(tmp_path):
    # 10% longer at a clock 1980 / 1.1 MHz: slower by wall time, the same number of cycles
    old_path, new_path = committed_copy(tmp_path, factor=1.1, mhz=1800.0)
    line = line_of(diff.diff(load_report(old_path), load_report(new_path)))
    assert (line.verdict, line.judged_by) == ("slower", diff.WALL)
    assert line.per_clock.verdict == "same" and line.per_clock.ratio == pytest.approx(1.0)
    assert line.notes == ("SM clock 1980 -> 1800 MHz",)
    assert "per clock: 1.000x, same" in line.describe()
    run = harness("diff", str(old_path), str(new_path), "--size", "4096", "--fail-on-slower")
    # the narrow table notes the judgement that does not count under it
    assert run.returncode == 1 and "] per clock: 1.000x, same" in run.stdout
    run = harness("diff", str(old_path), str(new_path), "--size", "4096", "--fail-on-slower",
                  "--per-clock", "--wide")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "per clock (counts): 1.000x, same" in run.stdout


def test_a_schema_1_run_and_its_schema_2_copy_are_the_same(tmp_path):
    """A schema-1 run and the same results written as schema 2 diff as the same, line by
    line; a changed kernel source is noted beside the verdict."""
    old = load_report(H100 / "run-20261122-230633.json")
    assert old.schema == 1
    path = tmp_path / "run-new.json"
    path.write_text(report_json(old.meta, old.results))
    new = load_report(path)
    assert new.schema == 3
    d = diff.diff(old, new)
    assert len(d.lines) == len(old.results)
    assert all(line.verdict == "same" and line.wall.ratio == pytest.approx(1.0)
               for line in d.lines)
    hashed = [r.with_parts(kernel=dataclasses.replace(r.kernel, source_sha256=c * 64))
              for r, c in zip(new.results, "abcd", strict=True)]
    moved = [r.with_parts(kernel=dataclasses.replace(r.kernel, source_sha256="f" * 64))
             for r in new.results]
    d = diff.diff(RunReport(new.meta, hashed, 2), RunReport(new.meta, moved, 2))
    assert all(line.verdict == "same" and line.notes[0].startswith("source changed")
               for line in d.lines)


# --- the command ----------------------------------------------------------------------------

def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, cwd=PROJECT_ROOT, timeout=120)


def test_fail_on_slower_fails_a_slower_kernel_whose_source_changed(tmp_path):
    old_path, new_path = committed_copy(tmp_path, factor=1.1, sha="e" * 64)
    run = harness("diff", str(old_path), str(new_path), "--fail-on-slower", "--wide")
    assert run.returncode == 1, run.stderr
    hoisted = next(row for row in run.stdout.splitlines() if row.startswith("| 10_hoisted ")
                   and "4096x4096x4096" in row)
    assert "| slower " in hoisted and "1.100x slower" in hoisted
    assert "source changed (cu/sgemm/10_hoisted.cu" in hoisted
    assert harness("diff", str(old_path), str(new_path)).returncode == 0
    # the same copy without the slowdown passes
    old_path, new_path = committed_copy(tmp_path, sha="e" * 64)
    assert harness("diff", str(old_path), str(new_path), "--fail-on-slower").returncode == 0


def test_diff_command(tmp_path):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(report_json({"gpu": "H100"}, [result(1.0, "a"), result(1.0, "b")]))
    new.write_text(report_json({"gpu": "H100"}, [result(1.0, "a"), result(1.5, "b", cold=False)]))
    run = harness("diff", str(old), str(new), "--wide")
    assert run.returncode == 0, run.stderr
    assert "| b " in run.stdout and "1.500x slower" in run.stdout
    assert "Verdict: ratio" in run.stdout
    narrow = harness("diff", str(old), str(new)).stdout
    b = next(line for line in narrow.splitlines() if line.startswith("b "))
    assert b.split()[4:7] == ["1.500", "0.3%", "slower"], b
    assert "[1] cold L2 against hot L2" in narrow
    assert max(map(len, narrow.splitlines())) <= 100
    assert harness("diff", str(old), str(new), "--fail-on-slower").returncode == 1
    assert harness("diff", str(old), str(old), "--fail-on-slower").returncode == 0
    data = json.loads(harness("diff", str(old), str(new), "--json").stdout)
    assert data["counts"]["slower"] == 1 and data["counts"]["same"] == 1
    assert data["judged_by"] == "wall time" and data["rule"] == diff.RULE
    b = data["lines"][1]
    assert b["verdict"] == "slower" and b["wall_time"]["ratio"] == pytest.approx(1.5)
    assert b["wall_time"]["threshold_pct"] == pytest.approx(1.0)
    assert b["per_clock"] is None and b["notes"] == ["cold L2 against hot L2"]
    assert b["text"].startswith("wall time (counts): 1.500x slower")
    bad = harness("diff", str(old), str(tmp_path / "missing.json"))
    assert bad.returncode == 2 and "cannot read the run report" in bad.stderr
