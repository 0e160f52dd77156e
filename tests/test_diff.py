"""harness diff: two saved runs side by side, with a verdict from their spreads and clocks."""

import dataclasses
import json
import subprocess
import sys

import pytest

from harness.bench.result import (
    Baseline,
    Comparison,
    KernelInfo,
    Result,
    RunReport,
    load_report,
    report_json,
)
from harness.gpu.timing import Timing
from harness.kernels.registry import PROJECT_ROOT
from harness.report import diff

H100 = PROJECT_ROOT / "reports" / "h100"


def timing(ms: float, spread: float = 0.02, mhz: float = 1800.0, cold: bool = True,
           limits: str = "power cap") -> Timing:
    """A timing whose p20-p80 is ``spread`` of its median."""
    return Timing(ms, ms * (1 - spread / 2), ms * (1 + spread / 2), ms * 0.9, ms * 1.1, 50,
                  cold, mhz, mhz, mhz, 3.0, limits)


def result(ms: float, name: str = "k", size: int = 4096, sha: str = "a" * 64,
           precision: str = "bf16", params=None, status: str = "pass", **timing_args):
    info = KernelInfo(name, "cu/k.cu", precision, params or {"BM": 128}, source_sha256=sha)
    return Result.of(info, size, size, size).with_parts(
        timing=timing(ms, **timing_args),
        baseline=Baseline("CUBLAS_COMPUTE_32F", timing(0.2))).ended(status, "ok")


def report(*results, gpu="NVIDIA H100 80GB HBM3") -> RunReport:
    return RunReport({"gpu": gpu, "command": "harness run"}, list(results))


def verdict(old: Result, new: Result) -> diff.DiffLine:
    (line,) = diff.diff(report(old), report(new)).lines
    return line


def test_within_the_combined_spread_is_the_same():
    # 1.5% faster, spreads 2% and 2%: tolerance 2%
    line = verdict(result(1.0), result(1 / 1.015))
    assert line.verdict == "same" and line.ratio == pytest.approx(1.015)
    assert line.tolerance == pytest.approx(0.02) and line.why == ""


@pytest.mark.parametrize("new_ms, expected", [(0.9, "faster"), (1.1, "slower")])
def test_beyond_the_spread_is_faster_or_slower(new_ms, expected):
    line = verdict(result(1.0, spread=0.01), result(new_ms, spread=0.01))
    assert line.verdict == expected and line.why == ""


def test_a_change_the_clock_explains_is_ambiguous():
    # 10% faster at a 10% higher clock: the same per clock
    line = verdict(result(1.0, mhz=1600.0), result(1 / 1.1, mhz=1760.0))
    assert line.verdict == "ambiguous" and line.per_clock_ratio == pytest.approx(1.0)
    assert line.why == ("SM clock 1600 -> 1760 MHz: same per clock; by the ratio alone "
                        "faster")
    # the clock fell 10% and the time held: faster per clock, the same by time
    line = verdict(result(1.0, mhz=1800.0), result(1.0, mhz=1620.0))
    assert line.verdict == "ambiguous" and "faster per clock" in line.why
    # the clock moved, but not enough to change the verdict: it stands
    line = verdict(result(1.0, spread=0.01, mhz=1800.0), result(0.8, spread=0.01, mhz=1830.0))
    assert line.verdict == "faster"


@pytest.mark.parametrize("change, reason", [
    ({"cold": False}, "cold L2 against hot L2"),
    ({"sha": "b" * 64}, "kernel source changed (cu/k.cu: sha256 aaaaaaaaaa -> bbbbbbbbbb)"),
    ({"precision": "fp16"}, "precision bf16 against fp16"),
    ({"params": {"BM": 256}}, "parameters differ (BM 128 -> 256)"),
    ({"limits": "thermal"}, "clock held by power cap against thermal"),
])
def test_timings_not_taken_alike_are_ambiguous_and_say_why(change, reason):
    line = verdict(result(1.0, spread=0.01), result(0.8, spread=0.01, **change))
    assert line.verdict == "ambiguous"
    assert line.why == f"{reason}; by the ratio alone faster"


def test_what_does_not_make_a_difference_ambiguous():
    # an unknown hash (schema 1), a parameter the spec gained at its default, an unrecorded
    # clock limiter: none of them says the timings differ
    old = result(1.0, sha="", params={"BM": 128}, limits="")
    new = result(1.0, params={"BM": 128, "NOSTORE": 0})
    assert verdict(old, new).verdict == "same"


def test_interleaved_against_one_at_a_time_and_another_gpu():
    compared = result(1.0).with_parts(comparison=Comparison("k0", 1.0, 1.0, 1.0, True))
    assert "interleaved (compare) against one at a time" in verdict(compared, result(1.0)).why
    d = diff.diff(report(result(1.0)), report(result(1.0), gpu="NVIDIA A100"))
    assert d.conditions == ["another GPU (NVIDIA H100 80GB HBM3 against NVIDIA A100)"]
    assert d.lines[0].verdict == "ambiguous" and "another GPU" in d.lines[0].why


def test_rows_in_one_run_only_and_untimed_rows():
    old = report(result(1.0, "a"), result(1.0, "b"), result(1.0, "c", status="FAIL"))
    new = report(result(1.0, "a"), result(1.0, "c"), result(1.0, "d"))
    d = diff.diff(old, new)
    assert [(line.kernel, line.verdict) for line in d.lines] == [("a", "same"),
                                                                ("c", "not timed")]
    assert d.lines[1].why == "old FAIL, new pass"
    assert [r.kernel.name for r in d.only_old] == ["b"]
    assert [r.kernel.name for r in d.only_new] == ["d"]
    text = diff.text(d)
    assert "only in old: b at 4096x4096x4096" in text and "only in new: d at" in text
    assert "2 matched: 1 same, 1 not timed" in text and diff.RULE in text


def test_size_filter():
    old = report(result(1.0, size=2048), result(1.0, size=4096))
    new = report(result(0.5, size=2048), result(1.0, size=4096))
    d = diff.diff(old, new, (2048, 2048, 2048))
    assert [(line.size, line.verdict) for line in d.lines] == [((2048,) * 3, "faster")]


def test_committed_runs_hot_against_cold():
    """Two committed schema-1 runs: hot L2 (230540) against cold (230633)."""
    d = diff.diff(load_report(H100 / "run-20261122-230540.json"),
                  load_report(H100 / "run-20261122-230633.json"))
    assert {line.kernel for line in d.lines} == {"12_mma_tma_bf16:m256n128e",
                                                 "13_mma_persist_bf16:m256n128l3g8e"}
    assert all(line.verdict == "ambiguous" and line.why.startswith("hot L2 against cold L2")
               for line in d.lines)
    first = next(line for line in d.lines if line.kernel.startswith("12"))
    assert first.ratio == pytest.approx(460044 / 464924, rel=1e-4)
    assert len(d.only_old) == 3 and len(d.only_new) == 2


def test_diff_across_schemas_reads_the_same(tmp_path):
    """A schema-1 run and the same results written as schema 2 diff as the same, line by
    line; a schema-2 run whose kernel source changed says so."""
    old = load_report(H100 / "run-20261122-230633.json")
    assert old.schema == 1
    path = tmp_path / "run-new.json"
    path.write_text(report_json(old.meta, old.results))
    new = load_report(path)
    assert new.schema == 2
    d = diff.diff(old, new)
    assert len(d.lines) == len(old.results)
    assert all(line.verdict == "same" and line.ratio == pytest.approx(1.0) for line in d.lines)
    hashed = [r.with_parts(kernel=dataclasses.replace(r.kernel, source_sha256=c * 64))
              for r, c in zip(new.results, "abcd", strict=True)]
    changed = [r.with_parts(kernel=dataclasses.replace(r.kernel, source_sha256="f" * 64))
               for r in new.results]
    d = diff.diff(RunReport(new.meta, hashed, 2), RunReport(new.meta, changed, 2))
    assert all(line.verdict == "ambiguous" and "kernel source changed" in line.why
               for line in d.lines)


def harness(*args):
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, cwd=PROJECT_ROOT, timeout=120)


def test_diff_command(tmp_path):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(report_json({"gpu": "H100"}, [result(1.0, "a"), result(1.0, "b")]))
    new.write_text(report_json({"gpu": "H100"}, [result(1.0, "a"), result(1.5, "b")]))
    run = harness("diff", str(old), str(new))
    assert run.returncode == 0, run.stderr
    assert "| b " in run.stdout and "slower" in run.stdout and "Verdict: ratio" in run.stdout
    assert harness("diff", str(old), str(new), "--fail-on-slower").returncode == 1
    assert harness("diff", str(old), str(old), "--fail-on-slower").returncode == 0
    data = json.loads(harness("diff", str(old), str(new), "--json").stdout)
    assert data["counts"]["slower"] == 1 and data["counts"]["same"] == 1
    assert data["lines"][1]["ratio"] == pytest.approx(1 / 1.5)
    assert data["rule"] == diff.RULE
    bad = harness("diff", str(old), str(tmp_path / "missing.json"))
    assert bad.returncode == 2 and "cannot read the run report" in bad.stderr
