"""The pytest plugin (harness/pytest_plugin.py), as a user's project meets it: ``python -m
pytest`` run in a folder outside this project, the plugin loaded through its ``pytest11`` entry
point (``pip install -e .``).

Every run here hides the GPU (conftest.harness_env(gpu=False)), so that the kernel tests take
the no-GPU path (compile, launch limits, [budget]) on any machine. The GPU path is tested twice
at the end: its plumbing with a pretended GPU and a stand-in runner (any machine), and for real
(the ``gpu`` test)."""

import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from conftest import FIXTURE_KERNELS, harness_env

from harness.compiler.compile import cache_dir

pytest_plugins = ["pytester"]
COMPILE_CACHE = cache_dir()  # before pytester moves HOME: its runs share the warm cache
PROJECT = Path(__file__).resolve().parents[1]
NAIVE = PROJECT / "cu" / "sgemm" / "01_naive.cu"
TILED = PROJECT / "cu" / "sgemm" / "03_smem_tiled.cu"  # variants t16, t32
PTX_SYNTAX = FIXTURE_KERNELS / "classes" / "ptx_syntax.ptx"
BIG_SMEM = FIXTURE_KERNELS / "bad" / "big_smem.cu"
SMEM_200K = FIXTURE_KERNELS / "classes" / "smem_200k.cu"


def pytest_in(folder: Path, *args: str, gpu: bool = False) -> subprocess.CompletedProcess:
    """``python -m pytest ARGS`` run in ``folder`` (the GPU hidden unless ``gpu``)."""
    assert not folder.resolve().is_relative_to(PROJECT), "run outside the project"
    env = harness_env(gpu=gpu)
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=600)


def with_budget(source: Path, table: str) -> str:
    """``source``'s text with a ``[budget]`` table at the end of its spec block."""
    return source.read_text().replace("*/", f"[budget]\n{table}\n*/", 1)


def kernel_folder(tmp_path: Path, *files: Path) -> Path:
    folder = tmp_path / "kernels"
    folder.mkdir()
    for path in files:
        shutil.copy(path, folder / path.name)
    return folder


def collected(result: subprocess.CompletedProcess) -> list[str]:
    """The node ids ``--collect-only -q`` lists."""
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_the_plugin_is_installed_as_a_pytest11_entry_point():
    plugins = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert plugins.get("harness") == "harness.pytest_plugin", (
        "the pytest11 entry point is not installed: python3 -m pip install -e . --no-deps")


def test_one_test_per_kernel_and_variant_findings_without_traceback(tmp_path):
    folder = kernel_folder(tmp_path, NAIVE, TILED, PTX_SYNTAX, BIG_SMEM)
    listing = pytest_in(folder, "--harness-kernels", ".", "--collect-only", "-q")
    # two tests per kernel: its offline build, and its GPU check battery
    assert collected(listing) == [
        f"{key}::{test}" for key in (
            "01_naive.cu::01_naive", "03_smem_tiled.cu::03_smem_tiled:t16",
            "03_smem_tiled.cu::03_smem_tiled:t32", "big_smem.cu::big_smem",
            "ptx_syntax.ptx::ptx_syntax") for test in ("build", "check")
    ], listing.stdout + listing.stderr

    result = pytest_in(folder, "--harness-kernels", ".", "-q", "-ra")
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    # no GPU: the builds pass or fail, and no check passes: every one is skipped, with why
    assert "2 failed, 3 passed, 5 skipped" in out
    assert "SKIPPED [1] 01_naive.cu:1: not checked: no GPU (" in out, out
    assert "SKIPPED [2] 03_smem_tiled.cu:1: not checked: no GPU (" in out
    assert ("SKIPPED [1] big_smem.cu:1: not checked: the offline build failed (big_smem::build "
            "says why)") in out
    assert "ptx_syntax.ptx:1: not checked: the offline build failed (ptx_syntax::build" in out
    assert ("big_smem (sm_90): cannot launch: needs 240 KB shared memory per block (static 0 + "
            "dynamic 240 KB), sm_90 allows 227 KB") in out
    assert "ptx_syntax (sm_90): compile error: " in out
    assert f"{folder / 'ptx_syntax.ptx'}:16: error: Unknown symbol '%r1'" in out
    assert ("FAILED big_smem.cu::big_smem::build" in out
            and "FAILED ptx_syntax.ptx::ptx_syntax::build" in out)
    # the finding, not a traceback, and not the full linker log
    assert "Traceback" not in out and "pytest_plugin.py" not in out
    assert "full linker log" not in out
    # the GPU was hidden: the no-GPU path, said so once
    assert ("harness: 5 kernel test(s) built for sm_90 at 1024x1024x1024; no check battery "
            "(no GPU: ") in out and "the ::check tests skipped" in out


def test_a_kernel_over_its_budget_fails_with_the_budget_line(tmp_path):
    folder = kernel_folder(tmp_path)
    (folder / "fat.cu").write_text(with_budget(SMEM_200K, "max_smem_bytes = 65536\n"
                                                          "min_occupancy_pct = 25"))
    (folder / "lean.cu").write_text(with_budget(NAIVE, "max_registers = 255\n"
                                                       "max_spill_bytes = 0"))
    result = pytest_in(folder, "--harness-kernels", ".", "-q")
    out = result.stdout
    assert result.returncode == 1 and "1 failed, 1 passed, 2 skipped" in out, out + result.stderr
    assert ("fat (sm_90) is over its [budget]: smem bytes 204800 > max_smem_bytes 65536 (static "
            "0 + dynamic 204800 at 1024x1024x1024); occupancy 12.5% < min_occupancy_pct 25 "
            "(limited by shared memory)") in out
    assert "FAILED fat.cu::fat::build" in out


def test_the_size_and_arch_options_reach_the_build(tmp_path):
    folder = kernel_folder(tmp_path)
    (folder / "fat.cu").write_text(with_budget(SMEM_200K, "max_smem_bytes = 65536"))
    result = pytest_in(folder, "--harness-kernels", ".", "-q", "--harness-size", "256,512,64")
    assert "(static 0 + dynamic 204800 at 256x512x64)" in result.stdout, result.stdout
    # smem_200k needs sm_90: below its min_arch the test is skipped, at the kernel file
    result = pytest_in(folder, "--harness-kernels", ".", "-q", "-rs", "--harness-arch", "sm_80")
    assert result.returncode == 0 and "2 skipped" in result.stdout, result.stdout
    assert "fat.cu: needs sm_90 (min_arch), not built for sm_80" in result.stdout


def test_a_broken_spec_fails_its_own_file_and_the_others_run(tmp_path):
    folder = kernel_folder(tmp_path, NAIVE)
    (folder / "sub").mkdir()
    (folder / "sub" / "typo.cu").write_text(with_budget(SMEM_200K, "max_regs = 64"))
    (folder / "sub" / "no_spec.cu").write_text('extern "C" __global__ void k() {}\n')
    result = pytest_in(folder, "--harness-kernels", ".", "-q")
    out = result.stdout
    assert result.returncode == 1 and "2 failed, 1 passed, 1 skipped" in out, out + result.stderr
    assert "FAILED sub/typo.cu::typo" in out and "FAILED sub/no_spec.cu::no_spec" in out
    assert ("sub/typo.cu: spec: budget: unknown key(s) 'max_regs' (did you mean "
            "'max_registers'?); allowed keys: max_registers, max_spill_bytes, max_smem_bytes, "
            "min_occupancy_pct") in out
    assert "sub/no_spec.cu: no spec block" in out
    assert "Traceback" not in out


def test_without_the_option_nothing_extra_is_collected(tmp_path):
    folder = kernel_folder(tmp_path, NAIVE, BIG_SMEM)
    (folder / "test_mine.py").write_text("def test_one():\n    assert True\n")
    listing = pytest_in(folder, "--collect-only", "-q")
    assert collected(listing) == ["test_mine.py::test_one"], listing.stdout + listing.stderr
    result = pytest_in(folder, "-q")
    assert result.returncode == 0 and "1 passed in" in result.stdout
    assert "harness:" not in result.stdout


def test_pyproject_names_the_folders(tmp_path):
    kernel_folder(tmp_path, NAIVE, BIG_SMEM)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_mine.py").write_text("def test_one():\n    assert True\n")
    (tmp_path / "pyproject.toml").write_text('[tool.harness]\nkernels = ["kernels/"]\n')
    everything = pytest_in(tmp_path, "--collect-only", "-q")
    kernel_tests = [f"kernels/{key}::{test}" for key in ("01_naive.cu::01_naive",
                                                         "big_smem.cu::big_smem")
                    for test in ("build", "check")]
    assert collected(everything) == ["tests/test_mine.py::test_one", *kernel_tests], (
        everything.stdout)
    # paths on the command line choose, as for test files
    assert collected(pytest_in(tmp_path, "tests", "--collect-only", "-q")) == [
        "tests/test_mine.py::test_one"]
    assert collected(pytest_in(tmp_path, "kernels", "--collect-only", "-q")) == kernel_tests
    result = pytest_in(tmp_path, "-q")
    assert "1 failed, 2 passed, 2 skipped" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize(("setup", "args", "match"), [
    (None, ["--harness-kernels", "missing"],
     "--harness-kernels missing: expected a folder of kernel files (.cu, .ptx), found nothing"),
    (None, ["--harness-kernels", ".", "--harness-arch", "sm_75"],
     "harness plugin: unknown architecture 'sm_75': expected one of"),
    (None, ["--harness-kernels", ".", "--harness-size", "0"],
     "harness plugin: size '0' is not N or M,N,K with positive integers"),
    ('[tool.harness]\nkernel = ["kernels/"]\n', [],
     "[tool.harness]: unknown key(s) kernel; allowed keys: kernels, arch, size"),
    ('[tool.harness]\nkernels = "kernels/"\n', [],
     '[tool.harness]: kernels must be a list of folders, e.g. ["kernels/"], found'),
])
def test_bad_settings_are_usage_errors(tmp_path, setup, args, match):
    if setup:
        (tmp_path / "pyproject.toml").write_text(setup)
    result = pytest_in(tmp_path, *args)
    assert result.returncode == 4, result.stdout + result.stderr
    assert match in result.stderr


def test_testing_helpers_in_a_users_tests(tmp_path):
    kernel_folder(tmp_path, NAIVE)
    (tmp_path / "test_mine.py").write_text(
        "from harness.testing import assert_builds\n\n"
        "def test_fits():\n"
        "    row = assert_builds('kernels/01_naive.cu', max_spill_bytes=0)\n"
        "    assert row['registers'] > 0\n\n"
        "def test_on_gpu(harness_gpu):\n"
        "    raise AssertionError('ran without a GPU')\n")
    result = pytest_in(tmp_path, "-q", "-rs", "test_mine.py")
    out = result.stdout
    assert result.returncode == 0 and "1 passed, 1 skipped" in out, out + result.stderr
    assert "needs a GPU: " in out


def test_with_a_gpu_the_check_battery_decides(pytester, monkeypatch):
    """The GPU path's plumbing, on any machine: a GPU is pretended and the runner replaced, so
    what is asserted is what the plugin asks of ``harness check`` and makes of its results."""
    import harness.pytest_plugin as plugin
    import harness.run.runner as runner
    from harness.bench.result import KernelInfo, Result
    from harness.gpu.driver import GpuStatus

    calls = []

    def fake_run(kernels, arch, options, jsonl_path, say, mode="run"):
        calls.append(([k.name for k in kernels], arch, options.sizes, mode))
        say("[  1/1   0.1 s] a progress line")
        result = Result.of(KernelInfo.of(kernels[0]), *options.sizes[0])
        failed = kernels[0].name == "unwritten_half"
        result = (result.ended("FAIL", "unwritten: 131072 elements still hold the sentinel\n"
                                       "--- full log ---\nnot shown")
                  if failed else result.ended("pass", "ok"))
        return runner.RunRecord(results=[result])

    monkeypatch.setattr(runner, "run", fake_run)
    monkeypatch.setattr(plugin, "_probe_gpu",
                        lambda: (GpuStatus("NVIDIA H100 80GB HBM3"), "sm_90"))
    monkeypatch.setenv("HARNESS_CACHE_DIR", str(COMPILE_CACHE))
    for path in (NAIVE, BIG_SMEM, FIXTURE_KERNELS / "classes" / "unwritten_half.cu"):
        shutil.copy(path, pytester.path / path.name)
    result = pytester.runpytest("--harness-kernels", ".", "--harness-size", "512", "-q",
                                "-p", "no:cacheprovider")
    # 01_naive: built, checked; big_smem: its build fails, its check is skipped for that;
    # unwritten_half: built, its check fails
    result.assert_outcomes(passed=3, failed=2, skipped=1)
    # a kernel that fails offline never reaches the GPU
    assert calls == [(["01_naive"], "sm_90", ((512, 512, 512),), "check"),
                     (["unwritten_half"], "sm_90", ((512, 512, 512),), "check")]
    result.stdout.fnmatch_lines([
        "unwritten_half at 512x512x512 on sm_90: FAIL: unwritten: 131072 elements still hold "
        "the sentinel",
        "*harness: 3 kernel test(s) built for sm_90 at 512x512x512; the check battery ran on "
        "NVIDIA H100 80GB HBM3 (sm_90)"])
    assert "not shown" not in result.stdout.str() and "Traceback" not in result.stdout.str()


@pytest.mark.gpu
def test_with_a_gpu_the_check_battery_runs(tmp_path):
    folder = kernel_folder(tmp_path, NAIVE, FIXTURE_KERNELS / "classes" / "unwritten_half.cu")
    result = pytest_in(folder, "--harness-kernels", ".", "-q", gpu=True)
    out = result.stdout
    assert result.returncode == 1 and "1 failed, 3 passed" in out, out + result.stderr
    assert "FAILED unwritten_half.cu::unwritten_half::check" in out
    assert "unwritten_half at 1024x1024x1024 on sm_" in out and "unwritten" in out
    assert "the check battery ran on " in out
