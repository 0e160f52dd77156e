"""The command line as a user types it (``python -m harness``), with or without a GPU."""

import json
import subprocess
import sys

import pytest
from conftest import FIXTURE_KERNELS

from harness.build.compile import target_arch
from harness.gpu.driver import gpu_status
from harness.kernels.registry import PROJECT_ROOT, discover

BUILD_KEYS = {"kernel", "arch", "registers", "static_smem_bytes", "spill_store_bytes",
              "spill_load_bytes", "block_threads", "dynamic_smem_bytes", "blocks_per_sm",
              "occupancy_pct", "limiter"}


def harness(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, cwd=PROJECT_ROOT, timeout=600)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_list_shows_every_kernel():
    out = harness("list").stdout
    for kernel in discover():
        assert kernel.name in out
    assert "min arch" in out and "cu/sgemm/01_naive.cu" in out


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
    out = harness("occupancy", "03_smem_tiled:t32", "--arch", "sm_86").stdout
    assert "Block Limit Registers" in out and "Theoretical Occupancy" in out
    assert "on sm_86" in out
    data = json.loads(harness("occupancy", "01_naive", "--json", "--carveout", "50").stdout)
    assert data[0]["offline"]["carveout_pct"] == 50 and data[0]["kernel"] == "01_naive"


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


@pytest.mark.skipif(gpu_status()[0], reason="this machine has a GPU: the no-GPU path is not hit")
def test_run_without_gpu_says_so_and_builds():
    proc = harness("run")
    first, *rest = proc.stdout.splitlines()
    assert first.startswith("no GPU here (") and "offline build report for sm_90" in first
    assert "01_naive" in proc.stdout and "limiter" in proc.stdout
