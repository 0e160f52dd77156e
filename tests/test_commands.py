"""The command layer (harness/commands/) under the CLI and the API, on the CPU: the API and the
package import nothing from the CLI, and the in-process GPU commands (ceiling, energy, launch)
run end to end on a stand-in session, their reports and lines as the CLI printed them."""

from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace

import pytest
from conftest import harness_env

from harness.gpu.timing import PowerPass
from harness.kernels.registry import PROJECT_ROOT
from harness.kinds.ceiling.probe import CeilingResult


def test_the_api_and_the_package_import_nothing_from_the_cli():
    for path in ("harness/api.py", "harness/__init__.py", "harness/records.py"):
        assert "harness.cli" not in (PROJECT_ROOT / path).read_text(), path
    code = ("import sys, harness, harness.api, harness.commands.measure, harness.commands.tune, "
            "harness.commands.profile, harness.commands.energy, harness.commands.ceiling; "
            "print([m for m in sys.modules if m.startswith('harness.cli')])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=PROJECT_ROOT, env=harness_env(False), timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stderr


class _Stream:
    def __init__(self, log):
        self.log = log

    def synchronize(self, what=""):
        self.log.append(("synchronize", what))


class _Session:
    """A stand-in BenchSession: what the in-process commands ask of one."""

    log: list = []

    def __init__(self, *args, **kwargs):
        self.timing = args[0] if args else None
        self.stream = _Stream(self.log)
        self.device = SimpleNamespace(name="NVIDIA H100 80GB HBM3")
        self.timer = SimpleNamespace(power=lambda launch, seconds: PowerPass(
            600.0, seconds, 0.5, 4000, 1980.0, "power cap"))
        self.blas = SimpleNamespace(gemm=lambda *a, **k: self.log.append(("cublas",)))
        type(self).opened = self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        pass

    def load(self, kernel):
        return SimpleNamespace(kernel=kernel)

    def operands(self, kernel, m, n, k, seed):
        addr = SimpleNamespace(address=0)
        return SimpleNamespace(a=addr, b=addr, out=addr, layout_a="row", layout_c="row",
                               blas_fp8=None, poison_c=lambda stream: None, close=lambda: None)

    def facts(self):
        return {"name": "NVIDIA H100 80GB HBM3", "arch": "sm_90", "sm_count": 132,
                "l2_bytes": 50 << 20, "compute_capability": [9, 0], "clocks": {}}


@pytest.fixture
def stand_in(monkeypatch):
    """A GPU that is found, a session that launches nothing, checks that pass."""
    from harness.gpu import driver

    _Session.log = []
    monkeypatch.setattr(driver, "gpu_status", lambda: driver.GpuStatus("NVIDIA H100 80GB HBM3"))
    monkeypatch.setattr("harness.bench.session.BenchSession", _Session)
    monkeypatch.setattr("harness.kinds.gemm.session.GemmSession.open", _Session)
    monkeypatch.setattr("harness.kinds.gemm.checks.check_one", lambda gemm, stream, m, n, k, seed: [
        SimpleNamespace(passed=True, message="ok")] * 3)
    monkeypatch.setattr("harness.kinds.gemm.launches.launcher",
                        lambda gemm, ops, session: lambda: _Session.log.append(
                            ("launch", gemm.kernel.name)))
    return _Session.log


def test_ceiling_runs_each_precision_and_launch_shape(stand_in, monkeypatch, tmp_path, capsys):
    from harness import cli

    def measured(device, timer, precision, options, kernels, family):
        return CeilingResult(
            kernel=f"{family}_{precision}", file="ptx/ceiling/x.ptx", precision=precision,
            instruction="mma.sync", arch="sm_90", gflops=655000.0, median_ms=2.0, p20_ms=2.0,
            p80_ms=2.0, reps=100, cold_l2=False, sm_clock_mhz=1755.0, sm_clock_min_mhz=1755.0,
            sm_clock_max_mhz=1755.0, peak_gflops_at_clock=948879.0, power_w=699.0,
            pj_per_flop=1.07, clock_limits="power cap", pct_peak=69.0, blocks=528,
            blocks_per_sm=options.blocks_per_sm or 4, block_threads=128, iterations=15625,
            mma_per_iteration=16, flops_per_launch=2162688000000, flop_formula="2*16*8*16",
            registers=57)

    monkeypatch.setattr("harness.kinds.ceiling.probe.measure_ceiling", measured)
    code = cli.main(["ceiling", "--precision", "bf16", "--blocks-per-sm", "2",
                     "--blocks-per-sm", "4", "--budget-ms", "50", "--report-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0 and "written: " in out
    timing = _Session.opened.timing
    assert not timing.cold_l2 and timing.max_rel_se_pct == 0 and timing.budget_ms == 50
    (json_path,) = (tmp_path / "h100").glob("ceiling-*.json")
    report = json.loads(json_path.read_text())
    assert [r["blocks_per_sm"] for r in report["rows"]] == [2, 4]
    assert [launch["blocks_per_sm"] for launch in report["meta"]["launch"]] == [2, 4]
    assert report["meta"]["timing"]["l2"] == "hot (warm L2, no flush)"


def test_energy_measures_every_point_round_by_round(stand_in, tmp_path, capsys):
    from harness import cli

    code = cli.main(["energy", "01_naive", "--size", "256", "--seconds", "0.5", "--rounds", "2",
                     "--report-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 0 and "| 01_naive" in out and "passed (3 checks)" in out
    (json_path,) = (tmp_path / "h100").glob("kernel-energy-*.json")
    report = json.loads(json_path.read_text())
    assert [r["round"] for r in report["rows"]] == [0, 1]
    assert report["rows"][0]["power_w"] == 600.0 and report["rows"][0]["size"] == "256x256x256"
    assert report["meta"]["timing"]["l2"] == "hot (warm L2, no flush)"  # times nothing itself
    assert "each point run back to back for 0.5 s with warm L2, 2 rounds in turn" in (
        json_path.with_suffix(".md").read_text())


def test_launch_checks_then_launches_inside_the_profiler_range(stand_in, monkeypatch, capsys):
    from contextlib import contextmanager

    from harness import cli

    @contextmanager
    def profiler_range():
        stand_in.append(("start",))
        yield
        stand_in.append(("stop",))

    monkeypatch.setattr("harness.gpu.driver.profiler_range", profiler_range)
    assert cli.main(["launch", "01_naive", "--size", "256", "--repeats", "2"]) == 0
    inside = stand_in[stand_in.index(("start",)) + 1:stand_in.index(("stop",))]
    assert inside == [("launch", "01_naive"), ("launch", "01_naive"), ("cublas",),
                      ("cublas",), ("synchronize", "launches")]
    assert "launched 01_naive and cuBLAS 2 times each at 256x256x256 (checked first)" in (
        capsys.readouterr().err)
