"""The pytest plugin (harness/pytest_plugin.py) with buffers kernels (notes/buffers_kind.md):
their build test, their check test (the buffers check battery, no timing), the size read as
their dims; ceiling kernels skipped.

As in test_pytest_plugin.py, ``python -m pytest`` runs in a folder outside the project with the
GPU hidden (any machine), the GPU path's plumbing runs in-process with a pretended GPU and a
stand-in runner, and the ``gpu`` test runs the battery for real. The subprocesses import this
checkout (``PYTHONPATH``), whatever checkout ``pip install -e`` last named."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURE_KERNELS, harness_env

from harness.compiler.compile import cache_dir

pytest_plugins = ["pytester"]
COMPILE_CACHE = cache_dir()  # before pytester moves HOME: its runs share the warm cache
PROJECT = Path(__file__).resolve().parents[1]
VECTOR_ADD = PROJECT / "examples" / "vector_add.cu"  # reference in vector_add.py; N: 1<<24, 1<<28
DROPS_TAIL = FIXTURE_KERNELS / "wrong_memory" / "sum_drops_tail.cu"  # N: 1<<20; wrong
SOFTMAX = PROJECT / "cu" / "memory" / "softmax_02_online.cu"  # ROWS x COLS; smallest 65536x1024
CEILING = PROJECT / "ptx" / "ceiling" / "mma_sync_fp16.ptx"
NAIVE = PROJECT / "cu" / "sgemm" / "01_naive.cu"


def pytest_in(folder: Path, *args: str, gpu: bool = False) -> subprocess.CompletedProcess:
    """``python -m pytest ARGS`` run in ``folder`` (the GPU hidden unless ``gpu``)."""
    assert not folder.resolve().is_relative_to(PROJECT), "run outside the project"
    env = harness_env(gpu=gpu)
    env.pop("PYTEST_ADDOPTS", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT), env.get("PYTHONPATH")]))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=600)


def kernel_folder(tmp_path: Path, *files: Path) -> Path:
    """A folder of kernel files, each with its reference module where it has one."""
    folder = tmp_path / "kernels"
    folder.mkdir()
    for path in files:
        for source in (path, path.with_suffix(".py")):
            if source.exists():
                shutil.copy(source, folder / source.name)
    return folder


def collected(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_buffers_kernels_build_and_their_checks_skip_without_a_gpu(tmp_path):
    folder = kernel_folder(tmp_path, VECTOR_ADD, DROPS_TAIL, SOFTMAX, CEILING, NAIVE)
    listing = pytest_in(folder, "--harness-kernels", ".", "--collect-only", "-q")
    assert collected(listing) == [
        f"{key}::{test}" for key in (
            "01_naive.cu::01_naive", "mma_sync_fp16.ptx::mma_sync_fp16",
            "softmax_02_online.cu::softmax_02_online", "sum_drops_tail.cu::sum_drops_tail",
            "vector_add.cu::vector_add") for test in ("build", "check")
    ], listing.stdout + listing.stderr

    result = pytest_in(folder, "--harness-kernels", ".", "-q", "-rs")
    out = result.stdout
    assert result.returncode == 0 and "4 passed, 6 skipped" in out, out + result.stderr
    for name in ("softmax_02_online.cu", "sum_drops_tail.cu", "vector_add.cu"):
        assert f"SKIPPED [1] {name}:1: not checked: no GPU (" in out, out
    assert ("SKIPPED [2] mma_sync_fp16.ptx: a ceiling kernel: `harness ceiling` measures it; the "
            "plugin tests GEMM and buffers kernels") in out
    # each buffers kernel at the smallest of its spec's sizes, the GEMM at the default
    assert ("harness: 4 kernel test(s) built for sm_90 at 1024x1024x1024, buffers kernels at "
            "their dims (softmax_02_online 65536x1024, sum_drops_tail 1048576, vector_add "
            "16777216); no check battery (no GPU: ") in out
    assert "Traceback" not in out


def test_the_size_is_a_buffers_kernels_dims_where_it_fits(tmp_path):
    folder = kernel_folder(tmp_path, VECTOR_ADD, SOFTMAX, NAIVE)
    result = pytest_in(folder, "--harness-kernels", ".", "-q", "--harness-size", "1<<20")
    assert result.returncode == 0, result.stdout + result.stderr
    # N fits one dim; the GEMM is left at the default, softmax (two dims) at its own
    assert ("built for sm_90 at 1024x1024x1024, buffers kernels at their dims "
            "(softmax_02_online 65536x1024, vector_add 1048576)") in result.stdout
    result = pytest_in(folder, "--harness-kernels", ".", "--harness-size", "4096x1024",
                       "--collect-only")  # the header: not with -q
    assert ("built for sm_90 at 1024x1024x1024 (GEMMs; buffers kernels at 4096x1024 where it "
            "fits their dims, else the smallest of their spec's sizes)") in result.stdout
    result = pytest_in(folder, "--harness-kernels", ".", "-q", "--harness-size", "512,256,64",
                       "-k", "build")
    assert ("built for sm_90 at 512x256x64, buffers kernels at their dims (softmax_02_online "
            "65536x1024, vector_add 16777216)") in result.stdout, result.stdout
    result = pytest_in(folder, "--harness-kernels", ".", "--harness-size", "1<<")
    assert result.returncode == 4 and ("harness plugin: size '1<<' is not N or M,N,K with "
                                       "positive integers; nor a buffers kernel's dims, as "
                                       "1<<20 or 4096x1024") in result.stderr, result.stderr


def test_named_folders_with_test_paths_still_collect_every_kernel(tmp_path):
    """--harness-kernels names the folders: paths on the command line do not filter them (only
    the pyproject.toml folders are), with or without a size."""
    folder = kernel_folder(tmp_path, VECTOR_ADD)
    (folder / "test_mine.py").write_text("def test_one():\n    assert True\n")
    for extra in ([], ["--harness-size", "1<<20"]):
        listing = pytest_in(folder, "--harness-kernels", ".", "test_mine.py", "--collect-only",
                            "-q", *extra)
        assert collected(listing) == ["test_mine.py::test_one", "vector_add.cu::vector_add::build",
                                      "vector_add.cu::vector_add::check"], listing.stdout


def test_a_buffers_kernel_that_does_not_compile_fails_its_build(tmp_path):
    folder = kernel_folder(tmp_path, VECTOR_ADD)
    source = folder / "vector_add.cu"
    source.write_text(source.read_text().replace("x[i] + y[i]", "x[i] + y[i] +"))
    result = pytest_in(folder, "--harness-kernels", ".", "-q", "-rs")
    out = result.stdout
    assert result.returncode == 1 and "1 failed, 1 skipped" in out, out + result.stderr
    assert "vector_add (sm_90) at 16777216: compile error: " in out
    assert ("vector_add.cu:1: not checked: the offline build failed (vector_add::build says "
            "why)") in out
    assert "Traceback" not in out


def test_with_a_gpu_the_buffers_battery_decides(pytester, monkeypatch):
    """The GPU path's plumbing, on any machine: a GPU is pretended and the runner replaced; what
    is asserted is what the plugin asks of ``harness check`` and makes of its results."""
    import harness.pytest_plugin as plugin
    import harness.run.runner as runner
    from harness.bench.result import CheckSummary, KernelInfo, MemoryFigures, Result
    from harness.gpu.driver import GpuStatus

    calls = []
    failure = "at 1000193 (seed 5): out[0] = 12.5, expected 13.25 (bound 1e-4)"

    def fake_run(kernels, arch, options, jsonl_path, say, mode="run"):
        calls.append(([k.name for k in kernels], arch, options.sizes, mode))
        (size,) = options.sizes
        result = Result.of(KernelInfo.of(kernels[0]), *size).with_parts(
            memory=MemoryFigures({"N": size[0]}, 4 * size[0], size[0], 3000.0, 2900.0, 3350.0))
        if kernels[0].name == "sum_drops_tail":
            result = result.with_parts(checks=CheckSummary(3, 4, 0.5, finding="wrong",
                                                           failure=failure))
            result = result.ended("FAIL", failure + "\n--- full log ---\nnot shown")
        else:
            result = result.with_parts(checks=CheckSummary(4, 4, 0.0)).ended("pass", "")
        return runner.RunRecord(results=[result])

    monkeypatch.setattr(runner, "run", fake_run)
    monkeypatch.setattr(plugin, "_probe_gpu",
                        lambda: (GpuStatus("NVIDIA H100 80GB HBM3"), "sm_90"))
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(COMPILE_CACHE))
    for path in (VECTOR_ADD, VECTOR_ADD.with_suffix(".py"), DROPS_TAIL, NAIVE):
        shutil.copy(path, pytester.path / path.name)
    result = pytester.runpytest("--harness-kernels", ".", "-q", "-p", "no:cacheprovider",
                                "-k", "not 01_naive")
    result.assert_outcomes(passed=3, failed=1, deselected=2)
    # the check battery at the smallest spec size, as (N, 1, 1)
    assert calls == [(["sum_drops_tail"], "sm_90", ((1 << 20, 1, 1),), "check"),
                     (["vector_add"], "sm_90", ((1 << 24, 1, 1),), "check")]
    result.stdout.fnmatch_lines([
        f"sum_drops_tail at 1048576 on sm_90: FAIL: wrong: {failure}",
        "*harness: 2 kernel test(s) built for sm_90, buffers kernels at their dims "
        "(sum_drops_tail 1048576, vector_add 16777216); the check battery ran on NVIDIA H100 "
        "80GB HBM3 (sm_90)"])
    assert "not shown" not in result.stdout.str() and "Traceback" not in result.stdout.str()

    calls.clear()
    result = pytester.runpytest("--harness-kernels", ".", "-q", "-p", "no:cacheprovider",
                                "--harness-size", "1<<16", "-k", "vector_add")
    result.assert_outcomes(passed=2, deselected=4)
    assert calls == [(["vector_add"], "sm_90", ((1 << 16, 1, 1),), "check")]


@pytest.mark.gpu
@pytest.mark.gpu_shared
def test_with_a_gpu_the_buffers_battery_runs(tmp_path):
    folder = kernel_folder(tmp_path, VECTOR_ADD, DROPS_TAIL)
    result = pytest_in(folder, "--harness-kernels", ".", "-q", gpu=True)
    out = result.stdout
    assert result.returncode == 1 and "1 failed, 3 passed" in out, out + result.stderr
    assert "FAILED sum_drops_tail.cu::sum_drops_tail::check" in out
    assert "sum_drops_tail at 1048576 on sm_" in out and ": FAIL: wrong: " in out
    assert "the check battery ran on " in out and "Traceback" not in out
