"""The Python API (harness.api): offline calls on the CPU, the no-GPU error with the GPU hidden
(any machine), and the GPU path in tests marked ``gpu``."""

import gc
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import FIXTURE_KERNELS, harness_env

import harness
from harness.api import Build, Builds, KernelFailed, Plans, Results
from harness.bench.result import (
    Baseline,
    CheckSummary,
    Comparison,
    KernelInfo,
    LaunchInfo,
    OccupancyInfo,
    Result,
)
from harness.compiler.offline import build_row
from harness.compiler.ptxas import Resources
from harness.errors import HarnessError, SpecError
from harness.gpu.timing import Timing
from harness.kernels.registry import PROJECT_ROOT, discover
from harness.kinds.gemm.plan import Plan, plan

GOOD = FIXTURE_KERNELS / "isolation" / "d_good.cu"
FAULT = FIXTURE_KERNELS / "isolation" / "a_fault.cu"
QUICK = {"budget_ms": 20, "min_ms": 5, "warmup_ms": 5, "quiet": True}


def python(code: str, gpu: bool = True) -> subprocess.CompletedProcess:
    """``python -c CODE`` from the project root (``gpu=False``: with every GPU hidden)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, cwd=PROJECT_ROOT, timeout=300, env=harness_env(gpu))


def test_import_loads_no_cuda_and_exports_the_api():
    proc = python("""
        import json, sys
        import harness
        print(json.dumps(sorted(m for m in sys.modules if m.startswith(("harness", "cuda",
                                                                         "numpy")))))
    """)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["harness"]
    assert harness.__version__ and {"kernel", "compare", "Results", "Build"} <= set(dir(harness))
    assert harness.Results is Results and harness.SpecError is SpecError
    from harness.cli import common
    from harness.errors import NoGpu

    assert harness.NoGpu is NoGpu is common.NoGpu  # errors.py, and still where it was
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        harness.nothing  # noqa: B018


def test_done_means_build_prints_registers_and_occupancy():
    """The issue's offline "done means", as typed."""
    proc = python("import harness; print(harness.kernel('cu/sgemm/10_hoisted.cu')"
                  ".build(arch='sm_90'))", gpu=False)
    assert proc.returncode == 0, proc.stderr
    (kernel,) = [k for k in discover() if k.name == "10_hoisted"]
    row = build_row(kernel, "sm_90")
    header, titles, _, line = proc.stdout.splitlines()[:4]
    assert "regs" in header and "(occ)" in titles and "limiter" in header
    assert max(map(len, proc.stdout.splitlines())) <= 100  # the terminal's width, as the CLI
    cells = line.split()
    assert cells[0] == "10_hoisted" and str(row["registers"]) in cells
    limiter = row["limiter"].replace("registers", "regs").replace("shared memory", "smem")
    assert f"({row['occupancy_pct']:.1f}%)" in line and limiter in line


def test_a_key_a_path_and_a_variant_name_the_registry_kernels():
    def named(handle):
        return [(k.name, k.spec.path.resolve(), k.params) for k in handle.kernels]

    registry = {k.name: k for k in discover()}
    k = harness.kernel("03_smem_tiled")
    assert k.variants == ("t16", "t32") and k.name == "03_smem_tiled"
    assert named(k) == [(name, registry[name].spec.path, registry[name].params)
                        for name in ("03_smem_tiled:t16", "03_smem_tiled:t32")]
    assert named(harness.kernel(PROJECT_ROOT / "cu/sgemm/03_smem_tiled.cu")) == named(k)
    assert harness.kernel("cu/sgemm/03_smem_tiled.cu:t32").names == ("03_smem_tiled:t32",)
    assert named(k.variant("t16")) == named(k)[:1]
    with pytest.raises(HarnessError, match="03_smem_tiled has no variant 't99'; its variants: "
                                           "t16, t32"):
        k.variant("t99")


def test_a_source_string_builds_and_its_folder_goes_with_the_handle():
    k = harness.kernel(source=GOOD.read_text(), name="mine")
    folder = k.path.parent
    assert k.names == ("mine",) and k.path.name == "mine.cu" and folder.is_dir()
    (build,) = k.build(arch="sm_90")
    assert build.ok and build.kernel == "mine" and build.registers > 0
    assert build.occupancy_pct > 0 and build.limiter
    child = k.variant  # a bound method keeps the handle; the handle keeps the folder
    del k
    gc.collect()
    assert folder.is_dir()
    del child
    gc.collect()
    assert not folder.exists()


def test_a_ptx_source_string_builds():
    ptx = (PROJECT_ROOT / "ptx/sgemm/03_smem_tiled_ptx.ptx").read_text()
    (build,) = harness.kernel(source=ptx, name="mine_ptx", suffix=".ptx").build(arch="sm_80")
    assert build.ok and build.registers > 0 and build.file == "mine_ptx.ptx", build


def test_a_source_without_a_spec_block_says_what_to_paste(tmp_path):
    text = ('extern "C" __global__ void mine_entry(int M, int N, int K, float alpha, '
            'const float* A, const float* B, float beta, float* C) {}\n')
    with pytest.raises(SpecError, match="no spec block") as caught:
        harness.kernel(source=text, name="nospec")
    message = str(caught.value)
    assert "/* harness" in message and 'entry = "mine_entry"' in message
    folder = Path(message.split(":", 1)[0]).parent
    assert folder.name.startswith("harness-source-") and not folder.exists()  # went with it
    # the CLI prints the same message for the same text in a file
    (tmp_path / "nospec.cu").write_text(text)
    proc = subprocess.run([sys.executable, "-m", "harness", "build", str(tmp_path / "nospec.cu")],
                          capture_output=True, text=True, cwd=PROJECT_ROOT, env=harness_env())
    assert proc.returncode == 2
    cli = proc.stderr.removeprefix("harness: error: ").rstrip("\n")
    assert cli.split(": ", 1)[1] == message.split(": ", 1)[1]


def test_an_unknown_key_names_the_closest():
    # the closest first (10_hoisted_small's names follow it)
    with pytest.raises(HarnessError, match=r"no kernel matches '10_hoistd'; closest: "
                                           r"10_hoisted[ ,].*\(see `harness list`"):
        harness.kernel("10_hoistd")


@pytest.mark.parametrize(("call", "message"), [
    (lambda: harness.kernel(), "pass a kernel file's path or registry key, or source="),
    (lambda: harness.kernel("01_naive", source="x"), "not both"),
    (lambda: harness.kernel(source="x", name="a/b"), "name 'a/b': expected a file stem"),
    (lambda: harness.kernel(source="x", suffix=".cuh"), r"suffix '.cuh': expected one of .cu"),
    (lambda: harness.kernel("0*"), "'0\\*' matches kernels of several files"),
    (lambda: harness.kernel("nowhere/my.cu"), "no kernel file nowhere/my.cu"),
    (lambda: harness.kernel("01_naive").build(arch="sm_70"), "unknown architecture 'sm_70'"),
    (lambda: harness.kernel("01_naive").build(carveout=150), "--carveout 150: expected a percent"),
    (lambda: harness.kernel("01_naive").run(sizes=["abc"]), "size 'abc' is not N or M,N,K"),
    (lambda: harness.kernel("01_naive").run(sizes=[]), "expected a list of one or more sizes"),
    (lambda: harness.kernel("01_naive").check(sizes=[(1, 2)]), r"size \(1, 2\): expected N"),
    (lambda: harness.kernel("01_naive").run(budget_ms=0), "--budget-ms 0: expected more than 0"),
    (lambda: harness.kernel("01_naive").run(min_ms=500), "--min-ms 500 is above --budget-ms 300"),
    (lambda: harness.kernel("01_naive").run(power=True, power_s=0.1), "--power-s 0.1: expected"),
    (lambda: harness.kernel("01_naive").check(timeout_s=-1), "--timeout-s -1: expected more"),
    (lambda: harness.kernel("01_naive").run(timing={"budget_ms": 0}), "--budget-ms 0: expected"),
    (lambda: harness.kernel("01_naive").run(timing={"budget": 1}), "timing: no option 'budget'"),
    (lambda: harness.compare(["01_naive", "02_coalesced"], timing={"rest": 0}, budget_ms=50),
     "timing= and budget_ms: pass the timing as TimingOptions"),
    (lambda: harness.compare("01_naive"), "compare takes a list of two or more kernels"),
    (lambda: harness.compare(["01_naive"]), r"compare needs at least two kernels; \['01_naive'\] "
                                            r"matched \['01_naive'\]"),
    (lambda: harness.compare(["01_naive", 3]), "3: expected a kernel handle"),
    (lambda: harness.compare([harness.kernel(source=GOOD.read_text(), name="01_naive"),
                              "01_naive"]), "two kernels are named '01_naive'"),
])
def test_bad_input_is_refused_before_a_gpu_is_looked_for(call, message):
    """The CLI's messages, raised before any GPU check: the same on a machine with a GPU."""
    with pytest.raises(HarnessError, match=message) as caught:
        call()
    assert not isinstance(caught.value, harness.NoGpu)


def test_a_report_folder_that_cannot_be_written_is_refused(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(HarnessError, match="--report-dir .*file is a file, not a folder"):
        harness.kernel("01_naive").run(report_dir=tmp_path / "file")


def test_plan_returns_the_battery():
    plans = harness.kernel("10_hoisted").plan()
    (kernel,) = [k for k in discover() if k.name == "10_hoisted"]
    assert isinstance(plans, Plans) and plans == [plan(kernel)]
    assert isinstance(plans[0], Plan) and len(plans[0].checks) > 10
    assert plans.to_rows() == [plans[0].to_json()]
    markdown = plans._repr_markdown_()
    assert markdown.startswith("```text\n10_hoisted: ") and markdown.endswith("```")
    first = "x".join(map(str, plans[0].checks[0].shape))
    assert first in str(plans) and plans._repr_html_().startswith("<pre>")


def test_build_records_render_and_convert_to_the_cli_rows():
    builds = harness.kernel("03_smem_tiled").build(arch="sm_90")
    assert isinstance(builds, Builds) and all(isinstance(b, Build) for b in builds)
    rows = json.loads(json.dumps(builds.to_rows()))
    cli = json.loads(subprocess.run(
        [sys.executable, "-m", "harness", "build", "03_smem_tiled", "--json"],
        capture_output=True, text=True, cwd=PROJECT_ROOT, env=harness_env(), check=True).stdout)
    assert [{**r, "cached": None} for r in rows] == [{**r, "cached": None} for r in cli]
    assert Build.from_row(cli[0]).to_dict() == cli[0]
    markdown = builds._repr_markdown_()
    assert markdown.splitlines()[0].startswith("| kernel ") and "03_smem_tiled:t32" in markdown
    assert builds._repr_html_().startswith("<table>") and "regs" in str(builds[0])
    assert builds.ok and "| 03_smem_tiled:t16" in builds[0]._repr_markdown_()


def test_a_build_that_cannot_launch_says_why():
    (build,) = harness.kernel(FIXTURE_KERNELS / "bad" / "big_smem.cu").build(arch="sm_90")
    assert build.status == "cannot launch" and not build.ok and build.blocks_per_sm == 0
    assert "- big_smem (sm_90): cannot launch: needs 240 KB shared memory" in str(build)


def timing(ms: float) -> Timing:
    return Timing(ms, ms * 0.99, ms * 1.01, ms * 0.98, ms * 1.05, 50, True, 1980.0, 1900.0,
                  1980.0, 3.0, "power cap")


def _results(mode: str) -> Results:
    info = KernelInfo("mine", "mine.cu", "fp32", {"TILE": 16})
    good = Result.of(info, 256, 256, 256).with_parts(
        resources=Resources(32, 2048), checks=CheckSummary(24, 24, 1.5e-7))
    if mode != "check":
        good = good.with_parts(
            launch=LaunchInfo(256, (16, 16, 1), 0), occupancy=OccupancyInfo(8, 8, 100.0, "warps"),
            timing=timing(0.01), baseline=Baseline("CUBLAS_COMPUTE_32F", timing(0.008)),
            comparison=Comparison("mine", 1.0, 0.99, 1.01, True) if mode == "compare" else None)
    good = good.ended("pass", "ok")
    fault = Result.of(KernelInfo("a_fault", "a_fault.cu", "fp32"), 256, 256, 256).ended(
        "fault", "kernel faulted, its CUDA context is lost: CUDA_ERROR_ILLEGAL_ADDRESS")
    return Results([good, fault], mode)


@pytest.mark.parametrize("mode", ["run", "check", "compare"])
def test_results_render_as_the_cli_tables_and_convert_to_rows(mode):
    results = _results(mode)
    rows = json.loads(json.dumps(results.to_rows()))
    assert [Result.from_json(r) for r in rows] == list(results)
    assert rows[1]["status"] == "fault" and rows[0]["kernel"]["params"] == {"TILE": 16}
    markdown = results._repr_markdown_()
    assert markdown.splitlines()[0].startswith("| kernel ")
    assert "Not passed:\n\n- a_fault 256x256x256: fault: kernel faulted" in markdown
    html = results._repr_html_()
    assert html.startswith("<table>") and "<pre>- a_fault 256x256x256: fault" in html
    text = str(results)
    assert "mine" in text and "fault" in text and repr(results) == text
    if mode == "check":
        assert "checks passed" in text and "24/24" in text
    if mode == "compare":
        assert "reference" in text and "speedup vs first" in text


def test_raise_for_status_names_what_did_not_pass():
    results = _results("run")
    assert not results.passed
    with pytest.raises(KernelFailed, match="a_fault 256x256x256: fault: kernel faulted") as c:
        results.raise_for_status()
    assert c.value.results is results and isinstance(c.value, HarnessError)
    passed = Results(results[:1], "run")
    assert passed.passed and passed.raise_for_status() is passed


def test_without_a_gpu_check_run_and_compare_say_so():
    """The no-GPU path with every GPU hidden, on any machine (see conftest.harness_env)."""
    proc = python("""
        import harness
        k = harness.kernel("01_naive")
        for call in (lambda: k.check(sizes=[256]), lambda: k.run(sizes=[256]),
                     lambda: harness.compare([k, "02_coalesced"], sizes=[256])):
            try:
                call()
            except harness.NoGpu as exc:
                print(exc)
    """, gpu=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 3, proc.stdout
    for line, what in zip(lines, (".check()", ".run()", "harness.compare()"), strict=True):
        assert line.startswith("no GPU here (") and f"): {what} needs one; " in line
        assert ".build() (registers, shared memory" in line and ".plan()" in line


def _fake_runner(calls: list):
    """A stand-in for harness.run.runner.run: records its call, streams and returns a passing
    result per kernel and size (what the worker would have measured)."""
    from harness.run.runner import RunRecord

    def fake(kernels, arch, options, jsonl_path, say, mode="run", **kw):
        calls.append({"kernels": [k.name for k in kernels], "arch": arch, "options": options,
                      "jsonl": jsonl_path, "mode": mode})
        record = RunRecord(device={"name": "NVIDIA H100 80GB HBM3", "sm_count": 132})
        jsonl_path.parent.mkdir(parents=True, exist_ok=True)
        for kernel in kernels:
            for size in options.sizes:
                result = Result.of(KernelInfo.of(kernel), *size).with_parts(
                    resources=Resources(32, 0), launch=LaunchInfo(256, (16, 16, 1), 0),
                    occupancy=OccupancyInfo(8, 8, 100.0, "warps"), checks=CheckSummary(9, 9, 0.0),
                    timing=timing(0.01), baseline=Baseline("CUBLAS_COMPUTE_32F", timing(0.008)),
                    comparison=Comparison(kernels[0].name, 1.0, 0.99, 1.01, True)
                ).ended("pass", "ok")
                record.results.append(result)
                with jsonl_path.open("a") as sink:
                    sink.write(json.dumps(result.to_json()) + "\n")
        return record

    return fake


def test_run_check_and_compare_hand_the_runner_the_cli_options(monkeypatch, tmp_path):
    """The GPU path up to the worker processes, on the CPU: the runner is replaced, the
    options it gets and the reports written from its results are the CLI's."""
    from harness import api

    calls = []
    from harness.commands.place import Target
    from harness.run import runner

    monkeypatch.setattr(api, "_target", lambda what: Target("NVIDIA H100 80GB HBM3", "sm_90",
                                                            "NVIDIA H100 80GB HBM3"))
    monkeypatch.setattr(runner, "run", _fake_runner(calls))
    k = harness.kernel("03_smem_tiled")
    results = k.run(sizes=[256, "512,256,128"], cold_l2=False, isolated=True, gap_ms=2,
                    budget_ms=50, carveout=50, blas_strict=True, quiet=True)
    call = calls[-1]
    assert call["mode"] == "run" and call["arch"] == "sm_90"
    assert call["kernels"] == ["03_smem_tiled:t16", "03_smem_tiled:t32"]
    options = call["options"]
    assert options.sizes == ((256, 256, 256), (512, 256, 128))
    assert not options.timing.cold_l2 and options.timing.isolated_gap_ms == 2
    assert options.timing.budget_ms == 50 and options.carveout_pct == 50 and options.strict_blas
    assert results.mode == "run" and results.report is None and len(results) == 4
    assert not call["jsonl"].exists()  # a temporary stream, gone with its folder

    from harness.gpu.timing import TimingOptions

    k.run(sizes=[256], timing={"budget_ms": 50, "cold_l2": False}, quiet=True)
    assert calls[-1]["options"].timing == TimingOptions(budget_ms=50, cold_l2=False)
    k.run(sizes=[256], timing=TimingOptions(isolated_gap_ms=2), quiet=True)
    assert calls[-1]["options"].timing.regime == "isolated"

    results = k.variant("t32").run(sizes=[256], report_dir=tmp_path, quiet=True)
    json_path, md_path = results.report
    assert json_path.parent == tmp_path / "h100" and json_path.name.startswith("run-")
    report = json.loads(json_path.read_text())
    assert report["meta"]["command"] == ("harness.kernel('03_smem_tiled').variant('t32')"
                                 ".run(sizes=['256x256x256'])")
    assert [r["kernel"]["name"] for r in report["rows"]] == ["03_smem_tiled:t32"]
    assert "# harness run: NVIDIA H100" in md_path.read_text()
    assert not list(tmp_path.rglob("*.jsonl"))

    checked = harness.kernel("01_naive").check(quiet=True)
    assert calls[-1]["mode"] == "check" and calls[-1]["options"].sizes == ((1024,) * 3,)
    assert checked.mode == "check" and checked.passed

    side = harness.compare([k.variant("t32"), "01_naive"], sizes=[256], report_dir=tmp_path,
                           quiet=True)
    assert calls[-1]["mode"] == "compare"
    assert calls[-1]["kernels"] == ["03_smem_tiled:t32", "01_naive"]
    assert side[0].sass and "FFMA" in side[0].sass  # the SASS mix, as the CLI adds it
    json_path, md_path = side.report
    assert json_path.name.startswith("compare-") and "## Side by side" in md_path.read_text()
    assert json.loads(json_path.read_text())["meta"]["command"].startswith(
        "harness.compare([\"harness.kernel('03_smem_tiled').variant('t32')\", '01_naive'], ")
    assert not list(tmp_path.rglob("*.jsonl"))


# --- the GPU path ----------------------------------------------------------------------------

@pytest.mark.gpu
def test_check_passes_a_correct_kernel():
    results = harness.kernel("01_naive").check(sizes=[256], quiet=True)
    assert results.mode == "check" and len(results) == 1 and results.passed, str(results)
    (result,) = results
    assert result.size == (256, 256, 256) and result.timing is None
    assert result.checks.passed == result.checks.total > 10


@pytest.mark.gpu
def test_a_fault_ends_its_worker_not_the_session():
    results = harness.kernel(FAULT).run(sizes=[256], **QUICK)
    (result,) = results
    assert result.status == "fault" and "ILLEGAL_ADDRESS" in result.message, result
    with pytest.raises(KernelFailed, match="a_fault 256x256x256: fault"):
        results.raise_for_status()
    after = harness.kernel("01_naive").check(sizes=[256], quiet=True)
    assert after.passed and after[0].status == "pass", str(after)


@pytest.mark.gpu
def test_run_and_compare_of_a_source_string_write_the_cli_reports(tmp_path):
    k = harness.kernel(source=GOOD.read_text(), name="api_good")
    results = k.run(sizes=[256], report_dir=tmp_path, **QUICK)
    assert results.passed and results[0].gflops > 0 and results[0].baseline_gflops > 0
    json_path, md_path = results.report
    assert json_path.parent.parent == tmp_path and json_path.name.startswith("run-")
    report = json.loads(json_path.read_text())
    assert [r["kernel"]["name"] for r in report["rows"]] == ["api_good"]
    assert "harness.kernel(source=" in report["meta"]["command"] and md_path.is_file()
    assert not list(tmp_path.rglob("*.jsonl"))  # the stream is removed once the JSON has it
    side = harness.compare([k, "01_naive"], sizes=[256], **QUICK)
    assert side.mode == "compare" and side.report is None and side.passed, str(side)
    assert [r.kernel.name for r in side] == ["api_good", "01_naive"]
    assert side[0].comparison.compared_to == "api_good" and side[1].sass
