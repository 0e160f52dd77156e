"""Buffers kernels where GEMMs go beyond run and compare: ``harness tune`` (a [tune] space in a
buffers spec, screened offline, ranked by GB/s, pinned) and ``--gpus`` (several workers)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.bench.result import Result
from harness.errors import HarnessError, SpecError
from harness.kernels.registry import load_registry
from harness.kernels.spec import read_spec
from harness.run import tune

ROOT = Path(__file__).resolve().parents[1]
TUNED = ROOT / "cu" / "memory" / "sum_07_tuned.cu"


def _harness(*args: str, gpu: bool = False, timeout: float = 300):
    from tests.conftest import harness_env

    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True,
                          text=True, cwd=ROOT, env=harness_env(gpu=gpu), timeout=timeout)


def _sum07():
    (kernel,) = load_registry([], kind="buffers").select([str(TUNED)])
    return kernel


def test_a_buffers_spec_declares_a_tune_space_and_pinned_defaults(tmp_path):
    spec = read_spec(TUNED)
    assert spec.tune == {"THREADS": (256,), "UNROLL": (4, 8), "BPS": (2, 4), "WAVES": (1, 4),
                         "CHUNKED": (0, 1)}
    bad = tmp_path / "bad.cu"
    bad.write_text(TUNED.read_text().replace("CHUNKED = [0, 1]", "WARPS = [1]"))
    with pytest.raises(SpecError, match="tune.WARPS: WARPS is not declared in"):
        read_spec(bad)
    pinned = tmp_path / "pinned.cu"
    shutil.copy(TUNED, pinned)
    tune.pin(pinned, "sm_90", {"UNROLL": 8, "BPS": 4})
    spec = read_spec(pinned)
    assert spec.tuned == {"sm_90": {"UNROLL": 8, "BPS": 4}}
    (kernel,) = load_registry([], kind="buffers").select([str(pinned)])
    on90 = dict(kernel.for_arch("sm_90").params)
    assert (on90["UNROLL"], on90["BPS"], on90["CHUNKED"]) == (8, 4, 0)


def test_a_buffers_point_that_breaks_a_constraint_names_the_dims():
    (point,) = tune.points(_sum07(), {"THREADS": [512], "BPS": [8]})
    reason = tune.why_invalid(point, "sm_90", [(1 << 28, 1, 1)])
    assert reason == "N = 268435456 violates the kernel's constraint 'THREADS * BPS <= 2048'"


def _row(name: str, ms: float, n: int = 1 << 20, status: str = "pass") -> Result:
    """A sum's row at N = ``n`` timed at ``ms``."""
    from harness.bench.result import KernelInfo, MemoryFigures
    from harness.gpu.timing import Timing

    r = Result.of(KernelInfo(name, "sum_07_tuned.cu", "fp32", {}), n, 1, 1)
    memory = MemoryFigures({"N": n}, 4 * n, n, 3000.0, 2400.0, 3352.0)
    timing = Timing(ms, ms, ms, ms, ms, 10, True, *[float("nan")] * 4)
    return r.with_parts(memory=memory, timing=timing).ended(status, "")


def test_buffers_points_rank_by_gbps():
    """Two points of the sum at one size and one elsewhere: the faster first, the other size
    and a failure left out."""
    rows = [_row("slow", 2.0), _row("fast", 1.0), _row("other size", 0.1, n=1 << 22),
            _row("failed", 0.5, status="FAIL")]
    assert [r.kernel.name for r in tune.best(rows, (1 << 20, 1, 1), 5)] == ["fast", "slow"]


def test_the_index_headline_of_buffers_rows_is_in_gbps():
    from harness.report.index import _fastest

    rows = [_row("slow", 2.0, n=1 << 22), _row("fast", 1.0, n=1 << 22), _row("small", 0.001)]
    said = _fastest(rows, "best of {n} points")
    assert said == "best of 2 points at 4194304: fast 17 GB/s", said


def test_tune_screens_a_buffers_kernel_without_a_gpu():
    done = _harness("tune", str(TUNED), "--dry-run", "--size", "1<<28",
                    "--param", "THREADS=256,512", "--param", "BPS=4,8")
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())  # lines wrapped to the terminal's width
    assert "N = 268435456 violates the kernel's constraint" in said
    assert "24 points would be timed" in said


def test_tune_refuses_a_ceiling_kernel_and_a_bad_buffers_size():
    done = _harness("tune", "ptx/ceiling/mma_sync_bf16.ptx", "--dry-run")
    assert done.returncode == 2 and "harness tune takes GEMM and buffers kernels" in done.stderr
    done = _harness("tune", str(TUNED), "--dry-run", "--size", "64x64")
    assert done.returncode == 2 and "'64x64' gives 2 value(s) for the 1 dim(s) N" in done.stderr


def test_tune_takes_one_buffers_file():
    from harness.commands.tune import TuneOptions, plan
    from harness.run.runner import RunOptions

    kernels = load_registry([], kind="buffers").select(
        [str(TUNED), str(ROOT / "cu" / "memory" / "sum_05_onepass.cu")])
    options = TuneOptions(RunOptions(sizes=((1 << 20, 1, 1),)))
    with pytest.raises(HarnessError, match="kernels of several files"):
        plan(kernels, "sum_0*", options)
    assert len(plan(kernels[:1], "sum_07_tuned", options).candidates) == 16


# --- on a GPU ------------------------------------------------------------------------------

@pytest.mark.gpu
def test_tune_times_ranks_and_pins_a_buffers_kernel(tmp_path):
    """Four points of the sum at 2^22, each checked and timed against CUB, ranked by GB/s in
    the table and the report, the best pinned into a copy of the file."""
    kernel = tmp_path / "sum_07_tuned.cu"
    shutil.copy(TUNED, kernel)
    done = _harness("tune", str(kernel), "--size", "1<<22", "--param", "UNROLL=4",
                    "--param", "BPS=4,8", "--param", "CHUNKED=0,1", "--param", "WAVES=1",
                    "--budget-ms", "20",
                    "--min-ms", "5", "--report-dir", str(tmp_path), "--pin", gpu=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 points timed, 0 skipped" in done.stdout and "ranked at 4194304" in done.stdout
    assert "GB/s" in done.stdout
    pinned = read_spec(kernel).tuned
    (arch,) = pinned
    assert set(pinned[arch]) == {"THREADS", "UNROLL", "BPS", "WAVES", "CHUNKED"}
    (report,) = (tmp_path).glob("*/tune-sum_07_tuned*.md")
    text = report.read_text()
    assert "## Best 4 at 4194304" in text and "CUB DeviceReduce" in text


@pytest.mark.gpu
def test_two_workers_on_one_gpu_give_the_buffers_rows_of_one_worker(tmp_path):
    """--gpus 0,0: buffers kernels fed to two workers on one device give the rows, in the order
    and with the verdicts, of one worker; every worker measures its own ceiling."""
    from harness.commands import measure
    from harness.commands.place import Target
    from harness.gpu.driver import device_arch_name
    from harness.gpu.timing import TimingOptions
    from harness.run import gpus as gpu_choice
    from harness.run.runner import RunOptions

    arch = device_arch_name()
    chosen = load_registry([], kind="buffers").select(
        [str(ROOT / "cu" / "memory" / "sum_04_vec4.cu"), str(TUNED),
         str(ROOT / "examples" / "vector_add.cu")])
    timing = TimingOptions(warmup_ms=5.0, budget_ms=20.0, min_ms=5.0)
    options = RunOptions(sizes=((1 << 22, 1, 1), (1_000_003, 1, 1)), timing=timing)
    one = measure.run(chosen, options, Target("gpu", arch, "GPU 0"), tmp_path / "one.jsonl",
                      lambda _: None, own_sizes=False)
    lines: list[str] = []
    two = measure.run(chosen, options,
                      Target("gpu", arch, "GPUs 0, 0", slots=(gpu_choice.slot(0),) * 2),
                      tmp_path / "two.jsonl", lines.append, own_sizes=False)
    rows = [(r.kernel.name, r.size, r.status) for r in one.results]
    assert [(r.kernel.name, r.size, r.status) for r in two.results] == rows
    assert [s for _, _, s in rows] == ["pass"] * 6, [r.message for r in one.results]
    assert all(r.memory is not None and r.memory.ceiling_gbps > 0 and r.gbps > 0
               for r in two.results)
    assert any("over 2 GPUs (0, 0)" in line for line in lines)
