import gzip
import json
import math
import subprocess

import pytest

from harness.bench.result import (
    Baseline,
    CheckSummary,
    Comparison,
    KernelInfo,
    LaunchInfo,
    OccupancyInfo,
    Result,
)
from harness.compiler.ptxas import Resources
from harness.gpu.timing import Timing
from harness.kernels.registry import PROJECT_ROOT
from harness.report import files, tables
from harness.report.reading import load_report

H100 = PROJECT_ROOT / "reports" / "h100"


def timing(ms: float) -> Timing:
    return Timing(ms, ms * 0.99, ms * 1.01, ms * 0.98, ms * 1.05, 50, True, 1980.0, 1900.0,
                  1980.0, 3.0, "power cap")


def passed(name: str = "03_smem_tiled:t32", ms: float = 11.1326) -> Result:
    info = KernelInfo(name, "cu/sgemm/03_smem_tiled.cu", "fp32", {"TILE": 32})
    return Result.of(info, 4096, 4096, 4096).with_parts(
        resources=Resources(38, 8192), launch=LaunchInfo(1024, (128, 128, 1), 0),
        occupancy=OccupancyInfo(2, 2, 100.0, "warps", 3.9),
        checks=CheckSummary(29, 29, 1.2e-7), timing=timing(ms),
        baseline=Baseline("CUBLAS_COMPUTE_32F", timing(2.7488)),
        peak_gflops_at_clock=66908.16).ended("pass", "ok")


FAULT = Result.of(KernelInfo("a_fault", "tests/kernels/isolation/a_fault.cu", "fp32"),
                  256, 256, 256).ended("fault", "kernel faulted: CUDA_ERROR_ILLEGAL_ADDRESS")


@pytest.mark.parametrize(
    ("name", "slug"),
    [("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
     ("NVIDIA A100-SXM4-40GB", "a100"), ("NVIDIA GeForce RTX 4090", "rtx-4090"),
     ("Some Card", "some-card")],
)
def test_gpu_slug(name, slug):
    assert files.gpu_slug(name) == slug


def test_figures_are_derived_from_the_timings():
    r = passed()
    assert r.gflops == pytest.approx(2 * 4096**3 / 11.1326e-3 / 1e9)
    assert r.pct_baseline == pytest.approx(100 * 2.7488 / 11.1326)
    assert r.pct_peak == pytest.approx(100 * r.gflops / 66908.16)
    assert r.pct_ceiling is None and math.isnan(r.pj_per_flop(r.timing))
    assert FAULT.gflops is None and FAULT.pct_baseline is None


def test_table_shows_numbers_failures_and_notes():
    noted = passed("reads_c").with_parts(
        checks=CheckSummary(29, 29, 1e-7, notes=("reads C when beta = 0",)))
    text = tables.table([passed(), FAULT])
    assert "12346" in text and "24.7" in text and "8192/0" in text and "1.2e-07" in text
    assert "fault" in text and "4096x4096x4096" in text and "notes" not in text
    assert "a_fault 256x256x256: fault: kernel faulted" in tables.failures([passed(), FAULT])
    assert "reads C when beta = 0" in tables.table([passed(), noted])


def test_write_run_round_trips_through_json(tmp_path):
    meta = files.metadata({"name": "NVIDIA H100 80GB HBM3", "sm_count": 132,
                           "l2_bytes": 50 << 20, "compute_capability": [9, 0],
                           "driver": "13.0", "clocks": {"max_sm_clock_mhz": 1980}},
                          ["harness", "run", "--size", "4096"],
                          {"cold_l2": True, "budget_ms": 300}, [(4096,) * 3],
                          [passed().kernel])
    json_path, md_path = files.write_run(meta, [passed(), FAULT], tmp_path / "h100" / "run-x")
    data = json.loads(json_path.read_text())
    assert data["schema"] == 3 and data["meta"]["gpu"] == "NVIDIA H100 80GB HBM3"
    assert data["meta"]["command"] == "harness run --size 4096"
    assert data["meta"]["git"]["commit"] and "dirty" in data["meta"]["git"]
    assert data["rows"][0]["metrics"]["gflops"] == pytest.approx(passed().gflops)
    assert data["rows"][0]["timing"]["median_ms"] == 11.1326
    assert load_report(json_path).results == [passed(), FAULT]
    md = md_path.read_text()
    assert "cold (flushed before every repetition)" in md and "| 03_smem_tiled:t32" in md
    assert "## Not passed" in md and "CUDA_ERROR_ILLEGAL_ADDRESS" in md
    assert "- git commit: " in md


def test_the_sweep_records_git_and_kernel_sources(tmp_path):
    from harness.kernels.registry import discover

    kernel = discover()[0]
    summary = files.write_sweep([{"agree": True}], 1, "H100", ["harness", "occupancy"],
                                tmp_path, kernels=[kernel])
    assert summary["git"]["commit"]
    assert summary["kernel_sources"][kernel.name]["sha256"] == kernel.source_sha256
    saved = json.loads((tmp_path / "occupancy-sweep.json").read_text())["summary"]
    assert saved["kernel_sources"] == summary["kernel_sources"]
    assert "- git commit: " in (tmp_path / "occupancy-sweep.md").read_text()
    with gzip.open(tmp_path / "occupancy-sweep.csv.gz", "rt") as f:
        assert f.read().startswith("agree")


def test_metadata_takes_kernels_or_their_infos():
    from harness.kernels.registry import discover

    kernel = discover()[0]
    meta = files.metadata({"name": "x"}, ["harness"], {}, (), [kernel])
    assert meta["kernel_sources"] == {kernel.name: {
        "file": KernelInfo.of(kernel).file, "sha256": kernel.source_sha256}}
    assert files.metadata({"name": "x"}, ["harness"], {}, (), [KernelInfo.of(kernel)]) \
        ["kernel_sources"] == meta["kernel_sources"]
    ceiling = discover(kind="ceiling")  # harness ceiling records its register-only kernels
    assert ceiling and files.kernel_sources(ceiling) == {
        k.name: {"file": f"ptx/ceiling/{k.name}.ptx", "sha256": k.source_sha256}
        for k in ceiling}


def test_compare_table_verdicts():
    def compared(name, speedup, p20, p80, noise):
        return passed(name).with_parts(
            comparison=Comparison("a", speedup, p20, p80, noise),
            occupancy=OccupancyInfo(2, 2, 50.0, "warps"),
            sass={"FFMA": 33, "LDS.128": 8, "BAR": 2})

    text = tables.compare_table([compared("a", 1.0, 1.0, 1.0, False),
                                 compared("b", 1.004, 0.998, 1.009, True),
                                 compared("c", 0.8, 0.79, 0.81, False), FAULT])
    lines = {line.split("|")[1].strip(): line for line in text.splitlines()[2:]}
    assert "reference" in lines["a"] and "within noise" in lines["b"]
    assert "slower" in lines["c"] and "0.800 (0.790-0.810)" in lines["c"]
    assert "FFMA:33 LDS.128:8 BAR:2" in lines["a"] and "fault" in lines["a_fault"]


def _markdown_table(md: str, first_header: str) -> str:
    lines = md.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first_header))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return "\n".join(lines[start:end])


@pytest.mark.parametrize("name", ["run-20261122-132342", "run-20261122-230540"])
def test_committed_runs_render_as_they_were_written(name):
    """Reports written before the schema had a version (flat rows) read back into the typed
    results and render the same table the run wrote then."""
    run = load_report(H100 / f"{name}.json")
    assert run.schema == 1 and all(isinstance(r, Result) for r in run.results)
    md = (H100 / f"{name}.md").read_text()
    # every row of then was sustained: the launches column shows only beside isolated ones
    assert all(r.timing.regime == "sustained" for r in run.results if r.timing)
    assert tables.table(run.results, fmt="github") == _markdown_table(md, "| kernel")


def test_committed_compare_renders_as_it_was_written():
    run = load_report(H100 / "compare-20261122-213437.json")
    md = (H100 / "compare-20261122-213437.md").read_text()
    assert tables.compare_table(run.results) == _markdown_table(md, "| kernel")
    assert tables.table(run.results, fmt="github") == _markdown_table(
        md[md.index("## Every result"):], "| kernel")


def test_a_report_from_a_newer_harness_is_refused(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"schema": 99, "meta": {}, "rows": []}))
    with pytest.raises(Exception, match="schema 99; this harness reads up to 3"):
        load_report(path)
    path.write_text("[1, 2]")
    with pytest.raises(Exception, match="is not a run report"):
        load_report(path)


def _checkout(path) -> str:
    """A git checkout of its own at ``path``, one commit of one tracked file; its full hash."""
    git = ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t",
           "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    (path / "tracked.txt").write_text("one\n")
    subprocess.run([*git, "add", "tracked.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], check=True)
    return subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def no_commit_given(monkeypatch):
    """git_state as it is where the environment names no commit (whatever this process has)."""
    monkeypatch.delenv("HARNESS_GIT_COMMIT", raising=False)
    monkeypatch.delenv("HARNESS_GIT_DIRTY", raising=False)


def test_a_checkout_of_its_own_reports_git_s_head_in_full(tmp_path, no_commit_given):
    head = _checkout(tmp_path)
    assert len(head) == 40 and files.git_state(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "tracked.txt").write_text("two\n")
    assert files.git_state(tmp_path) == {"commit": head, "dirty": True}


def test_a_copy_inside_another_checkout_reports_its_own_commit(tmp_path, monkeypatch,
                                                               no_commit_given):
    """The GPU-host workflow copies the tree into an ignored folder of another checkout (or
    beside a stale .git): the report names HARNESS_GIT_COMMIT when it is set, else git's HEAD
    only where the tree is a checkout of its own."""
    head = _checkout(tmp_path)
    copy = tmp_path / ".wt-copy"
    copy.mkdir()
    assert files.git_state(copy) == {"commit": "unknown", "dirty": None}
    monkeypatch.setenv("HARNESS_GIT_COMMIT", "abc123")
    monkeypatch.setenv("HARNESS_GIT_DIRTY", "0")
    assert files.git_state(copy) == {"commit": "abc123", "dirty": False}
    # the named commit wins over the checkout's own HEAD, which may be a stale copy's
    assert files.git_state(tmp_path) == {"commit": "abc123", "dirty": False}
    monkeypatch.setenv("HARNESS_GIT_DIRTY", "1")
    assert files.git_state(tmp_path)["dirty"] is True
    monkeypatch.setenv("HARNESS_GIT_COMMIT", head[:7])  # not expanded through another checkout
    assert files.git_state(copy)["commit"] == head[:7]


def test_an_abbreviated_commit_is_recorded_in_full_where_the_checkout_knows_it(
        tmp_path, monkeypatch, no_commit_given):
    head = _checkout(tmp_path / "repo")
    (tmp_path / "plain").mkdir()
    for given in (head[:7], head[:12].upper(), head):
        monkeypatch.setenv("HARNESS_GIT_COMMIT", given)
        assert files.git_state(tmp_path / "repo") == {"commit": head, "dirty": False}, given
    # no checkout to ask: recorded as given, the full hash included
    for given in (head[:7], head, "rung19"):
        monkeypatch.setenv("HARNESS_GIT_COMMIT", given)
        assert files.git_state(tmp_path / "plain") == {"commit": given, "dirty": False}
    # a prefix of no object in the checkout, and a name that is not a hash: as given
    objects = subprocess.run(["git", "-C", str(tmp_path / "repo"), "cat-file",
                              "--batch-all-objects", "--batch-check=%(objectname)"],
                             check=True, capture_output=True, text=True).stdout.split()
    unknown = next(c for c in "0123456789abcdef" if not any(o.startswith(c) for o in objects))
    for given in (unknown * 7, "HEAD", "master"):
        monkeypatch.setenv("HARNESS_GIT_COMMIT", given)
        assert files.git_state(tmp_path / "repo")["commit"] == given


def test_a_tensor_core_ladder_table_gives_the_ceiling_and_the_error_against_the_bound():
    """A compare whose rows record their checks' error as a share of the bound (FP8, issue 36)
    gets % of the ceiling and error / bound beside % of cuBLAS; an older report, without them,
    keeps its four columns."""
    from harness.report import ladder
    from harness.report.reading import load_report as load

    run = load(PROJECT_ROOT / "reports" / "h100" / "compare-fp8-block-693d7dc.json")
    rows = ladder.napkin_rows(run)
    text = ladder.table(rows, (4096, 4096, 4096))
    assert text.splitlines()[0].split("|")[5:7] == [" % ceiling   ", " error / bound   "]
    assert "| 20_wgmma_fp8:s4e64    | 1460866   | 107.2      | 68.2     | 74.8        | 0.23" \
        in text
    old = load(PROJECT_ROOT / "reports" / "h100" / "compare-fp8-798fb2e.json")
    assert "ceiling" not in ladder.table(ladder.napkin_rows(old), (4096, 4096, 4096))
