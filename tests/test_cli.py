"""The command line as a user types it (``python -m harness``), with or without a GPU: a
command's no-GPU path runs with the GPU hidden on any machine, its GPU path in a test marked
``gpu``."""

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
from conftest import FIXTURE_KERNELS, TESTS, harness_env

from harness.compiler.compile import compile_kernel, target_arch
from harness.kernels.registry import PROJECT_ROOT, discover

BUILD_KEYS = {"kernel", "arch", "registers", "static_smem_bytes", "spill_store_bytes",
              "spill_load_bytes", "block_threads", "dynamic_smem_bytes", "blocks_per_sm",
              "occupancy_pct", "limiter"}


def harness(*args, check=True, gpu=True):
    """``python -m harness ARGS``; ``gpu=False`` hides the GPU from it (its no-GPU path)."""
    proc = subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, cwd=PROJECT_ROOT, timeout=600, env=harness_env(gpu))
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_list_shows_every_file_once_and_every_key_on_asking():
    out = harness("list").stdout
    kernels = discover(kind=None)
    for kernel in kernels:
        assert kernel.spec.stem in out and (kernel.variant or "") in out
    assert "min arch" in out and "variants" in out
    # a row per file, not per variant (a row's cells wrap onto lines of their own)
    assert len([line for line in out.splitlines() if line[:1].strip()]) < len(kernels)
    assert max(len(line) for line in out.splitlines()) <= 100
    assert max(len(line) for line in harness("list", "--wide").stdout.splitlines()) > 100
    keys = harness("list", "--variants").stdout
    for kernel in kernels:
        assert kernel.name in keys


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89", "sm_90"])
def test_build_json(arch):
    proc = harness("build", "--arch", arch, "--json", check=False)
    rows = json.loads(proc.stdout)
    # exit status 1 exactly when some kernel cannot launch on this arch
    assert proc.returncode == int(any(r["status"] == "cannot launch" for r in rows)), proc.stderr
    kernels = {k.name: k for k in discover()}
    assert {r["kernel"] for r in rows} == set(kernels)
    for row in rows:
        if row["status"] == "skipped":  # a kernel for a newer arch (min_arch) is not built
            assert row["arch"] == arch and arch != "sm_90" and "min_arch" in row["message"], row
            continue
        # the compile target: the arch asked for, or sm_90a where min_arch says so
        assert row["arch"] == target_arch(kernels[row["kernel"]], arch), row
        assert BUILD_KEYS <= set(row), row
        if row["status"] == "cannot launch":  # tiles sized for sm_90's 227 KB
            assert arch != "sm_90" and "shared memory" in row["message"], row
            assert row["dynamic_smem_bytes"] > 99 * 1024 and row["blocks_per_sm"] == 0, row
            continue
        assert row["status"] == "ok", row
        assert 0 < row["blocks_per_sm"] and 0 < row["occupancy_pct"] <= 100


def test_build_table():
    out = harness("build", "03_smem_tiled").stdout
    assert "03_smem_tiled:t16" in out and "03_smem_tiled:t32" in out and "limiter" in out
    assert "01_naive" not in out


def test_occupancy_offline():
    out = harness("occupancy", "03_smem_tiled:t32", "--arch", "sm_86", gpu=False).stdout
    assert "Block Limit Registers" in out and "Theoretical Occupancy" in out
    assert "on sm_86" in out
    data = json.loads(harness("occupancy", "01_naive", "--json", "--carveout", "50",
                              gpu=False).stdout)
    assert data[0]["offline"]["carveout_pct"] == 50 and data[0]["kernel"] == "01_naive"
    assert data[0]["driver"].startswith("not queried: ")  # no GPU here (hidden)


@pytest.mark.gpu
def test_occupancy_asks_the_driver_on_a_gpu():
    data = json.loads(harness("occupancy", "01_naive", "--json", "--carveout", "50").stdout)
    (entry,) = data
    assert entry["offline"]["carveout_pct"] == 50 and entry["launch_problems"] == []
    driver = entry["driver"]
    assert isinstance(driver, dict), driver
    assert driver["agrees_with_offline"] and driver["blocks_per_sm"] > 0, entry


def test_build_refuses_a_block_the_arch_cannot_hold():
    proc = harness("--kernel-dir", str(FIXTURE_KERNELS / "bad"), "build", "big_smem",
                   "--arch", "sm_90", check=False)
    assert proc.returncode == 1
    assert "needs 240 KB shared memory per block" in proc.stdout
    assert "sm_90 allows 227 KB" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [(["run", "nope"], "no kernel matches 'nope'"),
     (["build", "--size", "0"], "is not N or M,N,K"),
     (["--kernel-dir", "/nonexistent", "list"], "kernel folder /nonexistent does not exist"),
     (["occupancy"], "name at least one KERNEL"),
     (["compare", "01_naive"], "compare needs at least two kernels"),
     (["run", "--power", "01_naive", "--power-s", "0.1"],
      "--power-s 0.1: expected seconds from 0.5 to 60"),
     (["ceiling", "--power", "--power-s", "100"],
      "--power-s 100: expected seconds from 0.5 to 60")],
)
def test_errors_are_one_clear_line(args, message):
    proc = harness(*args, check=False)
    assert proc.returncode == 2
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_run_without_gpu_says_so_and_builds():
    proc = harness("run", check=False, gpu=False)
    assert proc.returncode == 3 and "needs a GPU" in proc.stderr, proc.stderr
    first = " ".join(proc.stdout.split("\nkernel")[0].split())  # wrapped to 100 columns
    assert first.startswith("no GPU here (") and "offline build report for sm_90" in first
    assert "01_naive" in proc.stdout and "limiter" in proc.stdout


@pytest.mark.parametrize("args", [["compare", "01_naive", "02_coalesced"], ["tune", "10_hoisted"],
                                  ["ceiling"], ["energy", "01_naive"], ["launch", "01_naive"],
                                  ["occupancy", "--sweep"]])
def test_every_gpu_command_without_a_gpu_exits_3_in_one_line(args):
    proc = harness(*args, check=False, gpu=False)
    assert proc.returncode == 3, proc.stderr
    assert "no GPU here" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


# a command that asks the driver where it finds a GPU: without one (hidden), and with one (gpu)
WITH_AND_WITHOUT_GPU = [pytest.param(False, id="no-gpu"),
                        pytest.param(True, id="gpu", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("gpu", WITH_AND_WITHOUT_GPU)
def test_a_kernel_that_cannot_launch_fails_build_and_occupancy_alike(gpu):
    """Exit status 1 (a kernel that cannot launch), not 2: with a GPU, occupancy does not hand
    such a kernel to the driver either."""
    for command in ("build", "occupancy"):
        proc = harness("--kernel-dir", str(FIXTURE_KERNELS / "bad"), command, "big_smem",
                       "--arch", "sm_90", check=False, gpu=gpu)
        assert proc.returncode == 1, (command, proc.stdout, proc.stderr)
        assert "240 KB shared memory per block" in proc.stdout
    assert ("not queried: the kernel cannot launch" in proc.stdout) == gpu, proc.stdout


def test_occupancy_with_a_gpu_asks_the_driver_only_about_kernels_that_can_launch(monkeypatch,
                                                                                capsys):
    """The GPU path of ``harness occupancy`` on the CPU, with a stand-in session: a kernel that
    cannot launch (its block, its grid, its min_arch) exits 1 with the reason and never reaches
    the driver (LoadedGemm.prepare would refuse it: exit 2 before); one that can gets the
    driver's answer beside the offline one."""
    from harness import cli
    from harness.compiler.compile import compile_kernel as compile_

    asked, loaded = [], []

    class Session:
        device = SimpleNamespace(name="Stand-in H100", sm_count=132)

        def __init__(self, *args, arch="sm_90", **kwargs):
            self.arch = arch

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

        def load(self, kernel):
            loaded.append(kernel.name)
            kernel = kernel.for_arch(self.arch)

            def occupancy(m, n, k):
                asked.append(kernel.name)
                return {"driver_blocks_per_sm": 3, "waves_per_sm": 1.5, "agree": True}

            return SimpleNamespace(kernel=kernel, compiled=compile_(kernel, self.arch),
                                   occupancy=occupancy)

    from harness.gpu.driver import GpuStatus

    monkeypatch.setattr("harness.gpu.driver.gpu_status", lambda: GpuStatus("Stand-in H100"))
    monkeypatch.setattr("harness.bench.session.BenchSession", Session)
    # the stand-in is its own GEMM part (kinds/gemm/session.py): the GEMM kind loads on it
    monkeypatch.setattr("harness.kinds.gemm.session.gemm_session", lambda session: session)
    bad = ["--kernel-dir", str(FIXTURE_KERNELS / "bad")]
    for args, problem in [(["big_smem"], "needs 240 KB shared memory per block"),
                          (["03_smem_tiled:t16", "--size", "100000000"], BIG_GRID)]:
        assert cli.main([*bad, "occupancy", *args, "--json"]) == 1
        (entry,) = json.loads(capsys.readouterr().out)
        assert entry["driver"] == "not queried: the kernel cannot launch" and not asked
        assert any(problem in p for p in entry["launch_problems"]), entry
    assert cli.main(["occupancy", "01_naive", "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    assert asked == ["01_naive"] and entry["launch_problems"] == []
    assert entry["driver"] == {"gpu": "Stand-in H100", "blocks_per_sm": 3, "waves_per_sm": 1.5,
                               "agrees_with_offline": True}
    # a kernel whose min_arch the GPU lacks is not even loaded
    monkeypatch.setattr("harness.bench.session.BenchSession",
                        lambda *a, **k: Session(arch="sm_80"))
    loaded.clear()
    assert cli.main(["occupancy", "12_mma_tma_bf16:m256n128e"]) == 1
    assert not loaded and "cannot launch: needs sm_90 (min_arch in 12_mma_tma_bf16.ptx); sm_80 " \
        "cannot run it" in capsys.readouterr().out


def test_energy_points_build_with_their_knobs(tmp_path, monkeypatch):
    from harness.commands.params import parse_setting, with_knobs
    from harness.kernels.registry import select

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    (base,) = select(discover(), ["12_mma_tma_bf16:m256n128e"])
    kernel = with_knobs(base, parse_setting("NOLOAD=1,NOSTORE=1"))
    assert kernel.name == "12_mma_tma_bf16:m256n128e+NOLOAD=1,NOSTORE=1"
    assert dict(kernel.params)["NOLOAD"] == 1 and dict(kernel.params)["NOSTORE"] == 1
    assert compile_kernel(kernel, "sm_90").resources.spill_store_bytes == 0


def test_noload_with_tma_is_refused_where_the_copies_cannot_stop(tmp_path, monkeypatch):
    from harness.commands.params import with_knobs
    from harness.errors import CompileError
    from harness.kernels.registry import select

    monkeypatch.setenv("HARNESS_CACHE_DIR", str(tmp_path))
    (base,) = select(discover(), ["13_mma_persist_bf16:m256n128l3g8e"])
    with pytest.raises(CompileError, match="set PERSIST = 0 and CLUSTER = 1"):
        compile_kernel(with_knobs(base, {"NOLOAD": 1}), "sm_90")


@pytest.mark.parametrize("args, message", [
    (["energy", "12_mma_tma_bf16:m256n128e", "--knob", "NOSTORE"], "expected NAME=INT"),
    (["energy", "12_mma_tma_bf16:m256n128e", "--knob", "NOPE=1"], "has no parameter NOPE"),
    (["energy", "no_such_kernel"], "no kernel matches 'no_such_kernel'"),
    (["energy", "12_mma_tma_bf16:m256n128e", "--seconds", "0.1"], "expected 0.5 to 60 seconds"),
    (["launch", "01_naive", "--param", "NOPE=1"], "has no parameter NOPE"),
    (["launch", "01_naive", "--repeats", "0"], "--repeats 0: expected at least 1"),
])
def test_energy_and_launch_refuse_bad_input_before_the_gpu(args, message):
    proc = harness(*args, check=False)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr


BIG_GRID = ("grid (6250000, 6250000, 1) at 100000000x100000000x100000000: y = 6250000 exceeds "
            "65535")


@pytest.mark.parametrize(("command", "gpu"), [
    pytest.param("build", False, id="build"),
    pytest.param("occupancy", False, id="occupancy-no-gpu"),
    pytest.param("occupancy", True, id="occupancy-gpu", marks=pytest.mark.gpu)])
def test_a_grid_over_the_limits_cannot_launch(command, gpu):
    proc = harness(command, "03_smem_tiled:t16", "--size", "100000000", check=False, gpu=gpu)
    assert proc.returncode == 1, proc.stderr
    assert BIG_GRID in proc.stdout and "Traceback" not in proc.stderr


def test_tune_skips_points_whose_grid_does_not_fit():
    proc = harness("tune", "09_cp_async", "--size", "100000000", "--dry-run", gpu=False)
    words = " ".join(proc.stdout.split())  # the reasons wrap to fit 100 columns
    assert "y = 781250 exceeds 65535" in words and "0 points would be timed" in words
    assert max(map(len, proc.stdout.splitlines())) <= 100


def test_run_without_gpu_reports_what_cannot_launch_at_the_sizes_asked():
    # a kernel that cannot launch fails a GPU run too (launch error): exit 1, not 3 (no GPU)
    proc = harness("run", "03_smem_tiled:t16", "--size", "1024", "--size", "100000000",
                   check=False, gpu=False)
    assert proc.returncode == 1, proc.stderr
    assert "offline build report for sm_90 at 100000000x100000000x100000000" in proc.stdout
    failures = [line for line in proc.stdout.splitlines() if line.startswith("- ")]
    assert failures == [f"- 03_smem_tiled:t16 at 100000000x100000000x100000000: cannot launch: "
                        f"{BIG_GRID}: sm_90 allows x 2147483647, y 65535, z 65535 (a smaller "
                        "size, or a grid formula that puts the largest block count in x)"]
    assert "Traceback" not in proc.stderr


def test_run_without_gpu_gives_each_failure_one_line_with_its_own_size(tmp_path):
    broken = FIXTURE_KERNELS / "isolation" / "c_broken.cu"
    good = FIXTURE_KERNELS / "isolation" / "d_good.cu"
    proc = harness("run", str(broken), str(good), "--size", "100", "--size", "1100000,16,16",
                   "--size", "2000000,16,16", check=False, gpu=False)
    assert proc.returncode == 1, proc.stderr  # a compile error is a failure, not "no GPU"
    failures = [line for line in proc.stdout.splitlines() if line.startswith("- ")]
    assert failures[0] == ("- c_broken: compile error: "
                           f"{broken}:10: error: expected an expression")
    assert [line.split(": cannot launch:")[0] for line in failures[1:]] == [
        "- d_good at 1100000x16x16", "- d_good at 2000000x16x16"]
    assert "y = 68750 exceeds 65535" in failures[1] and "y = 125000 exceeds" in failures[2]
    assert "3 failure(s) found offline" in proc.stderr and "Traceback" not in proc.stderr


NOT_A_FOLDER = PROJECT_ROOT / "README.md"


@pytest.mark.parametrize(("args", "message"), [
    (["ptx", "01_naive"], "'01_naive' is CUDA C++ (cu/sgemm/01_naive.cu), which has no PTX "
                          "macros: `harness sass KERNEL --listing`"),
    (["ptx", "03_smem_tiled_ptx", "--arch", "sm_75"], "argument --arch: invalid choice"),
    (["tune", "01_naive"], "01_naive declares no [tune] space"),  # before the GPU is looked for
    (["tune", "10_hoisted", "--arch", "sm_99"], "unknown architecture 'sm_99'"),
    (["tune", "10_hoisted", "--dry-run", "--jobs", "0"], "--jobs 0: expected at least 1"),
    (["tune", "10_hoisted", "--dry-run", "--top", "0"], "--top 0: expected at least 1"),
    (["occupancy", "01_naive", "--carveout", "150"], "--carveout 150: expected a percent from "
                                                     "0 to 100"),
    (["run", "01_naive", "--carveout", "-1"], "--carveout -1: expected a percent from 0 to 100"),
    (["build", "--size", "1,2"], "size '1,2' is not N or M,N,K with positive integers"),
    (["occupancy", "01_naive", "--size", "0"], "size '0' is not N or M,N,K"),
    (["run", "--size", "-4"], "size '-4' is not N or M,N,K"),
    (["compare", "01_naive", "02_coalesced", "--size", "0"], "size '0' is not N or M,N,K"),
    (["build", "--size", "4096,4096,2147483648"], "K = 2147483648 exceeds 2147483647: the GEMM "
                                                  "ABI passes M, N and K as int"),
    (["run", "01_naive", "--budget-ms", "-5"], "--budget-ms -5: expected more than 0"),
    (["run", "01_naive", "--budget-ms", "nan"], "--budget-ms nan: expected more than 0"),
    (["compare", "01_naive", "02_coalesced", "--budget-ms", "0"], "--budget-ms 0: expected"),
    (["run", "01_naive", "--timeout-s", "0"], "--timeout-s 0: expected more than 0"),
    (["run", "01_naive", "--warmup-ms", "-1"], "--warmup-ms -1: expected at least 0"),
    (["run", "01_naive", "--min-ms", "50", "--budget-ms", "10"], "--min-ms 50 is above "
                                                                 "--budget-ms 10"),
    (["ceiling", "--blocks-per-sm", "0"], "--blocks-per-sm 0: expected at least 1"),
    (["ceiling", "--launch-ms", "0"], "--launch-ms 0: expected more than 0"),
    (["launch", "01_naive", "--gap-ms", "-1"], "--gap-ms -1: expected at least 0"),
    (["run", "01_naive", "--report-dir", f"{NOT_A_FOLDER}/reports"],
     f"--report-dir {NOT_A_FOLDER}/reports: {NOT_A_FOLDER} is a file, so"),
    (["occupancy", "--sweep", "--report-dir", str(NOT_A_FOLDER)],
     f"--report-dir {NOT_A_FOLDER}: {NOT_A_FOLDER} is a file, not a folder"),
    (["run", "01_naive", "--json", str(PROJECT_ROOT / "cu")], "a folder; expected the path of "
                                                              "a JSON-lines file"),
    (["run", "01_naive", "--json", f"{NOT_A_FOLDER}/run.jsonl"], f"{NOT_A_FOLDER} is a file"),
    (["--kernel-dir", str(NOT_A_FOLDER), "list"],
     f"kernel folder {NOT_A_FOLDER} is a file, not a folder: pass the folder that holds it "
     f"(--kernel-dir {PROJECT_ROOT})"),
    (["build", "cu/sgemm/03_smem_tiled.cu:t64"], "cu/sgemm/03_smem_tiled.cu has no variant "
                                                 "'t64'; its variants: t16, t32"),
    (["build", "03_smem_tiled:t64"], "03_smem_tiled has no variant 't64'; its variants: t16, "
                                     "t32"),
    (["build", "cu/sgemm/nothere.cu:t16"], "no kernel file cu/sgemm/nothere.cu"),
    (["report", str(NOT_A_FOLDER)], "cannot read the run report"),
    (["list", "--no-builtin"], "unrecognized arguments: --no-builtin (--kernel-dir and "
                               "--no-builtin go before the command"),
    (["build", "--arch"], "harness build: error: argument --arch: expected one argument"),
    ([], "the following arguments are required: command"),
])
def test_bad_input_is_one_line_with_exit_status_2(args, message):
    proc = harness(*args, check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


def test_exit_statuses_are_in_the_help():
    out = harness("--help").stdout
    for status in ("0 when", "1 when", "2 for bad input", "3 when the command needs a GPU",
                   "4 when the GPU, its driver or a CUDA library failed", "130 when interrupted"):
        assert status in " ".join(out.split()), status


def test_a_file_that_cannot_be_written_is_one_line_not_a_traceback(monkeypatch, capsys):
    from harness import cli
    from harness.cli import kernels as kernel_commands

    def unwritable(args):
        raise PermissionError(13, "Permission denied", "/somewhere/report.md")

    monkeypatch.setattr(kernel_commands, "_list", unwritable)
    assert cli.main(["list"]) == 2
    assert capsys.readouterr().err == "harness: error: Permission denied: /somewhere/report.md\n"


def test_a_device_error_in_this_process_has_its_own_exit_status(monkeypatch, capsys):
    """A CUDA call that fails in the harness's own process is not bad input (2): it exits 4,
    with the error in one line; other harness errors still exit 2."""
    from harness import cli
    from harness.cli import kernels as kernel_commands
    from harness.errors import CudaError, DeviceError, HarnessError

    def faults(args):
        raise CudaError("cuStreamSynchronize", "CUDA_ERROR_ILLEGAL_ADDRESS",
                        "an illegal memory access was encountered", "launches")

    monkeypatch.setattr(kernel_commands, "_list", faults)
    assert cli.main(["list"]) == 4
    assert capsys.readouterr().err == (
        "harness: error: cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal "
        "memory access was encountered (launches)\n")
    monkeypatch.setattr(kernel_commands, "_list",
                        lambda args: (_ for _ in ()).throw(DeviceError("cublasGemmEx failed")))
    assert cli.main(["list"]) == 4
    monkeypatch.setattr(kernel_commands, "_list",
                        lambda args: (_ for _ in ()).throw(HarnessError("bad")))
    assert cli.main(["list"]) == 2


# records, at the end of collection, each test's fixtures and gpu marker, selected or not
GPU_AUDIT = """
import json, os

deselected = []


def pytest_deselected(items):
    deselected.extend(items)


def pytest_collection_finish(session):
    def row(item):
        return {"nodeid": item.nodeid, "fixtures": list(getattr(item, "fixturenames", ())),
                "gpu": item.get_closest_marker("gpu") is not None}

    with open(os.environ["GPU_AUDIT_JSON"], "w") as f:
        json.dump({"selected": [row(i) for i in session.items],
                   "deselected": [row(i) for i in deselected]}, f)
"""


def collect_gpu_tests(folder, tmp_path, *options) -> dict:
    """``pytest --collect-only -m gpu`` of ``folder`` in a fresh process: the tests selected
    and deselected, each with its fixtures and whether it carries the gpu marker."""
    (tmp_path / "gpu_audit.py").write_text(GPU_AUDIT)
    out = tmp_path / "audit.json"
    # the audit plugin, and the harness where it is not installed (run from the tree's root)
    path = [str(tmp_path), str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]
    env = {**os.environ, "GPU_AUDIT_JSON": str(out),
           "PYTHONPATH": os.pathsep.join(filter(None, path))}
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu",
                           "-p", "gpu_audit", "-p", "no:cacheprovider", *options, str(folder)],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=600)
    assert out.exists(), proc.stdout + proc.stderr
    return json.loads(out.read_text())


def test_pytest_m_gpu_selects_every_test_that_takes_the_device_fixture(tmp_path):
    # a module another change leaves unimportable fails the suite by itself; audit the rest
    audit = collect_gpu_tests(TESTS, tmp_path, "--continue-on-collection-errors")
    missed = [t["nodeid"] for t in audit["deselected"] if "device" in t["fixtures"]]
    assert not missed, f"tests that take the device fixture but `pytest -m gpu` leaves out: " \
                       f"{missed}"
    assert all(t["gpu"] for t in audit["selected"])
    selected = {t["nodeid"] for t in audit["selected"]}
    assert {"tests/test_clocks.py::test_power_pass_after_a_timing",
            "tests/test_cli.py::test_occupancy_asks_the_driver_on_a_gpu"} <= selected


def test_conftest_marks_a_test_that_takes_the_device_fixture_without_saying_so(tmp_path):
    """The marker comes from conftest.py, not from each test remembering it: an unmarked test
    that takes ``device``, directly or through another fixture, is selected by ``-m gpu``."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "conftest.py").write_text((TESTS / "conftest.py").read_text())
    (project / "pytest.ini").write_text("[pytest]\nmarkers =\n    gpu: needs a GPU\n")
    (project / "test_sample.py").write_text(
        "import pytest\n\n\n"
        "@pytest.fixture\ndef stream(device):\n    return device\n\n\n"
        "def test_direct(device):\n    pass\n\n\n"
        "def test_through_a_fixture(stream):\n    pass\n\n\n"
        "def test_no_gpu():\n    pass\n")
    audit = collect_gpu_tests(project, tmp_path, "--strict-markers")
    assert sorted(t["nodeid"] for t in audit["selected"]) == [
        "test_sample.py::test_direct", "test_sample.py::test_through_a_fixture"]
    assert [t["nodeid"] for t in audit["deselected"]] == ["test_sample.py::test_no_gpu"]
